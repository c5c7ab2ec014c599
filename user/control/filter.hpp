// Filters in the pinned maps of an attachment (shared.h "Filters"): read
// them, add, delete, replace them all. Device (control.hpp) takes the
// device's lock and calls these; tests and the benchmark call them on a
// skeleton's maps directly.
//
// Every change is computed in full first (the filters, their entries, the
// shape table), validated (duplicates, unknown classes, capacity: exit code
// 2, nothing written), then written as a diff: only entries that change are
// touched, so traffic of unchanged filters never misses. The shape table is
// double-buffered: the idle set is written, then filter_state.active_set
// flips to it, then we wait until no classifier run can still read the old
// set (an RCU grace period) before that set may be reused.
//
// During a change a packet matches either the old or the new filters for
// each entry it looks up (entries are added before the old ones are
// removed, and every shape's best order stays a lower bound of its
// entries), so the early exit never skips the filter that should win.
#pragma once

#include "control/filter_spec.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <span>
#include <vector>

namespace pspxdp::control {

// The filter maps' fds (not owned).
struct FilterMaps {
    int filters = -1, entries = -1, shapes = -1, state = -1, stats = -1;
    int class_config = -1; // when valid, a filter naming an unknown class is refused
};

struct FilterInfo {
    StoredFilter filter;
    pspxdp_filter_stats stats{}; // summed over CPUs (with_stats only)
    // A cgroup filter whose cgroup no longer exists (removed, or removed and
    // made again: a new id): it matches nothing.
    bool cgroup_gone = false;
};

// Every filter in evaluation order (pref, then the order they were added).
Result<std::vector<StoredFilter>> read_filters(const FilterMaps &m);
Result<std::vector<FilterInfo>> read_filter_infos(const FilterMaps &m, bool with_stats);

// A cgroup given in words (id 0) made what the classifier matches: its
// path under the cgroup2 mount ("/a/b"), its id and level. Refused (exit 2)
// when the path is not a cgroup; nothing to do for a filter without one or
// with an id already.
Result<void> resolve_filter_cgroup(FilterSpec &spec);
// The path of a cgroup given in words as stored ("/a/b" under the mount),
// without looking at the cgroup itself: so words compare with stored
// filters. As typed when there is no cgroup2 mount (then no stored filter
// has one).
void canonical_cgroup_path(FilterSpec &spec);

// Adds one filter after those of its pref. Refuses a duplicate (same fields
// and pref) and an unknown class.
Result<void> add_filter(const FilterMaps &m, const FilterSpec &spec);
// Deletes what sel selects and returns it. Words without pref must name one
// filter; `pref N` alone deletes every filter of that pref.
Result<std::vector<FilterSpec>> delete_filters(const FilterMaps &m, const FilterSelect &sel);
// Makes the filters exactly `specs`; equal prefs are tried in list order.
// A cgroup given in words that no longer exists keeps the id of the filter
// of the same words that stays (apply of what save printed changes nothing
// after the cgroup was removed); a new one must exist.
// Validates everything first; on a map error puts the old filters back.
// Filters that stay keep their id (and counters), and their sequence number
// when the list keeps them in the same order, so replacing the filters with
// what read_filters returned writes nothing.
Result<void> replace_filters(const FilterMaps &m, std::span<const FilterSpec> specs);

} // namespace pspxdp::control
