// Cluster mode's allocation (docs/design.md §11.2) against hand-computed
// cases and, on random inputs, against a bisection model of its definition.
#include "cluster/allocator.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

using namespace pspxdp::cluster;

namespace {

Roster roster_of(uint64_t budget_bps, std::vector<std::pair<HostId, Member>> members) {
    Roster r{budget_bps, {}};
    for (auto &[host, m] : members) r.members[host] = m;
    return r;
}

std::map<HostId, Live> live_with(std::vector<std::pair<HostId, uint64_t>> demands) {
    std::map<HostId, Live> live;
    for (auto &[host, d] : demands) live[host] = Live{1, 0, d};
    return live;
}

// The definition, by bisection on the level in long double: the largest L
// with sum clamp(w_i L, f_i, c_i) <= budget.
std::vector<long double> model(uint64_t budget_bps, const std::vector<Claim> &claims) {
    auto at = [&](long double level, size_t i) {
        return std::clamp<long double>(claims[i].weight * level, claims[i].floor_bps,
                                       claims[i].cap_bps);
    };
    long double lo = 0, hi = 0;
    for (const Claim &c : claims) hi = std::max<long double>(hi, (long double)c.cap_bps / c.weight);
    for (int i = 0; i < 200; ++i) {
        long double mid = (lo + hi) / 2, sum = 0;
        for (size_t k = 0; k < claims.size(); ++k) sum += at(mid, k);
        (sum <= budget_bps ? lo : hi) = mid;
    }
    std::vector<long double> out;
    for (size_t k = 0; k < claims.size(); ++k) out.push_back(at(lo, k));
    return out;
}

} // namespace

TEST_CASE("water_fill: hand-computed cases", "[cluster]") {
    // Equal weights: the small demands are met, the big one gets the rest.
    CHECK(water_fill(1000, std::vector<Claim>{{0, 100, 1}, {0, 300, 1}, {0, 800, 1}}) ==
          std::vector<uint64_t>{100, 300, 600});
    // Weights 1:3 over a budget both exceed.
    CHECK(water_fill(1000, std::vector<Claim>{{0, 2000, 1}, {0, 2000, 3}}) ==
          std::vector<uint64_t>{250, 750});
    // A floor above the fair share is honoured; the others share the rest.
    CHECK(water_fill(1000, std::vector<Claim>{{400, 400, 1}, {0, 1000, 1}, {0, 1000, 1}}) ==
          std::vector<uint64_t>{400, 300, 300});
    // A floor below the fair share changes nothing.
    CHECK(water_fill(900, std::vector<Claim>{{100, 900, 1}, {0, 900, 1}, {0, 900, 1}}) ==
          std::vector<uint64_t>{300, 300, 300});
    // Rounding: the remainder goes 1 bit/s at a time, the sum is the budget.
    CHECK(water_fill(1000, std::vector<Claim>{{0, 5000, 1}, {0, 5000, 1}, {0, 5000, 1}}) ==
          std::vector<uint64_t>{334, 333, 333});
    // Everything fits: every cap.
    CHECK(water_fill(1000, std::vector<Claim>{{0, 100, 1}, {50, 200, 7}}) ==
          std::vector<uint64_t>{100, 200});
    // Floors alone fill the budget.
    CHECK(water_fill(500, std::vector<Claim>{{200, 900, 1}, {300, 900, 1}}) ==
          std::vector<uint64_t>{200, 300});
    CHECK(water_fill(500, std::vector<Claim>{}).empty());
}

TEST_CASE("allocate: demands, then the spare by weight; floors of absent members held",
          "[cluster]") {
    Roster r = roster_of(1000, {{"a", {0, 1, 0}}, {"b", {0, 3, 0}}});
    // Both met at 100, the 800 left over shared 1:3 on top: 250, 750.
    Allocation a = allocate(r, live_with({{"a", 100}, {"b", 100}}), 7);
    CHECK(a.epoch == 7);
    CHECK(a.rate_bps == std::map<HostId, uint64_t>{{"a", 250}, {"b", 750}});
    // a wants little, b much: a keeps its demand plus nothing (b takes all).
    a = allocate(r, live_with({{"a", 100}, {"b", 5000}}), 1);
    CHECK(a.rate_bps == std::map<HostId, uint64_t>{{"a", 100}, {"b", 900}});
    // c is reserved but not live: its floor, and no more.
    r = roster_of(1000, {{"a", {0, 1, 0}}, {"b", {100, 1, 0}}, {"c", {200, 1, 0}}});
    a = allocate(r, live_with({{"a", 5000}, {"b", 0}}), 1);
    CHECK(a.rate_bps == std::map<HostId, uint64_t>{{"a", 700}, {"b", 100}, {"c", 200}});
    // Live records of hosts not in the roster count for nothing.
    a = allocate(r, live_with({{"a", 5000}, {"zz", 5000}}), 1);
    CHECK(a.rate_bps.count("zz") == 0);
    CHECK(a.of("zz") == 0);
    // Nobody live: floors only.
    a = allocate(r, {}, 1);
    CHECK(a.rate_bps == std::map<HostId, uint64_t>{{"a", 0}, {"b", 100}, {"c", 200}});
}

TEST_CASE("check_join: the floors must fit the budget, which must be the group's", "[cluster]") {
    Roster r = roster_of(1'000'000'000, {{"a", {600'000'000, 1, 0}}});
    CHECK(check_join(r, 1'000'000'000, "b", {400'000'000, 1, 0}).ok());
    auto over = check_join(r, 1'000'000'000, "b", {400'000'001, 1, 0});
    REQUIRE_FALSE(over.ok());
    CHECK(over.exit_code() == 2);
    CHECK(over.error() == "floor 400000001bit does not fit: the floors would sum to 1000000001bit, "
                          "above the budget 1Gbit");
    auto budget = check_join(r, 500'000'000, "b", {0, 1, 0});
    REQUIRE_FALSE(budget.ok());
    CHECK(budget.error() == "group budget is 1Gbit, not 500Mbit");
    CHECK_FALSE(check_join(r, 1'000'000'000, "b", {0, 0, 0}).ok());
    // A host's own old reservation is replaced, not added to.
    CHECK(check_join(r, 1'000'000'000, "a", {1'000'000'000, 1, 0}).ok());
}

TEST_CASE("water_fill: random inputs against the definition", "[cluster]") {
    std::mt19937_64 rng(19);
    auto pick = [&](uint64_t lo, uint64_t hi) {
        return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
    };
    for (int round = 0; round < 3000; ++round) {
        uint64_t budget = pick(0, 1) ? pick(1, 1000) : pick(1, 100'000'000'000);
        size_t n = pick(1, 12);
        std::vector<Claim> claims(n);
        uint64_t floors = 0;
        for (Claim &c : claims) {
            c.floor_bps = pick(0, 3) == 0 ? 0 : pick(0, (budget - floors) / 2);
            floors += c.floor_bps;
            c.cap_bps = c.floor_bps + (pick(0, 3) == 0 ? 0 : pick(0, 2 * budget));
            c.weight = uint32_t(pick(0, 1) ? 1 : pick(1, 1000));
        }
        std::vector<uint64_t> got = water_fill(budget, claims);
        std::vector<long double> want = model(budget, claims);
        uint64_t caps = 0;
        for (const Claim &c : claims) caps += c.cap_bps;
        INFO("round " << round << " budget " << budget << " n " << n);
        REQUIRE(got.size() == n);
        // Exactly the budget, or every cap.
        CHECK(std::accumulate(got.begin(), got.end(), uint64_t(0)) == std::min(budget, caps));
        for (size_t i = 0; i < n; ++i) {
            INFO("claim " << i << " floor " << claims[i].floor_bps << " cap " << claims[i].cap_bps
                          << " weight " << claims[i].weight);
            CHECK(got[i] >= claims[i].floor_bps);
            CHECK(got[i] <= claims[i].cap_bps);
            // Rounding down plus the 1 bit/s handed out, and the model's error.
            CHECK(std::abs((long double)got[i] - want[i]) <= 1.5L + want[i] * 1e-12L);
        }
    }
}

TEST_CASE("allocate: random groups give all of the budget, floors first", "[cluster]") {
    std::mt19937_64 rng(1919);
    auto pick = [&](uint64_t lo, uint64_t hi) {
        return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
    };
    for (int round = 0; round < 1000; ++round) {
        Roster r{pick(1, 10'000'000'000), {}};
        std::map<HostId, Live> live;
        uint64_t floors = 0;
        for (size_t i = 0, n = pick(1, 10); i < n; ++i) {
            HostId host = "h" + std::to_string(i);
            Member m{pick(0, (r.budget_bps - floors) / 3), uint32_t(pick(1, 8)), 0};
            floors += m.floor_bps;
            r.members[host] = m;
            if (pick(0, 3) != 0) live[host] = Live{1, 0, pick(0, 2) ? pick(0, r.budget_bps) : 0};
        }
        Allocation a = allocate(r, live, 3);
        INFO("round " << round);
        REQUIRE(a.rate_bps.size() == r.members.size());
        uint64_t sum = 0;
        for (const auto &[host, m] : r.members) {
            uint64_t rate = a.of(host);
            sum += rate;
            CHECK(rate >= m.floor_bps);
            if (!live.count(host))
                CHECK(rate == m.floor_bps); // absent: its floor, no more
            else
                CHECK(rate >= std::min(live[host].demand_bps, m.floor_bps));
        }
        // Work-conserving whenever someone is live to take the spare.
        CHECK(sum == (live.empty() ? floors : r.budget_bps));
    }
}
