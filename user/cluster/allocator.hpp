// The group's allocation (docs/design.md §11.2): weighted max-min fair over
// measured demands, every member at least its floor, the sum at most the
// budget. Exact integer arithmetic: the same inputs give the same rates on
// every host.
#pragma once

#include "cluster/group.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <set>
#include <span>
#include <vector>

namespace pspxdp::cluster {

struct Claim {
    uint64_t floor_bps = 0;
    uint64_t cap_bps = 0; // >= floor_bps
    uint32_t weight = 1;  // >= 1
};

// x_i = clamp(w_i * L, floor_i, cap_i) for the largest level L with
// sum x_i <= budget (all caps when they fit), rounded down to whole bit/s and
// the rounding remainder handed out 1 bit/s at a time, so the sum is exactly
// min(budget, sum of caps). Requires sum of floors <= budget.
std::vector<uint64_t> water_fill(uint64_t budget_bps, std::span<const Claim> claims);

// Epoch `epoch` from the roster and the live records: members without a live
// record hold their floor, unless released (absent long enough that they are
// surely at 0, §11.4.1: they get 0); live members are water-filled over their
// demands (at least their floors), then whatever is left over them again
// with no cap, so a member whose demand grows has room before the next epoch.
Allocation allocate(const Roster &roster, const std::map<HostId, Live> &live, uint64_t epoch,
                    const std::set<HostId> &released = {});

// Whether `host` may join with `member`: the group's budget must be the one
// asked for and the floors, this one included, must fit in it.
Result<void> check_join(const Roster &roster, uint64_t budget_bps, const HostId &host,
                        const Member &member);

} // namespace pspxdp::cluster
