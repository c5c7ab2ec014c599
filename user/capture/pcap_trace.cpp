// Capture files into analyzer traces. See pcap_trace.hpp.
#include "capture/pcap_trace.hpp"

#include <arpa/inet.h>
#include <pcap/pcap.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace pspxdp {

namespace {

constexpr uint16_t kEthPVlan = 0x8100;
constexpr uint16_t kEthPQinQ = 0x88a8;
constexpr uint16_t kEthPVlanOld = 0x9100; // pre-802.1ad QinQ, still seen
constexpr uint16_t kEthPIpv4 = 0x0800;
constexpr uint16_t kEthPIpv6 = 0x86dd;

constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoSctp = 132;
constexpr uint8_t kProtoUdpLite = 136;

bool has_ports(uint8_t proto) {
    return proto == kProtoTcp || proto == kProtoUdp || proto == kProtoSctp ||
           proto == kProtoUdpLite;
}

uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

// What a selector can look at, read once per frame.
struct PacketFields {
    bool ip = false;
    bool v6 = false;
    std::array<uint8_t, 16> src{}, dst{};
    bool proto_known = false;
    uint8_t proto = 0;
    bool ports_known = false;
    uint16_t sport = 0, dport = 0;
    bool cut_short = false; // caplen ended before the headers we wanted
};

PacketFields parse_fields(const uint8_t *frame, uint32_t caplen) {
    PacketFields f;
    if (caplen < 14) {
        f.cut_short = true;
        return f;
    }
    uint32_t off = 12;
    uint16_t type = be16(frame + off);
    while (type == kEthPVlan || type == kEthPQinQ || type == kEthPVlanOld) {
        if (off + 6 > caplen) {
            f.cut_short = true;
            return f;
        }
        off += 4;
        type = be16(frame + off);
    }
    off += 2;
    const uint8_t *p = frame + off;
    uint32_t left = caplen - off;
    uint32_t l4 = 0;
    bool first_fragment = true;

    if (type == kEthPIpv4) {
        if (left < 20 || (p[0] >> 4) != 4) {
            f.cut_short = left < 20;
            return f;
        }
        uint32_t ihl = uint32_t(p[0] & 0x0f) * 4;
        if (ihl < 20) return f;
        f.ip = true;
        std::memcpy(f.src.data(), p + 12, 4);
        std::memcpy(f.dst.data(), p + 16, 4);
        f.proto = p[9];
        f.proto_known = true;
        first_fragment = (be16(p + 6) & 0x1fff) == 0;
        l4 = ihl;
    } else if (type == kEthPIpv6) {
        if (left < 40 || (p[0] >> 4) != 6) {
            f.cut_short = left < 40;
            return f;
        }
        f.ip = true;
        f.v6 = true;
        std::memcpy(f.src.data(), p + 8, 16);
        std::memcpy(f.dst.data(), p + 24, 16);
        uint8_t next = p[6];
        l4 = 40;
        // Walk extension headers to the upper-layer protocol. Bounded, so a
        // crafted chain cannot make us loop.
        for (int hops = 0; hops < 16; ++hops) {
            uint32_t hdr_len;
            if (next == 0 || next == 43 || next == 60) { // hop-by-hop, routing, dst options
                if (l4 + 2 > left) {
                    f.cut_short = true;
                    return f;
                }
                hdr_len = (uint32_t(p[l4 + 1]) + 1) * 8;
            } else if (next == 44) { // fragment
                if (l4 + 8 > left) {
                    f.cut_short = true;
                    return f;
                }
                first_fragment = (be16(p + l4 + 2) & 0xfff8) == 0;
                hdr_len = 8;
            } else if (next == 51) { // AH
                if (l4 + 2 > left) {
                    f.cut_short = true;
                    return f;
                }
                hdr_len = (uint32_t(p[l4 + 1]) + 2) * 4;
            } else {
                break;
            }
            next = p[l4];
            l4 += hdr_len;
        }
        f.proto = next;
        f.proto_known = true;
    } else {
        return f; // not IP: ARP, LLDP, ...
    }

    if (has_ports(f.proto) && first_fragment) {
        if (l4 + 4 <= left) {
            f.sport = be16(p + l4);
            f.dport = be16(p + l4 + 2);
            f.ports_known = true;
        } else {
            f.cut_short = true;
        }
    }
    return f;
}

bool prefix_matches(const AddrPrefix &pfx, const PacketFields &f,
                    const std::array<uint8_t, 16> &addr) {
    if (!pfx.set) return true;
    if (!f.ip || f.v6 != pfx.v6) return false;
    uint32_t full = pfx.prefix_len / 8, rest = pfx.prefix_len % 8;
    if (std::memcmp(addr.data(), pfx.addr.data(), full) != 0) return false;
    if (rest) {
        uint8_t mask = uint8_t(0xff << (8 - rest));
        if ((addr[full] & mask) != pfx.addr[full]) return false;
    }
    return true;
}

bool fields_match(const FlowSelector &sel, const PacketFields &f) {
    if (!f.ip) return false; // every selector names at least one IP-level field
    if (!prefix_matches(sel.src, f, f.src) || !prefix_matches(sel.dst, f, f.dst)) return false;
    if (sel.proto && (!f.proto_known || f.proto != *sel.proto)) return false;
    if (sel.sport || sel.dport) {
        if (!f.ports_known) return false;
        if (sel.sport && f.sport != *sel.sport) return false;
        if (sel.dport && f.dport != *sel.dport) return false;
    }
    return true;
}

bool is_mac_control(const uint8_t *frame, uint32_t caplen) {
    return caplen >= 14 && be16(frame + 12) == kEthPPause;
}

struct ProtoName {
    const char *name;
    uint8_t number;
};
constexpr ProtoName kProtoNames[] = {
    {"tcp", kProtoTcp}, {"udp", kProtoUdp}, {"sctp", kProtoSctp}, {"udplite", kProtoUdpLite},
    {"icmp", 1},        {"icmp6", 58},      {"ipv6-icmp", 58},    {"gre", 47},
    {"esp", 50},        {"ah", 51},
};

bool parse_uint(std::string_view s, uint32_t max, uint32_t &out) {
    if (s.empty() || s.size() > 10) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (!std::isdigit(static_cast<unsigned char>(c))) return false;
        v = v * 10 + uint64_t(c - '0');
    }
    if (v > max) return false;
    out = uint32_t(v);
    return true;
}

Result<AddrPrefix> parse_prefix(std::string_view text) {
    AddrPrefix p;
    p.set = true;
    std::string addr(text.substr(0, text.find('/')));
    if (inet_pton(AF_INET, addr.c_str(), p.addr.data()) == 1) {
        p.v6 = false;
    } else if (inet_pton(AF_INET6, addr.c_str(), p.addr.data()) == 1) {
        p.v6 = true;
    } else {
        return err("\"" + addr + "\" is not an IPv4 or IPv6 address");
    }
    uint32_t max_len = p.v6 ? 128 : 32;
    uint32_t len = max_len;
    if (auto slash = text.find('/'); slash != std::string_view::npos) {
        if (!parse_uint(text.substr(slash + 1), max_len, len))
            return err("\"" + std::string(text) + "\": prefix length must be 0.." +
                       std::to_string(max_len));
    }
    p.prefix_len = uint8_t(len);
    // Clear host bits so matching is a plain compare ("10.0.0.1/24" means
    // the 10.0.0.0/24 network, as iptables reads it).
    for (uint32_t bit = len; bit < max_len; ++bit)
        p.addr[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
    return p;
}

std::string strip_path_prefix(std::string msg, const std::string &path) {
    // libpcap often says "PATH: No such file or directory"; we name the
    // file ourselves, once.
    if (msg.starts_with(path + ": ")) msg.erase(0, path.size() + 2);
    return msg;
}

bool file_is_nanosecond_pcap(const std::string &path) {
    std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) return false;
    uint8_t magic[4];
    if (std::fread(magic, 1, 4, f.get()) != 4) return false;
    static constexpr uint8_t kNanoBe[4] = {0xa1, 0xb2, 0x3c, 0x4d};
    static constexpr uint8_t kNanoLe[4] = {0x4d, 0x3c, 0xb2, 0xa1};
    return std::memcmp(magic, kNanoBe, 4) == 0 || std::memcmp(magic, kNanoLe, 4) == 0;
}

} // namespace

Result<FlowSelector> parse_flow_selector(std::string_view text) {
    FlowSelector sel;
    sel.text = std::string(text);
    auto bad = [&](const std::string &why) {
        return err("selector \"" + std::string(text) + "\": " + why);
    };
    std::vector<std::string_view> words;
    for (size_t i = 0; i < text.size();) {
        if (std::isspace(static_cast<unsigned char>(text[i]))) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
        words.push_back(text.substr(i, j - i));
        i = j;
    }
    if (words.empty()) return bad("empty (expected e.g. \"dst 10.0.0.2 proto udp dport 5001\")");

    for (size_t i = 0; i < words.size(); i += 2) {
        std::string key(words[i]);
        for (char &c : key) c = char(std::tolower(static_cast<unsigned char>(c)));
        if (key != "src" && key != "dst" && key != "proto" && key != "sport" && key != "dport")
            return bad("unknown keyword \"" + std::string(words[i]) +
                       "\" (expected src, dst, proto, sport or dport)");
        if (i + 1 >= words.size()) return bad("\"" + key + "\" needs a value");
        std::string_view value = words[i + 1];
        auto twice = [&] { return bad("\"" + key + "\" given twice"); };
        if (key == "src" || key == "dst") {
            AddrPrefix &slot = key == "src" ? sel.src : sel.dst;
            if (slot.set) return twice();
            auto p = parse_prefix(value);
            if (!p) return bad(p.error());
            slot = *p;
        } else if (key == "proto") {
            if (sel.proto) return twice();
            std::string name(value);
            for (char &c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
            for (const auto &pn : kProtoNames)
                if (name == pn.name) sel.proto = pn.number;
            uint32_t number;
            if (!sel.proto && parse_uint(value, 255, number)) sel.proto = uint8_t(number);
            if (!sel.proto)
                return bad("unknown protocol \"" + std::string(value) +
                           "\" (tcp, udp, sctp, udplite, icmp, icmp6, gre, esp, ah or 0..255)");
        } else {
            auto &slot = key == "sport" ? sel.sport : sel.dport;
            if (slot) return twice();
            uint32_t port;
            if (!parse_uint(value, 65535, port) || port == 0)
                return bad("port \"" + std::string(value) + "\" must be 1..65535");
            slot = uint16_t(port);
        }
    }
    if (sel.src.set && sel.dst.set && sel.src.v6 != sel.dst.v6)
        return bad("src and dst are of different address families");
    if ((sel.sport || sel.dport) && sel.proto && !has_ports(*sel.proto))
        return bad("ports need proto tcp, udp, sctp or udplite");
    return sel;
}

bool selector_matches(const FlowSelector &sel, const uint8_t *frame, uint32_t caplen) {
    return fields_match(sel, parse_fields(frame, caplen));
}

namespace {

// The first selector a frame matches, fast with thousands of selectors: the
// ones that name only a protocol and a destination port (one flow per port,
// as a lab with 10,000 classes has) are found by hash; the others are tried
// in order. The first match overall wins, as with a plain walk.
class SelectorIndex {
  public:
    explicit SelectorIndex(std::span<const FlowSelector> selectors) : selectors_(selectors) {
        for (size_t i = 0; i < selectors.size(); ++i) {
            const FlowSelector &s = selectors[i];
            if (s.proto && s.dport && !s.sport && !s.src.set && !s.dst.set)
                by_port_.emplace(key(*s.proto, *s.dport), uint32_t(i)); // keeps the first
            else
                others_.push_back(uint32_t(i));
        }
    }
    uint32_t match(const PacketFields &f) const {
        uint32_t best = kFlowOther;
        if (f.ip && f.proto_known && f.ports_known && !by_port_.empty()) {
            auto it = by_port_.find(key(f.proto, f.dport));
            if (it != by_port_.end()) best = it->second;
        }
        for (uint32_t i : others_) {
            if (i >= best) break;
            if (fields_match(selectors_[i], f)) return i;
        }
        return best;
    }

  private:
    static uint32_t key(uint8_t proto, uint16_t port) { return uint32_t(proto) << 16 | port; }
    std::span<const FlowSelector> selectors_;
    std::unordered_map<uint32_t, uint32_t> by_port_;
    std::vector<uint32_t> others_;
};

} // namespace

uint32_t classify_frame(std::span<const FlowSelector> selectors, const uint8_t *frame,
                        uint32_t caplen) {
    if (is_mac_control(frame, caplen)) return kFlowGap;
    if (selectors.empty()) return kFlowOther;
    return SelectorIndex(selectors).match(parse_fields(frame, caplen));
}

Result<PcapTrace> read_pcap_trace(const std::string &path,
                                  std::span<const FlowSelector> selectors) {
    char errbuf[PCAP_ERRBUF_SIZE] = {};
    // Ask for nanoseconds: libpcap scales microsecond files up, so one code
    // path serves both and nanosecond captures keep their resolution.
    std::unique_ptr<pcap_t, void (*)(pcap_t *)> pcap(
        pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, errbuf),
        pcap_close);
    if (!pcap) return err("cannot read \"" + path + "\": " + strip_path_prefix(errbuf, path));
    int link = pcap_datalink(pcap.get());
    if (link != DLT_EN10MB) {
        const char *name = pcap_datalink_val_to_name(link);
        return err("\"" + path + "\": link type " + (name ? name : std::to_string(link)) +
                   " is not Ethernet (capture on the device itself, not on \"any\")");
    }

    PcapTrace trace;
    trace.nanosecond_file = file_is_nanosecond_pcap(path);
    const bool selectors_need_headers = !selectors.empty();
    const SelectorIndex index(selectors);
    pcap_pkthdr *hdr = nullptr;
    const u_char *data = nullptr;
    int rc;
    while ((rc = pcap_next_ex(pcap.get(), &hdr, &data)) == 1) {
        TraceFrame f;
        f.len = hdr->len;
        f.time_ns = uint64_t(hdr->ts.tv_sec) * 1'000'000'000ull + uint64_t(hdr->ts.tv_usec);
        if (is_mac_control(data, hdr->caplen)) {
            f.flow = kFlowGap;
        } else {
            PacketFields fields = parse_fields(data, hdr->caplen);
            if (fields.cut_short && selectors_need_headers) ++trace.short_frames;
            f.flow = selectors.empty() ? kFlowOther : index.match(fields);
        }
        trace.frames.push_back(f);
    }
    if (rc == PCAP_ERROR)
        return err("\"" + path + "\": after " + std::to_string(trace.frames.size()) +
                   " packets: " + strip_path_prefix(pcap_geterr(pcap.get()), path));

    pcap_stat stats{};
    if (pcap_stats(pcap.get(), &stats) == 0) {
        trace.drop_stats_available = true;
        trace.dropped_frames = uint64_t(stats.ps_drop) + stats.ps_ifdrop;
    } else {
        // A savefile records no drop counters: the capturing tcpdump printed
        // them when it stopped, and only there.
        trace.drop_stats_note = pcap_geterr(pcap.get());
        if (trace.drop_stats_note.empty()) trace.drop_stats_note = "not available";
    }
    return trace;
}

} // namespace pspxdp
