#include "daemon/lost_wire.hpp"

#include <algorithm>
#include <cstdio>

namespace pspxdp::daemon {

void LostWire::start(uint64_t now_ns, uint64_t lost_ns) {
    prev_ns_ = line_ns_ = now_ns;
    prev_lost_ns_ = line_lost_ns_ = lost_ns;
    logged_ = false;
}

uint64_t LostWire::update(uint64_t now_ns, uint64_t lost_ns, const Log &log) {
    const uint64_t dt = now_ns > prev_ns_ ? now_ns - prev_ns_ : 0;
    const uint64_t lost = lost_ns > prev_lost_ns_ ? lost_ns - prev_lost_ns_ : 0;
    // 128-bit: a second's worth of ns times 10^6 fits, a stall of hours too.
    const uint64_t ppm = dt ? uint64_t(std::min<unsigned __int128>(
                                  (unsigned __int128)lost * 1'000'000 / dt, 1'000'000))
                            : 0;
    prev_ns_ = now_ns;
    prev_lost_ns_ = std::max(prev_lost_ns_, lost_ns);
    if (lost_ns > line_lost_ns_ && (!logged_ || now_ns - line_ns_ >= kLostWireLogEveryNs)) {
        const uint64_t span = now_ns - line_ns_, gone = lost_ns - line_lost_ns_;
        char line[256];
        std::snprintf(line, sizeof line,
                      "behind real time: %.3f ms of wire time lost in the last %.1f s (%.3f %%): "
                      "the host kept the daemon from running on time (lost_wire_ns; --sched, "
                      "docs/design.md §4.4)",
                      double(gone) / 1e6, double(span) / 1e9,
                      span ? 100.0 * double(gone) / double(span) : 0.0);
        log(line);
        line_ns_ = now_ns;
        line_lost_ns_ = lost_ns;
        logged_ = true;
    }
    return ppm;
}

} // namespace pspxdp::daemon
