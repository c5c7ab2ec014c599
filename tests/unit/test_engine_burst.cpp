// The burst bound in clockless mode (docs/design.md §4.5): every paced class is a token
// bucket of its rate and its bound in front of its exact schedule. Judged
// against a plain model of that bucket, driven by the same wake-up times: a
// late wake-up is caught up within the bound, the rest given up and counted.
// Nothing here reads a clock.
#include "core/analyzer.hpp"
#include "core/engine.hpp"
#include "sim/simulator.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace pspxdp;
using namespace pspxdp::sim;

namespace {

constexpr uint64_t kMbit = 1'000'000;
constexpr uint64_t kUnit = 1518; // a largest frame's L2 bytes (1514 + FCS)
constexpr uint64_t kWire = 1538; // and its wire bytes
constexpr uint64_t kT0 = 1'000'000;

// The bucket, in byte times of a 1 Gbit/s wire (8 ns each): capacity T =
// B * M / r, a frame costs its period q = s * M / r, it fills one byte time
// per byte time and overflows beyond T (that is what a class gives up).
struct Bucket {
    uint64_t cap, cost, tokens, at = 0, lost = 0;
    Bucket(uint64_t bound_bytes, uint64_t rate_bps)
        : cap(bound_bytes * 1'000'000'000 / rate_bps), cost(kUnit * 1'000'000'000 / rate_bps),
          tokens(cap) {}
    // Frames it releases at wire position w (byte times since the start).
    uint64_t release(uint64_t w) {
        tokens += w - at;
        at = w;
        if (tokens > cap) {
            lost += tokens - cap;
            tokens = cap;
        }
        uint64_t n = 0;
        for (; tokens >= cost; tokens -= cost) ++n;
        return n;
    }
};

struct Run {
    uint64_t wakeups = 0, frames = 0;
};

// One backlogged class of full frames; the caller comes back each Wait's
// wake_ns plus late(i) ns (multiples of 8: whole byte times). Checks every
// batch against the bucket and returns the counts.
template <class Late> Run follow(Engine &e, uint32_t cls, Bucket &b, uint64_t wakes, Late &&late) {
    Run run;
    uint64_t now = kT0;
    e.set_head(cls, 1514);
    for (uint64_t i = 0; i < wakes; ++i) {
        uint64_t n = 0;
        Decision d;
        while ((d = e.next(now)).action == Action::Frame) {
            REQUIRE(d.cls == cls);
            e.set_head(cls, 1514);
            ++n;
        }
        REQUIRE(d.action == Action::Wait);
        INFO("wake-up " << i << " at " << now);
        REQUIRE(n == b.release((now - kT0) / 8));
        REQUIRE(e.class_counters(cls).late_lost_bytes == b.lost);
        run.frames += n;
        ++run.wakeups;
        now = d.wake_ns + late(i);
    }
    return run;
}

// The model's D (byte times): the lateness a wake-up may have at no cost,
// with the batch a wake-up 50 us (6250 byte times) before overflow would
// release, n = floor((T - 6250) / (q + 2)) full frames (q rounded up, and a
// byte time for the finish's remainder): T - n * (q + 2); with a bound
// within 6250 of one frame, one frame a wake-up and D = T - q.
uint64_t model_slack(uint64_t mtus, uint64_t period) {
    const uint64_t t = mtus * period;
    if (t - period <= 6250 || t < 6250 + period + 2) return t - period;
    return t - (t - 6250) / (period + 2) * (period + 2);
}

EngineConfig clockless() {
    EngineConfig cfg;
    cfg.clockless = true;
    return cfg;
}

} // namespace

TEST_CASE("burst bound: a late wake-up is caught up within the bound, the rest counted",
          "[engine][burst]") {
    for (uint64_t mtus : {1, 2, 3, 4, 8}) {
        for (uint64_t rate : {10 * kMbit, 100 * kMbit, 500 * kMbit}) {
            const uint64_t period = kUnit * 1'000'000'000 / rate; // byte times
            // On time; within the slack; a period; several bounds' worth.
            for (uint64_t late_bytes : {uint64_t(0), uint64_t(3000), period, 10 * mtus * period}) {
                Engine e(clockless());
                const uint32_t c = e.add_class(rate, mtus * kUnit).value();
                Bucket b(mtus * kUnit, rate);
                INFO(mtus << " MTU, " << rate << " bit/s, one wake-up " << late_bytes
                          << " byte times late");
                follow(e, c, b, 200, [&](uint64_t i) { return i == 100 ? late_bytes * 8 : 0; });
                // What the bound absorbs: D, the wake-up's lead on the
                // bucket's overflow, is the slack.
                const uint64_t d = model_slack(mtus, period);
                CHECK(b.lost == (late_bytes > d ? late_bytes - d : 0));
                CHECK(e.counters().late_lost_bytes == b.lost);
            }
        }
    }
}

TEST_CASE("burst bound: random lateness, the bucket's releases and losses exactly",
          "[engine][burst]") {
    std::mt19937_64 rng(18);
    for (int round = 0; round < 40; ++round) {
        const uint64_t mtus = 1 + rng() % 8;
        // Rates whose periods are whole byte times, as the model's.
        const uint64_t rates[] = {10, 20, 50, 100, 200, 250, 500};
        const uint64_t rate = rates[rng() % 7] * kMbit;
        Engine e(clockless());
        const uint32_t c = e.add_class(rate, mtus * kUnit).value();
        Bucket b(mtus * kUnit, rate);
        INFO(mtus << " MTU, " << rate << " bit/s");
        follow(e, c, b, 2000,
               [&](uint64_t) { return 8 * (rng() % 4 ? rng() % 2000 : rng() % 100'000); });
    }
}

TEST_CASE("burst bound: a wake-up is planned as early as its batch allows", "[engine][burst]") {
    // 3 MTU at 100 Mbit/s: q = 15,180 byte times, T = 45,540. Waking 50 us
    // (6250) before overflow would release 2 frames; waking (almost) a whole
    // period before releases 2 as well (D = T - 2 * (q + 2) = 15,176), so
    // that is the plan, and a wake-up up to 121 us late costs nothing.
    constexpr uint64_t q = 15'180;
    {
        Engine e(clockless());
        const uint32_t c = e.add_class(100 * kMbit, 3 * kUnit).value();
        e.set_head(c, 1514);
        int n = 0;
        Decision d;
        while ((d = e.next(kT0)).action == Action::Frame) {
            e.set_head(c, 1514);
            ++n;
        }
        CHECK(n == 3); // the full bucket
        REQUIRE(d.action == Action::Wait);
        CHECK(d.wake_ns == kT0 + 2 * (q + 2) * 8); // when the bucket holds 2 frames
        CHECK(d.slack_ns == (q - 4) * 8);          // and a period before it overflows
    }
    {
        // On time, 2 frames a wake-up; 100 us late every third: nothing lost.
        for (uint64_t late : {uint64_t(0), uint64_t(100'000)}) {
            Engine e(clockless());
            const uint32_t c = e.add_class(100 * kMbit, 3 * kUnit).value();
            Bucket b(3 * kUnit, 100 * kMbit);
            Run r = follow(e, c, b, 600, [&](uint64_t i) { return i % 3 == 2 ? late : 0; });
            CHECK(b.lost == 0);
            CHECK(e.class_counters(c).late_lost_bytes == 0);
            if (!late) CHECK(r.frames == 3 + (r.wakeups - 1) * 2);
        }
    }
    {
        // Later than the slack by 8 byte times: exactly that is lost.
        Engine e(clockless());
        const uint32_t c = e.add_class(100 * kMbit, 3 * kUnit).value();
        Bucket b(3 * kUnit, 100 * kMbit);
        follow(e, c, b, 50, [](uint64_t i) { return i == 20 ? (q - 4 + 8) * 8 : 0; });
        CHECK(b.lost == 8);
        CHECK(e.class_counters(c).late_lost_bytes == 8);
    }
}

TEST_CASE("burst bound of one frame: no frame before its due time, none caught up",
          "[engine][burst]") {
    Engine e(clockless());
    const uint32_t c = e.add_class(100 * kMbit, kUnit).value();
    e.set_head(c, 1514);
    uint64_t now = kT0;
    for (int i = 0; i < 50; ++i) {
        REQUIRE(e.next(now).action == Action::Frame);
        e.set_head(c, 1514);
        Decision d = e.next(now);
        REQUIRE(d.action == Action::Wait);
        CHECK(d.wake_ns == now + 15'180 * 8); // one period, never earlier
        CHECK(d.slack_ns == 0);               // be on time
        // A little early: nothing. Late: one frame, the lateness lost.
        REQUIRE(e.next(d.wake_ns - 8).action == Action::Wait);
        now = d.wake_ns + (i % 2 ? 800 : 0);
    }
    CHECK(e.class_counters(c).late_lost_bytes == 24 * 100); // 24 wake-ups 100 byte times late
}

TEST_CASE("burst bound: the long-run rate is exact while wake-ups stay within the slack",
          "[engine][burst]") {
    for (uint64_t rate : {10 * kMbit, 100 * kMbit, 500 * kMbit}) {
        Engine e(clockless());
        const uint32_t c = e.add_class(rate, 3 * kUnit).value();
        Bucket b(3 * kUnit, rate);
        std::mt19937_64 rng(rate);
        // Up to 40 us late, within the 48.6-50 us slack.
        Run r = follow(e, c, b, 5000, [&](uint64_t) { return 8 * (rng() % 5000); });
        CHECK(b.lost == 0);
        // Every byte time since the start paid for frames, but what the
        // bucket still holds (less than its bound): the rate is exact.
        CHECK(r.frames * b.cost == b.cap + b.at - b.tokens);
        CHECK(b.tokens < b.cap);
        CHECK(e.class_counters(c).l2_bytes == r.frames * kUnit);
    }
}

TEST_CASE("burst bound: frames due within the bound leave together, fewer wake-ups",
          "[engine][burst]") {
    // 10 Mbit/s, a period of 151,800 byte times, slack 6250: the wake-up
    // comes when the bucket holds mtus - 1 frames and a bit; each releases
    // mtus - 1 frames (one for a bound of 1 or 2).
    for (uint64_t mtus : {1, 2, 3, 4, 8}) {
        Engine e(clockless());
        const uint32_t c = e.add_class(10 * kMbit, mtus * kUnit).value();
        Bucket b(mtus * kUnit, 10 * kMbit);
        Run r = follow(e, c, b, 300, [](uint64_t) { return 0; });
        const uint64_t per_wake = std::max<uint64_t>(1, mtus - 1);
        INFO(mtus << " MTU");
        CHECK(r.frames == mtus + (r.wakeups - 1) * per_wake);
    }
    SECTION("two classes due together: one pass, in finish-time order") {
        Engine e(clockless());
        const uint32_t a = e.add_class(100 * kMbit, 2 * kUnit).value();
        const uint32_t b = e.add_class(50 * kMbit, 2 * kUnit).value();
        e.set_head(a, 1514);
        e.set_head(b, 1514);
        std::vector<uint32_t> order;
        Decision d;
        while ((d = e.next(kT0)).action == Action::Frame) {
            order.push_back(d.cls);
            e.set_head(d.cls, 1514);
        }
        // F: a 15,180 and 30,360; b 30,360 and 60,720 (ties: lower index).
        CHECK(order == std::vector<uint32_t>{a, a, b, b});
    }
}

TEST_CASE("burst bound: nothing changes on the byte clock", "[engine][burst]") {
    // The same workload with and without bounds: the same decisions.
    for (uint64_t horizon : {kGapHorizonInf, uint64_t(50'000)}) {
        EngineConfig cfg;
        cfg.gap_horizon_ns = horizon;
        Engine plain(cfg);
        cfg.burst_bytes = 8 * kUnit;
        Engine bounded(cfg);
        std::vector<uint32_t> pc, bc;
        for (uint64_t rate : std::vector<uint64_t>{333 * kMbit, 77 * kMbit, 21'500'000, 0}) {
            pc.push_back(plain.add_class(rate).value());
            bc.push_back(bounded.add_class(rate, rate ? 2 * kUnit : 0).value());
        }
        REQUIRE(bounded.set_burst(bc[0], kUnit).ok());
        std::mt19937_64 rng(7);
        uint64_t now = kT0;
        for (uint32_t k = 0; k < 4; ++k) {
            plain.set_head(pc[k], 1514);
            bounded.set_head(bc[k], 1514);
        }
        for (int i = 0; i < 200'000; ++i) {
            Decision a = plain.next(now), b = bounded.next(now);
            REQUIRE(int(a.action) == int(b.action));
            REQUIRE(a.cls == b.cls);
            REQUIRE(a.len == b.len);
            REQUIRE(a.wake_ns == b.wake_ns);
            REQUIRE(a.slack_ns == b.slack_ns);
            if (a.action == Action::Frame) {
                const uint32_t len = 60 + uint32_t(rng() % 1455);
                plain.set_head(a.cls, len);
                bounded.set_head(b.cls, len);
            }
            if (a.action == Action::Wait) now = a.wake_ns + rng() % 20'000;
            if (i % 64 == 0) now += rng() % 2000;
        }
        CHECK(plain.counters().frames == bounded.counters().frames);
        CHECK(bounded.counters().late_lost_bytes == 0);
    }
}

TEST_CASE("burst bound: the three-class mix beside a greedy normal class, perfect timer",
          "[engine][burst]") {
    // 333, 77 and 21.5 Mbit/s (one with random sizes) and a greedy normal
    // class on 1 Gbit/s, bound 3 MTU: in real time every class within its
    // bound at its rate and at its rate over the run, the normal class
    // taking what is left of the line rate.
    SimConfig cfg;
    cfg.engine.clockless = true;
    cfg.engine.burst_bytes = 3 * kUnit;
    cfg.max_class_frames = UINT64_MAX;
    cfg.max_ns = 2'000'000'000;
    const uint64_t rates[] = {333 * kMbit, 77 * kMbit, 21'500'000};
    for (int i = 0; i < 3; ++i) {
        SourceSpec s;
        s.name = "c" + std::to_string(i);
        s.rate_bps = rates[i];
        if (i == 2) {
            s.min_len = 60;
            s.max_len = 1514;
        }
        cfg.sources.push_back(s);
    }
    SourceSpec greedy;
    greedy.name = "normal";
    greedy.greedy = true;
    cfg.sources.push_back(greedy);
    SimResult sim = simulate(cfg);
    AnalyzerConfig a;
    a.framing = cfg.engine.framing;
    a.mode = ClockMode::RealTime;
    for (uint32_t i = 0; i < 3; ++i) a.target_rate_bps.emplace_back(i, rates[i]);
    TraceReport r = analyze_trace(sim.trace, a);
    double normal_bps = 0;
    for (const FlowReport &f : r.flows) {
        if (f.flow == 3) {
            normal_bps = f.mean_rate_bps;
            continue;
        }
        INFO("class " << f.flow << ": " << f.mean_rate_bps << " bit/s, burst "
                      << f.max_burst_at_target_bytes);
        CHECK(f.max_burst_at_target_bytes <= 3 * kUnit);
        // Over 2 s the first full bucket is at most 3 MTU of the total.
        const double expect = double(rates[f.flow]);
        CHECK(std::fabs(f.mean_rate_bps - expect) / expect < 0.001);
    }
    CHECK(sim.counters.late_lost_bytes == 0);
    CHECK(normal_bps > 0.5e9);
}

TEST_CASE("burst bound: the daemon's default is at least 150 us at the class's rate",
          "[engine][burst]") {
    // Wake-up batching (kDefaultBurstFloorNs): a class without a bound of
    // its own gets max(3 MTU, rate * 150 us); one with its own keeps it; no
    // floor, the plain default.
    EngineConfig cfg = clockless();
    cfg.burst_floor_ns = kDefaultBurstFloorNs;
    Engine e(cfg);
    const uint32_t slow = e.add_class(100 * kMbit).value();
    const uint32_t fast = e.add_class(500 * kMbit).value();
    const uint32_t own = e.add_class(300 * kMbit, 3 * kUnit).value();
    CHECK(e.class_burst(slow) == 3 * kUnit); // 1875 B in 150 us: 3 MTU more
    CHECK(e.class_burst(fast) == 9375);      // 500 Mbit/s * 150 us
    CHECK(e.class_burst(own) == 3 * kUnit);  // its own, as set
    Engine plain(clockless());
    CHECK(plain.class_burst(plain.add_class(500 * kMbit).value()) == 3 * kUnit);
    // Batched: 500 Mbit/s wakes once per 3 frames (one per frame at 3 MTU),
    // and never releases more than the bucket holds.
    Bucket b(9375, 500 * kMbit);
    Engine one(cfg);
    const uint32_t c = one.add_class(500 * kMbit).value();
    Run r = follow(one, c, b, 300, [](uint64_t) { return 0; });
    CHECK(r.frames >= 3 * (r.wakeups - 1));
    CHECK(b.lost == 0);
}

TEST_CASE("burst bound: released frames never exceed the bound beyond the rate, catch-up "
          "included",
          "[engine][burst]") {
    // The promise as the engine keeps it: over the times frames are
    // decided (what the pacer releases), every interval carries at most
    // the bound beyond the rate: an early-planned batch and the catch-up
    // of a late wake-up together stay within it. Lindley's recursion gives
    // the largest excess over any interval ending at each frame. Wake-ups
    // on time, late within the slack, later than a period, or far later
    // (the excess given up), and calls before wake_ns (nothing released).
    std::mt19937_64 rng(27);
    for (uint64_t rate : {10 * kMbit, 100 * kMbit, 500 * kMbit}) {
        for (uint64_t floor_ns : {uint64_t(0), kDefaultBurstFloorNs}) {
            for (uint64_t mtus : {1, 2, 3, 6}) {
                EngineConfig cfg = clockless();
                cfg.burst_floor_ns = floor_ns;
                cfg.burst_bytes = mtus * kUnit;
                Engine e(cfg);
                const uint32_t c = e.add_class(rate).value();
                const double bound = double(e.class_burst(c));
                INFO(rate << " bit/s, bound " << bound << " B");
                e.set_head(c, 1514);
                uint64_t now = kT0, last = 0;
                double excess = 0, worst = 0;
                for (int i = 0; i < 3000; ++i) {
                    Decision d;
                    while ((d = e.next(now)).action == Action::Frame) {
                        excess = std::max(0.0, excess - double(now - last) * double(rate) / 8e9) +
                                 double(kUnit);
                        last = now;
                        worst = std::max(worst, excess);
                        e.set_head(c, 1514);
                    }
                    REQUIRE(d.action == Action::Wait);
                    if (rng() % 8 == 0 && d.wake_ns > now + 8) {
                        // Early: nothing may leave before wake_ns.
                        REQUIRE(e.next(d.wake_ns - 8).action == Action::Wait);
                    }
                    const uint64_t pick = rng() % 16;
                    const uint64_t late = pick < 10   ? 8 * (rng() % 6250)       // within 50 us
                                          : pick < 14 ? 8 * (rng() % 60'000)     // up to 480 us
                                                      : 8 * (rng() % 1'000'000); // up to 8 ms
                    now = d.wake_ns + late;
                }
                CHECK(worst <= bound + 1.0); // a byte time of the line-rate clock's rounding
                CHECK(worst > bound - double(kUnit)); // and the bound is reached: a tight test
            }
        }
    }
}
