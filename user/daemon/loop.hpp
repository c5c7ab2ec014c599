// The pacer loop. One thread; each pass:
//
//   config_gen moved? -> re-read class_config (class_table)
//   reap TX completions -> take RX frames into the class FIFOs (class_queues)
//   -> relieve an overflow -> refill the fill rings -> ask the engine for
//   decisions while the TX ring has room -> kick, count what the kernel took
//   -> every tick (10 ms): heartbeat, deleted classes' drains; every 100 ms:
//   the kernel's socket counters and the engine's into daemon_stats; every
//   second: the UMEM accounting check and the classes map (class_entries.hpp)
//   -> sleep or spin.
//
// Sleeping: with nothing backlogged the loop blocks in epoll on the RX
// sockets with the next tick as timeout, so it costs ~0 % CPU and wakes as
// soon as a frame arrives. While backlogged it follows the engine's Wait
// decisions: wake_ns, and slack_ns, how late it may call again at no cost in
// precision. A wait with slack of at least spin_ns (the window's queued wire
// time; the gap horizon H, whose gaps absorb a late wake-up) is slept
// through to wake_ns; one with less (clockless: a frame due at wake_ns) is
// slept until spin_ns - slack before it and spun the rest. Short waits
// (under sleep_min_ns) are spun whole. A sleep is an epoll wait on the RX
// sockets: frames arriving meanwhile are queued at once, and the engine
// decides again (resuming from the wire's real-time position) - except in a
// planned idle (gap horizon, clockless) of up to 1 ms, napped through on the
// clock alone: arrivals wait in the RX rings until the planned wake-up.
#pragma once

#include "daemon/watch.hpp"

#include "core/engine.hpp"
#include "core/result.hpp"
#include "daemon/class_entries.hpp"
#include "daemon/class_queues.hpp"
#include "daemon/class_table.hpp"
#include "daemon/daemon.hpp"
#include "daemon/lost_wire.hpp"
#include "daemon/pacer_maps.hpp"
#include "datapath/xsk.hpp"
#include "setup/loader.hpp"

#include <csignal>
#include <memory>
#include <optional>

namespace pspxdp::daemon {

class Loop {
  public:
    ~Loop();
    Result<void> init(const DaemonConfig &cfg);
    // Runs until stop is set or DEV changes under it (dev_event()). Returns
    // the exit code.
    int run(const volatile sig_atomic_t &stop);
    // Why run() returned early, if DEV changed under it (watch.hpp).
    const DevEvent &dev_event() const { return dev_event_; }
    const setup::AttachState &state() const { return st_; }

  private:
    // One pass over the frames: completions, RX, overflow, refill, engine,
    // kick. Returns the time the engine decided at.
    uint64_t move_frames();
    void receive();
    bool schedule(uint64_t now); // true if it emitted a frame
    void tick(uint64_t now);
    void publish_counts();
    void check_accounting(const char *when);
    void sleep_until(uint64_t now, uint64_t deadline);
    void nap_until(uint64_t deadline);
    void wait_backlogged(uint64_t now);
    void shutdown();

    DaemonConfig cfg_;
    setup::AttachState st_;
    std::optional<DevWatch> watch_;
    DevEvent dev_event_;
    Framing framing_{};
    std::optional<PacerMaps> maps_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<datapath::XskPlane> plane_;
    std::unique_ptr<ClassTable> table_;
    std::unique_ptr<ClassQueues> queues_;
    std::optional<ClassEntries> entries_; // the classes map, for bpftool
    uint64_t send_median_ns_ = 0;         // clockless: how long deciding and sending a frame takes
    int epfd_ = -1;                       // RX sockets, EPOLLIN: registered once
    uint64_t config_gen_ = 0;
    pspxdp_pacer_state logged_{}; // line rate and default class last logged
    uint64_t next_tick_ns_ = 0;
    uint64_t ticks_ = 0;
    uint64_t wake_ns_ = 0;  // the engine's (or the batch's) Wait: nothing before this
    uint64_t slack_ns_ = 0; // ... and how late after it costs nothing
    bool waiting_ = false;
    bool engine_wait_ = false; // waiting_ on the engine's Wait (not a batch)
    uint64_t wait_inputs_ = 0; // engine_->inputs() when it said Wait
    ClockChoice clock_;
    uint64_t batch_bytes_ = 0; // decisions are taken in batches of about this many byte times
    uint64_t kick_errors_logged_ = 0;
    LostWire lost_wire_; // lost_wire_ppm, the log line
    // daemon_stats as this daemon found them: the kernel's socket counters
    // and the engine's start from zero with it, the published ones continue.
    pspxdp_daemon_stats base_{};
};

} // namespace pspxdp::daemon
