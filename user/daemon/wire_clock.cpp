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

Result<WireClock> parse_wire_clock(std::string_view text) {
    if (text == "auto") return WireClock::Auto;
    if (text == "byte") return WireClock::Byte;
    if (text == "none") return WireClock::None;
    return refuse("--clock \"" + std::string(text) + "\": expected auto, byte or none");
}

Result<uint64_t> parse_gap_horizon_ns(std::string_view text) {
    if (text == "inf") return kGapHorizonInf;
    // A bare 0 needs no unit; any other bare number would be a guess.
    if (text == "0") return uint64_t(0);
    auto ns = parse_duration_ns(text);
    if (!ns)
        return refuse("--gap-horizon \"" + std::string(text) +
                      "\": expected inf or a time such as 50us or 1ms");
    // Beyond an hour H means "never idle": say inf.
    if (*ns > 3600'000'000'000ull)
        return refuse("--gap-horizon \"" + std::string(text) + "\": above 1h; use inf");
    return *ns;
}

std::string format_gap_horizon(uint64_t horizon_ns) {
    return horizon_ns == kGapHorizonInf ? "inf" : format_duration(horizon_ns);
}

bool is_virtual_driver(std::string_view driver) {
    // veth, virtio_net (KVM/QEMU), tun (tap), VMware, Hyper-V, Xen, AWS ENA,
    // Google gVNIC, and the software devices: nothing under them serialises
    // at the rate they report, or a virtual switch eats the PAUSE frames.
    static constexpr std::string_view kVirtual[] = {
        "veth",    "virtio_net", "tun",   "vmxnet3", "hv_netvsc", "vif",   "xen-netfront",
        "ena",     "gve",        "netkit", "macvlan", "ipvlan",   "dummy", "bridge",
        "vxlan",   "geneve",     "vrf",   "ifb",
    };
    return std::find(std::begin(kVirtual), std::end(kVirtual), driver) != std::end(kVirtual);
}

std::string ClockChoice::reason() const {
    if (forced) return std::string("forced: --clock ") + (clockless ? "none" : "byte");
    if (driver.empty()) return "auto: driver unknown, assumed a NIC";
    return "auto: driver " + driver +
           (!clockless                          ? " serialises"
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

Result<void> set_clock_options(DaemonConfig &cfg, const std::optional<std::string> &horizon,
                               const std::optional<std::string> &clock, bool clockless) {
    uint64_t h = kDefaultGapHorizonNs;
    if (horizon) {
        auto r = parse_gap_horizon_ns(*horizon);
        if (!r) return r.failure();
        h = *r;
    }
    WireClock c = WireClock::Auto;
    if (clock) {
        auto r = parse_wire_clock(*clock);
        if (!r) return r.failure();
        c = *r;
    }
    if (clockless) {
        if (c == WireClock::Byte) return refuse("--clockless and --clock byte: choose one clock");
        c = WireClock::None;
    }
    cfg.gap_horizon_ns = h;
    cfg.clock = c;
    return {};
}

} // namespace pspxdp::daemon
