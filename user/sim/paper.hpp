// The paper's experiments (docs/design.md §5 table), replayed through the engine
// on a simulated 1 Gbit/s wire and judged by the analyzer on the byte clock.
// `pspxdp simulate` prints them; the unit tests assert on the same rows.
#pragma once

#include "core/analyzer.hpp"
#include "sim/simulator.hpp"

#include <string>
#include <vector>

namespace pspxdp::sim {

struct PaperScenario {
    std::string name;
    SimConfig config;
    std::string paper_mean; // what the paper measured (2005, e1000), for the table
    std::string paper_burst;
    std::string note;
};

struct PaperRow {
    std::string scenario;
    std::string flow;        // source name
    uint64_t target_bps = 0; // 0: normal class
    uint64_t frames = 0;
    double mean_bps = 0;     // byte clock
    double error_pct = 0;    // (mean - target) / target
    double rate_min_bps = 0; // rate per packet (n = 1), byte clock
    double rate_max_bps = 0;
    double max_burst_mtu = 0;
    std::string paper_mean;
    std::string paper_burst;
};

struct ScenarioResult {
    std::vector<PaperRow> rows; // paced classes one by one; many equal classes summarised
    double gap_share = 0;
    EngineCounters counters;
};

// frames_scale multiplies every scenario's frame count (tests use more).
std::vector<PaperScenario> paper_scenarios(double frames_scale = 1.0);
ScenarioResult run_scenario(const PaperScenario &scenario);

} // namespace pspxdp::sim
