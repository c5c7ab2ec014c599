// bench_flow_queues: what flows inside a class (docs/design.md §1.5) cost the daemon
// per frame: ns for one frame's enqueue + head + pop, the three calls
// class_queues.cpp makes per frame, with flows on (per-flow DRR + CoDel)
// and off (one FIFO: flow hash 0, CoDel off, as the daemon runs a class
// with flows off), on the same steady backlog, and the memory each layout
// takes.
//
//   bench_flow_queues [--frames-per-test N] [--repeat N] [--cpu N] [--json]
//
// Each row keeps `classes` x `flows` flows backlogged with `depth` frames
// each: a frame is sent from a class chosen at random (the engine's pick),
// and the frame comes back to a random flow of the same class (a steady
// backlog). CoDel runs on every head (target 1 h, so it measures the
// check, not drops). Median of --repeat runs; --cpu pins the process.
#include "datapath/flow_queues.hpp"

#include "pin_cpu.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/resource.h>
#include <vector>

using namespace pspxdp::datapath;

namespace {

struct NoVerdict final : AqmVerdict {
    bool mark(uint32_t, uint32_t) override { return false; }
    void drop(uint32_t, uint32_t) override { std::abort(); } // target 1 h: never
};

struct Row {
    const char *what;
    uint32_t classes, flows, depth;
    bool on;
};

struct Result {
    double ns_per_frame;
    size_t pool_bytes;
    size_t class_bytes;
};

// A small fast generator: the bench measures the queues, not rand().
struct Rng {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    uint32_t next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return uint32_t(s >> 32);
    }
};

Result run(const Row &row, uint64_t ops) {
    const uint32_t frames = row.classes * row.flows * row.depth;
    FrameTable table(frames);
    FlowQueues q(table, frames, 1518);
    FlowAqm aqm;
    aqm.enabled = row.on;
    aqm.target_ns = 3'600'000'000'000ull;
    NoVerdict verdict;
    Rng rng;
    // Flow hashes: distinct per class (the kernel's skb hash is random).
    std::vector<uint32_t> hash(size_t(row.classes) * row.flows);
    for (auto &h : hash) h = rng.next();
    uint64_t now = 0;
    uint32_t fr = 0;
    for (uint32_t c = 0; c < row.classes; ++c)
        for (uint32_t f = 0; f < row.flows; ++f)
            for (uint32_t d = 0; d < row.depth; ++d)
                q.enqueue(c, row.on ? hash[size_t(c) * row.flows + f] : 0, fr++, 1518, now);
    // Pre-draw the random picks outside the timed loop.
    std::vector<uint32_t> picks(1 << 16);
    for (auto &p : picks) p = rng.next();
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < ops; ++i) {
        const uint32_t r = picks[i & (picks.size() - 1)] ^ uint32_t(i * 0x9e3779b9u);
        const uint32_t c = r % row.classes;
        now += 100;
        if (q.head(c, aqm, now, verdict) == kNoFrame) std::abort();
        const uint32_t f = q.pop(c);
        const uint32_t h = row.on ? hash[size_t(c) * row.flows + (r >> 16) % row.flows] : 0;
        q.enqueue(c, h, f, 1518, now);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return {ns / double(ops), q.pool_bytes() + size_t(frames) * sizeof(FrameMeta),
            size_t(row.classes) * sizeof(ClassFlows)};
}

} // namespace

int main(int argc, char **argv) {
    uint64_t ops = 4'000'000;
    int repeat = 5, cpu = -1;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
        const std::string o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (o == "--json") {
            json = true;
        } else if (o == "--frames-per-test" && v) {
            ops = std::strtoull(v, nullptr, 10), ++i;
        } else if (o == "--repeat" && v) {
            repeat = std::atoi(v), ++i;
        } else if (o == "--cpu" && v) {
            cpu = std::atoi(v), ++i;
        } else {
            std::fprintf(stderr, "usage: bench_flow_queues [--frames-per-test N] [--repeat N] "
                                 "[--cpu N] [--json]\n");
            return 2;
        }
    }
    if (ops < 1000 || repeat < 1 || repeat > 99) {
        std::fprintf(stderr, "bench_flow_queues: --frames-per-test >= 1000, --repeat 1..99\n");
        return 2;
    }
    pin_cpu(cpu, "bench_flow_queues");
    const Row rows[] = {
        {"1 class, 1 flow", 1, 1, 64, false},
        {"1 class, 1 flow", 1, 1, 64, true},
        {"1 class, 16 flows", 1, 16, 4, false},
        {"1 class, 16 flows", 1, 16, 4, true},
        {"1 class, 128 flows", 1, 128, 4, false},
        {"1 class, 128 flows", 1, 128, 4, true},
        {"1 class, 1024 flows", 1, 1024, 2, false},
        {"1 class, 1024 flows", 1, 1024, 2, true},
        {"256 classes x 1 flow", 256, 1, 8, false},
        {"256 classes x 1 flow", 256, 1, 8, true},
        {"10000 classes x 100 flows", 10000, 100, 1, false},
        {"10000 classes x 100 flows", 10000, 100, 1, true},
    };
    if (!json)
        std::printf("flow queues, one frame's enqueue + head + pop (ns, median of %d x %llu "
                    "frames)\n%-27s %6s %9s %9s %12s %10s\n",
                    repeat, (unsigned long long)ops, "backlog", "depth", "off ns", "on ns",
                    "on / off", "pool MB");
    if (json) std::printf("[");
    for (size_t i = 0; i < std::size(rows); i += 2) {
        double med[2];
        Result last{};
        for (int on = 0; on < 2; ++on) {
            std::vector<double> ns;
            for (int k = 0; k < repeat; ++k) {
                last = run(rows[i + on], ops);
                ns.push_back(last.ns_per_frame);
            }
            std::sort(ns.begin(), ns.end());
            med[on] = ns[ns.size() / 2];
        }
        const Row &r = rows[i];
        if (json)
            std::printf("%s{\"backlog\":\"%s\",\"classes\":%u,\"flows\":%u,\"depth\":%u,"
                        "\"off_ns\":%.1f,\"on_ns\":%.1f,\"pool_bytes\":%zu,\"class_bytes\":%zu}",
                        i ? "," : "", r.what, r.classes, r.flows, r.depth, med[0], med[1],
                        last.pool_bytes, last.class_bytes);
        else
            std::printf("%-27s %6u %9.1f %9.1f %12.2f %10.1f\n", r.what, r.depth, med[0], med[1],
                        med[1] / med[0], double(last.pool_bytes + last.class_bytes) / 1e6);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    if (json)
        std::printf("]\n");
    else
        std::printf("sizes: ClassFlows %zu B a class, Flow %zu B a flow (pool: frames + 1), "
                    "per frame %zu B FrameMeta + 12 B (arrival, length) + the index (2-4 x 4 B); "
                    "max RSS %ld MB\n",
                    sizeof(ClassFlows), FlowQueues::flow_bytes(), sizeof(FrameMeta),
                    ru.ru_maxrss / 1024);
    return 0;
}
