// The engine against the paper's arithmetic, its experiments, the reference
// scan, and seeded random workloads. Everything is judged on the byte clock.
#include "core/analyzer.hpp"
#include "core/engine.hpp"
#include "sim/paper.hpp"
#include "sim/reference_scan.hpp"
#include "sim/simulator.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

using namespace pspxdp;
using namespace pspxdp::sim;

namespace {

constexpr uint64_t kGbit = 1'000'000'000;
constexpr uint64_t kMbit = 1'000'000;

AnalyzerConfig byte_clock(const EngineConfig &e) {
    AnalyzerConfig a;
    a.line_rate_bps = e.line_rate_bps;
    a.framing = e.framing;
    a.mode = ClockMode::ByteClock;
    return a;
}

const FlowReport &flow(const TraceReport &r, uint32_t id) {
    for (const auto &f : r.flows)
        if (f.flow == id) return f;
    FAIL("flow " << id << " not in the trace");
    return r.flows.front();
}

// Max burstiness of one flow at a given drain rate (bytes per byte time =
// rate / M), byte clock. The analyzer drains at the flow's own mean rate; an
// on/off flow must be judged at its class rate instead, or its off periods
// would count as burstiness.
double burst_at_rate_bytes(const std::vector<TraceFrame> &trace, const Framing &f, uint32_t id,
                           uint64_t rate_bps, uint64_t line_bps) {
    long double drain = (long double)rate_bps / line_bps;
    long double q = 0, worst = 0;
    uint64_t g = 0, last = 0;
    bool seen = false;
    for (const auto &fr : trace) {
        if (fr.flow == id) {
            if (seen) q = std::max<long double>(0, q - drain * (g - last));
            q += f.l2_bytes(fr.len);
            worst = std::max(worst, q);
            last = g;
            seen = true;
        }
        g += f.wire_bytes(fr.len);
    }
    return double(worst);
}

} // namespace

TEST_CASE("Fig. 3 of the paper, exactly (overhead 0)", "[engine][paper]") {
    EngineConfig cfg;
    cfg.line_rate_bps = kGbit;
    cfg.framing = Framing::didactic();
    cfg.window_bytes = UINT64_MAX / 4;
    Engine e(cfg);
    uint32_t p1 = e.add_class(500 * kMbit).value();
    uint32_t p2 = e.add_class(250 * kMbit).value();
    e.set_head(p1, 1500);
    e.set_head(p2, 1500);

    struct Step {
        Action action;
        uint32_t cls;
        uint32_t len;
        uint64_t g_after;
    };
    const Step expected[] = {
        {Action::Frame, p1, 1500, 1500},
        {Action::Frame, p2, 1500, 3000},
        {Action::Frame, p1, 1500, 4500},
        {Action::Gap, 0, 1500, 6000},
    };
    std::map<int, uint64_t> share; // 0: P1, 1: P2, 2: gap, in byte times
    for (int i = 0; i < 4000; ++i) {
        Decision d = e.next(0);
        REQUIRE((d.action == Action::Frame || d.action == Action::Gap));
        if (i < 4) {
            INFO("decision " << i);
            CHECK(d.action == expected[i].action);
            CHECK(d.len == expected[i].len);
            if (d.action == Action::Frame) CHECK(d.cls == expected[i].cls);
            CHECK(e.byte_clock() == expected[i].g_after);
        }
        if (d.action == Action::Frame) {
            share[d.cls == p1 ? 0 : 1] += d.len;
            e.set_head(d.cls, 1500);
        } else {
            share[2] += d.len;
        }
    }
    // P1 : P2 : gap = 2 : 1 : 1 exactly over whole periods of 6000 byte times.
    REQUIRE(e.byte_clock() % 6000 == 0);
    CHECK(share[0] == 2 * share[1]);
    CHECK(share[1] == share[2]);
}

TEST_CASE("the paper's experiments, at least as good as the paper", "[engine][paper]") {
    // 10^5 frames per scenario where the issue asks for it (scale 1 already
    // gives 10^5 for the fast ones; the slow-rate ones keep their count).
    for (const PaperScenario &sc : paper_scenarios(1.0)) {
        ScenarioResult res = run_scenario(sc);
        for (const PaperRow &r : res.rows) {
            INFO(sc.name << " / " << r.flow << ": mean " << r.mean_bps << " bit/s, error "
                         << r.error_pct << " %, burst " << r.max_burst_mtu << " MTU");
            if (sc.name == "1 class 99% of M") {
                // Asked above what the wire can carry for 1514-byte frames: the
                // class gets the whole wire, back to back, evenly.
                double ceiling = double(kGbit) * 1518 / 1538;
                CHECK(std::fabs(r.mean_bps - ceiling) / ceiling < 1e-4);
                CHECK(r.max_burst_mtu <= 1.0 + 1e-9);
                continue;
            }
            if (r.target_bps == 0) {
                // The greedy normal class fills what the paced ones leave,
                // except holes too small for its frame (it may hold a paced
                // class back by at most normal_block_bytes): few gaps remain.
                CHECK(r.mean_bps > 10e6);
                CHECK(res.gap_share < 5e-3);
                continue;
            }
            CHECK(std::fabs(r.error_pct) < 0.01);
            CHECK(r.max_burst_mtu <= 2.0);
            // The paper's single classes and the 96 flows were at 1 MTU.
            if (sc.name.find("1 class") == 0 || sc.name.find("96") == 0)
                CHECK(r.max_burst_mtu <= 1.1);
        }
    }
}

TEST_CASE("a single class from 1 kbit/s to 99 % of the ceiling keeps its rate", "[engine]") {
    const double ceiling = double(kGbit) * 1518 / 1538;
    for (uint64_t rate : {uint64_t(1000), uint64_t(100'000), 37 * kMbit, 777 * kMbit, 935 * kMbit,
                          950 * kMbit, uint64_t(ceiling * 0.99)}) {
        SimConfig cfg;
        cfg.engine.line_rate_bps = kGbit;
        cfg.max_class_frames = rate < kMbit ? 6 : 20'000;
        SourceSpec s;
        s.name = "c";
        s.rate_bps = rate;
        cfg.sources.push_back(s);
        SimResult sim = simulate(cfg);
        TraceReport rep = analyze_trace(sim.trace, byte_clock(cfg.engine));
        const FlowReport &f = flow(rep, 0);
        INFO("rate " << rate << " measured " << f.mean_rate_bps << " burst " << f.max_burst_mtu);
        CHECK(std::fabs(f.mean_rate_bps - double(rate)) / double(rate) < 1e-4);
        CHECK(f.max_burst_mtu <= 1.1);
        for (const auto &fr : sim.trace) {
            REQUIRE(fr.len >= 60);
            REQUIRE(fr.len <= 1514);
        }
    }
}

TEST_CASE("the engine beats the original's full-size gap past 935 Mbit/s", "[engine][reference]") {
    // At 950 Mbit/s a 1514-byte frame needs a 60-byte-time gap: shorter than
    // the smallest gap frame. The original sent a full-size gap and caught up
    // with a burst; the engine overshoots by less than 84 byte times.
    SimConfig cfg;
    cfg.engine.line_rate_bps = kGbit;
    cfg.max_class_frames = 20'000;
    SourceSpec s;
    s.name = "c";
    s.rate_bps = 950 * kMbit;
    cfg.sources.push_back(s);
    TraceReport eng = analyze_trace(simulate(cfg, Scheduler::Engine).trace, byte_clock(cfg.engine));
    TraceReport ref =
        analyze_trace(simulate(cfg, Scheduler::ReferenceScan).trace, byte_clock(cfg.engine));
    const FlowReport &e = flow(eng, 0), &r = flow(ref, 0);
    INFO("engine burst " << e.max_burst_mtu << " MTU, reference " << r.max_burst_mtu << " MTU");
    CHECK(std::fabs(e.mean_rate_bps - 950e6) / 950e6 < 1e-4);
    CHECK(std::fabs(r.mean_rate_bps - 950e6) / 950e6 < 1e-4);
    CHECK(e.max_burst_mtu <= 1.1);
    CHECK(r.max_burst_mtu > 1.5);
}

TEST_CASE("engine and reference scan agree on rates for the 5-class mix", "[engine][reference]") {
    SimConfig cfg;
    cfg.engine.line_rate_bps = kGbit;
    cfg.max_class_frames = 50'000;
    const uint64_t rates[] = {500, 300, 100, 50, 20};
    for (uint64_t r : rates) {
        SourceSpec s;
        s.name = std::to_string(r);
        s.rate_bps = r * kMbit;
        cfg.sources.push_back(s);
    }
    TraceReport eng = analyze_trace(simulate(cfg, Scheduler::Engine).trace, byte_clock(cfg.engine));
    TraceReport ref =
        analyze_trace(simulate(cfg, Scheduler::ReferenceScan).trace, byte_clock(cfg.engine));
    for (uint32_t i = 0; i < 5; ++i) {
        double target = double(rates[i] * kMbit);
        INFO("class " << rates[i] << " engine " << flow(eng, i).mean_rate_bps << " reference "
                      << flow(ref, i).mean_rate_bps);
        CHECK(std::fabs(flow(eng, i).mean_rate_bps - target) / target < 1e-3);
        CHECK(std::fabs(flow(ref, i).mean_rate_bps - target) / target < 1e-3);
        CHECK(flow(eng, i).max_burst_mtu <= 2.0);
    }
}

TEST_CASE("random class sets, frame sizes and on/off backlogs keep every bound",
          "[engine][property]") {
    std::mt19937_64 rng(0x5053503031ull); // seeded: failures reproduce
    for (int round = 0; round < 40; ++round) {
        SimConfig cfg;
        cfg.engine.line_rate_bps =
            std::uniform_int_distribution<uint64_t>(100, 10'000)(rng) * kMbit;
        cfg.engine.window_bytes = std::uniform_int_distribution<uint64_t>(4'000, 200'000)(rng);
        cfg.seed = rng();
        const int n = std::uniform_int_distribution<int>(1, 40)(rng);
        const Framing &f = cfg.engine.framing;
        // Draw paced classes; scale their rates so the paced load on the wire
        // (each class at the wire cost of its smallest frame) is <= 95 % of M.
        std::vector<double> weight(n);
        double wire_load = 0;
        for (int i = 0; i < n; ++i) {
            SourceSpec s;
            s.name = "p" + std::to_string(i);
            s.min_len = std::uniform_int_distribution<uint32_t>(60, 1514)(rng);
            s.max_len = std::uniform_int_distribution<uint32_t>(s.min_len, 1514)(rng);
            weight[i] = std::exponential_distribution<double>(1.0)(rng);
            wire_load += weight[i] * double(f.wire_bytes(s.min_len)) / f.l2_bytes(s.min_len);
            if (rng() % 4 == 0) {
                s.greedy = false;
                s.on_ns = std::uniform_int_distribution<uint64_t>(50'000, 2'000'000)(rng);
                s.off_ns = std::uniform_int_distribution<uint64_t>(10'000, 3'000'000)(rng);
                s.start_ns = std::uniform_int_distribution<uint64_t>(0, 1'000'000)(rng);
            }
            cfg.sources.push_back(s);
        }
        double load = std::uniform_real_distribution<double>(0.05, 0.95)(rng);
        for (int i = 0; i < n; ++i) {
            auto &s = cfg.sources[i];
            s.rate_bps = std::max<uint64_t>(
                1000, uint64_t(load * cfg.engine.line_rate_bps * weight[i] / wire_load));
            if (!s.greedy) s.offered_bps = s.rate_bps * 2;
        }
        int normals = std::uniform_int_distribution<int>(0, 2)(rng);
        for (int i = 0; i < normals; ++i) {
            SourceSpec s;
            s.name = "n" + std::to_string(i);
            s.min_len = 60;
            s.max_len = 1514;
            cfg.sources.push_back(s);
        }
        cfg.max_class_frames = 60'000;
        cfg.max_ns = 200'000'000;
        SimResult sim = simulate(cfg);
        TraceReport rep = analyze_trace(sim.trace, byte_clock(cfg.engine));
        const double mtu = f.mtu_unit_bytes();
        INFO("round " << round << ": " << n << " paced classes, load " << load << ", M "
                      << cfg.engine.line_rate_bps << ", window " << cfg.engine.window_bytes);
        for (const auto &fr : sim.trace) {
            REQUIRE(fr.len >= f.min_frame_bytes);
            REQUIRE(fr.len <= f.max_frame_len());
        }
        CHECK(sim.counters.lag_clamped_bytes == 0); // the load fits: nobody is overloaded
        for (int i = 0; i < n; ++i) {
            const auto &s = cfg.sources[i];
            if (sim.sent[i] < 3) continue;
            INFO("class " << i << " rate " << s.rate_bps << " sizes " << s.min_len << ".."
                          << s.max_len << (s.greedy ? " greedy" : " on/off"));
            double burst =
                burst_at_rate_bytes(sim.trace, f, i, s.rate_bps, cfg.engine.line_rate_bps);
            CHECK(burst <= 2 * mtu);
            if (s.greedy) {
                // Exact up to end effects: one period of a full frame plus one
                // frame of blocking at either end of the run.
                const FlowReport &fl = flow(rep, i);
                double period_bytes =
                    mtu + f.max_gap_wire_bytes() * double(s.rate_bps) / cfg.engine.line_rate_bps;
                double bound = 2 * period_bytes / double(fl.l2_bytes);
                CHECK(std::fabs(fl.mean_rate_bps - double(s.rate_bps)) / double(s.rate_bps) <=
                      bound);
                CHECK(fl.max_burst_bytes <= 2 * mtu);
            }
        }
    }
}

TEST_CASE("paced rates may not sum above the line rate", "[engine]") {
    EngineConfig cfg;
    cfg.line_rate_bps = kGbit;
    Engine e(cfg);
    uint32_t a = e.add_class(600 * kMbit).value();
    auto b = e.add_class(500 * kMbit);
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().find("above the line rate") != std::string::npos);
    uint32_t c = e.add_class(400 * kMbit).value();
    CHECK(e.paced_rate_sum() == kGbit);
    CHECK_FALSE(e.set_rate(c, 401 * kMbit).ok());
    CHECK(e.class_rate(c) == 400 * kMbit); // a refused change changes nothing
    CHECK(e.set_rate(a, 0).ok());          // paced -> normal frees its share
    CHECK(e.add_class(600 * kMbit).ok());
    CHECK_FALSE(e.set_line_rate(500 * kMbit).ok());
}

TEST_CASE("a backlogged class cannot be removed; an idle one can", "[engine]") {
    Engine e(EngineConfig{});
    uint32_t a = e.add_class(10 * kMbit).value();
    e.set_head(a, 1000);
    CHECK_FALSE(e.remove_class(a).ok());
    Decision d = e.next(0);
    REQUIRE(d.action == Action::Frame);
    CHECK_FALSE(e.remove_class(a).ok()); // its next head is not reported yet
    e.set_empty(a);
    CHECK(e.remove_class(a).ok());
    CHECK_FALSE(e.has_class(a));
    CHECK(e.next(0).action == Action::Idle);
}

TEST_CASE("an idle class banks no credit", "[engine]") {
    // A normal class keeps the wire busy; a 100 Mbit/s class sends 10 frames,
    // falls silent for a long time, then returns with 10 frames queued at once.
    EngineConfig cfg;
    cfg.window_bytes = UINT64_MAX / 4;
    Engine e(cfg);
    uint32_t paced = e.add_class(100 * kMbit).value();
    uint32_t normal = e.add_class(0).value();
    e.set_head(normal, 1514);
    const uint64_t period = 1518 * 10; // byte times per frame at M / 10
    std::vector<uint64_t> starts;
    int queued = 10;
    bool returned = false;
    e.set_head(paced, 1514);
    for (int i = 0; i < 200'000 && starts.size() < 20; ++i) {
        uint64_t g = e.byte_clock();
        Decision d = e.next(0);
        if (d.action == Action::Gap) continue; // the normal frame waits for a hole
        REQUIRE(d.action == Action::Frame);
        if (d.cls == normal) {
            e.set_head(normal, 1514);
            if (queued == 0 && !returned && i >= 100'000) { // the class returns
                returned = true;
                queued = 10;
                e.set_head(paced, 1514);
            }
            continue;
        }
        starts.push_back(g);
        if (--queued > 0)
            e.set_head(paced, 1514);
        else
            e.set_empty(paced);
    }
    REQUIRE(starts.size() == 20);
    for (size_t i = 1; i < starts.size(); ++i) {
        INFO("frame " << i);
        // Never closer than one period minus one frame of blocking.
        CHECK(starts[i] - starts[i - 1] + 1538 >= period);
    }
}

TEST_CASE("the schedule stays within the window of the wire and resyncs after idle", "[engine]") {
    EngineConfig cfg;
    cfg.line_rate_bps = kGbit; // 8 ns per byte time
    cfg.window_bytes = 10'000;
    Engine e(cfg);
    uint32_t c = e.add_class(0).value();
    uint64_t now = 1'000'000;
    e.set_head(c, 1514);
    int frames = 0;
    Decision d;
    while ((d = e.next(now)).action == Action::Frame) {
        ++frames;
        e.set_head(c, 1514);
    }
    REQUIRE(d.action == Action::Wait);
    CHECK(frames == 7); // 7 * 1538 = 10766 >= 10000 ahead of a wire at 0
    CHECK(e.byte_clock() - e.wire_position(now) >= cfg.window_bytes);
    // At wake_ns exactly one more frame is allowed, not before.
    CHECK(e.next(d.wake_ns - 1).action == Action::Wait);
    CHECK(e.next(d.wake_ns).action == Action::Frame);
    e.set_empty(c);
    CHECK(e.next(d.wake_ns).action == Action::Idle);

    // One second later traffic returns: the wire has been idle; G does not
    // jump, the idle time is cut out and counted.
    uint64_t g = e.byte_clock();
    uint64_t later = d.wake_ns + 1'000'000'000;
    e.set_head(c, 1514);
    REQUIRE(e.next(later).action == Action::Frame);
    CHECK(e.byte_clock() == g + 1538);
    CHECK(e.counters().idle_resyncs == 1);
    CHECK(e.counters().idle_bytes > 124'000'000);
    CHECK(e.wire_position(later) == g);
}

TEST_CASE("gap frames are split into legal pieces", "[engine]") {
    EngineConfig cfg;
    cfg.window_bytes = UINT64_MAX / 4;
    for (uint64_t rate : {uint64_t(100'000), 1 * kMbit, 45 * kMbit, 480 * kMbit}) {
        Engine e(cfg);
        uint32_t c = e.add_class(rate).value();
        e.set_head(c, 1514);
        uint64_t frames = 0;
        for (int i = 0; i < 500'000 && frames < 5; ++i) {
            Decision d = e.next(0);
            if (d.action == Action::Gap) {
                REQUIRE(d.len >= 60);
                REQUIRE(d.len <= 1514);
            } else {
                REQUIRE(d.action == Action::Frame);
                e.set_head(c, 1514);
                ++frames;
            }
        }
        CHECK(frames == 5);
    }
}

// more_gaps() is an optimisation of the daemon's loop: after a largest gap
// it takes in one call the largest gaps that the next calls of next() would
// return. Two engines in lockstep, one calling next() alone and one calling
// more_gaps() after every largest gap, must make the same decisions (gaps
// expanded), hold the same byte clock and count the same, whatever the
// classes, frame sizes, window, horizon, arrivals and clock readings.
TEST_CASE("more_gaps() takes exactly the gaps next() would give", "[engine]") {
    std::mt19937_64 rng(20261125);
    uint64_t taken = 0, tree_taken = 0;
    for (int run = 0; run < 60; ++run) {
        EngineConfig cfg;
        cfg.line_rate_bps = (run % 3 == 0) ? 100 * kGbit : kGbit;
        cfg.window_bytes = std::uniform_int_distribution<uint64_t>(1514, 256 * 1024)(rng);
        cfg.gap_horizon_ns = (run % 4 == 1) ? 50'000 : (run % 4 == 2 ? 400'000 : kGapHorizonInf);
        cfg.clockless = run % 10 == 9;
        Engine a(cfg), b(cfg);
        std::vector<uint32_t> ids;
        uint64_t sum = 0;
        // Half the runs: a few slow paced classes alone, so that runs of
        // gaps end at the window as often as at a due time; the others mix
        // paced classes up to what is left and unpaced ones.
        const bool slow = run % 2 == 0;
        const int n = std::uniform_int_distribution<int>(1, slow ? 3 : 12)(rng);
        for (int i = 0; i < n; ++i) {
            uint64_t left = cfg.line_rate_bps / 2 - sum;
            uint64_t rate = slow ? std::uniform_int_distribution<uint64_t>(10'000, 5 * kMbit)(rng)
                            : (i % 4 == 3 || left < 10'000)
                                ? 0
                                : std::uniform_int_distribution<uint64_t>(10'000, left)(rng) / 4;
            sum += rate;
            uint32_t ca = a.add_class(rate).value(), cb = b.add_class(rate).value();
            REQUIRE(ca == cb);
            ids.push_back(ca);
        }
        // Every fifth run the paced classes are leaves of a class tree
        // (docs/design.md §3.12): one parent of their summed rate, ceils up
        // to three times their rates, so that due leaves wait for a ceil
        // and borrowed frames fill gaps.
        if (run % 5 == 3 && sum > 0) {
            const uint32_t p = a.add_class(0).value();
            REQUIRE(b.add_class(0).value() == p);
            std::vector<TreeSpec> specs{
                {p, sum, kTreeNoParent, std::min(3 * sum, cfg.line_rate_bps), 0}};
            for (uint32_t k : ids)
                if (a.class_rate(k))
                    specs.push_back({k, a.class_rate(k), p,
                                     std::min(3 * a.class_rate(k), specs[0].ceil_bps), k % 2});
            REQUIRE(a.configure_tree(specs).ok());
            REQUIRE(b.configure_tree(specs).ok());
        }
        std::vector<bool> has_head(ids.size(), false);
        auto len = [&] { return uint32_t(std::uniform_int_distribution<int>(60, 1514)(rng)); };
        auto arrive = [&](size_t i) {
            uint32_t l = len();
            a.set_head(ids[i], l);
            b.set_head(ids[i], l);
            has_head[i] = true;
        };
        uint64_t now = 1'000'000;
        for (int pass = 0; pass < 300; ++pass) {
            for (size_t i = 0; i < ids.size(); ++i)
                if (!has_head[i] && rng() % 3 == 0) arrive(i);
            // Mostly short steps, sometimes a stall (an underrun or idle).
            now += (rng() % 8 == 0) ? std::uniform_int_distribution<uint64_t>(0, 5'000'000)(rng)
                                    : std::uniform_int_distribution<uint64_t>(0, 20'000)(rng);
            uint32_t budget = std::uniform_int_distribution<uint32_t>(1, 2048)(rng);
            while (budget > 0) {
                Decision da = a.next(now), db = b.next(now);
                REQUIRE(da.action == db.action);
                REQUIRE(da.cls == db.cls);
                REQUIRE(da.len == db.len);
                REQUIRE(da.wake_ns == db.wake_ns);
                --budget;
                if (da.action == Action::Frame) {
                    size_t i = std::find(ids.begin(), ids.end(), da.cls) - ids.begin();
                    REQUIRE(i < ids.size());
                    if (rng() % 4) {
                        arrive(i);
                    } else {
                        a.set_empty(ids[i]);
                        b.set_empty(ids[i]);
                        has_head[i] = false;
                    }
                } else if (da.action == Action::Gap) {
                    if (db.len != cfg.framing.max_frame_len()) continue;
                    const uint32_t more = b.more_gaps(budget);
                    taken += more;
                    tree_taken += b.tree() ? more : 0;
                    for (uint32_t k = 0; k < more; ++k) {
                        Decision d = a.next(now);
                        REQUIRE(d.action == Action::Gap);
                        REQUIRE(d.len == db.len);
                    }
                    budget -= more;
                } else {
                    break;
                }
                REQUIRE(a.byte_clock() == b.byte_clock());
            }
            const EngineCounters &ca = a.counters(), &cb = b.counters();
            REQUIRE(ca.frames == cb.frames);
            REQUIRE(ca.gap_frames == cb.gap_frames);
            REQUIRE(ca.gap_wire_bytes == cb.gap_wire_bytes);
            REQUIRE(ca.underrun_resyncs == cb.underrun_resyncs);
            REQUIRE(ca.planned_idles == cb.planned_idles);
            REQUIRE(ca.normal_held == cb.normal_held);
            REQUIRE(ca.late_wakeups == cb.late_wakeups);
        }
    }
    // The runs exercise it: many gaps were taken in bulk, trees' too.
    CHECK(taken > 10'000);
    CHECK(tree_taken > 1000);
}
