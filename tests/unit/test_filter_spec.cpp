// Filters as words and as entries (user/control/filter_spec.hpp): parsing,
// refusals, the canonical text, and the expansion into tuple-space entries.
#include <catch2/catch.hpp>

#include "control/filter_spec.hpp"

#include <netinet/in.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace pspxdp::control;

namespace {

pspxdp::Result<FilterSpec> parse(const std::string &text) {
    return parse_filter(split_words(text));
}

FilterSpec spec(const std::string &text) {
    auto s = parse(text);
    INFO(text << ": " << s.error());
    REQUIRE(s);
    return *s;
}

// The reference cover: walk the binary trie of 16-bit ports; a node inside
// the range is one block, a node partly inside is split. This is the minimal
// set of aligned blocks, computed differently from port_blocks().
void trie_cover(uint32_t base, unsigned plen, PortRange r, std::vector<PortBlock> &out) {
    const uint32_t last = base + (1u << (16 - plen)) - 1;
    if (last < r.min || base > r.max) return;
    if (base >= r.min && last <= r.max) {
        out.push_back(PortBlock{uint16_t(base), uint8_t(plen)});
        return;
    }
    trie_cover(base, plen + 1, r, out);
    trie_cover(base + (1u << (16 - plen - 1)), plen + 1, r, out);
}

} // namespace

TEST_CASE("filter words: canonical text round-trips exactly", "[control][filter]") {
    for (const char *text : {
             "pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1",
             "pref 49152 src 2001:db8::/32 proto tcp dport 443 classid 1:a",
             "pref 1 src 10.0.0.0/8 dst 192.168.0.1/32 proto tcp sport 1024-65535 dport 22 "
             "vlan 100 dscp 46 classid ffff:ffff",
             "pref 65535 vlan 0 classid 1:2",
             "pref 7 dscp 0 classid 1:2",
             "pref 7 proto 47 classid 1:2",
             "pref 7 proto icmpv6 dst ::/0 classid 1:2",
             "pref 7 src 0.0.0.0/0 classid 1:2",
             "pref 7 sport 0-65535 classid 1:2",
             "pref 7 dport 0 classid 1:2",
             "pref 3 proto sctp dport 9899 classid 2:1",
             "pref 4 mark 0x10 classid 1:1",
             "pref 4 mark 0x200/0xf00 classid 1:1",
             "pref 4 proto tcp dport 873 cgroup /system.slice/backup.service classid 1:1",
             "pref 4 dst 10.0.0.0/8 mark 0x1/0x1 cgroup / classid 1:1",
         }) {
        const FilterSpec s = spec(text);
        const std::string out = format_filter(s);
        CHECK(spec(out) == s);
        CHECK(format_filter(spec(out)) == out);
    }
    CHECK(format_filter(spec("pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1")) ==
          "pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1");
}

TEST_CASE("filter words: any order, aliases, defaults", "[control][filter]") {
    const FilterSpec a = spec("classid 1:1 dport 80 proto 6 dst 10.0.0.1 prio 5");
    CHECK(format_filter(a) == "pref 5 dst 10.0.0.1/32 proto tcp dport 80 classid 1:1");
    CHECK(a.family() == 4);
    CHECK(a.fields() == (PSPXDP_FF_DST | PSPXDP_FF_PROTO | PSPXDP_FF_DPORT));
    const FilterSpec b = spec("flowid 1:2 src fe80::1");
    CHECK(b.pref == PSPXDP_FILTER_PREF_DEFAULT); // omitted: 49152
    CHECK(format_filter(b) == "pref 49152 src fe80::1/128 classid 1:2");
    CHECK(b.family() == 6);
    CHECK(spec("vlan 5 classid 1:1").family() == 0); // no address: both families and non-IP
    CHECK(format_filter(spec("dport 5000-5000 classid 1:1")) ==
          "pref 49152 dport 5000 classid 1:1");
    CHECK(spec("preference 9 dscp 1 classid 1:1").pref == 9);
}

TEST_CASE("filter words: refused input names the word, exit code 2", "[control][filter]") {
    struct Bad {
        const char *words;
        const char *needle;
    };
    const Bad bad[] = {
        {"", "at least one of"},
        {"classid 1:1", "at least one of"},
        {"dst 10.0.0.0/8", "missing \"classid"},
        {"dst", "\"dst\" needs a value"},
        {"dst 10.0.0.0/8 classid", "\"classid\" needs a value"},
        {"via 10.0.0.1 classid 1:1", "unknown word \"via\""},
        {"dst 10.0.0.0/8 dst 10.0.0.0/8 classid 1:1", "\"dst\" given twice"},
        {"pref 1 prio 2 dst 10.0.0.0/8 classid 1:1", "\"prio\" given twice"},
        {"dst 192.168.2.1/24 classid 1:1", "dst \"192.168.2.1/24\": host bits set beyond /24"},
        {"src 2001:db8::1/32 classid 1:1", "src \"2001:db8::1/32\": host bits"},
        {"dst 192.168.2.0/33 classid 1:1", "prefix length must be 0..32"},
        {"dst 2001:db8::/129 classid 1:1", "prefix length must be 0..128"},
        {"dst 192.168.2.0/ classid 1:1", "prefix length"},
        {"dst 192.168.2.0/2x classid 1:1", "prefix length"},
        {"dst 192.168.300.0/24 classid 1:1", "dst \"192.168.300.0/24\": not an IPv4 or IPv6"},
        {"dst eth0 classid 1:1", "not an IPv4 or IPv6"},
        {"src 10.0.0.0/8 dst 2001:db8::/32 classid 1:1", "one family per filter"},
        {"dport 65536 classid 1:1", "dport \"65536\": expected PORT or PORT-PORT"},
        {"dport -1 classid 1:1", "dport \"-1\""},
        {"sport 80x classid 1:1", "sport \"80x\""},
        {"dport 5099-5000 classid 1:1", "dport \"5099-5000\": range runs backwards"},
        {"dport 1- classid 1:1", "dport \"1-\""},
        {"dport -5 classid 1:1", "dport \"-5\""},
        {"dport 1-2-3 classid 1:1", "dport \"1-2-3\""},
        {"proto icmp dport 1 classid 1:1", "dport \"1\": proto \"icmp\" has no ports"},
        {"proto 47 sport 1 classid 1:1", "proto \"47\" has no ports"},
        {"proto foo classid 1:1", "proto \"foo\": expected tcp"},
        {"proto 256 classid 1:1", "proto \"256\""},
        {"proto icmp dst 2001:db8::/32 classid 1:1", "use icmpv6"},
        {"proto icmpv6 src 10.0.0.0/8 classid 1:1", "use icmp"},
        {"vlan 4096 classid 1:1", "vlan \"4096\": expected a VLAN id 0..4095"},
        {"vlan x classid 1:1", "vlan \"x\""},
        {"dscp 64 classid 1:1", "dscp \"64\": expected 0..63"},
        {"dscp 0x2e classid 1:1", "dscp \"0x2e\""},
        {"pref 0 dst 10.0.0.0/8 classid 1:1", "pref \"0\": expected 1..65535"},
        {"pref 65536 dst 10.0.0.0/8 classid 1:1", "pref \"65536\""},
        {"pref +5 dst 10.0.0.0/8 classid 1:1", "pref \"+5\""},
        {"dst 10.0.0.0/8 classid 1", "class id \"1\""},
        {"dst 10.0.0.0/8 classid 1:10000", "class id \"1:10000\""},
        {"mark x1 classid 1:1", "mark \"x1\": expected VALUE or VALUE/MASK"},
        {"mark 0x classid 1:1", "mark \"0x\""},
        {"mark -1 classid 1:1", "mark \"-1\""},
        {"mark 4294967296 classid 1:1", "mark \"4294967296\""},
        {"mark 1/0 classid 1:1", "mask 0 matches every packet"},
        {"mark 0x11/0xf0 classid 1:1", "value has bits outside the mask"},
        {"mark 1/ classid 1:1", "mark \"1/\""},
        {"cgroup classid 1:1", "unknown word \"1:1\""},
    };
    for (const Bad &b : bad) {
        auto r = parse(b.words);
        INFO("words: " << b.words);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error(), Catch::Contains(b.needle));
        CHECK(r.exit_code() == 2);
        CHECK(r.error().find('\n') == std::string::npos);
    }
}

TEST_CASE("filter del words: fields, pref, classid", "[control][filter]") {
    const FilterSpec a = spec("pref 10 dst 10.0.0.0/8 classid 1:1");
    const FilterSpec b = spec("pref 20 dst 10.0.0.0/8 classid 1:2");
    const FilterSpec c = spec("pref 10 proto udp classid 1:1");
    auto sel = [](const std::string &t) {
        auto s = parse_filter_select(split_words(t));
        INFO(t << ": " << s.error());
        REQUIRE(s);
        return *s;
    };
    auto fields = sel("dst 10.0.0.0/8");
    CHECK(fields.selects(a));
    CHECK(fields.selects(b));
    CHECK_FALSE(fields.selects(c));
    CHECK(fields.text() == "dst 10.0.0.0/8");
    auto exact = sel("pref 20 dst 10.0.0.0/8 classid 1:2"); // a show line
    CHECK_FALSE(exact.selects(a));
    CHECK(exact.selects(b));
    auto wrong_class = sel("pref 20 dst 10.0.0.0/8 classid 1:1");
    CHECK_FALSE(wrong_class.selects(b));
    auto by_pref = sel("pref 10");
    CHECK(by_pref.selects(a));
    CHECK(by_pref.selects(c));
    CHECK_FALSE(by_pref.selects(b));
    CHECK(by_pref.text() == "pref 10");

    auto none = parse_filter_select(split_words(""));
    REQUIRE_FALSE(none);
    CHECK(none.exit_code() == 2);
    auto only_class = parse_filter_select(split_words("classid 1:1"));
    REQUIRE_FALSE(only_class);
    auto bad = parse_filter_select(split_words("dst 10.0.0.1/8"));
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error(), Catch::Contains("host bits"));
}

TEST_CASE("identity: fields and pref, not the class", "[control][filter]") {
    CHECK(same_identity(spec("pref 5 dport 80 classid 1:1"), spec("pref 5 dport 80 classid 1:2")));
    CHECK_FALSE(
        same_identity(spec("pref 5 dport 80 classid 1:1"), spec("pref 6 dport 80 classid 1:1")));
    CHECK_FALSE(same_identity(spec("dport 80 classid 1:1"), spec("dport 80-81 classid 1:1")));
    CHECK_FALSE(same_identity(spec("dport 80 classid 1:1"), spec("sport 80 classid 1:1")));
}

TEST_CASE("port ranges: the minimal aligned blocks", "[control][filter]") {
    CHECK(port_blocks({80, 80}) == std::vector<PortBlock>{{80, 16}});
    CHECK(port_blocks({0, 65535}) == std::vector<PortBlock>{{0, 0}});
    CHECK(
        port_blocks({1024, 65535}) ==
        std::vector<PortBlock>{{1024, 6}, {2048, 5}, {4096, 4}, {8192, 3}, {16384, 2}, {32768, 1}});
    // 5000-5099: 5000-5007, 5008-5023, 5024-5055, 5056-5087, 5088-5095, 5096-5099.
    CHECK(port_blocks({5000, 5099}) ==
          std::vector<PortBlock>{
              {5000, 13}, {5008, 12}, {5024, 11}, {5056, 11}, {5088, 13}, {5096, 14}});
    CHECK(port_blocks({1, 65534}).size() == 30); // the worst case: 2 * 16 - 2
    CHECK(port_blocks({65535, 65535}) == std::vector<PortBlock>{{65535, 16}});

    // Against the trie cover on edge and random ranges: the same blocks, and
    // they cover exactly the range.
    std::mt19937 rng(20051111);
    std::vector<PortRange> ranges = {{0, 0},     {0, 1},     {1, 2},
                                     {0, 65534}, {1, 65535}, {32767, 32768}};
    for (int i = 0; i < 3000; ++i) {
        uint16_t a = uint16_t(rng()), b = uint16_t(rng());
        if (i % 3 == 0) b = uint16_t(a + rng() % 300); // short ranges too
        ranges.push_back({std::min(a, b), std::max(a, b)});
    }
    for (const PortRange &r : ranges) {
        INFO("range " << r.min << "-" << r.max);
        const auto blocks = port_blocks(r);
        std::vector<PortBlock> ref;
        trie_cover(0, 0, r, ref);
        CHECK(blocks == ref);
        uint32_t next = r.min;
        for (const PortBlock &b : blocks) {
            CHECK(b.value == next);                              // contiguous, ascending
            CHECK((b.value & ((1u << (16 - b.plen)) - 1)) == 0); // aligned
            next = uint32_t(b.value) + (1u << (16 - b.plen));
        }
        CHECK(next == uint32_t(r.max) + 1);
    }
}

TEST_CASE("expansion: entries, shapes and masks", "[control][filter]") {
    StoredFilter f{
        3, 7, spec("pref 10 dst 10.1.2.0/24 proto udp sport 80-81 dport 5000-5099 classid 1:1")};
    const auto entries = expand(f);
    REQUIRE(entries.size() == 1 * 6); // sport: one block of 2 ports; dport: 6 blocks
    CHECK(entry_count(f.spec) == entries.size());
    std::set<std::pair<int, int>> shapes;
    for (const auto &[k, v] : entries) {
        CHECK(k.shape.family == 4);
        CHECK(k.shape.fields ==
              (PSPXDP_FF_DST | PSPXDP_FF_PROTO | PSPXDP_FF_SPORT | PSPXDP_FF_DPORT));
        CHECK(k.shape.dst_plen == 24);
        CHECK(k.shape.src_plen == 0);
        CHECK(k.shape.sport_plen == 15);
        CHECK(k.dst[0] == 10);
        CHECK(k.dst[2] == 2);
        CHECK(k.dst[3] == 0);
        CHECK(k.proto == IPPROTO_UDP);
        CHECK(k.vlan == 0);
        CHECK(v.order == PSPXDP_FILTER_ORDER(10, 7));
        CHECK(v.filter_id == 3);
        CHECK(pspxdp_classid_raw(v.classid) == PSPXDP_CLASSID(1, 1));
        shapes.insert({k.shape.sport_plen, k.shape.dport_plen});
        // The mask keeps what the entry matches and clears the rest.
        const pspxdp_filter_key m = shape_mask(k.shape);
        CHECK(std::memcmp(&m.shape, &k.shape, sizeof(k.shape)) == 0);
        CHECK(m.dst[2] == 0xff);
        CHECK(m.dst[3] == 0);
        CHECK(m.src[0] == 0);
        CHECK(m.proto == 0xff);
        CHECK(m.dscp == 0);
        CHECK(m.vlan == 0);
        CHECK(m.dport == uint16_t(0xffff0000u >> k.shape.dport_plen));
        for (uint32_t port = 4990; port < 5110; ++port) {
            const bool in_block = (port & m.dport) == k.dport;
            if (in_block) CHECK((port >= 5000 && port <= 5099));
        }
    }
    CHECK(shapes.size() == 4); // dport blocks of 8, 16, 32, 4 ports

    // A shape table: one slot per shape, ascending best order.
    StoredFilter g{
        4, 1, spec("pref 5 dst 10.1.2.0/24 proto udp sport 80-81 dport 5000-5007 classid 1:2")};
    StoredFilter h{5, 2, spec("pref 20 vlan 7 classid 1:3")};
    const std::vector<StoredFilter> all = {f, g, h};
    const EntryMap map = build_entries(all);
    // g's only entry has f's key for 5000-5007: the lower order (g) holds it.
    CHECK(map.size() == entries.size() + 1);
    for (const auto &[kb, v] : map) {
        const pspxdp_filter_key k = key_of(kb);
        if (k.dport == 5000 && k.shape.dport_plen == 13) CHECK(v.filter_id == 4);
    }
    const auto table = shape_table(map);
    REQUIRE(table.size() == 5);
    CHECK(table[0].best_order == PSPXDP_FILTER_ORDER(5, 1));
    for (size_t i = 1; i < table.size(); ++i) CHECK(table[i - 1].best_order <= table[i].best_order);
    CHECK(table.back().best_order == PSPXDP_FILTER_ORDER(20, 2));
    CHECK(table.back().mask.vlan == 0x0fff);
}

TEST_CASE("stored form: round trip and refusal of foreign values", "[control][filter]") {
    for (const char *text : {"pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1",
                             "pref 1 src 2001:db8::/32 dst 2001:db8:1::/48 sport 1-2 vlan 4095 "
                             "dscp 63 classid 2:3",
                             "pref 2 vlan 0 classid 1:1", "pref 2 mark 0x5/0xff classid 1:1",
                             "pref 2 proto udp mark 7 cgroup /a/b classid 1:1"}) {
        StoredFilter f{9, 12345, spec(text)};
        if (f.spec.cgroup) f.spec.cgroup->id = 4711, f.spec.cgroup->level = 2; // as resolved
        const pspxdp_filter v = to_map_value(f);
        auto back = from_map_value(9, v);
        REQUIRE(back);
        CHECK(back->spec == f.spec);
        CHECK(back->seq == 12345);
        CHECK(back->id == 9);
    }
    pspxdp_filter v = to_map_value(StoredFilter{1, 1, spec("dst 10.0.0.0/8 classid 1:1")});
    pspxdp_filter w = v;
    w.fields = 0;
    CHECK_FALSE(from_map_value(1, w));
    w = v;
    w.family = 6;
    w.dst_plen = 200;
    CHECK_FALSE(from_map_value(1, w));
    w = v;
    w.pref = 0;
    CHECK_FALSE(from_map_value(1, w));
    w = v;
    w.fields |= PSPXDP_FF_DPORT;
    w.dport_min = 9;
    w.dport_max = 8;
    CHECK_FALSE(from_map_value(1, w));
    w = v;
    w.fields |= PSPXDP_FF_MARK;
    w.mark = 3, w.mark_mask = 1; // bits outside the mask
    CHECK_FALSE(from_map_value(1, w));
    w = v;
    w.fields |= PSPXDP_FF_CGROUP; // no id, no path
    CHECK_FALSE(from_map_value(1, w));
    w.cgroup_id = 5;
    std::memset(w.cgroup_path, 'a', sizeof w.cgroup_path); // not NUL-ended
    CHECK_FALSE(from_map_value(1, w));
}

TEST_CASE("expansion: a mark mask and a cgroup level are shapes", "[control][filter]") {
    std::vector<StoredFilter> fs = {{0, 1, spec("pref 1 mark 0x10 classid 1:1")},
                                    {1, 2, spec("pref 1 mark 0x20 classid 1:2")},
                                    {2, 3, spec("pref 1 mark 0x200/0xf00 classid 1:3")},
                                    {3, 4, spec("pref 1 cgroup /a classid 1:4")},
                                    {4, 5, spec("pref 1 cgroup /b classid 1:5")},
                                    {5, 6, spec("pref 1 cgroup /a/c classid 1:6")}};
    fs[3].spec.cgroup->id = 100, fs[3].spec.cgroup->level = 1;
    fs[4].spec.cgroup->id = 101, fs[4].spec.cgroup->level = 1;
    fs[5].spec.cgroup->id = 102, fs[5].spec.cgroup->level = 2;
    const EntryMap entries = build_entries(fs);
    CHECK(entries.size() == 6);
    const auto table = shape_table(entries);
    // Two mark masks, two cgroup levels: four shapes for six filters.
    REQUIRE(table.size() == 4);
    for (const auto &slot : table) {
        if (slot.mask.shape.fields == PSPXDP_FF_MARK)
            CHECK(slot.mask.mark == slot.mask.shape.mark_mask);
        else {
            CHECK(slot.mask.shape.fields == PSPXDP_FF_CGROUP);
            CHECK(slot.mask.cgroup_id == ~0ull);
            CHECK((slot.mask.shape.cgroup_level == 1 || slot.mask.shape.cgroup_level == 2));
        }
    }
    const auto e = expand(fs[2]);
    REQUIRE(e.size() == 1);
    CHECK(e[0].first.mark == 0x200);
    CHECK(e[0].first.shape.mark_mask == 0xf00);
    CHECK(expand(fs[5])[0].first.cgroup_id == 102);
}
