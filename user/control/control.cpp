#include "control/control.hpp"

#include "common/text.hpp"
#include "control/config_map.hpp"
#include "control/slots.hpp"
#include "setup/attach.hpp"
#include "core/units.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <tuple>

namespace pspxdp::control {

std::string pin_dir(const std::string &dev) { return std::string(PSPXDP_PIN_ROOT) + "/" + dev; }

std::vector<std::string> attached_devices() {
    std::vector<std::string> out;
    DIR *d = opendir(PSPXDP_PIN_ROOT);
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

std::string cls(uint32_t raw) { return format_classid(ClassId::from_raw(raw)); }

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

Result<Device> Device::open(const std::string &dev, common::Access access) {
    auto paths = common::paths_for(dev);
    if (!paths) return Error{paths.error()};
    Device d;
    d.dev_ = dev;
    d.paths_ = *paths;

    struct Want {
        Fd *fd;
        const char *name;
        uint32_t key, value;
        common::Need need;
    };
    using common::Need;
    const Want want[] = {
        {&d.class_config_, "class_config", 4, sizeof(pspxdp_class_config), Need::Required},
        {&d.pacer_state_, "pacer_state", 4, sizeof(pspxdp_pacer_state), Need::Required},
        {&d.pacer_stats_, "pacer_stats", 4, sizeof(pspxdp_class_counters), Need::Required},
        {&d.filters_, "filters", 4, sizeof(pspxdp_filter), Need::Required},
        {&d.filter_entries_, "filter_entries", sizeof(pspxdp_filter_key),
         sizeof(pspxdp_filter_entry), Need::Required},
        {&d.filter_shapes_, "filter_shapes", 4, sizeof(pspxdp_filter_shape_slot), Need::Required},
        {&d.filter_state_, "filter_state", 4, sizeof(pspxdp_filter_state), Need::Required},
        {&d.filter_stats_, "filter_stats", 4, sizeof(pspxdp_filter_stats), Need::Required},
        // Only for `show`: a missing one prints as zeros.
        {&d.class_stats_, "class_stats", 4, sizeof(pspxdp_class_tc_stats), Need::Optional},
    };
    for (const Want &w : want) {
        auto fd = common::open_pinned_map(d.paths_, w.name, w.key, w.value, access, w.need);
        if (!fd) return Error{fd.error()};
        *w.fd = std::move(fd.value());
    }
    return d;
}

Result<common::DevLock> Device::lock() {
    return common::DevLock::acquire(paths_, common::DevLock::Wait::Yes);
}

Result<pspxdp_pacer_state> Device::state() const {
    uint32_t key = 0;
    pspxdp_pacer_state st{};
    if (bpf_map_lookup_elem(pacer_state_.get(), &key, &st) != 0)
        return err(dev_ + ": read pacer_state: " + errno_text(errno));
    return st;
}

Result<bool> Device::class_exists(uint32_t classid) const {
    pspxdp_class_config cfg{};
    if (bpf_map_lookup_elem(class_config_.get(), &classid, &cfg) == 0) return true;
    if (errno == ENOENT) return false;
    return err(dev_ + ": read class_config: " + errno_text(errno));
}

static Result<void> check_classid(uint32_t classid) {
    // 0:0 is "no class" to the classifier; X:0 names a qdisc in tc, not a class.
    if ((classid & 0xffff) == 0)
        return err("class id " + cls(classid) + ": minor 0 names a qdisc, not a class");
    return {};
}

Result<void> Device::class_set(uint32_t classid, uint32_t kind, uint64_t rate_bps) {
    return class_set_many({ClassSpec{classid, kind, rate_bps}});
}

Result<void> Device::class_set_many(std::vector<ClassSpec> specs) {
    for (auto &s : specs) {
        if (auto r = check_classid(s.classid); !r) return r;
        if (s.kind == PSPXDP_CLASS_PACED && s.rate_bps == 0)
            return err("class " + cls(s.classid) + ": a paced class needs a rate > 0");
        if (s.kind != PSPXDP_CLASS_PACED && s.kind != PSPXDP_CLASS_NORMAL)
            return err("unknown class kind " + std::to_string(s.kind));
        if (s.kind == PSPXDP_CLASS_NORMAL) s.rate_bps = 0;
    }
    auto held = lock();
    if (!held) return Error{held.error()};

    // One pass over class_config for any number of classes (lookup_batch).
    auto all = read_class_configs(class_config_.get());
    if (!all) return err(dev_ + ": " + all.error());
    std::unordered_map<uint32_t, pspxdp_class_config> config;
    config.reserve(all->size() + specs.size());
    for (const auto &e : *all)
        config[e.classid] = e.config;
    std::unordered_map<uint32_t, size_t> last; // a class given twice: the last one counts
    for (size_t i = 0; i < specs.size(); ++i)
        last[specs[i].classid] = i;

    // Sum in 128 bits: a hand-written huge rate must not wrap the check.
    unsigned __int128 sum = 0;
    bool paced = false;
    for (const auto &[id, cfg] : config)
        if (!last.count(id) && cfg.kind == PSPXDP_CLASS_PACED) sum += cfg.rate_bps;
    for (const auto &[id, i] : last) {
        sum += specs[i].rate_bps;
        paced = paced || specs[i].kind == PSPXDP_CLASS_PACED;
    }
    if (paced) {
        auto st = state();
        if (!st) return Error{st.error()};
        const uint64_t line = st->line_rate_bps;
        if (line == 0)
            return err(dev_ + ": line rate unknown (pacer_state.line_rate_bps is 0), "
                              "cannot check paced rates against it");
        if (sum > line) {
            const std::string total =
                sum > UINT64_MAX ? std::string("more than 2^64 bit/s") : format_rate(uint64_t(sum));
            const std::string who =
                specs.size() == 1 ? "class " + cls(specs[0].classid) + " " + format_rate(specs[0].rate_bps)
                                  : std::to_string(specs.size()) + " classes";
            return err(who + ": paced rates would sum to " + total + ", above the line rate " +
                       format_rate(line) + " of " + dev_);
        }
    }
    // New classes get slots; existing ones keep theirs.
    std::optional<SlotAllocator> slots;
    std::vector<uint32_t> keys;
    std::vector<pspxdp_class_config> values;
    for (size_t i = 0; i < specs.size(); ++i) { // slots in the order given
        const uint32_t id = specs[i].classid;
        if (last[id] != i) continue;
        pspxdp_class_config cfg{};
        if (auto it = config.find(id); it != config.end()) {
            cfg = it->second;
        } else {
            if (!slots) {
                auto opened = SlotAllocator::open(class_config_.get(), pacer_stats_.get());
                if (!opened) return err(dev_ + ": " + opened.error());
                slots.emplace(std::move(opened.value()));
            }
            auto slot = slots->allocate();
            if (!slot) return err(dev_ + ": class " + cls(id) + ": " + slot.error());
            cfg.slot = *slot;
        }
        cfg.rate_bps = specs[i].rate_bps;
        cfg.kind = pspxdp_class_kind(specs[i].kind);
        keys.push_back(id);
        values.push_back(cfg);
    }
    uint32_t count = uint32_t(keys.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (count && bpf_map_update_batch(class_config_.get(), keys.data(), values.data(), &count,
                                      &opts) != 0) {
        int e = errno;
        (void)bump_config_gen(pacer_state_.get()); // whatever was written must be applied
        return err(dev_ + ": write class_config: " + errno_text(e) + " (" + std::to_string(count) +
                   " of " + std::to_string(keys.size()) + " classes written)");
    }
    if (auto r = bump_config_gen(pacer_state_.get()); !r) return err(dev_ + ": " + r.error());
    return {};
}

Result<void> Device::class_del(uint32_t classid) {
    if (auto r = check_classid(classid); !r) return r;
    auto held = lock();
    if (!held) return Error{held.error()};
    auto exists = class_exists(classid);
    if (!exists) return Error{exists.error()};
    if (!*exists) return err("class " + cls(classid) + " does not exist on " + dev_);
    auto st = state();
    if (!st) return Error{st.error()};
    if (pspxdp_classid_raw(st->default_classid) == classid)
        return err("class " + cls(classid) + " is the default class of " + dev_);
    auto fl = filters();
    if (!fl) return Error{fl.error()};
    size_t used = 0;
    std::string first;
    for (const auto &f : *fl) {
        if (f.classid.raw() != classid) continue;
        if (!used++) first = format_filter(f);
    }
    if (used)
        return err("class " + cls(classid) + " is used by " + std::to_string(used) +
                   (used == 1 ? " filter" : " filters") + " (\"" + first +
                   "\"): delete them first");
    if (bpf_map_delete_elem(class_config_.get(), &classid) != 0)
        return err(dev_ + ": delete from class_config: " + errno_text(errno));
    if (auto r = bump_config_gen(pacer_state_.get()); !r) return err(dev_ + ": " + r.error());
    return {};
}

Result<std::vector<ClassInfo>> Device::classes() const {
    std::map<uint32_t, ClassInfo> by_id;
    const int cfd = class_config_.get();
    int rc = for_each_key<uint32_t>(cfd, [&](uint32_t key) {
        ClassInfo ci;
        ci.classid = key;
        if (bpf_map_lookup_elem(cfd, &key, &ci.config) == 0) {
            ci.configured = true;
            by_id[key] = ci;
        }
        return true;
    });
    if (rc) return err(dev_ + ": read class_config: " + errno_text(rc));

    const int ncpu = libbpf_num_possible_cpus();
    if (class_stats_.valid() && ncpu > 0) {
        std::vector<pspxdp_class_tc_stats> per_cpu(static_cast<size_t>(ncpu));
        const int sfd = class_stats_.get();
        rc = for_each_key<uint32_t>(sfd, [&](uint32_t key) {
            if (bpf_map_lookup_elem(sfd, &key, per_cpu.data()) != 0) return true;
            ClassInfo &ci = by_id[key];
            ci.classid = key;
            for (const auto &s : per_cpu) {
#define PSPXDP_SUM(name, help) ci.tc.name += s.name;
                PSPXDP_TC_CLASS_COUNTERS(PSPXDP_SUM)
#undef PSPXDP_SUM
            }
            return true;
        });
        if (rc) return err(dev_ + ": read class_stats: " + errno_text(rc));
    }
    std::vector<ClassInfo> out;
    for (auto &[id, ci] : by_id) {
        uint32_t slot = ci.config.slot;
        pspxdp_class_counters pc{};
        if (ci.configured && slot &&
            bpf_map_lookup_elem(pacer_stats_.get(), &slot, &pc) == 0 &&
            pc.state != PSPXDP_SLOT_FREE && pspxdp_classid_raw(pc.classid) == id) {
            ci.pacer = pc;
            ci.has_pacer = true;
        }
        out.push_back(ci);
    }
    return out;
}

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
    auto held = lock();
    if (!held) return Error{held.error()};
    return add_filter(filter_maps(), spec);
}

Result<std::vector<FilterSpec>> Device::filter_del(const FilterSelect &sel) {
    auto held = lock();
    if (!held) return Error{held.error()};
    return delete_filters(filter_maps(), sel);
}

Result<void> Device::replace_filters(const std::vector<FilterSpec> &specs) {
    auto held = lock();
    if (!held) return Error{held.error()};
    return control::replace_filters(filter_maps(), specs);
}

Result<Device> open_device(const std::string *dev, common::Access access) {
    auto open_here = [&](const std::string &name) -> Result<Device> {
        auto paths = common::paths_for(name);
        if (!paths) return Error{paths.error()};
        if (auto st = setup::check_here(*paths); !st) return Error{st.error()};
        return Device::open(name, access);
    };
    if (dev) return open_here(*dev);
    const auto devs = attached_devices();
    if (devs.empty()) return err("no device attached (pspxdp attach DEV)");
    if (devs.size() > 1) {
        std::string list;
        for (const auto &d : devs) list += (list.empty() ? "" : ", ") + d;
        return err("several devices attached (" + list + "): name one");
    }
    return open_here(devs.front());
}

} // namespace pspxdp::control
