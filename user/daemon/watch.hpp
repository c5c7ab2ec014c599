// The device watcher: what the daemon must notice about DEV while it runs.
//
//   - DEV deleted, moved to another network namespace or renamed: pspxdp
//     cannot pace it any more (and its name is the attachment's key). The
//     daemon stops, removes the pacer veth it runs on, marks the state
//     ("stopped: ...") and exits: status says so, TC is gone with DEV (or
//     passes: no heartbeat), and re-creating DEV + attach replaces the dead
//     attachment with its classes and filters.
//   - DEV's MTU changed: the pacer veth's MTU must follow (DEV's + the tag),
//     and the UMEM frames and gap sizes with it; otherwise larger frames
//     would vanish in the pacer veth. If the pacer can carry the new MTU the
//     daemon follows it (a restart of its loop); if not it stops - traffic
//     then passes unpaced (fail-open) - and says why in the log and status.
//
// Sources: an rtnetlink RTNLGRP_LINK subscription (immediate) and a check by
// ifindex once a second (covers a lost event: ENOBUFS). The daemon's loop
// calls poll() once per tick; it never blocks.
#pragma once

#include "common/fd.hpp"
#include "common/paths.hpp"
#include "core/result.hpp"
#include "setup/state.hpp"

#include <cstdint>
#include <functional>
#include <string>

namespace pspxdp::daemon {

struct DevEvent {
    enum class Kind { None, Gone, Mtu };
    Kind kind = Kind::None;
    uint32_t mtu = 0; // Mtu: DEV's new MTU
    std::string why;  // for the log and the state file
};

class DevWatch {
  public:
    // DEV as the daemon found it at start (name, ifindex, MTU), in the
    // caller's network namespace.
    static Result<DevWatch> open(const std::string &dev, uint32_t ifindex, uint32_t mtu);
    DevEvent poll(uint64_t now_ns);
    int fd() const { return sock_.get(); }

  private:
    DevEvent check(const std::string &name, uint32_t mtu, bool deleted);
    std::string dev_;
    uint32_t ifindex_ = 0, mtu_ = 0;
    common::Fd sock_;
    uint64_t next_check_ns_ = 0;
};

// What the daemon does about an event once its loop has stopped (queues
// drained): Restart the loop (the MTU was followed: new UMEM, new framing),
// or Stop with this exit code (the attachment was retired, see above).
struct DevOutcome {
    bool restart = false;
    int exit_code = 0;
};
inline constexpr int kExitDeviceGone = 3; // systemd: RestartPreventExitStatus=3
// The pacer veth's MTU is DEV's plus the tag (PSPXDP_TAG_BYTES).
DevOutcome handle_dev_event(const common::Paths &p, const setup::AttachState &st,
                            const DevEvent &ev,
                            const std::function<void(const std::string &)> &log);

} // namespace pspxdp::daemon
