// The release-lateness histogram (shared.h: struct pspxdp_lateness, the
// pinned map `lateness`): fixed log-spaced buckets, 1-2-5 per decade from
// 100 ns to 1 s, counted by the daemon (Lateness::record, one store per
// sample into the mapped map) and read by status and the Prometheus output
// (which is why it lives in common/, not daemon/).
// Fixed buckets, not an adaptive sketch: Prometheus histograms must keep
// their `le` bounds from scrape to scrape, and one increment is all the hot
// loop can afford.
#pragma once

#include "pspxdp/shared.h"

#include <cstdint>

namespace pspxdp::common {

// The upper bound of bucket i in ns, i < PSPXDP_LATENESS_BUCKETS - 1 (the
// last bucket has none: +Inf).
uint64_t lateness_bound_ns(unsigned i);
// The bucket a lateness of ns falls in: the first whose bound is >= ns.
unsigned lateness_bucket(uint64_t ns);

// Records into a histogram in place (the daemon's mapping of the pin).
class Lateness {
  public:
    explicit Lateness(pspxdp_lateness *h) : h_(h) {}
    void record(uint64_t ns) {
        ++h_->bucket[lateness_bucket(ns)];
        h_->sum_ns += ns;
        if (ns > h_->max_ns) h_->max_ns = ns;
    }

  private:
    pspxdp_lateness *h_;
};

// Samples in all buckets.
uint64_t lateness_count(const pspxdp_lateness &h);
// The q-quantile (0 < q <= 1) as Prometheus' histogram_quantile() computes it
// from the same buckets: linear within the bucket the rank falls in, so
// status and a Grafana panel agree. Capped at max_ns (which also answers for
// the +Inf bucket). 0 without samples.
uint64_t lateness_quantile_ns(const pspxdp_lateness &h, double q);

} // namespace pspxdp::common
