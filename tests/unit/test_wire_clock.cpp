// The clock options of attach and daemon (docs/design.md §4.5): --gap-horizon,
// --clock, --clockless, their one resolution and the hand-over to the daemon.
#include <catch2/catch.hpp>

#include "core/engine.hpp"
#include "daemon/daemon.hpp"
#include "daemon/wire_clock.hpp"

#include <algorithm>
#include <string>

using namespace pspxdp;
using namespace pspxdp::daemon;

TEST_CASE("--clock auto picks clockless on virtual drivers and on PAUSE-dropping NICs only",
          "[cli][clock]") {
    for (const char *v : {"veth", "virtio_net", "tun", "vmxnet3", "hv_netvsc", "ena", "gve"}) {
        INFO(v);
        auto c = resolve_wire_clock(WireClock::Auto, v);
        CHECK(c.clockless);
        CHECK(!c.forced);
        CHECK(c.describe() ==
              std::string("clockless (auto: driver ") + v + " has no serialising clock)");
    }
    for (const char *nic : {"e1000e", "igb", "ixgbe", "mlx5_core", "r8169", ""}) {
        INFO(nic);
        CHECK(!resolve_wire_clock(WireClock::Auto, nic).clockless);
    }
    // i40e/ice (attached with --force): their NIC drops the gap frames.
    for (const char *nic : {"i40e", "ice"}) {
        INFO(nic);
        auto c = resolve_wire_clock(WireClock::Auto, nic);
        CHECK(c.clockless);
        CHECK(c.describe() ==
              std::string("clockless (auto: driver ") + nic + " drops host-sent PAUSE frames)");
        CHECK(!resolve_wire_clock(WireClock::Byte, nic).clockless); // --clock byte is obeyed
    }
    auto forced = resolve_wire_clock(WireClock::Byte, "veth");
    CHECK(!forced.clockless);
    CHECK(forced.forced);
    CHECK(forced.describe() == "byte clock (forced: --clock byte)");
    auto none = resolve_wire_clock(WireClock::None, "ixgbe");
    CHECK(none.clockless);
    CHECK(none.describe() == "clockless (forced: --clock none)");
}

TEST_CASE("set_clock_options: --clockless, conflicts leave cfg unchanged", "[cli][clock]") {
    DaemonConfig cfg;
    REQUIRE(set_clock_options(cfg, kGapHorizonInf, WireClock::Byte, false));
    CHECK(cfg.gap_horizon_ns == kGapHorizonInf);
    CHECK(cfg.clock == WireClock::Byte);

    REQUIRE(set_clock_options(cfg, 1'000'000, WireClock::Auto, true)); // --clockless decides auto
    CHECK(cfg.gap_horizon_ns == 1'000'000);
    CHECK(cfg.clock == WireClock::None);
    REQUIRE(set_clock_options(cfg, 1'000'000, WireClock::None, true));
    CHECK(cfg.clock == WireClock::None);

    DaemonConfig before = cfg;
    auto r = set_clock_options(cfg, 50'000, WireClock::Byte, true);
    REQUIRE(!r);
    CHECK(r.exit_code() == 2);
    CHECK(r.error() == "--clockless and --clock byte: choose one clock");
    CHECK(cfg.gap_horizon_ns == before.gap_horizon_ns);
    CHECK(cfg.clock == before.clock);
}

TEST_CASE("the daemon's arguments always carry the horizon and the clock", "[cli][clock]") {
    DaemonConfig cfg;
    auto has = [](const std::vector<std::string> &a, const std::string &k, const std::string &v) {
        auto it = std::find(a.begin(), a.end(), k);
        return it != a.end() && it + 1 != a.end() && it[1] == v;
    };
    auto a = to_args(cfg);
    CHECK(has(a, "--gap-horizon", "50us"));
    CHECK(has(a, "--clock", "auto"));
    cfg.gap_horizon_ns = kGapHorizonInf;
    cfg.clock = WireClock::None;
    a = to_args(cfg);
    CHECK(has(a, "--gap-horizon", "inf"));
    CHECK(has(a, "--clock", "none"));
}
