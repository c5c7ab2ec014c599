// docs/design.md §11.2.
#include "cluster/demand.hpp"

#include <algorithm>

namespace pspxdp::cluster {

uint64_t DemandEstimator::sample(uint64_t now_ns, uint64_t offered_bps, bool limited,
                                 uint64_t budget_bps) {
    // Next to nothing offered (a class idle, or its transfer ended) and
    // nothing limited: the demand is what it offers now, not held (the
    // hold would keep its share from the others for 600 ms).
    uint64_t idle_bps = budget_bps / 1000;
    if (!limited && offered_bps < idle_bps) {
        limited_until_ns_ = 0;
        recent_.clear();
        recent_.emplace_back(now_ns, offered_bps);
        return last_bps_ = offered_bps;
    }
    // A class starting from idle counts as limited: a TCP flow starting at
    // a small floor is held by its window below even that, shows no drop,
    // and would look satisfied at a few Mbit/s for seconds.
    bool was_idle = std::all_of(recent_.begin(), recent_.end(),
                                [&](const auto &r) { return r.second < idle_bps; });
    if (limited || (was_idle && offered_bps >= idle_bps)) limited_until_ns_ = now_ns + kHoldNs;
    recent_.emplace_back(now_ns, offered_bps);
    while (!recent_.empty() && recent_.front().first + kHoldNs < now_ns) recent_.pop_front();
    uint64_t peak = 0;
    for (const auto &[t, a] : recent_) peak = std::max(peak, a);
    if (now_ns < limited_until_ns_) return last_bps_ = budget_bps;
    // Satisfied: down to what it offers, half the way each window while
    // above twice that, then all of it (a jump of a third or more, which
    // the protocol writes: it writes a demand that moved by 1/8). A TCP
    // sender that was held back offers less than it will for a while (its
    // window grows back): a demand dropped to its offer at once gave its
    // share away, held it back again, and so on (the lab's dynamic run:
    // 3.7 s to converge); a sender that wants less gets there in a few
    // windows.
    peak = std::min(budget_bps, peak);
    if (last_bps_ / 2 > peak) return last_bps_ = peak + (last_bps_ - peak) / 2;
    return last_bps_ = peak;
}

} // namespace pspxdp::cluster
