// The registry of a host's group agents (docs/design.md §11.5): per class
// of DEV, /run/pspxdp/DEV.group-MAJ-MIN.{json,lock,rates}: the running
// agent's state (what status and leave read), the lock that makes it the
// only one, its applied-rate log.
#pragma once

#include "control/group_share.hpp"

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

#include <nlohmann/json.hpp>

namespace pspxdp::agent {

std::string state_path(const std::string &dev, uint32_t classid);
std::string lock_path(const std::string &dev, uint32_t classid);
std::string default_log_path(const std::string &dev, uint32_t classid);

// Every agent state file of DEV, as its JSON, with "alive": whether its pid
// is still the agent that wrote it (a killed agent leaves its file behind).
std::vector<nlohmann::json> agent_states(const std::string &dev);
// The running ones.
std::vector<nlohmann::json> running_agents(const std::string &dev);

// Writes the state file (atomically: a reader sees the old or the new).
void write_state_file(const std::string &dev, uint32_t classid, const nlohmann::json &state);

// The subtree's own rates and ceils as the state file holds them (what a
// killed agent's successor restores on leave, docs/design.md §11.10).
nlohmann::json own_json(const std::vector<control::OwnRate> &own);
std::vector<control::OwnRate> own_from_json(const nlohmann::json &j);

// Whether an agent holds classid of DEV now (its lock is held).
bool class_held(const std::string &dev, uint32_t classid);

// This machine as the group's live records name it: the host name, and
// the boot id (/proc/sys/kernel/random/boot_id) that tells two clones of
// one image apart.
std::string node_name();
std::string boot_id();

} // namespace pspxdp::agent
