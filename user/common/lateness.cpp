#include "common/lateness.hpp"

#include <algorithm>
#include <array>

namespace pspxdp::common {

namespace {

constexpr unsigned kFinite = PSPXDP_LATENESS_BUCKETS - 1;

constexpr std::array<uint64_t, kFinite> make_bounds() {
    std::array<uint64_t, kFinite> b{};
    uint64_t decade = 100; // ns
    for (unsigned i = 0; i < kFinite; ++i) {
        constexpr uint64_t step[3] = {1, 2, 5};
        b[i] = step[i % 3] * decade;
        if (i % 3 == 2) decade *= 10;
    }
    return b;
}
constexpr std::array<uint64_t, kFinite> kBounds = make_bounds();
static_assert(kBounds.front() == 100 && kBounds.back() == 1'000'000'000,
              "100 ns .. 1 s, as shared.h says");

} // namespace

uint64_t lateness_bound_ns(unsigned i) { return i < kFinite ? kBounds[i] : UINT64_MAX; }

unsigned lateness_bucket(uint64_t ns) {
    return unsigned(std::lower_bound(kBounds.begin(), kBounds.end(), ns) - kBounds.begin());
}

uint64_t lateness_count(const pspxdp_lateness &h) {
    uint64_t n = 0;
    for (uint64_t b : h.bucket) n += b;
    return n;
}

uint64_t lateness_quantile_ns(const pspxdp_lateness &h, double q) {
    const uint64_t n = lateness_count(h);
    if (n == 0) return 0;
    const double rank = q * double(n);
    uint64_t below = 0;
    for (unsigned i = 0; i < PSPXDP_LATENESS_BUCKETS; ++i) {
        const uint64_t in = h.bucket[i];
        if (in && double(below + in) >= rank) {
            if (i == kFinite) return h.max_ns;
            const double lo = i ? double(kBounds[i - 1]) : 0.0;
            const double hi = double(kBounds[i]);
            const double v = lo + (hi - lo) * (rank - double(below)) / double(in);
            return std::min<uint64_t>(uint64_t(v), h.max_ns);
        }
        below += in;
    }
    return h.max_ns;
}

} // namespace pspxdp::common
