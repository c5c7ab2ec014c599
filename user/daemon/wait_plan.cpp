#include "daemon/wait_plan.hpp"

#include <algorithm>

namespace pspxdp::daemon {

WaitPlan plan_wait(const WaitInput &in) {
    if (!in.sleep_min_ns) return {}; // --spin: spin throughout
    // Wake early by what the slack does not cover of a timer's lateness.
    const uint64_t early = in.slack_ns >= in.spin_ns ? 0 : in.spin_ns - in.slack_ns;
    const uint64_t until = in.wake_ns > early ? in.wake_ns - early : 0;
    const bool covered = in.clockless && in.engine_wait && early == 0;
    const uint64_t shortest = covered ? kSleepCostNs : in.sleep_min_ns;
    if (until <= in.now_ns + shortest) return {}; // short: spin it
    const uint64_t deadline = std::min(in.next_tick_ns, until);
    if (deadline <= in.now_ns) return {};
    // A planned idle (gap horizon, clockless) up to deaf_ns away is napped
    // through without waking for arrivals: a frame for a backlogged class
    // changes nothing before wake_ns, and one for an idle class waits at
    // most deaf_ns. Waking per arriving frame cost more CPU than the
    // transmissions themselves at low rates (docs/design.md §4.5).
    if (in.engine_wait && deadline - in.now_ns <= in.deaf_ns)
        return {WaitPlan::Kind::Nap, deadline};
    return {WaitPlan::Kind::Sleep, deadline};
}

} // namespace pspxdp::daemon
