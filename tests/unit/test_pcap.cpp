// Capture files into traces: a pcap is written with libpcap and read back.
#include "capture/pcap_trace.hpp"
#include "core/framing.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

using namespace pspxdp;

namespace {

using Bytes = std::vector<uint8_t>;

void put16(Bytes &b, uint16_t v) {
    b.push_back(uint8_t(v >> 8));
    b.push_back(uint8_t(v));
}

Bytes eth_header(std::initializer_list<uint16_t> tags, uint16_t type) {
    Bytes b = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
    for (uint16_t tpid : tags) {
        put16(b, tpid);
        put16(b, 100); // VLAN id
    }
    put16(b, type);
    return b;
}

void put_l4(Bytes &b, uint16_t sport, uint16_t dport) {
    put16(b, sport);
    put16(b, dport);
    put16(b, 8); // UDP length / TCP seq: the selector reads only the ports
    put16(b, 0);
}

Bytes ipv4(std::initializer_list<uint16_t> tags, const char *src, const char *dst, uint8_t proto,
           uint16_t sport, uint16_t dport, uint16_t frag_offset = 0) {
    Bytes b = eth_header(tags, 0x0800);
    size_t ip = b.size();
    b.resize(ip + 20, 0);
    b[ip] = 0x45;
    b[ip + 6] = uint8_t(frag_offset >> 8);
    b[ip + 7] = uint8_t(frag_offset);
    b[ip + 8] = 64;
    b[ip + 9] = proto;
    REQUIRE(inet_pton(AF_INET, src, &b[ip + 12]) == 1);
    REQUIRE(inet_pton(AF_INET, dst, &b[ip + 16]) == 1);
    put_l4(b, sport, dport);
    return b;
}

Bytes ipv6(const char *src, const char *dst, uint8_t proto, uint16_t sport, uint16_t dport,
           bool hop_by_hop = false) {
    Bytes b = eth_header({}, 0x86dd);
    size_t ip = b.size();
    b.resize(ip + 40, 0);
    b[ip] = 0x60;
    b[ip + 6] = hop_by_hop ? 0 : proto;
    b[ip + 7] = 64;
    REQUIRE(inet_pton(AF_INET6, src, &b[ip + 8]) == 1);
    REQUIRE(inet_pton(AF_INET6, dst, &b[ip + 24]) == 1);
    if (hop_by_hop) { // 8 bytes: next header, length 0, padding
        b.push_back(proto);
        b.resize(b.size() + 7, 0);
    }
    put_l4(b, sport, dport);
    return b;
}

struct Packet {
    Bytes bytes;
    uint32_t len; // on the wire (>= bytes.size(): the rest was not captured)
    uint64_t time_ns;
};

class TempFile {
  public:
    TempFile() {
        auto tmpl = (std::filesystem::temp_directory_path() / "pspxdp-test-XXXXXX").string();
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back(0);
        int fd = mkstemp(buf.data());
        REQUIRE(fd >= 0);
        close(fd);
        path_ = buf.data();
    }
    ~TempFile() { std::remove(path_.c_str()); }
    const std::string &path() const { return path_; }

  private:
    std::string path_;
};

void write_pcap(const std::string &path, const std::vector<Packet> &packets, bool nano,
                int link = DLT_EN10MB) {
    pcap_t *dead = pcap_open_dead_with_tstamp_precision(
        link, 65535, nano ? PCAP_TSTAMP_PRECISION_NANO : PCAP_TSTAMP_PRECISION_MICRO);
    REQUIRE(dead);
    pcap_dumper_t *dumper = pcap_dump_open(dead, path.c_str());
    REQUIRE(dumper);
    for (const auto &p : packets) {
        pcap_pkthdr hdr{};
        uint64_t sub = nano ? 1'000'000'000 : 1'000'000;
        uint64_t t = nano ? p.time_ns : p.time_ns / 1000;
        hdr.ts.tv_sec = time_t(t / sub);
        hdr.ts.tv_usec = suseconds_t(t % sub);
        hdr.caplen = uint32_t(p.bytes.size());
        hdr.len = p.len;
        pcap_dump(reinterpret_cast<u_char *>(dumper), &hdr, p.bytes.data());
    }
    pcap_dump_close(dumper);
    pcap_close(dead);
}

Packet frame(Bytes bytes, uint64_t time_ns, uint32_t len = 0) {
    uint32_t l = len ? len : std::max<uint32_t>(uint32_t(bytes.size()), 60);
    if (!len) bytes.resize(l, 0); // pad the captured bytes to the frame length
    return Packet{std::move(bytes), l, time_ns};
}

std::vector<FlowSelector> selectors(std::initializer_list<const char *> texts) {
    std::vector<FlowSelector> out;
    for (const char *t : texts) {
        auto s = parse_flow_selector(t);
        INFO(t << ": " << s.error());
        REQUIRE(s.ok());
        out.push_back(*s);
    }
    return out;
}

} // namespace

TEST_CASE("pcap: flows, lengths and times read back", "[pcap]") {
    auto pause = build_pause_frame({0x02, 0, 0, 0, 0, 9}, 200, Framing{});
    REQUIRE(pause.ok());
    Bytes arp = eth_header({}, 0x0806);
    arp.resize(42, 0);
    Bytes big = ipv4({}, "10.9.0.2", "10.9.0.3", 6, 1, 2); // captured only 30 bytes of it
    big.resize(30);

    const uint64_t t0 = 1'700'000'000'123'456'789ull;
    std::vector<Packet> packets = {
        frame(ipv4({}, "10.9.0.1", "10.9.0.2", 17, 4000, 5001), t0, 1514),          // 0
        frame(ipv4({}, "10.9.0.1", "10.9.0.3", 6, 33000, 80), t0 + 1),              // 1
        frame(ipv6("2001:db8::1", "2001:db8::2", 17, 4000, 5001), t0 + 2),          // 2
        frame(ipv4({0x8100}, "10.9.0.1", "10.9.0.2", 17, 4000, 5001), t0 + 3),      // 3
        frame(ipv4({0x88a8, 0x8100}, "10.9.0.1", "10.9.0.2", 17, 9, 5001), t0 + 4), // 4
        frame(*pause, t0 + 5),                                                      // 5
        frame(arp, t0 + 6),                                                         // 6
        frame(ipv4({}, "10.9.0.1", "10.9.0.2", 17, 4000, 5001, 185), t0 + 7),       // 7 fragment
        frame(ipv6("2001:db9::1", "2001:db9::2", 17, 1, 5001, true), t0 + 8),       // 8
        frame(ipv4({}, "10.8.0.1", "10.8.0.2", 17, 4000, 5002), t0 + 9),            // 9
        Packet{big, 1514, t0 + 10},                                                 // 10 cut short
        frame(ipv6("2001:db9::1", "2001:db9::2", 6, 1, 5001), t0 + 11),             // 11 tcp
    };
    // Packet 0 is a 1514 B frame of which only 100 B were captured (snaplen):
    // the trace must carry the length on the wire, not the captured one.
    packets[0].bytes.resize(100);

    auto sel = selectors({"dst 10.9.0.2 proto udp dport 5001", "dst 2001:db8::/32",
                          "dst 10.9.0.0/24", "proto udp dport 5001"});
    TempFile file;
    for (bool nano : {true, false}) {
        write_pcap(file.path(), packets, nano);
        auto trace = read_pcap_trace(file.path(), sel);
        INFO("nano " << nano << ": " << trace.error());
        REQUIRE(trace.ok());
        const auto &fr = trace->frames;
        REQUIRE(fr.size() == packets.size());
        const uint32_t expected_flow[] = {0,          2, 1, 0,          0,          kFlowGap,
                                          kFlowOther, 2, 3, kFlowOther, kFlowOther, kFlowOther};
        for (size_t i = 0; i < fr.size(); ++i) {
            INFO("packet " << i);
            CHECK(fr[i].flow == expected_flow[i]);
            CHECK(fr[i].len == packets[i].len);
            uint64_t t = nano ? packets[i].time_ns : packets[i].time_ns / 1000 * 1000;
            CHECK(fr[i].time_ns == t);
        }
        CHECK(fr[0].len == 1514);
        CHECK(fr[5].len == 200);
        CHECK(trace->short_frames == 1); // packet 10
        CHECK(trace->nanosecond_file == nano);
        CHECK_FALSE(trace->drop_stats_available);
        CHECK_FALSE(trace->drop_stats_note.empty());
    }

    // Without selectors everything but the PAUSE frame is "other".
    auto all = read_pcap_trace(file.path(), {});
    REQUIRE(all.ok());
    for (size_t i = 0; i < all->frames.size(); ++i)
        CHECK(all->frames[i].flow == (i == 5 ? kFlowGap : kFlowOther));
    CHECK(all->short_frames == 0);
}

TEST_CASE("pcap: read errors are one line naming the file", "[pcap]") {
    auto one_line = [](const std::string &e, const std::string &path) {
        INFO(e);
        CHECK(e.find('\n') == std::string::npos);
        CHECK(e.find(path) != std::string::npos);
    };
    auto missing = read_pcap_trace("/nonexistent/x.pcap", {});
    REQUIRE_FALSE(missing.ok());
    one_line(missing.error(), "/nonexistent/x.pcap");
    CHECK(missing.error().find("No such file") != std::string::npos);

    TempFile file;
    {
        FILE *f = std::fopen(file.path().c_str(), "wb");
        REQUIRE(f);
        std::fputs("this is not a capture file at all", f);
        std::fclose(f);
    }
    auto garbage = read_pcap_trace(file.path(), {});
    REQUIRE_FALSE(garbage.ok());
    one_line(garbage.error(), file.path());

    write_pcap(file.path(), {frame(Bytes(40, 0x45), 0)}, false, DLT_RAW);
    auto raw = read_pcap_trace(file.path(), {});
    REQUIRE_FALSE(raw.ok());
    one_line(raw.error(), file.path());
    CHECK(raw.error().find("not Ethernet") != std::string::npos);

    // A capture cut off in the middle of its 2nd packet.
    auto pkt = frame(ipv4({}, "10.0.0.1", "10.0.0.2", 17, 1, 2), 0, 0);
    write_pcap(file.path(), {pkt, pkt}, true);
    std::filesystem::resize_file(file.path(), std::filesystem::file_size(file.path()) - 10);
    auto cut = read_pcap_trace(file.path(), {});
    REQUIRE_FALSE(cut.ok());
    one_line(cut.error(), file.path());
    CHECK(cut.error().find("after 1 packets") != std::string::npos);
}

TEST_CASE("pcap: selector syntax", "[pcap]") {
    auto s = parse_flow_selector("  DST 10.0.0.1/24   proto UDP  sport 53 ");
    REQUIRE(s.ok());
    CHECK(s->dst.set);
    CHECK_FALSE(s->dst.v6);
    CHECK(s->dst.prefix_len == 24);
    CHECK(s->dst.addr[3] == 0); // host bits cleared
    CHECK(*s->proto == 17);
    CHECK(*s->sport == 53);
    CHECK_FALSE(s->dport);
    CHECK_FALSE(s->src.set);

    auto v6 = parse_flow_selector("src 2001:db8::1/64 proto 132 dport 9");
    REQUIRE(v6.ok());
    CHECK(v6->src.v6);
    CHECK(v6->src.prefix_len == 64);
    CHECK(v6->src.addr[15] == 0);
    CHECK(*v6->proto == 132);
    CHECK(parse_flow_selector("dst ::/0").ok());
    CHECK(parse_flow_selector("proto icmp6").ok());

    auto error_of = [](const char *text) {
        auto r = parse_flow_selector(text);
        INFO(text);
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().starts_with("selector \"" + std::string(text) + "\": "));
        CHECK(r.error().find('\n') == std::string::npos);
        return r.error();
    };
    CHECK_THAT(error_of(""), Catch::Contains("empty"));
    CHECK_THAT(error_of("   "), Catch::Contains("empty"));
    CHECK_THAT(error_of("dst"), Catch::Contains("\"dst\" needs a value"));
    CHECK_THAT(error_of("dst 10.0.0.300"),
               Catch::Contains("\"10.0.0.300\" is not an IPv4 or IPv6 address"));
    CHECK_THAT(error_of("dst 10.0.0.0/33"), Catch::Contains("prefix length must be 0..32"));
    CHECK_THAT(error_of("dst 2001:db8::/129"), Catch::Contains("prefix length must be 0..128"));
    CHECK_THAT(error_of("dst 10.0.0.0/"), Catch::Contains("prefix length"));
    CHECK_THAT(error_of("dport 0"), Catch::Contains("must be 1..65535"));
    CHECK_THAT(error_of("dport 70000"), Catch::Contains("must be 1..65535"));
    CHECK_THAT(error_of("sport http"), Catch::Contains("must be 1..65535"));
    CHECK_THAT(error_of("proto foo"), Catch::Contains("unknown protocol \"foo\""));
    CHECK_THAT(error_of("proto 256"), Catch::Contains("unknown protocol"));
    CHECK_THAT(error_of("proto icmp dport 1"), Catch::Contains("ports need proto"));
    CHECK_THAT(error_of("src 10.0.0.1 dst ::1"), Catch::Contains("different address families"));
    CHECK_THAT(error_of("dst 1.2.3.4 dst 1.2.3.5"), Catch::Contains("\"dst\" given twice"));
    CHECK_THAT(error_of("port 80"), Catch::Contains("unknown keyword \"port\""));
}

TEST_CASE("pcap: selector matching on single frames", "[pcap]") {
    auto sel = selectors({"src 10.1.0.0/16", "dst 10.9.0.2 proto tcp", "sport 7"})[0];
    auto v4 = ipv4({}, "10.1.200.3", "10.9.0.2", 6, 7, 8);
    CHECK(selector_matches(sel, v4.data(), uint32_t(v4.size())));
    auto other = ipv4({}, "10.2.0.1", "10.9.0.2", 6, 7, 8);
    CHECK_FALSE(selector_matches(sel, other.data(), uint32_t(other.size())));
    // An IPv4 selector never matches IPv6.
    auto v6 = ipv6("::ffff:10.1.0.1", "::1", 6, 7, 8);
    CHECK_FALSE(selector_matches(sel, v6.data(), uint32_t(v6.size())));
    // Cut before the source address: no match, not a crash.
    CHECK_FALSE(selector_matches(sel, v4.data(), 20));

    auto all = selectors({"dst 10.9.0.2 proto tcp", "sport 7"});
    CHECK(classify_frame(all, v4.data(), uint32_t(v4.size())) == 0);
    auto udp = ipv4({}, "10.2.0.1", "10.9.0.2", 17, 7, 8);
    CHECK(classify_frame(all, udp.data(), uint32_t(udp.size())) == 1);
    auto pause = build_pause_frame({2, 0, 0, 0, 0, 1}, 60, Framing{});
    REQUIRE(pause.ok());
    CHECK(classify_frame(all, pause->data(), 60) == kFlowGap);
    auto miss = ipv4({}, "10.2.0.1", "10.9.0.2", 17, 9, 8);
    CHECK(classify_frame(all, miss.data(), uint32_t(miss.size())) == kFlowOther);
}
