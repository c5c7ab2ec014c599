// ns per scheduling decision against the number of backlogged classes: the
// engine (O(log n) heaps) and the paper's scan (O(n)) in the same run.
//   bench_engine [--json] [--no-scan] [--min-classes N] [--max-classes N]
//                [--decisions N] [--repeat N] [--cpu N]
//                [--gap-horizon NS] [--clockless] [--load PERCENT]
// Each engine figure is the median of --repeat runs (the machine may be
// shared); --cpu pins the process to one core. --gap-horizon and
// --clockless run the engine in those modes on a simulated clock (a Wait
// moves it to wake_ns), where a decision may also be a Wait; --load sets the
// paced load (default 95 % of the wire; lower loads make the horizon idle).
#include "core/engine.hpp"
#include "sim/reference_scan.hpp"

#include "pin_cpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace pspxdp;

namespace {

constexpr uint64_t kLineRate = 10'000'000'000; // 10 Gbit/s: 100k classes of ~95 kbit/s

struct Measurement {
    double ns_per_decision;
    uint64_t decisions;
    double gap_share;
};

struct Mode {
    uint64_t gap_horizon_ns = kGapHorizonInf;
    bool clockless = false;
    uint64_t load_percent = 95;
};

// Every class greedy with 1514-byte frames, paced rates summing to 95 % of M
// (--load), so about 5 % of decisions are gaps, as on a loaded pacer.
template <class Sched> Measurement measure(size_t classes, uint64_t decisions, const Mode &mode) {
    EngineConfig cfg;
    cfg.line_rate_bps = kLineRate;
    cfg.window_bytes = UINT64_MAX / 4; // the byte clock alone: no window waits
    cfg.gap_horizon_ns = mode.gap_horizon_ns;
    cfg.clockless = mode.clockless;
    Sched s(cfg);
    const uint64_t rate = kLineRate / 100 * mode.load_percent / classes;
    for (size_t i = 0; i < classes; ++i) {
        uint32_t c = s.add_class(rate).value();
        s.set_head(c, 1514);
    }
    // Simulated time: only a Wait moves it (the horizon and clockless modes).
    uint64_t now = 0;
    auto step = [&] {
        Decision d = s.next(now);
        if (d.action == Action::Frame) s.set_head(d.cls, 1514);
        if (d.action == Action::Wait) now = d.wake_ns;
        return d.action == Action::Gap;
    };
    // Warm-up: get past the in-phase start (every class due at once).
    for (size_t i = 0; i < classes * 2 + 1000; ++i) step();
    uint64_t gaps = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < decisions; ++i) gaps += step();
    auto t1 = std::chrono::steady_clock::now();
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    return Measurement{ns / double(decisions), decisions, double(gaps) / double(decisions)};
}

template <class Sched>
Measurement median_of(size_t classes, uint64_t decisions, int repeat, const Mode &mode) {
    std::vector<Measurement> runs;
    for (int i = 0; i < std::max(repeat, 1); ++i)
        runs.push_back(measure<Sched>(classes, decisions, mode));
    std::sort(runs.begin(), runs.end(), [](const Measurement &a, const Measurement &b) {
        return a.ns_per_decision < b.ns_per_decision;
    });
    return runs[runs.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
    bool json = false;
    bool scan = true;
    size_t min_classes = 1;
    size_t max_classes = 100'000;
    int repeat = 1;
    int cpu = -1;
    uint64_t decisions = 4'000'000;
    Mode mode;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--json") || !std::strcmp(argv[i], "-j")) {
            json = true;
        } else if (!std::strcmp(argv[i], "--no-scan")) {
            scan = false;
        } else if (!std::strcmp(argv[i], "--max-classes") && i + 1 < argc) {
            max_classes = std::strtoull(argv[++i], nullptr, 10);
        } else if (!std::strcmp(argv[i], "--min-classes") && i + 1 < argc) {
            min_classes = std::max<size_t>(1, std::strtoull(argv[++i], nullptr, 10));
        } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--cpu") && i + 1 < argc) {
            cpu = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--decisions") && i + 1 < argc) {
            decisions = std::strtoull(argv[++i], nullptr, 10);
        } else if (!std::strcmp(argv[i], "--gap-horizon") && i + 1 < argc) {
            mode.gap_horizon_ns = std::strtoull(argv[++i], nullptr, 10);
        } else if (!std::strcmp(argv[i], "--clockless")) {
            mode.clockless = true;
        } else if (!std::strcmp(argv[i], "--load") && i + 1 < argc) {
            mode.load_percent = std::strtoull(argv[++i], nullptr, 10);
            if (mode.load_percent < 1 || mode.load_percent > 100) {
                std::fprintf(stderr, "bench_engine: --load \"%s\": expected 1..100\n", argv[i]);
                return 2;
            }
        } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf(
                "usage: bench_engine [--json] [--no-scan] [--min-classes N] [--max-classes N]\n"
                "                    [--decisions N] [--repeat N] [--cpu N]\n"
                "                    [--gap-horizon NS] [--clockless] [--load PERCENT]\n");
            return 0;
        } else {
            std::fprintf(stderr, "bench_engine: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    pin_cpu(cpu, "bench_engine");
    if (!json)
        std::printf("%10s %14s %14s %9s %10s\n", "classes", "engine ns/dec", "scan ns/dec",
                    "speedup", "gap share");
    std::string out = "[";
    bool first = true;
    for (size_t n = min_classes; n <= max_classes; n *= 10) {
        Measurement e = median_of<Engine>(n, decisions, repeat, mode);
        // The scan is O(n): keep its total work bounded.
        uint64_t scan_decisions =
            std::max<uint64_t>(2'000, std::min<uint64_t>(decisions, 400'000'000 / n));
        Measurement s =
            scan ? measure<sim::ReferenceScan>(n, scan_decisions, Mode{}) : Measurement{0, 0, 0};
        double speedup = s.ns_per_decision / e.ns_per_decision;
        if (json) {
            char buf[256];
            std::snprintf(buf, sizeof buf,
                          "%s{\"classes\":%zu,\"engine_ns_per_decision\":%.2f,"
                          "\"scan_ns_per_decision\":%.2f,\"speedup\":%.2f,\"gap_share\":%.4f}",
                          first ? "" : ",", n, e.ns_per_decision, s.ns_per_decision, speedup,
                          e.gap_share);
            out += buf;
            first = false;
        } else {
            std::printf("%10zu %14.1f %14.1f %8.1fx %9.2f%%\n", n, e.ns_per_decision,
                        s.ns_per_decision, speedup, e.gap_share * 100);
            std::fflush(stdout);
        }
    }
    if (json) std::printf("%s]\n", out.c_str());
    return 0;
}
