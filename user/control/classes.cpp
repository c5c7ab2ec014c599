// The classes of a Device: reading class_config (batched) with the pacer's
// view of each class, and the tc-like changes (add, change, set, del,
// default, line rate), each checked whole before it writes.
#include "control/control.hpp"

#include "common/config_map.hpp"
#include "common/pins.hpp"
#include "common/slots.hpp"
#include "common/text.hpp"
#include "core/units.hpp"
#include "setup/state.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <map>

namespace pspxdp::control {

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

Result<bool> Device::class_exists(uint32_t classid) const {
    pspxdp_class_config cfg{};
    if (bpf_map_lookup_elem(class_config_.get(), &classid, &cfg) == 0) return true;
    if (errno == ENOENT) return false;
    return err(dev_ + ": read class_config: " + errno_text(errno));
}

Result<void> Device::require_class(uint32_t classid, const std::string &hint) const {
    auto exists = class_exists(classid);
    if (!exists) return exists.failure();
    if (!*exists)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) +
                      " does not exist on " + dev_ + hint);
    return {};
}

Result<std::vector<std::pair<ClassSpec, uint32_t>>> Device::class_specs_with_slots() const {
    auto all = common::read_class_configs(class_config_.get());
    if (!all) return err(dev_ + ": " + all.error());
    std::vector<std::pair<ClassSpec, uint32_t>> out;
    out.reserve(all->size());
    for (const auto &e : *all)
        out.emplace_back(ClassSpec::from_config(e.classid, e.config), e.config.slot);
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
    // class still draining shows up on its old slot. A draining slot was
    // served, so it lies below pacer_state.slots_end (written before a slot
    // is served): the slots read are those and the configured classes'.
    // All 131,072 of them (24 MB) took 2.4 ms a read to map and unmap, in
    // system calls a woken pacer waited for, and a cluster agent reads every
    // 25 ms (docs/results/2026-11-28-pacer-shortfall-under-load).
    auto st = state();
    uint32_t end = st ? std::min<uint32_t>(st->slots_end, PSPXDP_MAX_CLASSES) : PSPXDP_MAX_CLASSES;
    for (const auto &[id, ci] : by_id)
        if (ci.configured && ci.config.slot < PSPXDP_MAX_CLASSES)
            end = std::max(end, ci.config.slot + 1);
    auto slots = common::PacerStatsView::of(pacer_stats_.get(), end);
    if (!slots) return err(dev_ + ": " + slots.error());
    const pspxdp_class_counters *all = slots->all();
    for (auto &[id, ci] : by_id) {
        const uint32_t slot = ci.config.slot;
        if (!ci.configured || !slot || slot >= end || pspxdp_classid_raw(all[slot].classid) != id)
            continue;
        ci.pacer = all[slot];
        ci.state = all[slot].state;
        ci.served = all[slot].state == PSPXDP_SLOT_SERVED;
    }
    for (uint32_t s = 1; s < end; ++s) {
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

// ---- class_config writes

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

Result<void> Device::class_put_many(Put how, const std::vector<ClassSpec> &given,
                                    const std::function<Result<void>()> &before_write) {
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
            return refuse("class id " + format_classid(ClassId::from_raw(spec.classid)) +
                          ": minor 0 names a qdisc, not a class");
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
    // A class with children holds no frames: not the default class, no filter's.
    if (const auto inner = inner_classes(all); !inner.empty()) {
        const uint32_t def = pspxdp_classid_raw(st->default_classid);
        if (std::binary_search(inner.begin(), inner.end(), def))
            return refuse("class " + format_classid(ClassId::from_raw(def)) +
                          " is the default class of " + dev_ +
                          " and cannot have children (it would hold no frames)");
        auto fl = filters();
        if (!fl) return fl.failure();
        for (const auto &f : *fl)
            if (std::binary_search(inner.begin(), inner.end(), f.classid.raw()))
                return refuse("class " + format_classid(f.classid) + " is used by filter \"" +
                              format_filter(f) +
                              "\" and cannot have children (frames go to leaves)");
    }

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
    if (before_write)
        if (auto r = before_write(); !r) return r;
    if (auto r = write_classes(ids, values); !r) return r;
    return bump_config_gen();
}

Result<uint64_t> Device::set_rate(uint32_t classid, uint64_t rate_bps,
                                  const std::function<Result<void>()> &before_write) {
    if (auto r = require_change(); !r) return r.failure();
    const std::string name = "class " + format_classid(ClassId::from_raw(classid));
    pspxdp_class_config cfg{};
    if (bpf_map_lookup_elem(class_config_.get(), &classid, &cfg) != 0)
        return errno == ENOENT ? refuse(name + " does not exist on " + dev_)
                               : err(dev_ + ": read class_config: " + errno_text(errno));
    if (cfg.kind != PSPXDP_CLASS_PACED) return refuse(name + " of " + dev_ + " is not paced");
    if (rate_bps == 0) return refuse(name + ": a paced class needs a rate above 0");
    const uint64_t was_bps = cfg.rate_bps;
    if (rate_bps > was_bps) {
        auto got = class_specs();
        if (!got) return got.failure();
        std::vector<ClassSpec> specs = *got;
        for (auto &s : specs)
            if (s.classid == classid) s.rate_bps = rate_bps;
        auto st = state();
        if (!st) return st.failure();
        auto mtu_bytes = mtu();
        if (!mtu_bytes) return mtu_bytes.failure();
        if (auto r = check_rates(specs, st->line_rate_bps, dev_, *mtu_bytes); !r)
            return r.failure();
    }
    if (before_write)
        if (auto r = before_write(); !r) return r.failure();
    cfg.rate_bps = rate_bps;
    if (bpf_map_update_elem(class_config_.get(), &classid, &cfg, BPF_EXIST) != 0)
        return err(dev_ + ": write class_config: " + errno_text(errno));
    if (auto r = bump_config_gen(); !r) return r.failure();
    return was_bps;
}

Result<void> Device::class_del(uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    if (auto r = require_class(classid, ""); !r) return r;
    auto specs = class_specs();
    if (!specs) return specs.failure();
    std::string kids;
    size_t nkids = 0;
    for (const auto &c : *specs)
        if (c.parent == classid && nkids++ < 8)
            kids += (kids.empty() ? "" : ", ") + format_classid(ClassId::from_raw(c.classid));
    if (nkids)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) + " has " +
                      std::to_string(nkids) + (nkids == 1 ? " child (" : " children (") + kids +
                      (nkids > 8 ? ", ..." : "") + "): delete them first");
    auto st = state();
    if (!st) return st.failure();
    if (pspxdp_classid_raw(st->default_classid) == classid)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) +
                      " is the default class of " + dev_ + " (pspxdp default " + dev_ +
                      " ANOTHER first)");
    auto fl = filters();
    if (!fl) return fl.failure();
    size_t used = 0;
    std::string first;
    for (const auto &f : *fl) {
        if (f.classid.raw() != classid) continue;
        if (!used++) first = format_filter(f);
    }
    if (used)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) + " is used by " +
                      std::to_string(used) + (used == 1 ? " filter" : " filters") + " (\"" + first +
                      "\"): delete them first");
    if (auto r = delete_classes({classid}); !r) return r;
    return bump_config_gen();
}

Result<void> Device::set_default(uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    const std::string id = format_classid(ClassId::from_raw(classid));
    if (auto r = require_class(classid, " (pspxdp class add " + dev_ + " " + id + " normal)"); !r)
        return r;
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

} // namespace pspxdp::control
