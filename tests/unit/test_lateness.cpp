// The release-lateness histogram (common/lateness.hpp): its fixed buckets,
// and percentiles computed as Prometheus' histogram_quantile() does.
#include <catch2/catch.hpp>

#include "common/lateness.hpp"

using namespace pspxdp::common;

TEST_CASE("lateness buckets are 1-2-5 per decade from 100 ns to 1 s, upper bound inclusive",
          "[lateness]") {
    CHECK(lateness_bound_ns(0) == 100);
    CHECK(lateness_bound_ns(1) == 200);
    CHECK(lateness_bound_ns(2) == 500);
    CHECK(lateness_bound_ns(3) == 1000);
    CHECK(lateness_bound_ns(PSPXDP_LATENESS_BUCKETS - 2) == 1'000'000'000);
    CHECK(lateness_bound_ns(PSPXDP_LATENESS_BUCKETS - 1) == UINT64_MAX);
    CHECK(lateness_bucket(0) == 0);
    CHECK(lateness_bucket(100) == 0);
    CHECK(lateness_bucket(101) == 1);
    CHECK(lateness_bucket(15'000) == 7); // (10 us, 20 us]
    CHECK(lateness_bucket(1'000'000'000) == PSPXDP_LATENESS_BUCKETS - 2);
    CHECK(lateness_bucket(1'000'000'001) == PSPXDP_LATENESS_BUCKETS - 1);
    CHECK(lateness_bucket(UINT64_MAX) == PSPXDP_LATENESS_BUCKETS - 1);
    for (unsigned i = 0; i + 1 < PSPXDP_LATENESS_BUCKETS; ++i) {
        INFO(i);
        CHECK(lateness_bucket(lateness_bound_ns(i)) == i);
        CHECK(lateness_bucket(lateness_bound_ns(i) + 1) == i + 1);
    }
}

TEST_CASE("record counts one sample, its sum and the max", "[lateness]") {
    pspxdp_lateness h{};
    Lateness l(&h);
    l.record(0);
    l.record(3'000);
    l.record(3'000);
    l.record(2'000'000'000);
    CHECK(lateness_count(h) == 4);
    CHECK(h.bucket[0] == 1);
    CHECK(h.bucket[lateness_bucket(3'000)] == 2);
    CHECK(h.bucket[PSPXDP_LATENESS_BUCKETS - 1] == 1);
    CHECK(h.sum_ns == 2'000'006'000);
    CHECK(h.max_ns == 2'000'000'000);
}

TEST_CASE("percentiles interpolate within the bucket as histogram_quantile does, capped at the max",
          "[lateness]") {
    pspxdp_lateness h{};
    CHECK(lateness_quantile_ns(h, 0.5) == 0); // no samples
    Lateness l(&h);
    // 100 samples in (10 us, 20 us]: the median is halfway through it.
    for (int i = 0; i < 100; ++i) l.record(20'000);
    CHECK(lateness_quantile_ns(h, 0.5) == 15'000);
    CHECK(lateness_quantile_ns(h, 0.99) == 19'900);
    CHECK(lateness_quantile_ns(h, 1.0) == 20'000);
    // One more in (50 us, 100 us], at 60 us: p99 stays in the 20 us bucket
    // (rank 99.99 <= 100), the max is the sample, the 100 us bound is not.
    l.record(60'000);
    CHECK(lateness_quantile_ns(h, 0.99) < 20'000);
    CHECK(lateness_quantile_ns(h, 1.0) == 60'000);
    CHECK(h.max_ns == 60'000);
    // Beyond the last bound: the max answers.
    for (int i = 0; i < 1000; ++i) l.record(5'000'000'000);
    CHECK(lateness_quantile_ns(h, 0.99) == 5'000'000'000);
}
