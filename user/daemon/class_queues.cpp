#include "daemon/class_queues.hpp"

#include "core/units.hpp"
#include "datapath/ecn.hpp"

#include <cstring>

namespace pspxdp::daemon {

namespace {
// Frames an overflow frees beyond what the fill rings lack: fq_codel's drop
// batch, so that a full buffer is not rescanned for every frame.
constexpr uint64_t kOverflowBatchFrames = 64;
} // namespace

void ClassQueues::receive(uint32_t frame) {
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
    if (c->fifo.frames >= c->limits.limit_frames && c->fifo.bytes + l2 > c->limits.limit_bytes) {
        ++pc.drop_limit;
        plane_.release(frame);
        return;
    }
    if (c->fifo.bytes > c->limits.ce_bytes &&
        datapath::mark_ce(plane_.data(frame), len) == datapath::EcnMark::Marked)
        ++pc.ce_marked;
    plane_.table()[frame].owner = slot;
    const bool was_empty = c->fifo.empty();
    c->fifo.push(plane_.table(), frame, l2);
    ++pc.backlog_frames;
    pc.backlog_bytes += l2;
    if (was_empty) {
        engine_.set_head(c->handle, len);
        table_.mark_backlogged(slot);
    }
}

void ClassQueues::head_changed(uint32_t slot, ClassState &c) {
    if (c.fifo.empty()) {
        engine_.set_empty(c.handle);
        table_.mark_empty(slot);
    } else {
        engine_.set_head(c.handle, plane_.meta(c.fifo.head).len);
    }
}

void ClassQueues::transmit_head(uint32_t handle) {
    const uint32_t slot = table_.slot_of(handle);
    ClassState &c = table_.at(slot);
    const uint32_t f = c.fifo.head;
    const uint32_t l2 = framing_.l2_bytes(plane_.meta(f).len);
    c.fifo.pop(plane_.table(), l2);
    if (!plane_.tx_frame(f)) {
        // The caller reserved the ring slot, so only a frame in the wrong
        // state gets here (a bug, counted by the plane): not sent.
        pspxdp_class_counters &pc = maps_.slot(slot);
        ++pc.drop_invalid;
        --pc.backlog_frames;
        pc.backlog_bytes -= l2;
        plane_.release(f);
    }
    head_changed(slot, c);
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

uint64_t ClassQueues::drop_head(uint32_t slot, uint64_t n, __u64 pspxdp_class_counters::*cause) {
    ClassState &c = table_.at(slot);
    pspxdp_class_counters &pc = maps_.slot(slot);
    uint64_t dropped = 0;
    for (; dropped < n && !c.fifo.empty(); ++dropped) {
        const uint32_t f = c.fifo.head;
        const uint32_t l2 = framing_.l2_bytes(plane_.meta(f).len);
        c.fifo.pop(plane_.table(), l2);
        plane_.release(f);
        ++(pc.*cause);
        --pc.backlog_frames;
        pc.backlog_bytes -= l2;
    }
    if (dropped) head_changed(slot, c);
    return dropped;
}

uint64_t ClassQueues::relieve_overflow() {
    uint64_t short_frames = plane_.fill_shortfall();
    if (!short_frames) return 0;
    scratch_.clear();
    for (uint32_t slot : table_.backlogged())
        scratch_.push_back(datapath::Backlog{slot, table_.at(slot).fifo.frames});
    uint64_t dropped = 0;
    for (const auto &cut : datapath::plan_overflow(scratch_, short_frames + kOverflowBatchFrames))
        dropped += drop_head(cut.id, cut.frames, &pspxdp_class_counters::drop_overflow);
    return dropped;
}

void ClassQueues::expire_drains(uint64_t now) {
    for (uint32_t slot : table_.draining()) {
        ClassState &c = table_.at(slot);
        if (!c.drain_cut) {
            c.drain_cut = true;
            if (c.rate_bps)
                keep_oldest(slot, bytes_in_ns_floor(PSPXDP_DELETE_DRAIN_NS, c.rate_bps));
        }
        if (now >= c.drain_deadline_ns && !c.fifo.empty())
            drop_head(slot, c.fifo.frames, &pspxdp_class_counters::drop_deleted);
    }
}

void ClassQueues::keep_oldest(uint32_t slot, uint64_t budget_bytes) {
    ClassState &c = table_.at(slot);
    datapath::FrameTable &t = plane_.table();
    uint32_t last = datapath::kNoFrame, kept = 0;
    uint64_t bytes = 0;
    uint32_t f = c.fifo.head;
    for (; f != datapath::kNoFrame; f = t[f].next) {
        const uint32_t l2 = framing_.l2_bytes(t[f].len);
        if (bytes + l2 > budget_bytes) break;
        bytes += l2;
        ++kept;
        last = f;
    }
    if (f == datapath::kNoFrame) return; // all of it fits
    pspxdp_class_counters &pc = maps_.slot(slot);
    for (uint32_t r = c.fifo.truncate_after(t, last, kept, bytes); r != datapath::kNoFrame;) {
        const uint32_t next = t[r].next;
        --pc.backlog_frames;
        pc.backlog_bytes -= framing_.l2_bytes(t[r].len);
        ++pc.drop_deleted;
        plane_.release(r);
        r = next;
    }
    if (!kept) head_changed(slot, c);
}

uint64_t ClassQueues::drop_all_queued() {
    // drop_head changes the backlogged set: walk a copy.
    std::vector<uint32_t> slots = table_.backlogged();
    uint64_t dropped = 0;
    for (uint32_t slot : slots)
        dropped +=
            drop_head(slot, table_.at(slot).fifo.frames, &pspxdp_class_counters::drop_shutdown);
    return dropped;
}

uint64_t ClassQueues::queued_frames() const {
    uint64_t n = 0;
    for (uint32_t slot : table_.backlogged()) n += table_.at(slot).fifo.frames;
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
