// When the shared buffer runs out: which queued frames go, fq_codel's rule
// ("drop from the longest backlog") applied to the whole batch at once.
//
// Dropping one frame at a time from whichever class is longest at that
// moment brings the longest classes down to a common level and leaves every
// class below that level alone. plan_overflow() computes that outcome for n
// frames in one pass over the backlogged classes (O(b log b) for b
// backlogged classes, on an overflow event only, never per frame): each
// class above level L loses what it has above L, ties at the last frame
// resolved by input order. A class within its share of the buffer is below
// the level whenever some class is above its share, so it loses nothing.
//
// Backlogs are counted in frames: the buffer is a pool of equal chunks, and
// a class of small frames fills it as fast as a class of large ones.
#pragma once

#include <cstdint>
#include <vector>

namespace pspxdp::datapath {

struct Backlog {
    uint32_t id = 0;     // the caller's (a slot)
    uint32_t frames = 0; // queued now
};

struct Cut {
    uint32_t id = 0;
    uint32_t frames = 0; // to drop from its head
};

// Frames to drop, at most `need` in total (fewer only when less is queued).
// `backlogs` is reordered.
std::vector<Cut> plan_overflow(std::vector<Backlog> &backlogs, uint64_t need);

} // namespace pspxdp::datapath
