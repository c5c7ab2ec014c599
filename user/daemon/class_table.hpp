// The daemon's classes, indexed by slot (shared.h), and how they follow
// class_config: reconcile() re-reads it (one batched pass) whenever
// pacer_state.config_gen moves, adds new classes to the engine, applies rate
// and limit changes, and turns deleted classes into draining ones. What
// happens to the frames of a class is class_queues.hpp's job.
//
// A slot's life, as TC sees it in pacer_stats[slot].state:
//   FREE --(configured, engine accepts)--> SERVED --(deleted)--> DRAINING
//   DRAINING --(queue cut to PSPXDP_DELETE_DRAIN_NS at its rate, sent)--> FREE
// A configured class the engine refuses (its rate does not fit the line
// rate this daemon runs with) stays FREE: TC passes its packets, counted as
// not served; the daemon logs it and counts config_refused once per
// configuration, and tries again at every reconcile.
#pragma once

#include "core/engine.hpp"
#include "daemon/log.hpp"
#include "daemon/pacer_maps.hpp"
#include "datapath/flow_queues.hpp"
#include "datapath/gso_gate.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <vector>

namespace pspxdp::daemon {

enum class ClassLife : uint8_t {
    Unused,   // no class on this slot
    Served,   // in the engine; TC hands its packets over
    Draining, // deleted: TC stopped, its queue drains at its rate until drain_deadline_ns
    Refused,  // configured, but the engine refused it: not served
};

// Queue limits, flows and AQM of a class, from its configuration.
struct ClassLimits {
    uint64_t limit_bytes = 0;       // L2 bytes a frame may bring the backlog to...
    uint32_t limit_frames = 0;      // ...once the backlog has this many frames
    uint64_t ce_bytes = UINT64_MAX; // flows off: a frame joining a longer backlog gets CE
    bool flows = true;              // per-flow queues (flow_queues.hpp); off: one FIFO
    datapath::FlowAqm aqm;          // CoDel on each flow (flows on)
};
ClassLimits limits_for(const pspxdp_class_config &config);

inline constexpr uint32_t kNotBacklogged = 0xffffffffu;

struct ClassState {
    ClassLimits limits;
    uint64_t rate_bps = 0; // applied in the engine (0: normal)
    uint64_t drain_deadline_ns = 0;
    uint64_t drain_since_ns = 0;
    pspxdp_class_config config{}; // as last read from class_config
    uint32_t classid = 0;
    uint32_t handle = 0;                     // the engine's
    uint32_t backlogged_at = kNotBacklogged; // index in ClassTable::backlogged()
    uint32_t seen_gen = 0;                   // last reconcile that found it configured
    // pacer_stats' late_lost_ns, empty_ns, empty_events, lent_bytes and
    // borrowed_bytes when it was added
    // (the engine's count from 0 for the class; a taken-over slot continues).
    uint64_t late_lost_base_ns = 0;
    uint64_t empty_base_ns = 0;
    uint64_t empty_base_events = 0;
    uint64_t lent_base_bytes = 0;
    uint64_t borrowed_base_bytes = 0;
    ClassLife life = ClassLife::Unused;
    datapath::GsoGate gso;  // the GSO packet being received (class_queues.cpp)
    bool drain_cut = false; // deleted: cut to what its rate sends in the drain time
};

class ClassTable {
  public:
    ClassTable(Engine &engine, PacerMaps &maps) : engine_(engine), maps_(maps) {}

    // The class a frame tagged {slot, classid} belongs to, or nullptr (not
    // served: the tag is stale or garbage). A draining class still takes the
    // frames TC handed over before it stopped.
    ClassState *find(uint32_t slot, uint32_t classid) {
        if (slot >= table_.size()) return nullptr;
        ClassState &c = table_[slot];
        if (c.classid != classid || (c.life != ClassLife::Served && c.life != ClassLife::Draining))
            return nullptr;
        return &c;
    }
    ClassState &at(uint32_t slot) { return table_[slot]; }
    const ClassState &at(uint32_t slot) const { return table_[slot]; }
    uint32_t slot_of(uint32_t handle) const { return handle_slot_[handle]; }

    // Re-reads class_config and applies it (see the top of this file).
    // Returns false when class_config could not be read (nothing changed).
    bool reconcile(uint64_t now_ns);
    // After the first reconcile of a restarted daemon: SERVED slots of the
    // dead one that no configured class took over go FREE.
    void free_orphans();
    // Draining classes whose queues are gone (nothing queued, nothing on the
    // TX ring, the grace for late frames over) leave the engine; their slots
    // go FREE. Returns how many finished.
    uint32_t finish_drains(uint64_t now_ns);
    const std::vector<uint32_t> &draining() const { return draining_; }
    // Slots of the configured classes (served or refused).
    const std::vector<uint32_t> &configured() const { return configured_; }

    // Classes with queued frames (slots), for the overflow policy.
    const std::vector<uint32_t> &backlogged() const { return backlogged_; }
    void mark_backlogged(uint32_t slot);
    void mark_empty(uint32_t slot);

    uint32_t served() const { return served_; }
    // The engine's per-class counters into pacer_stats: late_lost_bytes
    // (late_lost_ns), empty_ns, empty_events, lent_bytes, borrowed_bytes.
    void publish_engine_counters();

  private:
    void add(uint32_t slot, uint32_t classid, const pspxdp_class_config &cfg);
    void apply_tree(const std::vector<uint32_t> &added);
    void update(uint32_t slot, const pspxdp_class_config &cfg);
    void start_drain(uint32_t slot, uint64_t now_ns);
    void refuse(uint32_t slot, uint32_t classid, const pspxdp_class_config &cfg,
                const std::string &why);
    uint64_t burst_of(const pspxdp_class_config &cfg) const;

    Engine &engine_;
    PacerMaps &maps_;
    std::vector<ClassState> table_;     // by slot; grows to the highest slot seen
    std::vector<uint32_t> handle_slot_; // engine handle -> slot
    std::vector<uint32_t> configured_;  // slots of configured classes (Served or Refused)
    std::vector<uint32_t> draining_;
    std::vector<uint32_t> backlogged_;
    uint32_t gen_ = 0;
    uint32_t served_ = 0;
    // Class trees (docs/design.md §3.12): rates, parents, ceils and prios go
    // to the engine in one configure_tree() after each reconcile.
    bool tree_ = false;
    std::vector<uint32_t> added_; // slots added in this reconcile (tree mode)
    LogBatch log_;
};

} // namespace pspxdp::daemon
