// Cluster mode under faults (docs/design.md §11.5, §11.6): simulated groups with
// partitions, crashes, restarts, joins, leaves and etcd outages, every
// host's applied rates replayed by the checker. The real protocol must give
// 0 violations; two broken ones must not, or the checker proves nothing.
#include "cluster/allocator.hpp"
#include "cluster/demand.hpp"
#include "cluster/simulation.hpp"

#include <catch2/catch.hpp>

using namespace pspxdp::cluster;

namespace {

constexpr uint64_t ms = 1'000'000, s = 1'000'000'000;

// The rate a log says was applied at time t.
uint64_t rate_at(const std::vector<RateChange> &log, uint64_t t) {
    uint64_t rate = 0;
    for (const RateChange &c : log)
        if (c.time_ns <= t) rate = c.rate_bps;
    return rate;
}

// The highest rate a log shows in [from, to].
uint64_t max_in(const std::vector<RateChange> &log, uint64_t from, uint64_t to) {
    uint64_t top = rate_at(log, from);
    for (const RateChange &c : log)
        if (c.time_ns > from && c.time_ns <= to) top = std::max(top, c.rate_bps);
    return top;
}

// The real protocol, broken from outside in one of two ways.
class Broken final : public Agent {
  public:
    enum class Flaw {
        // Views in which every member has acknowledged the newest epoch: it
        // raises before the others lowered.
        raise_before_acks,
        // No timer, so no local deadline: a host cut off from etcd keeps its
        // rate after its lease expired on the server.
        outlive_lease,
    };
    Broken(std::unique_ptr<Agent> real, Flaw flaw) : real_(std::move(real)), flaw_(flaw) {}
    void on_view(uint64_t now, const View &view) override {
        if (flaw_ != Flaw::raise_before_acks) return real_->on_view(now, view);
        View lie = view;
        for (auto &[host, live] : lie.live) live.ack_epoch = lie.alloc ? lie.alloc->epoch : 0;
        real_->on_view(now, lie);
    }
    void on_lease_granted(uint64_t now, uint64_t lease, uint64_t sent) override {
        real_->on_lease_granted(now, lease, sent);
    }
    void on_lease_renewed(uint64_t now, uint64_t lease, uint64_t sent) override {
        real_->on_lease_renewed(now, lease, sent);
    }
    void on_lease_lost(uint64_t now, uint64_t lease) override { real_->on_lease_lost(now, lease); }
    void on_demand(uint64_t now, uint64_t demand) override { real_->on_demand(now, demand); }
    void on_timer(uint64_t now) override {
        if (flaw_ != Flaw::outlive_lease) real_->on_timer(now);
    }
    void leave(uint64_t now) override { real_->leave(now); }
    uint64_t lease() const override { return real_->lease(); }

  private:
    std::unique_ptr<Agent> real_;
    Flaw flaw_;
};

AgentFactory broken(Broken::Flaw flaw) {
    return [flaw](const SimHost &h, uint64_t budget, const Timing &timing, Effects &e) {
        return std::make_unique<Broken>(make_host_protocol(h, budget, timing, e), flaw);
    };
}

struct Totals {
    size_t violations = 0;
    size_t busy_runs = 0; // runs whose sum came within 10% of the budget
    uint64_t changes = 0;
};

// late_ns: the timers' lateness, when not random_faults' own.
// orphan_after: floors released (R7, R8); release_early: released that much
// too early (broken).
Totals run_schedules(uint64_t first_seed, int runs, const AgentFactory &factory,
                     uint64_t late_ns = 0, uint64_t orphan_after_ns = 0,
                     uint64_t release_early_ns = 0) {
    Totals t;
    for (int i = 0; i < runs; ++i) {
        SimConfig c = random_faults(first_seed + uint64_t(i), 5, 40 * s);
        if (late_ns != 0) c.max_timer_late_ns = late_ns;
        c.timing.orphan_after_ns = orphan_after_ns;
        c.timing.release_early_ns = release_early_ns;
        SimResult r = simulate_cluster(c, factory);
        CheckReport report = check_budget(c.budget_bps, r.logs);
        t.violations += report.violations.size();
        t.changes += report.changes;
        if (report.max_sum_bps * 10 >= c.budget_bps * 9) ++t.busy_runs;
        if (!report.violations.empty())
            UNSCOPED_INFO("seed " << c.seed << ": " << report.violations.size()
                                  << " violations, the first at " << report.violations[0].start_ns
                                  << " ns, sum " << report.violations[0].sum_bps);
    }
    return t;
}

SimConfig steady_group(size_t hosts) {
    SimConfig c;
    for (size_t i = 0; i < hosts; ++i) {
        SimHost h;
        h.name = "h" + std::to_string(i);
        h.member = {50'000'000, 1, 0x10001};
        h.clock_offset_ns = i * 1000 * s;
        h.clock_rate = 1.0 + (i % 2 ? 1 : -1) * c.timing.clock_drift;
        c.hosts.push_back(h);
        c.demands.push_back({i, 0, 2 * c.budget_bps}); // all backlogged
    }
    return c;
}

// Simulates c, which must keep the sum within the budget.
SimResult simulate_checked(const SimConfig &c) {
    SimResult r = simulate_cluster(c);
    CheckReport report = check_budget(c.budget_bps, r.logs);
    CHECK(report.violations.empty());
    return r;
}

// Four backlogged hosts (floors 50 Mbit/s, equal weights) and one fault.
SimResult steady_with(SimFault fault, uint64_t end_ns, SimConfig &c) {
    c = steady_group(4);
    c.end_ns = end_ns;
    c.faults.push_back(fault);
    return simulate_checked(c);
}

} // namespace

TEST_CASE("cluster sim: random fault schedules keep the sum within the budget", "[cluster]") {
    Totals t = run_schedules(1000, 150, make_host_protocol);
    CHECK(t.violations == 0);
    // Not safe by idling: most runs use the budget, rates move a lot.
    CHECK(t.busy_runs >= 140);
    CHECK(t.changes > 150 * 20);
}

TEST_CASE("cluster sim: the checker catches a protocol that raises before the acks", "[cluster]") {
    Totals t = run_schedules(1000, 30, broken(Broken::Flaw::raise_before_acks));
    CHECK(t.violations > 0);
}

TEST_CASE("cluster sim: the checker catches a host that outlives its lease", "[cluster]") {
    Totals t = run_schedules(1000, 30, broken(Broken::Flaw::outlive_lease));
    CHECK(t.violations > 0);
}

TEST_CASE("cluster sim: the margin must cover a late timer", "[cluster]") {
    // Up to the margin late: still safe...
    Timing timing;
    CHECK(run_schedules(1000, 30, make_host_protocol, timing.margin_ns - 50 * ms).violations == 0);
    // ...three margins late: the deadline passes the lease's expiry.
    CHECK(run_schedules(1000, 200, make_host_protocol, 3 * timing.margin_ns).violations > 0);
}

TEST_CASE("cluster sim: floors released after TTL + G keep the sum within the budget",
          "[cluster]") {
    // Orphan after 2 s: the random faults (partitions and crashes of up to
    // 10 s, etcd down) release floors and give them back all the time.
    Totals t = run_schedules(2000, 150, make_host_protocol, 0, 2 * s);
    CHECK(t.violations == 0);
    CHECK(t.busy_runs >= 140);
    // Up to the margin late: still safe.
    Timing timing;
    CHECK(
        run_schedules(2000, 30, make_host_protocol, timing.margin_ns - 50 * ms, 2 * s).violations ==
        0);
}

TEST_CASE("cluster sim: the checker catches a floor released before its host let go of it",
          "[cluster]") {
    // G one orphan span too short: the others take the floor of a host cut
    // off from etcd while it still holds it.
    Totals t = run_schedules(2000, 100, make_host_protocol, 0, 2 * s, 2 * s + 500 * ms);
    UNSCOPED_INFO("released early: " << t.violations << " violations");
    CHECK(t.violations > 0);
}

TEST_CASE("cluster sim: a backlogged group converges to equal shares", "[cluster]") {
    SimConfig c = steady_group(4);
    c.end_ns = 10 * s;
    SimResult r = simulate_checked(c);
    for (const auto &log : r.logs) CHECK(rate_at(log, 1 * s) == 250'000'000);
    REQUIRE(r.store.roster);
    CHECK(r.store.roster->members.size() == 4);
    CHECK(r.store.live.size() == 4);
    // Steady demand: one epoch, not one per demand sample.
    REQUIRE(r.store.alloc);
    CHECK(r.store.alloc->epoch <= 4);
}

TEST_CASE("cluster sim: a demand change converges within a second", "[cluster]") {
    SimConfig c = steady_group(4);
    c.end_ns = 20 * s;
    c.demands.push_back({0, 10 * s, 100'000'000});      // h0 needs little
    c.demands.push_back({0, 15 * s, 2 * c.budget_bps}); // then all again
    SimResult r = simulate_checked(c);
    CHECK(rate_at(r.logs[0], 11 * s) == 100'000'000);
    for (size_t i = 1; i < 4; ++i) CHECK(rate_at(r.logs[i], 11 * s) == 300'000'000);
    for (const auto &log : r.logs) CHECK(rate_at(log, 16 * s) == 250'000'000);
}

TEST_CASE("cluster sim: a host cut off from etcd falls to its floor; the others wait for its lease",
          "[cluster]") {
    SimConfig c;
    SimResult r = steady_with({SimFault::Kind::partition, 0, 10 * s, 20 * s}, 30 * s, c);
    // At its floor within the lease TTL.
    CHECK(rate_at(r.logs[0], 10 * s) == 250'000'000);
    CHECK(rate_at(r.logs[0], 10 * s + c.timing.lease_ttl_ns) == 50'000'000);
    uint64_t expiry = 0;
    for (const auto &e : r.expiries)
        if (e.host == "h0" && e.time_ns > 10 * s) expiry = e.time_ns;
    REQUIRE(expiry > 10 * s);
    CHECK(expiry <= 10 * s + c.timing.lease_ttl_ns + c.max_delay_ns);
    for (size_t i = 1; i < 4; ++i) {
        // Nobody raises before the lease is gone on the server...
        CHECK(max_in(r.logs[i], 10 * s, expiry) == 250'000'000);
        // ...and then its share, not its floor, goes to the others.
        CHECK(rate_at(r.logs[i], expiry + 1 * s) == (i == 3 ? 316'666'666u : 316'666'667u));
    }
    // Healed: back to equal shares.
    for (const auto &log : r.logs) CHECK(rate_at(log, 22 * s) == 250'000'000);
}

TEST_CASE("cluster sim: a killed host's share goes to the others within the TTL", "[cluster]") {
    SimConfig c;
    SimResult r = steady_with({SimFault::Kind::crash, 0, 10 * s, 30 * s}, 40 * s, c);
    CHECK(rate_at(r.logs[0], 10 * s) == 0);
    // Its lease expires at most TTL after its last keep-alive reached etcd
    // (sent before the kill), then one epoch: the proposer's view, its
    // write, the views, the acks, the views (6 one-way delays).
    uint64_t expiry = 0;
    for (const auto &e : r.expiries)
        if (e.host == "h0" && e.time_ns > 10 * s) expiry = e.time_ns;
    CHECK(expiry <= 10 * s + c.timing.lease_ttl_ns + c.max_delay_ns);
    for (size_t i = 1; i < 4; ++i)
        CHECK(rate_at(r.logs[i], 10 * s + c.timing.lease_ttl_ns + 7 * c.max_delay_ns) >
              300'000'000);
    // Restarted, it gets its share back.
    for (const auto &log : r.logs) CHECK(rate_at(log, 32 * s) == 250'000'000);
}

TEST_CASE("cluster sim: with etcd down every host holds its floor, then recovers", "[cluster]") {
    SimConfig c;
    SimResult r = steady_with({SimFault::Kind::etcd_down, 0, 10 * s, 25 * s}, 40 * s, c);
    for (const auto &log : r.logs) {
        CHECK(rate_at(log, 10 * s + c.timing.lease_ttl_ns) == 50'000'000);
        CHECK(max_in(log, 10 * s + c.timing.lease_ttl_ns, 25 * s) == 50'000'000);
        CHECK(rate_at(log, 27 * s) == 250'000'000);
    }
}

TEST_CASE("cluster sim: released floors: a partitioned host at 0 by then, a dead one's reused",
          "[cluster]") {
    const uint64_t orphan = 2 * s;
    SimConfig c = steady_group(4);
    c.timing.orphan_after_ns = orphan;
    c.end_ns = 40 * s;
    c.faults.push_back({SimFault::Kind::partition, 0, 10 * s, 25 * s});
    SimResult r = simulate_checked(c);
    uint64_t expiry = 0;
    for (const auto &e : r.expiries)
        if (e.host == "h0" && e.time_ns > 10 * s) expiry = e.time_ns;
    REQUIRE(expiry > 10 * s);
    // At its floor within the TTL, at 0 (held: 0 in the log) one orphan
    // span after its deadline, that is before its lease expired + G.
    CHECK(rate_at(r.logs[0], 10 * s + c.timing.lease_ttl_ns) == 50'000'000);
    CHECK(rate_at(r.logs[0], expiry + c.timing.release_after_ns()) == 0);
    for (size_t i = 1; i < 4; ++i) {
        // The others: its share at expiry, its floor only after G...
        CHECK(max_in(r.logs[i], expiry, expiry + c.timing.release_after_ns()) <= 316'666'667u);
        // ...then all of B between them.
        CHECK(rate_at(r.logs[i], expiry + c.timing.release_after_ns() + 1 * s) >= 333'333'333u);
    }
    // Healed: it comes back, re-establishes, equal shares.
    for (const auto &log : r.logs) CHECK(rate_at(log, 30 * s) == 250'000'000);

    // Killed: its floor reused after TTL + G.
    c.faults = {{SimFault::Kind::crash, 0, 10 * s, 60 * s}};
    r = simulate_checked(c);
    for (size_t i = 1; i < 4; ++i)
        CHECK(rate_at(r.logs[i], 10 * s + c.timing.lease_ttl_ns + c.timing.release_after_ns() +
                                     1 * s) >= 333'333'333u);
    // Without release (the default): its floor stays held.
    c.timing.orphan_after_ns = 0;
    r = simulate_checked(c);
    for (size_t i = 1; i < 4; ++i) CHECK(rate_at(r.logs[i], 30 * s) <= 316'666'667u);
}

TEST_CASE("cluster sim: a join whose floor does not fit is refused and never paces", "[cluster]") {
    SimConfig c = steady_group(3);
    c.end_ns = 10 * s;
    c.hosts[0].member.floor_bps = c.hosts[1].member.floor_bps = 300'000'000;
    c.hosts[2].member.floor_bps = 400'000'001;
    c.hosts[2].join_ns = 2 * s;
    SimResult r = simulate_checked(c);
    CHECK(r.logs[2].empty());
    REQUIRE(r.store.roster);
    CHECK(r.store.roster->members.count("h2") == 0);
    CHECK(rate_at(r.logs[0], 10 * s) == 500'000'000);
}

TEST_CASE("cluster sim: a host that leaves stops at once and its share is reused", "[cluster]") {
    SimConfig c = steady_group(4);
    c.end_ns = 20 * s;
    c.hosts[3].leave_ns = 10 * s;
    SimResult r = simulate_checked(c);
    CHECK(rate_at(r.logs[3], 10 * s) == 0);
    for (size_t i = 0; i < 3; ++i)
        CHECK(rate_at(r.logs[i], 12 * s) == (i == 0 ? 333'333'334u : 333'333'333u));
    REQUIRE(r.store.roster);
    CHECK(r.store.roster->members.count("h3") == 0);
    CHECK(r.store.live.count("h3") == 0);
}

namespace {

// The lab's changing demand (§11.9's dynamic run) with TCP-like senders:
// host i backlogged from 3i s to 3(8-i) s, idle otherwise; floors 1 % of
// B (a floor is reserved for an idle member too, so with the lab's B/(4N)
// the busy hosts could never take more than B less the idle floors).
struct Dynamics {
    double utilisation = 1.0; // worst mean over a phase, from 1 s after its change
    double converge_p95_s = 0;
    size_t violations = 0;
};

Dynamics run_dynamics(const EstimatorFactory &estimator, uint64_t seed) {
    constexpr size_t n = 4;
    constexpr uint64_t unit = 3 * s;
    SimConfig c;
    c.seed = seed;
    c.budget_bps = 500'000'000;
    c.end_ns = 2 * n * unit + 2 * s;
    c.quiet_percent = 10;
    c.estimator = estimator;
    std::vector<std::pair<uint64_t, uint64_t>> on;
    for (size_t i = 0; i < n; ++i) {
        SimHost h;
        h.name = "h" + std::to_string(i);
        h.member = {c.budget_bps / 100, 1, 0x10001};
        h.clock_offset_ns = i * 1000 * s;
        c.hosts.push_back(h);
        on.emplace_back(1 * s + i * unit, 1 * s + (2 * n - i) * unit);
        c.offers.push_back({i, on[i].first, 10 * c.budget_bps});
        c.offers.push_back({i, on[i].second, 0});
    }
    SimResult r = simulate_cluster(c);
    Dynamics d;
    d.violations = check_budget(c.budget_bps, r.logs).violations.size();
    std::vector<uint64_t> changes;
    for (auto [a, b] : on) changes.insert(changes.end(), {a, b});
    std::sort(changes.begin(), changes.end());
    changes.push_back(c.end_ns);
    std::vector<double> converge;
    for (size_t k = 0; k + 1 < changes.size(); ++k) {
        uint64_t from = changes[k], to = changes[k + 1];
        // What can be used: B, or less when fewer hosts want it (none here
        // wants less than B while it is on).
        auto used = [&](uint64_t t) {
            uint64_t sum = 0;
            for (size_t i = 0; i < n; ++i)
                if (on[i].first <= t && t < on[i].second) sum += rate_at(r.logs[i], t);
            return double(sum) / double(c.budget_bps);
        };
        bool anyone = false;
        for (size_t i = 0; i < n; ++i) anyone |= on[i].first <= from && from < on[i].second;
        if (!anyone) continue;
        double total = 0;
        int samples = 0;
        for (uint64_t t = from + 1 * s; t < to; t += 50 * ms, ++samples) total += used(t);
        if (samples) d.utilisation = std::min(d.utilisation, total / samples);
        // Converged: from when on every sample up to the next change is
        // within 5 % of B.
        uint64_t settled = to;
        for (uint64_t t = to - 50 * ms; t >= from && used(t) >= 0.95; t -= 50 * ms) settled = t;
        converge.push_back(double(settled - from) / 1e9);
    }
    std::sort(converge.begin(), converge.end());
    d.converge_p95_s = converge.empty() ? 0 : converge[(converge.size() * 95 + 99) / 100 - 1];
    return d;
}

// What the agent did before (demand = change in rx_bytes per window, a
// quarter above the rate while limited): a backlogged host never shows
// more than its share and a quarter, and one quiet window drops it.
Estimator naive_estimator(uint64_t) {
    return [](uint64_t, const DemandWindow &w) {
        return w.limited ? std::max(w.offered_bps, w.applied_bps + w.applied_bps / 4)
                         : w.offered_bps;
    };
}

} // namespace

TEST_CASE("cluster sim: measured demand uses the budget and converges within 1 s", "[cluster]") {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        Dynamics before = run_dynamics(naive_estimator, seed);
        Dynamics after = run_dynamics({}, seed);
        INFO("seed " << seed << ": before utilisation " << before.utilisation << " p95 "
                     << before.converge_p95_s << " s; after " << after.utilisation << " p95 "
                     << after.converge_p95_s << " s");
        // The simulation shows the problem the lab measured...
        CHECK((before.utilisation < 0.95 || before.converge_p95_s > 1.0));
        // ... and the estimator fixes it, within the invariant.
        CHECK(after.utilisation >= 0.95);
        CHECK(after.converge_p95_s <= 1.0);
        CHECK(after.violations == 0);
        CHECK(before.violations == 0);
    }
}

namespace {

// One window: what a sender that backs off shows (what it takes goes out)
// unless delivered is given.
uint64_t window(DemandEstimator &e, uint64_t t_ns, uint64_t offered, bool limited, uint64_t applied,
                uint64_t budget, uint64_t delivered = UINT64_MAX) {
    if (delivered == UINT64_MAX) delivered = std::min(offered, applied);
    return e.sample(t_ns, {offered, delivered, applied, limited}, budget);
}

} // namespace

TEST_CASE("cluster demand: taken + dropped, unsatisfied at once when held at its rate, released "
          "after 100 ms below it, satisfied at a steady mean",
          "[cluster]") {
    constexpr uint64_t B = 1'000'000'000, M = 1'000'000, R = 100 * M; // R: the rate applied
    REQUIRE(DemandEstimator::kReleaseNs == 100 * ms);
    REQUIRE(DemandEstimator::kHoldNs == 800 * ms);
    {
        DemandEstimator e;
        // Idle: nothing wanted.
        CHECK(window(e, 0, 0, false, R, B) == 0);
        CHECK(window(e, 25 * ms, 0, false, R, B) == 0);
        // Limited (drops or marks in the window) at its rate, offering what
        // goes out (a sender that backs off): unsatisfied (the budget) at
        // once.
        CHECK(window(e, 50 * ms, 100 * M, true, R, B) == B);
        // Below 7/8 of the rate without a limit: still unsatisfied until
        // that lasted 100 ms (a quiet window or a few is not a change)...
        CHECK(window(e, 75 * ms, 30 * M, false, R, B) == B);
        CHECK(window(e, 100 * ms, 30 * M, false, R, B) == B);
        // ... and a window at the rate starts the count again.
        CHECK(window(e, 125 * ms, 90 * M, false, R, B) == B);
        for (uint64_t t = 150; t <= 200; t += 25)
            CHECK(window(e, t * ms, 40 * M, false, R, B) == B);
        CHECK(window(e, 225 * ms, 30 * M, false, R, B) == B);
        // 100 ms below: satisfied, at the mean offer of those 100 ms.
        CHECK(window(e, 250 * ms, 30 * M, false, R, B) == 36 * M);
        // Stopped: a window or a few of nothing is a stall (a daemon or a
        // sender that did not run: the mean takes it); 0 once that lasted
        // 300 ms, not held (the others get its share).
        REQUIRE(DemandEstimator::kIdleNs == 300 * ms);
        for (uint64_t t = 275; t <= 550; t += 25)
            CHECK(window(e, t * ms, 0, false, R, B) == 36 * M);
        CHECK(window(e, 575 * ms, 0, false, R, B) == 0);
        // A class at its rate without a limit is not released (it may want
        // more).
        CHECK(window(e, 600 * ms, 100 * M, true, R, B) == B);
        uint64_t d = 0;
        for (uint64_t t = 625; t <= 2000; t += 25) d = window(e, t * ms, 95 * M, false, R, B);
        CHECK(d == B);
    }
    {
        // A bursty sender (a late wake-up reads 2, its catch-up 38, of 20
        // Mbit/s) holds its demand: the means move by less than 1/8 and
        // 1/32. Its drops while its mean is well below its rate are bursts.
        // (A start's second window gives its demand, corrected by the mean
        // of the 100 ms after its first: here within 400 ms.)
        DemandEstimator e;
        CHECK(window(e, 25 * ms, 20 * M, false, 30 * M, B) == 0);
        CHECK(window(e, 50 * ms, 20 * M, false, 30 * M, B) == 20 * M);
        for (uint64_t k = 3; k <= 80; ++k) {
            uint64_t offered = k % 4 == 1 ? 2 * M : k % 4 == 2 ? 38 * M : 20 * M;
            uint64_t d = window(e, k * 25 * ms, offered, k % 4 == 2, 30 * M, B);
            if (k >= 16) CHECK(d == 20 * M);
        }
        // A satisfied demand moves when two means of 100 ms in a row moved
        // by more than 1/8 the same way: to the last one's.
        DemandEstimator f;
        for (uint64_t t = 0; t <= 400; t += 25)
            CHECK(window(f, t * ms, 40 * M, false, R, B) == 40 * M);
        for (uint64_t t = 425; t <= 525; t += 25)
            CHECK(window(f, t * ms, 20 * M, false, R, B) == 40 * M);
        CHECK(window(f, 550 * ms, 20 * M, false, R, B) == 20 * M);
        // ... and is corrected by a full 800 ms mean off by more than 1/32.
        uint64_t d = 20 * M, t = 575;
        for (; t <= 2000 && d == 20 * M; t += 25) d = window(f, t * ms, 21 * M, false, R, B);
        CHECK(d > 20 * M + 20 * M / 32);
        CHECK(d <= 21 * M);
        CHECK(t >= 1250);
        // It grows and is limited at its rate: one such window is a burst
        // while its mean is well below the rate; then it is given room
        // (its mean offer and 1/32) and, filling it for 200 ms,
        // unsatisfied.
        uint64_t from = t;
        for (; t <= from + 1000 && d != B; t += 25) d = window(f, t * ms, 100 * M, true, R, B);
        CHECK(d == B);
        CHECK(t - from <= 400);
    }
    {
        // A sender that does not back off (UDP) offers more than goes out:
        // limited, its offer is its demand, not the budget: 150 with 130
        // delivered at 138.
        DemandEstimator e;
        uint64_t d = 0;
        for (uint64_t t = 0; t <= 500; t += 25) {
            d = window(e, t * ms, 150 * M, t >= 100, 138 * M, B, 130 * M);
            CHECK(d == 150 * M);
        }
        // Its offer falls to 120 (the rate still 138, no limit): 120 within
        // 200 ms.
        uint64_t t = 525;
        for (; t <= 1000 && d != 120 * M; t += 25)
            d = window(e, t * ms, 120 * M, false, 138 * M, B);
        CHECK(d == 120 * M);
        CHECK(t - 525 <= 200);
        // Given 120 by a pacer 7 % short: its queue grows, then drops at
        // its limit: still 120 (no room asked; the pacer is short, the
        // demand is not).
        for (uint64_t k = 0; k < 80; ++k, t += 25)
            CHECK(window(e, t * ms, 120 * M, k >= 60, 120 * M, B, 112 * M) == 120 * M);
    }
    {
        // Limited at its demand, offering what goes out: a pacer short of
        // its rate, an estimate a little low, or a sender that wants more.
        // It asks its offer (if higher) and 1/32 more, once; limited there
        // with an offer within 1/64 of its demand, it stays; one that fills
        // the room is unsatisfied.
        DemandEstimator e;
        CHECK(window(e, 25 * ms, 20 * M, false, 20 * M, B) == 0);
        CHECK(window(e, 50 * ms, 20 * M, false, 20 * M, B) == 20 * M);
        // Dropping while its rate is below its demand (the epoch on its
        // way): no news.
        CHECK(window(e, 75 * ms, 15 * M, true, 15 * M, B) == 20 * M);
        // Given 20, it sends what the pacer sends (6 % short)...
        for (uint64_t t = 100; t <= 175; t += 25)
            CHECK(window(e, t * ms, 18'800'000, false, 20 * M, B) == 20 * M);
        // ... and is limited: 1/32 more.
        const uint64_t room = 20 * M + 20 * M / 32;
        CHECK(window(e, 200 * ms, 18'800'000, true, 20 * M, B) == room);
        CHECK(window(e, 225 * ms, 18'800'000, true, 20 * M, B) == room);
        // Given it, limited there with the same offer: the pacer's drops.
        for (uint64_t t = 250; t <= 600; t += 25)
            CHECK(window(e, t * ms, 19'400'000, true, room, B) == room);
        // It fills the room: unsatisfied once that lasted 200 ms.
        uint64_t d = 0, t = 625;
        for (; t <= 1100 && d != B; t += 25) d = window(e, t * ms, room, true, room, B);
        CHECK(d == B);
        CHECK(t <= 950);
    }
    {
        // A UDP sender at 20 whose demand was read 19.5, its pacer 3 % short:
        // limited at its demand, it asks its mean offer and 1/32, and stays.
        DemandEstimator e;
        CHECK(window(e, 25 * ms, 19'500'000, false, 19'500'000, B) == 0);
        CHECK(window(e, 50 * ms, 19'500'000, false, 19'500'000, B) == 19'500'000);
        uint64_t d = 0;
        for (uint64_t t = 75; t <= 200; t += 25)
            d = window(e, t * ms, 20 * M, t >= 150, 19'500'000, B, 19'400'000);
        CHECK(d > 20 * M);
        CHECK(d <= 20 * M + 20 * M / 32);
        for (uint64_t t = 225; t <= 3000; t += 25)
            CHECK(window(e, t * ms, 20 * M, true, d, B, d * 97 / 100) == d);
    }
    {
        // Limited at its rate, its measured offer reads below the rate
        // (frames lost before the pacer counts them, on a daemon short of
        // CPU): it wants at least what it gets. Its demand stays at or
        // above the rate (followed, it would step down by a correction at
        // a time: the lab's one run in ten that missed max-min).
        DemandEstimator e;
        uint64_t d = 0, t = 0;
        for (; t <= 500; t += 25) d = window(e, t * ms, 150 * M, t >= 100, 138 * M, B, 130 * M);
        CHECK(d == 150 * M);
        for (; t <= 3000; t += 25) {
            d = window(e, t * ms, 128 * M, true, 138 * M, B, 124 * M);
            CHECK(d >= 138 * M);
        }
        // Its offer clearly below the rate (under 7/8), no limit: that
        // holds no more, and the demand follows the offer within 250 ms.
        uint64_t from = t;
        for (; t <= from + 1000 && d != 100 * M; t += 25)
            d = window(e, t * ms, 100 * M, false, 138 * M, B);
        CHECK(d == 100 * M);
        CHECK(t - from <= 250);
    }
}
