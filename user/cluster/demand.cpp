// docs/design.md §11.2.
#include "cluster/demand.hpp"

#include <algorithm>

namespace pspxdp::cluster {

uint64_t DemandEstimator::sample(uint64_t now_ns, uint64_t offered_bps, bool limited,
                                 uint64_t applied_bps, uint64_t budget_bps) {
    // Next to nothing offered (a class idle, or its transfer ended) and
    // nothing limited: the demand is what it offers now (its share goes to
    // the others at once).
    uint64_t idle_bps = budget_bps / 1000;
    if (!limited && offered_bps < idle_bps) {
        unsatisfied_ = false;
        below_since_ns_ = 0;
        recent_.clear();
        recent_.emplace_back(now_ns, offered_bps);
        return offered_bps;
    }
    recent_.emplace_back(now_ns, offered_bps);
    while (recent_.front().first + kReleaseNs < now_ns) recent_.pop_front();
    // Limited: unsatisfied at once. (A start from idle is not: a sender
    // below its rate is satisfied at its offer, which rises with it at
    // once, and one that meets its rate is limited.)
    if (limited) {
        unsatisfied_ = true;
        below_since_ns_ = 0;
        return budget_bps;
    }
    // Offering clearly less than its rate, with no limit: satisfied once
    // that has lasted kReleaseNs. At or near its rate it may want more (a
    // sender held at its share, between two marks): as it was.
    bool below = offered_bps * 8 < applied_bps * 7;
    if (!below) below_since_ns_ = 0;
    else if (below_since_ns_ == 0) below_since_ns_ = now_ns;
    if (unsatisfied_ && (below_since_ns_ == 0 || now_ns - below_since_ns_ < kReleaseNs))
        return budget_bps;
    unsatisfied_ = false;
    uint64_t peak = 0;
    for (const auto &[t, a] : recent_) peak = std::max(peak, a);
    return std::min(budget_bps, peak);
}

} // namespace pspxdp::cluster
