// Loading and attaching: the two BPF programs, their pinned maps, the pacer
// veth pair and the TC hook on DEV. Each step is recorded in the state file
// before the next (state.hpp), so that teardown() removes exactly that and
// nothing else (a clsact qdisc someone else made stays), even after a crash
// mid-attach. The policy - what may be attached, replaced or removed - is in
// attach.hpp; this file is the mechanism.
#pragma once

#include "common/lock.hpp"
#include "common/paths.hpp"
#include "common/pins.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"
#include "setup/state.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::setup {

using common::DevLock;
using common::ensure_run_dir;

// The largest MTU of DEV the pacer veth can carry: native XDP on a veth
// needs each frame in one page, so the kernel refuses XDP when the peer's MTU
// exceeds SKB_WITH_OVERHEAD(PAGE_SIZE - XDP_PACKET_HEADROOM) - ETH_HLEN
// (3506 with 4 KiB pages), less the tag the pacer veth carries on top of
// DEV's MTU (PSPXDP_TAG_BYTES, 16): 3490.
uint32_t max_pacer_mtu();

// Mounts bpffs on /sys/fs/bpf when nothing is mounted there.
Result<void> ensure_bpffs();

struct AttachRequest {
    std::string dev;
    uint32_t queues = 16;
    uint64_t line_rate_bps = 0;
    uint64_t window_bytes = 0;
    // Unclassified traffic goes here. Created as a normal (gap-filling)
    // class unless it is configured already; never left without a class, or
    // the kernel would put unclassified frames on the wire behind the
    // pacer's back and break its byte clock.
    uint32_t default_classid = PSPXDP_CLASSID(1, 0xffff);
    // The clsact qdisc on DEV, if there is one, was created by the attachment
    // this one replaces (its daemon died): it stays pspxdp's to delete.
    bool clsact_ours = false;
};

// Creates the veth pair, loads both programs, pins (or reuses) the maps,
// writes pacer_state, attaches XDP (native) on b and TC egress on DEV. On
// failure undoes what it did. The caller holds the DevLock, has checked DEV
// (attach.hpp) and runs in DEV's network namespace.
Result<AttachState> build(const AttachRequest &req);

// What teardown() left in place because it was not pspxdp's, one line each.
using Notes = std::vector<std::string>;

// Removes what s says was created, each part only after checking it is
// still ours (TC filter by handle, prio and program name; the veth by name,
// kind and peer; pins by name and map identity). Keeps going on errors and
// reports the first one. Notes what it left. Removes the state file when
// everything went. keep_pins: a replacement keeps the configuration.
Result<void> teardown(const Paths &p, const AttachState &s, Notes &notes, bool keep_pins = false);

// The parts teardown() uses, for clean-ups without a (complete) state file
// (what is ours: ownership.hpp).
Result<void> remove_tc_filter(uint32_t ifindex);
// Removes our pins from p.pin_dir, notes what is not ours, removes the
// directory if it ends up empty (and the pspxdp root then too).
Result<void> remove_pins(const Paths &p, Notes &notes);

// The paced classes in DEV's class_config: their rates summed (128-bit, so a
// hand-written huge rate cannot wrap), and how many.
struct PacedSum {
    unsigned __int128 bps = 0;
    uint32_t classes = 0;
};
Result<PacedSum> paced_sum(const Paths &p);

// Removes DEV's log, pid, state and lock files and /run/pspxdp when
// empty (after a detach: nothing of pspxdp stays behind).
void remove_run_files(const Paths &p);

} // namespace pspxdp::setup
