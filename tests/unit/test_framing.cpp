// Wire sizes and the PAUSE gap frame.
#include "core/framing.hpp"

#include <catch2/catch.hpp>

using namespace pspxdp;

namespace {
const MacAddr kMac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

std::vector<uint8_t> expected_pause(uint32_t len) {
    std::vector<uint8_t> f = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // dst
                              0x02, 0x11, 0x22, 0x33, 0x44, 0x55, // src
                              0x88, 0x08,                         // MAC control
                              0x00, 0x01,                         // opcode PAUSE
                              0x00, 0x00};                        // pause time 0
    f.resize(len, 0);
    return f;
}
} // namespace

TEST_CASE("framing sizes (docs/design.md §2)", "[framing]") {
    Framing eth;
    CHECK(eth.wire_bytes(60) == 84); // smallest frame on the wire
    CHECK(eth.wire_bytes(14) == 84); // short frames are padded
    CHECK(eth.wire_bytes(1514) == 1538);
    CHECK(eth.l2_bytes(1514) == 1518);
    CHECK(eth.l2_bytes(42) == 64);
    CHECK(eth.max_frame_len() == 1514);
    CHECK(eth.max_gap_wire_bytes() == 1538);
    CHECK(eth.min_gap_wire_bytes() == 84);
    CHECK(eth.mtu_unit_bytes() == 1518);
    Framing fig3 = Framing::didactic();
    CHECK(fig3.wire_bytes(1500) == 1500);
    CHECK(fig3.l2_bytes(1500) == 1500);
}

TEST_CASE("build_pause_frame: exact bytes", "[framing]") {
    Framing eth;
    for (uint32_t len : {60u, 61u, 1000u, 1514u}) {
        auto f = build_pause_frame(kMac, len, eth);
        INFO(len << ": " << f.error());
        REQUIRE(f.ok());
        CHECK(*f == expected_pause(len));
        CHECK(is_pause_frame(f->data(), uint32_t(f->size())));
    }
    // A larger MTU raises the upper bound.
    Framing jumbo;
    jumbo.mtu_bytes = 9000;
    auto f = build_pause_frame(kMac, 9014, jumbo);
    REQUIRE(f.ok());
    CHECK(f->size() == 9014);
}

TEST_CASE("build_pause_frame: refuses lengths out of bounds", "[framing]") {
    Framing eth;
    for (uint32_t len : {0u, 18u, 59u, 1515u, 9000u}) {
        auto f = build_pause_frame(kMac, len, eth);
        INFO(len);
        REQUIRE_FALSE(f.ok());
        CHECK(f.error() ==
              "PAUSE frame of " + std::to_string(len) + " bytes: length must be in [60, 1514]");
    }
}

TEST_CASE("is_pause_frame", "[framing]") {
    auto f = expected_pause(60);
    CHECK(is_pause_frame(f.data(), 60));
    CHECK(is_pause_frame(f.data(), 16)); // header is enough
    CHECK_FALSE(is_pause_frame(f.data(), 15));
    CHECK_FALSE(is_pause_frame(nullptr, 60));
    auto g = f;
    g[5] = 0x02; // not the MAC control address
    CHECK_FALSE(is_pause_frame(g.data(), 60));
    g = f;
    g[13] = 0x00; // IPv4 ethertype
    CHECK_FALSE(is_pause_frame(g.data(), 60));
    g = f;
    g[15] = 0x01;
    g[14] = 0x01; // PFC opcode 0x0101, not a plain PAUSE
    CHECK_FALSE(is_pause_frame(g.data(), 60));
}
