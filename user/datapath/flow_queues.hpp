// Flows inside a class (docs/design.md §1.5): fq_codel's scheduler under each pacing
// class. The engine still decides which class sends next and when, to the
// byte; this decides which of the class's frames that is.
//
// Each class keeps its frames per flow (the flow hash TC computed), and
// serves the flows by deficit round robin in bytes with new flows first
// (sch_fq_codel.c, RFC 8290 §4): a flow that sends a small packet now and
// then arrives to an empty queue, joins the new list and goes before every
// bulk flow's backlog. A flow that empties on the new list with quantum
// left is new again when its next frame comes, with what it has left of
// its quantum until the old list's round turns (sparse flows, as CAKE
// keeps them): fq_codel moves it to the old list's tail instead, so with
// more backlogged flows than a ping's period holds quanta (128 flows at
// 100 Mbit/s: a 15 ms round) every other ping waited most of a round. Each
// flow still gets at most a quantum (and a frame) from the new list per
// round, so the old flows are not starved; a flow that keeps a queue never
// empties and never qualifies. Each flow runs CoDel on its frames' sojourn times
// (RFC 8289): while a flow's head has waited more than the target for at
// least an interval, CoDel takes frames from that flow, at a rate growing
// with the square root of how many it took, so the flow that builds the
// queue pays and the newcomer does not. An ECN-capable frame is marked CE
// instead of dropped (the caller decides: aqm callback).
//
// Memory is proportional to what is queued, not to the classes: a class is
// its ClassFlows (48 bytes); flows come from one pool shared by every class,
// sized to the frames of the buffer + 1, and looked up in one open-addressed
// table keyed by (class, flow hash). A flow lives while it has frames, and
// lingers empty after that while its class still has old flows: out of the
// lists, keeping its deficit and the round it emptied in, if it emptied on
// the new list with quantum left; in the old list for its turn otherwise
// (fq_codel's rule: it used its quantum, it waits a round). The pool can run
// out only of such lingering empty flows, never of flows with frames (that
// would need more flows with frames than there are frames): then the oldest
// lingering flow is reclaimed, which loses no frame; counted (flow_reclaims)
// when it still held a place in a round (an old-list one, or one whose round
// has not turned).
//
// Pure: no clock reads, no I/O. The frames are the caller's (UMEM chunk
// indices, linked through its FrameTable as FrameFifo does).
#pragma once

#include "datapath/frame_fifo.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pspxdp::datapath {

inline constexpr uint32_t kNoFlow = 0xffffffffu;

// CoDel's two parameters (RFC 8289 §4.3/§4.4), per class.
struct FlowAqm {
    uint64_t target_ns = 5'000'000;     // acceptable standing queue delay
    uint64_t interval_ns = 100'000'000; // a worst-case RTT: how long above target before acting
    // An ECT frame chosen after waiting at least this long gets CE at once
    // (fq_codel's ce_threshold: early back pressure for ECN senders, before
    // CoDel acts). UINT64_MAX: never.
    uint64_t ce_threshold_ns = UINT64_MAX;
    bool enabled = true;
};

// One class's flows: the two DRR lists and what they hold.
struct ClassFlows {
    uint32_t new_head = kNoFlow, new_tail = kNoFlow;
    uint32_t old_head = kNoFlow, old_tail = kNoFlow;
    uint32_t round = 0;        // the old list's rounds, counted (sparse flows' deficits)
    uint32_t frames = 0;       // queued in all its flows
    uint64_t bytes = 0;        // their bytes (the caller's unit)
    uint32_t chosen = kNoFlow; // the flow whose head head() chose, until pop()
    uint32_t sparse = 0;       // flows in the new list (fq_codel's new_flows_len)
    uint32_t bulk = 0;         // flows in the old list (old_flows_len), lingering ones included
    bool empty() const { return frames == 0; }
    // In the lists: what the class's gauges show (a sparse flow lingering
    // out of the lists holds nothing and is not shown).
    uint32_t flows() const { return sparse + bulk; }
};
static_assert(sizeof(ClassFlows) == 48, "48 bytes a class");

struct FlowCounters {
    uint64_t new_flows = 0;     // a frame arrived for a flow not in its class's lists
    uint64_t aqm_drops = 0;     // frames CoDel took out and the caller dropped
    uint64_t aqm_marks = 0;     // frames CoDel chose and the caller marked CE instead
    uint64_t flow_reclaims = 0; // lingering empty flows reclaimed because the pool ran out
};

// What head() does with a frame CoDel takes: mark() tries to set ECN CE on
// it (true: marked, it stays and is sent); otherwise drop() gets it, already
// unlinked, for the caller to release and count.
struct AqmVerdict {
    virtual bool mark(uint32_t cls, uint32_t frame) = 0;
    virtual void drop(uint32_t cls, uint32_t frame) = 0;

  protected:
    ~AqmVerdict() = default;
};

class FlowQueues {
  public:
    // frames: the FrameTable's size (every frame the caller can queue).
    // quantum_bytes: DRR's quantum, the largest frame in the caller's unit.
    FlowQueues(FrameTable &table, uint32_t frames, uint32_t quantum_bytes);

    // Queues `frame` (bytes long, arrived at now_ns) for flow `hash` of
    // class `cls` (the caller's dense id: a slot).
    void enqueue(uint32_t cls, uint32_t hash, uint32_t frame, uint32_t bytes, uint64_t now_ns);
    // The frame class cls sends next, kNoFrame when it has none left. Runs
    // DRR and each visited flow's CoDel; stands until pop() (asking again
    // returns the same frame and runs nothing).
    uint32_t head(uint32_t cls, const FlowAqm &aqm, uint64_t now_ns, AqmVerdict &verdict);
    // Takes the frame head() chose off its flow and returns it.
    uint32_t pop(uint32_t cls);
    // Takes every frame of class cls (deleted, shutdown): fn(frame) for
    // each; its flows go back to the pool.
    template <class Fn> void drain(uint32_t cls, Fn &&fn);
    // Takes up to n frames from the heads of class cls's fattest flows
    // (fq_codel's overflow rule, inside the class): fn(frame) for each.
    // Returns how many. head() chooses again afterwards.
    template <class Fn> uint32_t drop_fattest(uint32_t cls, uint64_t n, Fn &&fn);
    // The same until the class holds at most budget bytes.
    template <class Fn> uint32_t keep_bytes(uint32_t cls, uint64_t budget, Fn &&fn);

    const ClassFlows &of(uint32_t cls) const;
    uint32_t flow_of(uint32_t cls, uint32_t hash) const; // kNoFlow if none
    uint32_t frame_bytes(uint32_t frame) const { return bytes_[frame]; }
    const FlowCounters &counters() const { return counters_; }
    uint32_t flows_in_use() const { return in_use_; }
    uint32_t pool_size() const { return uint32_t(flows_.size()); }

    // CoDel's state of one flow (RFC 8289 §5).
    struct Codel {
        uint64_t first_above_ns = 0; // when the sojourn above target may act; 0: below target
        uint64_t drop_next_ns = 0;
        uint32_t count = 0; // frames taken in this dropping state
        uint32_t last_count = 0;
        bool dropping = false;
    };
    const Codel &codel(uint32_t flow) const { return flows_[flow].codel; }
    // What the pool, index and per-frame arrays take, allocated at once for
    // the whole buffer (the class lists grow with the slots used: of()).
    size_t pool_bytes() const;
    static size_t flow_bytes();

  private:
    enum class List : uint8_t { None, New, Old };
    struct Flow {
        FrameFifo fifo;
        Codel codel;
        int64_t deficit = 0;
        uint32_t prev = kNoFlow, next = kNoFlow;   // in its class's list
        uint32_t lprev = kNoFlow, lnext = kNoFlow; // in the lingering list, or the free list
        uint32_t cls = 0;
        uint32_t hash = 0;
        // In the old list: the class round it is served in. Lingering out
        // of the lists: the round it emptied in.
        uint32_t round = 0;
        List list = List::None;
        bool lingering = false; // empty, kept for its round (module comment)
    };

    ClassFlows &cls_(uint32_t cls);
    uint32_t fattest(const ClassFlows &c) const;
    uint32_t alloc(uint32_t cls, uint32_t hash);
    void release(uint32_t f);
    void push_tail(ClassFlows &c, List l, uint32_t f);
    void unlink(ClassFlows &c, uint32_t f);
    void linger(uint32_t f);
    void unlinger(uint32_t f);
    uint32_t take_head(ClassFlows &c, uint32_t f);
    void emptied(ClassFlows &c, uint32_t f, bool from_new);
    bool holds_round(uint32_t f) const;
    bool should_take(Flow &fl, const ClassFlows &c, const FlowAqm &aqm, uint64_t now_ns);
    uint32_t codel_head(ClassFlows &c, uint32_t cls, uint32_t f, const FlowAqm &aqm,
                        uint64_t now_ns, AqmVerdict &verdict);
    // The (cls, hash) -> flow table: linear probing, backward-shift delete.
    size_t home(uint32_t cls, uint32_t hash) const;
    void index_insert(uint32_t f);
    void index_erase(uint32_t f);

    FrameTable &table_;
    std::vector<uint64_t> arrived_ns_; // per frame
    std::vector<uint32_t> bytes_;      // per frame
    std::vector<Flow> flows_;
    std::vector<uint32_t> index_;
    std::vector<ClassFlows> classes_;
    uint32_t quantum_;
    uint32_t free_ = kNoFlow;                                // free flows, by lnext
    uint32_t linger_head_ = kNoFlow, linger_tail_ = kNoFlow; // oldest first
    uint32_t in_use_ = 0;
    FlowCounters counters_;
};

template <class Fn> void FlowQueues::drain(uint32_t cls, Fn &&fn) {
    ClassFlows &c = cls_(cls);
    for (uint32_t f : {c.new_head, c.old_head}) {
        while (f != kNoFlow) {
            Flow &fl = flows_[f];
            const uint32_t next = fl.next;
            while (!fl.fifo.empty()) {
                const uint32_t fr = fl.fifo.head;
                fl.fifo.pop(table_, bytes_[fr]);
                --c.frames;
                c.bytes -= bytes_[fr];
                fn(fr);
            }
            unlink(c, f);
            release(f);
            f = next;
        }
    }
    c.chosen = kNoFlow;
}

template <class Fn> uint32_t FlowQueues::drop_fattest(uint32_t cls, uint64_t n, Fn &&fn) {
    ClassFlows &c = cls_(cls);
    uint32_t taken = 0;
    for (; taken < n && c.frames; ++taken) {
        const uint32_t f = fattest(c);
        fn(take_head(c, f));
        if (flows_[f].fifo.empty()) emptied(c, f, flows_[f].list == List::New);
    }
    if (taken) c.chosen = kNoFlow;
    return taken;
}

template <class Fn> uint32_t FlowQueues::keep_bytes(uint32_t cls, uint64_t budget, Fn &&fn) {
    ClassFlows &c = cls_(cls);
    uint32_t taken = 0;
    while (c.bytes > budget) taken += drop_fattest(cls, 1, fn);
    return taken;
}

} // namespace pspxdp::datapath
