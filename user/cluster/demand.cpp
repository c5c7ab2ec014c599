// docs/design.md §11.2.
#include "cluster/demand.hpp"

#include <algorithm>

namespace pspxdp::cluster {

uint64_t DemandEstimator::sample(uint64_t now_ns, uint64_t arrival_bps, bool limited,
                                 uint64_t budget_bps) {
    // A class starting from idle counts as limited: a TCP flow starting
    // at a small floor is held by CE marks below even that (its window, not
    // the rate, limits it), shows no backlog, and would look satisfied at a
    // few Mbit/s for seconds (the lab's "h3 starts": 4 s).
    uint64_t idle_bps = budget_bps / 1000;
    // A class gone idle (nothing limited, next to nothing arrived) is not
    // held: its transfer ended, and the hold would keep its share from the
    // others for 600 ms (the lab's all-to-all: the host still sending got
    // the finished hosts' shares 0.7-0.9 s after they finished). A sender
    // that only paused comes back through the start-from-idle rule below,
    // unsatisfied at once.
    if (!limited && arrival_bps < idle_bps) {
        limited_until_ns_ = 0;
        recent_.clear();
        recent_.emplace_back(now_ns, arrival_bps);
        return arrival_bps + (arrival_bps >> kHeadroomShift);
    }
    bool was_idle = std::all_of(recent_.begin(), recent_.end(),
                                [&](const auto &r) { return r.second < idle_bps; });
    if (limited || (was_idle && arrival_bps >= idle_bps)) limited_until_ns_ = now_ns + kHoldNs;
    recent_.emplace_back(now_ns, arrival_bps);
    while (!recent_.empty() && recent_.front().first + kHoldNs < now_ns) recent_.pop_front();
    if (now_ns < limited_until_ns_) return budget_bps;
    uint64_t peak = 0;
    for (const auto &[t, a] : recent_) peak = std::max(peak, a);
    return std::min(budget_bps, peak + (peak >> kHeadroomShift));
}

} // namespace pspxdp::cluster
