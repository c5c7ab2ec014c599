// Per-class FIFOs of UMEM frames, intrusive: each frame has a `next` index,
// each FIFO a head, a tail and its counts. Memory is O(frames) + O(classes)
// whatever the number of classes and however the frames are spread among
// them; push and pop are O(1) and touch the frame's entry and the FIFO only.
//
// The frame entries live in a FrameTable, which the AF_XDP plane (xsk.hpp)
// also uses for what it knows of a frame (where its bytes start, how long it
// is); the FIFO layer only links them.
#pragma once

#include <cstdint>
#include <vector>

namespace pspxdp::datapath {

inline constexpr uint32_t kNoFrame = 0xffffffffu;

// What is known of one UMEM frame (chunk) while it holds a packet.
struct FrameMeta {
    uint32_t next = kNoFrame; // next frame in its FIFO
    uint32_t owner = 0;       // the caller's: the class (slot) the frame is queued for
    uint16_t offset = 0;      // where the packet starts in the chunk
    uint16_t len = 0;         // packet length
};
static_assert(sizeof(FrameMeta) == 12, "12 bytes a frame");

using FrameTable = std::vector<FrameMeta>;

struct FrameFifo {
    uint32_t head = kNoFrame;
    uint32_t tail = kNoFrame;
    uint32_t frames = 0;
    uint64_t bytes = 0; // whatever unit the caller counts in (pspxdp: L2 bytes with FCS)

    bool empty() const { return frames == 0; }

    void push(FrameTable &t, uint32_t frame, uint32_t frame_bytes) {
        t[frame].next = kNoFrame;
        if (tail == kNoFrame)
            head = frame;
        else
            t[tail].next = frame;
        tail = frame;
        ++frames;
        bytes += frame_bytes;
    }
    // The head frame; the FIFO must not be empty.
    uint32_t pop(FrameTable &t, uint32_t frame_bytes) {
        uint32_t f = head;
        head = t[f].next;
        if (head == kNoFrame) tail = kNoFrame;
        t[f].next = kNoFrame;
        --frames;
        bytes -= frame_bytes;
        return f;
    }
    // Keeps the frames up to and including `last` (kNoFrame: none), which
    // are kept_frames frames of kept_bytes; returns the first frame of the
    // rest, still linked by next, for the caller to dispose of.
    uint32_t truncate_after(FrameTable &t, uint32_t last, uint32_t kept_frames,
                            uint64_t kept_bytes) {
        uint32_t rest = last == kNoFrame ? head : t[last].next;
        if (last == kNoFrame)
            head = kNoFrame;
        else
            t[last].next = kNoFrame;
        tail = last;
        frames = kept_frames;
        bytes = kept_bytes;
        return rest;
    }
};

} // namespace pspxdp::datapath
