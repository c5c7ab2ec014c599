// Convergence of the whole loop (docs/design.md §11.2): demands measured as
// the agent measures them (the simulation's TCP-like classes: a class takes
// min(want, applied) and is limited while it wants more), epochs, acks,
// delays and late timers; the shares must reach weighted max-min over the
// wants within 5 %, every run, with the sum never above the budget.
#include "cluster/allocator.hpp"
#include "cluster/demand.hpp"
#include "cluster/simulation.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using namespace pspxdp::cluster;

namespace {

constexpr uint64_t ms = 1'000'000, s = 1'000'000'000, M = 1'000'000;

uint64_t rate_at(const std::vector<RateChange> &log, uint64_t t) {
    uint64_t rate = 0;
    for (const RateChange &c : log)
        if (c.time_ns <= t) rate = c.rate_bps;
    return rate;
}

struct Phase {
    std::vector<uint64_t> want_bps; // per host
};

struct Run {
    // Per phase: the ideal shares, the achieved ones at the phase's end, the
    // time from the phase's start until every share stayed within 5 % (s).
    std::vector<std::vector<uint64_t>> ideal, achieved;
    std::vector<double> converge_s;
    size_t violations = 0;
    // etcd writes per host per second (keep-alives are not writes): over
    // the whole run (joins included), from the first change on (the group
    // formed: the demand changes' cost), and in the steady state (from 2 s
    // after each change to the next).
    double writes_run = 0, writes_changes = 0, writes_steady = 0;
};

// Hosts join at 0, floors 10 Mbit/s; each phase lasts `len` from 1 s on.
Run run(uint64_t budget, const std::vector<uint32_t> &weights, const std::vector<Phase> &phases,
        uint64_t seed, uint64_t len = 6 * s) {
    SimConfig c;
    c.seed = seed;
    c.budget_bps = budget;
    c.end_ns = 1 * s + phases.size() * len;
    for (size_t i = 0; i < weights.size(); ++i) {
        SimHost h;
        h.name = "h" + std::to_string(i + 1);
        h.member = {10 * M, weights[i], 0x10001};
        h.clock_offset_ns = i * 1000 * s;
        c.hosts.push_back(h);
    }
    for (size_t k = 0; k < phases.size(); ++k)
        for (size_t i = 0; i < weights.size(); ++i)
            c.offers.push_back({i, 1 * s + k * len, phases[k].want_bps[i]});
    SimResult r = simulate_cluster(c);
    Run out;
    out.violations = check_budget(budget, r.logs).violations.size();
    double hosts = double(weights.size());
    out.writes_run = double(r.write_ns.size()) / hosts / (double(c.end_ns) / double(s));
    uint64_t changes = 0;
    for (uint64_t t : r.write_ns) changes += t >= 1 * s;
    out.writes_changes = double(changes) / hosts / (double(c.end_ns - 1 * s) / double(s));
    uint64_t steady = 0, steady_ns = 0;
    for (size_t k = 0; k < phases.size(); ++k) {
        uint64_t from = 1 * s + k * len + 2 * s, to = 1 * s + (k + 1) * len;
        for (uint64_t t : r.write_ns) steady += t >= from && t < to;
        steady_ns += to - from;
    }
    out.writes_steady = double(steady) / hosts / (double(steady_ns) / double(s));
    for (size_t k = 0; k < phases.size(); ++k) {
        std::vector<Claim> claims;
        for (size_t i = 0; i < weights.size(); ++i)
            claims.push_back({10 * M, std::max(10 * M, phases[k].want_bps[i]), weights[i]});
        std::vector<uint64_t> ideal = water_fill(budget, claims);
        uint64_t from = 1 * s + k * len, to = from + len;
        auto within = [&](uint64_t t) {
            for (size_t i = 0; i < ideal.size(); ++i)
                if (std::fabs(double(rate_at(r.logs[i], t)) - double(ideal[i])) >
                    0.05 * double(ideal[i]))
                    return false;
            return true;
        };
        // The last time in the phase the shares were not within 5 %.
        uint64_t last_out = from;
        for (uint64_t t = from; t < to; t += 10 * ms)
            if (!within(t)) last_out = t + 10 * ms;
        std::vector<uint64_t> got;
        for (size_t i = 0; i < ideal.size(); ++i) got.push_back(rate_at(r.logs[i], to - 1));
        out.ideal.push_back(ideal);
        out.achieved.push_back(got);
        out.converge_s.push_back(double(last_out - from) / double(s));
    }
    return out;
}

std::string shares(const std::vector<uint64_t> &v) {
    std::string out;
    for (uint64_t x : v) out += (out.empty() ? "" : "/") + std::to_string(x / M);
    return out;
}

// Phase A of the lab (300 Mbit/s; 250/150/20, then 160/120/20), and
// weights 2:1:1 with every host wanting everything.
const std::vector<Phase> kPhaseA = {{{250 * M, 150 * M, 20 * M}}, {{160 * M, 120 * M, 20 * M}}};
const std::vector<Phase> kWeighted = {{{300 * M, 300 * M, 300 * M}}, {{300 * M, 40 * M, 300 * M}}};

constexpr uint64_t kSeeds = 20;

// Every run of both shapes over kSeeds seeds.
struct Sweep {
    std::vector<std::pair<std::string, Run>> runs; // (weights, run), by seed
    // p95 of the time to within 5 %: of the changes (phase 1: a group
    // running, one or two hosts' demands change), and of the starts (phase
    // 0: every host starts from idle at once).
    double p95_change_s = 0, p95_start_s = 0;
};

double p95(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[(v.size() * 95 + 99) / 100 - 1];
}

Sweep sweep() {
    Sweep out;
    std::vector<double> starts, changes;
    for (uint64_t seed = 1; seed <= kSeeds; ++seed)
        for (const auto &[weights, phases] :
             {std::pair{std::vector<uint32_t>{1, 1, 1}, kPhaseA},
              std::pair{std::vector<uint32_t>{2, 1, 1}, kWeighted}}) {
            Run r = run(300 * M, weights, phases, seed);
            starts.push_back(r.converge_s[0]);
            changes.push_back(r.converge_s[1]);
            out.runs.emplace_back(std::to_string(weights[0]) + ":" + std::to_string(weights[1]) +
                                      ":" + std::to_string(weights[2]),
                                  std::move(r));
        }
    out.p95_change_s = p95(changes);
    out.p95_start_s = p95(starts);
    return out;
}

} // namespace

TEST_CASE("cluster converge: uneven demands reach weighted max-min within 5 % in 200 ms (p95) at "
          "<= 0.5 etcd writes per host per second",
          "[cluster]") {
    Sweep sw = sweep();
    for (const auto &[weights, r] : sw.runs) {
        CHECK(r.violations == 0);
        for (size_t k = 0; k < r.ideal.size(); ++k) {
            INFO("weights " << weights << " phase " << k << ": ideal " << shares(r.ideal[k])
                            << ", achieved " << shares(r.achieved[k]) << ", within 5 % after "
                            << r.converge_s[k] << " s");
            for (size_t i = 0; i < r.ideal[k].size(); ++i)
                CHECK(std::fabs(double(r.achieved[k][i]) - double(r.ideal[k][i])) <=
                      0.05 * double(r.ideal[k][i]));
            // Every run settled well inside the phase (6 s), and stays settled.
            CHECK(r.converge_s[k] <= 0.5);
        }
        INFO("weights " << weights << ": " << r.writes_run << " writes per host per second, "
                        << r.writes_changes << " from the first change, " << r.writes_steady
                        << " in the steady state");
        // A settled group writes nothing; the changes cost a demand write
        // (the bucket's), an epoch and the acks of the members it lowers
        // (design §11.1). The joins (once per member) are not counted.
        CHECK(r.writes_steady <= 0.5);
        CHECK(r.writes_changes <= 0.5);
    }
    // The goal (design §11.2): a demand change at the wire within 200 ms
    // (p95), a running group's and every host starting at once from idle.
    INFO("p95: changes " << sw.p95_change_s << " s, starts " << sw.p95_start_s << " s");
    CHECK(sw.p95_change_s <= 0.2);
    CHECK(sw.p95_start_s <= 0.2);
}

// The table for the record: pspxdp's unit_tests "[.converge-table]".
TEST_CASE("cluster converge: the table", "[.converge-table]") {
    Sweep sw = sweep();
    std::printf("| weights | seed | phase | ideal (Mbit/s) | achieved | within 5 %% after | writes "
                "/host/s (run; from 1 s; steady) |\n"
                "|---|---|---|---|---|---|---|\n");
    for (size_t j = 0; j < sw.runs.size(); ++j) {
        const auto &[weights, r] = sw.runs[j];
        for (size_t k = 0; k < r.ideal.size(); ++k)
            std::printf("| %s | %zu | %zu | %s | %s | %.3f s | %.2f; %.2f; %.2f |\n",
                        weights.c_str(), j / 2 + 1, k, shares(r.ideal[k]).c_str(),
                        shares(r.achieved[k]).c_str(), r.converge_s[k], r.writes_run,
                        r.writes_changes, r.writes_steady);
    }
    std::printf("\np95 of \"within 5 %% after\" over the %zu runs: the changes (phase 1) "
                "%.3f s, the starts from idle (phase 0) %.3f s\n",
                sw.runs.size(), sw.p95_change_s, sw.p95_start_s);
}

namespace {

// The lab's uneven experiment as the lab sees it (docs/results/
// 2026-11-28-cluster-convergence-lab, sections 2 and 4): UDP senders that
// offer what they offer whatever their rate, the small one bursty (a
// quarter of its 25 ms windows read a tenth of its rate, the next 1.9
// times: a late wake-up and its catch-up), and pacers that send
// `pacer_percent` of their rates (late on a loaded machine), each with the
// daemon's default queue (what the rate sends in 100 ms, at least 1000
// frames of 1518 bytes) that grows while the sender offers more than the
// pacer sends and drops past it. It replaces the simulation's TCP-like
// class: the host is known by its clock (host i's clock is i * 1000 s
// ahead).
struct Lab {
    uint64_t seed;
    std::vector<Phase> phases;
    uint64_t len;
    uint64_t pacer_percent = 94;

    EstimatorFactory factory() const {
        return [lab = *this](uint64_t budget) -> Estimator {
            struct State {
                DemandEstimator est;
                uint64_t last_ns = 0;
                uint64_t queue_bits = 0;
                uint64_t rng = 0;
                uint64_t owed_tenths = 0;
            };
            auto st = std::make_shared<State>();
            st->rng = lab.seed * 0x9E3779B97F4A7C15ull + 1;
            return [lab, st, budget](uint64_t now, const DemandWindow &in) {
                uint64_t applied = in.applied_bps;
                size_t host = now / (1000 * s);
                uint64_t t = now - host * 1000 * s;
                uint64_t want = 0;
                if (t >= 1 * s && (t - 1 * s) / lab.len < lab.phases.size())
                    want = lab.phases[(t - 1 * s) / lab.len].want_bps[host];
                uint64_t dt = st->last_ns == 0 ? 25 * ms : now - st->last_ns;
                st->last_ns = now;
                // A late wake-up: a window at a tenth, the next catching up.
                st->rng = st->rng * 6364136223846793005ull + 1442695040888963407ull;
                uint64_t tenths = 10 + st->owed_tenths;
                st->owed_tenths = 0;
                if (host == 2 && tenths == 10 && (st->rng >> 33) % 4 == 0)
                    tenths = 1, st->owed_tenths = 9;
                uint64_t offered_bits = want * tenths / 10 * dt / s;
                // The queue: the pacer sends what it can of it.
                uint64_t limit_bits = std::max(applied / 10, uint64_t(1000 * 1518 * 8));
                st->queue_bits += offered_bits;
                uint64_t sent_bits =
                    std::min(st->queue_bits, applied * lab.pacer_percent / 100 * dt / s);
                st->queue_bits -= sent_bits;
                bool dropped = st->queue_bits > limit_bits;
                st->queue_bits = std::min(st->queue_bits, limit_bits);
                DemandWindow w{offered_bits * s / dt, sent_bits * s / dt, applied, dropped};
                return st->est.sample(now, w, budget);
            };
        };
    }
};

// One run of the lab's shape (Lab above) for a seed.
struct LabRun {
    SimResult r;
    uint64_t end_ns = 0;
};

LabRun lab_run(uint64_t seed, uint64_t pacer_percent) {
    constexpr uint64_t len = 6 * s, budget = 300 * M;
    SimConfig c;
    c.seed = seed;
    c.budget_bps = budget;
    c.end_ns = 1 * s + kPhaseA.size() * len;
    for (size_t i = 0; i < 3; ++i) {
        SimHost h;
        h.name = "h" + std::to_string(i + 1);
        h.member = {10 * M, 1, 0x10001};
        h.clock_offset_ns = i * 1000 * s;
        c.hosts.push_back(h);
    }
    for (size_t k = 0; k < kPhaseA.size(); ++k)
        for (size_t i = 0; i < 3; ++i)
            c.offers.push_back({i, 1 * s + k * len, kPhaseA[k].want_bps[i]});
    c.estimator = Lab{seed, kPhaseA, len, pacer_percent}.factory();
    return {simulate_cluster(c), c.end_ns};
}

} // namespace

TEST_CASE("cluster converge: UDP senders (a bursty one) and pacers up to 10 % short of their "
          "rates: weighted max-min within 5 % in 1 s, then no rate change and no write",
          "[cluster]") {
    constexpr uint64_t len = 6 * s, budget = 300 * M;
    constexpr uint64_t kRuns = 10;
    for (uint64_t pacer_percent : {100, 94, 90}) {
        double writes_all = 0;
        for (uint64_t seed = 1; seed <= kRuns; ++seed) {
            LabRun lr = lab_run(seed, pacer_percent);
            const SimResult &r = lr.r;
            CHECK(check_budget(budget, r.logs).violations.size() == 0);
            // From the first change on (the joins not counted), as the lab
            // counts.
            uint64_t writes = 0;
            for (uint64_t t : r.write_ns) writes += t >= 1 * s;
            // The three joins (before the first change): each host's roster
            // write and live record, and one epoch (the proposer waits for
            // the joining members' records, §11.3), acknowledged once by
            // each: not an epoch at a floor first, and its acks.
            size_t joins = 0, epochs = 0, acks = 0;
            for (size_t w = 0; w < r.write_ns.size() && r.write_ns[w] < 1 * s; ++w) {
                joins += r.write_kind[w] == WriteKind::join;
                epochs += r.write_kind[w] == WriteKind::epoch;
                acks += r.write_kind[w] == WriteKind::ack;
            }
            INFO("seed " << seed << ": the joins wrote " << joins << " roster and live records, "
                         << epochs << " epochs, " << acks << " acks");
            CHECK(joins == 6);
            CHECK(epochs == 1);
            CHECK(acks == 3);
            double per_host_s = double(writes) / 3.0 / (double(lr.end_ns - 1 * s) / double(s));
            writes_all += per_host_s / kRuns;
            for (size_t k = 0; k < kPhaseA.size(); ++k) {
                // The ideal: max-min over the offers (a short pacer does
                // not make a demand).
                std::vector<Claim> claims;
                for (uint64_t want : kPhaseA[k].want_bps) claims.push_back({10 * M, want, 1});
                std::vector<uint64_t> ideal = water_fill(budget, claims);
                uint64_t from = 1 * s + k * len, settled = from + 1 * s, to = from + len;
                uint64_t last_out = from;
                for (uint64_t t = from; t < to; t += 10 * ms)
                    for (size_t i = 0; i < 3; ++i)
                        if (std::fabs(double(rate_at(r.logs[i], t)) - double(ideal[i])) >
                            0.05 * double(ideal[i]))
                            last_out = t + 10 * ms;
                size_t changes = 0, steady_writes = 0;
                for (const auto &log : r.logs)
                    for (const RateChange &rc : log)
                        changes += rc.time_ns >= settled && rc.time_ns < to;
                for (uint64_t t : r.write_ns) steady_writes += t >= settled && t < to;
                std::vector<uint64_t> got;
                for (const auto &log : r.logs) got.push_back(rate_at(log, to - 1));
                INFO("pacers at " << pacer_percent << " %, seed " << seed << " phase " << k
                                  << ": ideal " << shares(ideal) << ", applied " << shares(got)
                                  << ", within 5 % after " << double(last_out - from) / double(s)
                                  << " s, " << changes << " rate changes and " << steady_writes
                                  << " writes once settled, " << per_host_s
                                  << " writes per host per second");
                CHECK(last_out <= settled);
                CHECK(changes == 0);
                CHECK(steady_writes == 0);
                CHECK(per_host_s <= 0.6);
            }
        }
        INFO("pacers at " << pacer_percent << " %: writes per host per second, mean of " << kRuns
                          << " runs: " << writes_all);
        CHECK(writes_all <= 0.5);
    }
}

TEST_CASE("cluster converge: the lab's shape, writes by kind", "[.converge-table]") {
    constexpr uint64_t kRuns = 10;
    std::printf(
        "\n| pacers %% | phase | join | demand | demand+ack | epoch | ack | other | per host "
        "per s |\n|---|---|---|---|---|---|---|---|---|\n");
    for (uint64_t pacer_percent : {100, 94, 90}) {
        // Span 0: the joins (before the first change); then each phase.
        uint64_t counts[3][6] = {};
        for (uint64_t seed = 1; seed <= kRuns; ++seed) {
            LabRun lr = lab_run(seed, pacer_percent);
            for (size_t w = 0; w < lr.r.write_ns.size(); ++w) {
                uint64_t t = lr.r.write_ns[w];
                size_t span = t < 1 * s ? 0 : std::min<size_t>(2, 1 + (t - 1 * s) / (6 * s));
                ++counts[span][size_t(lr.r.write_kind[w])];
            }
        }
        for (size_t span = 0; span < 3; ++span) {
            uint64_t all = 0;
            for (uint64_t c : counts[span]) all += c;
            double secs = span == 0 ? 1.0 : 6.0;
            std::printf("| %llu | %s |", (unsigned long long)pacer_percent,
                        span == 0   ? "joins"
                        : span == 1 ? "0"
                                    : "1");
            for (size_t k = 0; k < 6; ++k) std::printf(" %.1f |", double(counts[span][k]) / kRuns);
            std::printf(" %.2f |\n", double(all) / kRuns / 3.0 / secs);
        }
    }
}
