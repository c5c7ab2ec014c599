#include "control/control.hpp"

#include "common/config_map.hpp"
#include "common/pins.hpp"
#include "common/slots.hpp"
#include "common/text.hpp"
#include "core/units.hpp"
#include "setup/attach.hpp"
#include "setup/netlink.hpp"
#include "setup/state.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

namespace pspxdp::control {

std::vector<std::string> attached_devices() {
    std::vector<std::string> out;
    DIR *d = opendir(common::kPinRoot);
    if (!d) return out;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.' || e->d_type != DT_DIR) continue;
        out.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

namespace {

using common::errno_text;

// Iterates the keys of any map; fn(key) returns false to stop.
template <class K, class F> int for_each_key(int fd, F fn) {
    K key{}, next{};
    const K *prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        key = next;
        prev = &key;
        if (!fn(key)) return 0;
    }
    return errno == ENOENT ? 0 : -errno;
}

} // namespace

Result<Device> Device::open(const std::string &dev, Access access) {
    return open_as(dev, access, nullptr);
}

Result<Device> Device::open_locked(const common::DevLock &held) {
    if (held.dev().empty()) return err("internal: opening a device under a lock that holds nothing");
    return open_as(held.dev(), Access::Change, &held);
}

Result<Device> Device::open_as(const std::string &dev, Access access,
                               const common::DevLock *held) {
    auto paths = common::paths_for(dev); // refuses a name no device can have
    if (!paths) return paths.failure();
    Device d;
    d.dev_ = dev;
    d.paths_ = *paths;
    d.access_ = access;
    if (access != Access::Read && !held) {
        // Only an attached DEV has a lock file: taking the lock of one that
        // is not attached would leave files behind.
        if (::access(paths->state.c_str(), F_OK) != 0 && errno == ENOENT &&
            ::access(paths->pin_dir.c_str(), F_OK) != 0)
            return refuse(dev + " is not attached (pspxdp attach " + dev + ")");
        // Create::No: a detach that ran while we waited removed the lock
        // file (and maybe /run/pspxdp): not attached, and nothing recreated.
        using common::DevLock;
        auto lock = DevLock::acquire(*paths, DevLock::Wait::Yes, DevLock::Create::No);
        if (!lock && lock.exit_code() == 2 && ::access(paths->state.c_str(), F_OK) == 0)
            return refuse(paths->lock + " is gone (removed by hand?): pspxdp detach " + dev +
                          " and attach again");
        if (!lock) return lock.failure();
        d.lock_.emplace(std::move(lock.value()));
    }
    // Attached here: name, ifindex and network namespace as attach recorded
    // them (under the lock for a change: a detach that ran while we waited
    // removed the state).
    if (auto st = setup::check_here(*paths); !st) return refuse(st.error());
    using common::Need;
    const common::Access how = access == Access::Read ? common::Access::Read : common::Access::Write;
    struct Want {
        Fd *fd;
        const char *name;
        uint32_t key, value;
        Need need;
    };
    const Want want[] = {
        {&d.class_config_, "class_config", 4, sizeof(pspxdp_class_config), Need::Required},
        {&d.pacer_state_, "pacer_state", 4, sizeof(pspxdp_pacer_state), Need::Required},
        {&d.pacer_stats_, "pacer_stats", 4, sizeof(pspxdp_class_counters), Need::Required},
        {&d.filters_, "filters", 4, sizeof(pspxdp_filter), Need::Required},
        {&d.filter_entries_, "filter_entries", sizeof(pspxdp_filter_key),
         sizeof(pspxdp_filter_entry), Need::Required},
        {&d.filter_shapes_, "filter_shapes", 4, sizeof(pspxdp_filter_shape_slot), Need::Required},
        {&d.filter_state_, "filter_state", 4, sizeof(pspxdp_filter_state), Need::Required},
        // Counters: a missing one prints as zeros.
        {&d.filter_stats_, "filter_stats", 4, sizeof(pspxdp_filter_stats), Need::Optional},
        {&d.class_stats_, "class_stats", 4, sizeof(pspxdp_class_tc_stats), Need::Optional},
        {&d.daemon_stats_, "daemon_stats", 4, sizeof(pspxdp_daemon_stats), Need::Optional},
        {&d.tc_stats_, "tc_stats", 4, sizeof(pspxdp_tc_counters), Need::Optional},
        {&d.xdp_stats_, "xdp_stats", 4, sizeof(pspxdp_xdp_counters), Need::Optional},
    };
    for (const Want &w : want) {
        auto fd = common::open_pinned_map(d.paths_, w.name, w.key, w.value, how, w.need);
        if (!fd) return fd.failure();
        *w.fd = std::move(fd.value());
    }
    return d;
}

Result<void> Device::require_change() const {
    if (access_ == Access::Read) return err("internal: " + dev_ + " was opened read-only");
    return {};
}

Result<pspxdp_pacer_state> Device::state() const {
    uint32_t key = 0;
    pspxdp_pacer_state st{};
    if (bpf_map_lookup_elem(pacer_state_.get(), &key, &st) != 0)
        return err(dev_ + ": read pacer_state: " + errno_text(errno));
    return st;
}

Result<uint32_t> Device::mtu() const {
    // open() checked that dev_ here is the attached device (name, ifindex,
    // network namespace).
    auto link = setup::get_link(dev_);
    if (!link) return err(dev_ + ": " + link.error());
    return link->mtu;
}

Result<bool> Device::class_exists(uint32_t classid) const {
    pspxdp_class_config cfg{};
    if (bpf_map_lookup_elem(class_config_.get(), &classid, &cfg) == 0) return true;
    if (errno == ENOENT) return false;
    return err(dev_ + ": read class_config: " + errno_text(errno));
}

Result<std::vector<std::pair<ClassSpec, uint32_t>>> Device::class_specs_with_slots() const {
    auto all = common::read_class_configs(class_config_.get());
    if (!all) return err(dev_ + ": " + all.error());
    std::vector<std::pair<ClassSpec, uint32_t>> out;
    out.reserve(all->size());
    for (const auto &e : *all) out.emplace_back(ClassSpec::from_config(e.classid, e.config), e.config.slot);
    std::sort(out.begin(), out.end(),
              [](const auto &a, const auto &b) { return a.first.classid < b.first.classid; });
    return out;
}

Result<std::vector<ClassSpec>> Device::class_specs() const {
    auto with = class_specs_with_slots();
    if (!with) return with.failure();
    std::vector<ClassSpec> out;
    out.reserve(with->size());
    for (auto &[spec, slot] : *with) out.push_back(std::move(spec));
    return out;
}

Result<std::vector<ClassInfo>> Device::classes() const {
    std::map<uint32_t, ClassInfo> by_id;
    auto configs = common::read_class_configs(class_config_.get());
    if (!configs) return err(dev_ + ": " + configs.error());
    for (const auto &e : *configs) {
        ClassInfo &ci = by_id[e.classid];
        ci.classid = e.classid;
        ci.configured = true;
        ci.config = e.config;
    }

    if (class_stats_.valid()) {
        // Only classes TC has seen have an entry: few, one by one.
        const int sfd = class_stats_.get();
        int rc = for_each_key<uint32_t>(sfd, [&](uint32_t key) {
            pspxdp_class_tc_stats sum{};
            if (!common::percpu_sum(sfd, &key, sum)) return true;
            ClassInfo &ci = by_id[key];
            ci.classid = key;
            ci.tc = sum;
            return true;
        });
        if (rc) return err(dev_ + ": read class_stats: " + errno_text(rc));
    }

    // pacer_stats[slot], the class on the slot and its state. A deleted
    // class still draining shows up on its old slot.
    auto slots = common::PacerStatsView::of(pacer_stats_.get());
    if (!slots) return err(dev_ + ": " + slots.error());
    const pspxdp_class_counters *all = slots->all();
    for (auto &[id, ci] : by_id) {
        const uint32_t slot = ci.config.slot;
        if (!ci.configured || !slot || slot >= PSPXDP_MAX_CLASSES ||
            pspxdp_classid_raw(all[slot].classid) != id)
            continue;
        ci.pacer = all[slot];
        ci.state = all[slot].state;
        ci.served = all[slot].state == PSPXDP_SLOT_SERVED;
    }
    for (uint32_t s = 1; s < PSPXDP_MAX_CLASSES; ++s) {
        if (all[s].state != PSPXDP_SLOT_DRAINING) continue;
        const uint32_t id = pspxdp_classid_raw(all[s].classid);
        ClassInfo &ci = by_id[id];
        if (ci.configured) continue; // re-added meanwhile
        ci.classid = id;
        ci.pacer = all[s];
        ci.state = all[s].state;
    }
    std::vector<ClassInfo> out;
    out.reserve(by_id.size());
    for (auto &[id, ci] : by_id) out.push_back(ci);
    return out;
}

Result<DeviceCounters> Device::counters() const {
    DeviceCounters d;
    const uint32_t zero = 0;
    common::percpu_sum(tc_stats_.get(), &zero, d.tc);
    common::percpu_sum(xdp_stats_.get(), &zero, d.xdp);
    if (daemon_stats_.valid())
        d.have_daemon = bpf_map_lookup_elem(daemon_stats_.get(), &zero, &d.daemon) == 0;
    return d;
}

Result<Config> Device::config() const {
    auto st = state();
    if (!st) return st.failure();
    auto specs = class_specs();
    if (!specs) return specs.failure();
    auto fl = filters();
    if (!fl) return fl.failure();
    Config c;
    if (st->line_rate_bps) c.line_rate_bps = st->line_rate_bps;
    c.default_classid = pspxdp_classid_raw(st->default_classid);
    c.classes = std::move(specs.value());
    for (const auto &f : *fl) c.filters.push_back(ConfigFilter{f, 0});
    return c;
}

// ---- pacer_state and class_config writes

Result<void> Device::update_pacer_state(const std::optional<uint32_t> &default_classid,
                                        const std::optional<uint64_t> &line_rate_bps) {
    if (auto r = require_change(); !r) return r;
    // The daemon writes its heartbeat in place: write only our fields, in
    // place too, then the generation that tells it to re-read.
    auto v = common::MapView::of(pacer_state_.get(), sizeof(pspxdp_pacer_state), true);
    if (!v) return err(dev_ + ": " + v.error());
    auto *st = v->as<pspxdp_pacer_state>();
    if (default_classid) {
        __u32 raw = *default_classid;
        __atomic_store_n(reinterpret_cast<__u32 *>(&st->default_classid), raw, __ATOMIC_RELEASE);
    }
    if (line_rate_bps) __atomic_store_n(&st->line_rate_bps, *line_rate_bps, __ATOMIC_RELEASE);
    __atomic_fetch_add(&st->config_gen, 1, __ATOMIC_RELEASE);
    return {};
}

Result<void> Device::write_classes(const std::vector<uint32_t> &ids,
                                   const std::vector<pspxdp_class_config> &values) {
    if (ids.empty()) return {};
    // One syscall for the lot (10,000 classes in milliseconds); element by
    // element where the kernel has no batch update for the map.
    uint32_t count = uint32_t(ids.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
    if (bpf_map_update_batch(class_config_.get(), ids.data(), values.data(), &count, &opts) == 0)
        return {};
    const int e = errno;
    if (e != EINVAL && e != ENOTSUP && e != EOPNOTSUPP)
        return err(dev_ + ": write class_config: " + errno_text(e) +
                   (e == E2BIG || e == ENOSPC || e == ENOMEM ? " (class_config is full)" : ""));
    for (size_t i = count; i < ids.size(); ++i)
        if (bpf_map_update_elem(class_config_.get(), &ids[i], &values[i], BPF_ANY) != 0)
            return err(dev_ + ": write class_config: " + errno_text(errno));
    return {};
}

Result<void> Device::delete_classes(const std::vector<uint32_t> &ids) {
    for (uint32_t id : ids) {
        if (bpf_map_delete_elem(class_config_.get(), &id) != 0 && errno != ENOENT)
            return err(dev_ + ": delete from class_config: " + errno_text(errno));
        // Its TC counters go with it, as tc's do with a class (a frame in
        // flight may count once more; a re-added class starts from zero).
        if (class_stats_.valid()) bpf_map_delete_elem(class_stats_.get(), &id);
    }
    return {};
}

// ---- classes

Result<void> Device::class_put_many(Put how, const std::vector<ClassSpec> &given) {
    if (auto r = require_change(); !r) return r;
    // A class given twice: the last one counts (in its place among the others).
    std::map<uint32_t, size_t> last;
    for (size_t i = 0; i < given.size(); ++i) last[given[i].classid] = i;
    std::vector<ClassSpec> specs;
    for (size_t i = 0; i < given.size(); ++i)
        if (last[given[i].classid] == i) specs.push_back(given[i]);

    auto current = class_specs_with_slots();
    if (!current) return current.failure();
    std::map<uint32_t, uint32_t> slot_of; // configured classes and their slots
    for (const auto &[spec, slot] : *current) slot_of[spec.classid] = slot;
    for (const ClassSpec &spec : specs) {
        const std::string name = "class " + format_classid(ClassId::from_raw(spec.classid));
        if ((spec.classid & 0xffff) == 0)
            return refuse("class id " + format_classid(ClassId::from_raw(spec.classid)) + ": minor 0 names a qdisc, not a class");
        if (spec.paced() && spec.rate_bps == 0)
            return refuse(name + ": a paced class needs a rate above 0");
        const bool exists = slot_of.count(spec.classid);
        if (how == Put::Add && exists)
            return refuse(name + " already exists on " + dev_ + " (pspxdp class change or set)");
        if (how == Put::Change && !exists) return refuse(name + " does not exist on " + dev_);
    }

    auto st = state();
    if (!st) return st.failure();
    // The device's classes with these replaced, these last: a sum that does
    // not fit names the class that tips it over.
    std::vector<ClassSpec> all;
    for (const auto &[spec, slot] : *current)
        if (!last.count(spec.classid)) all.push_back(spec);
    all.insert(all.end(), specs.begin(), specs.end());
    auto mtu_bytes = mtu();
    if (!mtu_bytes) return mtu_bytes.failure();
    if (auto r = check_rates(all, st->line_rate_bps, dev_, *mtu_bytes); !r) return r;

    std::optional<common::SlotAllocator> slots;
    std::vector<uint32_t> ids;
    std::vector<pspxdp_class_config> values;
    for (const ClassSpec &spec : specs) {
        uint32_t slot = slot_of.count(spec.classid) ? slot_of[spec.classid] : 0;
        if (!slot) {
            if (!slots) {
                auto a = common::SlotAllocator::open(class_config_.get(), pacer_stats_.get());
                if (!a) return a.failure();
                slots.emplace(std::move(a.value()));
            }
            auto s = slots->allocate();
            if (!s) return s.failure();
            slot = *s;
        }
        ids.push_back(spec.classid);
        values.push_back(spec.to_config(slot));
    }
    if (auto r = write_classes(ids, values); !r) return r;
    return bump_config_gen();
}

Result<void> Device::class_del(uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    auto exists = class_exists(classid);
    if (!exists) return exists.failure();
    if (!*exists) return refuse("class " + format_classid(ClassId::from_raw(classid)) + " does not exist on " + dev_);
    auto st = state();
    if (!st) return st.failure();
    if (pspxdp_classid_raw(st->default_classid) == classid)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) + " is the default class of " + dev_ +
                      " (pspxdp default " + dev_ + " ANOTHER first)");
    auto fl = filters();
    if (!fl) return fl.failure();
    size_t used = 0;
    std::string first;
    for (const auto &f : *fl) {
        if (f.classid.raw() != classid) continue;
        if (!used++) first = format_filter(f);
    }
    if (used)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) + " is used by " + std::to_string(used) +
                      (used == 1 ? " filter" : " filters") + " (\"" + first +
                      "\"): delete them first");
    if (auto r = delete_classes({classid}); !r) return r;
    return bump_config_gen();
}

Result<void> Device::set_default(uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    auto exists = class_exists(classid);
    if (!exists) return exists.failure();
    if (!*exists)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) + " does not exist on " + dev_ +
                      " (pspxdp class add " + dev_ + " " + format_classid(ClassId::from_raw(classid)) + " normal)");
    return update_pacer_state(classid, std::nullopt);
}

Result<void> Device::set_line_rate(uint64_t line_rate_bps) {
    if (auto r = require_change(); !r) return r;
    auto specs = class_specs();
    if (!specs) return specs.failure();
    auto mtu_bytes = mtu();
    if (!mtu_bytes) return mtu_bytes.failure();
    if (auto r = check_rates(*specs, line_rate_bps, dev_, *mtu_bytes); !r)
        return refuse("line-rate " + format_rate(line_rate_bps) + " refused: " + r.error());
    // The state file too: a restarted daemon paces at what it says.
    auto as = setup::read_state(paths_);
    if (!as) return err(as.error());
    if (auto r = update_pacer_state(std::nullopt, line_rate_bps); !r) return r;
    as.value().line_rate_bps = line_rate_bps;
    if (auto r = setup::write_state(paths_, *as); !r) return err(r.error());
    return {};
}

Result<ApplySummary> Device::apply(const Config &c) {
    if (auto r = require_change(); !r) return r.failure();
    auto st = state();
    if (!st) return st.failure();
    const uint64_t old_line = st->line_rate_bps;
    const uint32_t old_default = pspxdp_classid_raw(st->default_classid);
    const uint64_t line = c.line_rate_bps.value_or(old_line);
    const uint32_t def = c.default_classid.value_or(old_default);
    auto mtu_bytes = mtu();
    if (!mtu_bytes) return mtu_bytes.failure();
    if (auto r = check_config(c, line, def, dev_, *mtu_bytes); !r) return r.failure();

    // The live configuration, with slots.
    std::map<uint32_t, pspxdp_class_config> cur;
    {
        auto all = common::read_class_configs(class_config_.get());
        if (!all) return err(dev_ + ": " + all.error());
        for (const auto &e : *all) cur[e.classid] = e.config;
    }
    auto cur_filters = filters();
    if (!cur_filters) return cur_filters.failure();

    // The plan.
    ApplySummary sum;
    auto slots = common::SlotAllocator::open(class_config_.get(), pacer_stats_.get());
    if (!slots) return slots.failure();
    struct Write {
        uint32_t id;
        pspxdp_class_config v;
        int64_t rate_delta; // lowered rates go first: the sum never exceeds the line meanwhile
    };
    std::vector<Write> writes;
    std::set<uint32_t> wanted;
    for (const ClassSpec &cs : c.classes) {
        wanted.insert(cs.classid);
        auto it = cur.find(cs.classid);
        uint32_t slot = 0;
        int64_t old_rate = 0;
        if (it != cur.end()) {
            if (cs.same_config(ClassSpec::from_config(cs.classid, it->second)) && it->second.slot)
                continue;
            slot = it->second.slot;
            old_rate = it->second.kind == PSPXDP_CLASS_PACED ? int64_t(it->second.rate_bps) : 0;
            ++sum.classes_changed;
        } else {
            ++sum.classes_added;
        }
        if (!slot) {
            auto s = slots.value().allocate();
            if (!s) return s.failure();
            slot = *s;
        }
        writes.push_back({cs.classid, cs.to_config(slot), int64_t(cs.paced() ? cs.rate_bps : 0) - old_rate});
    }
    std::stable_sort(writes.begin(), writes.end(),
                     [](const Write &a, const Write &b) { return a.rate_delta < b.rate_delta; });
    std::vector<uint32_t> deletes;
    for (const auto &[id, v] : cur)
        if (!wanted.count(id)) deletes.push_back(id);
    sum.classes_deleted = deletes.size();

    // Filters: compared by their words (class included): one that changed
    // class is deleted and added.
    std::vector<FilterSpec> new_filters;
    std::set<std::string> have, want;
    for (const auto &f : *cur_filters) have.insert(format_filter(f));
    for (const auto &f : c.filters) {
        new_filters.push_back(f.spec);
        want.insert(format_filter(f.spec));
    }
    for (const auto &w : want) sum.filters_added += !have.count(w);
    for (const auto &h : have) sum.filters_deleted += !want.count(h);
    sum.default_changed = def != old_default;
    sum.line_rate_changed = line != old_line;
    if (sum.nothing()) return sum; // apply(save()) writes nothing, not even config_gen

    // The writes, in an order whose every step is a valid configuration;
    // on a failure, back to the snapshot.
    auto rollback = [&](const Error &e) -> Result<ApplySummary> {
        for (const auto &w : writes)
            if (!cur.count(w.id)) bpf_map_delete_elem(class_config_.get(), &w.id);
        for (const auto &[id, v] : cur) bpf_map_update_elem(class_config_.get(), &id, &v, BPF_ANY);
        (void)control::replace_filters(filter_maps(), *cur_filters);
        (void)update_pacer_state(old_default, old_line);
        return Error{e.message + " (nothing changed)", e.exit_code};
    };
    if (line > old_line)
        if (auto r = update_pacer_state(std::nullopt, line); !r) return rollback(r.failure());
    {
        std::vector<uint32_t> ids;
        std::vector<pspxdp_class_config> vals;
        for (const auto &w : writes) {
            ids.push_back(w.id);
            vals.push_back(w.v);
        }
        if (auto r = write_classes(ids, vals); !r) return rollback(r.failure());
    }
    if (def != old_default)
        if (auto r = update_pacer_state(def, std::nullopt); !r) return rollback(r.failure());
    // Filters in one step (the classifier flips to the new set at once),
    // after the classes they name exist and before the ones they leave go.
    if (sum.filters_added || sum.filters_deleted)
        if (auto r = control::replace_filters(filter_maps(), new_filters); !r)
            return rollback(r.failure());
    if (auto r = delete_classes(deletes); !r) return rollback(r.failure());
    if (line < old_line) {
        if (auto r = update_pacer_state(std::nullopt, line); !r) return rollback(r.failure());
    }
    if (line != old_line) {
        if (auto as = setup::read_state(paths_)) {
            as.value().line_rate_bps = line;
            (void)setup::write_state(paths_, *as);
        }
    }
    if (auto r = bump_config_gen(); !r) return r.failure();
    return sum;
}

// ---- filters (filter.hpp does the work on the maps)

FilterMaps Device::filter_maps() const {
    FilterMaps m;
    m.filters = filters_.get();
    m.entries = filter_entries_.get();
    m.shapes = filter_shapes_.get();
    m.state = filter_state_.get();
    m.stats = filter_stats_.get();
    m.class_config = class_config_.get();
    return m;
}

Result<std::vector<FilterSpec>> Device::filters() const {
    auto stored = read_filters(filter_maps());
    if (!stored) return stored.failure();
    std::vector<FilterSpec> out;
    for (const StoredFilter &f : *stored) out.push_back(f.spec);
    return out;
}

Result<std::vector<FilterInfo>> Device::filter_infos(bool with_stats) const {
    return read_filter_infos(filter_maps(), with_stats);
}

Result<void> Device::filter_add(const FilterSpec &spec) {
    if (auto r = require_change(); !r) return r;
    return add_filter(filter_maps(), spec);
}

Result<std::vector<FilterSpec>> Device::filter_del(const FilterSelect &sel) {
    if (auto r = require_change(); !r) return r.failure();
    return delete_filters(filter_maps(), sel);
}

Result<void> Device::replace_filters(const std::vector<FilterSpec> &specs) {
    if (auto r = require_change(); !r) return r;
    return control::replace_filters(filter_maps(), specs);
}

Result<Device> open_device(const std::string *dev, Access access) {
    if (dev) return Device::open(*dev, access);
    const auto devs = attached_devices();
    if (devs.empty()) return refuse("no device attached (pspxdp attach DEV)");
    if (devs.size() > 1) {
        std::string list;
        for (const auto &d : devs) list += (list.empty() ? "" : ", ") + d;
        return refuse("several devices attached (" + list + "): name one");
    }
    return Device::open(devs.front(), access);
}

} // namespace pspxdp::control
