// Wake-up lateness: how late a thread that asked to run at time T runs, as
// a table of quantiles measured on a real machine (bench/bench_timers). The
// simulator draws from it when its model daemon sleeps or spins until the
// engine's wake-up time, so the gap horizon and the clockless mode are
// judged against this machine's timers, tails included, not a perfect clock.
#pragma once

#include "core/result.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pspxdp::sim {

struct LatenessTable {
    std::string name;
    std::string note;
    // (quantile, lateness ns), quantiles ascending from 0 to 1.
    std::vector<std::pair<double, uint64_t>> quantiles;

    // Inverse CDF, linear between the stored quantiles: ns.
    uint64_t sample(std::mt19937_64 &rng) const;
    uint64_t at(double q) const;
};

// Measured on this project's VM (2 vCPU, other builds running): see
// lateness.cpp for the command and the conditions.
const LatenessTable &measured_sleep();
const LatenessTable &measured_spin();

// bench_timers --json output: a list of {"name", "quantiles": [[q, ns], ...]}.
// Checks that quantiles ascend from 0 to 1 and lateness does not decrease.
Result<std::vector<LatenessTable>> parse_lateness_json(std::string_view text);

} // namespace pspxdp::sim
