// Filter semantics through the real classifier (BPF_PROG_TEST_RUN): fixture
// tables of packets x filter sets -> expected class, and a randomized
// comparison of the tuple-space matcher with a direct reading of the rules.
//
// The winner is read from filter_stats (the counters of the filter that
// decided), so these tests do not depend on the hand-over: the pacer is dead
// (heartbeat 0) and every packet passes after being classified.
#include "classifier.skel.h"
#include "common/cgroup.hpp"
#include "common/paths.hpp"
#include "control/filter.hpp"
#include "fixture.hpp"
#include "pspxdp/shared.h"

#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

using namespace psptest;
using namespace pspxdp::control;

namespace {

constexpr const char *kDefault = "default";

class Matcher {
  public:
    Matcher() {
        require_root_or_skip();
        skel_ = classifier_bpf::open();
        REQUIRE(skel_);
        skel_->rodata->test_mode = true; // cb[1]: the class decided (decide())
        int rc = classifier_bpf::load(skel_);
        if (rc) classifier_bpf::destroy(skel_);
        REQUIRE(rc == 0);
        maps_.filters = bpf_map__fd(skel_->maps.filters);
        maps_.entries = bpf_map__fd(skel_->maps.filter_entries);
        maps_.shapes = bpf_map__fd(skel_->maps.filter_shapes);
        maps_.state = bpf_map__fd(skel_->maps.filter_state);
        maps_.stats = bpf_map__fd(skel_->maps.filter_stats);
        // Pacer dead: classify, count, pass. Default class 1:ffff.
        pspxdp_pacer_state st{};
        st.default_classid = pspxdp_classid_of(PSPXDP_CLASSID(1, 0xffff));
        uint32_t key = 0;
        REQUIRE(bpf_map_update_elem(bpf_map__fd(skel_->maps.pacer_state), &key, &st, BPF_ANY) == 0);
    }
    ~Matcher() { classifier_bpf::destroy(skel_); }
    Matcher(const Matcher &) = delete;
    Matcher &operator=(const Matcher &) = delete;

    static FilterSpec spec(const std::string &line) {
        auto s = parse_filter(split_words(line));
        INFO(line << ": " << s.error());
        REQUIRE(s);
        return *s;
    }
    void set(const std::vector<std::string> &lines) {
        std::vector<FilterSpec> specs;
        for (const auto &l : lines) specs.push_back(spec(l));
        auto r = replace_filters(maps_, specs);
        INFO(r.error());
        REQUIRE(r);
    }
    void add(const std::string &line) {
        auto r = add_filter(maps_, spec(line));
        INFO(r.error());
        REQUIRE(r);
    }
    void del(const std::string &words) {
        auto sel = parse_filter_select(split_words(words));
        REQUIRE(sel);
        auto r = delete_filters(maps_, *sel);
        INFO(r.error());
        REQUIRE(r);
    }

    // The class of the filter that decided, or "default"; checks that one
    // filter at most counted the packet, with its bytes.
    std::string classify(const Bytes &pkt) {
        auto before = read_filter_infos(maps_, true);
        REQUIRE(before);
        __sk_buff ctx{};
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt.data(),
                    .data_size_in = uint32_t(pkt.size()), .ctx_in = &ctx,
                    .ctx_size_in = sizeof(ctx), .repeat = 1);
        int rc = bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.pspxdp_classify), &opts);
        INFO("test_run: " << std::strerror(errno));
        REQUIRE(rc == 0);
        CHECK(opts.retval == TC_ACT_OK); // the pacer is dead: passed
        auto after = read_filter_infos(maps_, true);
        REQUIRE(after);
        REQUIRE(after->size() == before->size());
        std::string winner = kDefault;
        int winners = 0;
        for (size_t i = 0; i < after->size(); ++i) {
            const auto &a = (*after)[i].stats, &b = (*before)[i].stats;
            if (a.matched_packets == b.matched_packets) continue;
            ++winners;
            CHECK(a.matched_packets == b.matched_packets + 1);
            CHECK(a.matched_skb_bytes == b.matched_skb_bytes + pkt.size());
            winner = pspxdp::format_classid((*after)[i].filter.spec.classid);
        }
        CHECK(winners <= 1);
        return winner;
    }

    // The class the classifier decided (cb[1] in test mode), with skb->mark
    // and skb->priority set: prio-direct and the default class count too.
    std::string decide(const Bytes &pkt, uint32_t mark, uint32_t priority = 0) {
        __sk_buff ctx{};
        ctx.mark = mark;
        ctx.priority = priority;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt.data(),
                    .data_size_in = uint32_t(pkt.size()), .ctx_in = &ctx, .ctx_out = &ctx,
                    .ctx_size_in = sizeof(ctx), .ctx_size_out = sizeof(ctx), .repeat = 1);
        int rc = bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.pspxdp_classify), &opts);
        INFO("test_run: " << std::strerror(errno));
        REQUIRE(rc == 0);
        return pspxdp::format_classid(pspxdp::ClassId::from_raw(ctx.cb[1]));
    }
    // Classes in class_config (what prio-direct looks up).
    void classes(std::initializer_list<uint32_t> ids) {
        uint32_t slot = 0;
        for (uint32_t id : ids) {
            pspxdp_class_config cfg{};
            cfg.kind = PSPXDP_CLASS_NORMAL;
            cfg.slot = ++slot; // as the control plane gives them out
            REQUIRE(bpf_map_update_elem(bpf_map__fd(skel_->maps.class_config), &id, &cfg,
                                        BPF_ANY) == 0);
        }
    }
    void pacer_flags(uint32_t flags) {
        pspxdp_pacer_state st{};
        uint32_t key = 0;
        const int fd = bpf_map__fd(skel_->maps.pacer_state);
        REQUIRE(bpf_map_lookup_elem(fd, &key, &st) == 0);
        st.flags = flags;
        REQUIRE(bpf_map_update_elem(fd, &key, &st, BPF_ANY) == 0);
    }

    const FilterMaps &maps() const { return maps_; }
    classifier_bpf *skel_ = nullptr;

  private:
    FilterMaps maps_;
};

struct Case {
    const char *what;
    Bytes pkt;
    const char *expect; // class id or "default"
};

void run_cases(Matcher &m, const std::vector<Case> &cases) {
    for (const Case &c : cases) {
        INFO("packet: " << c.what);
        CHECK(m.classify(c.pkt) == c.expect);
    }
}

Bytes udp4(const char *src, const char *dst, uint16_t sport, uint16_t dport, uint8_t tos = 0) {
    V4 h;
    h.src = src;
    h.dst = dst;
    h.tos = tos;
    return cat(eth(ETH_P_IP), ipv4(h, udp(sport, dport)));
}
Bytes tcp4(const char *src, const char *dst, uint16_t sport, uint16_t dport) {
    V4 h;
    h.src = src;
    h.dst = dst;
    h.proto = IPPROTO_TCP;
    return cat(eth(ETH_P_IP), ipv4(h, tcp(sport, dport)));
}
Bytes proto4(uint8_t proto, const char *dst = "8.8.8.8") {
    V4 h;
    h.dst = dst;
    h.proto = proto;
    return cat(eth(ETH_P_IP), ipv4(h, udp(40000, 5001))); // payload that looks like ports
}
Bytes l4v6(uint8_t nh, const Bytes &l4, const char *src = "2001:dba::1",
           const char *dst = "2001:dbb::1", uint8_t tclass = 0) {
    return cat(eth(ETH_P_IPV6), ipv6(nh, src, dst, l4, 6, tclass));
}
// SCTP's common header is 12 bytes and starts with the ports, like UDP's.
Bytes sctp(uint16_t sport, uint16_t dport) { return udp(sport, dport, 8); }
Bytes arp_tagged(uint16_t vid) {
    Bytes b = eth(ETH_P_ARP, {ETH_P_8021Q}, vid);
    b.resize(b.size() + 28, 0);
    return b;
}

} // namespace

TEST_CASE("filters: every field alone", "[bpf][filters]") {
    Matcher m;
    m.set({
        "pref 10 src 10.1.0.0/16 classid 1:1",
        "pref 10 dst 192.168.7.0/24 classid 1:2",
        "pref 10 src 2001:db8:a::/48 classid 1:3",
        "pref 10 dst 2001:db8:b::/48 classid 1:4",
        "pref 10 proto gre classid 1:5",
        "pref 10 sport 7777 classid 1:6",
        "pref 10 dport 8888 classid 1:7",
        "pref 10 vlan 42 classid 1:8",
        "pref 10 dscp 46 classid 1:9",
    });
    V4 tagged;
    run_cases(
        m,
        {
            {"v4 src in 10.1/16", udp4("10.1.2.3", "8.8.8.8", 1, 2), "1:1"},
            {"v4 src outside", udp4("10.2.0.1", "8.8.8.8", 1, 2), kDefault},
            {"v4 dst in 192.168.7/24", udp4("1.1.1.1", "192.168.7.9", 1, 2), "1:2"},
            {"v4 dst outside", udp4("1.1.1.1", "192.168.8.1", 1, 2), kDefault},
            {"v6 src in 2001:db8:a::/48", l4v6(IPPROTO_UDP, udp(1, 2), "2001:db8:a:1::5"), "1:3"},
            {"v6 dst in 2001:db8:b::/48",
             l4v6(IPPROTO_UDP, udp(1, 2), "fd00::1", "2001:db8:b:ffff::1"), "1:4"},
            {"v6 dst just outside", l4v6(IPPROTO_UDP, udp(1, 2), "fd00::1", "2001:db8:c::1"),
             kDefault},
            {"v4 GRE", proto4(IPPROTO_GRE), "1:5"},
            {"v6 GRE (no address: both families)", l4v6(IPPROTO_GRE, udp(1, 2)), "1:5"},
            {"udp sport 7777", udp4("1.1.1.1", "8.8.8.8", 7777, 1), "1:6"},
            {"tcp sport 7777", tcp4("1.1.1.1", "8.8.8.8", 7777, 1), "1:6"},
            {"v6 udp dport 8888", l4v6(IPPROTO_UDP, udp(1, 8888)), "1:7"},
            {"v6 sctp dport 8888", l4v6(IPPROTO_SCTP, sctp(1, 8888)), "1:7"},
            {"udp dport 8889", udp4("1.1.1.1", "8.8.8.8", 1, 8889), kDefault},
            {"vlan 42", cat(eth(ETH_P_IP, {ETH_P_8021Q}, 42), ipv4(tagged, udp(1, 2))), "1:8"},
            {"vlan 43", cat(eth(ETH_P_IP, {ETH_P_8021Q}, 43), ipv4(tagged, udp(1, 2))), kDefault},
            {"ARP on vlan 42 (non-IP: the tag alone)", arp_tagged(42), "1:8"},
            {"dscp 46 (EF)", udp4("1.1.1.1", "8.8.8.8", 1, 2, 46 << 2), "1:9"},
            {"dscp 46 with ECN CE", udp4("1.1.1.1", "8.8.8.8", 1, 2, 46 << 2 | 3), "1:9"},
            {"dscp 45", udp4("1.1.1.1", "8.8.8.8", 1, 2, 45 << 2), kDefault},
            {"v6 traffic class dscp 46",
             l4v6(IPPROTO_UDP, udp(1, 2), "2001:dba::1", "2001:dbb::1", 46 << 2 | 1), "1:9"},
            {"nothing", udp4("1.1.1.1", "8.8.8.8", 1, 2), kDefault},
        });
}

TEST_CASE("filters: conjunctions and port ranges at their edges", "[bpf][filters]") {
    Matcher m;
    m.set({
        "pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1",
        "pref 20 src 2001:db8::/32 proto tcp dport 443 classid 1:2",
        "pref 30 proto udp sport 1024-65535 dport 53 classid 1:3",
        "pref 40 dport 0-65535 classid 1:4",
    });
    run_cases(
        m,
        {
            {"all three fields, low edge", udp4("1.1.1.1", "10.1.2.3", 9, 5000), "1:1"},
            {"all three fields, high edge", udp4("1.1.1.1", "10.1.2.3", 9, 5099), "1:1"},
            {"one below the range", udp4("1.1.1.1", "10.1.2.3", 9, 4999), "1:4"},
            {"one above the range", udp4("1.1.1.1", "10.1.2.3", 9, 5100), "1:4"},
            {"inside, every block", udp4("1.1.1.1", "10.1.2.255", 9, 5060), "1:1"},
            {"tcp, not udp", tcp4("1.1.1.1", "10.1.2.3", 9, 5000), "1:4"},
            {"dst outside", udp4("1.1.1.1", "10.1.3.3", 9, 5000), "1:4"},
            {"v6 tcp 443 from 2001:db8::/32", l4v6(IPPROTO_TCP, tcp(9, 443), "2001:db8::1"), "1:2"},
            {"v6 udp 443", l4v6(IPPROTO_UDP, udp(9, 443), "2001:db8::1"), "1:4"},
            {"v6 tcp 443 from outside", l4v6(IPPROTO_TCP, tcp(9, 443), "2001:db9::1"), "1:4"},
            {"sport 1024 dport 53", udp4("1.1.1.1", "8.8.8.8", 1024, 53), "1:3"},
            {"sport 65535 dport 53", udp4("1.1.1.1", "8.8.8.8", 65535, 53), "1:3"},
            {"sport 1023 dport 53", udp4("1.1.1.1", "8.8.8.8", 1023, 53), "1:4"},
            {"port 0", udp4("1.1.1.1", "8.8.8.8", 0, 0), "1:4"},
            {"ICMP has no ports", proto4(IPPROTO_ICMP), kDefault},
        });
}

TEST_CASE("filters: lowest pref wins, equal prefs: the one added first", "[bpf][filters]") {
    Matcher m;
    m.add("pref 100 dst 10.0.0.0/8 classid 1:1");
    m.add("pref 50 dst 10.1.0.0/16 classid 1:2");
    m.add("pref 100 dport 80 classid 1:3");
    m.add("pref 200 dst 10.1.1.0/24 classid 1:4");
    m.add("dst 172.16.0.0/12 classid 1:5"); // pref 49152
    m.add("dport 443 classid 1:6");         // pref 49152, added later
    m.add("pref 49153 src 0.0.0.0/0 classid 1:7");
    run_cases(
        m,
        {
            {"pref 50 beats 100 and 200", udp4("9.9.9.9", "10.1.1.1", 1, 80), "1:2"},
            {"tie at 100: dst added before dport", udp4("9.9.9.9", "10.2.0.1", 1, 80), "1:1"},
            {"dport 80 alone", udp4("9.9.9.9", "8.8.8.8", 1, 80), "1:3"},
            {"tie at the default pref: first added", udp4("9.9.9.9", "172.16.0.1", 1, 443), "1:5"},
            {"dport 443 alone", udp4("9.9.9.9", "8.8.8.8", 1, 443), "1:6"},
            {"after the default pref", udp4("9.9.9.9", "8.8.8.8", 1, 1), "1:7"},
            {"v6: src 0.0.0.0/0 is IPv4 only", l4v6(IPPROTO_UDP, udp(1, 1)), kDefault},
        });
    SECTION("deleting the first of a tie lets the next win; re-added, it comes last") {
        m.del("pref 100 dst 10.0.0.0/8");
        CHECK(m.classify(udp4("9.9.9.9", "10.2.0.1", 1, 80)) == "1:3");
        m.add("pref 100 dst 10.0.0.0/8 classid 1:1");
        CHECK(m.classify(udp4("9.9.9.9", "10.2.0.1", 1, 80)) == "1:3");
        CHECK(m.classify(udp4("9.9.9.9", "10.2.0.1", 1, 81)) == "1:1");
    }
    SECTION("two filters with the same key: the lower pref holds it until deleted") {
        m.add("pref 60 dst 10.1.0.0/16 classid 1:8");
        CHECK(m.classify(udp4("9.9.9.9", "10.1.7.7", 1, 2)) == "1:2");
        m.del("pref 50 dst 10.1.0.0/16");
        CHECK(m.classify(udp4("9.9.9.9", "10.1.7.7", 1, 2)) == "1:8");
        m.del("pref 60");
        CHECK(m.classify(udp4("9.9.9.9", "10.1.7.7", 1, 2)) == "1:1");
    }
    SECTION("list order decides ties when the filters are replaced") {
        m.set({"pref 5 dport 80 classid 1:3", "pref 5 dst 10.0.0.0/8 classid 1:1"});
        CHECK(m.classify(udp4("9.9.9.9", "10.2.0.1", 1, 80)) == "1:3");
        m.set({"pref 5 dst 10.0.0.0/8 classid 1:1", "pref 5 dport 80 classid 1:3"});
        CHECK(m.classify(udp4("9.9.9.9", "10.2.0.1", 1, 80)) == "1:1");
    }
}

TEST_CASE("filters: fragments", "[bpf][filters]") {
    Matcher m;
    m.set({
        "pref 10 proto udp dport 5001 classid 1:1",
        "pref 20 dst 192.168.2.0/24 classid 1:2",
        "pref 30 proto udp classid 1:3",
    });
    V4 first, later;
    first.dst = later.dst = "192.168.2.1";
    first.frag_field = 0x2000; // MF, offset 0
    later.frag_field = 185;    // offset 1480, payload that looks like dport 5001
    V4 later_elsewhere = later;
    later_elsewhere.dst = "8.8.8.8";
    run_cases(m, {
                     {"v4 first fragment keeps its ports",
                      cat(eth(ETH_P_IP), ipv4(first, udp(1, 5001))), "1:1"},
                     {"v4 later fragment: no ports, the address still counts",
                      cat(eth(ETH_P_IP), ipv4(later, udp(1, 5001))), "1:2"},
                     {"v4 later fragment: proto still counts",
                      cat(eth(ETH_P_IP), ipv4(later_elsewhere, udp(1, 5001))), "1:3"},
                     {"v6 first fragment",
                      l4v6(IPPROTO_FRAGMENT, frag6(IPPROTO_UDP, 0, true, udp(1, 5001))), "1:1"},
                     {"v6 later fragment",
                      l4v6(IPPROTO_FRAGMENT, frag6(IPPROTO_UDP, 185, false, udp(1, 5001))), "1:3"},
                 });
}

TEST_CASE("filters: VLAN tags in the data, ICMP", "[bpf][filters]") {
    Matcher m;
    m.set({
        "pref 10 vlan 100 proto udp classid 1:1",
        "pref 20 vlan 200 classid 1:2",
        "pref 30 proto icmp classid 1:3",
        "pref 30 proto icmpv6 classid 1:4",
        "pref 40 vlan 0 classid 1:5",
    });
    V4 h;
    const Bytes l3 = ipv4(h, udp(1, 2));
    run_cases(
        m, {
               {"802.1Q 100", cat(eth(ETH_P_IP, {ETH_P_8021Q}, 100), l3), "1:1"},
               {"QinQ outer 200, inner 201",
                cat(eth(ETH_P_IP, {ETH_P_8021AD, ETH_P_8021Q}, 200), l3), "1:2"},
               {"QinQ outer 100", cat(eth(ETH_P_IP, {ETH_P_8021AD, ETH_P_8021Q}, 100), l3), "1:1"},
               {"QinQ outer 99, inner 100: only the outer counts",
                cat(eth(ETH_P_IP, {ETH_P_8021AD, ETH_P_8021Q}, 99), l3), kDefault},
               {"three tags: too deep",
                cat(eth(ETH_P_IP, {ETH_P_8021AD, ETH_P_8021Q, ETH_P_8021Q}, 200), l3), kDefault},
               {"ARP on 200", arp_tagged(200), "1:2"},
               {"ARP on 100: proto udp needs IP", arp_tagged(100), kDefault},
               {"priority tag (VLAN id 0)", cat(eth(ETH_P_IP, {ETH_P_8021Q}, 0), l3), "1:5"},
               {"untagged", cat(eth(ETH_P_IP), l3), kDefault},
               {"ICMP", proto4(IPPROTO_ICMP), "1:3"},
               {"ICMPv6", l4v6(58, udp(1, 2)), "1:4"},
               {"ICMP on vlan 100: proto differs",
                cat(eth(ETH_P_IP, {ETH_P_8021Q}, 100), ipv4(
                                                           [] {
                                                               V4 i;
                                                               i.proto = IPPROTO_ICMP;
                                                               return i;
                                                           }(),
                                                           udp(1, 2))),
                "1:3"},
           });
}

TEST_CASE("filters: garbage matches nothing", "[bpf][filters]") {
    Matcher m;
    m.set({"pref 1 src 0.0.0.0/0 classid 1:1", "pref 1 dst ::/0 classid 1:2",
           "pref 1 vlan 100 classid 1:3"});
    V4 good;
    const Bytes v4 = cat(eth(ETH_P_IP), ipv4(good, udp(1, 2)));
    V4 bad_version = good, bad_len = good;
    bad_version.version = 5;
    bad_len.tot_len_override = 1400;
    Bytes seven = udp(1, 2);
    seven = ext(IPPROTO_UDP, 0, seven);
    for (int i = 0; i < 6; ++i) seven = ext(IPPROTO_DSTOPTS, 0, seven);
    run_cases(m, {
                     {"v4", v4, "1:1"},
                     {"v6", l4v6(IPPROTO_UDP, udp(1, 2)), "1:2"},
                     {"v4 truncated in the UDP header", Bytes(v4.begin(), v4.end() - 22), kDefault},
                     {"IP version 5", cat(eth(ETH_P_IP), ipv4(bad_version, udp(1, 2))), kDefault},
                     {"total length beyond the packet",
                      cat(eth(ETH_P_IP), ipv4(bad_len, udp(1, 2))), kDefault},
                     {"seven extension headers", l4v6(IPPROTO_DSTOPTS, seven), kDefault},
                     {"tagged 100 but truncated IP: not even the tag",
                      cat(eth(ETH_P_IP, {ETH_P_8021Q}, 100), Bytes(v4.begin() + 14, v4.end() - 30)),
                      kDefault},
                 });
}

// ---------------------------------------------------------------- randomized

namespace {

// A packet described by its fields: built into bytes, and judged directly.
struct Pkt {
    int family = 4;
    std::string src, dst;
    uint8_t proto = IPPROTO_UDP;
    uint16_t sport = 0, dport = 0;
    std::optional<uint16_t> vlan;
    uint8_t dscp = 0;
    bool later_fragment = false;

    Bytes bytes() const {
        const Bytes l4 = proto == IPPROTO_TCP ? tcp(sport, dport) : udp(sport, dport);
        const uint16_t type = family == 4 ? ETH_P_IP : ETH_P_IPV6;
        const Bytes l2 = vlan ? eth(type, {ETH_P_8021Q}, *vlan) : eth(type);
        if (family == 4) {
            V4 h;
            h.src = src.c_str();
            h.dst = dst.c_str();
            h.proto = proto;
            h.tos = uint8_t(dscp << 2);
            h.frag_field = later_fragment ? 185 : 0;
            return cat(l2, ipv4(h, l4));
        }
        if (later_fragment)
            return cat(l2, ipv6(IPPROTO_FRAGMENT, src.c_str(), dst.c_str(),
                                frag6(proto, 185, false, l4), 6, uint8_t(dscp << 2)));
        return cat(l2, ipv6(proto, src.c_str(), dst.c_str(), l4, 6, uint8_t(dscp << 2)));
    }
};

bool in_prefix(const Prefix &p, int family, const std::string &addr) {
    if (p.family != family) return false;
    uint8_t a[16] = {};
    REQUIRE(inet_pton(family == 4 ? AF_INET : AF_INET6, addr.c_str(), a) == 1);
    for (unsigned bit = 0; bit < p.len; ++bit) {
        const uint8_t m = uint8_t(0x80u >> (bit % 8));
        if ((a[bit / 8] & m) != (p.addr[bit / 8] & m)) return false;
    }
    return true;
}

// The rules as the README states them, read directly.
bool matches(const FilterSpec &f, const Pkt &p) {
    const bool ports = !p.later_fragment && (p.proto == IPPROTO_TCP || p.proto == IPPROTO_UDP);
    if (f.src && !in_prefix(*f.src, p.family, p.src)) return false;
    if (f.dst && !in_prefix(*f.dst, p.family, p.dst)) return false;
    if (f.proto && *f.proto != p.proto) return false;
    if (f.sport && !(ports && p.sport >= f.sport->min && p.sport <= f.sport->max)) return false;
    if (f.dport && !(ports && p.dport >= f.dport->min && p.dport <= f.dport->max)) return false;
    if (f.vlan && p.vlan != f.vlan) return false;
    if (f.dscp && *f.dscp != p.dscp) return false;
    return true;
}

template <class T> const T &pick(std::mt19937 &rng, const std::vector<T> &v) {
    return v[rng() % v.size()];
}

} // namespace

TEST_CASE("filters: tuple-space search agrees with the rules read directly", "[bpf][filters]") {
    Matcher m;
    std::mt19937 rng(20051111);
    const std::vector<std::string> src4 = {"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24",
                                           "10.1.2.3/32", "0.0.0.0/0"};
    const std::vector<std::string> src6 = {"2001:db8::/32", "2001:db8:1::/48", "::/0",
                                           "2001:db8:1::7/128"};
    const std::vector<std::string> addr4 = {"10.1.2.3", "10.1.3.3", "10.2.0.1", "8.8.8.8"};
    const std::vector<std::string> addr6 = {"2001:db8:1::7", "2001:db8:2::1", "fe80::1"};
    const std::vector<std::string> protos = {"tcp", "udp", "icmp", "47"};
    const std::vector<uint8_t> proto_nums = {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP, 47};

    for (int round = 0; round < 4; ++round) {
        // Filters over small pools, so they overlap, tie and share keys.
        std::vector<std::string> lines;
        std::set<std::string> identities;
        while (lines.size() < 40) {
            std::string w = "pref " + std::to_string(1 + rng() % 4);
            const bool v6 = rng() % 3 == 0;
            const auto &pool = v6 ? src6 : src4;
            if (rng() % 3 == 0) w += " src " + pick(rng, pool);
            if (rng() % 3 == 0) w += " dst " + pick(rng, pool);
            if (rng() % 3 == 0) w += " proto " + pick(rng, protos);
            for (const char *port : {" sport ", " dport "}) {
                if (rng() % 3) continue;
                const uint16_t a = uint16_t(rng() % 100), b = uint16_t(rng() % 100);
                w += port + (rng() % 2 ? std::to_string(a)
                                       : std::to_string(std::min(a, b)) + "-" +
                                             std::to_string(std::max(a, b)));
            }
            if (rng() % 4 == 0) w += " vlan " + std::to_string(1 + rng() % 2);
            if (rng() % 4 == 0) w += " dscp " + std::string(rng() % 2 ? "46" : "0");
            w += " classid 1:" + std::to_string(lines.size() + 1);
            auto s = parse_filter(split_words(w));
            if (!s) continue; // e.g. proto icmp with ports, or icmp with IPv6 addresses
            FilterSpec key = *s;
            key.classid = {};
            if (!identities.insert(format_filter(key)).second) continue;
            lines.push_back(w);
        }
        m.set(lines);
        std::vector<FilterSpec> specs;
        for (const auto &l : lines) specs.push_back(Matcher::spec(l));

        for (int i = 0; i < 150; ++i) {
            Pkt p;
            p.family = rng() % 3 == 0 ? 6 : 4;
            p.src = pick(rng, p.family == 4 ? addr4 : addr6);
            p.dst = pick(rng, p.family == 4 ? addr4 : addr6);
            p.proto = pick(rng, proto_nums);
            p.sport = uint16_t(rng() % 100);
            p.dport = uint16_t(rng() % 100);
            if (rng() % 3 == 0) p.vlan = uint16_t(1 + rng() % 2);
            p.dscp = rng() % 2 ? 46 : 0;
            p.later_fragment = rng() % 8 == 0;
            // The winner by the rules: lowest pref, then the earliest in the list.
            std::string expect = kDefault;
            uint32_t best = UINT32_MAX;
            for (const FilterSpec &f : specs)
                if (f.pref < best && matches(f, p)) {
                    best = f.pref;
                    expect = pspxdp::format_classid(f.classid);
                }
            INFO("round " << round << " packet " << i << ": v" << p.family << " " << p.src << " -> "
                          << p.dst << " proto " << int(p.proto) << " " << p.sport << " -> "
                          << p.dport << " vlan " << (p.vlan ? int(*p.vlan) : -1) << " dscp "
                          << int(p.dscp) << (p.later_fragment ? " later fragment" : ""));
            REQUIRE(m.classify(p.bytes()) == expect);
        }
    }
}

// ---------------------------------------------------------------- control plane

TEST_CASE("filters: replace is a diff; apply(read) writes nothing; refusals change nothing",
          "[bpf][filters]") {
    Matcher m;
    const std::vector<std::string> lines = {
        "pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1",
        "pref 10 dport 80 classid 1:2",
        "src 2001:db8::/32 classid 1:3",
    };
    m.set(lines);
    auto snapshot = [&] {
        auto f = read_filters(m.maps());
        REQUIRE(f);
        std::string out;
        for (const auto &s : *f)
            out += std::to_string(s.id) + "/" + std::to_string(s.seq) + " " +
                   format_filter(s.spec) + "\n";
        pspxdp_filter_state st{};
        uint32_t key = 0;
        REQUIRE(bpf_map_lookup_elem(m.maps().state, &key, &st) == 0);
        return out + "active " + std::to_string(st.active_set);
    };
    const std::string before = snapshot();
    auto read = read_filters(m.maps());
    REQUIRE(read);
    std::vector<FilterSpec> again;
    for (const auto &f : *read) again.push_back(f.spec);
    REQUIRE(replace_filters(m.maps(), again));
    CHECK(snapshot() == before); // same ids, seqs, and no flip of the shape set

    SECTION("refused: duplicate, too many shapes") {
        std::vector<FilterSpec> dup = again;
        dup.push_back(Matcher::spec("pref 10 dport 80 classid 1:9"));
        auto r = replace_filters(m.maps(), dup);
        REQUIRE_FALSE(r);
        CHECK(r.exit_code() == 2);
        CHECK_THAT(
            r.error(),
            Catch::Contains("filter 4 \"pref 10 dport 80 classid 1:9\": duplicate of filter 2"));
        auto a = add_filter(m.maps(), Matcher::spec("pref 10 dport 80 classid 1:9"));
        REQUIRE_FALSE(a);
        CHECK(a.exit_code() == 2);
        CHECK_THAT(a.error(), Catch::Contains("duplicate"));
        // Both ports ranged as badly as possible: 30 x 30 blocks of 15 x 15
        // lengths, 225 shapes; with a src prefix, 225 others.
        std::vector<FilterSpec> wide = again;
        wide.push_back(Matcher::spec("pref 20 sport 1-65534 dport 1-65534 classid 1:4"));
        wide.push_back(
            Matcher::spec("pref 20 src 10.0.0.0/8 sport 1-65534 dport 1-65534 classid 1:4"));
        auto w = replace_filters(m.maps(), wide);
        REQUIRE_FALSE(w);
        CHECK(w.exit_code() == 2);
        CHECK_THAT(w.error(), Catch::Contains("shapes"));
        CHECK(snapshot() == before);
    }
    SECTION("a new order of equal prefs renumbers only what it must") {
        std::vector<FilterSpec> swapped = {again[1], again[0], again[2]};
        REQUIRE(replace_filters(m.maps(), swapped));
        auto f = read_filters(m.maps());
        REQUIRE(f);
        REQUIRE(f->size() == 3);
        CHECK(format_filter((*f)[0].spec) == "pref 10 dport 80 classid 1:2");
        CHECK((*f)[0].id == (*read)[1].id); // ids (and counters) stay
        CHECK((*f)[0].seq == (*read)[1].seq);
        CHECK((*f)[1].id == (*read)[0].id);
        CHECK((*f)[1].seq > (*read)[1].seq); // moved behind: a new sequence number
    }
}

TEST_CASE("filters: an offloaded tag (skb->vlan_tci) is the outer one", "[bpf][filters]") {
    Matcher m;
    PrivateNetns ns;
    m.set({"pref 1 vlan 43 proto udp dport 9 classid 1:2",
           "pref 2 vlan 42 proto udp dport 9 classid 1:1"});
    // On psp0's egress, before the classifier: a program that pushes tag 43
    // then tag 42 with bpf_skb_vlan_push. The second push moves 43 into the
    // data, so the classifier sees 42 offloaded (outer) and 43 in the data
    // (inner), as from a VLAN device stacked on a QinQ one.
    const uint16_t tpid = htons(ETH_P_8021Q);
    const bpf_insn push[] = {
        {BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0}, // r6 = skb
        {BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, tpid},
        {BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, 43},
        {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_skb_vlan_push},
        {BPF_ALU64 | BPF_MOV | BPF_X, 1, 6, 0, 0},
        {BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, tpid},
        {BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, 42},
        {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_skb_vlan_push},
        {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, TC_ACT_UNSPEC}, // on to the next filter
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    const int push_fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "psp_vlan_push", "GPL", push,
                                      sizeof(push) / sizeof(push[0]), nullptr);
    INFO("load the tag pusher: " << std::strerror(errno));
    REQUIRE(push_fd >= 0);
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(ns.psp0), .attach_point = BPF_TC_EGRESS);
    REQUIRE(bpf_tc_hook_create(&hook) == 0);
    LIBBPF_OPTS(bpf_tc_opts, first, .prog_fd = push_fd, .priority = 1);
    REQUIRE(bpf_tc_attach(&hook, &first) == 0);
    LIBBPF_OPTS(bpf_tc_opts, second, .prog_fd = bpf_program__fd(m.skel_->progs.pspxdp_classify),
                .priority = 2);
    REQUIRE(bpf_tc_attach(&hook, &second) == 0);
    close(push_fd); // TC holds it
    sh("ip addr add 192.0.2.1/24 dev psp0");
    sh("ip neigh add 192.0.2.2 lladdr 02:00:00:00:00:02 dev psp0"); // no ARP

    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    REQUIRE(inet_pton(AF_INET, "192.0.2.2", &to.sin_addr) == 1);
    const char payload[] = "pspxdp";
    CHECK(sendto(fd, payload, sizeof(payload), 0, reinterpret_cast<sockaddr *>(&to), sizeof(to)) ==
          ssize_t(sizeof(payload)));
    close(fd);

    auto infos = read_filter_infos(m.maps(), true);
    REQUIRE(infos);
    REQUIRE(infos->size() == 2);
    CHECK(infos->at(0).stats.matched_packets == 0); // vlan 43: the inner tag
    CHECK(infos->at(1).stats.matched_packets == 1); // vlan 42: the offloaded, outer tag
}

TEST_CASE("filters: changes are hitless for the traffic of a filter that stays", "[bpf][filters]") {
    Matcher m;
    // While the filters change under it, a packet for udp dport 80 must
    // always find a filter sending it to 1:1, never the default class: the
    // filter moves between shapes (dport 80 <-> dport 80-81 <-> dport 64-127
    // with a dst) and other filters come and go, adding and removing shapes
    // that sort before it.
    const std::vector<std::vector<std::string>> sets = {
        {"pref 10 dport 80 classid 1:1", "pref 5 vlan 9 classid 1:2"},
        {"pref 20 dport 80-81 classid 1:1", "pref 1 dst 10.0.0.0/8 proto tcp classid 1:3",
         "pref 2 src 2001:db8::/32 classid 1:2"},
        {"pref 3 dst 8.0.0.0/7 dport 64-127 classid 1:1", "pref 1 dscp 7 classid 1:3"},
    };
    m.set(sets[0]);
    const Bytes pkt = udp4("1.1.1.1", "8.8.8.8", 1, 80);
    const int prog = bpf_program__fd(m.skel_->progs.pspxdp_classify);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> runs{0};
    std::thread traffic([&] {
        while (!stop) {
            LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt.data(),
                        .data_size_in = uint32_t(pkt.size()), .repeat = 50);
            if (bpf_prog_test_run_opts(prog, &opts) != 0) break;
            runs += 50;
        }
    });
    for (int i = 1; i <= 30; ++i) m.set(sets[size_t(i) % sets.size()]);
    stop = true;
    traffic.join();
    auto class_packets = [&](uint32_t classid) {
        const int ncpu = libbpf_num_possible_cpus();
        std::vector<pspxdp_class_tc_stats> v(static_cast<size_t>(ncpu));
        uint64_t sum = 0;
        if (bpf_map_lookup_elem(bpf_map__fd(m.skel_->maps.class_stats), &classid, v.data()) == 0)
            for (const auto &s : v) sum += s.tc_packets + s.tc_passed;
        return sum;
    };
    INFO("packets classified during 30 changes: " << runs.load());
    CHECK(runs > 0);
    CHECK(class_packets(PSPXDP_CLASSID(1, 0xffff)) == 0); // never the default class
    CHECK(class_packets(PSPXDP_CLASSID(1, 1)) == runs);
}

// ---------------------------------------------------------------- CLI

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace {

struct CliRun {
    int code = -1;
    std::string out, err;
};

// The pspxdp binary: $PSPXDP (ctest sets it), else next to this test's build.
std::string pspxdp_binary() {
    if (const char *env = std::getenv("PSPXDP")) return env;
    char self[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string();
    dir = dir.substr(0, dir.rfind('/'));
    return dir + "/../user/pspxdp";
}

std::string slurp(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

CliRun cli(const std::string &args) {
    const std::string base = "/tmp/psp-filter-cli-" + std::to_string(getpid());
    const std::string cmd = pspxdp_binary() + " " + args + " >" + base + ".out 2>" + base + ".err";
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    unlink((base + ".out").c_str());
    unlink((base + ".err").c_str());
    return r;
}

// A device the CLI acts on, PREFIX and our pid: in a private network
// namespace, attached here (state file, lock), with the Matcher's maps pinned.
struct CliDevice {
    CliDevice(Matcher &m, const std::string &prefix)
        : dev(prefix + std::to_string(getpid())), here(dev), pins(m.skel_->obj, dev) {}
    std::string dev;
    PrivateNetns ns; // entered before the device is made in it
    AttachedHere here;
    Pins pins;
};

} // namespace

TEST_CASE("cli: filter add/show/del round-trip; refused input exits 2 and changes nothing",
          "[bpf][filters][cli]") {
    Matcher m;
    if (!bpffs_mounted()) {
        WARN("/sys/fs/bpf is not a bpffs mount: CLI test skipped");
        return;
    }
    CliDevice cd(m, "psf");
    const std::string &dev = cd.dev;
    m.classes({PSPXDP_CLASSID(1, 1), PSPXDP_CLASSID(1, 2)});
    for (const char *add :
         {"pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1", "dport 80 classid 1:2",
          "src 2001:db8::/32 proto tcp dport 443 prio 5 flowid 1:2",
          "pref 10 vlan 7 classid 1:1"}) {
        auto r = cli("filter add " + dev + " " + add);
        INFO(add << ": " << r.err);
        REQUIRE(r.code == 0);
    }
    const std::string shown = "pref 5 src 2001:db8::/32 proto tcp dport 443 classid 1:2\n"
                              "pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1\n"
                              "pref 10 vlan 7 classid 1:1\n"
                              "pref 49152 dport 80 classid 1:2\n";
    CHECK(cli("filter show " + dev).out == shown);

    struct Bad {
        const char *args; // after "filter"
        const char *needle;
    };
    const Bad bad[] = {
        {"add DEV dst 10.1.2.0/24 proto udp dport 5000-5099 pref 10 classid 1:2", "duplicate"},
        {"add DEV dst 10.0.0.0/8 classid 1:7", "classid 1:7: no such class"},
        {"add DEV dst 10.0.0.1/8 classid 1:1", "dst \"10.0.0.1/8\": host bits"},
        {"add DEV dport 80-70 classid 1:1", "dport \"80-70\": range runs backwards"},
        {"add DEV dport 99999 classid 1:1", "dport \"99999\""},
        {"add DEV vlan 5000 classid 1:1", "vlan \"5000\""},
        {"add DEV dscp 64 classid 1:1", "dscp \"64\""},
        {"add DEV src 10.0.0.0/8 dst ::/0 classid 1:1", "one family per filter"},
        {"add DEV dst 10.0.0.0/8", "missing \"classid"},
        {"add DEV via 10.0.0.1 classid 1:1", "unknown word \"via\""},
        {"del DEV dport 81", "no filter matches \"dport 81\""},
        {"del DEV pref 11", "no filter matches \"pref 11\""},
        {"del DEV pref 10 vlan 7 classid 1:2", "no filter matches"},
        {"frob DEV", "unknown action \"frob\""},
        {"show DEV extra", "unexpected \"extra\""},
    };
    for (const Bad &b : bad) {
        std::string args = b.args;
        args.replace(args.find("DEV"), 3, dev);
        auto r = cli("filter " + args);
        INFO("pspxdp filter " << args << "\nstderr: " << r.err);
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Catch::Contains(b.needle));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(cli("filter show " + dev).out == shown); // nothing changed
    }

    SECTION("every shown line deletes its filter and adds it back identically") {
        std::vector<std::string> lines;
        for (size_t pos = 0; pos < shown.size();) {
            const size_t nl = shown.find('\n', pos);
            lines.push_back(shown.substr(pos, nl - pos));
            pos = nl + 1;
        }
        for (const auto &l : lines) REQUIRE(cli("filter del " + dev + " " + l).code == 0);
        CHECK(cli("filter show " + dev).out.empty());
        for (const auto &l : lines) REQUIRE(cli("filter add " + dev + " " + l).code == 0);
        CHECK(cli("filter show " + dev).out == shown);
        // pref N alone deletes that pref's filters; fields without pref need to name one.
        REQUIRE(cli("filter add " + dev + " pref 11 vlan 7 classid 1:2").code == 0);
        auto ambiguous = cli("filter del " + dev + " vlan 7");
        CHECK(ambiguous.code == 2);
        CHECK_THAT(ambiguous.err, Catch::Contains("names 2 filters (pref 10, 11): add pref N"));
        REQUIRE(cli("filter del " + dev + " pref 10").code == 0);
        CHECK(cli("filter show " + dev).out ==
              "pref 5 src 2001:db8::/32 proto tcp dport 443 classid 1:2\n"
              "pref 11 vlan 7 classid 1:2\n"
              "pref 49152 dport 80 classid 1:2\n");
    }
    SECTION("-j: the documented keys; -s: the counters") {
        (void)m.classify(udp4("1.1.1.1", "10.1.2.3", 1, 5001));
        auto j = cli("filter show " + dev + " -j -s");
        REQUIRE(j.code == 0);
        const auto doc = nlohmann::json::parse(j.out);
        REQUIRE(doc.is_array());
        REQUIRE(doc.size() == 4);
        const auto &f = doc[1];
        CHECK(f["pref"] == 10);
        CHECK(f["dst"] == "10.1.2.0/24");
        CHECK(f["proto"] == 17);
        CHECK(f["dport_min"] == 5000);
        CHECK(f["dport_max"] == 5099);
        CHECK(f["classid"] == "1:1");
        CHECK(f["filter"] == "pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1");
        CHECK(f["matched_packets"] == 1);
        CHECK(f["matched_skb_bytes"].get<uint64_t>() > 0);
        CHECK(doc[0]["matched_packets"] == 0);
        CHECK(doc[0]["src"] == "2001:db8::/32");
        const auto text = cli("filter show " + dev + " -s").out;
        CHECK_THAT(text,
                   Catch::Contains("pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid "
                                   "1:1\n  matched_packets 1 matched_skb_bytes "));
    }
}

// ---------------------------------------------------------------- who sends: mark, priority,
// cgroup

namespace {

struct SenderCase {
    const char *what;
    Bytes pkt;
    uint32_t mark, priority;
    const char *expect; // the class decided ("1:ffff": the default)
};

void run_sender_cases(Matcher &m, const std::vector<SenderCase> &cases) {
    for (const SenderCase &c : cases) {
        INFO("packet: " << c.what << " (mark 0x" << std::hex << c.mark << ", priority 0x"
                        << c.priority << ")");
        CHECK(m.decide(c.pkt, c.mark, c.priority) == c.expect);
    }
}

// Moves this process into a cgroup (cgroup.procs) for as long as it lives.
class InCgroup {
  public:
    InCgroup(const std::string &mount_dir, const std::string &rel) : mount_(mount_dir) {
        back_ = pspxdp::common::own_cgroup();
        move(rel);
    }
    ~InCgroup() { move(back_); }
    void move(const std::string &rel) const {
        std::ofstream f(mount_ + (rel == "/" ? "" : rel) + "/cgroup.procs");
        f << getpid() << std::flush;
        REQUIRE(f.good());
    }
    InCgroup(const InCgroup &) = delete;
    InCgroup &operator=(const InCgroup &) = delete;

  private:
    std::string mount_, back_;
};

} // namespace

TEST_CASE("filters: mark with and without a mask; skb->priority picks a class before the filters",
          "[bpf][filters][senders]") {
    Matcher m;
    const uint32_t k1 = PSPXDP_CLASSID(1, 0);
    m.classes({k1 | 1, k1 | 2, k1 | 3, k1 | 4, k1 | 0xa, k1 | 0xffff, PSPXDP_CLASSID(2, 0xa)});
    m.set({
        "pref 10 mark 0x10 classid 1:1",
        "pref 10 mark 0x200/0xf00 classid 1:2",
        "pref 5 mark 0x3/0x3 proto udp dport 53 classid 1:3",
        "pref 20 dport 80 classid 1:4",
    });
    const Bytes u53 = udp4("1.1.1.1", "8.8.8.8", 9, 53), u54 = udp4("1.1.1.1", "8.8.8.8", 9, 54);
    const Bytes t80 = tcp4("1.1.1.1", "8.8.8.8", 9, 80);
    V4 bad;
    bad.version = 5;
    const Bytes garbled = cat(eth(ETH_P_IP), ipv4(bad, udp(9, 54)));
    const uint64_t before = percpu_counter<pspxdp_tc_counters>(bpf_map__fd(m.skel_->maps.tc_stats),
                                                               PSPXDP_TC_PRIO_DIRECT);
    run_sender_cases(
        m, {
               {"mark 0x10 exactly", u54, 0x10, 0, "1:1"},
               {"mark 0x11: no mask, every bit counts", u54, 0x11, 0, "1:ffff"},
               {"mark 0 (unmarked)", u54, 0, 0, "1:ffff"},
               {"mark 0x2ab under 0xf00 is 0x200", u54, 0x2ab, 0, "1:2"},
               {"mark 0x3ab under 0xf00 is 0x300", u54, 0x3ab, 0, "1:ffff"},
               {"mark 0xffff0200 under 0xf00", u54, 0xffff0200, 0, "1:2"},
               {"mark 0x7 & 0x3 with udp dport 53", u53, 0x7, 0, "1:3"},
               {"mark 0x7 & 0x3, dport 54: the conjunction fails", u54, 0x7, 0, "1:ffff"},
               {"mark 0x4 & 0x3 = 0, dport 53", u53, 0x4, 0, "1:ffff"},
               {"mark 0x10 and dport 80: pref 10 beats 20", t80, 0x10, 0, "1:1"},
               {"dport 80 unmarked", t80, 0, 0, "1:4"},
               {"priority 1:a (a class): before every filter", t80, 0x10, 0x1000a, "1:a"},
               {"priority 1:a on a garbled frame (IP version 5)", garbled, 0, 0x1000a, "1:a"},
               {"a garbled frame without priority", garbled, 0x10, 0, "1:ffff"},
               {"priority 1:b (no such class): the filters", t80, 0, 0x1000b, "1:4"},
               {"priority 1:b, mark 0x10", u54, 0x10, 0x1000b, "1:1"},
               {"priority 2:a: another major than the default's", t80, 0, 0x2000a, "1:4"},
               {"priority 1:0 (the qdisc, not a class)", u54, 0, 0x10000, "1:ffff"},
               {"priority 6 (TC_PRIO_INTERACTIVE, major 0)", u54, 0x10, 6, "1:1"},
               {"priority 1:ffff (the default class, by priority)", u53, 0x7, 0x1ffff, "1:ffff"},
           });
    // prio-direct counted once per packet it decided: 1:a twice, 1:ffff once.
    CHECK(percpu_counter<pspxdp_tc_counters>(bpf_map__fd(m.skel_->maps.tc_stats),
                                             PSPXDP_TC_PRIO_DIRECT) == before + 3);

    SECTION("prio-direct off: the filters decide") {
        m.pacer_flags(PSPXDP_STATE_F_PRIO_DIRECT_OFF);
        run_sender_cases(m, {
                                {"priority 1:a, dport 80", t80, 0, 0x1000a, "1:4"},
                                {"priority 1:a, mark 0x10", t80, 0x10, 0x1000a, "1:1"},
                                {"priority 1:a, nothing else", u54, 0, 0x1000a, "1:ffff"},
                            });
    }
}

TEST_CASE("filters: the sending socket's cgroup and its ancestors", "[bpf][filters][senders]") {
    // BPF_PROG_TEST_RUN gives the skb a socket made by the calling task, so
    // its cgroup is this process's: moving the test moves the "sender".
    auto mount = pspxdp::common::cgroup2_mount();
    if (!mount) {
        WARN("no cgroup2 mount: " << mount.error());
        return;
    }
    Matcher m;
    const std::string top = "/pspxdp-bpftest-" + std::to_string(getpid());
    struct Dirs {
        std::string base;
        ~Dirs() {
            for (const char *d : {"/a/b", "/a", ""}) rmdir((base + d).c_str());
        }
    } dirs{mount->dir + top};
    REQUIRE(pspxdp::common::mkdir_p(dirs.base + "/a/b", 0755));
    const std::string a = top + "/a", b = top + "/a/b";
    m.set({
        "pref 10 cgroup " + a + " classid 1:1",
        "pref 5 cgroup " + b + " proto tcp classid 1:2",
        "pref 20 mark 7 classid 1:3",
        // The whole path under the mount is the same cgroup.
        "pref 30 cgroup " + mount->dir + top + " dport 99 classid 1:4",
    });
    const Bytes u = udp4("1.1.1.1", "8.8.8.8", 9, 53), t = tcp4("1.1.1.1", "8.8.8.8", 9, 53);
    const Bytes u99 = udp4("1.1.1.1", "8.8.8.8", 9, 99);
    {
        InCgroup in(mount->dir, a);
        run_sender_cases(m, {
                                {"in a: udp", u, 0, 0, "1:1"},
                                {"in a: tcp (the b filter is below a)", t, 0, 0, "1:1"},
                                {"in a: mark 7 (pref 20 loses to a's pref 10)", u, 7, 0, "1:1"},
                            });
        in.move(b);
        run_sender_cases(m, {
                                {"in a/b: udp (a's filter: an ancestor)", u, 0, 0, "1:1"},
                                {"in a/b: tcp (b's own)", t, 0, 0, "1:2"},
                            });
        in.move(top);
        run_sender_cases(m, {
                                {"in the top: udp", u, 0, 0, "1:ffff"},
                                {"in the top: dport 99", u99, 0, 0, "1:4"},
                                {"in the top: mark 7", u, 7, 0, "1:3"},
                            });
    }
    auto infos = read_filter_infos(m.maps(), false);
    REQUIRE(infos);
    for (const auto &i : *infos) CHECK_FALSE(i.cgroup_gone);
    for (const auto &i : *infos)
        if (i.filter.spec.cgroup && i.filter.spec.pref == 30)
            CHECK(i.filter.spec.cgroup->path == top);
    rmdir((dirs.base + "/a/b").c_str());
    infos = read_filter_infos(m.maps(), false);
    REQUIRE(infos);
    for (const auto &i : *infos)
        if (i.filter.spec.cgroup) CHECK(i.cgroup_gone == (i.filter.spec.cgroup->path == b));
    // Made again: a new cgroup (new id), so the old filter still says gone.
    REQUIRE(mkdir((dirs.base + "/a/b").c_str(), 0755) == 0);
    infos = read_filter_infos(m.maps(), false);
    REQUIRE(infos);
    for (const auto &i : *infos)
        if (i.filter.spec.cgroup && i.filter.spec.cgroup->path == b) CHECK(i.cgroup_gone);
    {
        InCgroup in(mount->dir, b);
        CHECK(m.decide(t, 0) == "1:1"); // the gone b filter matches nothing; a's does
    }
    SECTION("refused: not a cgroup, nothing changed") {
        const auto before = read_filters(m.maps());
        REQUIRE(before);
        for (const std::string &path :
             {top + "/nosuch", top + "/a/cgroup.procs", std::string("..")}) {
            auto r = add_filter(m.maps(), Matcher::spec("cgroup " + path + " classid 1:1"));
            INFO(path << ": " << r.error());
            CHECK_FALSE(r);
            CHECK(r.exit_code() == 2);
        }
        auto after = read_filters(m.maps());
        REQUIRE(after);
        CHECK(after->size() == before->size());
    }
}

TEST_CASE("cli: mark, cgroup and prio-direct words; refusals exit 2 and change nothing",
          "[bpf][filters][cli][senders]") {
    Matcher m;
    auto mount = pspxdp::common::cgroup2_mount();
    if (!bpffs_mounted() || !mount) {
        WARN("no bpffs or no cgroup2 mount: CLI test skipped");
        return;
    }
    CliDevice cd(m, "psg");
    const std::string &dev = cd.dev;
    m.classes({PSPXDP_CLASSID(1, 1), PSPXDP_CLASSID(1, 2), PSPXDP_CLASSID(1, 0xffff)});
    const std::string top = "/pspxdp-clitest-" + std::to_string(getpid());
    REQUIRE(mkdir((mount->dir + top).c_str(), 0755) == 0);
    struct Rm {
        std::string d;
        ~Rm() { rmdir(d.c_str()); }
    } rm{mount->dir + top};

    for (const std::string &add : std::vector<std::string>{
             "mark 0x10/0xff classid 1:1", "pref 3 mark 42 proto udp classid 1:2",
             "cgroup " + mount->dir + top + " proto tcp dport 873 classid 1:2"}) {
        auto r = cli("filter add " + dev + " " + add);
        INFO(add << ": " << r.err);
        REQUIRE(r.code == 0);
    }
    const std::string shown = "pref 3 proto udp mark 0x2a classid 1:2\n"
                              "pref 49152 mark 0x10/0xff classid 1:1\n"
                              "pref 49152 proto tcp dport 873 cgroup " +
                              top + " classid 1:2\n";
    CHECK(cli("filter show " + dev).out == shown);
    auto j = nlohmann::json::parse(cli("filter show -j " + dev).out);
    REQUIRE(j.size() == 3);
    CHECK(j[0]["mark"] == 42);
    CHECK(j[0]["mark_mask"] == 0xffffffffu);
    CHECK(j[2]["cgroup"] == top);
    CHECK(j[2]["cgroup_gone"] == false);
    CHECK(j[2]["cgroup_id"].get<uint64_t>() != 0);

    const std::string v1only = "/tmp/psp-mountinfo-" + std::to_string(getpid());
    {
        std::ofstream f(v1only);
        f << "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
             "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
    }
    struct Bad {
        std::string args; // after "pspxdp"
        const char *needle;
    };
    const Bad bad[] = {
        {"filter add DEV mark 0x1g classid 1:1", "mark \"0x1g\": expected VALUE or VALUE/MASK"},
        {"filter add DEV mark 16/ classid 1:1", "mark \"16/\""},
        {"filter add DEV mark 0x11/0xf0 classid 1:1", "bits outside the mask"},
        {"filter add DEV mark 1/0 classid 1:1", "mask 0"},
        {"filter add DEV mark 4294967296 classid 1:1", "mark \"4294967296\""},
        {"filter add DEV cgroup " + top + "/nosuch classid 1:1", "is not a cgroup"},
        {"filter add DEV cgroup " + top + "/cgroup.procs classid 1:1", "is not a cgroup"},
        {"filter add DEV cgroup " + top + "/../x classid 1:1", "'..'"},
        {"filter add DEV mark 0x10/0xff classid 1:2", "duplicate"},
        {"change DEV prio-direct maybe", "expected on or off"},
        {"run DEV --class 1:1", "after \"--\""},
        {"run DEV --class 1:1 --", "no command"},
        {"run nosuch0 --class 1:1 -- true", "nosuch0 is not attached"},
        {"run DEV --class 1:7 -- true", "no class 1:7"},
        {"run DEV --class 1:1 --rate 5mbit -- true", "class 1:1 exists"},
    };
    for (const Bad &b : bad) {
        std::string args = b.args;
        if (auto pos = args.find("DEV"); pos != std::string::npos) args.replace(pos, 3, dev);
        auto r = cli(args);
        INFO("pspxdp " << args << "\nstderr: " << r.err);
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Catch::Contains(b.needle));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(cli("filter show " + dev).out == shown);
    }
    {
        // cgroup v1 only (a mountinfo without cgroup2): refused by filter add and run.
        setenv("PSPXDP_TEST_MOUNTINFO", v1only.c_str(), 1);
        auto r = cli("filter add " + dev + " cgroup " + top + " classid 1:1");
        auto r2 = cli("run " + dev + " --class 1:1 -- true");
        unsetenv("PSPXDP_TEST_MOUNTINFO");
        unlink(v1only.c_str());
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Catch::Contains("no cgroup2 file system is mounted"));
        CHECK(r2.code == 2);
        CHECK_THAT(r2.err, Catch::Contains("no cgroup2 file system is mounted"));
        CHECK(cli("filter show " + dev).out == shown);
    }
    // prio-direct: save says it, change and apply set it.
    CHECK_THAT(cli("save " + dev).out, Catch::Contains("\nprio-direct on\n"));
    REQUIRE(cli("change " + dev + " prio-direct off").code == 0);
    const std::string saved = cli("save " + dev).out;
    CHECK_THAT(saved, Catch::Contains("\nprio-direct off\n"));
    CHECK_THAT(saved, Catch::Contains("\nfilter pref 49152 proto tcp dport 873 cgroup " + top +
                                      " classid 1:2\n"));
    const std::string file = "/tmp/psp-saved-" + std::to_string(getpid());
    {
        std::ofstream f(file);
        f << saved;
    }
    CHECK_THAT(cli("apply " + dev + " " + file).out, Catch::Contains("nothing to change"));
    {
        // The cgroup by its whole path: the same filter.
        std::string whole = saved;
        whole.replace(whole.find("cgroup " + top), 7 + top.size(), "cgroup " + mount->dir + top);
        std::ofstream f(file);
        f << whole;
    }
    CHECK_THAT(cli("apply " + dev + " " + file).out, Catch::Contains("nothing to change"));
    {
        std::ofstream f(file);
        f << saved;
    }
    // The cgroup removed: show says so, and apply(save) still changes nothing.
    rmdir((mount->dir + top).c_str());
    CHECK_THAT(cli("filter show " + dev).out,
               Catch::Contains("cgroup " + top + " classid 1:2  # the cgroup no longer exists"));
    CHECK_THAT(cli("apply " + dev + " " + file).out, Catch::Contains("nothing to change"));
    {
        std::ofstream f(file);
        f << "prio-direct on\n";
        for (const auto &line : {"class 1:1 normal", "class 1:2 normal", "class 1:ffff normal"})
            f << line << "\n";
    }
    auto r = cli("apply " + dev + " " + file);
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK_THAT(cli("save " + dev).out, Catch::Contains("\nprio-direct on\n"));
    CHECK(cli("filter show " + dev).out.empty());
    unlink(file.c_str());
}
