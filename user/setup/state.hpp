// The state file /run/pspxdp/DEV.state: what attach created and where. It is
// written before each step (so a crash mid-attach leaves a file that says
// what to undo) and records the attachment's identity - the device's name,
// its ifindex and its network namespace - which every command checks before
// it acts: pins and run files are keyed by name and shared by all network
// namespaces, devices and ifindexes are not.
#pragma once

#include "common/ns.hpp"
#include "common/paths.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace pspxdp::setup {

using common::Paths;

struct AttachState {
    // Identity.
    std::string dev;
    uint32_t dev_ifindex = 0;
    uint64_t netns = 0;        // inode of the attacher's /proc/self/ns/net
    uint64_t netns_cookie = 0; // its SO_NETNS_COOKIE (never reused, unlike the inode)
    // What was created.
    std::string pacer_a; // TC redirects into a
    std::string pacer_b; // XDP + AF_XDP RX sockets on b
    uint32_t pacer_a_ifindex = 0;
    uint32_t pacer_b_ifindex = 0;
    bool veth_created = false;
    bool clsact_created = false; // only then does detach delete the qdisc
    bool tc_attached = false;
    bool xdp_attached = false;
    bool pins_created = false;
    // The daemon's parameters.
    uint32_t queues = 0;
    uint64_t line_rate_bps = 0;
    uint64_t window_bytes = 0;
    // Set by the daemon when it stopped on its own because of the device
    // (deleted, MTU it cannot carry): the attachment is dead, and why.
    std::string stopped;

    std::map<std::string, std::string> to_kv() const;
    static Result<AttachState> from_kv(const std::map<std::string, std::string> &kv);
    common::NetnsId netns_id() const { return {netns, netns_cookie}; }
};

// Atomic (rename), mode 0644: status reads it without privileges.
Result<void> write_state(const Paths &p, const AttachState &s);
// Error "DEV is not attached (no PATH)" when the file does not exist.
Result<AttachState> read_state(const Paths &p);
bool state_exists(const Paths &p);

} // namespace pspxdp::setup
