// Flows inside a class (datapath/flow_queues.hpp) against models: DRR's
// byte fairness, new flows first, CoDel's drop times from RFC 8289's
// pseudo-code written out here independently, ECN marking instead of drops,
// the pool reclaiming only empty flows, and no frame lost or reordered
// within its flow under random operations.
#include "datapath/flow_queues.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <vector>

using namespace pspxdp::datapath;

namespace {

constexpr uint32_t kQuantum = 1518;

// Drops (and marks nothing) or marks everything, recording what it saw.
struct Recorder final : AqmVerdict {
    bool ecn = false;
    std::vector<uint32_t> dropped, marked;
    bool mark(uint32_t, uint32_t frame) override {
        if (!ecn) return false;
        marked.push_back(frame);
        return true;
    }
    void drop(uint32_t, uint32_t frame) override { dropped.push_back(frame); }
};

struct Fixture {
    FrameTable table;
    FlowQueues q;
    Recorder verdict;
    FlowAqm aqm;
    explicit Fixture(uint32_t frames) : table(frames), q(table, frames, kQuantum) {
        aqm.enabled = false;
    }
    uint32_t send(uint32_t cls, uint64_t now = 0) {
        if (q.head(cls, aqm, now, verdict) == kNoFrame) return kNoFrame;
        return q.pop(cls);
    }
};

} // namespace

TEST_CASE("flow queues: DRR serves backlogged flows equal bytes, whatever their frame sizes",
          "[flows]") {
    Fixture fx(3000);
    // Flow 1: 1500-byte frames; flow 2: 100-byte frames; both stay backlogged.
    std::map<uint32_t, uint32_t> flow_of_frame;
    uint32_t next = 0;
    for (int i = 0; i < 300; ++i) {
        flow_of_frame[next] = 1;
        fx.q.enqueue(0, 1, next++, 1500, 0);
    }
    for (int i = 0; i < 2600; ++i) {
        flow_of_frame[next] = 2;
        fx.q.enqueue(0, 2, next++, 100, 0);
    }
    std::map<uint32_t, uint64_t> served;
    uint64_t total = 0;
    while (total < 200'000) {
        const uint32_t f = fx.send(0);
        REQUIRE(f != kNoFrame);
        const uint32_t b = fx.q.frame_bytes(f);
        served[flow_of_frame[f]] += b;
        total += b;
        // DRR's bound: at any point the backlogged flows' bytes differ by
        // less than a quantum plus a largest frame.
        const int64_t d = int64_t(served[1]) - int64_t(served[2]);
        REQUIRE(std::llabs(d) < int64_t(kQuantum + 1500));
    }
}

TEST_CASE("flow queues: a new flow goes before a bulk backlog; one that used its quantum waits a "
          "round",
          "[flows]") {
    Fixture fx(200);
    for (uint32_t i = 0; i < 100; ++i) fx.q.enqueue(0, 7, i, 1500, 0); // bulk
    // The bulk flow is chosen and takes its quantum's worth.
    REQUIRE(fx.send(0) == 0);
    REQUIRE(fx.send(0) == 1); // its deficit was 1518: one more (deficit 1518-3000 < 0)
    // A sparse flow's frame arrives: it is sent next, before any bulk frame.
    fx.q.enqueue(0, 99, 150, 90, 0);
    REQUIRE(fx.send(0) == 150);
    CHECK(fx.q.counters().new_flows == 2);
    // Emptied with quantum left: out of the lists (the gauges show the bulk
    // flow only), kept for the round.
    REQUIRE(fx.q.flow_of(0, 99) != kNoFlow);
    CHECK(fx.q.of(0).flows() == 1);
    CHECK(fx.q.of(0).sparse == 0);
    // Its next frame makes it new again, before the bulk backlog, with what
    // is left of its quantum (1518 - 90 - 90 after it)...
    fx.q.enqueue(0, 99, 151, 90, 0);
    CHECK(fx.q.counters().new_flows == 3);
    REQUIRE(fx.send(0) == 151);
    // ...so a frame that takes it past its quantum still goes first, but
    // then it has had its round's share: the next frame waits in the old
    // list behind the bulk flow (fq_codel's rule).
    fx.q.enqueue(0, 99, 152, 1400, 0);
    REQUIRE(fx.send(0) == 152);
    fx.q.enqueue(0, 99, 153, 90, 0);
    CHECK(fx.q.counters().new_flows == 4); // 153 joined the old list, not new
    // Its deficit is refilled where its turn comes, and it waits for the
    // bulk flow's quantum after that (fq_codel's order).
    CHECK(fx.send(0) == 2);
    CHECK(fx.send(0) == 3);
    REQUIRE(fx.send(0) == 153);
    // An old flow that empties leaves the lists and the pool takes it back.
    CHECK(fx.q.flow_of(0, 99) == kNoFlow);
}

namespace {

// One class at 100 Mbit/s: a frame leaves every 1518-byte time; `bulk`
// flows kept backlogged (each refilled to 4 full frames as it sends) and a
// 98-byte frame of flow 1 (a ping) every 10 ms from 100 ms on (the bulk
// flows start as new flows together: by then they are all in the old
// list). Returns each ping frame's wait (sent - arrived), in ns.
std::vector<uint64_t> ping_waits(uint32_t bulk, uint64_t pings) {
    constexpr uint64_t kFrameNs = 121'440; // 1518 bytes at 100 Mbit/s
    constexpr uint64_t kPingNs = 10'000'000;
    const uint32_t frames = bulk * 4 + 4;
    Fixture fx(frames);
    std::vector<uint32_t> free_frames;
    for (uint32_t i = 0; i < frames; ++i) free_frames.push_back(i);
    std::vector<uint32_t> flow_of_frame(frames);
    auto put = [&](uint32_t flow, uint32_t bytes, uint64_t now) {
        const uint32_t fr = free_frames.back();
        free_frames.pop_back();
        flow_of_frame[fr] = flow;
        fx.q.enqueue(0, flow, fr, bytes, now);
        return fr;
    };
    for (uint32_t b = 0; b < bulk; ++b)
        for (int k = 0; k < 4; ++k) put(100 + b, 1518, 0);
    std::map<uint32_t, uint64_t> ping_at; // frame -> arrival
    std::vector<uint64_t> waits;
    uint64_t next_ping = 10 * kPingNs;
    for (uint64_t now = 0; waits.size() < pings; now += kFrameNs) {
        for (; next_ping <= now; next_ping += kPingNs) ping_at[put(1, 98, next_ping)] = next_ping;
        const uint32_t fr = fx.send(0, now);
        REQUIRE(fr != kNoFrame);
        free_frames.push_back(fr);
        if (flow_of_frame[fr] == 1) {
            waits.push_back(now - ping_at.at(fr));
            ping_at.erase(fr);
        } else {
            put(flow_of_frame[fr], 1518, now); // the bulk flow stays backlogged
        }
    }
    return waits;
}

} // namespace

TEST_CASE("flow queues: a ping every 10 ms beside 128 backlogged flows waits for one frame at most",
          "[flows]") {
    // A DRR round of 128 flows' quanta takes 15.5 ms at 100 Mbit/s, longer
    // than the ping's period: the ping flow, still waiting in the old list
    // for the round it emptied in (fq_codel's rule), had every other ping
    // wait ~5.5 ms. A sparse flow is new again instead: each ping goes out
    // at the next frame time.
    for (uint32_t bulk : {1u, 16u, 128u}) {
        CAPTURE(bulk);
        const auto waits = ping_waits(bulk, 200);
        CHECK(*std::max_element(waits.begin(), waits.end()) <= 121'440);
    }
}

TEST_CASE("flow queues: a flow that refills the moment it empties gets no more than its DRR share",
          "[flows]") {
    // Flow 1 sends a 1000-byte frame each time its last one left: empty at
    // every visit, it would be new every time if emptying were enough. It
    // gets one quantum from the new list per round at most, so its bytes
    // stay within DRR's bound of the 4 backlogged flows'.
    Fixture fx(64);
    std::vector<uint32_t> free_frames;
    for (uint32_t i = 0; i < 64; ++i) free_frames.push_back(i);
    std::vector<uint32_t> flow_of_frame(64);
    auto put = [&](uint32_t flow, uint32_t bytes) {
        const uint32_t fr = free_frames.back();
        free_frames.pop_back();
        flow_of_frame[fr] = flow;
        fx.q.enqueue(0, flow, fr, bytes, 0);
    };
    for (uint32_t b = 2; b < 6; ++b)
        for (int k = 0; k < 4; ++k) put(b, 1500);
    put(1, 1000);
    std::map<uint32_t, uint64_t> served;
    for (int i = 0; i < 20'000; ++i) {
        const uint32_t fr = fx.send(0);
        REQUIRE(fr != kNoFrame);
        free_frames.push_back(fr);
        const uint32_t flow = flow_of_frame[fr];
        served[flow] += fx.q.frame_bytes(fr);
        put(flow, flow == 1 ? 1000 : 1500);
        for (uint32_t b = 2; b < 6; ++b) CHECK(served[1] <= served[b] + 2 * (kQuantum + 1500));
    }
    CHECK(served[1] > 0);
}

TEST_CASE("flow queues: classes are independent; pool and index hold many classes", "[flows]") {
    Fixture fx(4000);
    for (uint32_t c = 0; c < 1000; ++c)
        for (uint32_t k = 0; k < 4; ++k) fx.q.enqueue(c, k * 7919u + c, c * 4 + k, 64, 0);
    CHECK(fx.q.flows_in_use() == 4000);
    for (uint32_t c = 0; c < 1000; ++c) {
        CHECK(fx.q.of(c).frames == 4);
        CHECK(fx.q.of(c).flows() == 4);
        std::set<uint32_t> got;
        for (int k = 0; k < 4; ++k) got.insert(fx.send(c));
        CHECK(got == std::set<uint32_t>{c * 4, c * 4 + 1, c * 4 + 2, c * 4 + 3});
        CHECK(fx.send(c) == kNoFrame);
    }
    CHECK(fx.q.flows_in_use() == 0);
    CHECK(fx.q.counters().flow_reclaims == 0);
}

TEST_CASE("flow queues: the pool reclaims lingering empty flows only, never a frame", "[flows]") {
    // 8 frames: 9 flows. One bulk flow keeps the old list busy; sparse flows
    // come and go, each lingering after its frame, until the pool is short.
    Fixture fx(8);
    for (uint32_t i = 0; i < 4; ++i) fx.q.enqueue(0, 1, i, 1500, 0);
    // The bulk flow spends its quantum and is put back to 4 frames: the
    // next visit moves it to the old list.
    REQUIRE(fx.send(0) == 0);
    REQUIRE(fx.send(0) == 1);
    fx.q.enqueue(0, 1, 0, 1500, 0);
    fx.q.enqueue(0, 1, 1, 1500, 0);
    uint32_t frame = 4;
    uint64_t sent = 0;
    for (uint32_t h = 100; h < 140; ++h) {
        fx.q.enqueue(0, h, frame, 60, 0);
        REQUIRE(fx.send(0) == frame); // new flow first
        ++sent;
        // The bulk flow keeps its frames: refill what it sends.
        REQUIRE(fx.q.of(0).frames == 4);
        frame = frame == 7 ? 4 : frame + 1;
    }
    CHECK(fx.q.counters().flow_reclaims > 0);
    CHECK(fx.q.flows_in_use() <= fx.q.pool_size());
    CHECK(fx.q.of(0).frames == 4);
    std::vector<uint32_t> bulk;
    for (uint32_t f; (f = fx.send(0)) != kNoFrame;) bulk.push_back(f);
    CHECK(bulk == std::vector<uint32_t>{2, 3, 0, 1});
}

namespace {

// RFC 8289's CoDel on one queue, from its pseudo-code (§5), for a flow whose
// frames all arrive at t = 0 and are dequeued one every `period_ns`.
// Returns the dequeue times at which a frame was dropped.
std::vector<uint64_t> codel_model(uint32_t frames, uint32_t bytes, uint64_t period_ns,
                                  uint64_t target_ns, uint64_t interval_ns) {
    std::deque<uint64_t> q(frames, 0); // arrival times
    uint64_t first_above = 0, drop_next = 0;
    uint32_t count = 0, lastcount = 0;
    bool dropping = false;
    std::vector<uint64_t> drops;
    auto ok_to_drop = [&](uint64_t now) {
        if (q.empty()) {
            first_above = 0;
            return false;
        }
        const uint64_t sojourn = now - q.front();
        if (sojourn < target_ns || uint64_t(q.size()) * bytes <= kQuantum) {
            first_above = 0;
            return false;
        }
        if (first_above == 0) {
            first_above = now + interval_ns;
            return false;
        }
        return now >= first_above;
    };
    auto law = [&](uint64_t t) { return t + uint64_t(double(interval_ns) / std::sqrt(count)); };
    for (uint64_t now = 0; !q.empty(); now += period_ns) {
        bool drop = ok_to_drop(now);
        if (dropping) {
            if (!drop) dropping = false;
            while (dropping && now >= drop_next) {
                ++count;
                q.pop_front();
                drops.push_back(now);
                if (!ok_to_drop(now))
                    dropping = false;
                else
                    drop_next = law(drop_next);
            }
        } else if (drop) {
            q.pop_front();
            drops.push_back(now);
            dropping = true;
            const uint32_t delta = count - lastcount;
            count = delta > 1 && now - drop_next < 16 * interval_ns ? delta : 1;
            lastcount = count;
            drop_next = law(now);
        }
        if (!q.empty()) q.pop_front(); // the frame sent at this time
    }
    return drops;
}

} // namespace

TEST_CASE("flow queues: CoDel drops when and as often as RFC 8289 says", "[flows]") {
    const uint32_t frames = 2000;
    const uint64_t period = 120'000; // a 1500-byte frame at 100 Mbit/s
    Fixture fx(frames);
    fx.aqm = FlowAqm{};
    fx.aqm.target_ns = 5'000'000;
    fx.aqm.interval_ns = 100'000'000;
    for (uint32_t i = 0; i < frames; ++i) fx.q.enqueue(0, 5, i, 1500, 0);
    std::vector<uint64_t> drop_times;
    for (uint64_t now = 0;; now += period) {
        const size_t before = fx.verdict.dropped.size();
        const uint32_t f = fx.q.head(0, fx.aqm, now, fx.verdict);
        for (size_t i = before; i < fx.verdict.dropped.size(); ++i) drop_times.push_back(now);
        if (f == kNoFrame) break;
        fx.q.pop(0);
    }
    const auto want = codel_model(frames, 1500, period, fx.aqm.target_ns, fx.aqm.interval_ns);
    REQUIRE(!want.empty());
    CHECK(drop_times == want);
    CHECK(fx.q.counters().aqm_drops == want.size());
    // Nothing before the sojourn has been above target for an interval.
    CHECK(want.front() >= fx.aqm.interval_ns);
}

TEST_CASE("flow queues: ECN-capable frames are marked instead of dropped", "[flows]") {
    Fixture fx(2000);
    fx.aqm = FlowAqm{};
    fx.verdict.ecn = true;
    for (uint32_t i = 0; i < 2000; ++i) fx.q.enqueue(0, 5, i, 1500, 0);
    std::vector<uint32_t> sent;
    for (uint64_t now = 0;; now += 120'000) {
        const uint32_t f = fx.q.head(0, fx.aqm, now, fx.verdict);
        if (f == kNoFrame) break;
        sent.push_back(fx.q.pop(0));
    }
    CHECK(fx.verdict.dropped.empty());
    CHECK(!fx.verdict.marked.empty());
    CHECK(fx.q.counters().aqm_marks == fx.verdict.marked.size());
    CHECK(sent.size() == 2000);
}

TEST_CASE("flow queues: CoDel takes from the flow that builds the queue, not the newcomer",
          "[flows]") {
    Fixture fx(3000);
    fx.aqm = FlowAqm{};
    for (uint32_t i = 0; i < 2000; ++i) fx.q.enqueue(0, 1, i, 1500, 0);
    uint32_t sparse = 2000;
    std::set<uint32_t> sparse_frames;
    for (uint64_t now = 0, n = 0;; now += 120'000, ++n) {
        if (n % 80 == 0 && sparse < 3000) { // a small frame every ~10 ms
            sparse_frames.insert(sparse);
            fx.q.enqueue(0, 2, sparse++, 90, now);
        }
        if (fx.q.head(0, fx.aqm, now, fx.verdict) == kNoFrame) break;
        fx.q.pop(0);
    }
    REQUIRE(!fx.verdict.dropped.empty());
    for (uint32_t f : fx.verdict.dropped) CHECK(sparse_frames.count(f) == 0);
}

TEST_CASE("flow queues: random operations lose no frame and keep each flow's order", "[flows]") {
    std::mt19937 rng(20051111);
    const uint32_t frames = 64;
    Fixture fx(frames);
    fx.aqm = FlowAqm{};
    fx.aqm.target_ns = 1000;
    fx.aqm.interval_ns = 5000;
    std::vector<uint32_t> free_frames;
    for (uint32_t i = 0; i < frames; ++i) free_frames.push_back(i);
    std::map<std::pair<uint32_t, uint32_t>, std::deque<uint32_t>> model; // (cls, flow) -> frames
    std::map<uint32_t, std::pair<uint32_t, uint32_t>> where;
    uint64_t now = 0;
    for (int step = 0; step < 200'000; ++step) {
        now += rng() % 700;
        const uint32_t cls = rng() % 5;
        if (!free_frames.empty() && rng() % 2) {
            const uint32_t fr = free_frames.back();
            free_frames.pop_back();
            const uint32_t flow = rng() % 12;
            fx.q.enqueue(cls, flow, fr, 60 + rng() % 1459, now);
            model[{cls, flow}].push_back(fr);
            where[fr] = {cls, flow};
        } else {
            const size_t dropped_before = fx.verdict.dropped.size();
            const uint32_t f = fx.q.head(cls, fx.aqm, now, fx.verdict);
            for (size_t i = dropped_before; i < fx.verdict.dropped.size(); ++i) {
                const uint32_t d = fx.verdict.dropped[i];
                auto &m = model[where.at(d)];
                REQUIRE(m.front() == d); // CoDel drops from a flow's head
                m.pop_front();
                free_frames.push_back(d);
            }
            if (f == kNoFrame) continue;
            REQUIRE(fx.q.pop(cls) == f);
            auto &m = model[where.at(f)];
            REQUIRE(m.front() == f);
            m.pop_front();
            free_frames.push_back(f);
        }
        REQUIRE(fx.q.flows_in_use() <= fx.q.pool_size());
    }
    uint64_t queued = 0;
    for (auto &[k, v] : model) queued += v.size();
    uint64_t held = 0;
    for (uint32_t c = 0; c < 5; ++c) held += fx.q.of(c).frames;
    CHECK(held == queued);
    CHECK(free_frames.size() + queued == frames);
    // Drain: every remaining frame comes out once.
    std::set<uint32_t> rest;
    for (uint32_t c = 0; c < 5; ++c) fx.q.drain(c, [&](uint32_t fr) { rest.insert(fr); });
    CHECK(rest.size() == queued);
    for (uint32_t c = 0; c < 5; ++c) CHECK(fx.q.of(c).flows() == 0);
}

TEST_CASE("flow queues: the CE threshold marks a frame chosen after waiting that long, once",
          "[flows]") {
    Fixture fx(8);
    fx.aqm = FlowAqm{};
    fx.aqm.ce_threshold_ns = 4'000'000;
    fx.verdict.ecn = true;
    for (uint32_t i = 0; i < 4; ++i) fx.q.enqueue(0, 1, i, 100, 0); // CoDel: one frame's bytes
    REQUIRE(fx.q.head(0, fx.aqm, 3'999'999, fx.verdict) == 0);
    CHECK(fx.verdict.marked.empty()); // waited less than the threshold
    fx.q.pop(0);
    REQUIRE(fx.q.head(0, fx.aqm, 4'000'000, fx.verdict) == 1);
    REQUIRE(fx.q.head(0, fx.aqm, 5'000'000, fx.verdict) == 1); // chosen already: not again
    CHECK(fx.verdict.marked == std::vector<uint32_t>{1});
    CHECK(fx.verdict.dropped.empty());
    CHECK(fx.q.counters().aqm_marks == 1);
    fx.aqm.ce_threshold_ns = UINT64_MAX; // off
    fx.q.pop(0);
    REQUIRE(fx.q.head(0, fx.aqm, 60'000'000, fx.verdict) == 2);
    CHECK(fx.verdict.marked.size() == 1);
}
