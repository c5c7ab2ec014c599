#include "sim/paper.hpp"

#include <algorithm>
#include <cmath>

namespace pspxdp::sim {

namespace {

constexpr uint64_t kGbit = 1'000'000'000;
constexpr uint64_t kMbit = 1'000'000;

SourceSpec paced(std::string name, uint64_t rate_bps, uint32_t len = 1514) {
    SourceSpec s;
    s.name = std::move(name);
    s.rate_bps = rate_bps;
    s.min_len = s.max_len = len;
    return s;
}

SimConfig base(uint64_t frames) {
    SimConfig c;
    c.engine.line_rate_bps = kGbit;
    c.engine.window_bytes = 64 * 1024;
    c.max_class_frames = frames;
    return c;
}

uint64_t scaled(uint64_t frames, double scale) {
    return std::max<uint64_t>(2, uint64_t(std::llround(double(frames) * scale)));
}

} // namespace

std::vector<PaperScenario> paper_scenarios(double scale) {
    std::vector<PaperScenario> out;
    auto one = [&](std::string name, uint64_t rate, uint64_t frames, std::string mean,
                   std::string burst, std::string note = "") {
        PaperScenario p{std::move(name), base(scaled(frames, scale)), std::move(mean),
                        std::move(burst), std::move(note)};
        p.config.sources.push_back(paced("1:1", rate));
        out.push_back(std::move(p));
    };
    // At 8 kbit/s one 1514-byte frame is due every 1.5 s: 20 frames are 30 s
    // of wire and 2.4 million gap frames.
    one("1 class 8kbit", 8'000, 20, "7.96kbit", "1 MTU");
    one("1 class 10Mbit", 10 * kMbit, 20'000, "9.95Mbit", "1 MTU");
    one("1 class 500Mbit", 500 * kMbit, 100'000, "498Mbit", "2 MTU");
    one("1 class 930Mbit", 930 * kMbit, 100'000, "926Mbit", "2 MTU");

    // The L2 ceiling for 1514-byte frames is 1518/1538 of M = 987.0 Mbit/s:
    // no sender can exceed it. 99 % of that ceiling needs gaps shorter than
    // the smallest gap frame, which the original could not send (it stopped
    // near 935 Mbit/s).
    const uint64_t ceiling_bps = kGbit * 1518 / 1538;
    one("1 class 99% of ceiling", ceiling_bps * 99 / 100, 100'000, "(935 max)", "-",
        "ceiling for 1514 B frames is 1518/1538 of M");
    one("1 class 99% of M", 990 * kMbit, 100'000, "(935 max)", "-",
        "above the 987 Mbit/s ceiling: saturates the wire");

    {
        PaperScenario p{"96 classes x 10Mbit", base(scaled(100'000, scale)), "9.91Mbit", "1 MTU",
                        ""};
        for (int i = 0; i < 96; ++i)
            p.config.sources.push_back(paced("1:" + std::to_string(i + 1), 10 * kMbit));
        out.push_back(std::move(p));
    }
    {
        PaperScenario p{"5 classes + normal", base(scaled(100'000, scale)),
                        "506/332/103/33/20.5Mbit", "2 MTU", "greedy normal class fills the rest"};
        const uint64_t rates[] = {500, 300, 100, 50, 20};
        for (int i = 0; i < 5; ++i)
            p.config.sources.push_back(paced("1:" + std::to_string(i + 1), rates[i] * kMbit));
        SourceSpec normal = paced("1:ff (normal)", 0);
        normal.min_len = 60;
        normal.max_len = 1514;
        p.config.sources.push_back(normal);
        out.push_back(std::move(p));
    }
    return out;
}

ScenarioResult run_scenario(const PaperScenario &scenario) {
    SimResult sim = simulate(scenario.config);
    AnalyzerConfig ac;
    ac.line_rate_bps = scenario.config.engine.line_rate_bps;
    ac.framing = scenario.config.engine.framing;
    ac.mode = ClockMode::ByteClock;
    ac.rate_window_packets = 1;
    TraceReport rep = analyze_trace(sim.trace, ac);

    ScenarioResult out;
    out.gap_share = rep.gap_share;
    out.counters = sim.counters;
    const auto &sources = scenario.config.sources;
    auto row_for = [&](const FlowReport &fr) {
        const SourceSpec &s = sources[fr.flow];
        PaperRow r;
        r.scenario = scenario.name;
        r.flow = s.name;
        r.target_bps = s.rate_bps;
        r.frames = fr.frames;
        r.mean_bps = fr.mean_rate_bps;
        r.error_pct =
            s.rate_bps ? (fr.mean_rate_bps - double(s.rate_bps)) / double(s.rate_bps) * 100 : 0;
        r.rate_min_bps = fr.rate_n_min_bps;
        r.rate_max_bps = fr.rate_n_max_bps;
        r.max_burst_mtu = fr.max_burst_mtu;
        r.paper_mean = scenario.paper_mean;
        r.paper_burst = scenario.paper_burst;
        return r;
    };
    if (sources.size() > 8) {
        // Many equal classes: one row with the worst of each figure.
        PaperRow worst;
        bool first = true;
        double mean_sum = 0;
        for (const FlowReport &fr : rep.flows) {
            if (fr.flow >= sources.size()) continue;
            PaperRow r = row_for(fr);
            mean_sum += r.mean_bps;
            if (first) {
                worst = r;
                first = false;
                continue;
            }
            worst.frames += r.frames;
            if (std::fabs(r.error_pct) > std::fabs(worst.error_pct)) worst.error_pct = r.error_pct;
            worst.rate_min_bps = std::min(worst.rate_min_bps, r.rate_min_bps);
            worst.rate_max_bps = std::max(worst.rate_max_bps, r.rate_max_bps);
            worst.max_burst_mtu = std::max(worst.max_burst_mtu, r.max_burst_mtu);
        }
        worst.flow = "each of " + std::to_string(sources.size());
        worst.mean_bps = mean_sum / double(sources.size());
        out.rows.push_back(worst);
    } else {
        for (const FlowReport &fr : rep.flows)
            if (fr.flow < sources.size()) out.rows.push_back(row_for(fr));
    }
    return out;
}

} // namespace pspxdp::sim
