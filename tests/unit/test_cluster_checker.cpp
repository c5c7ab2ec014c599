// The invariant checker (docs/design.md §11.5) on hand-made logs.
#include "cluster/checker.hpp"

#include <catch2/catch.hpp>

using namespace pspxdp::cluster;

TEST_CASE("check_budget: finds the instants the sum passes the budget", "[cluster]") {
    // a: 600 from 10; b: 500 from 20 to 30 -> 1100 in [20, 30).
    std::vector<std::vector<RateChange>> logs = {{{10, 600}}, {{20, 500}, {30, 300}}};
    CheckReport r = check_budget(1000, logs);
    REQUIRE(r.violations.size() == 1);
    CHECK(r.violations[0].start_ns == 20);
    CHECK(r.violations[0].end_ns == 30);
    CHECK(r.violations[0].sum_bps == 1100);
    CHECK(r.max_sum_bps == 1100);
    CHECK(r.changes == 3);
    // Exactly the budget is allowed.
    CHECK(check_budget(1100, logs).violations.empty());
    // Still over at the end of the logs: open-ended.
    logs[1].pop_back();
    r = check_budget(1000, logs);
    REQUIRE(r.violations.size() == 1);
    CHECK(r.violations[0].end_ns == UINT64_MAX);
}

TEST_CASE("check_budget: a lower and a raise at one instant take effect together", "[cluster]") {
    std::vector<std::vector<RateChange>> logs = {{{0, 600}, {50, 200}}, {{50, 800}}};
    CHECK(check_budget(1000, logs).violations.empty());
    // One nanosecond early, the raise is caught.
    logs[1][0].time_ns = 49;
    CheckReport r = check_budget(1000, logs);
    REQUIRE(r.violations.size() == 1);
    CHECK(r.violations[0].start_ns == 49);
    CHECK(r.violations[0].end_ns == 50);
    CHECK(r.violations[0].sum_bps == 1400);
}

TEST_CASE("check_budget: separate excursions are separate violations, the peak kept", "[cluster]") {
    std::vector<std::vector<RateChange>> logs = {{{0, 900}, {10, 950}, {20, 100}, {40, 990}},
                                                 {{5, 50}, {15, 80}, {45, 0}}};
    CheckReport r = check_budget(1000, logs);
    REQUIRE(r.violations.size() == 2);
    CHECK(r.violations[0].start_ns == 15); // at 10 the sum is 1000, allowed
    CHECK(r.violations[0].end_ns == 20);
    CHECK(r.violations[0].sum_bps == 1030);
    CHECK(r.violations[1].start_ns == 40);
    CHECK(r.violations[1].end_ns == 45);
    CHECK(r.violations[1].sum_bps == 1070);
}
