#include "daemon/class_queues.hpp"

#include "common/clock.hpp"
#include "core/units.hpp"
#include "datapath/ecn.hpp"

#include <cstring>

namespace pspxdp::daemon {

namespace {
// Frames an overflow frees beyond what the fill rings lack: fq_codel's drop
// batch, so that a full buffer is not rescanned for every frame.
constexpr uint64_t kOverflowBatchFrames = 64;
} // namespace

ClassQueues::ClassQueues(datapath::XskPlane &plane, Engine &engine, ClassTable &table,
                         PacerMaps &maps, const Framing &framing)
    : plane_(plane), engine_(engine), table_(table), maps_(maps), framing_(framing),
      flows_(plane.table(), plane.frames(), framing.mtu_unit_bytes()) {}

bool ClassQueues::at_limit(const ClassState &c, uint32_t slot, uint32_t l2) const {
    const datapath::ClassFlows &q = flows_.of(slot);
    return q.frames >= c.limits.limit_frames && q.bytes + l2 > c.limits.limit_bytes;
}

void ClassQueues::receive(uint32_t frame, uint64_t now) {
    pspxdp_daemon_stats &d = maps_.daemon();
    ++d.rx_frames;
    pspxdp_tag tag{};
    const uint8_t *prefix = plane_.take_prefix(frame);
    if (prefix) std::memcpy(&tag, prefix, sizeof(tag));
    ClassState *c = prefix ? table_.find(tag.slot, pspxdp_classid_raw(tag.classid)) : nullptr;
    if (!c) {
        ++d.unknown_class;
        plane_.release(frame);
        return;
    }
    const uint32_t slot = tag.slot;
    const uint32_t len = plane_.meta(frame).len;
    const uint32_t l2 = framing_.l2_bytes(len);
    pspxdp_class_counters &pc = maps_.slot(slot);
    ++pc.rx_frames;
    pc.rx_bytes += l2;
    if (!plane_.sendable(len)) {
        ++pc.drop_invalid;
        plane_.release(frame);
        return;
    }
    // A GSO packet is judged on its first frame (datapath/gso_gate.hpp).
    const bool limited = at_limit(*c, slot, l2);
    if (c->gso.came_at_limit(tag.flow_hash, tag.segs, limited)) {
        if (c->limits.flows) {
            // The frame is taken and the head of the class's fattest flow
            // goes instead (fq_codel's rule): the flow that builds the
            // queue pays, and a sparse flow's frame still gets in.
            if (limited) drop_head(slot, 1, &pspxdp_class_counters::drop_limit, now);
        } else {
            ++pc.drop_limit;
            plane_.release(frame);
            return;
        }
    }
    const datapath::ClassFlows &q = flows_.of(slot);
    // Flows off: one FIFO, ECN CE above the backlog threshold (as before
    // flows). Flows on, CoDel marks at the head instead (head_changed).
    if (!c->limits.flows && q.bytes > c->limits.ce_bytes &&
        datapath::mark_ce(plane_.data(frame), len) == datapath::EcnMark::Marked)
        ++pc.ce_marked;
    plane_.table()[frame].owner = slot;
    const bool was_empty = q.empty();
    const uint64_t new_before = flows_.counters().new_flows;
    flows_.enqueue(slot, c->limits.flows ? tag.flow_hash : 0, frame, l2, now);
    if (c->limits.flows) pc.new_flows += flows_.counters().new_flows - new_before;
    publish_flows(slot);
    ++pc.backlog_frames;
    pc.backlog_bytes += l2;
    if (was_empty) {
        head_changed(slot, *c, now);
        table_.mark_backlogged(slot);
    }
}

// CoDel's verdict on a frame (flow_queues.hpp): marked if ECN-capable, else
// dropped here and counted.
bool ClassQueues::mark(uint32_t slot, uint32_t frame) {
    if (datapath::mark_ce(plane_.data(frame), plane_.meta(frame).len) != datapath::EcnMark::Marked)
        return false;
    ++maps_.slot(slot).ce_marked;
    return true;
}

void ClassQueues::drop(uint32_t slot, uint32_t frame) {
    discard(slot, frame, &pspxdp_class_counters::drop_aqm);
}

// A queued frame leaves without being sent: counted under `cause`.
void ClassQueues::discard(uint32_t slot, uint32_t frame, __u64 pspxdp_class_counters::*cause) {
    pspxdp_class_counters &pc = maps_.slot(slot);
    ++(pc.*cause);
    --pc.backlog_frames;
    pc.backlog_bytes -= flows_.frame_bytes(frame);
    plane_.release(frame);
}

void ClassQueues::publish_flows(uint32_t slot) {
    const datapath::ClassFlows &q = flows_.of(slot);
    pspxdp_class_counters &pc = maps_.slot(slot);
    pc.active_flows = q.flows();
    pc.sparse_flows = q.sparse;
    pc.bulk_flows = q.bulk;
}

void ClassQueues::head_changed(uint32_t slot, ClassState &c, uint64_t now) {
    const uint32_t f = flows_.head(slot, c.limits.aqm, now, *this);
    publish_flows(slot);
    if (f == datapath::kNoFrame) {
        engine_.set_empty(c.handle, now);
        table_.mark_empty(slot);
    } else {
        engine_.set_head(c.handle, plane_.meta(f).len, now);
    }
}

void ClassQueues::transmit_head(uint32_t handle, uint64_t now) {
    const uint32_t slot = table_.slot_of(handle);
    ClassState &c = table_.at(slot);
    const uint32_t f = flows_.pop(slot);
    if (!plane_.tx_frame(f)) {
        // The caller reserved the ring slot, so only a frame in the wrong
        // state gets here (a bug, counted by the plane): not sent.
        discard(slot, f, &pspxdp_class_counters::drop_invalid);
    }
    head_changed(slot, c, now);
}

void ClassQueues::sent(uint32_t frame, uint32_t len) {
    pspxdp_daemon_stats &d = maps_.daemon();
    const uint32_t wire = framing_.wire_bytes(len);
    pspxdp_class_counters &pc = maps_.slot(plane_.meta(frame).owner);
    const uint32_t l2 = framing_.l2_bytes(len);
    ++pc.tx_frames;
    pc.tx_bytes += l2;
    --pc.backlog_frames;
    pc.backlog_bytes -= l2;
    ++d.wire_frames;
    d.wire_frame_bytes += wire;
}

void ClassQueues::unsent(uint32_t frame, uint32_t len) {
    pspxdp_daemon_stats &d = maps_.daemon();
    const uint32_t wire = framing_.wire_bytes(len);
    pspxdp_class_counters &pc = maps_.slot(plane_.meta(frame).owner);
    const uint32_t l2 = framing_.l2_bytes(len);
    --pc.tx_frames;
    pc.tx_bytes -= l2;
    ++pc.backlog_frames;
    pc.backlog_bytes += l2;
    --d.wire_frames;
    d.wire_frame_bytes -= wire;
}

void ClassQueues::gaps_sent(int64_t frames, int64_t wire_bytes) {
    pspxdp_daemon_stats &d = maps_.daemon();
    d.gap_frames += uint64_t(frames); // negative: taken back (unsigned wrap)
    d.gap_bytes += uint64_t(wire_bytes);
}

uint64_t ClassQueues::drop_head(uint32_t slot, uint64_t n, __u64 pspxdp_class_counters::*cause,
                                uint64_t now) {
    const uint64_t dropped =
        flows_.drop_fattest(slot, n, [&](uint32_t f) { discard(slot, f, cause); });
    if (dropped) head_changed(slot, table_.at(slot), now);
    return dropped;
}

uint64_t ClassQueues::relieve_overflow() {
    uint64_t short_frames = plane_.fill_shortfall();
    if (!short_frames) return 0;
    scratch_.clear();
    for (uint32_t slot : table_.backlogged())
        scratch_.push_back(datapath::Backlog{slot, flows_.of(slot).frames});
    const uint64_t now = common::mono_ns(); // a head chosen again runs CoDel
    uint64_t dropped = 0;
    for (const auto &cut : datapath::plan_overflow(scratch_, short_frames + kOverflowBatchFrames))
        dropped += drop_head(cut.id, cut.frames, &pspxdp_class_counters::drop_overflow, now);
    return dropped;
}

void ClassQueues::expire_drains(uint64_t now) {
    for (uint32_t slot : table_.draining()) {
        ClassState &c = table_.at(slot);
        if (!c.drain_cut) {
            c.drain_cut = true;
            if (c.rate_bps)
                keep_bytes(slot, bytes_in_ns_floor(PSPXDP_DELETE_DRAIN_NS, c.rate_bps), now);
        }
        if (now >= c.drain_deadline_ns && !flows_.of(slot).empty())
            drop_all(slot, &pspxdp_class_counters::drop_deleted, now);
    }
}

void ClassQueues::keep_bytes(uint32_t slot, uint64_t budget_bytes, uint64_t now) {
    const uint32_t dropped = flows_.keep_bytes(slot, budget_bytes, [&](uint32_t f) {
        discard(slot, f, &pspxdp_class_counters::drop_deleted);
    });
    if (dropped) head_changed(slot, table_.at(slot), now);
}

// Everything class slot holds, in one pass over its flows (drop_head would
// look for the fattest flow once per frame).
uint64_t ClassQueues::drop_all(uint32_t slot, __u64 pspxdp_class_counters::*cause, uint64_t now) {
    uint64_t dropped = 0;
    flows_.drain(slot, [&](uint32_t f) {
        discard(slot, f, cause);
        ++dropped;
    });
    if (dropped) head_changed(slot, table_.at(slot), now);
    return dropped;
}

uint64_t ClassQueues::drop_all_queued() {
    // drop_all changes the backlogged set: walk a copy.
    std::vector<uint32_t> slots = table_.backlogged();
    const uint64_t now = common::mono_ns();
    uint64_t dropped = 0;
    for (uint32_t slot : slots)
        dropped += drop_all(slot, &pspxdp_class_counters::drop_shutdown, now);
    return dropped;
}

uint64_t ClassQueues::queued_frames() const {
    uint64_t n = 0;
    for (uint32_t slot : table_.backlogged()) n += flows_.of(slot).frames;
    return n;
}

std::string ClassQueues::check_backlogs() const {
    std::string detail;
    const uint64_t queued = queued_frames();
    if (queued != plane_.held_frames())
        detail += "FIFOs hold " + std::to_string(queued) + " frames, the plane " +
                  std::to_string(plane_.held_frames()) + " Held; ";
    uint64_t backlog = 0;
    const uint32_t end = std::min<uint32_t>(maps_.state().slots_end, PSPXDP_MAX_CLASSES);
    for (uint32_t s = 1; s < end; ++s) backlog += maps_.slot(s).backlog_frames;
    if (backlog != plane_.held_frames() + plane_.frames_unsent())
        detail += "pacer_stats backlogs add up to " + std::to_string(backlog) +
                  " frames, the plane holds " + std::to_string(plane_.held_frames()) + " + " +
                  std::to_string(plane_.frames_unsent()) + " unsent on the TX ring; ";
    return detail;
}

} // namespace pspxdp::daemon
