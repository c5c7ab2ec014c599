// Reading a capture (pcap, via libpcap) into an analyzer trace.
//
// Each packet becomes one TraceFrame: its original length on the wire (the
// pcap header's len, not the possibly truncated caplen; Linux captures carry
// no FCS, which is what TraceFrame::len means), its timestamp in ns, and a
// flow: kFlowGap for a MAC control frame (ethertype 0x8808: our PAUSE gaps),
// else the index of the first selector that matches, else kFlowOther.
//
// Selector syntax, all given fields must match (AND), any order, each once:
//   src ADDR[/LEN]   dst ADDR[/LEN]     IPv4 or IPv6, the same family for both
//   proto NAME|NUM   tcp udp sctp icmp icmp6 gre esp ah, or 0..255
//   sport PORT       dport PORT         1..65535; TCP, UDP, SCTP or UDP-Lite
// e.g. "dst 10.9.0.2 proto udp dport 5001", "src 2001:db8::/32".
// 802.1Q / 802.1ad tags are skipped; IPv6 extension headers are walked;
// ports are only read from the first fragment of a datagram.
#pragma once

#include "core/analyzer.hpp"
#include "core/result.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pspxdp {

struct AddrPrefix {
    bool set = false;
    bool v6 = false;
    std::array<uint8_t, 16> addr{}; // IPv4 in the first 4 bytes; host bits cleared
    uint8_t prefix_len = 0;
};

struct FlowSelector {
    std::string text; // as given, for reports
    AddrPrefix src, dst;
    std::optional<uint8_t> proto;
    std::optional<uint16_t> sport, dport;
};

// Errors are one line naming the selector, e.g.
// selector "dst 10.0.0.300": "10.0.0.300" is not an IPv4 or IPv6 address.
Result<FlowSelector> parse_flow_selector(std::string_view text);

// True when sel matches the Ethernet frame (caplen captured bytes). A frame
// cut too short to see a field the selector needs does not match.
bool selector_matches(const FlowSelector &sel, const uint8_t *frame, uint32_t caplen);

// The flow of one Ethernet frame: kFlowGap, a selector index, or kFlowOther.
uint32_t classify_frame(std::span<const FlowSelector> selectors, const uint8_t *frame,
                        uint32_t caplen);

struct PcapTrace {
    std::vector<TraceFrame> frames;
    uint64_t short_frames = 0;    // captured too short to read up to the L4 ports
    bool nanosecond_file = false; // the file's own resolution (times are ns either way)
    // The capture's own drop counters (pcap_stats). Savefiles carry none:
    // then available is false and note says why.
    bool drop_stats_available = false;
    uint64_t dropped_frames = 0;
    std::string drop_stats_note;
};

// Reads an Ethernet (DLT_EN10MB) pcap file. Errors are one line naming the
// file: missing or unreadable, not a capture, another link type, truncated.
Result<PcapTrace> read_pcap_trace(const std::string &path, std::span<const FlowSelector> selectors);

} // namespace pspxdp
