// The pacer daemon: joins the Engine (what goes on the wire next) and the
// XskPlane (where the frames are). One thread, one loop:
//
//   reap TX completions -> refill fill rings -> take RX descriptors into the
//   per-class FIFOs -> ask the engine for decisions while the TX ring has room
//   -> kick -> timers (heartbeat 10 ms, class_config reconcile 20 ms, stats
//   100 ms, accounting check + stats file 1 s) -> sleep or spin.
//
// Sleeping: with nothing backlogged the loop blocks in epoll on the RX
// sockets (POLLIN) with the next timer as timeout, so it costs ~0 % CPU and
// wakes as soon as a frame arrives. While backlogged it spins, except when the
// schedule is ahead of the wire by more than a batch: then it sleeps until
// the window has room again (or a frame arrives).
#pragma once

#include "core/engine.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <string>

namespace pspxdp::daemon {

struct DaemonConfig {
    std::string dev;
    uint64_t line_rate_bps = 0;    // 0: from the state file
    uint64_t window_bytes = 0;     // 0: from the state file, else EngineConfig default
    uint32_t frames_per_queue = 0; // 0: sized by the datapath
    bool write_pidfile = true;
    // While backlogged and ahead of the wire by more than a batch, sleep if
    // the wait is longer than this; 0 = always spin. Sleeping by default:
    // on a small machine a spinning pacer starves the very senders whose
    // rings keep its classes backlogged, and an oversleep costs only real
    // time (counted as an underrun), never the byte clock's precision.
    uint64_t sleep_min_ns = 50'000;
};

// Runs until SIGTERM/SIGINT (or a fatal error). Returns the exit code. Logs
// to stderr, one line per event.
int run(const DaemonConfig &cfg);

// Asks a running loop (same process, e.g. a signal handler or a test) to stop.
void request_stop();

} // namespace pspxdp::daemon
