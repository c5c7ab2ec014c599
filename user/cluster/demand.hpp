// A host's demand from what its class shows (docs/design.md §11.2): the
// class's arrival rate is capped by the rate applied to it (a TCP sender
// held at its share never offers more than the share), so a class that is
// limited (frames dropped at its limit, CE-marked or waiting in a backlog)
// says "unsatisfied", which max-min reads as wanting the whole budget; a
// satisfied class asks for its arrival rate plus headroom to grow into. Both
// are held a while, so one quiet window does not drop a host to its floor.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

namespace pspxdp::cluster {

class DemandEstimator {
  public:
    // How long a limited sample keeps the host unsatisfied, and over how
    // long the satisfied demand is the highest arrival rate seen.
    static constexpr uint64_t kHoldNs = 600'000'000;
    // Headroom for a satisfied host, as a fraction: 1/16.
    static constexpr uint64_t kHeadroomShift = 4;

    // One window's sample: what arrived (bit/s), whether the class was
    // limited during it, the group's budget (the "unsatisfied" demand).
    uint64_t sample(uint64_t now_ns, uint64_t arrival_bps, bool limited, uint64_t budget_bps);

  private:
    uint64_t limited_until_ns_ = 0;
    std::deque<std::pair<uint64_t, uint64_t>> recent_; // (time, arrival)
};

} // namespace pspxdp::cluster
