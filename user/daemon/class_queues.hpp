// What happens to a frame between the pacer's sockets and the wire: each
// class's FIFO of UMEM frames, and every way a frame leaves it, counted in
// the class's pacer_stats slot.
//
//   receive   tag -> class; over the class limit: drop_limit; joining a
//             backlog longer than the CE threshold: ECN CE if ECN-capable
//             (ce_marked); else queued (backlog_*)
//   transmit  the engine picked the class: its head frame goes on the TX ring
//   sent      the kernel consumed it: tx_*, and it leaves backlog_*
//   overflow  the buffer cannot keep the fill rings supplied: drop from the
//             heads of the longest backlogs (drop_overflow, datapath/overflow.hpp)
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
#include "datapath/overflow.hpp"
#include "datapath/xsk.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::daemon {

class ClassQueues final : public datapath::XskPlane::TxObserver {
  public:
    ClassQueues(datapath::XskPlane &plane, Engine &engine, ClassTable &table, PacerMaps &maps,
                const Framing &framing)
        : plane_(plane), engine_(engine), table_(table), maps_(maps), framing_(framing) {}

    // A frame taken from a pacer socket (Held, its tag in front).
    void receive(uint32_t frame);
    // The engine decided on this class's head frame: onto the TX ring.
    void transmit_head(uint32_t handle);
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

    // Frames in the FIFOs, over all classes.
    uint64_t queued_frames() const;
    // "" when every frame is counted where it is: the FIFOs hold what the
    // plane says is Held, and pacer_stats' backlogs add up to Held + the
    // frames on the TX ring the kernel has not taken.
    std::string check_backlogs() const;

  private:
    void keep_oldest(uint32_t slot, uint64_t budget_bytes);
    uint64_t drop_head(uint32_t slot, uint64_t n, __u64 pspxdp_class_counters::*cause);
    // After the head of a class changed: tell the engine, keep the backlogged set.
    void head_changed(uint32_t slot, ClassState &c);

    datapath::XskPlane &plane_;
    Engine &engine_;
    ClassTable &table_;
    PacerMaps &maps_;
    Framing framing_;
    std::vector<datapath::Backlog> scratch_;
};

} // namespace pspxdp::daemon
