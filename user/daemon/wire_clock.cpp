#include "daemon/wire_clock.hpp"

#include "core/engine.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "setup/attach.hpp"

#include <algorithm>
#include <iterator>

namespace pspxdp::daemon {

const char *wire_clock_name(WireClock c) {
    switch (c) {
    case WireClock::Byte: return "byte";
    case WireClock::None: return "none";
    default: return "auto";
    }
}

std::string format_gap_horizon(uint64_t horizon_ns) {
    return horizon_ns == kGapHorizonInf ? "inf" : format_duration(horizon_ns);
}

bool is_virtual_driver(std::string_view driver) {
    // veth, virtio_net (KVM/QEMU), tun (tap), VMware, Hyper-V, Xen, AWS ENA,
    // Google gVNIC, and the software devices: nothing under them serialises
    // at the rate they report, or a virtual switch eats the PAUSE frames.
    static constexpr std::string_view kVirtual[] = {
        "veth",         "virtio_net", "tun",   "vmxnet3", "hv_netvsc", "vif",
        "xen-netfront", "ena",        "gve",   "netkit",  "macvlan",   "ipvlan",
        "dummy",        "bridge",     "vxlan", "geneve",  "vrf",       "ifb",
    };
    return std::find(std::begin(kVirtual), std::end(kVirtual), driver) != std::end(kVirtual);
}

std::string ClockChoice::reason() const {
    if (forced) return std::string("forced: --clock ") + (clockless ? "none" : "byte");
    if (driver.empty()) return "auto: driver unknown, assumed a NIC";
    return "auto: driver " + driver +
           (!clockless                        ? " serialises"
            : setup::drops_host_pause(driver) ? " drops host-sent PAUSE frames"
                                              : " has no serialising clock");
}

std::string ClockChoice::describe() const {
    return std::string(clockless ? "clockless" : "byte clock") + " (" + reason() + ")";
}

ClockChoice resolve_wire_clock(WireClock clock, const std::string &driver) {
    ClockChoice c;
    c.driver = driver;
    c.forced = clock != WireClock::Auto;
    // A NIC that drops host-sent PAUSE frames (attached with --force) has a
    // clock, but gap frames cannot use it: pace by timer there too.
    c.clockless = clock == WireClock::None ||
                  (clock == WireClock::Auto &&
                   (is_virtual_driver(driver) || setup::drops_host_pause(driver)));
    return c;
}

Result<void> set_clock_options(DaemonConfig &cfg, uint64_t gap_horizon_ns, WireClock clock,
                               bool clockless) {
    if (clockless) {
        if (clock == WireClock::Byte)
            return refuse("--clockless and --clock byte: choose one clock");
        clock = WireClock::None;
    }
    cfg.gap_horizon_ns = gap_horizon_ns;
    cfg.clock = clock;
    return {};
}

} // namespace pspxdp::daemon
