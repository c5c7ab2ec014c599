// Which clock paces DEV's wire, and the gap horizon (the engine's
// side is core/engine.hpp, the why is docs/design.md §4.5).
//
// A NIC that serialises frames at its line rate is a clock: gap frames on it
// put each real frame on its byte-clock time. A veth, virtio_net or any VM
// NIC behind a virtual switch has no such clock: it "sends" instantly and
// the switch eats PAUSE frames, so gap frames pace nothing there. On those
// the daemon runs clockless: no gap frames, each frame released at its
// real-time due time. `--clock auto` (the default) decides from DEV's
// driver (ethtool driver info, SIOCETHTOOL ETHTOOL_GDRVINFO).
#pragma once

#include "core/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace pspxdp::daemon {

struct DaemonConfig;

enum class WireClock : uint8_t {
    Auto, // clockless on a virtual driver (is_virtual_driver) or a NIC that drops
          // host-sent PAUSE frames (setup::drops_host_pause), byte clock otherwise
    Byte, // gap frames: the wire's serialisation is the clock
    None, // clockless
};

// "auto", "byte", "none": the words of --clock (parsed by the CLI's table).
const char *wire_clock_name(WireClock c);

// "inf" (kGapHorizonInf, the paper's rule), "50us": what --gap-horizon reads.
std::string format_gap_horizon(uint64_t horizon_ns);

// Drivers of devices with no serialising clock of their own: veth, virtio_net,
// tun/tap, the paravirtual NICs of hypervisors and clouds, and software
// devices stacked on others.
bool is_virtual_driver(std::string_view driver);

// What a daemon runs with, and why.
struct ClockChoice {
    bool clockless = false;
    bool forced = false; // --clock byte/none, not auto
    std::string driver;  // DEV's driver ("" if ethtool did not say)
    // One phrase for logs and status: "clockless (auto: driver veth has no
    // serialising clock)", "byte clock (forced: --clock byte)".
    std::string describe() const;
    // Only the why: "auto: driver veth has no serialising clock" (status -j's
    // clock_reason).
    std::string reason() const;
};
ClockChoice resolve_wire_clock(WireClock clock, const std::string &driver);

// The one place both attach and daemon turn their options into cfg: the
// horizon and the clock (--clockless is --clock none; --clockless with
// --clock byte is refused). An error is the user's (exit 2) and leaves cfg
// unchanged.
Result<void> set_clock_options(DaemonConfig &cfg, uint64_t gap_horizon_ns, WireClock clock,
                               bool clockless);

} // namespace pspxdp::daemon
