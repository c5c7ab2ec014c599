// The gap horizon and the clockless mode (docs/design.md §4.5), on the byte clock and a
// simulated clock: the resume rule decision by decision, then whole runs of
// the simulator with perfect timers, with constant lateness and with the
// lateness measured on this machine. No assertion depends on a real timer.
#include "core/analyzer.hpp"
#include "core/engine.hpp"
#include "sim/horizon.hpp"
#include "sim/simulator.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace pspxdp;
using namespace pspxdp::sim;

namespace {

constexpr uint64_t kGbit = 1'000'000'000;
constexpr uint64_t kMbit = 1'000'000;
constexpr uint64_t kUs = 1'000;
constexpr double kMtu = 1518;

// 1 Gbit/s: a byte time is 8 ns. 20 Mbit/s in 1514-byte frames: a frame
// every 1518 * 50 = 75,900 byte times (607.2 us).
constexpr uint64_t kPeriod20 = 75'900;

LatenessTable constant(uint64_t ns) { return LatenessTable{"constant", "", {{0, ns}, {1, ns}}}; }

SimConfig one_class(uint64_t rate_bps, uint64_t horizon_ns, bool clockless, double seconds) {
    SimConfig c;
    c.engine.line_rate_bps = kGbit;
    c.engine.gap_horizon_ns = horizon_ns;
    c.engine.clockless = clockless;
    c.max_class_frames = UINT64_MAX;
    c.max_ns = uint64_t(seconds * 1e9);
    SourceSpec s;
    s.name = "c";
    s.rate_bps = rate_bps;
    c.sources.push_back(s);
    return c;
}

// The run judged on the model NIC's start times (hybrid clock, T = 0),
// every paced class at its own rate.
TraceReport judge(const SimConfig &cfg, const SimResult &sim, ClockMode mode = ClockMode::Hybrid) {
    AnalyzerConfig a;
    a.line_rate_bps = cfg.engine.line_rate_bps;
    a.framing = cfg.engine.framing;
    a.mode = mode;
    for (uint32_t i = 0; i < cfg.sources.size(); ++i)
        if (cfg.sources[i].rate_bps) a.target_rate_bps.emplace_back(i, cfg.sources[i].rate_bps);
    return analyze_trace(sim.trace, a);
}

const FlowReport &flow(const TraceReport &r, uint32_t id) {
    for (const auto &f : r.flows)
        if (f.flow == id) return f;
    FAIL("flow " << id << " not in the trace");
    return r.flows.front();
}

} // namespace

TEST_CASE("horizon: the wire idles beyond H and the frame starts at its due time",
          "[engine][horizon]") {
    EngineConfig cfg;
    cfg.line_rate_bps = kGbit;
    cfg.gap_horizon_ns = 50 * kUs; // 6250 byte times
    Engine e(cfg);
    const uint32_t c = e.add_class(20 * kMbit).value();
    const uint64_t t0 = 1'000'000;
    e.set_head(c, 1514);
    REQUIRE(e.next(t0).action == Action::Frame); // G = 1538; next due at 75,900
    e.set_head(c, 1514);

    // No gap frames: wait until H before the due time. The gaps that follow
    // absorb a wake-up up to H late.
    Decision d = e.next(t0);
    REQUIRE(d.action == Action::Wait);
    CHECK(d.wake_ns == t0 + (kPeriod20 - 6250) * 8);
    CHECK(d.slack_ns == 50 * kUs);
    CHECK(e.byte_clock() == 1538);

    // Woken 20 us late: the wire idled, G moves to its position, and 30 us
    // of gap frames (3750 byte times) lead exactly to the due time.
    const uint64_t woke = d.wake_ns + 20 * kUs;
    uint64_t gap_bytes = 0;
    for (;;) {
        d = e.next(woke);
        if (d.action != Action::Gap) break;
        gap_bytes += d.len + 24;
    }
    REQUIRE(d.action == Action::Frame);
    CHECK(gap_bytes == 3750);
    CHECK(e.byte_clock() == kPeriod20 + 1538); // the frame started at 75,900
    CHECK(e.counters().planned_idles == 1);
    CHECK(e.counters().planned_idle_bytes == kPeriod20 - 1538 - 3750);
    CHECK(e.counters().late_wakeups == 0);
    e.set_head(c, 1514);

    // Woken 70 us late (20 us beyond H): the frame goes at once, late by
    // 2500 byte times, counted; the next one is still due at 2 * 75,900.
    d = e.next(woke);
    REQUIRE(d.action == Action::Wait);
    CHECK(d.wake_ns == t0 + (2 * kPeriod20 - 6250) * 8);
    d = e.next(d.wake_ns + 70 * kUs);
    REQUIRE(d.action == Action::Frame);
    CHECK(e.counters().late_wakeups == 1);
    CHECK(e.counters().late_bytes == 2500);
    CHECK(e.byte_clock() == 2 * kPeriod20 + 2500 + 1538);
    e.set_head(c, 1514);
    d = e.next(t0 + (2 * kPeriod20 + 2500 + 1538) * 8);
    REQUIRE(d.action == Action::Wait);
    CHECK(d.wake_ns == t0 + (3 * kPeriod20 - 6250) * 8); // caught up: no lateness carried
}

TEST_CASE("horizon: a wake-up many periods late catches up one frame, not more",
          "[engine][horizon]") {
    EngineConfig cfg;
    cfg.gap_horizon_ns = 50 * kUs;
    Engine e(cfg);
    const uint32_t c = e.add_class(20 * kMbit).value();
    e.set_head(c, 1514);
    REQUIRE(e.next(0).action == Action::Frame);
    e.set_head(c, 1514);
    Decision d = e.next(0);
    REQUIRE(d.action == Action::Wait);
    // 5 ms late: eight periods. Two frames back to back (the late one and
    // the one a period later), then the schedule resumes from there.
    const uint64_t late = d.wake_ns + 5'000 * kUs;
    std::vector<uint64_t> starts;
    uint64_t now = late;
    while (starts.size() < 4) {
        d = e.next(now);
        if (d.action == Action::Wait) {
            now = d.wake_ns;
            continue;
        }
        if (d.action == Action::Frame) {
            starts.push_back(e.byte_clock() - 1538);
            e.set_head(c, 1514);
        }
    }
    CHECK(starts[1] - starts[0] == 1538);
    CHECK(starts[2] - starts[0] == kPeriod20);
    CHECK(starts[3] - starts[2] == kPeriod20);
    CHECK(e.counters().late_wakeups == 1);
    CHECK(e.counters().lag_clamped_bytes > 0);
}

TEST_CASE("decisions tell the caller how late it may come back", "[engine][horizon]") {
    SECTION("a window wait: the queued wire time") {
        EngineConfig cfg;
        cfg.window_bytes = 10'000;
        Engine e(cfg);
        const uint32_t c = e.add_class(0).value();
        e.set_head(c, 1514);
        Decision d;
        while ((d = e.next(0)).action == Action::Frame) e.set_head(c, 1514);
        REQUIRE(d.action == Action::Wait);
        CHECK(d.slack_ns == (10'000 - 1) * 8);
    }
    SECTION("clockless: up to the class's burst bound, unbounded for normal traffic only") {
        // 100 Mbit/s, bound 3 MTU: T = 3 * 1518 * 10 = 45,540 byte times, a
        // largest frame's period 15,180: a wake-up 50 us (6250) before
        // overflow would release 2 frames, and so does one a period before
        // it: D = 45,540 - 2 * (15,180 + 2) = 15,176 (the period rounded up,
        // with a byte time for a finish's remainder).
        EngineConfig cfg;
        cfg.clockless = true;
        Engine e(cfg);
        const uint32_t p = e.add_class(100 * kMbit, 3 * 1518).value();
        const uint32_t n = e.add_class(0).value();
        e.set_head(p, 1514);
        e.set_head(n, 1514);
        // A full bucket: three paced frames at once; the normal frame when
        // the line-rate model has carried them (4614 byte times), with slack
        // until the paced class's bucket would overflow (45,540).
        for (int i = 0; i < 3; ++i) {
            Decision d = e.next(0);
            REQUIRE(d.action == Action::Frame);
            CHECK(d.cls == p);
            e.set_head(p, 1514);
        }
        Decision d = e.next(0);
        REQUIRE(d.action == Action::Wait);
        CHECK(d.wake_ns == 3 * 1538 * 8);
        CHECK(d.slack_ns == (45'540 - 3 * 1538) * 8);
        d = e.next(d.wake_ns);
        REQUIRE(d.action == Action::Frame);
        CHECK(d.cls == n);
        e.set_empty(n);
        // The paced class: a period before its bucket would overflow.
        d = e.next(3 * 1538 * 8);
        REQUIRE(d.action == Action::Wait);
        CHECK(d.wake_ns == (45'540 - 15'176) * 8);
        CHECK(d.slack_ns == 15'176 * 8);
        CHECK(e.counters().gap_frames == 0);

        e.set_empty(p);
        REQUIRE(e.next(d.wake_ns).action == Action::Idle);
        e.set_head(n, 1514);
        REQUIRE(e.next(d.wake_ns).action == Action::Frame);
        e.set_head(n, 1514);
        d = e.next(d.wake_ns);
        REQUIRE(d.action == Action::Wait);
        CHECK(d.slack_ns == UINT64_MAX);
    }
    SECTION("clockless, a bound of one frame: 0, be on time") {
        EngineConfig cfg;
        cfg.clockless = true;
        Engine e(cfg);
        const uint32_t p = e.add_class(100 * kMbit, 1518).value();
        e.set_head(p, 1514);
        REQUIRE(e.next(0).action == Action::Frame);
        e.set_head(p, 1514);
        Decision d = e.next(0);
        REQUIRE(d.action == Action::Wait);
        CHECK(d.wake_ns == 15'180 * 8);
        CHECK(d.slack_ns == 0);
    }
}

TEST_CASE("clockless: no gap frame, every frame at its real-time start", "[engine][horizon]") {
    SECTION("perfect timer, a bound of one frame: the byte-exact schedule in real time") {
        for (uint64_t rate : {1 * kMbit, 20 * kMbit, 500 * kMbit}) {
            SimConfig cfg = one_class(rate, kGapHorizonInf, true, 0.2);
            cfg.engine.burst_bytes = 1518;
            SimResult sim = simulate(cfg);
            TraceReport r = judge(cfg, sim);
            INFO("rate " << rate);
            CHECK(r.gap_frames == 0);
            CHECK(flow(r, 0).max_burst_at_target_bytes == Approx(kMtu).epsilon(1e-9));
            CHECK(flow(r, 0).mean_rate_bps == Approx(double(rate)).epsilon(1e-6));
        }
    }
    SECTION(
        "the 5-class mix and a greedy normal class, measured timers, spinning before due times") {
        SimConfig cfg = horizon_scenarios(0.3).back().config;
        REQUIRE(cfg.sources.size() == 6);
        cfg.engine.clockless = true;
        // A quiet core: spinning lateness well within a frame.
        const LatenessTable spin = constant(200);
        cfg.wake.sleep = &measured_sleep();
        cfg.wake.spin = &spin;
        cfg.wake.spin_ns = 50 * kUs;
        SimResult sim = simulate(cfg);
        // Clockless frames leave when decided (a veth): judged in real time.
        TraceReport r = judge(cfg, sim, ClockMode::RealTime);
        CHECK(r.gap_frames == 0);
        for (uint32_t i = 0; i < 5; ++i) {
            const FlowReport &f = flow(r, i);
            INFO("class " << i << ": " << f.mean_rate_bps << " bit/s, burst "
                          << f.max_burst_at_target_mtu);
            CHECK(f.max_burst_at_target_bytes <= kDefaultBurstMtus * kMtu);
            CHECK(std::fabs(f.mean_rate_bps - double(cfg.sources[i].rate_bps)) /
                      double(cfg.sources[i].rate_bps) <
                  0.005); // the mean over 0.3 s includes the first full bucket
        }
        CHECK(flow(r, 5).frames > 0); // the normal class fills what is left
    }
}

TEST_CASE("clockless: a frame sent late is counted and absorbed by the bound (late_release)",
          "[engine][horizon]") {
    // 500 Mbit/s on 1 Gbit/s, bound 3 MTU: a period of 3036 byte times, T =
    // 9108, D = min(6072, 6250). The first three frames are decided at 0
    // (a full bucket) but the last sendto() returns only at 100 us.
    EngineConfig cfg;
    cfg.clockless = true;
    Engine e(cfg);
    const uint32_t p = e.add_class(500 * kMbit, 3 * 1518).value();
    e.set_head(p, 1514);
    for (int i = 0; i < 3; ++i) {
        REQUIRE(e.next(0).action == Action::Frame);
        e.set_head(p, 1514);
    }
    e.late_release(100'000);
    CHECK(e.counters().late_wakeups == 1);
    CHECK(e.counters().late_bytes == 12'500);
    // The schedule did not move: the class is due (its bucket refilled)
    // where it was, and 100 us late it catches up within its bound: three
    // frames, 12,500 - 9108 byte times given up.
    Decision d = e.next(0);
    REQUIRE(d.action == Action::Wait);
    CHECK(d.wake_ns == (9108 - 6072) * 8);
    int n = 0;
    while ((d = e.next(100'000)).action == Action::Frame) {
        ++n;
        e.set_head(p, 1514);
    }
    CHECK(n == 3);
    CHECK(e.class_counters(p).late_lost_bytes == 12'500 - 9108);
    CHECK(e.counters().late_lost_bytes == 12'500 - 9108);
}

TEST_CASE("late_release changes nothing on the byte clock (the NIC serialises)",
          "[engine][horizon]") {
    EngineConfig cfg;
    Engine e(cfg);
    const uint32_t p = e.add_class(500 * kMbit).value();
    e.set_head(p, 1514);
    REQUIRE(e.next(0).action == Action::Frame);
    e.set_head(p, 1514);
    const uint64_t inputs = e.inputs();
    e.late_release(100'000);
    CHECK(e.inputs() == inputs);
    CHECK(e.counters().late_wakeups == 0);
}

TEST_CASE("the gap horizon's goal at 20 Mbit/s, with this machine's timers", "[engine][horizon]") {
    // PAUSE <= 10 % of a 1 Gbit/s wire, burst <= 2 MTU at the class rate,
    // and a quarter of the paper's descriptors or fewer, at the default H.
    const HorizonScenario sc = horizon_scenarios(4)[1];
    REQUIRE(sc.name == "1 class 20Mbit");
    WakeModel wake{&measured_sleep(), &measured_spin(), 0, 0};
    const HorizonRow paper =
        run_horizon(sc, HorizonMode{"paper", kGapHorizonInf, false, 50 * kUs}, wake);
    const HorizonRow hz =
        run_horizon(sc, HorizonMode{"default", kDefaultGapHorizonNs, false, 50 * kUs}, wake);
    INFO("PAUSE " << hz.gap_time_share << ", burst " << hz.worst_burst_mtu << " MTU, rate error "
                  << hz.worst_rate_error_pct << " %, " << hz.emitted_per_s << " vs "
                  << paper.emitted_per_s << " descriptors/s");
    CHECK(paper.gap_time_share > 0.95);
    CHECK(hz.gap_time_share <= 0.10);
    CHECK(hz.worst_burst_mtu <= 2.0 + 1e-9);
    CHECK(std::fabs(hz.worst_rate_error_pct) < 0.5);
    CHECK(hz.emitted_per_s * 4 <= paper.emitted_per_s);
}
