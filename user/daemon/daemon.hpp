// The pacer daemon: joins the Engine (what goes on the wire next) and the
// AF_XDP plane (where the frames are). The files of user/daemon/, one job each:
//
//   daemon.cpp        this entry point: signals, pidfile, runs the loop
//   loop.cpp          the loop: receive, schedule, kick, timers, sleep, shutdown
//   class_table.cpp   the classes by slot, following class_config
//   class_queues.cpp  each class's queue (per-flow DRR and CoDel, or one FIFO with
//                     flows off): limits, ECN, overflow, drops, sent
//   pacer_maps.cpp    the mmapped maps: heartbeat, counters, a dead daemon's leftovers
//   wait_plan.cpp     how a backlogged wait is spent: sleep, nap or spin, until when
//   lost_wire.cpp     the wire time lost by running late, as a share and a log line
//   wire_clock.cpp    which clock paces the wire (byte clock, clockless), the gap horizon
//   watch.cpp         DEV gone, renamed, moved or its MTU changed: stop or restart
//   log.cpp           the log
//
// The release-lateness histogram the loop records is common/lateness.cpp
// (status and the exporter read it too).
// The daemon as a process (pidfile, spawn, stop) is setup/process.cpp: the
// attach library starts and stops it.
#pragma once

#include "core/engine.hpp"
#include "core/units.hpp"
#include "daemon/wire_clock.hpp"
#include "datapath/xsk.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::daemon {

// --sched: the loop's scheduling policy (docs/design.md §4.4). In the
// order of the option's choices.
enum class SchedPolicy : uint8_t {
    // The default: Deadline where the kernel grants it, else Normal, and
    // attach says which. A policy asked by name is had or refused.
    Auto,
    Normal,   // SCHED_OTHER: shares its CPU with whatever else runs there
    Fifo,     // SCHED_FIFO at kRealtimePriority, memory locked (the kernel's RT throttling)
    Deadline, // SCHED_DEADLINE, kDeadlineRuntimeNs every kDeadlinePeriodNs (reclaims())
};
const char *sched_policy_name(SchedPolicy p);
// What Auto asks the kernel for first.
inline constexpr SchedPolicy kAutoSched = SchedPolicy::Deadline;

// The scheduling a process runs with, as the kernel has it (sched_getattr):
// what attach prints and status shows.
struct SchedInForce {
    SchedPolicy policy = SchedPolicy::Normal; // never Auto
    uint32_t priority = 0;                    // Fifo
    uint64_t runtime_ns = 0, period_ns = 0;   // Deadline
    bool reclaim = false;                     // Deadline: SCHED_FLAG_RECLAIM
    std::string text() const; // "deadline (SCHED_DEADLINE): 300 us of every 500 us reserved"
};
Result<SchedInForce> sched_in_force(int pid);
// Why this process (and a daemon it starts, which inherits its capabilities
// and CPU affinity) cannot have `p`: no CAP_SYS_NICE, or for deadline a CPU
// affinity narrower than the online CPUs. Empty: nothing known in the way
// (the kernel may still refuse: deadline admission control).
std::string sched_obstacle(SchedPolicy p);

struct DaemonConfig {
    std::string dev;
    uint64_t line_rate_bps = 0; // 0: from the state file
    uint64_t window_bytes = 0;  // 0: from the state file, else EngineConfig default
    // The UMEM: every frame the pacer can hold, shared by all classes.
    uint64_t buffer_bytes = datapath::kDefaultBufferBytes;
    bool write_pidfile = true;
    // While backlogged and ahead of the wire by more than a batch, sleep if
    // the wait is longer than this; 0 = always spin. Sleeping by default:
    // on a small machine a spinning pacer starves the very senders whose
    // rings keep its classes backlogged, and an oversleep costs only real
    // time (counted as an underrun), never the byte clock's precision.
    uint64_t sleep_min_ns = 50'000;
    // A wait with less slack than this (Decision::slack_ns) ends in a spin
    // of this long: timers on this project's VM wake 15-27 us late at the
    // median, depending on its load (build/bench/bench_timers), so a
    // clockless frame due at wake_ns needs the last stretch spun. A wait
    // with more slack is slept through to wake_ns: the engine absorbs the
    // lateness (gap horizon).
    uint64_t spin_ns = 20'000;
    // The gap horizon H (engine.hpp); kGapHorizonInf: the paper's rule.
    uint64_t gap_horizon_ns = kDefaultGapHorizonNs;
    // Clockless: the burst bound of a class that sets none (engine.hpp).
    BurstSize burst{0, kDefaultBurstMtus};
    // ... and at least what the class sends in this long (wake-up batching,
    // engine.hpp); 0 when --burst is given: that bound as it is.
    uint64_t burst_floor_ns = kDefaultBurstFloorNs;
    // Which clock paces the wire (wire_clock.hpp); auto: from DEV's driver,
    // resolved by the daemon at each start (DEV may be re-created).
    WireClock clock = WireClock::Auto;
    int cpu = -1; // pin to this CPU; -1: anywhere (refused with SchedPolicy::Deadline)
    // How the kernel schedules the loop (SchedPolicy). Auto (deadline where
    // granted) by default: on a busy host a normal-priority pacer waits
    // behind every runnable task, and SCHED_FIFO is stopped 50 ms at a time
    // by the fair server.
    SchedPolicy sched = SchedPolicy::Auto;
    // Deadline: reclaim idle CPU time beyond the reservation clockless too
    // (--reclaim); the byte clock always does (daemon.cpp, reclaims()).
    bool reclaim = false;
    bool busy_poll = false; // SO_PREFER_BUSY_POLL on the RX sockets; the loop polls them
    // attach --config FILE, absolute: SIGHUP applies it again (all or
    // nothing, as pspxdp apply). Empty: SIGHUP is logged and ignored.
    std::string config_file;
};

// SCHED_FIFO priority of --sched fifo: above every normal task, below
// threaded IRQ handlers (50), so the NIC interrupts that feed the pacer
// still preempt it.
inline constexpr int kRealtimePriority = 10;

// --sched deadline: the reservation the kernel guarantees the loop, 300 us
// of every 500 us (60 % of a CPU), and clockless no more: every normal task
// keeps 40 % of that CPU and all of the others. Enough for one class at
// 500 Mbit/s clockless (the daemon took 33 % of a core there, batched). With
// SCHED_FLAG_RECLAIM (GRUB: on the byte clock, or --reclaim) it may use
// more, the CPU time no other deadline task reserved, up to the kernel's
// deadline limit (sched_rt_runtime_us / sched_rt_period_us, 95 %) less the
// fair server's 5 %: ~94 % of one CPU. What runs beside it pays: on a 2-core
// host a local receiver got 63-68 % of a 500 Mbit/s class from a reclaiming
// daemon and 97-99 % from one that does not; the byte clock without reclaim
// underran 0.7 % of the wire beside a busy loop per core
// (docs/results/2026-11-28-good-neighbour). The period bounds how long the
// loop can be stopped at once when it did use it all: a few periods, not
// the fair server's 50 ms (design.md §4.4).
inline constexpr uint64_t kDeadlineRuntimeNs = 300'000;
inline constexpr uint64_t kDeadlinePeriodNs = 500'000;

// --cpu N only with a policy that can be pinned: the kernel admits a
// SCHED_DEADLINE task only with the whole root domain as its affinity
// (refused with Auto too: its first choice is deadline). --reclaim only
// with a policy that can be deadline.
Result<void> set_sched_options(DaemonConfig &cfg, SchedPolicy sched, int cpu, bool reclaim = false);

// The arguments of `pspxdp daemon DEV ...` that give cfg (attach spawns it so).
std::vector<std::string> to_args(const DaemonConfig &cfg);

// Runs until SIGTERM/SIGINT (or a fatal error). Returns the exit code. Logs
// to stderr, one line per event. SIGHUP re-reads cfg.config_file (counted in
// file_reloads / file_reload_failures) and never stops the pacer.
int run(const DaemonConfig &cfg);

} // namespace pspxdp::daemon
