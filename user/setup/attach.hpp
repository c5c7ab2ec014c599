// The attach library: what `pspxdp attach` and `pspxdp detach` do, and the
// one answer to "is DEV attached, here?" that status, attach, detach and the
// control plane share (so they never disagree).
//
// Identity: an attachment is DEV's name, DEV's ifindex and the network
// namespace it was made in (state.hpp). Pins and run files are keyed by the
// name and visible from every namespace; nothing is done to a device unless
// all three match. Ownership: nothing is removed unless it is pspxdp's -
// the TC filter by handle, prio and program name, the veth pair by name,
// kind, peer and ifindex, pins by name and map identity (loader.hpp).
#pragma once

#include "common/lock.hpp"
#include "common/paths.hpp"
#include "core/result.hpp"
#include "setup/loader.hpp"
#include "setup/state.hpp"

#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pspxdp::setup {

struct Probe {
    enum class Kind {
        NotAttached, // nothing of pspxdp's for DEV
        Alive,       // attached here, the daemon runs
        Dead,        // attached here, no daemon (kill -9, crash, stopped itself): TC passes
        DevGone,     // attached here, but DEV was deleted or re-created (other ifindex)
        Elsewhere,   // attached in another network namespace
        Broken,      // state file or pins removed by hand: detach cleans up
        HalfMade,    // an attach stopped (killed) before it finished, or still at work
    };
    Kind kind = Kind::NotAttached;
    std::optional<AttachState> state;
    bool pins = false;
    pid_t daemon = 0;
    common::NetnsId netns_here;
    std::string why; // one line for people; empty when NotAttached or Alive
};
Probe probe(const Paths &p);
const char *kind_name(Probe::Kind k); // "not attached", "alive", "dead", ...

// For commands that configure or read an attachment (class, filter, status,
// the daemon): its state if DEV is attached in this network namespace (alive,
// dead or with DEV gone: the configuration stays usable), else the one-line
// explanation (not attached, attached elsewhere, broken).
Result<AttachState> check_here(const Paths &p);

// NICs that drop every host-sent 802.3x PAUSE frame (i40e, ice): gap frames
// never reach their wire. attach refuses them unless --force; a forced
// attach runs clockless under --clock auto.
bool drops_host_pause(std::string_view driver);

struct AttachOptions {
    std::string dev;
    // Pacer queues, one AF_XDP RX socket each; any number of classes share
    // them. 0: one per online CPU (at most PSPXDP_MAX_SOCKETS).
    uint32_t queues = 0;
    std::optional<uint64_t> line_rate_bps; // none: DEV's ethtool speed, else 1gbit
    uint64_t window_bytes = 0; // 0: DEV's TX ring of full frames, else the engine's default
    uint32_t default_classid = PSPXDP_CLASSID(1, 0xffff);
    bool force = false; // attach even on a NIC known to drop host-sent PAUSE frames
    std::string driver; // DEV's driver; empty: ethtool's answer (tests inject one)
    // Given by the user, not defaults: only these are compared with an
    // attachment that is alive already (the default class can change since).
    bool default_classid_given = false;
    // The daemon's arguments (daemon::to_args): an attachment alive already
    // is the same when its daemon runs with these.
    std::vector<std::string> daemon_args;
    // Why the daemon as asked cannot run here (a --sched the kernel will not
    // grant: daemon::sched_obstacle); refused after the capability check,
    // before anything is made. Empty: nothing in the way.
    std::string cannot_start;
};

struct Attached {
    AttachState state;
    std::string line_rate_source; // "--line-rate", "ethtool speed", "default"
    std::string window_source;    // "--window", "TX ring of N", "default"
    bool replaced = false;        // a dead attachment was replaced
    // Not empty: DEV was attached already, with these options; nothing was
    // done, and this says so in one line. (No lock is held then.)
    std::string already;
    DevLock lock; // held until the caller has started the daemon
};

using Warn = std::function<void(const std::string &)>;

// Checks everything first - a refused attach changes nothing - then, under
// DEV's lock (the probe too: two attaches racing see each other's work as
// "being attached", never as a broken attachment), replaces a dead or
// half-made attachment (keeping its pins: the classes and filters) and builds
// the new one. Does not start the daemon. DEV alive already with the same
// options: `already` says so and nothing changes; with other options:
// refused (exit 2), naming the first difference.
Result<Attached> attach(const AttachOptions &opt, const Warn &warn);

// Starts DEV's daemon and waits for its first heartbeat; on failure stops
// it and undoes the attachment. args: extra daemon options.
Result<pid_t> start_daemon(const Paths &p, const AttachState &s,
                           const std::vector<std::string> &args);

struct Detached {
    bool daemon_stopped = false;
    bool was_attached = true; // false: nothing of pspxdp's was there (not an error)
    Notes notes;              // what was left in place because it is not pspxdp's
};
// Removes everything pspxdp created for DEV from whatever state it is in
// (complete, partly attached, state file or pins removed by hand, DEV gone),
// and only that. Refuses, touching nothing, when DEV is attached in another
// network namespace that still exists.
Result<Detached> detach(const Paths &p);

// The daemon's own clean-up when it stops because of its device: DEV gone
// (its TC parts went with it) or an MTU the pacer cannot carry. Removes the
// pacer veth pair (and the XDP program on it), records why in the state
// file, keeps the pins (classes and filters) for a re-attach. Skipped when
// another command holds DEV's lock (a detach cleans up itself).
Result<void> retire(const Paths &p, const std::string &why, bool dev_gone);

} // namespace pspxdp::setup
