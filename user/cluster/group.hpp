// What a group of hosts keeps in etcd (docs/design.md §11.1): the roster of
// reservations, the allocation epochs and each live host's record. Plain
// values: the agent fills them from etcd, the simulator from its model store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace pspxdp::cluster {

using HostId = std::string;

// A host's reservation, kept until it leaves: its floor is held for it in
// every allocation, alive or not, so a host cut off from etcd may always
// run at its floor (§11.3).
struct Member {
    uint64_t floor_bps = 0;
    uint32_t weight = 1;
    uint32_t classid = 0; // the class on that host, for `group show`
    // How many classes are below it there (an inner class, docs/design.md
    // §11.10: the share is its subtree's ceil), for `group show`.
    uint32_t classes_below = 0;
    friend bool operator==(const Member &, const Member &) = default;
};

struct Roster {
    uint64_t budget_bps = 0;
    std::map<HostId, Member> members;
    // R7/R8 (§11.4.1): how long a member's floor outlives its lease (0:
    // until it leaves). The group's, set by its first member: every
    // member's orphan timer and every proposer's release must agree on it.
    uint64_t orphan_after_ns = 0;
};

// Epoch n of the allocation: a rate for every member of the roster it was
// computed from. A host missing from it (it joined later) holds 0.
// ack_from[h] (§11.3, R2): the oldest epoch m such that h's rate in every
// epoch from m to n is at most its rate in n, so an ack of m or later
// already says h applies at most a_n(h): a host whose rate did not fall
// need not write an ack. Missing: n (every ack, as epochs written before).
struct Allocation {
    uint64_t epoch = 0;
    std::map<HostId, uint64_t> rate_bps;
    std::map<HostId, uint64_t> ack_from = {};
    uint64_t of(const HostId &host) const {
        auto it = rate_bps.find(host);
        return it == rate_bps.end() ? 0 : it->second;
    }
    // The least ack of host's that shows it at most at this epoch's rate.
    uint64_t ack_needed(const HostId &host) const {
        auto it = ack_from.find(host);
        return it == ack_from.end() ? epoch : std::min(it->second, epoch);
    }
};

// A live host's record, attached to its etcd lease: deleted by etcd when the
// lease expires. ack_epoch n says the host applies at most epoch n's rate.
struct Live {
    uint64_t lease = 0;
    uint64_t ack_epoch = 0;
    uint64_t demand_bps = 0;
    // Who holds the name (§11.1): the machine, as its owner knows it (the
    // host name, for messages), and the agent instance (the machine's boot
    // id, DEV and class: one agent at a time per instance). A record under
    // the same name from another instance is another host.
    std::string node = {}, instance = {};
};

// The group's keys at one store revision, as one host last saw them.
// *_rev are the keys' mod revisions (0: absent), for compare-and-swap.
struct View {
    int64_t revision = 0;
    std::optional<Roster> roster;
    int64_t roster_rev = 0;
    std::optional<Allocation> alloc;
    int64_t alloc_rev = 0;
    std::map<HostId, Live> live;
    // How this view was made, for "absent since" (§11.4.1): read afresh (a
    // range: deletions before it were not seen as events), and the live
    // records deleted by the events that led to it from the previous view.
    bool fresh = false;
    std::set<HostId> live_deleted;
};

// Whether every live record acknowledges the view's epoch (ack_needed):
// the condition of a raise (R3) and of the next epoch.
inline bool all_acknowledged(const View &view) {
    if (!view.alloc) return true;
    return std::all_of(view.live.begin(), view.live.end(), [&](const auto &kv) {
        return kv.second.ack_epoch >= view.alloc->ack_needed(kv.first);
    });
}

} // namespace pspxdp::cluster
