// ns per scheduling decision of class trees (docs/design.md §3.12) against
// a flat configuration with the same leaves:
//   bench_tree [--leaves N,N,...] [--decisions N] [--repeat N] [--cpu N]
// Every leaf greedy with 1514-byte frames on a 10 Gbit/s byte clock.
//   depth 1: flat, each leaf paced at 95 % of M / leaves (today's engine);
//   depth 2: ceil(leaves / 100) inner classes sharing 95 % of M, ceil M,
//            their leaves guaranteed 80 % of their parent's rate, ceil M:
//            a fifth of the traffic is borrowed;
//   depth 3: as depth 2 under 10 top-level classes.
// Prints ns per decision (median of --repeat), frames per second of one
// core flat out, and the share of frames that were borrowed.
#include "core/engine.hpp"

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

constexpr uint64_t kLineRate = 10'000'000'000;

struct Result_ {
    double ns_per_decision = 0, frames_per_s = 0, borrowed_share = 0;
};

Result_ run(size_t leaves, int depth, uint64_t decisions) {
    EngineConfig cfg;
    cfg.line_rate_bps = kLineRate;
    cfg.window_bytes = UINT64_MAX / 4;
    Engine e(cfg);
    const uint64_t total = kLineRate / 100 * 95;
    std::vector<uint32_t> leaf;
    if (depth == 1) {
        for (size_t i = 0; i < leaves; ++i) leaf.push_back(e.add_class(total / leaves).value());
    } else {
        std::vector<TreeSpec> specs;
        auto cls = [&](uint64_t rate, uint32_t parent, uint64_t ceil) {
            const uint32_t k = e.add_class(0).value();
            specs.push_back(TreeSpec{k, rate, parent, ceil, 0});
            return k;
        };
        const size_t inner = (leaves + 99) / 100;
        const size_t tops = depth == 3 ? std::min<size_t>(10, inner) : 0;
        std::vector<uint32_t> top;
        for (size_t t = 0; t < tops; ++t)
            top.push_back(cls(total / tops, kTreeNoParent, kLineRate));
        std::vector<uint32_t> mid;
        for (size_t m = 0; m < inner; ++m) {
            const uint32_t parent = tops ? top[m % tops] : kTreeNoParent;
            const size_t siblings = tops ? (inner + tops - 1 - m % tops) / tops : inner;
            mid.push_back(cls(total / (tops ? tops : 1) / siblings, parent, kLineRate));
        }
        for (size_t i = 0; i < leaves; ++i) {
            const size_t m = i % inner;
            const size_t siblings = (leaves + inner - 1 - m) / inner;
            leaf.push_back(cls(specs[(tops + m)].rate_bps / 5 * 4 / siblings, mid[m], kLineRate));
        }
        if (auto r = e.configure_tree(specs); !r) {
            std::fprintf(stderr, "bench_tree: %s\n", r.error().c_str());
            std::exit(1);
        }
    }
    for (uint32_t k : leaf) e.set_head(k, 1514);
    uint64_t frames = 0;
    auto step = [&] {
        Decision d = e.next(0);
        if (d.action == Action::Frame) {
            e.set_head(d.cls, 1514);
            ++frames;
        }
    };
    for (size_t i = 0; i < leaves * 2 + 1000; ++i) step();
    uint64_t borrowed0 = 0;
    for (uint32_t k : leaf) borrowed0 += e.class_counters(k).borrowed_bytes;
    frames = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < decisions; ++i) step();
    const auto t1 = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    uint64_t borrowed = 0;
    for (uint32_t k : leaf) borrowed += e.class_counters(k).borrowed_bytes;
    Result_ r;
    r.ns_per_decision = ns / double(decisions);
    r.frames_per_s = double(frames) / (ns / 1e9);
    r.borrowed_share = frames ? double(borrowed - borrowed0) / 1518.0 / double(frames) : 0;
    return r;
}

} // namespace

int main(int argc, char **argv) {
    std::vector<size_t> sizes{10, 10'000, 100'000};
    uint64_t decisions = 2'000'000;
    int repeat = 3, cpu = -1;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--leaves") && i + 1 < argc) {
            sizes.clear();
            for (char *p = argv[++i]; *p;) {
                sizes.push_back(std::strtoull(p, &p, 10));
                if (*p == ',') ++p;
            }
        } else if (!std::strcmp(argv[i], "--decisions") && i + 1 < argc) {
            decisions = std::strtoull(argv[++i], nullptr, 10);
        } else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--cpu") && i + 1 < argc) {
            cpu = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf("usage: bench_tree [--leaves N,N,...] [--decisions N] [--repeat N] "
                        "[--cpu N]\n");
            return 0;
        } else {
            std::fprintf(stderr, "bench_tree: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    pin_cpu(cpu, "bench_tree");
    std::printf("%8s %6s %10s %14s %10s\n", "leaves", "depth", "ns/dec", "frames/s", "borrowed");
    for (size_t n : sizes)
        for (int depth = 1; depth <= 3; ++depth) {
            std::vector<Result_> runs;
            for (int r = 0; r < std::max(1, repeat); ++r) runs.push_back(run(n, depth, decisions));
            std::sort(runs.begin(), runs.end(), [](const Result_ &a, const Result_ &b) {
                return a.ns_per_decision < b.ns_per_decision;
            });
            const Result_ &m = runs[runs.size() / 2];
            std::printf("%8zu %6d %10.1f %14.0f %9.1f%%\n", n, depth, m.ns_per_decision,
                        m.frames_per_s, m.borrowed_share * 100);
            std::fflush(stdout);
        }
    return 0;
}
