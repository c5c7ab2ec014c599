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
        satisfied_bps_ = tight_bps_ = 0;
        recent_.clear();
        recent_.emplace_back(now_ns, offered_bps);
        return offered_bps;
    }
    recent_.emplace_back(now_ns, offered_bps);
    while (recent_.front().first + kReleaseNs < now_ns) recent_.pop_front();
    // A drop while it offers clearly less than its rate is a burst (a
    // sender that stalled and caught up), not a limit.
    bool below = offered_bps * 8 < applied_bps * 7;
    if (limited && !below) {
        below_since_ns_ = 0;
        uint64_t d = satisfied_bps_;
        // Satisfied, and its offer has not grown past its demand by 1/4
        // (a 25 ms window of a sender catching up reads high):
        // no news while the epoch that gives it its demand is on its way;
        // given it, and dropping all the same, its rate is too tight for
        // what it offers (a pacer late on a loaded machine sends less than
        // its rate): a sixteenth more, once. Limited again there, or an
        // offer that grew, or no satisfied demand (a start from idle, a
        // sender held at its share): unsatisfied at once.
        if (!unsatisfied_ && d != 0 && offered_bps <= d + d / 4) {
            if (applied_bps < d) return d;
            if (tight_bps_ == 0) tight_bps_ = std::min(budget_bps, applied_bps + applied_bps / 16);
            if (applied_bps < tight_bps_) return satisfied_bps_ = tight_bps_;
        }
        unsatisfied_ = true;
        satisfied_bps_ = tight_bps_ = 0;
        return budget_bps;
    }
    // Offering clearly less than its rate, with no limit: satisfied once
    // that has lasted kReleaseNs. At or near its rate it may want more (a
    // sender held at its share, between two marks): as it was.
    if (!below)
        below_since_ns_ = 0;
    else if (below_since_ns_ == 0)
        below_since_ns_ = now_ns;
    if (unsatisfied_ && (below_since_ns_ == 0 || now_ns - below_since_ns_ < kReleaseNs))
        return budget_bps;
    unsatisfied_ = false;
    uint64_t peak = 0;
    for (const auto &[t, a] : recent_) peak = std::max(peak, a);
    peak = std::min(budget_bps, peak);
    // The room a tight rate got is kept while the offer stays near it.
    if (tight_bps_ != 0 && peak * 8 < tight_bps_ * 7) tight_bps_ = 0;
    return satisfied_bps_ = std::max(peak, tight_bps_);
}

} // namespace pspxdp::cluster
