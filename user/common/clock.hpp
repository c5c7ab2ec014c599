// The one monotonic clock reader. CLOCK_MONOTONIC is the clock of
// bpf_ktime_get_ns(), so the daemon's heartbeat and the TC program's
// liveness test (pspxdp_pacer_alive) compare like with like.
#pragma once

#include <cstdint>
#include <ctime>

namespace pspxdp::common {

inline uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// CLOCK_BOOTTIME: CLOCK_MONOTONIC plus the time the system was suspended.
// A deadline that another machine's clock also runs to (the cluster
// agent's lease, docs/design.md §11.4) is kept on it: a suspended host's
// monotonic clock stands still while the lease expires.
inline uint64_t boot_ns() {
    timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Nanoseconds per millisecond / per second, for timeouts written in ms.
inline constexpr uint64_t kNsPerMs = 1000ull * 1000;
inline constexpr uint64_t kNsPerSec = 1000ull * 1000 * 1000;

} // namespace pspxdp::common
