// A GSO packet against a class's limit (datapath/gso_gate.hpp), in a model
// of a class as class_queues.cpp's receive() uses the gate: flows off drops
// a frame whose packet came at the limit; flows on takes it and drops the
// head of the class instead (one flow here: its own head) while the class
// is at the limit.
#include "datapath/gso_gate.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>

using pspxdp::datapath::GsoGate;

namespace {

struct Class {
    uint32_t limit_frames;
    bool flows;
    GsoGate gate;
    std::deque<uint32_t> queue; // frame ids
    uint64_t drop_limit = 0, admitted = 0;
    // One frame of a packet of `segs` frames of flow `hash`.
    void receive(uint32_t frame, uint32_t hash, uint32_t segs) {
        const bool limited = queue.size() >= limit_frames;
        if (gate.came_at_limit(hash, segs, limited)) {
            if (!flows) {
                ++drop_limit;
                return;
            }
            if (limited) {
                queue.pop_front();
                ++drop_limit;
            }
        }
        queue.push_back(frame);
        ++admitted;
    }
    void packet(uint32_t first, uint32_t hash, uint32_t segs) {
        for (uint32_t i = 0; i < segs; ++i) receive(first + i, hash, segs);
    }
};

} // namespace

TEST_CASE("GSO: a packet starting below the limit is taken whole, past the limit", "[gso]") {
    for (bool flows : {false, true}) {
        CAPTURE(flows);
        // A 64 KB GSO packet is 44 frames; limit 10ms at 20 Mbit/s is 16.
        Class c{16, flows, {}, {}};
        c.packet(0, 7, 44);
        CHECK(c.queue.size() == 44);
        CHECK(c.drop_limit == 0);
        // Into a class holding 15 frames: still below, taken whole.
        Class d{16, flows, {}, {}};
        d.packet(0, 1, 15);
        d.packet(100, 7, 44);
        CHECK(d.queue.size() == 59);
        CHECK(d.drop_limit == 0);
    }
}

TEST_CASE("GSO: a packet starting at the limit is judged at the limit frame by frame", "[gso]") {
    // Flows off: dropped whole, even if the class drains below the limit
    // while its frames arrive.
    Class off{16, false, {}, {}};
    off.packet(0, 1, 16);
    for (uint32_t i = 0; i < 44; ++i) {
        off.receive(100 + i, 7, 44);
        if (i == 3)
            while (!off.queue.empty()) off.queue.pop_front(); // sent meanwhile
    }
    CHECK(off.drop_limit == 44);
    CHECK(off.queue.empty());
    // The next packet starts below the limit: taken whole.
    off.packet(200, 7, 44);
    CHECK(off.queue.size() == 44);
    CHECK(off.drop_limit == 44);
    // Flows on: each of its frames is taken, and makes room while the class
    // is at the limit; once the class drained below it, no more room made.
    Class on{16, true, {}, {}};
    on.packet(0, 1, 16);
    for (uint32_t i = 0; i < 44; ++i) {
        on.receive(100 + i, 7, 44);
        if (i == 3)
            for (int k = 0; k < 10; ++k) on.queue.pop_front(); // sent meanwhile: 6 left
    }
    CHECK(on.admitted == 16 + 44);
    // Frames 0..3 each made room (16 held); 10 sent; frames 4..13 filled the
    // class to 16 again without dropping, 14..43 each made room.
    CHECK(on.drop_limit == 4 + 30);
    CHECK(on.queue.size() == 16);
    CHECK(on.queue.back() == 143);
}

TEST_CASE("GSO: frames of two packets interleaved are judged one by one", "[gso]") {
    Class c{4, false, {}, {}};
    c.packet(0, 1, 3);
    c.receive(10, 7, 3); // packet A's first frame: below the limit (3 < 4), taken
    c.receive(20, 9, 3); // packet B's first frame: at the limit, dropped
    c.receive(11, 7, 3); // A again, not the packet the gate follows: at the limit
    CHECK(c.drop_limit == 2);
    CHECK(c.queue.size() == 4);
    // A frame on its own (segs 1, or 0 from an older tag) is judged alone.
    Class d{1, false, {}, {}};
    d.receive(0, 5, 1);
    d.receive(1, 5, 0);
    d.receive(2, 5, 1);
    CHECK(d.queue.size() == 1);
    CHECK(d.drop_limit == 2);
}
