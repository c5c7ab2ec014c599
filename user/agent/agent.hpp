// The group agent (docs/design.md §11): `pspxdp group join` in the
// foreground. It measures the class's demand, runs cluster::HostProtocol
// against etcd (etcd::Client: a watch, a keep-alive, compare-and-swaps) and
// applies the rates through the control plane's hitless class change; every
// applied rate is logged (REALTIME_NS RATE_BPS) and counted. A watchdog
// process, forked before anything else, holds the lease deadline: if the
// agent stops (hangs, is stopped, dies) the class falls to its fallback
// (floor or 0) by the deadline all the same (§11.4, R4).
#pragma once

#include "cluster/protocol.hpp"
#include "control/control.hpp"
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
    uint32_t weight = 1;
    uint64_t floor_bps = 0;
    std::string log_path; // the applied-rate log; empty: default_log_path
    cluster::Timing timing;
    uint64_t keepalive_every_ns = 1'000'000'000; // TTL/3
    // A keep-alive unanswered this long is sent to the next endpoint too.
    uint64_t keepalive_hedge_ns = 200'000'000;
    uint64_t demand_window_ns = 200'000'000;
    // Each etcd request, per endpoint. A keep-alive answered late is still
    // counted from when it was sent (R4); this bounds how long a dead
    // endpoint holds up the next.
    long request_timeout_ms = 500;
};

// A class the group drives at "0" holds this rate: a paced class needs one
// above 0, and 1 bit/s lets at most one minimum frame out in ~8 minutes.
inline constexpr uint64_t kHoldRateBps = 1;

// /run/pspxdp/DEV.group-MAJ-MIN.{json,lock,rates}: the running agent's state
// (for status, leave), the lock that makes it the only one, its rate log.
std::string state_path(const std::string &dev, uint32_t classid);
std::string default_log_path(const std::string &dev, uint32_t classid);

// The running agents of DEV (state files whose pid is alive and is the agent
// that wrote them), as their state JSON.
std::vector<nlohmann::json> running_agents(const std::string &dev);

// The class of DEV a TCP connection from src to dst:dport goes through
// (addresses in network order, family 4 or 6): the first of DEV's filters
// (in evaluation order) that can match it, else the default class.
uint32_t class_for_tcp(std::span<const control::FilterSpec> filters, uint32_t default_classid,
                       int family, const uint8_t *src, const uint8_t *dst, uint16_t dport);

// Refuses (one line, exit code 2) a group class that the agent's own etcd
// traffic would go through: an endpoint reached by DEV (the kernel's source
// address for it is one of DEV's) whose TCP port no filter sends elsewhere
// than the class (or, with no filter for it, DEV's default class is the
// class). The agent holds the class at 0 while it joins, so every etcd
// request would wait behind it.
Result<void> check_etcd_path(const control::Device &d, const AgentConfig &cfg);

// Runs until SIGTERM/SIGINT, then leaves the group. 0 after a clean leave;
// 2 when the join is refused (one line on stderr), 1 on a system error.
int run(const AgentConfig &cfg);

} // namespace pspxdp::agent
