// How the loop spends a backlogged wait (loop.cpp, design §4.4): sleep,
// nap or spin, and until when. A pure function, so the choice is tested
// against the rules below without a clock (tests/unit/test_wait_plan.cpp).
//
// The engine (or the byte clock's batch) says: nothing before wake_ns, and
// slack_ns of lateness after it costs nothing. A timer wakes late by tens
// of microseconds (15 at the median, 66 at p99 on the 2-core VM), so:
//   - a wait whose slack covers spin_ns is slept through to wake_ns;
//   - one with less is slept until spin_ns - slack before it, and the rest
//     spun;
//   - the byte clock spins a wait shorter than sleep_min_ns whole (its
//     slack is the window's queued wire time, which a copy-mode socket on a
//     veth only moves while the daemon is in sendto(): sleeping those cost
//     2-12 % of the wire in underruns: docs/results/2026-11-27-busy-host);
//   - clockless, a wait the engine's slack covers is slept however short,
//     down to what a sleep costs (kSleepCostNs): the slack is real, the
//     frame's bucket absorbs the timer's lateness. Spinning those at
//     500 Mbit/s (a frame every 25 us) took the daemon to its deadline
//     limit, where the kernel throttled it and the class lost 5 % of its
//     rate; sleeping them costs 65 % of a core and 0.1-0.4 % (docs/design.md §4.4).
// sleep_min_ns == 0 is --spin: spin throughout.
#pragma once

#include <cstdint>

namespace pspxdp::daemon {

// What one sleep costs in CPU here: the hrtimer, the halt and the switch
// back (a few microseconds on a VM): a shorter wait is spun whatever its
// slack.
inline constexpr uint64_t kSleepCostNs = 5'000;

struct WaitInput {
    uint64_t now_ns = 0;
    uint64_t wake_ns = 0;     // nothing is due before
    uint64_t slack_ns = 0;    // lateness after wake_ns that costs nothing
    bool engine_wait = false; // the engine's planned wait (not the byte clock's batch)
    bool clockless = false;
    uint64_t sleep_min_ns = 0; // 0: --spin
    uint64_t spin_ns = 0;      // --spin-last
    uint64_t next_tick_ns = 0; // the loop's housekeeping: no sleep past it
    uint64_t deaf_ns = 0;      // a planned idle up to this long is napped (no RX wake-ups)
};

struct WaitPlan {
    enum class Kind { Spin, Sleep, Nap } kind = Kind::Spin;
    uint64_t until_ns = 0; // Sleep, Nap: wake at (then spin what is left)
};

WaitPlan plan_wait(const WaitInput &in);

} // namespace pspxdp::daemon
