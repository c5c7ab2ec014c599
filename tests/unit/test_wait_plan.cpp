// How the daemon spends a backlogged wait (daemon/wait_plan.hpp): the rules
// of design §4.4, decided without a clock.
#include <catch2/catch.hpp>

#include "daemon/wait_plan.hpp"

using namespace pspxdp::daemon;
using Kind = WaitPlan::Kind;

namespace {

constexpr uint64_t kUs = 1'000;

// The daemon's defaults, at t = 1 s, the next tick 10 ms away.
WaitInput base() {
    WaitInput in;
    in.now_ns = 1'000'000 * kUs;
    in.sleep_min_ns = 50 * kUs;
    in.spin_ns = 20 * kUs;
    in.next_tick_ns = in.now_ns + 10'000 * kUs;
    in.deaf_ns = 1'000 * kUs;
    return in;
}

// The engine's clockless wait: nothing due for wait_us, then slack_us of
// lateness free.
WaitInput clockless_wait(uint64_t wait_us, uint64_t slack_us) {
    WaitInput in = base();
    in.clockless = true;
    in.engine_wait = true;
    in.slack_ns = slack_us * kUs;
    in.wake_ns = in.now_ns + wait_us * kUs;
    return in;
}

} // namespace

TEST_CASE("clockless: a wait the slack covers is slept however short, down to a sleep's cost",
          "[wait]") {
    // 500 Mbit/s, a 3-MTU bound: a frame every 24.6 us, each wake-up may
    // come 49 us late (engine.cpp size_class).
    WaitInput in = clockless_wait(12, 49);
    WaitPlan p = plan_wait(in);
    CHECK(p.kind == Kind::Nap); // a planned idle: no wake-ups for arrivals
    CHECK(p.until_ns == in.wake_ns);

    // Shorter than a sleep costs: spun.
    in.wake_ns = in.now_ns + kSleepCostNs;
    CHECK(plan_wait(in).kind == Kind::Spin);
    in.wake_ns = in.now_ns + kSleepCostNs + 1;
    CHECK(plan_wait(in).kind == Kind::Nap);

    // The same short wait on the byte clock (the batch's or the gap
    // horizon's) is spun: under --sleep-min.
    in.clockless = false;
    in.wake_ns = in.now_ns + 12 * kUs;
    CHECK(plan_wait(in).kind == Kind::Spin);
    // ... and so is a clockless one that is not the engine's plan.
    in.clockless = true;
    in.engine_wait = false;
    CHECK(plan_wait(in).kind == Kind::Spin);
}

TEST_CASE("a wait with less slack than --spin-last wakes early by the difference, and spins "
          "what --sleep-min does not cover",
          "[wait]") {
    WaitInput in = clockless_wait(200, 5); // a one-frame bound: slack 0; here a little
    WaitPlan p = plan_wait(in);
    CHECK(p.kind == Kind::Nap);
    CHECK(p.until_ns == in.wake_ns - 15 * kUs); // spin_ns - slack early

    // 60 us away, 15 early: 45 us to sleep, under --sleep-min: spun whole
    // (the short-sleep rule is only for waits the slack covers).
    in.wake_ns = in.now_ns + 60 * kUs;
    CHECK(plan_wait(in).kind == Kind::Spin);

    // A wake-up past the next tick sleeps until the tick.
    in.wake_ns = in.now_ns + 20'000 * kUs;
    p = plan_wait(in);
    CHECK(p.kind == Kind::Sleep); // longer than deaf_ns: RX wakes it
    CHECK(p.until_ns == in.next_tick_ns);
}

TEST_CASE("--spin spins every wait; a long wait sleeps in epoll, a short planned idle naps",
          "[wait]") {
    WaitInput in = clockless_wait(5'000, 100);
    WaitPlan p = plan_wait(in);
    CHECK(p.kind == Kind::Sleep);
    CHECK(p.until_ns == in.wake_ns);
    in.wake_ns = in.now_ns + 800 * kUs;
    CHECK(plan_wait(in).kind == Kind::Nap);

    in.sleep_min_ns = 0; // --spin
    CHECK(plan_wait(in).kind == Kind::Spin);

    // The byte clock's batch wait (not the engine's) is never napped.
    in.sleep_min_ns = 50 * kUs;
    in.clockless = false;
    in.engine_wait = false;
    p = plan_wait(in);
    CHECK(p.kind == Kind::Sleep);
    CHECK(p.until_ns == in.wake_ns);
}
