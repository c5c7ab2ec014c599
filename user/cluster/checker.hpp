// The invariant users buy (docs/design.md §11.4, §11.5): at every instant the sum
// of the rates applied on the hosts is at most the budget. The checker
// replays every host's applied-rate log against it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pspxdp::cluster {

// From time_ns on (until the host's next change) the host applies rate_bps.
// A host's log starts at 0 before its first entry.
struct RateChange {
    uint64_t time_ns = 0;
    uint64_t rate_bps = 0;
};

// [start_ns, end_ns) with the sum above the budget; the sum is its largest there.
struct Violation {
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
    uint64_t sum_bps = 0;
};

struct CheckReport {
    std::vector<Violation> violations;
    uint64_t max_sum_bps = 0;
    uint64_t changes = 0;
};

// Logs must each be in time order. Changes at the same instant on different
// hosts take effect together (one clock for all logs).
CheckReport check_budget(uint64_t budget_bps, std::span<const std::vector<RateChange>> logs);

} // namespace pspxdp::cluster
