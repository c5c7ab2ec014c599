// The group agent's runner (docs/design.md §11.5): cluster::HostProtocol
// driven by etcd (a watch, a keep-alive, compare-and-swaps, each in a
// thread of its own) and the class's counters, applying its rates through
// the control plane. Runs until SIGTERM/SIGINT (or a refusal), then leaves.
#pragma once

#include "agent/agent.hpp"
#include "agent/watchdog.hpp"

namespace pspxdp::agent {

// 0 after a clean leave, 2 when the join is refused (one line on stderr), 1
// when the agent had to leave (its watchdog, DEV or the class gone).
int run_group_member(const AgentConfig &cfg, Shared *sh, RateLog log, pid_t watchdog);

} // namespace pspxdp::agent
