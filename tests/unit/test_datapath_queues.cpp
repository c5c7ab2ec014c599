// The pure parts of the packet path: ECN marking on crafted frames, the
// intrusive per-class FIFOs, and the overflow rule (drop from the longest).
#include "datapath/ecn.hpp"
#include "datapath/frame_fifo.hpp"
#include "datapath/overflow.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <vector>

using namespace pspxdp::datapath;

namespace {

using Bytes = std::vector<uint8_t>;

Bytes eth(uint16_t type, std::vector<uint16_t> tpids = {}) {
    Bytes b = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
    for (uint16_t t : tpids) {
        b.push_back(uint8_t(t >> 8));
        b.push_back(uint8_t(t));
        b.push_back(0x00);
        b.push_back(0x64); // VID 100
    }
    b.push_back(uint8_t(type >> 8));
    b.push_back(uint8_t(type));
    return b;
}

// One's complement sum of 16-bit words: 0xffff over a correct IPv4 header.
uint16_t ones_sum(const uint8_t *p, size_t len) {
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < len; i += 2) s += uint32_t(p[i] << 8 | p[i + 1]);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return uint16_t(s);
}

Bytes ipv4(uint8_t tos, bool fix_checksum = true) {
    Bytes h = {0x45, tos, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 64, 6,
               0,    0,   10,   0,    0,    1,    10,   0,    0,  2};
    if (fix_checksum) {
        uint16_t c = uint16_t(~ones_sum(h.data(), h.size()));
        h[10] = uint8_t(c >> 8);
        h[11] = uint8_t(c);
    }
    h.resize(h.size() + 64, 0xab); // TCP header and payload: never touched
    return h;
}

Bytes ipv6(uint8_t tclass) {
    Bytes h(40, 0);
    h[0] = uint8_t(0x60 | tclass >> 4);
    h[1] = uint8_t(tclass << 4 | 0x0a); // flow label bits after the traffic class
    h[2] = 0xbc;
    h[3] = 0xde;
    h[5] = 64;
    h[6] = 6;
    h[7] = 64;
    h.resize(h.size() + 64, 0xab);
    return h;
}

Bytes cat(Bytes a, const Bytes &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

TEST_CASE("ECN: IPv4 ECT frames get CE, the header checksum stays right", "[ecn]") {
    // DSCP values around the ECN bits, every ECN codepoint.
    for (uint8_t dscp : {0x00, 0x28, 0xb8, 0xfc}) {
        for (uint8_t ecn : {0, 1, 2, 3}) {
            for (auto tags : {std::vector<uint16_t>{}, {0x8100}, {0x88a8, 0x8100}}) {
                Bytes f = cat(eth(0x0800, tags), ipv4(uint8_t(dscp | ecn)));
                const Bytes before = f;
                const size_t ip = 14 + 4 * tags.size();
                INFO("dscp " << int(dscp) << " ecn " << int(ecn) << " tags " << tags.size());
                EcnMark m = mark_ce(f.data(), uint32_t(f.size()));
                if (ecn == 1 || ecn == 2) {
                    CHECK(m == EcnMark::Marked);
                    CHECK(f[ip + 1] == (dscp | 3));
                    CHECK(ones_sum(f.data() + ip, 20) == 0xffff); // checksum still valid
                    // Nothing else changed.
                    Bytes a = f, b = before;
                    a[ip + 1] = b[ip + 1] = 0;
                    a[ip + 10] = b[ip + 10] = a[ip + 11] = b[ip + 11] = 0;
                    CHECK(a == b);
                } else {
                    CHECK(m == (ecn == 0 ? EcnMark::NotEct : EcnMark::AlreadyCe));
                    CHECK(f == before);
                }
            }
        }
    }
}

TEST_CASE("ECN: the IPv4 update is incremental (RFC 1624): a wrong checksum stays wrong", "[ecn]") {
    Bytes f = cat(eth(0x0800), ipv4(0x02));
    f[14 + 10] ^= 0x11; // corrupt
    const uint16_t wrong = ones_sum(f.data() + 14, 20);
    REQUIRE(wrong != 0xffff);
    CHECK(mark_ce(f.data(), uint32_t(f.size())) == EcnMark::Marked);
    CHECK(ones_sum(f.data() + 14, 20) == wrong);
    // Every checksum value, including the ones around 0x0000/0xffff.
    for (uint32_t c = 0; c <= 0xffff; c += 0x0101) {
        Bytes g = cat(eth(0x0800), ipv4(0x01, false));
        g[14 + 10] = uint8_t(c >> 8);
        g[14 + 11] = uint8_t(c);
        // Make the header sum right by adjusting the identification field.
        uint16_t s = ones_sum(g.data() + 14, 20);
        uint32_t id = uint32_t(g[14 + 4] << 8 | g[14 + 5]) + uint16_t(0xffff - s);
        id = (id & 0xffff) + (id >> 16);
        g[14 + 4] = uint8_t(id >> 8);
        g[14 + 5] = uint8_t(id);
        REQUIRE(ones_sum(g.data() + 14, 20) == 0xffff);
        CHECK(mark_ce(g.data(), uint32_t(g.size())) == EcnMark::Marked);
        CHECK(ones_sum(g.data() + 14, 20) == 0xffff);
    }
}

TEST_CASE("ECN: IPv6 ECT frames get CE in the traffic class, nothing else moves", "[ecn]") {
    for (uint8_t dscp : {0x00, 0x28, 0xfc}) {
        for (uint8_t ecn : {0, 1, 2, 3}) {
            for (auto tags : {std::vector<uint16_t>{}, {0x8100}, {0x9100, 0x8100}}) {
                Bytes f = cat(eth(0x86dd, tags), ipv6(uint8_t(dscp | ecn)));
                const Bytes before = f;
                const size_t ip = 14 + 4 * tags.size();
                EcnMark m = mark_ce(f.data(), uint32_t(f.size()));
                if (ecn == 1 || ecn == 2) {
                    CHECK(m == EcnMark::Marked);
                    uint8_t tc = uint8_t((f[ip] & 0x0f) << 4 | f[ip + 1] >> 4);
                    CHECK(tc == (dscp | 3));
                    CHECK((f[ip + 1] & 0x0f) == 0x0a); // flow label untouched
                    Bytes a = f, b = before;
                    a[ip + 1] = b[ip + 1] = 0;
                    CHECK(a == b);
                } else {
                    CHECK(m == (ecn == 0 ? EcnMark::NotEct : EcnMark::AlreadyCe));
                    CHECK(f == before);
                }
            }
        }
    }
}

TEST_CASE("ECN: what is not plainly IP is left alone", "[ecn]") {
    SECTION("ARP, PAUSE") {
        for (uint16_t type : {0x0806, 0x8808}) {
            Bytes f = cat(eth(type), ipv4(0x02));
            const Bytes before = f;
            CHECK(mark_ce(f.data(), uint32_t(f.size())) == EcnMark::NotIp);
            CHECK(f == before);
        }
    }
    SECTION("three VLAN tags") {
        Bytes f = cat(eth(0x0800, {0x88a8, 0x8100, 0x8100}), ipv4(0x02));
        const Bytes before = f;
        CHECK(mark_ce(f.data(), uint32_t(f.size())) == EcnMark::NotIp);
        CHECK(f == before);
    }
    SECTION("truncated anywhere before the end of the IP header") {
        const Bytes v4 = cat(eth(0x0800, {0x8100}), ipv4(0x02));
        const Bytes v6 = cat(eth(0x86dd), ipv6(0x01));
        for (const Bytes *full : {&v4, &v6}) {
            size_t header_end = full == &v4 ? 18 + 20 : 14 + 40;
            for (size_t len = 0; len < header_end; ++len) {
                Bytes f = *full;
                CHECK(mark_ce(f.data(), uint32_t(len)) == EcnMark::NotIp);
                CHECK(f == *full);
            }
            Bytes f = *full;
            CHECK(mark_ce(f.data(), uint32_t(header_end)) == EcnMark::Marked);
        }
    }
    SECTION("IPv4 ethertype, version 6 or IHL < 5") {
        Bytes f = cat(eth(0x0800), ipv4(0x02));
        f[14] = 0x65;
        CHECK(mark_ce(f.data(), uint32_t(f.size())) == EcnMark::NotIp);
        f[14] = 0x44;
        CHECK(mark_ce(f.data(), uint32_t(f.size())) == EcnMark::NotIp);
    }
}

TEST_CASE("frame FIFOs: intrusive, in order, any number interleaved", "[fifo]") {
    FrameTable t(64);
    std::vector<FrameFifo> q(5);
    std::vector<std::vector<uint32_t>> model(5);
    std::vector<uint32_t> free_frames(64);
    std::iota(free_frames.begin(), free_frames.end(), 0);
    uint64_t seed = 12345;
    auto rnd = [&] {
        return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33;
    };
    for (int step = 0; step < 20000; ++step) {
        uint32_t k = uint32_t(rnd() % 5);
        if (!free_frames.empty() && rnd() % 2) {
            uint32_t f = free_frames.back();
            free_frames.pop_back();
            t[f].len = uint16_t(f + 1);
            q[k].push(t, f, f + 1);
            model[k].push_back(f);
        } else if (!q[k].empty()) {
            uint32_t head = q[k].head;
            uint32_t f = q[k].pop(t, t[head].len);
            REQUIRE(f == model[k].front());
            model[k].erase(model[k].begin());
            free_frames.push_back(f);
        }
        REQUIRE(q[k].frames == model[k].size());
        uint64_t bytes = 0;
        for (uint32_t f : model[k]) bytes += f + 1;
        REQUIRE(q[k].bytes == bytes);
    }
}

TEST_CASE("frame FIFOs: truncate keeps the oldest, hands back the rest in order", "[fifo]") {
    FrameTable t(16);
    FrameFifo q;
    for (uint32_t f : {3u, 7u, 1u, 9u, 4u}) q.push(t, f, 10);
    uint32_t rest = q.truncate_after(t, 7, 2, 20);
    CHECK(q.frames == 2);
    CHECK(q.bytes == 20);
    CHECK(q.tail == 7);
    std::vector<uint32_t> cut;
    for (uint32_t f = rest; f != kNoFrame; f = t[f].next) cut.push_back(f);
    CHECK(cut == std::vector<uint32_t>{1, 9, 4});
    q.push(t, 5, 10); // still a working FIFO
    CHECK(q.pop(t, 10) == 3);
    CHECK(q.pop(t, 10) == 7);
    CHECK(q.pop(t, 10) == 5);
    CHECK(q.empty());
    // Keep nothing.
    q.push(t, 2, 10);
    q.push(t, 6, 10);
    rest = q.truncate_after(t, kNoFrame, 0, 0);
    CHECK(q.empty());
    CHECK(q.head == kNoFrame);
    CHECK(rest == 2);
    CHECK(t[2].next == 6);
}

namespace {
// The reference: drop one frame at a time from the longest backlog (the
// first one listed among equals).
std::map<uint32_t, uint32_t> one_by_one(std::vector<Backlog> b, uint64_t need) {
    std::map<uint32_t, uint32_t> cut;
    for (uint64_t i = 0; i < need; ++i) {
        auto it = std::max_element(b.begin(), b.end(), [](const Backlog &x, const Backlog &y) {
            return x.frames < y.frames;
        });
        if (it == b.end() || it->frames == 0) break;
        --it->frames;
        ++cut[it->id];
    }
    return cut;
}
} // namespace

TEST_CASE("overflow: the batch equals dropping one at a time from the longest", "[overflow]") {
    uint64_t seed = 99;
    auto rnd = [&] {
        return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33;
    };
    for (int round = 0; round < 2000; ++round) {
        std::vector<Backlog> b;
        size_t n = 1 + rnd() % 12;
        uint64_t total = 0;
        for (size_t i = 0; i < n; ++i) {
            uint32_t frames = uint32_t(rnd() % (round % 3 == 0 ? 4 : 200));
            b.push_back(Backlog{uint32_t(100 + i), frames});
            total += frames;
        }
        uint64_t need = rnd() % (total + 10);
        auto ref = one_by_one(b, need);
        auto copy = b;
        auto cuts = plan_overflow(copy, need);
        std::map<uint32_t, uint32_t> got;
        uint64_t sum = 0;
        for (const auto &c : cuts) {
            REQUIRE(c.frames > 0);
            got[c.id] += c.frames;
            sum += c.frames;
        }
        INFO("round " << round << " need " << need << " total " << total);
        CHECK(sum == std::min(need, total));
        // Same amount from each class up to how ties at the last level are
        // broken: compare the backlogs left, sorted.
        std::vector<uint32_t> left_ref, left_got;
        for (const auto &x : b) {
            left_ref.push_back(x.frames - (ref.count(x.id) ? ref[x.id] : 0));
            left_got.push_back(x.frames - (got.count(x.id) ? got[x.id] : 0));
        }
        std::sort(left_ref.begin(), left_ref.end());
        std::sort(left_got.begin(), left_got.end());
        CHECK(left_ref == left_got);
    }
}

TEST_CASE("overflow: a class within its share loses nothing", "[overflow]") {
    // 4 classes share 400 frames (100 each); one hog holds 250.
    std::vector<Backlog> b = {{1, 50}, {2, 250}, {3, 80}, {4, 20}};
    auto cuts = plan_overflow(b, 64);
    REQUIRE(cuts.size() == 1);
    CHECK(cuts[0].id == 2);
    CHECK(cuts[0].frames == 64);
    // Two hogs: both come down to a common level.
    std::vector<Backlog> c = {{1, 10}, {2, 300}, {3, 200}, {4, 5}};
    cuts = plan_overflow(c, 200);
    std::map<uint32_t, uint32_t> m;
    for (auto &x : cuts) m[x.id] = x.frames;
    CHECK(m.size() == 2);
    CHECK(m[2] == 150); // 300 -> 150
    CHECK(m[3] == 50);  // 200 -> 150
}
