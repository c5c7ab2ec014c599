// A host's demand from what its class shows (docs/design.md §11.2), per
// short window (25 ms): offered (taken + dropped: rx_bytes counts every
// frame handed to the pacer, before the limit drops any), delivered (sent
// on the wire), limited (frames dropped at the limit, CE-marked or dropped
// by CoDel in the window), and the rate applied.
//
// What a limited class wants depends on its sender. One that backs off (a
// TCP sender held at its share) offers what the pacer delivers, never more
// than its share: it may want anything, so it is unsatisfied at once, which
// max-min reads as wanting the whole budget, until it has offered clearly
// less than its rate (below 7/8) with no limit for kReleaseNs (released, its
// demand is the mean offer of those kReleaseNs). One that does not back off
// (UDP, or a pacer short of its rate: a queue that grows, frames dropped)
// offers more than is delivered: its offer is what it wants, limited or not.
// So a class is unsatisfied only while limited near its rate with its offer
// within 1/32 of what went out over kReleaseNs; every other class is
// satisfied at its offer. A satisfied class limited at its demand that way
// is given its mean offer and 1/32 once, and is unsatisfied only if it
// fills that room for two kReleaseNs.
//
// A satisfied demand is steady: the mean offer, moved at once (after two
// kReleaseNs in a row) when both means of those moved by more than 1/8 the
// same way (a change), and corrected when the mean of a full kHoldNs moved
// by more than 1/32 (a bursty sender's windows do not move it; the protocol
// writes a move of more than 1/32); not while it and the new value are well
// above the rate (the level caps it). A start leaves its first window out;
// nothing offered is idle after kIdleNs. What demands leave over is shared
// by weight on top (allocator.hpp), so a host that grows has room before the
// next epoch, and is limited the next window if it needs more.
#pragma once

#include <cstdint>
#include <deque>

namespace pspxdp::cluster {

// One window of a class as the agent measured it.
struct DemandWindow {
    uint64_t offered_bps = 0;   // taken + dropped
    uint64_t delivered_bps = 0; // sent
    uint64_t applied_bps = 0;   // the rate at its end
    bool limited = false;       // dropped at the limit, CE-marked or dropped by CoDel
};

class DemandEstimator {
  public:
    // How long a class must offer below 7/8 of its rate without a limit to
    // count as satisfied; the span of a change's mean and of the offer
    // against the delivered.
    static constexpr uint64_t kReleaseNs = 100'000'000;
    // The span of the mean that corrects a satisfied demand.
    static constexpr uint64_t kHoldNs = 800'000'000;
    // How long next to nothing must be offered for the class to be idle.
    static constexpr uint64_t kIdleNs = 300'000'000;

    // The demand to report after one window; budget_bps: the group's (the
    // most a demand can be).
    uint64_t sample(uint64_t now_ns, const DemandWindow &w, uint64_t budget_bps);

  private:
    struct Sample {
        uint64_t ns, offered_bps, delivered_bps;
    };
    uint64_t estimate(uint64_t now_ns, const DemandWindow &w, uint64_t budget_bps);
    void restart(uint64_t from_ns);
    uint64_t reported_bps_ = 0; // what sample() returned last
    bool unsatisfied_ = false;
    uint64_t satisfied_bps_ = 0;    // the satisfied demand returned last (0: none)
    uint64_t held_bps_ = 0;         // its steady part: the held mean (0: none)
    uint64_t tight_bps_ = 0;        // the room asked for a short pacer (0: none)
    uint64_t tight_base_bps_ = 0;   // the held mean it was asked at
    uint64_t below_since_ns_ = 0;   // 0: the last sample was not below
    uint64_t idle_since_ns_ = 0;    // 0: the last sample was not idle
    uint64_t probe_low_ns_ = 0;     // the last sample whose offer did not fill the room asked
    uint64_t since_ns_ = 0;         // the first sample of the mean's history (0: none)
    uint64_t measure_from_ns_ = 0;  // a start's first sample, while it is measured (0: none)
    uint64_t at_rate_until_ns_ = 0; // limited at its rate until then: the demand at least the rate
    std::deque<Sample> recent_;     // kHoldNs of windows
};

} // namespace pspxdp::cluster
