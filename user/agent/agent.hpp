// The group agent (docs/design.md §11): `pspxdp group join` in the
// foreground (agent.cpp; its runner, runner.cpp; its watchdog,
// watchdog.cpp; its files, registry.cpp). It measures the class's demand,
// runs cluster::HostProtocol against etcd (etcd::Client: a watch, a
// keep-alive, compare-and-swaps) and applies the rates through the control
// plane (Device::set_rate, hitless); every
// applied rate is logged (REALTIME_NS RATE_BPS) and counted. A watchdog
// process, forked before anything else, holds the lease deadline: if the
// agent stops (hangs, is stopped, dies) the class falls to its fallback
// (floor or 0) by the deadline all the same (§11.4, R4).
#pragma once

#include "agent/registry.hpp"
#include "cluster/protocol.hpp"
#include "control/control.hpp"
#include "control/group_share.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <sys/types.h>
#include <vector>

#include <nlohmann/json.hpp>

namespace pspxdp::agent {

struct AgentConfig {
    std::string dev;
    std::vector<std::string> endpoints;
    std::string group;
    std::string host; // the member's name in the group
    uint64_t budget_bps = 0;
    uint32_t classid = 0;
    uint32_t classes_below = 0; // the class's subtree less itself (roster, `group show`)
    uint32_t weight = 1;
    uint64_t floor_bps = 0;
    std::string log_path; // the applied-rate log; empty: default_log_path
    cluster::Timing timing;
    uint64_t keepalive_every_ns = 1'000'000'000; // TTL/3
    // A keep-alive unanswered this long is sent to the next endpoint too.
    uint64_t keepalive_hedge_ns = 200'000'000;
    uint64_t demand_window_ns = 25'000'000;
    // Each etcd request, per endpoint. A keep-alive answered late is still
    // counted from when it was sent (R4); this bounds how long a dead
    // endpoint holds up the next.
    long request_timeout_ms = 500;
    // The class's own rate as a killed agent before this one recorded it
    // (its state file): what leave restores, not the floor its watchdog
    // left. 0: the rate the class has when the group first holds it.
    uint64_t inherited_own_rate_bps = 0;
    // Its subtree's rates and ceils (docs/design.md §11.10); empty: as the
    // group first finds them.
    std::vector<control::OwnRate> inherited_own;
};

// Refuses (one line, exit code 2) a group class that the agent's own etcd
// traffic would go through: an endpoint reached by DEV (the kernel's source
// address for it is one of DEV's) whose TCP port no filter sends elsewhere
// than the class (or, with no filter for it, DEV's default class is the
// class). The agent holds the class at 0 while it joins, so every etcd
// request would wait behind it.
Result<void> check_etcd_path(const control::Device &d, const AgentConfig &cfg);

// Refuses (one line, exit code 2) a class inside the subtree of a class
// another agent of DEV holds, or one with such a class below it: one group
// per subtree (docs/design.md §11.10). Run with the class's own lock held,
// so two joiners racing refuse each other rather than both pass.
Result<void> check_subtree_free(const std::vector<control::ClassSpec> &all, const AgentConfig &cfg);

// Runs until SIGTERM/SIGINT, then leaves the group. 0 after a clean leave;
// 2 when the join is refused (one line on stderr), 1 on a system error.
int run(const AgentConfig &cfg);

} // namespace pspxdp::agent
