// pspxdp_pacer_alive (shared.h): the one test TC's fail-open and every
// userspace reader share, at its exact boundaries. README's bound - TC
// passes traffic untouched once the last heartbeat is 100 ms old - is this
// function; the BPF test runs the same boundary in the kernel.
#include "pspxdp/shared.h"

#include <catch2/catch.hpp>

namespace {
pspxdp_pacer_state beat_at(uint64_t hb) {
    pspxdp_pacer_state st{};
    st.heartbeat_ns = hb;
    st.pacer_ifindex = 7;
    return st;
}
} // namespace

TEST_CASE("fail-open: the heartbeat timeout is exact", "[fail_open]") {
    constexpr uint64_t T = PSPXDP_HEARTBEAT_TIMEOUT_NS;
    STATIC_REQUIRE(T == 100'000'000ull); // README: 100 ms
    const uint64_t hb = 5'000'000'000ull;
    const auto st = beat_at(hb);
    CHECK(pspxdp_pacer_alive(&st, hb));
    CHECK(pspxdp_pacer_alive(&st, hb + T));           // 100 ms old: still alive
    CHECK_FALSE(pspxdp_pacer_alive(&st, hb + T + 1)); // a nanosecond more: fail-open
    CHECK(pspxdp_pacer_alive(&st, hb - T));           // a beat slightly ahead (another CPU)
    CHECK_FALSE(pspxdp_pacer_alive(&st, hb - T - 1)); // far ahead: garbage, not life
}

TEST_CASE("fail-open: no beat or no pacer is not alive", "[fail_open]") {
    const auto never = beat_at(0);
    CHECK_FALSE(pspxdp_pacer_alive(&never, 1'000'000));
    auto no_pacer = beat_at(1'000'000);
    no_pacer.pacer_ifindex = 0;
    CHECK_FALSE(pspxdp_pacer_alive(&no_pacer, 1'000'000));
}
