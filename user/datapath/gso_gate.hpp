// A GSO packet against a class's limit (docs/design.md §1.5). TC hands a GSO packet
// over as one skb; the pacer veth segments it, so it reaches the daemon as
// its frames one after another, each with a copy of the tag (segs = how
// many). The limit judges the packet once, on its first frame, as htb's
// FIFO counts a GSO packet as one: a packet that starts below the limit is
// taken whole even if it ends above it (the backlog may pass the limit by
// at most one GSO packet; a packet larger than the limit gets into an empty
// class whole), and one that starts at the limit is judged at the limit
// frame by frame (flows off: dropped whole; flows on: each of its frames
// makes room from the fattest flow). Cutting a packet admitted below the
// limit lost the rest of a TCP window for the price of a few frames: local
// TCP into a 20-50 Mbit/s class with limit 10ms, where a 64 KB GSO packet
// is larger than the limit, saw 176-436 retransmits.
//
// Frames of two GSO packets of one class interleaved (two CPUs sending
// into one class) are judged one by one. Pure: the caller says whether the
// class is at its limit.
#pragma once

#include <cstdint>

namespace pspxdp::datapath {

class GsoGate {
  public:
    // A frame of flow `hash` whose tag says its packet has `segs` frames,
    // arriving while the class is (at_limit) or is not at its limit.
    // Returns whether its packet came at the limit: at_limit for the first
    // frame of a packet (or a frame on its own), the first frame's verdict
    // for the packet's later frames.
    bool came_at_limit(uint32_t hash, uint32_t segs, bool at_limit) {
        if (left_ && hash_ == hash) {
            --left_;
            return at_limit_;
        }
        left_ = segs > 1 ? segs - 1 : 0;
        hash_ = hash;
        at_limit_ = at_limit;
        return at_limit;
    }

  private:
    uint32_t hash_ = 0;
    uint32_t left_ = 0; // frames of the packet still to come
    bool at_limit_ = false;
};

} // namespace pspxdp::datapath
