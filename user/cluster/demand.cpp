// docs/design.md §11.2.
#include "cluster/demand.hpp"

#include <algorithm>

namespace pspxdp::cluster {

void DemandEstimator::restart(uint64_t from_ns) {
    while (!recent_.empty() && recent_.front().ns < from_ns) recent_.pop_front();
    since_ns_ = recent_.empty() ? 0 : recent_.front().ns;
}

uint64_t DemandEstimator::sample(uint64_t now_ns, const DemandWindow &w, uint64_t budget_bps) {
    uint64_t d = estimate(now_ns, w, budget_bps);
    // Limited at its rate within the last kReleaseNs, and its offer not
    // clearly below it: it wants at least what it gets, whatever offer was
    // measured (frames lost before the pacer counts them read low, and a
    // demand that followed them would step down by a correction at a time).
    if (now_ns < at_rate_until_ns_) d = std::max(d, std::min(w.applied_bps, budget_bps));
    return reported_bps_ = d;
}

uint64_t DemandEstimator::estimate(uint64_t now_ns, const DemandWindow &w, uint64_t budget_bps) {
    // Next to nothing offered (a class idle, or its transfer ended) and
    // nothing limited for kIdleNs: the demand is what it offers now (its
    // share goes to the others), and a start from here is measured afresh.
    // Shorter, it is a window of the mean (a daemon that did not run takes
    // nothing in, and catches up the next window; senders stalled for 150
    // ms at once on the loaded lab machine).
    uint64_t idle_bps = budget_bps / 1000;
    bool idle = !w.limited && w.offered_bps < idle_bps;
    if (!idle)
        idle_since_ns_ = 0;
    else if (idle_since_ns_ == 0)
        idle_since_ns_ = now_ns;
    if (idle && (since_ns_ == 0 || now_ns - idle_since_ns_ >= kIdleNs)) {
        unsatisfied_ = false;
        below_since_ns_ = 0;
        satisfied_bps_ = held_bps_ = tight_bps_ = tight_base_bps_ = 0;
        recent_.clear();
        since_ns_ = measure_from_ns_ = at_rate_until_ns_ = 0;
        return w.offered_bps;
    }
    if (since_ns_ == 0) since_ns_ = measure_from_ns_ = now_ns;
    recent_.push_back({now_ns, w.offered_bps, w.delivered_bps});
    while (recent_.front().ns + kHoldNs < now_ns) recent_.pop_front();
    if (idle) return reported_bps_;
    // Means over the samples of (from, to] (from 0: every sample).
    auto mean = [&](uint64_t from_ns, uint64_t to_ns, bool delivered) {
        uint64_t sum = 0, n = 0;
        for (const Sample &x : recent_)
            if ((x.ns > from_ns || from_ns == 0) && x.ns <= to_ns)
                sum += delivered ? x.delivered_bps : x.offered_bps, ++n;
        return n ? sum / n : 0;
    };
    const uint64_t last_from = now_ns - std::min(now_ns, kReleaseNs);
    // The room asked is filled while the offer is near it, given.
    if (tight_bps_ == 0 || w.applied_bps < tight_bps_ ||
        mean(last_from, now_ns, false) * 64 <= tight_base_bps_ * 65)
        probe_low_ns_ = now_ns;
    // A drop while it offers clearly less than its rate is a burst (a
    // sender that stalled and caught up), not a limit.
    bool below = w.offered_bps * 8 < w.applied_bps * 7;
    if (mean(last_from, now_ns, false) * 8 < w.applied_bps * 7)
        at_rate_until_ns_ = 0;
    else if (w.limited && !below)
        at_rate_until_ns_ = now_ns + kReleaseNs;
    if (w.limited && !below) {
        // A sender that does not back off offers more than goes out (drops,
        // a queue that grows): its offer is its demand, limited or not (a
        // UDP sender above its rate, or one at its demand whose pacer
        // delivers less than its rate). One whose offer is what went out
        // (within 1/32, over kReleaseNs) is held at what it gets.
        uint64_t offered = mean(last_from, now_ns, false);
        uint64_t delivered = mean(last_from, now_ns, true);
        // (Clearly less than went out: a queue that fills its limit
        // drains, a sender that slowed: the drops are no news.)
        const bool drains = offered * 32 < delivered * 31;
        if (drains && unsatisfied_) return budget_bps;
        if (offered * 32 <= delivered * 33 && !drains) {
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
            // At its demand: a pacer short of its rate (late on a loaded
            // machine), or an estimate a little low, or a sender that wants
            // more. It asks its mean offer (of up to kHoldNs: one of
            // kReleaseNs is noisy) if higher and 1/32 more, once: a
            // sender that wants more fills that room (its mean offer of
            // kReleaseNs past its demand by more than 1/64 in every window
            // for two kReleaseNs) and is limited there, then it is
            // unsatisfied; one that does not stays (its drops there are the
            // pacer's).
            if (steady && tight_bps_ == 0) {
                held_bps_ = std::max(held_bps_, std::min(budget_bps, mean(0, now_ns, false)));
                tight_bps_ = std::min(budget_bps, held_bps_ + held_bps_ / 32);
                tight_base_bps_ = held_bps_;
                return satisfied_bps_ = tight_bps_;
            }
            if (steady && now_ns - probe_low_ns_ < 2 * kReleaseNs)
                return satisfied_bps_ = std::max(held_bps_, tight_bps_);
            // Limited at its rate (or the room it asked) and offering it:
            // unsatisfied.
            unsatisfied_ = true;
            below_since_ns_ = 0;
            satisfied_bps_ = held_bps_ = tight_bps_ = tight_base_bps_ = 0;
            return budget_bps;
        }
        if (unsatisfied_) {
            // Its offer shows now (more than goes out): satisfied at it,
            // measured from here.
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
    // late wake-up and its catch-up do not), and is corrected when the mean
    // of a full kHoldNs moved by more than 1/32 (a bursty sender's windows
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
        // A demand the level caps (it and the new one well above its rate)
        // moves nothing: not news until its rate comes near it.
        auto capped = [&](uint64_t x) { return std::min(x, held_bps_) * 16 > w.applied_bps * 17; };
        if ((up || down) && !capped(std::min(budget_bps, m1))) {
            held_bps_ = std::min(budget_bps, m1);
            tight_bps_ = tight_base_bps_ = 0;
            restart(last_from + 1);
        } else if (now_ns - since_ns_ >= kHoldNs - kReleaseNs / 4 &&
                   (all * 32 > held_bps_ * 33 || all * 32 < held_bps_ * 31) && !capped(all)) {
            held_bps_ = all;
            tight_bps_ = tight_base_bps_ = 0;
        }
    }
    // The room a short pacer got is kept while the offer stays near the
    // demand it was asked at, and is not needed once the demand passes it.
    if (tight_bps_ != 0 && (held_bps_ * 8 < tight_base_bps_ * 7 || held_bps_ >= tight_bps_))
        tight_bps_ = tight_base_bps_ = 0;
    return satisfied_bps_ = std::max(held_bps_, tight_bps_);
}

} // namespace pspxdp::cluster
