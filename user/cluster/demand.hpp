// A host's demand from what its class shows (docs/design.md §11.2): the
// offered rate, taken + dropped (rx_bytes counts every frame handed to the
// pacer, before the limit drops any) over a window. A class that is limited
// (frames dropped at its limit, CE-marked or dropped by CoDel in the
// window) may want more than it offers (a TCP sender held at its share
// never offers more than the share): it is unsatisfied, which max-min reads
// as wanting the whole budget. A satisfied class asks for what it offers,
// the highest seen over a hold time (one quiet window does not drop a host
// to its floor), reached from a higher demand half the way per window while above twice it (a
// TCP sender held back needs a while to offer its share again), then
// exactly; what demands leave over is shared by weight on top
// (allocator.hpp), so a host that grows has room before the next epoch.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

namespace pspxdp::cluster {

class DemandEstimator {
  public:
    // How long a limited sample keeps the host limited, and over how long
    // the satisfied demand is the highest offered rate seen.
    static constexpr uint64_t kHoldNs = 600'000'000;

    // One window's sample: what was offered (bit/s), whether the class was
    // limited during it, the group's budget (the most a demand can be).
    uint64_t sample(uint64_t now_ns, uint64_t offered_bps, bool limited, uint64_t budget_bps);

  private:
    uint64_t limited_until_ns_ = 0;
    uint64_t last_bps_ = 0;                            // the demand returned last
    std::deque<std::pair<uint64_t, uint64_t>> recent_; // (time, offered)
};

} // namespace pspxdp::cluster
