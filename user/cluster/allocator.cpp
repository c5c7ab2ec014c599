// docs/design.md §11.2.
#include "cluster/allocator.hpp"

#include "core/units.hpp"

#include <algorithm>

namespace pspxdp::cluster {

namespace {

using u128 = unsigned __int128;

// A level L = num / den at which claim i starts to rise from its floor
// (rise) or stops at its cap (!rise).
struct Breakpoint {
    uint64_t num;
    uint32_t den;
    size_t index;
    bool rise;
};

enum class Phase : uint8_t { floored, rising, capped };

} // namespace

std::vector<uint64_t> water_fill(uint64_t budget_bps, std::span<const Claim> claims) {
    // The sum S(L) = sum clamp(w_i L, f_i, c_i) is continuous and piecewise
    // linear in L: walk its breakpoints in order until the next one would
    // pass the budget, then solve S(L) = budget on that piece exactly.
    std::vector<Breakpoint> points;
    points.reserve(2 * claims.size());
    u128 fixed_bps = 0; // floors of floored claims plus caps of capped ones
    for (size_t i = 0; i < claims.size(); ++i) {
        fixed_bps += claims[i].floor_bps;
        points.push_back({claims[i].floor_bps, claims[i].weight, i, true});
        points.push_back({claims[i].cap_bps, claims[i].weight, i, false});
    }
    std::sort(points.begin(), points.end(), [](const Breakpoint &a, const Breakpoint &b) {
        u128 lhs = u128(a.num) * b.den, rhs = u128(b.num) * a.den;
        if (lhs != rhs) return lhs < rhs;
        return a.rise && !b.rise; // a claim rises before it caps at the same level
    });
    std::vector<Phase> phase(claims.size(), Phase::floored);
    u128 rising_weight = 0;
    bool over = false;
    for (const Breakpoint &p : points) {
        // S(p) > budget, as fractions over p.den.
        if (fixed_bps * p.den + u128(p.num) * rising_weight > u128(budget_bps) * p.den) {
            over = true;
            break;
        }
        const Claim &c = claims[p.index];
        if (p.rise) {
            fixed_bps -= c.floor_bps;
            rising_weight += c.weight;
            phase[p.index] = Phase::rising;
        } else {
            fixed_bps += c.cap_bps;
            rising_weight -= c.weight;
            phase[p.index] = Phase::capped;
        }
    }
    std::vector<uint64_t> rates(claims.size());
    if (!over) {
        for (size_t i = 0; i < claims.size(); ++i) rates[i] = claims[i].cap_bps;
        return rates;
    }
    // On this piece L = (budget - fixed) / rising_weight; rising claims get
    // w_i L rounded down, and the remainder (less than one per rising claim
    // with a fraction) goes 1 bit/s each to those, which stay below their caps
    // because w_i L < c_i there.
    u128 spare = u128(budget_bps) - fixed_bps;
    u128 remainder = spare;
    for (size_t i = 0; i < claims.size(); ++i) {
        if (phase[i] == Phase::floored)
            rates[i] = claims[i].floor_bps;
        else if (phase[i] == Phase::capped)
            rates[i] = claims[i].cap_bps;
        else {
            rates[i] = uint64_t(spare * claims[i].weight / rising_weight);
            remainder -= rates[i];
        }
    }
    for (size_t i = 0; i < claims.size() && remainder > 0; ++i) {
        if (phase[i] == Phase::rising && spare * claims[i].weight % rising_weight != 0) {
            ++rates[i];
            --remainder;
        }
    }
    return rates;
}

Allocation allocate(const Roster &roster, const std::map<HostId, Live> &live, uint64_t epoch,
                    const std::set<HostId> &released) {
    Allocation out{epoch, {}};
    uint64_t budget_bps = roster.budget_bps;
    std::vector<HostId> hosts;
    std::vector<Claim> claims;
    for (const auto &[host, member] : roster.members) {
        auto it = live.find(host);
        if (it == live.end()) {
            uint64_t held = released.count(host) ? 0 : member.floor_bps;
            out.rate_bps[host] = held;
            budget_bps -= held;
            continue;
        }
        hosts.push_back(host);
        claims.push_back(
            {member.floor_bps, std::max(member.floor_bps, it->second.demand_bps), member.weight});
    }
    std::vector<uint64_t> met = water_fill(budget_bps, claims);
    // What demands leave over, shared by weight on top of what they got.
    for (size_t i = 0; i < claims.size(); ++i) {
        claims[i].floor_bps = met[i];
        claims[i].cap_bps = budget_bps;
    }
    std::vector<uint64_t> rates = water_fill(budget_bps, claims);
    for (size_t i = 0; i < hosts.size(); ++i) out.rate_bps[hosts[i]] = rates[i];
    return out;
}

Result<void> check_join(const Roster &roster, uint64_t budget_bps, const HostId &host,
                        const Member &member) {
    if (roster.budget_bps != budget_bps)
        return refuse("group budget is " + format_rate(roster.budget_bps) + ", not " +
                      format_rate(budget_bps));
    if (member.weight == 0) return refuse("weight 0: a member's weight is at least 1");
    u128 floors_bps = member.floor_bps;
    for (const auto &[other, m] : roster.members)
        if (other != host) floors_bps += m.floor_bps;
    if (floors_bps > budget_bps)
        return refuse("floor " + format_rate(member.floor_bps) +
                      " does not fit: the floors would sum to " +
                      format_rate(uint64_t(std::min<u128>(floors_bps, UINT64_MAX))) +
                      ", above the budget " + format_rate(budget_bps));
    return {};
}

} // namespace pspxdp::cluster
