// docs/design.md §11.2.
#include "cluster/demand.hpp"

#include <algorithm>

namespace pspxdp::cluster {

uint64_t DemandEstimator::sample(uint64_t now_ns, uint64_t offered_bps, bool limited,
                                 uint64_t applied_bps, uint64_t budget_bps) {
    // Next to nothing offered (a class idle, or its transfer ended) and
    // nothing limited: the demand is what it offers now (its share goes to
    // the others at once), and a start from here is measured afresh.
    uint64_t idle_bps = budget_bps / 1000;
    if (!limited && offered_bps < idle_bps) {
        unsatisfied_ = false;
        below_since_ns_ = 0;
        satisfied_bps_ = held_bps_ = tight_bps_ = tight_base_bps_ = 0;
        recent_.clear();
        since_ns_ = 0;
        return offered_bps;
    }
    if (since_ns_ == 0) since_ns_ = now_ns;
    recent_.emplace_back(now_ns, offered_bps);
    while (recent_.front().first + kHoldNs < now_ns) recent_.pop_front();
    auto mean_since = [&](uint64_t from_ns) {
        uint64_t sum = 0, n = 0;
        for (const auto &[t, a] : recent_)
            if (t >= from_ns) sum += a, ++n;
        return sum / n;
    };
    uint64_t mean = mean_since(0);
    // A drop while it offers clearly less than its rate is a burst (a
    // sender that stalled and caught up), not a limit.
    bool below = offered_bps * 8 < applied_bps * 7;
    if (limited && !below) {
        uint64_t d = satisfied_bps_;
        // Satisfied, and its mean offer has not grown past its demand by
        // 1/4 (one window of a bursty sender reads high; the mean of
        // kReleaseNs does not): the drops are not a demand. Its mean well
        // below its rate (under 7/8): a burst, or a pacer short of its
        // rate (late on a loaded machine, it sends less than it should),
        // that the room above its demand absorbs: satisfied as it was.
        // Near its rate: no news while the epoch that gives it its demand
        // is on its way; given it, its rate is too tight for what it
        // offers: three sixteenths more (a move the protocol writes, room
        // for a pacer 15 % short), once. Limited again near that, or an
        // offer that grew, or no satisfied demand (a start from idle, a
        // sender held at its share): unsatisfied at once.
        bool steady = !unsatisfied_ && d != 0 && mean <= d + d / 4;
        if (!(steady && mean * 8 < applied_bps * 7)) {
            below_since_ns_ = 0;
            if (steady) {
                if (applied_bps < d) {
                    // Held down by its rate, it offers at least its demand.
                    recent_.back().second = std::max(offered_bps, held_bps_);
                    return d;
                }
                if (tight_bps_ == 0) {
                    tight_bps_ = std::min(budget_bps, applied_bps + applied_bps * 3 / 16);
                    tight_base_bps_ = held_bps_;
                }
                if (applied_bps < tight_bps_) return satisfied_bps_ = tight_bps_;
            }
            unsatisfied_ = true;
            satisfied_bps_ = held_bps_ = tight_bps_ = tight_base_bps_ = 0;
            return budget_bps;
        }
        return d;
    }
    // Offering clearly less than its rate, with no limit: satisfied once
    // that has lasted kReleaseNs. At or near its rate it may want more (a
    // sender held at its share, between two marks): as it was.
    if (!below)
        below_since_ns_ = 0;
    else if (below_since_ns_ == 0)
        below_since_ns_ = now_ns;
    if (unsatisfied_) {
        if (below_since_ns_ == 0 || now_ns - below_since_ns_ < kReleaseNs) return budget_bps;
        // Released: what it offered while it was below, not before.
        unsatisfied_ = false;
        while (recent_.front().first < below_since_ns_) recent_.pop_front();
        mean = mean_since(below_since_ns_);
        since_ns_ = below_since_ns_;
    }
    mean = std::min(budget_bps, mean);
    // Steady: the held demand rises when the mean of kHoldNs or of the
    // last kReleaseNs (a start from idle, whose first windows read low, is
    // not spread over kHoldNs of steps) grew by more than 1/8 (what the
    // protocol writes), and falls when the mean of a full kHoldNs fell by
    // more than 1/4 (the first windows of a bursty sender are no mean; a
    // fall is not urgent, and every move is an epoch).
    uint64_t recent = std::min(budget_bps, mean_since(now_ns - std::min(now_ns, kReleaseNs)));
    bool full = now_ns - since_ns_ >= kHoldNs;
    if (held_bps_ == 0 || (full && mean * 4 < held_bps_ * 3))
        held_bps_ = mean;
    else if (std::max(mean, recent) * 8 > held_bps_ * 9)
        held_bps_ = std::max(mean, recent);
    // The room a tight rate got is kept while the offer stays near the
    // demand it was asked at, and is not needed once the demand passes it.
    if (tight_bps_ != 0 && (held_bps_ * 8 < tight_base_bps_ * 7 || held_bps_ >= tight_bps_))
        tight_bps_ = tight_base_bps_ = 0;
    return satisfied_bps_ = std::max(held_bps_, tight_bps_);
}

} // namespace pspxdp::cluster
