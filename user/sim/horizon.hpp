// The gap horizon's comparison (docs/design.md §4.5): the paper's gap rule
// against gap horizons and the clockless mode, side by side on the same
// simulated traffic, with the model
// daemon waking late as this machine's timers do (sim/lateness.hpp).
// `pspxdp simulate --horizon` prints it; the unit tests assert on its rows.
#pragma once

#include "sim/simulator.hpp"

#include <string>
#include <vector>

namespace pspxdp::sim {

struct HorizonMode {
    std::string name;
    uint64_t gap_horizon_ns = kGapHorizonInf;
    bool clockless = false;
    // The model daemon spins for the last spin_ns of a wait whose slack is
    // below it; 0: it always sleeps.
    uint64_t spin_ns = 0;
    // Clockless: the classes' burst bound (L2 bytes; 0: the engine's default).
    uint64_t burst_bytes = 0;
};

// The paper's rule, H = 50 us, 200 us, 1 ms, and the clockless mode with a
// daemon that spins the last 50 us before a due time and one that only sleeps.
std::vector<HorizonMode> horizon_modes(const std::vector<uint64_t> &horizons_ns);

struct HorizonScenario {
    std::string name;
    SimConfig config; // sources and line rate; mode and wake model set per run
};

// One class at 1, 20, 100, 500 Mbit/s and 20 Mbit/s on 10 Gbit/s, the
// paper's 5 classes with a greedy normal class; `seconds` of wire each.
std::vector<HorizonScenario> horizon_scenarios(double seconds);

struct HorizonRow {
    std::string scenario;
    std::string mode;
    double seconds = 0;              // simulated real time
    double gap_time_share = 0;       // gap frames' share of the wire's time
    double gap_byte_share = 0;       // ... of the bytes sent
    double emitted_per_s = 0;        // frames and gap frames handed to the NIC
    double wakeups_per_s = 0;        // waits the daemon slept or spun through
    double spin_share = 0;           // of one core, spinning before due times
    double worst_rate_error_pct = 0; // paced classes, measured mean vs target
    double worst_burst_mtu = 0;      // max burstiness at the class rate, worst class
    double normal_bps = 0;           // what the normal class got, if any
    EngineCounters counters;
};

// wake.sleep / wake.spin: the lateness tables (nullptr: a perfect timer).
HorizonRow run_horizon(const HorizonScenario &scenario, const HorizonMode &mode,
                       const WakeModel &wake);

} // namespace pspxdp::sim
