// A Device's whole configuration: read (save) and made so (apply), in an
// order whose every step is a valid configuration, rolled back on a failure.
#include "control/control.hpp"

#include "common/config_map.hpp"
#include "common/slots.hpp"
#include "common/text.hpp"
#include "setup/state.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <map>
#include <set>

namespace pspxdp::control {

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
    c.prio_direct = !(st->flags & PSPXDP_STATE_F_PRIO_DIRECT_OFF);
    c.classes = std::move(specs.value());
    for (const auto &f : *fl) c.filters.push_back(ConfigFilter{f, 0});
    return c;
}

std::string ApplySummary::text() const {
    if (nothing()) return "nothing to change";
    std::string out;
    auto add = [&](size_t n, const char *one, const char *many) {
        if (n) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + (n == 1 ? one : many);
    };
    add(classes_added, "class added", "classes added");
    add(classes_changed, "class changed", "classes changed");
    add(classes_deleted, "class deleted", "classes deleted");
    add(filters_added, "filter added", "filters added");
    add(filters_deleted, "filter deleted", "filters deleted");
    if (default_changed) out += (out.empty() ? "" : ", ") + std::string("default class changed");
    if (line_rate_changed) out += (out.empty() ? "" : ", ") + std::string("line rate changed");
    if (prio_direct_changed) out += (out.empty() ? "" : ", ") + std::string("prio-direct changed");
    return out;
}

Result<ApplySummary> Device::apply(const Config &c) {
    if (auto r = require_change(); !r) return r.failure();
    auto st = state();
    if (!st) return st.failure();
    const uint64_t old_line = st->line_rate_bps;
    const uint32_t old_default = pspxdp_classid_raw(st->default_classid);
    const uint64_t line = c.line_rate_bps.value_or(old_line);
    const uint32_t def = c.default_classid.value_or(old_default);
    const bool old_prio_direct = !(st->flags & PSPXDP_STATE_F_PRIO_DIRECT_OFF);
    const bool prio_direct = c.prio_direct.value_or(old_prio_direct);
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
        writes.push_back(
            {cs.classid, cs.to_config(slot), int64_t(cs.paced() ? cs.rate_bps : 0) - old_rate});
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
        canonical_cgroup_path(new_filters.back()); // "/sys/fs/cgroup/x" is "/x"
        want.insert(format_filter(new_filters.back()));
    }
    for (const auto &w : want) sum.filters_added += !have.count(w);
    for (const auto &h : have) sum.filters_deleted += !want.count(h);
    sum.default_changed = def != old_default;
    sum.line_rate_changed = line != old_line;
    sum.prio_direct_changed = prio_direct != old_prio_direct;
    if (sum.nothing()) return sum; // apply(save()) writes nothing, not even config_gen

    // The writes, in an order whose every step is a valid configuration;
    // on a failure, back to the snapshot.
    auto rollback = [&](const Error &e) -> Result<ApplySummary> {
        for (const auto &w : writes)
            if (!cur.count(w.id)) bpf_map_delete_elem(class_config_.get(), &w.id);
        for (const auto &[id, v] : cur) bpf_map_update_elem(class_config_.get(), &id, &v, BPF_ANY);
        (void)control::replace_filters(filter_maps(), *cur_filters);
        (void)update_pacer_state(old_default, old_line);
        (void)set_prio_direct(old_prio_direct);
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
    if (sum.prio_direct_changed)
        if (auto r = set_prio_direct(prio_direct); !r) return rollback(r.failure());
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

} // namespace pspxdp::control
