#include "control/filter_spec.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

namespace pspxdp::control {

namespace {

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// A decimal number 0..max, nothing else (no sign, no spaces, no hex).
std::optional<uint32_t> parse_uint(std::string_view text, uint32_t max) {
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > max)
        return std::nullopt;
    return v;
}

// "192.168.2.0/24", "2001:db8::/32", "10.0.0.1" (a host: /32 or /128).
// Host bits below the prefix are refused, as `ip route` does: a typo there
// would otherwise silently widen or move the filter.
Result<Prefix> parse_prefix(std::string_view word, std::string_view text) {
    const std::string what = std::string(word) + " " + quoted(text);
    Prefix p;
    std::string_view addr_text = text, len_text;
    const bool has_len = text.find('/') != std::string_view::npos;
    if (has_len) {
        addr_text = text.substr(0, text.find('/'));
        len_text = text.substr(text.find('/') + 1);
    }
    const std::string addr_str(addr_text);
    if (inet_pton(AF_INET, addr_str.c_str(), p.addr.data()) == 1)
        p.family = 4;
    else if (inet_pton(AF_INET6, addr_str.c_str(), p.addr.data()) == 1)
        p.family = 6;
    else
        return refuse(what + ": not an IPv4 or IPv6 address");
    const uint32_t max_len = p.family == 4 ? 32 : 128;
    p.len = uint8_t(max_len);
    if (has_len) {
        auto len = parse_uint(len_text, max_len);
        if (!len) return refuse(what + ": prefix length must be 0.." + std::to_string(max_len));
        p.len = uint8_t(*len);
    }
    for (uint32_t bit = p.len; bit < max_len; ++bit)
        if (p.addr[bit / 8] & (0x80u >> (bit % 8)))
            return refuse(what + ": host bits set beyond /" + std::to_string(p.len));
    return p;
}

Result<PortRange> parse_ports(std::string_view word, std::string_view text) {
    const std::string what = std::string(word) + " " + quoted(text);
    const size_t dash = text.find('-');
    auto lo = parse_uint(text.substr(0, dash), 65535);
    auto hi = dash == std::string_view::npos ? lo : parse_uint(text.substr(dash + 1), 65535);
    if (!lo || !hi) return refuse(what + ": expected PORT or PORT-PORT, ports 0..65535");
    if (*lo > *hi)
        return refuse(what + ": range runs backwards (" + std::to_string(*lo) + " > " +
                      std::to_string(*hi) + ")");
    return PortRange{uint16_t(*lo), uint16_t(*hi)};
}

const struct {
    const char *name;
    uint8_t number;
} kProtos[] = {
    {"icmp", IPPROTO_ICMP},       {"igmp", IPPROTO_IGMP}, {"tcp", IPPROTO_TCP},
    {"udp", IPPROTO_UDP},         {"gre", IPPROTO_GRE},   {"esp", IPPROTO_ESP},
    {"ah", IPPROTO_AH},           {"icmpv6", 58},         {"sctp", IPPROTO_SCTP},
    {"udplite", IPPROTO_UDPLITE},
};

} // namespace

std::vector<std::string_view> proto_names() {
    std::vector<std::string_view> out;
    for (const auto &p : kProtos) out.push_back(p.name);
    return out;
}

namespace {

// The protocols whose first fragments the classifier reads ports from (parse.h).
bool has_ports(uint8_t proto) {
    return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP ||
           proto == IPPROTO_UDPLITE;
}

std::string format_ports(const PortRange &r) {
    return r.min == r.max ? std::to_string(r.min)
                          : std::to_string(r.min) + "-" + std::to_string(r.max);
}

const char *const kFieldWords = "src, dst, proto, sport, dport, vlan, dscp, mark, cgroup";

// A 32-bit number, decimal or 0x hex.
std::optional<uint32_t> parse_u32(std::string_view text) {
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        text.remove_prefix(2);
        base = 16;
    }
    uint32_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return v;
}

// "0x10", "16", "0x10/0xff".
Result<MarkMatch> parse_mark(std::string_view text) {
    const std::string what = "mark " + quoted(text);
    const size_t slash = text.find('/');
    auto value = parse_u32(text.substr(0, slash));
    auto mask = slash == std::string_view::npos ? std::optional<uint32_t>(0xffffffff)
                                                : parse_u32(text.substr(slash + 1));
    if (!value || !mask)
        return refuse(what + ": expected VALUE or VALUE/MASK, 32-bit numbers (decimal or 0x hex)");
    if (!*mask) return refuse(what + ": mask 0 matches every packet (leave the mark out)");
    if (*value & ~*mask)
        return refuse(what + ": value has bits outside the mask (value & mask would never "
                             "equal it)");
    return MarkMatch{*value, *mask};
}

// "/a/b", "a/b", "/sys/fs/cgroup/unified/a/b": checked for what can be
// judged without the file system; resolve_filter_cgroup does the rest.
Result<CgroupMatch> parse_cgroup(std::string_view text) {
    const std::string what = "cgroup " + quoted(text);
    if (text.empty()) return refuse(what + ": empty path");
    if (text.size() >= PSPXDP_CGROUP_PATH_MAX)
        return refuse(what + ": longer than " + std::to_string(PSPXDP_CGROUP_PATH_MAX - 1) +
                      " bytes");
    for (char c : text)
        if (static_cast<unsigned char>(c) < 0x20)
            return refuse(what + ": control characters in the path");
    return CgroupMatch{std::string(text), 0, 0};
}

struct Parsed {
    FilterSpec spec;
    bool has_pref = false, has_classid = false;
};

constexpr std::string_view kWords[] = {"pref", "src",  "dst",  "proto",  "sport",  "dport",
                                       "vlan", "dscp", "mark", "cgroup", "classid"};

// The canonical form of a filter word ("prio" -> "pref"), or "" if it is none.
std::string_view canonical_word(std::string_view word) {
    if (word == "prio" || word == "priority" || word == "preference") return "pref";
    if (word == "flowid") return "classid";
    for (std::string_view w : kWords)
        if (word == w) return w;
    return "";
}

Result<Parsed> parse_words(std::span<const std::string> words) {
    Parsed out;
    FilterSpec &s = out.spec;
    std::map<std::string, std::string, std::less<>> seen; // canonical word -> value
    for (size_t i = 0; i < words.size(); i += 2) {
        const std::string word(canonical_word(words[i]));
        if (word.empty())
            return refuse("unknown word " + quoted(words[i]) + " (pref, " + kFieldWords +
                          ", classid)");
        if (i + 1 >= words.size()) return refuse(quoted(words[i]) + " needs a value");
        const std::string &value = words[i + 1];
        if (seen.count(word)) return refuse(quoted(words[i]) + " given twice");
        seen[word] = value;

        if (word == "pref") {
            auto p = parse_uint(value, PSPXDP_FILTER_PREF_MAX);
            if (!p || *p < PSPXDP_FILTER_PREF_MIN)
                return refuse("pref " + quoted(value) + ": expected " +
                              std::to_string(PSPXDP_FILTER_PREF_MIN) + ".." +
                              std::to_string(PSPXDP_FILTER_PREF_MAX));
            s.pref = *p;
            out.has_pref = true;
        } else if (word == "src" || word == "dst") {
            auto p = parse_prefix(word, value);
            if (!p) return p.failure();
            (word == "src" ? s.src : s.dst) = *p;
        } else if (word == "proto") {
            auto n = proto_number(value);
            if (!n) n = parse_uint(value, 255);
            if (!n)
                return refuse("proto " + quoted(value) +
                              ": expected tcp, udp, icmp, icmpv6, sctp, udplite, gre, esp, "
                              "ah, igmp or a number 0..255");
            s.proto = uint8_t(*n);
        } else if (word == "sport" || word == "dport") {
            auto r = parse_ports(word, value);
            if (!r) return r.failure();
            (word == "sport" ? s.sport : s.dport) = *r;
        } else if (word == "vlan") {
            auto v = parse_uint(value, 4095);
            if (!v) return refuse("vlan " + quoted(value) + ": expected a VLAN id 0..4095");
            s.vlan = uint16_t(*v);
        } else if (word == "dscp") {
            auto v = parse_uint(value, 63);
            if (!v) return refuse("dscp " + quoted(value) + ": expected 0..63");
            s.dscp = uint8_t(*v);
        } else if (word == "mark") {
            auto m = parse_mark(value);
            if (!m) return m.failure();
            s.mark = *m;
        } else if (word == "cgroup") {
            auto c = parse_cgroup(value);
            if (!c) return c.failure();
            s.cgroup = *c;
        } else { // classid
            auto id = parse_classid(value);
            if (!id) return refuse(id.error());
            s.classid = *id;
            out.has_classid = true;
        }
    }
    // Combinations that could never match: refused rather than kept as dead filters.
    if (s.src && s.dst && s.src->family != s.dst->family)
        return refuse("dst " + quoted(seen["dst"]) + " is IPv" + std::to_string(s.dst->family) +
                      " but src " + quoted(seen["src"]) + " is IPv" +
                      std::to_string(s.src->family) + ": one family per filter");
    if (s.proto && s.family() == 6 && *s.proto == IPPROTO_ICMP)
        return refuse("proto " + quoted(seen["proto"]) +
                      ": ICMP for IPv4, but the addresses are IPv6 (use icmpv6)");
    if (s.proto && s.family() == 4 && *s.proto == 58)
        return refuse("proto " + quoted(seen["proto"]) +
                      ": ICMPv6, but the addresses are IPv4 (use icmp)");
    if (s.proto && !has_ports(*s.proto) && (s.sport || s.dport)) {
        const char *word = s.sport ? "sport" : "dport";
        return refuse(std::string(word) + " " + quoted(seen[word]) + ": proto " +
                      quoted(seen["proto"]) + " has no ports (tcp, udp, sctp, udplite do)");
    }
    return out;
}

std::string format_words(const FilterSpec &s, bool pref, bool fields, bool classid) {
    std::string out;
    auto add = [&](const char *word, const std::string &value) {
        out += (out.empty() ? "" : " ") + std::string(word) + " " + value;
    };
    if (pref) add("pref", std::to_string(s.pref));
    if (fields) {
        if (s.src) add("src", format_prefix(*s.src));
        if (s.dst) add("dst", format_prefix(*s.dst));
        if (s.proto) add("proto", proto_name(*s.proto));
        if (s.sport) add("sport", format_ports(*s.sport));
        if (s.dport) add("dport", format_ports(*s.dport));
        if (s.vlan) add("vlan", std::to_string(*s.vlan));
        if (s.dscp) add("dscp", std::to_string(*s.dscp));
        if (s.mark) add("mark", format_mark(*s.mark));
        if (s.cgroup) add("cgroup", s.cgroup->path);
    }
    if (classid) add("classid", format_classid(s.classid));
    return out;
}

bool same_fields(const FilterSpec &a, const FilterSpec &b) {
    return a.src == b.src && a.dst == b.dst && a.proto == b.proto && a.sport == b.sport &&
           a.dport == b.dport && a.vlan == b.vlan && a.dscp == b.dscp && a.mark == b.mark &&
           (a.cgroup ? b.cgroup && a.cgroup->path == b.cgroup->path : !b.cgroup);
}

// Top `len` bits of a 16-byte address.
void prefix_mask(uint8_t *mask, unsigned len) {
    for (unsigned i = 0; i < 16; ++i) {
        const unsigned bits = len > 8 * i ? std::min(8u, len - 8 * i) : 0;
        mask[i] = uint8_t(0xff00u >> bits);
    }
}

uint16_t port_mask(unsigned plen) { return uint16_t(0xffff0000u >> plen); }

} // namespace

std::string format_prefix(const Prefix &p) {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(p.family == 4 ? AF_INET : AF_INET6, p.addr.data(), buf, sizeof(buf));
    return std::string(buf) + "/" + std::to_string(p.len);
}

std::string format_mark(const MarkMatch &m) {
    char buf[32];
    if (m.mask == 0xffffffff)
        std::snprintf(buf, sizeof buf, "0x%x", m.value);
    else
        std::snprintf(buf, sizeof buf, "0x%x/0x%x", m.value, m.mask);
    return buf;
}

uint16_t FilterSpec::fields() const {
    return uint16_t((src ? PSPXDP_FF_SRC : 0) | (dst ? PSPXDP_FF_DST : 0) |
                    (proto ? PSPXDP_FF_PROTO : 0) | (sport ? PSPXDP_FF_SPORT : 0) |
                    (dport ? PSPXDP_FF_DPORT : 0) | (vlan ? PSPXDP_FF_VLAN : 0) |
                    (dscp ? PSPXDP_FF_DSCP : 0) | (mark ? PSPXDP_FF_MARK : 0) |
                    (cgroup ? PSPXDP_FF_CGROUP : 0));
}

bool same_identity(const FilterSpec &a, const FilterSpec &b) {
    return a.pref == b.pref && same_fields(a, b);
}

std::optional<uint8_t> proto_number(std::string_view name) {
    for (const auto &p : kProtos)
        if (name == p.name) return p.number;
    return std::nullopt;
}

std::string proto_name(uint8_t proto) {
    for (const auto &p : kProtos)
        if (proto == p.number) return p.name;
    return std::to_string(proto);
}

Result<FilterSpec> parse_filter(std::span<const std::string> words) {
    auto p = parse_words(words);
    if (!p) return p.failure();
    if (!p->spec.fields())
        return refuse(std::string("a filter needs at least one of ") + kFieldWords +
                      " (unmatched traffic goes to the default class: pspxdp default)");
    if (!p->has_classid) return refuse("missing \"classid X:Y\": the class the filter sends to");
    return p->spec;
}

std::vector<std::string> split_words(std::string_view line) {
    std::vector<std::string> out;
    size_t pos = 0;
    while ((pos = line.find_first_not_of(" \t\r\n", pos)) != std::string_view::npos) {
        const size_t end = std::min(line.find_first_of(" \t\r\n", pos), line.size());
        out.emplace_back(line.substr(pos, end - pos));
        pos = end;
    }
    return out;
}

bool is_filter_word(std::string_view word) { return !canonical_word(word).empty(); }

std::span<const std::string_view> filter_words() { return kWords; }

std::string format_filter(const FilterSpec &spec) { return format_words(spec, true, true, true); }

Result<FilterSelect> parse_filter_select(std::span<const std::string> words) {
    auto p = parse_words(words);
    if (!p) return p.failure();
    FilterSelect sel;
    sel.spec = p->spec;
    sel.has_fields = p->spec.fields() != 0;
    sel.has_pref = p->has_pref;
    sel.has_classid = p->has_classid;
    if (!sel.has_fields && !sel.has_pref)
        return refuse("which filter? give its words (" + std::string(kFieldWords) + ") or pref N");
    return sel;
}

bool FilterSelect::selects(const FilterSpec &f) const {
    if (has_fields && !same_fields(spec, f)) return false;
    if (has_pref && spec.pref != f.pref) return false;
    if (has_classid && !(spec.classid == f.classid)) return false;
    return true;
}

std::string FilterSelect::text() const {
    return format_words(spec, has_pref, has_fields, has_classid);
}

std::vector<PortBlock> port_blocks(PortRange r) {
    std::vector<PortBlock> out;
    uint32_t lo = r.min;
    const uint32_t hi = r.max;
    while (lo <= hi) {
        // The largest block aligned at lo that stays inside the range.
        unsigned k = 0;
        while (k < 16 && (lo & ((2u << k) - 1)) == 0 && lo + (2u << k) - 1 <= hi) ++k;
        out.push_back(PortBlock{uint16_t(lo), uint8_t(16 - k)});
        lo += 1u << k;
    }
    return out;
}

pspxdp_filter to_map_value(const StoredFilter &f) {
    const FilterSpec &s = f.spec;
    pspxdp_filter v{};
    v.pref = s.pref;
    v.classid = pspxdp_classid_of(s.classid.raw());
    v.seq = f.seq;
    v.family = uint8_t(s.family());
    v.fields = s.fields();
    if (s.src) {
        v.src_plen = s.src->len;
        std::memcpy(v.src, s.src->addr.data(), 16);
    }
    if (s.dst) {
        v.dst_plen = s.dst->len;
        std::memcpy(v.dst, s.dst->addr.data(), 16);
    }
    v.proto = s.proto.value_or(0);
    v.dscp = s.dscp.value_or(0);
    v.vlan = s.vlan.value_or(0);
    if (s.sport) v.sport_min = s.sport->min, v.sport_max = s.sport->max;
    if (s.dport) v.dport_min = s.dport->min, v.dport_max = s.dport->max;
    if (s.mark) v.mark = s.mark->value, v.mark_mask = s.mark->mask;
    if (s.cgroup) {
        v.cgroup_id = s.cgroup->id;
        v.cgroup_level = s.cgroup->level;
        std::snprintf(v.cgroup_path, sizeof v.cgroup_path, "%s", s.cgroup->path.c_str());
    }
    return v;
}

Result<StoredFilter> from_map_value(uint32_t id, const pspxdp_filter &v) {
    auto bad = [&](const char *what) {
        return err("filters: entry " + std::to_string(id) + " is not a pspxdp filter (" + what +
                   "); detach and attach again");
    };
    constexpr unsigned all = PSPXDP_FF_SRC | PSPXDP_FF_DST | PSPXDP_FF_PROTO | PSPXDP_FF_SPORT |
                             PSPXDP_FF_DPORT | PSPXDP_FF_VLAN | PSPXDP_FF_DSCP | PSPXDP_FF_MARK |
                             PSPXDP_FF_CGROUP;
    const bool addr = v.fields & (PSPXDP_FF_SRC | PSPXDP_FF_DST);
    if (!v.fields || (v.fields & ~all)) return bad("fields");
    if (addr ? (v.family != 4 && v.family != 6) : v.family != 0) return bad("family");
    if (v.pref < PSPXDP_FILTER_PREF_MIN || v.pref > PSPXDP_FILTER_PREF_MAX) return bad("pref");
    if (v.seq >> PSPXDP_FILTER_SEQ_BITS) return bad("seq");
    const unsigned max_len = v.family == 6 ? 128 : 32;
    if (v.src_plen > max_len || v.dst_plen > max_len) return bad("prefix length");
    if (v.vlan > 4095 || v.dscp > 63) return bad("vlan or dscp");
    if (v.sport_min > v.sport_max || v.dport_min > v.dport_max) return bad("port range");
    if ((v.fields & PSPXDP_FF_MARK) && (!v.mark_mask || (v.mark & ~v.mark_mask)))
        return bad("mark");
    const size_t path_len = strnlen(v.cgroup_path, sizeof v.cgroup_path);
    if ((v.fields & PSPXDP_FF_CGROUP) &&
        (!v.cgroup_id || path_len == sizeof v.cgroup_path || v.cgroup_path[0] != '/'))
        return bad("cgroup");

    StoredFilter f;
    f.id = id;
    f.seq = v.seq;
    FilterSpec &s = f.spec;
    s.pref = v.pref;
    s.classid = ClassId::from_raw(pspxdp_classid_raw(v.classid));
    auto prefix = [&](const uint8_t *a, uint8_t len) {
        Prefix p;
        p.family = v.family;
        p.len = len;
        std::memcpy(p.addr.data(), a, 16);
        // Keep the stored form canonical: no bits beyond the prefix.
        uint8_t mask[16];
        prefix_mask(mask, len);
        for (int i = 0; i < 16; ++i) p.addr[i] &= mask[i];
        return p;
    };
    if (v.fields & PSPXDP_FF_SRC) s.src = prefix(v.src, v.src_plen);
    if (v.fields & PSPXDP_FF_DST) s.dst = prefix(v.dst, v.dst_plen);
    if (v.fields & PSPXDP_FF_PROTO) s.proto = v.proto;
    if (v.fields & PSPXDP_FF_SPORT) s.sport = PortRange{v.sport_min, v.sport_max};
    if (v.fields & PSPXDP_FF_DPORT) s.dport = PortRange{v.dport_min, v.dport_max};
    if (v.fields & PSPXDP_FF_VLAN) s.vlan = v.vlan;
    if (v.fields & PSPXDP_FF_DSCP) s.dscp = v.dscp;
    if (v.fields & PSPXDP_FF_MARK) s.mark = MarkMatch{v.mark, v.mark_mask};
    if (v.fields & PSPXDP_FF_CGROUP)
        s.cgroup = CgroupMatch{std::string(v.cgroup_path, path_len), v.cgroup_id, v.cgroup_level};
    return f;
}

size_t KeyBytesHash::operator()(const KeyBytes &k) const noexcept {
    return std::hash<std::string_view>()(
        std::string_view(reinterpret_cast<const char *>(k.data()), k.size()));
}

KeyBytes key_bytes(const pspxdp_filter_key &k) {
    KeyBytes b;
    std::memcpy(b.data(), &k, sizeof(k));
    return b;
}

pspxdp_filter_key key_of(const KeyBytes &b) {
    pspxdp_filter_key k;
    std::memcpy(&k, b.data(), sizeof(k));
    return k;
}

pspxdp_filter_key shape_mask(const pspxdp_filter_shape &shape) {
    pspxdp_filter_key m{};
    m.shape = shape;
    if (shape.fields & PSPXDP_FF_SRC) prefix_mask(m.src, shape.src_plen);
    if (shape.fields & PSPXDP_FF_DST) prefix_mask(m.dst, shape.dst_plen);
    if (shape.fields & PSPXDP_FF_SPORT) m.sport = port_mask(shape.sport_plen);
    if (shape.fields & PSPXDP_FF_DPORT) m.dport = port_mask(shape.dport_plen);
    if (shape.fields & PSPXDP_FF_VLAN) m.vlan = 0x0fff;
    if (shape.fields & PSPXDP_FF_PROTO) m.proto = 0xff;
    if (shape.fields & PSPXDP_FF_DSCP) m.dscp = 0x3f;
    if (shape.fields & PSPXDP_FF_MARK) m.mark = shape.mark_mask;
    if (shape.fields & PSPXDP_FF_CGROUP) m.cgroup_id = ~0ull;
    return m;
}

static std::vector<PortBlock> blocks_or_any(const std::optional<PortRange> &r) {
    return r ? port_blocks(*r) : std::vector<PortBlock>{PortBlock{0, 0}};
}

size_t entry_count(const FilterSpec &spec) {
    return blocks_or_any(spec.sport).size() * blocks_or_any(spec.dport).size();
}

std::vector<std::pair<pspxdp_filter_key, pspxdp_filter_entry>> expand(const StoredFilter &f) {
    const FilterSpec &s = f.spec;
    pspxdp_filter_key base{};
    base.shape.family = uint8_t(s.family());
    base.shape.fields = s.fields();
    if (s.src) {
        base.shape.src_plen = s.src->len;
        std::memcpy(base.src, s.src->addr.data(), 16);
    }
    if (s.dst) {
        base.shape.dst_plen = s.dst->len;
        std::memcpy(base.dst, s.dst->addr.data(), 16);
    }
    base.proto = s.proto.value_or(0);
    base.vlan = s.vlan.value_or(0);
    base.dscp = s.dscp.value_or(0);
    if (s.mark) {
        base.shape.mark_mask = s.mark->mask;
        base.mark = s.mark->value;
    }
    if (s.cgroup) {
        base.shape.cgroup_level = s.cgroup->level;
        base.cgroup_id = s.cgroup->id;
    }

    pspxdp_filter_entry value{};
    value.order = f.order();
    value.classid = pspxdp_classid_of(s.classid.raw());
    value.filter_id = f.id;

    std::vector<std::pair<pspxdp_filter_key, pspxdp_filter_entry>> out;
    for (const PortBlock &sb : blocks_or_any(s.sport)) {
        for (const PortBlock &db : blocks_or_any(s.dport)) {
            pspxdp_filter_key k = base;
            k.shape.sport_plen = sb.plen;
            k.sport = sb.value;
            k.shape.dport_plen = db.plen;
            k.dport = db.value;
            out.emplace_back(k, value);
        }
    }
    return out;
}

EntryMap build_entries(std::span<const StoredFilter> filters) {
    EntryMap out;
    for (const StoredFilter &f : filters) {
        for (const auto &[k, v] : expand(f)) {
            auto [it, inserted] = out.try_emplace(key_bytes(k), v);
            if (!inserted && v.order < it->second.order) it->second = v;
        }
    }
    return out;
}

std::vector<pspxdp_filter_shape_slot> shape_table(const EntryMap &entries) {
    using ShapeBytes = std::array<uint8_t, sizeof(pspxdp_filter_shape)>;
    std::map<ShapeBytes, pspxdp_filter_shape_slot> by_shape; // shape bytes -> slot
    for (const auto &[kb, v] : entries) {
        const pspxdp_filter_key k = key_of(kb);
        ShapeBytes id;
        std::memcpy(id.data(), &k.shape, sizeof(id));
        auto [it, inserted] = by_shape.try_emplace(id);
        if (inserted) {
            it->second.mask = shape_mask(k.shape);
            it->second.best_order = v.order;
        } else {
            it->second.best_order = std::min(it->second.best_order, v.order);
        }
    }
    std::vector<pspxdp_filter_shape_slot> out;
    out.reserve(by_shape.size());
    for (const auto &[id, slot] : by_shape) out.push_back(slot);
    // The walk stops at the first shape that cannot beat its best match so
    // far: that needs ascending best orders. (Orders are unique per filter;
    // stable_sort keeps equal ones in shape order, for a deterministic table.)
    std::stable_sort(out.begin(), out.end(),
                     [](const auto &a, const auto &b) { return a.best_order < b.best_order; });
    return out;
}

bool prefix_has(const Prefix &p, int family, const uint8_t *addr) {
    if (p.family != family) return false;
    for (unsigned bit = 0; bit < p.len; ++bit) {
        unsigned byte = bit / 8, mask = 0x80u >> (bit % 8);
        if ((p.addr[byte] & mask) != (addr[byte] & mask)) return false;
    }
    return true;
}

uint32_t class_for_tcp(std::span<const FilterSpec> filters, uint32_t default_classid, int family,
                       const uint8_t *src, const uint8_t *dst, uint16_t dport) {
    for (const auto &f : filters) {
        if (f.sport || f.vlan || (f.dscp && *f.dscp != 0)) continue;
        if (f.proto && *f.proto != IPPROTO_TCP) continue;
        if (f.dport && (dport < f.dport->min || dport > f.dport->max)) continue;
        if (f.dst && !prefix_has(*f.dst, family, dst)) continue;
        if (f.src && !prefix_has(*f.src, family, src)) continue;
        return f.classid.raw();
    }
    return default_classid;
}

} // namespace pspxdp::control
