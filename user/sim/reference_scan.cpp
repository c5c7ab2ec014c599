#include "sim/reference_scan.hpp"

#include <algorithm>

namespace pspxdp::sim {

Result<uint32_t> ReferenceScan::add_class(uint64_t rate_bps) {
    uint32_t cls = uint32_t(classes_.size());
    classes_.push_back(Class{rate_bps, g_, 0, 0, false, true});
    if (rate_bps) {
        by_rate_.push_back(cls);
        std::stable_sort(by_rate_.begin(), by_rate_.end(), [&](uint32_t a, uint32_t b) {
            return classes_[a].rate_bps > classes_[b].rate_bps;
        });
    } else {
        normal_.push_back(cls);
    }
    return cls;
}

void ReferenceScan::set_head(uint32_t cls, uint32_t len) {
    Class &c = classes_[cls];
    if (c.idle && c.clock < g_) c.clock = g_;
    c.idle = false;
    c.backlogged = true;
    c.head_len = len;
}

void ReferenceScan::set_empty(uint32_t cls) {
    classes_[cls].backlogged = false;
    classes_[cls].idle = true;
}

Decision ReferenceScan::next(uint64_t) {
    const Framing &f = cfg_.framing;
    uint64_t earliest = UINT64_MAX;
    for (uint32_t cls : by_rate_) {
        Class &c = classes_[cls];
        if (!c.backlogged) continue;
        if (c.clock <= g_) {
            unsigned __int128 num =
                (unsigned __int128)f.l2_bytes(c.head_len) * cfg_.line_rate_bps + c.frac;
            c.clock += uint64_t(num / c.rate_bps);
            c.frac = uint64_t(num % c.rate_bps);
            c.backlogged = false; // until the caller reports the next head
            g_ += f.wire_bytes(c.head_len);
            return Decision{Action::Frame, cls, c.head_len, 0};
        }
        earliest = std::min(earliest, c.clock);
    }
    for (size_t i = 0; i < normal_.size(); ++i) {
        uint32_t cls = normal_[(normal_next_ + i) % normal_.size()];
        Class &c = classes_[cls];
        if (!c.backlogged) continue;
        normal_next_ = (normal_next_ + i + 1) % normal_.size();
        c.backlogged = false;
        g_ += f.wire_bytes(c.head_len);
        return Decision{Action::Frame, cls, c.head_len, 0};
    }
    if (earliest == UINT64_MAX) return Decision{Action::Idle, 0, 0, 0};
    uint64_t need = earliest - g_;
    uint64_t wire = need;
    if (need < f.min_gap_wire_bytes() || need > f.max_gap_wire_bytes())
        wire = f.max_gap_wire_bytes();
    g_ += wire;
    return Decision{Action::Gap, 0, uint32_t(wire - f.overhead_bytes), 0};
}

} // namespace pspxdp::sim
