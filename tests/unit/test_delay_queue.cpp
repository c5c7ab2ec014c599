// The lab's delay line queue (lab/delay_queue.hpp): FIFO order, bounded
// memory, refusals instead of growth, wrap-around without loss.
#include "delay_queue.hpp"

#include <catch2/catch.hpp>

#include <deque>
#include <vector>

using pspxdp::lab::DelayQueue;

namespace {
std::vector<uint8_t> frame(uint32_t id, size_t len) {
    std::vector<uint8_t> f(len, uint8_t(id));
    for (size_t i = 0; i < 4 && i < len; ++i) f[i] = uint8_t(id >> (8 * i));
    return f;
}
uint32_t id_of(std::span<const uint8_t> b) {
    uint32_t id = 0;
    for (size_t i = 0; i < 4 && i < b.size(); ++i) id |= uint32_t(b[i]) << (8 * i);
    return id;
}
} // namespace

TEST_CASE("delay queue: first in, first out, bytes and due times kept", "[delay]") {
    DelayQueue q(4096, 1514);
    REQUIRE(q.empty());
    REQUIRE(q.push(100, frame(1, 60)));
    REQUIRE(q.push(100, frame(2, 1514)));
    REQUIRE(q.push(250, frame(3, 64)));
    REQUIRE(q.frames() == 3);
    CHECK(q.used_bytes() == (16 + 64) + (16 + 1520) + (16 + 64));
    for (uint32_t id = 1; id <= 3; ++id) {
        auto f = q.front();
        CHECK(id_of(f.bytes) == id);
        CHECK(f.due_ns == uint64_t(id == 3 ? 250 : 100));
        CHECK(f.bytes.size() == size_t(id == 2 ? 1514 : id == 1 ? 60 : 64));
        q.pop();
    }
    CHECK(q.empty());
    CHECK(q.used_bytes() == 0);
}

TEST_CASE("delay queue: refuses what does not fit, never grows", "[delay]") {
    DelayQueue q(4096, 1514);
    CHECK_FALSE(q.push(0, frame(1, 1515))); // longer than the largest frame
    CHECK_FALSE(q.push(0, {}));             // empty
    int accepted = 0;
    while (q.push(0, frame(accepted, 1000))) ++accepted;
    CHECK(accepted == 4096 / (16 + 1000)); // 4 records of 1016 B
    CHECK(q.used_bytes() <= q.capacity_bytes());
    CHECK(q.capacity_bytes() == 4096);
    q.pop();
    CHECK(q.push(0, frame(99, 1000))); // room again after a pop, at the front (wrap)
}

TEST_CASE("delay queue: a long random run through wrap-around loses and reorders nothing",
          "[delay]") {
    // A model FIFO beside the queue: every accepted frame must come out, in
    // order, with its bytes; every refusal must be a genuinely full buffer.
    DelayQueue q(16384, 1514);
    std::deque<std::pair<uint32_t, size_t>> model;
    uint32_t next = 0, rng = 12345;
    auto rnd = [&] { return rng = rng * 1103515245u + 12345u, (rng >> 8); };
    uint64_t refused = 0;
    for (int step = 0; step < 200000; ++step) {
        if (rnd() % 100 < 55) {
            size_t len = 14 + rnd() % 1501;
            if (q.push(next, frame(next, len))) {
                model.emplace_back(next, len);
            } else {
                ++refused;
                // Refused only when the free space really was short (plus
                // the tail that wrapping skips: at most one record).
                REQUIRE(q.capacity_bytes() - q.used_bytes() < 2 * (16 + 1520));
            }
            ++next;
        } else if (!q.empty()) {
            auto f = q.front();
            REQUIRE(id_of(f.bytes) == model.front().first);
            REQUIRE(f.bytes.size() == model.front().second);
            REQUIRE(f.due_ns == model.front().first);
            REQUIRE((f.bytes.size() <= 4 || f.bytes.back() == uint8_t(model.front().first)));
            q.pop();
            model.pop_front();
        }
        REQUIRE(q.frames() == model.size());
        REQUIRE(q.used_bytes() <= q.capacity_bytes());
    }
    CHECK(refused > 0); // the run did fill the buffer
}
