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
