// How long a paced class sat empty while its schedule would have let it
// send (ClassCounters::empty_ns, empty_events): the counter that tells a
// sender that fell behind from a pacer that fell short. Driven by given
// times, in both clock modes; nothing here reads a clock.
#include "core/engine.hpp"

#include <catch2/catch.hpp>

using namespace pspxdp;

namespace {

constexpr uint64_t kMbit = 1'000'000;
constexpr uint32_t kLen = 1496; // L2 1500 bytes with FCS
// 1500 bytes at 100 Mbit/s: the class's period.
constexpr uint64_t kPeriodNs = 1500 * 8 * 1000 / 100;
constexpr uint64_t kT0 = 1'000'000;

EngineConfig config(bool clockless) {
    EngineConfig c;
    c.clockless = clockless;
    c.gap_horizon_ns = kDefaultGapHorizonNs;
    return c;
}

// Asks until the class's frame goes (gaps and waits in between, the caller
// on time); returns when it went. The caller then empties the class.
uint64_t send(Engine &e, uint64_t now) {
    for (int i = 0; i < 10000; ++i) {
        const Decision d = e.next(now);
        if (d.action == Action::Frame) return now;
        if (d.action == Action::Idle) FAIL("idle with a frame queued");
        if (d.action == Action::Wait) now = std::max(now, d.wake_ns);
    }
    FAIL("no frame after 10000 decisions");
    return now;
}

} // namespace

TEST_CASE("empty time: a sender at the class's rate leaves none, a stall counts from the due time",
          "[engine][empty]") {
    // Clockless: G is the wire's real-time position, so every due time is
    // kT0 + i periods.
    Engine e(config(true));
    const uint32_t c = e.add_class(100 * kMbit).value();
    // A frame exactly at every due time: the queue empties after each,
    // never past the time the next one could start.
    uint64_t t = kT0;
    for (int i = 0; i < 20; ++i) {
        e.set_head(c, kLen, t);
        const uint64_t sent = send(e, t);
        REQUIRE(sent == t);
        e.set_empty(c, sent);
        t += kPeriodNs;
    }
    CHECK(e.class_counters(c).empty_ns == 0);
    CHECK(e.class_counters(c).empty_events == 0);
    // Early is no loss either: the rate's own pause (the frame may leave
    // early, within the burst bound; its schedule does not move).
    e.set_head(c, kLen, t - kPeriodNs / 2);
    e.set_empty(c, send(e, t - kPeriodNs / 2));
    CHECK(e.class_counters(c).empty_ns == 0);
    // The sender stalls 5 ms past the next due time: 5 ms, one stretch.
    const uint64_t due = t + kPeriodNs;
    e.set_head(c, kLen, due + 5'000'000);
    CHECK(e.class_counters(c).empty_ns == 5'000'000);
    CHECK(e.class_counters(c).empty_events == 1);
    e.set_empty(c, send(e, due + 5'000'000));
    // Another stall: they add up.
    const uint64_t due2 = due + 5'000'000 + kPeriodNs;
    e.set_head(c, kLen, due2 + 300'000);
    e.set_empty(c, send(e, due2 + 300'000));
    CHECK(e.class_counters(c).empty_ns == 5'300'000);
    CHECK(e.class_counters(c).empty_events == 2);
}

TEST_CASE("empty time on the byte clock: from the next frame's start on the wire",
          "[engine][empty]") {
    Engine e(config(false));
    const uint32_t c = e.add_class(100 * kMbit).value();
    e.set_head(c, kLen, kT0);
    REQUIRE(send(e, kT0) == kT0); // the wire's anchor: G 0 at kT0
    e.set_empty(c, kT0);
    // Its next frame could start at C_k = one period's byte times, on the
    // wire at kT0 + one period.
    e.set_head(c, kLen, kT0 + 5'000'000);
    CHECK(e.class_counters(c).empty_ns == 5'000'000 - kPeriodNs);
    CHECK(e.class_counters(c).empty_events == 1);
}

TEST_CASE("empty time: a class that went empty late counts from when it went empty",
          "[engine][empty]") {
    Engine e(config(false));
    const uint32_t c = e.add_class(100 * kMbit).value();
    e.set_head(c, kLen, kT0);
    send(e, kT0);
    // Its queue was dropped (not sent) 2 ms later: from then on, not from
    // its due time, was it empty.
    e.set_head(c, kLen, kT0 + 10'000); // before its due time: no stretch
    e.set_empty(c, kT0 + 2'000'000);
    e.set_head(c, kLen, kT0 + 3'000'000);
    CHECK(e.class_counters(c).empty_ns == 1'000'000);
    CHECK(e.class_counters(c).empty_events == 1);
}

TEST_CASE("empty time: not counted without the caller's time, nor for a normal class",
          "[engine][empty]") {
    Engine e(config(false));
    const uint32_t paced = e.add_class(100 * kMbit).value();
    const uint32_t normal = e.add_class(0).value();
    // No time given: nothing to count from.
    e.set_head(paced, kLen);
    send(e, kT0);
    e.set_empty(paced);
    e.set_head(paced, kLen, kT0 + 5'000'000);
    e.set_empty(paced, send(e, kT0 + 5'000'000));
    CHECK(e.class_counters(paced).empty_ns == 0);
    CHECK(e.class_counters(paced).empty_events == 0);
    // A normal class has no rate it could fall short of.
    e.set_head(normal, kLen, kT0 + 6'000'000);
    send(e, kT0 + 6'000'000);
    e.set_empty(normal, kT0 + 6'000'000);
    e.set_head(normal, kLen, kT0 + 9'000'000);
    CHECK(e.class_counters(normal).empty_ns == 0);
    CHECK(e.class_counters(normal).empty_events == 0);
}
