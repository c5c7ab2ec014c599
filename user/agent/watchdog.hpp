// What the group agent and its watchdog child share (docs/design.md §11.4):
// one MAP_SHARED page with the deadline, the fallback and the applied
// rate; the applied-rate log both append to; and the watchdog itself.
#pragma once

#include "control/control.hpp"
#include "control/group_share.hpp"
#include "core/result.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pspxdp::agent {

// A class the group drives at "0" holds this rate: a paced class needs one
// above 0, and 1 bit/s lets at most one minimum frame out in ~8 minutes.
inline constexpr uint64_t kHoldRateBps = 1;

uint64_t real_ns(); // CLOCK_REALTIME, what the rate log and status print
// "SECONDS.MS TEXT" on stderr (the agent's log).
void log_line(const std::string &text);

// Every class change by either process is made under DEV's lock, with
// these read and written there. Times are CLOCK_BOOTTIME (common::boot_ns).
struct Shared {
    std::atomic<uint64_t> safe_until_ns{0}; // 0: not safe
    std::atomic<uint64_t> fallback_bps{0};
    // R7: when the established floor goes to 0 (UINT64_MAX: never).
    std::atomic<uint64_t> orphan_at_ns{UINT64_MAX};
    std::atomic<uint64_t> applied_bps{0};
    std::atomic<uint64_t> rate_changes{0};
    std::atomic<uint64_t> watchdog_lowerings{0};
    // The lease of the agent's live record (0: none). The agent gone, the
    // watchdog revokes it once the class is at its fallback, so the others
    // take the share in one epoch instead of at its expiry (§11.3).
    std::atomic<uint64_t> lease{0};
    // The class is no longer the group's (left, refused): its own rate is
    // back, and the watchdog leaves it alone.
    std::atomic<bool> released{false};
};

// The group's share for the class, under DEV's lock, which d holds
// (docs/design.md §11.10): a flat class's rate (kHoldRateBps for 0) through
// Device::set_rate; a class of a tree, the share as its subtree's ceil
// (control::fit_subtree, from `own`: the subtree's rates and ceils before
// the group held it; empty: as they are now). Returns the subtree's rates
// and ceils as they were, the class first.
Result<std::vector<control::OwnRate>>
set_group_rate(control::Device &d, uint32_t classid, uint64_t rate_bps,
               const std::function<Result<void>()> &before_write = {},
               const std::vector<control::OwnRate> &own = {});

// The subtree's own rates and ceils back (leave), the class first.
Result<void> restore_own_rates(control::Device &d, const std::vector<control::OwnRate> &own);

struct RateLog {
    int fd = -1;
    // "REALTIME_NS RATE_BPS": O_APPEND, so the two processes' lines never
    // interleave.
    void write(uint64_t rate_bps) const;
};

// The watchdog (a child process): at the deadline, with the agent not
// having renewed it, lowers the class to the fallback. Also when the agent
// is gone (its pipe closed, or PR_SET_PDEATHSIG) or the watchdog is told to
// stop (SIGTERM, SIGINT, SIGHUP): it lowers once if the class is above the
// fallback (unless released), then exits. It blocks in poll() on the
// agent's pipe and a signalfd, woken by the deadline at the latest: a
// lowering that fails (DEV gone) is tried again after 250 ms, never in a loop.
// The agent gone (not the watchdog told to stop) and the class at its
// fallback, it revokes the agent's lease at etcd (endpoints).
[[noreturn]] void watchdog(const std::string &dev, uint32_t classid, Shared *sh, int pipe_rd,
                           const RateLog &log, pid_t agent,
                           const std::vector<std::string> &endpoints);

} // namespace pspxdp::agent
