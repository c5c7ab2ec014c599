// Filter selector text <-> rules_* map keys (user/control/selector.hpp).
#include <catch2/catch.hpp>

#include "control/selector.hpp"

#include <string>
#include <vector>

using namespace pspxdp::control;

namespace {

pspxdp::Result<Selector> parse(std::vector<std::string> words) {
    return parse_selector(std::span<const std::string>(words));
}

} // namespace

TEST_CASE("selector: IPv4 prefixes", "[control]") {
    auto s = parse({"dst", "192.168.2.0/24"});
    REQUIRE(s);
    CHECK(s->kind == Selector::Kind::Dst);
    CHECK(s->family == 4);
    CHECK(s->prefixlen == 24);
    CHECK(std::string(s->map_name()) == "rules_dst_v4");
    auto k = s->lpm_v4();
    CHECK(k.prefixlen == 24);
    CHECK(k.addr[0] == 192);
    CHECK(k.addr[1] == 168);
    CHECK(k.addr[2] == 2);
    CHECK(k.addr[3] == 0);
    CHECK(format_selector(*s) == "dst 192.168.2.0/24");

    auto host = parse({"src", "10.1.2.3"});
    REQUIRE(host);
    CHECK(host->prefixlen == 32);
    CHECK(std::string(host->map_name()) == "rules_src_v4");
    CHECK(format_selector(*host) == "src 10.1.2.3/32");

    auto all = parse({"dst", "0.0.0.0/0"});
    REQUIRE(all);
    CHECK(all->prefixlen == 0);
}

TEST_CASE("selector: IPv6 prefixes", "[control]") {
    auto s = parse({"src", "2001:db8::/32"});
    REQUIRE(s);
    CHECK(s->family == 6);
    CHECK(s->prefixlen == 32);
    CHECK(std::string(s->map_name()) == "rules_src_v6");
    auto k = s->lpm_v6();
    CHECK(k.addr[0] == 0x20);
    CHECK(k.addr[1] == 0x01);
    CHECK(k.addr[2] == 0x0d);
    CHECK(k.addr[3] == 0xb8);
    CHECK(format_selector(*s) == "src 2001:db8::/32");
    auto h = parse({"dst", "fe80::1"});
    REQUIRE(h);
    CHECK(h->prefixlen == 128);
    CHECK(std::string(h->map_name()) == "rules_dst_v6");
}

TEST_CASE("selector: ports", "[control]") {
    auto u = parse({"proto", "udp", "dport", "5001"});
    REQUIRE(u);
    CHECK(u->kind == Selector::Kind::Port);
    auto k = u->port_key();
    CHECK(k.proto == IPPROTO_UDP);
    CHECK(k.dir == PSPXDP_PORT_DST);
    CHECK(k.port == 5001); // host order, as the classifier compares it
    CHECK(format_selector(*u) == "proto udp dport 5001");

    auto t = parse({"sport", "80", "proto", "tcp"}); // order of words is free
    REQUIRE(t);
    CHECK(t->port_key().proto == IPPROTO_TCP);
    CHECK(t->port_key().dir == PSPXDP_PORT_SRC);
    CHECK(t->port_key().port == 80);
    CHECK(format_selector(*t) == "proto tcp sport 80");
    CHECK(parse({"proto", "tcp", "dport", "65535"}));
}

TEST_CASE("selector: refused forms say why", "[control]") {
    struct Bad {
        std::vector<std::string> words;
        const char *needle;
    };
    const Bad bad[] = {
        {{}, "missing selector"},
        {{"dst"}, "needs a value"},
        {{"dst", "192.168.2.1/24"}, "host bits"},
        {{"dst", "192.168.2.0/33"}, "33 > 32"},
        {{"dst", "2001:db8::/129"}, "129 > 128"},
        {{"dst", "192.168.2.0/"}, "missing length"},
        {{"dst", "192.168.2.0/2x"}, "not a number"},
        {{"dst", "192.168.300.0/24"}, "not an IPv4 or IPv6"},
        {{"src", "2001:db8::1/32"}, "host bits"},
        {{"proto", "udp", "dport", "0"}, "1..65535"},
        {{"proto", "udp", "dport", "65536"}, "1..65535"},
        {{"proto", "udp", "dport", "-1"}, "1..65535"},
        {{"proto", "udp", "dport", "80x"}, "1..65535"},
        {{"proto", "icmp", "dport", "1"}, "tcp or udp"},
        {{"dport", "80"}, "proto tcp|udp"},
        {{"proto", "tcp"}, "dport PORT"},
        {{"proto", "tcp", "dport", "1", "sport", "2"}, "only one of dport/sport"},
        {{"dst", "10.0.0.0/8", "src", "10.0.0.0/8"}, "only one of dst/src"},
        {{"dst", "10.0.0.0/8", "proto", "tcp", "dport", "1"}, "not both"},
        {{"via", "10.0.0.1"}, "unknown selector word"},
    };
    for (const auto &b : bad) {
        auto r = parse(b.words);
        std::string joined;
        for (const auto &w : b.words) joined += w + " ";
        INFO("selector: " << joined);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error(), Catch::Contains(b.needle));
        CHECK(r.error().find('\n') == std::string::npos); // one line
    }
}

TEST_CASE("selector: format and parse round-trip", "[control]") {
    for (const char *text : {"dst 192.168.2.0/24", "src 10.0.0.0/8", "dst 2001:db8:1::/48",
                             "src ::/0", "proto udp dport 5001", "proto tcp sport 80"}) {
        std::vector<std::string> words;
        std::string t = text;
        for (size_t pos = 0; pos != std::string::npos;) {
            size_t sp = t.find(' ', pos);
            words.push_back(t.substr(pos, sp == std::string::npos ? sp : sp - pos));
            pos = sp == std::string::npos ? sp : sp + 1;
        }
        auto s = parse(words);
        REQUIRE(s);
        CHECK(format_selector(*s) == text);
        auto again = parse(words);
        CHECK(*again == *s);
    }
}
