#include "sim/horizon.hpp"

#include "core/units.hpp"

#include <algorithm>
#include <cmath>

namespace pspxdp::sim {

namespace {

constexpr uint64_t kMbit = 1'000'000;
constexpr uint64_t kGbit = 1'000'000'000;
constexpr uint64_t kUs = 1'000;

SourceSpec greedy(std::string name, uint64_t rate_bps, uint32_t min_len = 1514,
                  uint32_t max_len = 1514) {
    SourceSpec s;
    s.name = std::move(name);
    s.rate_bps = rate_bps;
    s.min_len = min_len;
    s.max_len = max_len;
    return s;
}

std::string time_name(uint64_t ns) {
    if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
    if (ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
    return std::to_string(ns) + "ns";
}

} // namespace

std::vector<HorizonMode> horizon_modes(const std::vector<uint64_t> &horizons_ns) {
    std::vector<HorizonMode> out;
    for (uint64_t h : horizons_ns)
        out.push_back(HorizonMode{h == kGapHorizonInf ? "paper (H=inf)" : "H=" + time_name(h), h,
                                  false, 50 * kUs});
    out.push_back(HorizonMode{"clockless, spin 50us", kGapHorizonInf, true, 50 * kUs});
    out.push_back(HorizonMode{"clockless, sleep only", kGapHorizonInf, true, 0});
    return out;
}

std::vector<HorizonScenario> horizon_scenarios(double seconds) {
    std::vector<HorizonScenario> out;
    auto base = [&](uint64_t line_bps) {
        SimConfig c;
        c.engine.line_rate_bps = line_bps;
        c.engine.window_bytes = 64 * 1024;
        c.max_class_frames = UINT64_MAX;
        c.max_ns = uint64_t(seconds * 1e9);
        return c;
    };
    for (uint64_t mbit : {1, 20, 100, 500}) {
        HorizonScenario s{"1 class " + std::to_string(mbit) + "Mbit", base(kGbit)};
        s.config.sources.push_back(greedy("1:1", mbit * kMbit));
        out.push_back(std::move(s));
    }
    {
        // The 10 GbE case: the paper's rule costs ~800,000 gap
        // frames a second for one slow class.
        HorizonScenario s{"1 class 20Mbit on 10Gbit", base(10 * kGbit)};
        s.config.engine.window_bytes = 640 * 1024;
        s.config.sources.push_back(greedy("1:1", 20 * kMbit));
        out.push_back(std::move(s));
    }
    {
        HorizonScenario s{"5 classes + normal", base(kGbit)};
        const uint64_t rates[] = {500, 300, 100, 50, 20};
        for (int i = 0; i < 5; ++i)
            s.config.sources.push_back(greedy("1:" + std::to_string(i + 1), rates[i] * kMbit));
        s.config.sources.push_back(greedy("normal", 0, 60, 1514));
        out.push_back(std::move(s));
    }
    return out;
}

HorizonRow run_horizon(const HorizonScenario &scenario, const HorizonMode &mode,
                       const WakeModel &wake) {
    SimConfig cfg = scenario.config;
    cfg.engine.gap_horizon_ns = mode.gap_horizon_ns;
    cfg.engine.clockless = mode.clockless;
    cfg.engine.burst_bytes = mode.burst_bytes;
    cfg.wake = wake;
    cfg.wake.spin_ns = mode.spin_ns;
    // The daemon's batch (Loop::schedule): half the window, at most 32 frames.
    cfg.wake.batch_bytes = std::min<uint64_t>(cfg.engine.window_bytes / 2,
                                              32ull * cfg.engine.framing.max_gap_wire_bytes());
    SimResult sim = simulate(cfg);

    // The wire idles: judge on the NIC model's real start times through the
    // hybrid clock (exact timestamps: T = 0), each class at its own rate.
    // Clockless frames leave when decided (nothing serialises): real time.
    AnalyzerConfig ac;
    ac.line_rate_bps = cfg.engine.line_rate_bps;
    ac.framing = cfg.engine.framing;
    ac.mode = mode.clockless ? ClockMode::RealTime : ClockMode::Hybrid;
    ac.idle_threshold_ns = 0;
    for (uint32_t i = 0; i < cfg.sources.size(); ++i)
        if (cfg.sources[i].rate_bps) ac.target_rate_bps.emplace_back(i, cfg.sources[i].rate_bps);
    TraceReport rep = analyze_trace(sim.trace, ac);

    HorizonRow row;
    row.scenario = scenario.name;
    row.mode = mode.name;
    row.counters = sim.counters;
    const double secs = double(sim.end_ns - sim.start_ns) / 1e9;
    row.seconds = secs;
    row.gap_time_share = rep.gap_time_share;
    row.gap_byte_share = rep.gap_share;
    if (secs > 0) {
        row.emitted_per_s = double(sim.emitted) / secs;
        row.wakeups_per_s = double(sim.wakeups) / secs;
        row.spin_share = double(sim.spin_ns) / 1e9 / secs;
    }
    for (const FlowReport &f : rep.flows) {
        if (f.flow >= cfg.sources.size()) continue;
        const SourceSpec &s = cfg.sources[f.flow];
        if (!s.rate_bps) {
            row.normal_bps = f.mean_rate_bps;
            continue;
        }
        const double err = (f.mean_rate_bps - double(s.rate_bps)) / double(s.rate_bps) * 100;
        if (std::fabs(err) > std::fabs(row.worst_rate_error_pct)) row.worst_rate_error_pct = err;
        row.worst_burst_mtu = std::max(row.worst_burst_mtu, f.max_burst_at_target_mtu);
    }
    return row;
}

} // namespace pspxdp::sim
