// A host's demand from what its class shows (docs/design.md §11.2): the
// offered rate, taken + dropped (rx_bytes counts every frame handed to the
// pacer, before the limit drops any) over a short window (25 ms). Two
// speeds. Becoming unsatisfied is fast: a class limited (frames dropped at
// its limit, CE-marked or dropped by CoDel in the window, while it offers
// at least 7/8 of its rate: a drop further below is a burst) may want more
// than it offers (a TCP sender held at its share never offers more than
// the share), so it is unsatisfied at once, which max-min reads as wanting
// the whole budget -- unless it is satisfied and its offer (the mean of
// the last kReleaseNs, not one window) did not grow past its demand by
// 1/4: then its drops are a pacer short of its rate (a loaded machine), no
// news while the epoch that gives it its demand is on its way, and worth
// three sixteenths more, once, if given it. It stays unsatisfied until it
// has offered clearly less than its rate (below 7/8 of it) with no limit
// for kReleaseNs; released, its demand is the mean offer of those
// kReleaseNs. A satisfied demand is slow and steady: the highest mean
// offer (over kReleaseNs) of the last kHoldNs, changed only when that
// moved by more than 1/8 (a bursty sender's windows do not move it; the
// protocol writes a move of more than 1/8). What demands leave over is
// shared by weight on top (allocator.hpp), so a host that grows has room
// before the next epoch, and is limited the next window if it needs more.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

namespace pspxdp::cluster {

class DemandEstimator {
  public:
    // How long a class must offer below 7/8 of its rate without a limit to
    // count as satisfied; the span of the mean offer.
    static constexpr uint64_t kReleaseNs = 100'000'000;
    // The span over which a satisfied demand is the highest mean offer.
    static constexpr uint64_t kHoldNs = 400'000'000;

    // One window's sample: what was offered (bit/s), whether the class was
    // limited during it, the rate applied at its end, the group's budget
    // (the most a demand can be).
    uint64_t sample(uint64_t now_ns, uint64_t offered_bps, bool limited, uint64_t applied_bps,
                    uint64_t budget_bps);

  private:
    bool unsatisfied_ = false;
    uint64_t satisfied_bps_ = 0;  // the satisfied demand returned last (0: none)
    uint64_t held_bps_ = 0;       // its steady part: the held peak of the means (0: none)
    uint64_t tight_bps_ = 0;      // the room asked for a rate too tight (0: none)
    uint64_t tight_base_bps_ = 0; // the held peak it was asked at
    uint64_t below_since_ns_ = 0; // 0: the last sample was not below
    uint64_t since_ns_ = 0;       // the first sample of the mean's history (0: none)
    std::deque<std::pair<uint64_t, uint64_t>> recent_; // (time, offered), kHoldNs
};

} // namespace pspxdp::cluster
