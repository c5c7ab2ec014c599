// Frame sizes on the wire (docs/design.md §2) and the PAUSE gap frame.
//
// An AF_XDP frame of length L (Ethernet header + payload, no FCS) occupies
// max(L, 60) + overhead byte times on the wire; overhead = 4 FCS + 8 preamble
// and SFD + 12 inter-frame gap = 24 for Ethernet. A class's rate counts the
// L2 size max(L, 60) + 4 (FCS included), as the original PSPacer did.
// overhead 0 and fcs 0 reproduce the paper's didactic Fig. 3 exactly.
#pragma once

#include "core/result.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace pspxdp {

inline constexpr uint32_t kEthHeaderBytes = 14;
inline constexpr uint32_t kEthMinFrameBytes = 60; // without FCS
inline constexpr uint32_t kEthFcsBytes = 4;
inline constexpr uint32_t kEthOverheadBytes = 24; // FCS + preamble/SFD + IFG
inline constexpr uint16_t kEthPPause = 0x8808;

struct Framing {
    uint32_t overhead_bytes = kEthOverheadBytes;
    uint32_t fcs_bytes = kEthFcsBytes;
    uint32_t min_frame_bytes = kEthMinFrameBytes;
    uint32_t mtu_bytes = 1500;

    // The paper's Fig. 3 arithmetic: no framing overhead at all.
    static constexpr Framing didactic() { return Framing{0, 0, kEthMinFrameBytes, 1500}; }

    constexpr uint32_t padded(uint32_t len) const { return std::max(len, min_frame_bytes); }
    // Byte times the frame occupies on the wire.
    constexpr uint32_t wire_bytes(uint32_t len) const { return padded(len) + overhead_bytes; }
    // Bytes counted against a class's rate.
    constexpr uint32_t l2_bytes(uint32_t len) const { return padded(len) + fcs_bytes; }
    // Largest frame (and gap frame) length: MTU + Ethernet header.
    constexpr uint32_t max_frame_len() const { return mtu_bytes + kEthHeaderBytes; }
    constexpr uint32_t min_gap_wire_bytes() const { return wire_bytes(min_frame_bytes); }
    constexpr uint32_t max_gap_wire_bytes() const { return wire_bytes(max_frame_len()); }
    // The unit in which burstiness is reported: the L2 size of a full frame.
    constexpr uint32_t mtu_unit_bytes() const { return l2_bytes(max_frame_len()); }
    // The highest rate one class can reach on a wire of line_rate_bps: its
    // full-size frames back to back, each counting l2_bytes against the rate
    // while it takes wire_bytes of the wire (1518/1538 of M for 1514-byte
    // frames). A paced rate above it can never be honoured.
    constexpr uint64_t class_ceiling_bps(uint64_t line_rate_bps) const {
        return uint64_t((unsigned __int128)line_rate_bps * l2_bytes(max_frame_len()) /
                        wire_bytes(max_frame_len()));
    }
};

using MacAddr = std::array<uint8_t, 6>;

// An IEEE 802.3x PAUSE frame of exactly len bytes (no FCS): dst
// 01:80:c2:00:00:01, src = the interface MAC, ethertype 0x8808, opcode 0x0001,
// pause time 0, zero padding. len must be in [60, mtu + 14]; anything else is
// refused with an error naming the bounds.
Result<std::vector<uint8_t>> build_pause_frame(const MacAddr &src_mac, uint32_t len,
                                               const Framing &framing);

// True when frame starts like a PAUSE frame built above (dst, ethertype, opcode).
bool is_pause_frame(const uint8_t *frame, uint32_t len);

} // namespace pspxdp
