// What happens to a frame between the pacer's sockets and the wire: each
// class's queue of UMEM frames (per-flow queues served by DRR, or one FIFO
// with flows off), and every way a frame leaves it, counted in the class's
// pacer_stats slot.
//
//   receive   tag -> class; queued on its flow (flow_queues.hpp); at the
//             class limit the head of the fattest flow goes (drop_limit).
//             Flows off: one FIFO; at the limit the frame is dropped, and
//             joining a backlog longer than the CE threshold gets ECN CE if
//             ECT. Either way a GSO packet is judged against the limit on
//             its first frame (datapath/gso_gate.hpp)
//   head      DRR picks the flow, CoDel may take frames from its head:
//             ECN CE if ECN-capable (ce_marked), else drop_aqm
//   transmit  the engine picked the class: its head frame goes on the TX ring
//   sent      the kernel consumed it: tx_*, and it leaves backlog_*
//   overflow  the buffer cannot keep the fill rings supplied: drop from the
//             longest backlogs (drop_overflow, datapath/overflow.hpp), inside
//             a class from the heads of its fattest flows
//   expire    a deleted class keeps what its rate sends in the drain time,
//             the rest is dropped: drop_deleted
//   shutdown  what is still queued when the daemon stops: drop_shutdown
//
// backlog_frames/bytes in pacer_stats count a frame from the moment it is
// queued until the kernel took it from the TX ring, so a killed daemon's
// backlog is exactly what it lost (the next one counts it as drop_died).
#pragma once

#include "core/engine.hpp"
#include "core/framing.hpp"
#include "daemon/class_table.hpp"
#include "daemon/pacer_maps.hpp"
#include "datapath/flow_queues.hpp"
#include "datapath/overflow.hpp"
#include "datapath/xsk.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::daemon {

class ClassQueues final : public datapath::XskPlane::TxObserver, datapath::AqmVerdict {
  public:
    ClassQueues(datapath::XskPlane &plane, Engine &engine, ClassTable &table, PacerMaps &maps,
                const Framing &framing);

    // A frame taken from a pacer socket (Held, its tag in front) at now.
    void receive(uint32_t frame, uint64_t now);
    // The engine decided on this class's head frame: onto the TX ring.
    void transmit_head(uint32_t handle, uint64_t now);
    // What the kernel takes from the TX ring (XskPlane::kick).
    void sent(uint32_t frame, uint32_t len) override;
    void unsent(uint32_t frame, uint32_t len) override;
    void gaps_sent(int64_t frames, int64_t wire_bytes) override;
    // Drops from the longest backlogs when the buffer cannot refill the
    // sockets' fill rings. Returns the frames dropped.
    uint64_t relieve_overflow();
    // Deleted classes: a paced one keeps what its rate sends in
    // PSPXDP_DELETE_DRAIN_NS, the rest is dropped; past its deadline,
    // everything still queued is (shared.h). drop_deleted.
    void expire_drains(uint64_t now_ns);
    // Everything queued, at shutdown.
    uint64_t drop_all_queued();

    // Frames queued, over all classes.
    uint64_t queued_frames() const;
    // "" when every frame is counted where it is: the queues hold what the
    // plane says is Held, and pacer_stats' backlogs add up to Held + the
    // frames on the TX ring the kernel has not taken.
    std::string check_backlogs() const;

    const datapath::FlowCounters &flow_counters() const { return flows_.counters(); }

  private:
    bool at_limit(const ClassState &c, uint32_t slot, uint32_t l2) const;
    bool mark(uint32_t slot, uint32_t frame) override;
    void drop(uint32_t slot, uint32_t frame) override;
    void discard(uint32_t slot, uint32_t frame, __u64 pspxdp_class_counters::*cause);
    void publish_flows(uint32_t slot);
    void keep_bytes(uint32_t slot, uint64_t budget_bytes, uint64_t now);
    uint64_t drop_head(uint32_t slot, uint64_t n, __u64 pspxdp_class_counters::*cause,
                       uint64_t now);
    uint64_t drop_all(uint32_t slot, __u64 pspxdp_class_counters::*cause, uint64_t now);
    // After the head of a class may have changed: DRR and CoDel choose it,
    // the engine is told, the backlogged set kept.
    void head_changed(uint32_t slot, ClassState &c, uint64_t now);

    datapath::XskPlane &plane_;
    Engine &engine_;
    ClassTable &table_;
    PacerMaps &maps_;
    Framing framing_;
    datapath::FlowQueues flows_;
    std::vector<datapath::Backlog> scratch_;
};

} // namespace pspxdp::daemon
