// ECN congestion marking of a frame in place (RFC 3168): the pacer's back
// pressure for a TCP flow faster than its class. A frame joining a backlog
// longer than its class's CE threshold gets CE (11) when it is ECN-capable
// (ECT(0) 10 or ECT(1) 01); a frame that is not ECN-capable is left alone
// (its class limit drops it instead).
//
// Ethernet with up to two VLAN tags (802.1Q, 802.1ad, the old 0x9100), then
// IPv4 or IPv6. IPv4's header checksum is updated incrementally (RFC 1624,
// eqn. 3), so a correct checksum stays correct and a wrong one stays wrong;
// TCP/UDP checksums do not cover the ECN bits. A header the function cannot
// see whole is left untouched.
#pragma once

#include <cstdint>

namespace pspxdp::datapath {

enum class EcnMark : uint8_t {
    NotIp,     // not IPv4/IPv6, or a truncated/garbled header: untouched
    NotEct,    // not ECN-capable: untouched
    Marked,    // ECT(0)/ECT(1) -> CE
    AlreadyCe, // CE already set upstream: untouched
};

EcnMark mark_ce(uint8_t *frame, uint32_t len);

} // namespace pspxdp::datapath
