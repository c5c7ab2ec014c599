// The group's keys in etcd as JSON (docs/design.md §11.1), a View built from
// a range and kept by the watch's events, and the applied-rate log's lines.
// Pure: unit-tested without an etcd.
#pragma once

#include "cluster/checker.hpp"
#include "cluster/group.hpp"
#include "core/result.hpp"
#include "etcd/etcd.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace pspxdp::agent {

// /pspxdp/group/NAME/ and the keys under it.
struct GroupKeys {
    std::string prefix;
    explicit GroupKeys(std::string_view group);
    std::string roster() const { return prefix + "roster"; }
    std::string alloc() const { return prefix + "alloc"; }
    std::string live(std::string_view host) const { return prefix + "live/" + std::string(host); }
};

// A group name or host name: letters, digits, '.', '_', '-' (it is part of a key).
Result<void> check_name(std::string_view what, std::string_view name);

std::string roster_json(const cluster::Roster &r);
std::string alloc_json(const cluster::Allocation &a);
std::string live_json(const cluster::Live &l);
Result<cluster::Roster> parse_roster(std::string_view text);
Result<cluster::Allocation> parse_alloc(std::string_view text);
Result<cluster::Live> parse_live(std::string_view text);

// One key's put or delete into the view (keys outside the group's are
// ignored; a malformed value is an error, the view unchanged).
Result<void> apply_kv(cluster::View &view, const GroupKeys &keys, const etcd::KeyValue &kv,
                      bool deleted);
Result<cluster::View> view_from_range(const GroupKeys &keys, const etcd::RangeAnswer &range);

// The applied-rate log: "REALTIME_NS RATE_BPS" a line, what the checker reads.
std::string rate_log_line(uint64_t time_ns, uint64_t rate_bps);
Result<std::vector<cluster::RateChange>> parse_rate_log(std::string_view text);

} // namespace pspxdp::agent
