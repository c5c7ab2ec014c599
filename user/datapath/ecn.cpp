#include "datapath/ecn.hpp"

namespace pspxdp::datapath {

namespace {

constexpr uint16_t kEthIpv4 = 0x0800;
constexpr uint16_t kEthIpv6 = 0x86dd;
constexpr uint8_t kEcnMask = 0x03;
constexpr uint8_t kEcnCe = 0x03;

uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
void put_be16(uint8_t *p, uint16_t v) {
    p[0] = uint8_t(v >> 8);
    p[1] = uint8_t(v);
}
bool is_vlan(uint16_t type) { return type == 0x8100 || type == 0x88a8 || type == 0x9100; }

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), one's complement 16-bit words.
uint16_t checksum_update(uint16_t hc, uint16_t old_word, uint16_t new_word) {
    uint32_t sum = uint32_t(uint16_t(~hc)) + uint16_t(~old_word) + new_word;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(~sum);
}

EcnMark mark_field(uint8_t ecn) {
    if (ecn == 0) return EcnMark::NotEct;
    if (ecn == kEcnCe) return EcnMark::AlreadyCe;
    return EcnMark::Marked;
}

} // namespace

EcnMark mark_ce(uint8_t *frame, uint32_t len) {
    uint32_t off = 12;
    if (len < off + 2) return EcnMark::NotIp;
    uint16_t type = be16(frame + off);
    for (int tags = 0; is_vlan(type); ++tags) {
        if (tags == 2) return EcnMark::NotIp;
        off += 4;
        if (len < off + 2) return EcnMark::NotIp;
        type = be16(frame + off);
    }
    uint8_t *ip = frame + off + 2;
    uint32_t room = len - (off + 2);
    if (type == kEthIpv4) {
        if (room < 20 || (ip[0] >> 4) != 4 || (ip[0] & 0x0f) < 5) return EcnMark::NotIp;
        EcnMark m = mark_field(ip[1] & kEcnMask);
        if (m != EcnMark::Marked) return m;
        // The TOS byte is the low half of the header's first 16-bit word.
        uint16_t old_word = be16(ip);
        ip[1] |= kEcnCe;
        put_be16(ip + 10, checksum_update(be16(ip + 10), old_word, be16(ip)));
        return m;
    }
    if (type == kEthIpv6) {
        if (room < 40 || (ip[0] >> 4) != 6) return EcnMark::NotIp;
        // Traffic class: low nibble of byte 0, high nibble of byte 1; ECN is
        // its two low bits, bits 5..4 of byte 1. No header checksum.
        EcnMark m = mark_field((ip[1] >> 4) & kEcnMask);
        if (m == EcnMark::Marked) ip[1] |= kEcnCe << 4;
        return m;
    }
    return EcnMark::NotIp;
}

} // namespace pspxdp::datapath
