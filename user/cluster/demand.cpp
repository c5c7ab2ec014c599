// docs/design.md §11.2.
#include "cluster/demand.hpp"

#include <algorithm>

namespace pspxdp::cluster {

void DemandEstimator::restart(uint64_t from_ns) {
    while (!recent_.empty() && recent_.front().ns < from_ns) recent_.pop_front();
    since_ns_ = recent_.empty() ? 0 : recent_.front().ns;
}

uint64_t DemandEstimator::sample(uint64_t now_ns, const DemandWindow &w, uint64_t budget_bps) {
    return reported_bps_ = estimate(now_ns, w, budget_bps);
}

uint64_t DemandEstimator::estimate(uint64_t now_ns, const DemandWindow &w, uint64_t budget_bps) {
    // Next to nothing offered (a class idle, or its transfer ended) and
    // nothing limited: the demand is what it offers now (its share goes to
    // the others at once), and a start from here is measured afresh.
    uint64_t idle_bps = budget_bps / 1000;
    if (!w.limited && w.offered_bps < idle_bps) {
        unsatisfied_ = false;
        below_since_ns_ = 0;
        satisfied_bps_ = held_bps_ = tight_bps_ = tight_base_bps_ = 0;
        recent_.clear();
        since_ns_ = measure_from_ns_ = 0;
        return w.offered_bps;
    }
    if (since_ns_ == 0) since_ns_ = measure_from_ns_ = now_ns;
    recent_.push_back({now_ns, w.offered_bps, w.delivered_bps});
    while (recent_.front().ns + kHoldNs < now_ns) recent_.pop_front();
    // Means over the samples of (from, to] (from 0: every sample).
    auto mean = [&](uint64_t from_ns, uint64_t to_ns, bool delivered) {
        uint64_t sum = 0, n = 0;
        for (const Sample &x : recent_)
            if ((x.ns > from_ns || from_ns == 0) && x.ns <= to_ns)
                sum += delivered ? x.delivered_bps : x.offered_bps, ++n;
        return n ? sum / n : 0;
    };
    const uint64_t last_from = now_ns - std::min(now_ns, kReleaseNs);
    // A drop while it offers clearly less than its rate is a burst (a
    // sender that stalled and caught up), not a limit.
    bool below = w.offered_bps * 8 < w.applied_bps * 7;
    if (w.limited && !below) {
        // A sender that does not back off offers more than goes out (drops,
        // a queue that grows): its offer is its demand, limited or not (a
        // UDP sender above its rate, or one at its demand whose pacer
        // delivers less than its rate). One whose offer is what went out
        // (within 1/32, over kReleaseNs) is held at what it gets.
        uint64_t offered = mean(last_from, now_ns, false);
        uint64_t delivered = mean(last_from, now_ns, true);
        // (The window alone too: a queue that drained before its rate fell
        // does not hide one that grows now.)
        if (offered * 32 <= delivered * 33 && w.offered_bps * 32 <= w.delivered_bps * 33) {
            uint64_t d = satisfied_bps_;
            bool steady = !unsatisfied_ && d != 0;
            // Its mean offer well below its rate (under 7/8): a burst of a
            // sender catching up, not a demand.
            if (steady && offered * 8 < w.applied_bps * 7) return d;
            if (steady && w.applied_bps < d) {
                // Held down by its rate (the epoch that gives it its demand
                // is on its way): no news; it offers at least its demand.
                Sample &x = recent_.back();
                uint64_t up = std::max(w.offered_bps, held_bps_) - w.offered_bps;
                x.offered_bps += up;
                x.delivered_bps += up;
                return d;
            }
            // At its demand, with a pacer that delivered less than its rate
            // (by more than 1/32; late on a loaded machine): a sender that
            // backs off reads that as a limit. Room for what the pacer
            // misses (at most three sixteenths), once.
            if (steady && tight_bps_ == 0 && delivered * 32 < w.applied_bps * 31 &&
                delivered != 0) {
                uint64_t room = std::min(held_bps_ * 3 / 16,
                                         (w.applied_bps - delivered) * held_bps_ / delivered +
                                             held_bps_ / 32);
                tight_bps_ = std::min(budget_bps, held_bps_ + room);
                tight_base_bps_ = held_bps_;
            }
            if (steady && w.applied_bps < tight_bps_) return satisfied_bps_ = tight_bps_;
            // Limited at its rate (or the room it asked): unsatisfied.
            unsatisfied_ = true;
            below_since_ns_ = 0;
            satisfied_bps_ = held_bps_ = tight_bps_ = tight_base_bps_ = 0;
            return budget_bps;
        }
        if (unsatisfied_) {
            // Its offer shows now: satisfied at it, measured from here.
            unsatisfied_ = false;
            held_bps_ = tight_bps_ = tight_base_bps_ = 0;
            restart(last_from + 1);
            measure_from_ns_ = since_ns_;
        }
        below_since_ns_ = 0;
    } else {
        // Offering clearly less than its rate, with no limit: satisfied
        // once that has lasted kReleaseNs. At or near its rate it may want
        // more (a sender held at its share, between two marks): as it was.
        if (!below)
            below_since_ns_ = 0;
        else if (below_since_ns_ == 0)
            below_since_ns_ = now_ns;
        if (unsatisfied_) {
            if (below_since_ns_ == 0 || now_ns - below_since_ns_ < kReleaseNs) return budget_bps;
            // Released: what it offered while it was below, not before.
            unsatisfied_ = false;
            restart(below_since_ns_);
        }
    }
    // Satisfied: the held mean offer. It moves at once when the means of
    // the last two kReleaseNs both moved by more than 1/8 the same way (a
    // change: it takes the last one's, and its history starts there; one
    // late wake-up and its catch-up do not), and is corrected when the mean of a
    // full kHoldNs moved by more than 1/32 (a bursty sender's windows
    // cancel in it).
    uint64_t all = std::min(budget_bps, mean(0, now_ns, false));
    if (measure_from_ns_ != 0) {
        // A start (from idle, or a limit that showed its offer): its first
        // window (which a sender starting inside it reads low) is left out;
        // the second gives the demand, the mean of kReleaseNs after the
        // first corrects it if it is more than 1/16 off.
        if (now_ns == measure_from_ns_) return reported_bps_;
        uint64_t m = std::min(budget_bps, mean(measure_from_ns_, now_ns, false));
        if (held_bps_ == 0) {
            held_bps_ = m;
        } else if (now_ns - measure_from_ns_ >= kReleaseNs + kReleaseNs / 8) {
            if (m * 16 > held_bps_ * 17 || m * 16 < held_bps_ * 15) held_bps_ = m;
            restart(measure_from_ns_ + 1);
            measure_from_ns_ = 0;
        }
    } else if (held_bps_ == 0) {
        held_bps_ = all;
    } else if (now_ns - since_ns_ >= 2 * kReleaseNs - kReleaseNs / 4) {
        const uint64_t prev_from = last_from - std::min(last_from, kReleaseNs);
        uint64_t m1 = mean(last_from, now_ns, false), m0 = mean(prev_from, last_from, false);
        bool up = m1 * 8 > held_bps_ * 9 && m0 * 8 > held_bps_ * 9;
        bool down = m1 * 8 < held_bps_ * 7 && m0 * 8 < held_bps_ * 7;
        if (up || down) {
            held_bps_ = std::min(budget_bps, m1);
            restart(last_from + 1);
        } else if (now_ns - since_ns_ >= kHoldNs - kReleaseNs / 4 &&
                   (all * 32 > held_bps_ * 33 || all * 32 < held_bps_ * 31)) {
            held_bps_ = all;
        }
    }
    // The room a short pacer got is kept while the offer stays near the
    // demand it was asked at, and is not needed once the demand passes it.
    if (tight_bps_ != 0 && (held_bps_ * 8 < tight_base_bps_ * 7 || held_bps_ >= tight_bps_))
        tight_bps_ = tight_base_bps_ = 0;
    return satisfied_bps_ = std::max(held_bps_, tight_bps_);
}

} // namespace pspxdp::cluster
