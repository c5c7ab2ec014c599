// psp_cluster_scale: the cluster lab's estimate for large groups
// (docs/design.md §11.9). Runs the real HostProtocol of N hosts in the
// cluster simulation (user/cluster/simulation: one model etcd, one-way
// delays 1-20 ms, timers up to 50 ms late, clocks drifting) and reports per N:
// the etcd writes per second (puts and compare-and-swaps; keep-alives
// apart), the time the group takes to converge after a demand change,
// the invariant checker's verdict, and the CPU one allocate() takes.
//
//   psp_cluster_scale --hosts 10,100,300 [--allocate-only 1000] [--seconds S] [--seed N]
//
// --allocate-only N: only the allocate() figure at N hosts (the simulation's
// cost grows as N^3: every write is a view to each of N hosts, each of
// which reads N records, and an epoch is N acks).
//
// The group: budget 10 Gbit/s, floors B/(4N), weights 1-4, demands uneven
// (B/N x 0.2..3). Hosts join one every 20 ms; once all have joined, a demand
// step every 3 s: a tenth of the hosts (drawn at random) go idle, or come
// back at a new demand. Convergence of a step: from the step to the last
// rate change any host applied before the next step. The writes of the
// joins are left out (a second simulation ends when the steps begin; its
// writes are subtracted). Deterministic for a seed, except the CPU figures.
// One JSON object on stdout.
#include "cluster/allocator.hpp"
#include "cluster/checker.hpp"
#include "cluster/simulation.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace pspxdp::cluster;

namespace {

constexpr uint64_t kBudget = 10'000'000'000ull;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kJoinEvery = 20 * kMs;
constexpr uint64_t kStepEvery = 3'000 * kMs;

double cpu_seconds() { return double(std::clock()) / CLOCKS_PER_SEC; }

struct Plan {
    SimConfig config;
    uint64_t steps_from_ns = 0;
    std::vector<uint64_t> steps;
};

Plan plan(size_t n, uint64_t steady_ns, uint64_t seed) {
    Plan p;
    SimConfig &c = p.config;
    c.budget_bps = kBudget;
    c.seed = seed;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> share(0.2, 3.0);
    std::uniform_int_distribution<uint32_t> weight(1, 4);
    const uint64_t fair = kBudget / n;
    std::vector<uint64_t> demand(n);
    for (size_t i = 0; i < n; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "h%05zu", i);
        SimHost h;
        h.name = name;
        h.member = {kBudget / (4 * n), weight(rng), 0x10001};
        h.join_ns = i * kJoinEvery;
        h.clock_rate = 1.0 + std::uniform_real_distribution<double>(-1e-4, 1e-4)(rng);
        c.hosts.push_back(h);
        demand[i] = uint64_t(double(fair) * share(rng));
        c.demands.push_back({i, h.join_ns, demand[i]});
    }
    p.steps_from_ns = n * kJoinEvery + 2'000 * kMs;
    std::vector<bool> idle(n, false);
    for (uint64_t t = p.steps_from_ns; t + kStepEvery <= p.steps_from_ns + steady_ns;
         t += kStepEvery) {
        p.steps.push_back(t);
        std::vector<size_t> all(n);
        for (size_t i = 0; i < n; ++i) all[i] = i;
        std::shuffle(all.begin(), all.end(), rng);
        for (size_t k = 0; k < std::max<size_t>(1, n / 10); ++k) {
            size_t i = all[k];
            idle[i] = !idle[i];
            c.demands.push_back({i, t, idle[i] ? 0 : uint64_t(double(fair) * share(rng))});
        }
    }
    c.end_ns = p.steps_from_ns + steady_ns;
    return p;
}

// One allocate() over the whole group, every member live, as a proposer
// computes an epoch: microseconds of this machine's CPU.
double allocate_us(const SimConfig &config) {
    const size_t n = config.hosts.size();
    Roster roster{kBudget, {}};
    std::map<HostId, Live> live;
    for (size_t i = 0; i < n; ++i) {
        roster.members[config.hosts[i].name] = config.hosts[i].member;
        live[config.hosts[i].name] = {1, 1, config.demands[i].demand_bps};
    }
    const int reps = n >= 1000 ? 200 : 2000;
    volatile uint64_t sink = 0; // the result is used: the loop stays
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < reps; ++k)
        sink = sink + allocate(roster, live, uint64_t(k)).rate_bps.size();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() /
           reps;
}

nlohmann::json row(size_t n, uint64_t steady_ns, uint64_t seed) {
    Plan p = plan(n, steady_ns, seed);
    const double cpu0 = cpu_seconds();
    SimResult r = simulate_cluster(p.config);
    const double sim_cpu = cpu_seconds() - cpu0;
    SimConfig joins = p.config;
    joins.end_ns = p.steps_from_ns;
    joins.demands.erase(
        std::remove_if(joins.demands.begin(), joins.demands.end(),
                       [&](const SimDemand &d) { return d.time_ns >= p.steps_from_ns; }),
        joins.demands.end());
    const uint64_t join_writes = simulate_cluster(joins).store_writes;
    const double steady_s = double(steady_ns) / 1e9;

    // Convergence: per step, the last rate change before the next step.
    std::vector<double> converge_ms;
    for (size_t k = 0; k < p.steps.size(); ++k) {
        uint64_t from = p.steps[k];
        uint64_t to = k + 1 < p.steps.size() ? p.steps[k + 1] : p.config.end_ns;
        uint64_t last = 0;
        for (const auto &log : r.logs)
            for (const RateChange &c : log)
                if (c.time_ns >= from && c.time_ns < to) last = std::max(last, c.time_ns);
        if (last) converge_ms.push_back(double(last - from) / 1e6);
    }
    std::sort(converge_ms.begin(), converge_ms.end());
    auto pct = [&](double q) -> nlohmann::json {
        if (converge_ms.empty()) return nullptr;
        return converge_ms[std::min(converge_ms.size() - 1,
                                    size_t(q * double(converge_ms.size())))];
    };
    CheckReport check = check_budget(kBudget, r.logs);

    const double alloc_us = allocate_us(p.config);
    uint64_t changes = 0;
    for (const auto &log : r.logs) changes += log.size();
    return {{"hosts", n},
            {"steady_s", steady_s},
            {"steps", p.steps.size()},
            {"writes", r.store_writes - join_writes},
            {"writes_per_s", double(r.store_writes - join_writes) / steady_s},
            {"writes_per_s_per_host", double(r.store_writes - join_writes) / steady_s / double(n)},
            {"keepalives_per_s", double(n) * 1e9 / double(p.config.keepalive_every_ns)},
            {"converge_p50_ms", pct(0.5)},
            {"converge_p95_ms", pct(0.95)},
            {"converge_max_ms", pct(1.0)},
            {"rate_changes", changes},
            {"violations", check.violations.size()},
            {"max_sum_bps", check.max_sum_bps},
            {"allocate_us", alloc_us},
            {"sim_cpu_s", sim_cpu}};
}

int usage(const char *msg) {
    std::fprintf(stderr,
                 "psp_cluster_scale: %s\nusage: psp_cluster_scale --hosts N[,N...] "
                 "[--allocate-only N[,N...]] "
                 "[--seconds S] [--seed N]\n",
                 msg);
    return 2;
}

} // namespace

int main(int argc, char **argv) {
    std::vector<size_t> sizes, alloc_only;
    uint64_t seconds = 20, seed = 1;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) return usage(("missing the value of " + a).c_str());
        std::string v = argv[++i];
        try {
            if (a == "--hosts" || a == "--allocate-only") {
                std::stringstream ss(v);
                for (std::string x; std::getline(ss, x, ',');) {
                    size_t n = std::stoul(x);
                    if (n < 2 || n > 100000)
                        return usage((a + " " + x + ": expected 2..100000").c_str());
                    (a == "--hosts" ? sizes : alloc_only).push_back(n);
                }
            } else if (a == "--seconds") {
                seconds = std::stoull(v);
                if (seconds < 3 || seconds > 600) return usage("--seconds: expected 3..600");
            } else if (a == "--seed") {
                seed = std::stoull(v);
            } else {
                return usage(("unknown option " + a).c_str());
            }
        } catch (const std::exception &) {
            return usage(("\"" + v + "\": expected a number for " + a).c_str());
        }
    }
    if (sizes.empty() && alloc_only.empty()) return usage("--hosts or --allocate-only is required");
    nlohmann::json rows = nlohmann::json::array();
    for (size_t n : sizes) rows.push_back(row(n, seconds * 1'000'000'000ull, seed));
    nlohmann::json allocs = nlohmann::json::array();
    for (size_t n : alloc_only)
        allocs.push_back(
            {{"hosts", n}, {"allocate_us", allocate_us(plan(n, 3'000'000'000ull, seed).config)}});
    nlohmann::json out = {
        {"rows", rows},
        {"allocate_only", allocs},
        {"note",
         "simulated, " + std::to_string(seconds) +
             " s after every host joined (joins' writes left out): budget 10 Gbit/s, floors "
             "B/(4N), weights 1-4, demands B/N x 0.2..3; every 3 s a tenth of the hosts go "
             "idle or come back; one-way delays 1-20 ms, timers up to 50 ms late, TTL 3 s, "
             "keep-alives every 1 s; converge: from a step to the last rate change it caused; "
             "allocate(): one proposer's computation over N live members (this machine, "
             "real CPU); sim CPU: the whole simulation's"}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
}
