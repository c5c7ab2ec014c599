// Filter selectors, text <-> the rules_* map keys (shared.h).
//
//   dst 192.168.2.0/24        -> rules_dst_v4     src 2001:db8::/32  -> rules_src_v6
//   proto udp dport 5001      -> rules_port       proto tcp sport 80 -> rules_port
//
// Pure functions, no syscalls: header-only so the unit tests (which link
// only pspxdp_core) can check every accepted and refused form.
#pragma once

#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace pspxdp::control {

struct Selector {
    enum class Kind { Dst, Src, Port };
    Kind kind = Kind::Dst;
    int family = 4;          // Dst/Src: 4 or 6
    uint8_t addr[16] = {};   // Dst/Src: network byte order, host bits zero
    uint32_t prefixlen = 0;  // Dst/Src
    uint8_t proto = 0;       // Port: IPPROTO_TCP / IPPROTO_UDP
    uint8_t dir = 0;         // Port: enum pspxdp_port_dir
    uint16_t port = 0;       // Port: host order, 1..65535

    // The pinned map this selector lives in.
    const char *map_name() const {
        switch (kind) {
        case Kind::Dst: return family == 4 ? "rules_dst_v4" : "rules_dst_v6";
        case Kind::Src: return family == 4 ? "rules_src_v4" : "rules_src_v6";
        case Kind::Port: return "rules_port";
        }
        return "";
    }
    pspxdp_lpm_v4 lpm_v4() const {
        pspxdp_lpm_v4 k{};
        k.prefixlen = prefixlen;
        std::memcpy(k.addr, addr, 4);
        return k;
    }
    pspxdp_lpm_v6 lpm_v6() const {
        pspxdp_lpm_v6 k{};
        k.prefixlen = prefixlen;
        std::memcpy(k.addr, addr, 16);
        return k;
    }
    pspxdp_port_key port_key() const {
        pspxdp_port_key k{};
        k.proto = proto;
        k.dir = dir;
        k.port = port;
        return k;
    }
    friend bool operator==(const Selector &a, const Selector &b) {
        if (a.kind != b.kind) return false;
        if (a.kind == Kind::Port) return a.proto == b.proto && a.dir == b.dir && a.port == b.port;
        return a.family == b.family && a.prefixlen == b.prefixlen &&
               std::memcmp(a.addr, b.addr, 16) == 0;
    }
};

// "192.168.2.0/24", "2001:db8::/32", "10.0.0.1" (a host: /32 or /128).
// Host bits below the prefix are refused, as `ip route` does: a typo there
// would otherwise silently widen or move the filter.
inline Result<Selector> parse_prefix(std::string_view text, Selector::Kind kind) {
    const std::string quoted = "\"" + std::string(text) + "\"";
    Selector s;
    s.kind = kind;
    std::string_view addr_text = text;
    std::string_view len_text;
    if (auto slash = text.find('/'); slash != std::string_view::npos) {
        addr_text = text.substr(0, slash);
        len_text = text.substr(slash + 1);
        if (len_text.empty()) return err("prefix " + quoted + ": missing length after /");
    }
    const std::string addr_str(addr_text);
    if (inet_pton(AF_INET, addr_str.c_str(), s.addr) == 1) {
        s.family = 4;
    } else if (inet_pton(AF_INET6, addr_str.c_str(), s.addr) == 1) {
        s.family = 6;
    } else {
        return err("prefix " + quoted + ": not an IPv4 or IPv6 address");
    }
    const uint32_t max_len = s.family == 4 ? 32 : 128;
    s.prefixlen = max_len;
    if (!len_text.empty()) {
        uint32_t len = 0;
        auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
        if (ec != std::errc() || end != len_text.data() + len_text.size())
            return err("prefix " + quoted + ": length is not a number");
        if (len > max_len)
            return err("prefix " + quoted + ": length " + std::to_string(len) + " > " +
                       std::to_string(max_len));
        s.prefixlen = len;
    }
    for (uint32_t bit = s.prefixlen; bit < max_len; ++bit) {
        if (s.addr[bit / 8] & (0x80u >> (bit % 8)))
            return err("prefix " + quoted + ": host bits set beyond /" +
                       std::to_string(s.prefixlen));
    }
    return s;
}

inline Result<uint16_t> parse_port(std::string_view text) {
    uint32_t port = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port == 0 ||
        port > 65535)
        return err("port \"" + std::string(text) + "\": expected 1..65535");
    return uint16_t(port);
}

// tokens: the selector words only (without "classid X").
inline Result<Selector> parse_selector(std::span<const std::string> tokens) {
    if (tokens.empty())
        return err("missing selector: dst PREFIX | src PREFIX | proto tcp|udp dport|sport PORT");
    bool have_addr = false, have_proto = false, have_port = false;
    Selector addr_sel, out;
    for (size_t i = 0; i < tokens.size(); i += 2) {
        const std::string &key = tokens[i];
        if (key != "dst" && key != "src" && key != "proto" && key != "dport" && key != "sport")
            return err("unknown selector word \"" + key + "\" (dst, src, proto, dport, sport)");
        if (i + 1 >= tokens.size()) return err("selector \"" + key + "\" needs a value");
        const std::string &value = tokens[i + 1];
        if (key == "dst" || key == "src") {
            if (have_addr) return err("only one of dst/src per filter");
            auto p = parse_prefix(value, key == "dst" ? Selector::Kind::Dst : Selector::Kind::Src);
            if (!p) return Error{p.error()};
            addr_sel = *p;
            have_addr = true;
        } else if (key == "proto") {
            if (have_proto) return err("proto given twice");
            if (value == "tcp" || value == "6") out.proto = IPPROTO_TCP;
            else if (value == "udp" || value == "17") out.proto = IPPROTO_UDP;
            else return err("proto \"" + value + "\": expected tcp or udp");
            have_proto = true;
        } else {
            if (have_port) return err("only one of dport/sport per filter");
            auto p = parse_port(value);
            if (!p) return Error{p.error()};
            out.port = *p;
            out.dir = key == "dport" ? PSPXDP_PORT_DST : PSPXDP_PORT_SRC;
            have_port = true;
        }
    }
    // The classifier matches one field per rule (shared.h): a combined
    // selector could not be honoured, so it is refused rather than narrowed.
    if (have_addr && (have_proto || have_port))
        return err("a filter matches either an address prefix or a port, not both");
    if (have_addr) return addr_sel;
    if (!have_proto) return err("port filter needs \"proto tcp|udp\"");
    if (!have_port) return err("proto filter needs \"dport PORT\" or \"sport PORT\"");
    out.kind = Selector::Kind::Port;
    return out;
}

inline std::string format_selector(const Selector &s) {
    if (s.kind == Selector::Kind::Port) {
        return std::string("proto ") + (s.proto == IPPROTO_TCP ? "tcp" : "udp") +
               (s.dir == PSPXDP_PORT_DST ? " dport " : " sport ") + std::to_string(s.port);
    }
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(s.family == 4 ? AF_INET : AF_INET6, s.addr, buf, sizeof(buf));
    return std::string(s.kind == Selector::Kind::Dst ? "dst " : "src ") + buf + "/" +
           std::to_string(s.prefixlen);
}

} // namespace pspxdp::control
