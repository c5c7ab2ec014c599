// The analyzer against traces whose figures were worked out by hand.
#include "core/analyzer.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

using namespace pspxdp;

namespace {

const FlowReport &flow_of(const TraceReport &r, uint32_t flow) {
    for (const auto &f : r.flows)
        if (f.flow == flow) return f;
    FAIL("flow " << flow << " not in report");
    return r.flows.front();
}

void add(std::vector<TraceFrame> &trace, uint32_t flow, uint32_t len, uint64_t time_ns = 0) {
    trace.push_back(TraceFrame{flow, len, time_ns});
}

} // namespace

TEST_CASE("analyzer: a perfectly paced flow of 10^6 full frames", "[analyzer]") {
    // 500 Mbit/s on 1 GbE: each 1514 B frame (1518 L2, 1538 on the wire) is
    // followed by a gap frame that brings the period to 1518 * 2 = 3036
    // wire bytes: a gap of 1498 wire bytes = a 1474 B PAUSE frame.
    const uint64_t k = 1'000'000;
    std::vector<TraceFrame> trace;
    trace.reserve(2 * k);
    for (uint64_t i = 0; i < k; ++i) {
        add(trace, 0, 1514);
        add(trace, kFlowGap, 1474);
    }
    AnalyzerConfig cfg; // 1 Gbit/s, Ethernet framing, byte clock, n = 1
    TraceReport r = analyze_trace(trace, cfg);

    REQUIRE(r.flows.size() == 1);
    const FlowReport &f = r.flows[0];
    CHECK(f.flow == 0);
    CHECK(f.frames == k);
    CHECK(f.l2_bytes == k * 1518);
    CHECK(f.mean_rate_bps == 500'000'000.0); // exactly
    CHECK(f.rate_n_min_bps == 500'000'000.0);
    CHECK(f.rate_n_max_bps == 500'000'000.0);
    CHECK(f.rate_n_mean_bps == 500'000'000.0);
    CHECK(f.max_burst_bytes == 1518.0); // exactly one frame
    CHECK(f.max_burst_mtu == 1.0);
    CHECK(f.duration_s == Approx((k - 1) * 3036 * 8 / 1e9).epsilon(1e-15));

    CHECK(r.frames == 2 * k);
    CHECK(r.gap_frames == k);
    CHECK(r.gap_wire_bytes == k * 1498);
    CHECK(r.wire_bytes == k * 3036);
    CHECK(r.gap_share == Approx(1498.0 / 3036.0).epsilon(1e-15));
    // Last departure: the last gap frame, at k*3036 - 1498 wire bytes.
    CHECK(r.duration_s == Approx((k * 3036 - 1498) * 8 / 1e9).epsilon(1e-15));

    // Over windows of several packets the rate stays exact.
    cfg.rate_window_packets = 10;
    TraceReport r10 = analyze_trace(trace, cfg);
    CHECK(r10.flows[0].rate_n_min_bps == 500'000'000.0);
    CHECK(r10.flows[0].rate_n_max_bps == 500'000'000.0);
}

TEST_CASE("analyzer: a burst of 4 frames then silence", "[analyzer]") {
    // Paper's didactic framing (no overhead): 1 byte = 1 tick = 8 ns at 1 Gbit/s.
    // Flow 0 sends 4 frames of 1500 B back to back (t = 0, 1500, 3000, 4500),
    // then 9 gap frames of 1500 B, then a 5th frame at t = 19500.
    std::vector<TraceFrame> trace;
    for (int i = 0; i < 4; ++i) add(trace, 0, 1500);
    for (int i = 0; i < 9; ++i) add(trace, kFlowGap, 1500);
    add(trace, 0, 1500);
    AnalyzerConfig cfg;
    cfg.framing = Framing::didactic();
    TraceReport r = analyze_trace(trace, cfg);

    const FlowReport &f = flow_of(r, 0);
    CHECK(f.frames == 5);
    CHECK(f.l2_bytes == 7500);
    // Mean rate A: 6000 B over 19500 byte times = 4/13 of the line.
    CHECK(f.mean_rate_bps == Approx(4e9 / 13).epsilon(1e-15));
    CHECK(f.duration_s == Approx(19500 * 8e-9).epsilon(1e-15));
    // The queue: 1500, then +1500 - 1500*4/13 three times = 6000 - 18000/13,
    // then the silence (15000 * 4/13 = 60000/13) empties it exactly.
    CHECK(f.max_burst_bytes == Approx(60000.0 / 13).epsilon(1e-15));
    CHECK(f.max_burst_mtu == Approx(60000.0 / 13 / 1514).epsilon(1e-15));

    // Rate per 1 packet: three windows at line rate, one of 1500 B / 15000.
    CHECK(f.rate_n_max_bps == 1e9);
    CHECK(f.rate_n_min_bps == Approx(1e8).epsilon(1e-15));
    CHECK(f.rate_n_mean_bps == Approx((3e9 + 1e8) / 4).epsilon(1e-15));

    // Rate per 2 packets: 3000/3000, 3000/3000, 3000/(19500-3000).
    cfg.rate_window_packets = 2;
    TraceReport r2 = analyze_trace(trace, cfg);
    const FlowReport &f2 = flow_of(r2, 0);
    CHECK(f2.rate_n_max_bps == 1e9);
    CHECK(f2.rate_n_min_bps == Approx(3000e9 / 16500).epsilon(1e-15));
    CHECK(f2.rate_n_mean_bps == Approx((2e9 + 3000e9 / 16500) / 3).epsilon(1e-15));
    // Burstiness does not depend on n.
    CHECK(f2.max_burst_bytes == f.max_burst_bytes);

    // n of 5 or more: no complete window.
    cfg.rate_window_packets = 5;
    TraceReport r5 = analyze_trace(trace, cfg);
    CHECK(flow_of(r5, 0).rate_n_max_bps == 0);
    CHECK(flow_of(r5, 0).rate_n_min_bps == 0);

    CHECK(r.gap_frames == 9);
    CHECK(r.gap_wire_bytes == 13500);
    CHECK(r.wire_bytes == 21000);
    CHECK(r.gap_share == Approx(13500.0 / 21000).epsilon(1e-15));
}

TEST_CASE("analyzer: byte clock versus real time", "[analyzer]") {
    // Three full frames back to back on the wire, but captured at 0, 10 ns
    // and 1 ms: the two views must disagree exactly as computed here.
    std::vector<TraceFrame> trace;
    add(trace, 0, 1514, 5'000'000'000);
    add(trace, 0, 1514, 5'000'000'010);
    add(trace, 0, 1514, 5'001'000'000);

    AnalyzerConfig cfg;
    TraceReport byte = analyze_trace(trace, cfg);
    // Byte clock: departures 0, 1538, 3076 wire bytes; periodic, 1 frame.
    const FlowReport &b = flow_of(byte, 0);
    CHECK(b.mean_rate_bps == Approx(3036e9 / 3076).epsilon(1e-15));
    CHECK(b.max_burst_bytes == 1518.0);
    CHECK(b.duration_s == Approx(3076 * 8e-9).epsilon(1e-15));

    cfg.mode = ClockMode::RealTime;
    TraceReport real = analyze_trace(trace, cfg);
    const FlowReport &t = flow_of(real, 0);
    // Real time: A = 3036 B per ms; the 2nd frame arrives 10 ns after the
    // 1st, so the queue peaks at 2 * 1518 - 3036 * 10 / 1e6.
    CHECK(t.duration_s == Approx(1e-3).epsilon(1e-15));
    CHECK(t.mean_rate_bps == Approx(3036 * 8e9 / 1e6).epsilon(1e-15));
    CHECK(t.max_burst_bytes == Approx(3036 - 0.03036).epsilon(1e-15));
    CHECK(t.rate_n_max_bps == Approx(1518 * 8e9 / 10).epsilon(1e-15));
    CHECK(t.rate_n_min_bps == Approx(1518 * 8e9 / 999'990).epsilon(1e-15));
    CHECK(real.duration_s == Approx(1e-3).epsilon(1e-15));
}

TEST_CASE("analyzer: real time never runs backwards", "[analyzer]") {
    // The 3rd timestamp steps back: it counts as simultaneous with the 2nd.
    std::vector<TraceFrame> trace;
    add(trace, 0, 60, 1000);
    add(trace, 0, 60, 2000);
    add(trace, 0, 60, 1500);
    add(trace, 0, 60, 3000);
    AnalyzerConfig cfg;
    cfg.mode = ClockMode::RealTime;
    TraceReport r = analyze_trace(trace, cfg);
    const FlowReport &f = flow_of(r, 0);
    CHECK(f.duration_s == Approx(2e-6).epsilon(1e-15));
    // Windows: 64 B/1 us, (skipped: 0 ns), 64 B/1 us.
    CHECK(f.rate_n_min_bps == Approx(64 * 8e9 / 1000).epsilon(1e-15));
    CHECK(f.rate_n_max_bps == Approx(64 * 8e9 / 1000).epsilon(1e-15));
    // A = 192 B / 2000 ns, 96 B per us. Queue: 64; drained to 0, + 64;
    // + 64 at the same instant = 128; 128 - 96 + 64 = 96. Max 128.
    CHECK(f.max_burst_bytes == Approx(128).epsilon(1e-15));
}

TEST_CASE("analyzer: several flows, other traffic and degenerate flows", "[analyzer]") {
    std::vector<TraceFrame> trace;
    add(trace, 7, 1000);
    add(trace, kFlowOther, 100);
    add(trace, 3, 42); // padded to 60 on the wire, 64 in L2
    add(trace, kFlowGap, 60);
    add(trace, 7, 1000);
    AnalyzerConfig cfg;
    TraceReport r = analyze_trace(trace, cfg);
    REQUIRE(r.flows.size() == 3);
    CHECK(r.flows[0].flow == 3);
    CHECK(r.flows[1].flow == 7);
    CHECK(r.flows[2].flow == kFlowOther);
    CHECK(r.wire_bytes == 1024 + 124 + 84 + 84 + 1024);
    CHECK(r.gap_wire_bytes == 84);
    CHECK(r.gap_frames == 1);

    // One frame: no duration, no rate, the queue is the frame.
    const FlowReport &lone = flow_of(r, 3);
    CHECK(lone.frames == 1);
    CHECK(lone.l2_bytes == 64);
    CHECK(lone.duration_s == 0);
    CHECK(lone.mean_rate_bps == 0);
    CHECK(lone.max_burst_bytes == 64);
    CHECK(lone.rate_n_max_bps == 0);

    // Flow 7: departures at 0 and 1024 + 124 + 84 + 84 = 1316 wire bytes.
    const FlowReport &f7 = flow_of(r, 7);
    CHECK(f7.mean_rate_bps == Approx(1004e9 / 1316).epsilon(1e-15));
    CHECK(f7.max_burst_bytes == 1004.0);

    // Real time, everything at the same instant: nothing drains.
    cfg.mode = ClockMode::RealTime;
    TraceReport same = analyze_trace(trace, cfg);
    CHECK(flow_of(same, 7).max_burst_bytes == 2008);
    CHECK(flow_of(same, 7).mean_rate_bps == 0);
    CHECK(flow_of(same, 7).rate_n_max_bps == 0);

    TraceReport empty = analyze_trace({}, cfg);
    CHECK(empty.flows.empty());
    CHECK(empty.frames == 0);
    CHECK(empty.gap_share == 0);
    CHECK(empty.duration_s == 0);
}

TEST_CASE("analyzer: the paper's Fig. 3 schedule", "[analyzer]") {
    // docs/design.md §3: P1 500 Mbit/s, P2 250 Mbit/s, 1500 B frames, overhead 0:
    // P1, P2, P1, gap repeated. Shares 2 : 1 : 1 and both flows exact.
    std::vector<TraceFrame> trace;
    for (int i = 0; i < 1000; ++i) {
        add(trace, 1, 1500);
        add(trace, 2, 1500);
        add(trace, 1, 1500);
        add(trace, kFlowGap, 1500);
    }
    AnalyzerConfig cfg;
    cfg.framing = Framing::didactic();
    TraceReport r = analyze_trace(trace, cfg);
    CHECK(r.gap_share == 0.25);
    const FlowReport &p1 = flow_of(r, 1);
    const FlowReport &p2 = flow_of(r, 2);
    CHECK(p1.mean_rate_bps == Approx(5e8).epsilon(1e-12));
    CHECK(p2.mean_rate_bps == 2.5e8);
    CHECK(p2.max_burst_bytes == 1500.0);
    // P1 departs at 0, 3000, 6000, ...: every window is 1500 B over 3000.
    CHECK(p1.rate_n_min_bps == Approx(5e8).epsilon(1e-12));
    CHECK(p1.rate_n_max_bps == Approx(5e8).epsilon(1e-12));
    CHECK(p1.max_burst_bytes == Approx(1500.0).epsilon(1e-12));
}

TEST_CASE("analyzer: burstiness at a target rate ignores the window's end effects", "[analyzer]") {
    // A flow paced at exactly M/2 in full frames, every frame on time except
    // the last, which is 3000 byte times late (blocked by other traffic). Its
    // measured mean is then a little below M/2 and the mean-rate queue grows
    // over the whole run; at the true rate the queue stays near one frame.
    AnalyzerConfig cfg;
    cfg.line_rate_bps = 1'000'000'000;
    cfg.target_rate_bps = {{7, 500'000'000}};
    std::vector<TraceFrame> t;
    const int n = 2000;
    // The class sends 1518 L2 bytes every 3036 byte times: a 1514-byte frame
    // (1538 on the wire) and a 1474-byte gap (1498).
    for (int i = 0; i < n; ++i) {
        t.push_back(TraceFrame{7, 1514, 0});
        t.push_back(TraceFrame{kFlowGap, 1474, 0});
        if (i == n - 2) t.push_back(TraceFrame{kFlowGap, 3000 - 24, 0}); // the last frame is late
    }
    TraceReport r = analyze_trace(t, cfg);
    REQUIRE(r.flows.size() == 1);
    const FlowReport &f = r.flows[0];
    CHECK(f.target_bps == 500'000'000);
    CHECK(f.max_burst_at_target_bytes == Approx(1518).epsilon(1e-9)); // one frame, never more
    // At the (lower) mean rate the last frame's lateness shows as an extra
    // (r/M) * 3000 = 1500 bytes queued by the end of the run.
    CHECK(f.max_burst_bytes > 1518 + 1400);
    CHECK(f.max_burst_bytes < 1518 + 1500 + 1);
}

namespace {

// A 20 Mbit/s class paced with a gap horizon on 1 GbE: each period of
// 75,900 byte times (1518 L2 bytes at M/50) the wire carries a gap chain of
// `chain` byte times, the class's 1514-byte frame (1538), and idles for the
// rest. Capture timestamps are exact, plus jitter(i) ns on frame i.
std::vector<TraceFrame> horizon_trace(int periods, uint64_t chain,
                                      const std::function<uint64_t(size_t)> &jitter) {
    const uint64_t period = 75'900; // byte times = 8 ns each
    std::vector<TraceFrame> t;
    for (int p = 0; p < periods; ++p) {
        uint64_t at = p * period; // the chain starts here
        for (uint64_t left = chain; left > 0;) {
            uint64_t piece = std::min<uint64_t>(left, 1538);
            t.push_back(TraceFrame{kFlowGap, uint32_t(piece - 24), at * 8});
            at += piece;
            left -= piece;
        }
        t.push_back(TraceFrame{1, 1514, at * 8});
    }
    for (size_t i = 0; i < t.size(); ++i) t[i].time_ns += jitter(i);
    return t;
}

} // namespace

TEST_CASE("analyzer hybrid: idle periods in real time, stretches on the byte clock", "[analyzer]") {
    AnalyzerConfig cfg;
    cfg.target_rate_bps = {{1, 20'000'000}};
    // Gap chains of 6 * 1538 byte times; timestamps of every frame but a
    // stretch's first are late by up to 5 us (a receiver's jitter).
    std::mt19937_64 rng(3);
    std::vector<TraceFrame> trace =
        horizon_trace(2000, 6 * 1538, [&](size_t i) { return i % 7 == 0 ? 0 : rng() % 5000; });

    // The byte clock closes every idle period: 1518 bytes per 10,766 byte
    // times, seven times the class's rate. Wrong, as expected.
    TraceReport byte = analyze_trace(trace, cfg);
    CHECK(byte.flows[0].mean_rate_bps > 100e6);

    cfg.mode = ClockMode::Hybrid;
    cfg.idle_threshold_ns = 5000;
    TraceReport hy = analyze_trace(trace, cfg);
    const FlowReport &f = flow_of(hy, 1);
    CHECK(f.mean_rate_bps == Approx(20e6).epsilon(1e-12)); // exact
    CHECK(f.rate_n_min_bps == Approx(20e6).epsilon(1e-12));
    CHECK(f.rate_n_max_bps == Approx(20e6).epsilon(1e-12));
    CHECK(f.max_burst_bytes == Approx(1518).epsilon(1e-12));
    CHECK(f.max_burst_at_target_bytes == Approx(1518).epsilon(1e-12));
    CHECK(hy.idle_periods == 1999);
    CHECK(hy.idle_bytes == 1999 * (75'900 - 7 * 1538));
    CHECK(hy.gap_time_share ==
          Approx(6.0 * 1538 * 2000 / (1999 * 75'900.0 + 7 * 1538)).epsilon(1e-12));
    CHECK(hy.gap_share == Approx(6.0 / 7).epsilon(1e-12)); // of the bytes sent, unchanged

    // Real time with that jitter: off by up to 5 us a frame.
    cfg.mode = ClockMode::RealTime;
    TraceReport real = analyze_trace(trace, cfg);
    CHECK(flow_of(real, 1).max_burst_at_target_bytes > 1518 + 1);
}

TEST_CASE("analyzer hybrid: jitter everywhere costs at most 2 T, never accumulates", "[analyzer]") {
    AnalyzerConfig cfg;
    cfg.mode = ClockMode::Hybrid;
    cfg.idle_threshold_ns = 10'000;
    cfg.target_rate_bps = {{1, 20'000'000}};
    std::mt19937_64 rng(5);
    // Every timestamp late by 0 .. T: each frame is judged within 2 T of
    // its true place relative to any other, so the queue at the class rate
    // grows by at most 2 T of the class's bytes: 2 * 10 us * 20 Mbit/s = 50 B.
    std::vector<TraceFrame> trace =
        horizon_trace(20'000, 3 * 1538, [&](size_t) { return rng() % 10'001; });
    TraceReport r = analyze_trace(trace, cfg);
    const FlowReport &f = flow_of(r, 1);
    CHECK(f.max_burst_at_target_bytes <= 1518 + 50 + 1e-6);
    CHECK(std::fabs(f.mean_rate_bps - 20e6) / 20e6 < 1e-5);
    CHECK(r.idle_periods == 19'999);
}

TEST_CASE("analyzer hybrid: frames captured faster than the wire are serialised", "[analyzer]") {
    // A veth delivers ten full frames at one instant, then one more 1 ms
    // later: on a wire of rate M the ten leave back to back (the byte clock),
    // and the eleventh after the idle (real time).
    std::vector<TraceFrame> trace;
    for (int i = 0; i < 10; ++i) add(trace, 0, 1514, 1'000'000);
    add(trace, 0, 1514, 2'000'000);
    AnalyzerConfig cfg;
    cfg.mode = ClockMode::Hybrid;
    TraceReport r = analyze_trace(trace, cfg);
    const FlowReport &f = flow_of(r, 0);
    CHECK(f.rate_n_max_bps == Approx(1518e9 / 1538).epsilon(1e-12)); // back to back at M
    CHECK(f.duration_s == Approx(1e-3).epsilon(1e-12));              // real time across the idle
    CHECK(r.idle_periods == 1);
    CHECK(r.idle_bytes == 125'000 - 10 * 1538);

    // With T = 0 and exact timestamps the hybrid clock is real time.
    std::vector<TraceFrame> exact;
    for (int i = 0; i < 5; ++i) add(exact, 0, 1514, 5'000 + i * 1538 * 8);
    add(exact, 0, 1514, 900'000);
    AnalyzerConfig rt;
    rt.mode = ClockMode::RealTime;
    const TraceReport ra = analyze_trace(exact, cfg), rb = analyze_trace(exact, rt);
    const FlowReport &a = flow_of(ra, 0), &b = flow_of(rb, 0);
    CHECK(a.duration_s == Approx(b.duration_s).epsilon(1e-12));
    CHECK(a.max_burst_bytes == Approx(b.max_burst_bytes).epsilon(1e-12));

    // An idle shorter than T is closed up (judged back to back).
    cfg.idle_threshold_ns = 1'000'000;
    TraceReport closed = analyze_trace(trace, cfg);
    CHECK(closed.idle_periods == 0);
    CHECK(flow_of(closed, 0).duration_s == Approx(10 * 1538 * 8e-9).epsilon(1e-12));
}
