// A discrete-event simulation of the pacer: traffic sources feed per-class
// queues, a scheduler (the engine, or the reference scan) decides, and a
// model NIC serializes the decisions at the line rate. The result is the
// frame sequence a receiver would capture, with both clocks: its order gives
// the byte clock, and the NIC model gives real start times.
//
// The wire can idle (gap horizon, clockless mode, nothing backlogged): the
// NIC starts a frame at max(wire free, time of the decision), so only the
// real start times are right across idle periods (judge them with
// ClockMode::Hybrid). The model daemon follows Wait decisions as the real
// one will: it sleeps until wake_ns, or, when the wait's slack is below
// WakeModel::spin_ns, sleeps until spin_ns before it and spins; it wakes late
// by a draw from a measured lateness table, and early when traffic arrives.
#pragma once

#include "core/analyzer.hpp"
#include "core/engine.hpp"
#include "sim/lateness.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::sim {

struct SourceSpec {
    std::string name;
    uint64_t rate_bps = 0;   // the class's rate; 0 makes it a normal class
    uint32_t min_len = 1514; // frame lengths (no FCS), uniform in [min_len, max_len]
    uint32_t max_len = 1514;
    // Offered traffic. Greedy: always backlogged. Otherwise on/off: during
    // on_ns frames arrive at offered_bps (L2 bytes), then off_ns of silence.
    bool greedy = true;
    uint64_t offered_bps = 0;
    uint64_t on_ns = 0;
    uint64_t off_ns = 0;
    uint64_t start_ns = 0;
    uint32_t queue_limit = 0; // frames; 0 = unlimited. Arrivals beyond it are dropped and counted.
    // Class trees (docs/design.md §3.12), the engine only: the parent's
    // source index (kTreeNoParent: top level), ceil (0: the rate) and prio.
    // A source with children sends nothing (give it greedy = false and
    // offered_bps = 0: silent).
    uint32_t parent = kTreeNoParent;
    uint64_t ceil_bps = 0;
    uint32_t prio = 0;
};

struct WakeModel {
    const LatenessTable *sleep = nullptr; // nullptr: a perfect timer
    const LatenessTable *spin = nullptr;
    // Waits whose slack (Decision::slack_ns) is below this are spun for
    // their last spin_ns; 0: never spin, always sleep.
    uint64_t spin_ns = 0;
    // As the daemon batches (user/daemon Loop::schedule): while the engine
    // is ahead of the wire with less than batch_bytes of window left, sleep
    // until there is room for a batch. 0: call next() at every wake-up.
    uint64_t batch_bytes = 0;
};

struct SimConfig {
    EngineConfig engine{};
    WakeModel wake{};
    std::vector<SourceSpec> sources;
    uint64_t max_class_frames = 100'000; // stop after this many real frames
    uint64_t max_decisions = UINT64_MAX;
    uint64_t max_ns = UINT64_MAX; // stop when real time passes this
    uint64_t seed = 1;
    bool record_trace = true;
};

struct SimResult {
    std::vector<TraceFrame> trace; // flow = source index, or kFlowGap
    EngineCounters counters;       // engine runs only
    std::vector<uint64_t> sent;    // frames per source
    std::vector<uint64_t> drops;   // arrivals dropped at a full queue, per source
    uint64_t decisions = 0;        // calls to next()
    uint64_t emitted = 0;          // Frame and Gap decisions: descriptors on the TX ring
    uint64_t wakeups = 0;          // waits that slept or spun until a future wake time
    uint64_t spin_ns = 0;          // time spent spinning before wake times
    uint64_t start_ns = 0;         // first decision
    uint64_t end_ns = 0;
};

enum class Scheduler { Engine, ReferenceScan };

SimResult simulate(const SimConfig &config, Scheduler scheduler = Scheduler::Engine);

} // namespace pspxdp::sim
