// The pacer daemon: joins the Engine (what goes on the wire next) and the
// AF_XDP plane (where the frames are). The files of user/daemon/, one job each:
//
//   daemon.cpp        this entry point: signals, pidfile, runs the loop
//   loop.cpp          the loop: receive, schedule, kick, timers, sleep, shutdown
//   class_table.cpp   the classes by slot, following class_config
//   class_queues.cpp  each class's FIFO: limits, ECN, overflow, drops, sent
//   pacer_maps.cpp    the mmapped maps: heartbeat, counters, a dead daemon's leftovers
//   wire_clock.cpp    which clock paces the wire (byte clock, clockless), the gap horizon
//   watch.cpp         DEV gone, renamed, moved or its MTU changed: stop or restart
//   log.cpp           the log
//
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
    // Which clock paces the wire (wire_clock.hpp); auto: from DEV's driver,
    // resolved by the daemon at each start (DEV may be re-created).
    WireClock clock = WireClock::Auto;
    int cpu = -1;           // pin to this CPU; -1: anywhere
    bool realtime = false;  // SCHED_FIFO at kRealtimePriority, memory locked
    bool busy_poll = false; // SO_PREFER_BUSY_POLL on the RX sockets; the loop polls them
    // attach --config FILE, absolute: SIGHUP applies it again (all or
    // nothing, as pspxdp apply). Empty: SIGHUP is logged and ignored.
    std::string config_file;
};

// SCHED_FIFO priority of --rt: above every normal task, below threaded IRQ
// handlers (50), so the NIC interrupts that feed the pacer still preempt it.
inline constexpr int kRealtimePriority = 10;

// The arguments of `pspxdp daemon DEV ...` that give cfg (attach spawns it so).
std::vector<std::string> to_args(const DaemonConfig &cfg);

// Runs until SIGTERM/SIGINT (or a fatal error). Returns the exit code. Logs
// to stderr, one line per event. SIGHUP re-reads cfg.config_file (counted in
// file_reloads / file_reload_failures) and never stops the pacer.
int run(const DaemonConfig &cfg);

// Asks a running loop (same process, e.g. a signal handler or a test) to stop.
void request_stop();

} // namespace pspxdp::daemon
