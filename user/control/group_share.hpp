// A cluster group's share on a class of a class tree (docs/design.md §11.10):
// what the agent writes so that the class's whole subtree sends at most the
// share, every class of it consistent with the tree's rules (§3.12), in an
// order that never lets the subtree exceed the old or the new share.
// Pure: no maps, no I/O.
#pragma once

#include "control/config.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace pspxdp::control {

// What the group changes of a class: its rate and its ceil (0: the rate).
struct OwnRate {
    uint32_t classid = 0;
    uint64_t rate_bps = 0;
    uint64_t ceil_bps = 0;
};

// root and the classes below it, parents before their children (root first).
std::vector<uint32_t> subtree_ids(const std::map<uint32_t, uint32_t> &parent_of, uint32_t root);
std::vector<uint32_t> subtree_ids(const std::vector<ClassSpec> &all, uint32_t root);

// The least a subtree can be held at, "0" for the group: 1 bit/s per leaf
// (a paced class needs a rate above 0, a parent's rate covers its
// children's). A leaf: 1 bit/s, the agent's hold rate.
uint64_t subtree_hold_bps(const std::vector<ClassSpec> &all, uint32_t root);

// A join on classid with this floor: refused (one line, exit 2) if the class
// is not a paced class of `all`, or has children whose rates sum above the
// floor (at its floor the subtree could not keep its children's rates).
Result<void> check_group_class(const std::vector<ClassSpec> &all, uint32_t classid,
                               uint64_t floor_bps, const std::string &dev);

// The classes to write for a share of share_bps on root, in write order.
// `all` is the device's classes with the subtree's own rates and ceils (what
// the class had before the group held it). A flat class (no parent, no
// children, ceil = rate): its rate is the share (ceil 0), as before trees.
// Otherwise the share is root's ceil, clamped to its parent's ceil (or the
// line rate) and raised to the hold; root's rate is min(its own, that
// ceil); below it every ceil is min(its own, the parent's new ceil) and,
// where a parent's rate was lowered, its children's rates are scaled down
// in proportion (each kept at its own hold) so they still fit. Every class
// keeps ceil >= rate, children's ceils within their parent's and rates
// within their parent's rate. `current_ceil_bps`: root's ceil in the map
// now: at or above the new one (a lowering) the deepest classes come first
// and root last, else root first, so any prefix of the writes a reader may
// see is within the old or the new ceil, or refused whole by the daemon.
std::vector<ClassSpec> fit_subtree(const std::vector<ClassSpec> &all, uint32_t root,
                                   uint64_t share_bps, uint64_t line_rate_bps,
                                   uint64_t current_ceil_bps);

// `all` with the rates and ceils of `own` put back (classes of own no longer
// in `all` are skipped).
std::vector<ClassSpec> with_own_rates(std::vector<ClassSpec> all, const std::vector<OwnRate> &own);

} // namespace pspxdp::control
