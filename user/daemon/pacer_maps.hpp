// The daemon's side of the pinned maps it shares with TC and the CLI
// (shared.h): pacer_state, pacer_stats, daemon_stats and lateness are mmapable arrays,
// mapped here once; the daemon reads config_gen and writes its heartbeat and
// every counter with plain loads and stores on that memory. No syscall per
// update, and a counter is exact up to the last frame when the daemon is
// killed: the next daemon continues from it.
//
// It is also what a daemon does first, before it takes any frame: count what
// a killed predecessor left behind (recover()).
#pragma once

#include "common/fd.hpp"
#include "common/lateness.hpp"
#include "common/paths.hpp"
#include "common/pins.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace pspxdp::daemon {

// What recover() found.
struct Recovery {
    bool restart = false;       // an earlier daemon ran on this attachment
    uint64_t died_frames = 0;   // queued in a dead daemon: drop_died
    uint64_t died_in_rings = 0; // in a dead daemon's socket rings
    uint32_t freed_slots = 0;   // slots it was draining, now FREE
};

class PacerMaps {
  public:
    static Result<PacerMaps> open(const common::Paths &paths);

    int class_config_fd() const { return class_config_.get(); }
    int xsks_map_fd() const { return xsks_map_.get(); }

    pspxdp_class_counters &slot(uint32_t s) { return slots_[s]; }
    const pspxdp_class_counters &slot(uint32_t s) const { return slots_[s]; }
    pspxdp_daemon_stats &daemon() { return *daemon_; }
    // The release-lateness histogram, recorded in place.
    common::Lateness &lateness() { return lateness_; }
    const pspxdp_pacer_state &state() const { return *state_; }

    uint64_t config_gen() const { return __atomic_load_n(&state_->config_gen, __ATOMIC_ACQUIRE); }
    // 0 says "dead" at once: TC passes from the next packet on.
    void beat(uint64_t now_ns) {
        __atomic_store_n(&state_->heartbeat_ns, now_ns, __ATOMIC_RELEASE);
    }
    // Before slot s is first SERVED: a restarted daemon looks below it.
    void note_slot(uint32_t s);
    // Publishes a slot's state after its classid and counters (TC reads
    // state first, then classid).
    void set_state(uint32_t s, pspxdp_slot_state st) {
        __atomic_store_n(&slots_[s].state, st, __ATOMIC_RELEASE);
    }

    // An xdp_stats counter over all CPUs, since the attachment (its pins)
    // was made. PSPXDP_XDP_REDIRECTED: every frame XDP handed to a socket.
    uint64_t xdp_counter(enum pspxdp_xdp_counter counter) const;

    // Counts what a dead predecessor left: frames its class queues held
    // (backlog_frames of every slot not FREE -> drop_died) and frames lost
    // in its socket rings (died_in_rings: what XDP redirected minus what
    // the daemons took or the kernel counted as dropped, exact as of the
    // dead daemon's last publish of the kernel's counts). Slots it was
    // draining go FREE; SERVED ones stay for reconcile to adopt or free.
    // Must run before this daemon creates its sockets.
    Recovery recover();

  private:
    PacerMaps(common::Fd class_config, common::Fd xsks_map, common::Fd xdp_stats,
              common::MapView state, common::MapView slots, common::MapView daemon,
              common::MapView lateness)
        : class_config_(std::move(class_config)), xsks_map_(std::move(xsks_map)),
          xdp_stats_(std::move(xdp_stats)), state_map_(std::move(state)),
          slots_map_(std::move(slots)), daemon_map_(std::move(daemon)),
          lateness_map_(std::move(lateness)), state_(state_map_.as<pspxdp_pacer_state>()),
          slots_(slots_map_.as<pspxdp_class_counters>()),
          daemon_(daemon_map_.as<pspxdp_daemon_stats>()),
          lateness_(lateness_map_.as<pspxdp_lateness>()) {}
    common::Fd class_config_, xsks_map_, xdp_stats_;
    // pacer_state, pacer_stats, daemon_stats and lateness, mapped (their fds
    // are not needed once mapped: the mapping keeps the map alive).
    common::MapView state_map_, slots_map_, daemon_map_, lateness_map_;
    pspxdp_pacer_state *state_;
    pspxdp_class_counters *slots_;
    pspxdp_daemon_stats *daemon_;
    common::Lateness lateness_;
};

} // namespace pspxdp::daemon
