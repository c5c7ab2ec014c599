#include "daemon/class_table.hpp"

#include "common/config_map.hpp"
#include "core/units.hpp"
#include "daemon/log.hpp"

#include <algorithm>
#include <cstring>
#include <map>

namespace pspxdp::daemon {

namespace {
// A deleted class stays DRAINING at least this long, even with an empty
// queue: packets TC handed over just before it stopped are still on their
// way through the pacer veth, and count to the class, not as unknown.
constexpr uint64_t kDrainGraceNs = 50'000'000;

uint64_t paced_rate(const pspxdp_class_config &c) {
    return c.kind == PSPXDP_CLASS_PACED ? c.rate_bps : 0;
}

// A class in a tree: it has a parent or may borrow above its rate.
bool in_tree(const pspxdp_class_config &c) {
    return pspxdp_classid_raw(c.parent) || (paced_rate(c) && c.ceil_bps > c.rate_bps);
}

} // namespace

ClassLimits limits_for(const pspxdp_class_config &c) {
    ClassLimits l;
    const uint64_t rate = paced_rate(c);
    if (c.limit_bytes) {
        l.limit_bytes = c.limit_bytes;
        l.limit_frames = PSPXDP_MIN_LIMIT_FRAMES;
    } else if (c.limit_ns && rate) {
        l.limit_bytes = bytes_in_ns_floor(c.limit_ns, rate);
        l.limit_frames = PSPXDP_MIN_LIMIT_FRAMES;
    } else {
        l.limit_bytes = bytes_in_ns_floor(PSPXDP_DEFAULT_LIMIT_NS, rate);
        l.limit_frames = PSPXDP_DEFAULT_LIMIT_FRAMES;
    }
    if (rate && c.ce_threshold_ns != PSPXDP_CE_THRESHOLD_OFF)
        l.ce_bytes = bytes_in_ns_floor(
            c.ce_threshold_ns ? c.ce_threshold_ns : PSPXDP_DEFAULT_CE_THRESHOLD_NS, rate);
    l.flows = !(c.flags & PSPXDP_CLASS_FLOWS_OFF);
    l.aqm.enabled = l.flows;
    // With flows, the CE threshold is a sojourn time, judged per frame when
    // DRR chooses it (fq_codel's ce_threshold); without, a backlog (above).
    if (rate && c.ce_threshold_ns != PSPXDP_CE_THRESHOLD_OFF)
        l.aqm.ce_threshold_ns =
            c.ce_threshold_ns ? c.ce_threshold_ns : PSPXDP_DEFAULT_CE_THRESHOLD_NS;
    // CoDel's target must leave room for a frame or two at the class's
    // rate (RFC 8289 §4.4: at least a maximum frame's time); 5 ms is fq_codel's
    // default and 4 full frames at 10 Mbit/s. The interval stays 100 ms.
    if (rate)
        l.aqm.target_ns = std::max<uint64_t>(l.aqm.target_ns, 2 * ns_for_bytes_ceil(1518, rate));
    return l;
}

bool ClassTable::reconcile(uint64_t now) {
    auto all = common::read_class_configs(maps_.class_config_fd());
    if (!all) {
        logf("%s", all.error().c_str());
        return false;
    }
    ++maps_.daemon().config_reloads;
    ++gen_;
    tree_ = engine_.tree() ||
            std::any_of(all->begin(), all->end(), [](const auto &e) { return in_tree(e.config); });
    added_.clear();
    std::vector<uint32_t> configured;
    configured.reserve(all->size());
    for (const auto &e : *all) {
        const uint32_t slot = e.config.slot;
        if (slot == 0 || slot >= PSPXDP_MAX_CLASSES) {
            // Not the control plane's doing; nothing to serve it with.
            log_.add("class %s: slot %u out of range: not served",
                     format_classid(ClassId::from_raw(e.classid)).c_str(), slot);
            continue;
        }
        if (slot >= table_.size()) table_.resize(slot + 1);
        ClassState &c = table_[slot];
        if (c.life == ClassLife::Served && c.classid == e.classid) {
            update(slot, e.config);
        } else if (c.life == ClassLife::Unused ||
                   (c.life == ClassLife::Refused && c.classid == e.classid)) {
            add(slot, e.classid, e.config);
        } else {
            // The slot still holds another class (draining): the control
            // plane never gives out such a slot, so this is a hand-written map.
            refuse(slot, e.classid, e.config,
                   "its slot still holds class " + format_classid(ClassId::from_raw(c.classid)));
            continue;
        }
        c.seen_gen = gen_;
        configured.push_back(slot);
    }
    for (uint32_t slot : configured_) {
        ClassState &c = table_[slot];
        if (c.seen_gen == gen_) continue;
        if (c.life == ClassLife::Served)
            start_drain(slot, now);
        else if (c.life == ClassLife::Refused)
            c = ClassState{};
    }
    configured_ = std::move(configured);
    if (tree_) apply_tree(added_);
    log_.flush("class changes");
    return true;
}

// The whole tree to the engine at once (a parent and its children may
// arrive in any order, and a sum holds only as a whole). Refused: the
// classes keep the rates they had, and the classes added in this reconcile
// are not served.
void ClassTable::apply_tree(const std::vector<uint32_t> &added) {
    std::map<uint32_t, uint32_t> handle_of; // class id -> engine handle
    for (uint32_t slot : configured_)
        if (table_[slot].life == ClassLife::Served)
            handle_of[table_[slot].classid] = table_[slot].handle;
    std::vector<TreeSpec> specs;
    std::string missing;
    for (uint32_t slot : configured_) {
        const ClassState &c = table_[slot];
        if (c.life != ClassLife::Served) continue;
        const uint32_t parent = pspxdp_classid_raw(c.config.parent);
        auto p = handle_of.find(parent);
        if (parent && p == handle_of.end())
            missing = format_classid(ClassId::from_raw(parent)) + " (parent of " +
                      format_classid(ClassId::from_raw(c.classid)) + ") is not served";
        specs.push_back(TreeSpec{c.handle, paced_rate(c.config),
                                 parent && p != handle_of.end() ? p->second : kTreeNoParent,
                                 paced_rate(c.config) ? c.config.ceil_bps : 0, c.config.prio});
    }
    Result<void> r = missing.empty() ? engine_.configure_tree(specs) : err(missing);
    if (!r) {
        log_.add("class tree refused, rates kept: %s", r.error().c_str());
        ++maps_.daemon().config_refused;
        for (uint32_t slot : added) {
            ClassState &c = table_[slot];
            if (c.life != ClassLife::Served || !engine_.remove_class(c.handle)) continue;
            maps_.set_state(slot, PSPXDP_SLOT_FREE);
            c.life = ClassLife::Refused;
            --served_;
        }
        return;
    }
    for (uint32_t slot : configured_) {
        ClassState &c = table_[slot];
        if (c.life != ClassLife::Served) continue;
        const uint64_t rate = engine_.class_rate(c.handle);
        if (rate != c.rate_bps && std::find(added.begin(), added.end(), slot) == added.end())
            log_.add("class %s: rate %s -> %s",
                     format_classid(ClassId::from_raw(c.classid)).c_str(),
                     format_rate(c.rate_bps).c_str(), format_rate(rate).c_str());
        c.rate_bps = rate;
        c.limits = limits_for(c.config);
    }
}

// The class's burst bound in bytes at DEV's MTU; 0: the engine's default.
uint64_t ClassTable::burst_of(const pspxdp_class_config &cfg) const {
    return BurstSize{cfg.burst_bytes, cfg.burst_mtus}.resolve(
        engine_.config().framing.mtu_unit_bytes());
}

void ClassTable::publish_engine_counters() {
    const uint64_t rate = engine_.config().line_rate_bps;
    for (uint32_t slot : configured_) {
        const ClassState &c = table_[slot];
        if (c.life != ClassLife::Served || !c.rate_bps) continue;
        const ClassCounters &e = engine_.class_counters(c.handle);
        pspxdp_class_counters &pc = maps_.slot(slot);
        pc.late_lost_ns = c.late_lost_base_ns + ns_for_bytes_floor(e.late_lost_bytes, rate);
        pc.empty_ns = c.empty_base_ns + e.empty_ns;
        pc.empty_events = c.empty_base_events + e.empty_events;
        pc.lent_bytes = c.lent_base_bytes + e.lent_bytes;
        pc.borrowed_bytes = c.borrowed_base_bytes + e.borrowed_bytes;
    }
}

void ClassTable::add(uint32_t slot, uint32_t classid, const pspxdp_class_config &cfg) {
    ClassState &c = table_[slot];
    // In a tree the rate comes with the whole tree (apply_tree).
    const uint64_t rate = tree_ ? 0 : paced_rate(cfg);
    auto h = engine_.add_class(rate, burst_of(cfg));
    if (!h) {
        refuse(slot, classid, cfg, h.error());
        return;
    }
    c = ClassState{};
    c.classid = classid;
    c.handle = *h;
    c.rate_bps = rate;
    c.config = cfg;
    c.limits = limits_for(cfg);
    c.life = ClassLife::Served;
    if (tree_) added_.push_back(slot);
    if (handle_slot_.size() <= *h) handle_slot_.resize(*h + 1);
    handle_slot_[*h] = slot;
    ++served_;

    pspxdp_class_counters &pc = maps_.slot(slot);
    // A restarted daemon takes over what its predecessor served: the
    // counters continue. Anything else starts from zero.
    const bool adopted =
        pc.state == PSPXDP_SLOT_SERVED && pspxdp_classid_raw(pc.classid) == classid;
    if (!adopted) {
        maps_.set_state(slot, PSPXDP_SLOT_FREE);
        pspxdp_class_counters fresh{};
        fresh.classid = pspxdp_classid_of(classid);
        std::memcpy(static_cast<void *>(&pc), &fresh, sizeof(fresh));
    }
    c.late_lost_base_ns = pc.late_lost_ns;
    c.empty_base_ns = pc.empty_ns;
    c.empty_base_events = pc.empty_events;
    c.lent_base_bytes = pc.lent_bytes;
    c.borrowed_base_bytes = pc.borrowed_bytes;
    maps_.note_slot(slot);
    maps_.set_state(slot, PSPXDP_SLOT_SERVED); // only now may TC hand packets over
    const uint64_t shown = paced_rate(cfg);
    log_.add("class %s: %s%s on slot %u%s", format_classid(ClassId::from_raw(classid)).c_str(),
             shown ? "paced at " : "normal", shown ? format_rate(shown).c_str() : "", slot,
             adopted ? " (taken over, counters continue)" : "");
}

void ClassTable::update(uint32_t slot, const pspxdp_class_config &cfg) {
    ClassState &c = table_[slot];
    const bool changed = std::memcmp(&c.config, &cfg, sizeof(cfg)) != 0;
    const uint64_t rate = paced_rate(cfg);
    if (rate != c.rate_bps && !tree_) { // a tree's rates: apply_tree
        auto r = engine_.set_rate(c.handle, rate);
        if (!r) {
            if (changed) {
                log_.add("class %s: rate %s refused, keeping %s: %s",
                         format_classid(ClassId::from_raw(c.classid)).c_str(),
                         format_rate(rate).c_str(), format_rate(c.rate_bps).c_str(),
                         r.error().c_str());
                ++maps_.daemon().config_refused;
            }
        } else {
            log_.add("class %s: rate %s -> %s",
                     format_classid(ClassId::from_raw(c.classid)).c_str(),
                     format_rate(c.rate_bps).c_str(), format_rate(rate).c_str());
            c.rate_bps = rate;
        }
    }
    // A bound takes effect at once (no refusal: the engine takes one below a
    // largest frame, after an MTU change, as one largest frame).
    if (burst_of(cfg) != burst_of(c.config)) (void)engine_.set_burst(c.handle, burst_of(cfg));
    // Limits follow the configuration at the rate actually applied.
    pspxdp_class_config applied = cfg;
    applied.rate_bps = c.rate_bps;
    applied.kind = c.rate_bps ? PSPXDP_CLASS_PACED : PSPXDP_CLASS_NORMAL;
    c.limits = limits_for(applied);
    c.config = cfg;
}

void ClassTable::refuse(uint32_t slot, uint32_t classid, const pspxdp_class_config &cfg,
                        const std::string &why) {
    ClassState &c = table_[slot];
    const bool logged = c.life == ClassLife::Refused && c.classid == classid &&
                        std::memcmp(&c.config, &cfg, sizeof(cfg)) == 0;
    if (c.life == ClassLife::Unused || c.life == ClassLife::Refused) {
        c = ClassState{};
        c.classid = classid;
        c.config = cfg;
        c.life = ClassLife::Refused;
    }
    if (!logged) {
        log_.add("class %s: not served: %s", format_classid(ClassId::from_raw(classid)).c_str(),
                 why.c_str());
        ++maps_.daemon().config_refused;
    }
}

void ClassTable::start_drain(uint32_t slot, uint64_t now) {
    ClassState &c = table_[slot];
    maps_.set_state(slot, PSPXDP_SLOT_DRAINING); // TC stops at once
    c.life = ClassLife::Draining;
    c.drain_since_ns = now;
    c.drain_deadline_ns = now + (c.rate_bps ? PSPXDP_DELETE_DRAIN_CAP * PSPXDP_DELETE_DRAIN_NS
                                            : PSPXDP_DELETE_DRAIN_NS);
    draining_.push_back(slot);
    --served_;
    log_.add("class %s deleted: %u frames queued, sending what %llu ms at its rate allow",
             format_classid(ClassId::from_raw(c.classid)).c_str(),
             (unsigned)maps_.slot(slot).backlog_frames,
             (unsigned long long)(PSPXDP_DELETE_DRAIN_NS / 1'000'000));
}

uint32_t ClassTable::finish_drains(uint64_t now) {
    uint32_t done = 0;
    for (size_t i = 0; i < draining_.size();) {
        const uint32_t slot = draining_[i];
        ClassState &c = table_[slot];
        pspxdp_class_counters &pc = maps_.slot(slot);
        // backlog_frames counts the TX ring too: until it is 0 a completion
        // of this class may still be reported.
        if (pc.backlog_frames || now - c.drain_since_ns < kDrainGraceNs ||
            !engine_.remove_class(c.handle)) {
            ++i;
            continue;
        }
        log_.add("class %s removed: sent %llu frames, dropped %llu when deleted",
                 format_classid(ClassId::from_raw(c.classid)).c_str(),
                 (unsigned long long)pc.tx_frames, (unsigned long long)pc.drop_deleted);
        maps_.set_state(slot, PSPXDP_SLOT_FREE); // the control plane may give it out again
        c = ClassState{};
        draining_[i] = draining_.back();
        draining_.pop_back();
        ++done;
    }
    log_.flush("classes removed");
    return done;
}

void ClassTable::free_orphans() {
    const uint32_t end = std::min<uint32_t>(maps_.state().slots_end, PSPXDP_MAX_CLASSES);
    for (uint32_t s = 1; s < end; ++s) {
        pspxdp_class_counters &pc = maps_.slot(s);
        if (pc.state == PSPXDP_SLOT_FREE) continue;
        bool ours = s < table_.size() && table_[s].life != ClassLife::Unused &&
                    table_[s].life != ClassLife::Refused &&
                    table_[s].classid == pspxdp_classid_raw(pc.classid);
        if (!ours) maps_.set_state(s, PSPXDP_SLOT_FREE);
    }
}

void ClassTable::mark_backlogged(uint32_t slot) {
    ClassState &c = table_[slot];
    if (c.backlogged_at != kNotBacklogged) return;
    c.backlogged_at = uint32_t(backlogged_.size());
    backlogged_.push_back(slot);
}

void ClassTable::mark_empty(uint32_t slot) {
    ClassState &c = table_[slot];
    if (c.backlogged_at == kNotBacklogged) return;
    uint32_t last = backlogged_.back();
    backlogged_[c.backlogged_at] = last;
    table_[last].backlogged_at = c.backlogged_at;
    backlogged_.pop_back();
    c.backlogged_at = kNotBacklogged;
}

} // namespace pspxdp::daemon
