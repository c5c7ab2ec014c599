#include "datapath/flow_queues.hpp"

#include <bit>
#include <cmath>

namespace pspxdp::datapath {

namespace {
uint64_t mix(uint32_t cls, uint32_t hash) {
    // The flow hash is already mixed (skb->hash); the class is a small
    // dense id: spread it so that class k's flows do not all land where
    // class k+1's start (splitmix64's finaliser).
    uint64_t x = uint64_t(cls) << 32 | hash;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
} // namespace

FlowQueues::FlowQueues(FrameTable &table, uint32_t frames, uint32_t quantum_bytes)
    : table_(table), arrived_ns_(frames), bytes_(frames), quantum_(quantum_bytes) {
    // frames + 1 flows: a flow with frames never waits for one (module
    // comment); the index at most half full keeps probes short.
    flows_.resize(size_t(frames) + 1);
    index_.assign(std::bit_ceil(2 * flows_.size()), kNoFlow);
    for (uint32_t f = uint32_t(flows_.size()); f-- > 0;) {
        flows_[f].lnext = free_;
        free_ = f;
    }
}

ClassFlows &FlowQueues::cls_(uint32_t cls) {
    if (cls >= classes_.size()) classes_.resize(size_t(cls) + 1);
    return classes_[cls];
}

const ClassFlows &FlowQueues::of(uint32_t cls) const {
    static const ClassFlows kEmpty{};
    return cls < classes_.size() ? classes_[cls] : kEmpty;
}

size_t FlowQueues::home(uint32_t cls, uint32_t hash) const {
    return size_t(mix(cls, hash)) & (index_.size() - 1);
}

uint32_t FlowQueues::flow_of(uint32_t cls, uint32_t hash) const {
    for (size_t i = home(cls, hash);; i = (i + 1) & (index_.size() - 1)) {
        const uint32_t f = index_[i];
        if (f == kNoFlow) return kNoFlow;
        if (flows_[f].cls == cls && flows_[f].hash == hash) return f;
    }
}

void FlowQueues::index_insert(uint32_t f) {
    size_t i = home(flows_[f].cls, flows_[f].hash);
    while (index_[i] != kNoFlow) i = (i + 1) & (index_.size() - 1);
    index_[i] = f;
}

void FlowQueues::index_erase(uint32_t f) {
    const size_t mask = index_.size() - 1;
    size_t i = home(flows_[f].cls, flows_[f].hash);
    while (index_[i] != f) i = (i + 1) & mask;
    // Backward shift: move later entries of the probe run into the hole
    // when their home allows it, so lookups never need tombstones.
    for (size_t j = (i + 1) & mask; index_[j] != kNoFlow; j = (j + 1) & mask) {
        const size_t h = home(flows_[index_[j]].cls, flows_[index_[j]].hash);
        // j's entry may move to i if i lies cyclically in [h, j).
        if (((j - h) & mask) >= ((j - i) & mask)) {
            index_[i] = index_[j];
            i = j;
        }
    }
    index_[i] = kNoFlow;
}

uint32_t FlowQueues::fattest(const ClassFlows &c) const {
    uint32_t best = kNoFlow;
    uint64_t most = 0;
    for (uint32_t head : {c.new_head, c.old_head})
        for (uint32_t f = head; f != kNoFlow; f = flows_[f].next)
            if (flows_[f].fifo.bytes > most) {
                most = flows_[f].fifo.bytes;
                best = f;
            }
    return best;
}

void FlowQueues::push_tail(ClassFlows &c, List l, uint32_t f) {
    Flow &fl = flows_[f];
    ++(l == List::New ? c.sparse : c.bulk);
    uint32_t &head = l == List::New ? c.new_head : c.old_head;
    uint32_t &tail = l == List::New ? c.new_tail : c.old_tail;
    fl.list = l;
    if (l == List::Old) fl.round = c.round + 1; // behind every flow of this round
    fl.next = kNoFlow;
    fl.prev = tail;
    if (tail == kNoFlow)
        head = f;
    else
        flows_[tail].next = f;
    tail = f;
}

void FlowQueues::unlink(ClassFlows &c, uint32_t f) {
    Flow &fl = flows_[f];
    uint32_t &head = fl.list == List::New ? c.new_head : c.old_head;
    uint32_t &tail = fl.list == List::New ? c.new_tail : c.old_tail;
    (fl.prev == kNoFlow ? head : flows_[fl.prev].next) = fl.next;
    (fl.next == kNoFlow ? tail : flows_[fl.next].prev) = fl.prev;
    fl.prev = fl.next = kNoFlow;
    --(fl.list == List::New ? c.sparse : c.bulk);
    fl.list = List::None;
}

void FlowQueues::linger(uint32_t f) {
    Flow &fl = flows_[f];
    fl.lingering = true;
    fl.lnext = kNoFlow;
    fl.lprev = linger_tail_;
    (linger_tail_ == kNoFlow ? linger_head_ : flows_[linger_tail_].lnext) = f;
    linger_tail_ = f;
}

void FlowQueues::unlinger(uint32_t f) {
    Flow &fl = flows_[f];
    (fl.lprev == kNoFlow ? linger_head_ : flows_[fl.lprev].lnext) = fl.lnext;
    (fl.lnext == kNoFlow ? linger_tail_ : flows_[fl.lnext].lprev) = fl.lprev;
    fl.lprev = fl.lnext = kNoFlow;
    fl.lingering = false;
}

uint32_t FlowQueues::alloc(uint32_t cls, uint32_t hash) {
    if (free_ == kNoFlow) {
        // Only lingering empty flows can be short (module comment): the
        // oldest goes; it holds no frame.
        const uint32_t victim = linger_head_;
        if (holds_round(victim)) ++counters_.flow_reclaims;
        if (flows_[victim].list != List::None) unlink(classes_[flows_[victim].cls], victim);
        release(victim);
    }
    const uint32_t f = free_;
    free_ = flows_[f].lnext;
    Flow &fl = flows_[f];
    fl = Flow{};
    fl.cls = cls;
    fl.hash = hash;
    index_insert(f);
    ++in_use_;
    return f;
}

// f is out of its class's lists already.
void FlowQueues::release(uint32_t f) {
    Flow &fl = flows_[f];
    if (fl.lingering) unlinger(f);
    index_erase(f);
    --in_use_;
    fl.lprev = kNoFlow;
    fl.lnext = free_;
    free_ = f;
}

void FlowQueues::enqueue(uint32_t cls, uint32_t hash, uint32_t frame, uint32_t bytes,
                         uint64_t now_ns) {
    ClassFlows &c = cls_(cls);
    uint32_t f = flow_of(cls, hash);
    bool fresh = true;
    if (f == kNoFlow) {
        f = alloc(cls, hash);
    } else if (flows_[f].lingering) {
        // Busy again: in the old list, where it was; out of the lists (a
        // sparse flow), new again with what it has left of its quantum in
        // the round it emptied in, a fresh one once that round is over
        // (or nobody is in the old list to be starved).
        unlinger(f);
        fresh = flows_[f].round != c.round || c.old_head == kNoFlow;
    }
    Flow &fl = flows_[f];
    arrived_ns_[frame] = now_ns;
    bytes_[frame] = bytes;
    fl.fifo.push(table_, frame, bytes);
    ++c.frames;
    c.bytes += bytes;
    if (fl.list == List::None) {
        // fq_codel: a flow not in the lists is new, with a fresh quantum.
        ++counters_.new_flows;
        if (fresh) fl.deficit = quantum_;
        push_tail(c, List::New, f);
    }
}

uint32_t FlowQueues::take_head(ClassFlows &c, uint32_t f) {
    Flow &fl = flows_[f];
    const uint32_t fr = fl.fifo.head;
    fl.fifo.pop(table_, bytes_[fr]);
    --c.frames;
    c.bytes -= bytes_[fr];
    return fr;
}

// RFC 8289's ok_to_drop: the head has waited more than the target, and has
// for an interval. A class backlog of one largest frame or less is never
// cut (CoDel's "queue <= MTU" rule: nothing to gain).
bool FlowQueues::should_take(Flow &fl, const ClassFlows &c, const FlowAqm &aqm, uint64_t now_ns) {
    Codel &v = fl.codel;
    if (fl.fifo.empty()) {
        v.first_above_ns = 0;
        return false;
    }
    const uint64_t arrived = arrived_ns_[fl.fifo.head];
    const uint64_t sojourn = now_ns > arrived ? now_ns - arrived : 0;
    if (sojourn < aqm.target_ns || c.bytes <= quantum_) {
        v.first_above_ns = 0;
        return false;
    }
    if (v.first_above_ns == 0) {
        v.first_above_ns = now_ns + aqm.interval_ns;
        return false;
    }
    return now_ns >= v.first_above_ns;
}

namespace {
// The next time CoDel acts: interval / sqrt(count) after t (RFC 8289 §5.5).
uint64_t control_law(uint64_t t, uint64_t interval_ns, uint32_t count) {
    return t + uint64_t(double(interval_ns) / std::sqrt(double(count)));
}
} // namespace

// CoDel's dequeue on flow f (RFC 8289 §5.6, as include/net/codel_impl.h
// runs it): returns the frame the flow offers now, kNoFrame if CoDel took
// them all. A frame taken is marked (and offered) or dropped by the caller.
uint32_t FlowQueues::codel_head(ClassFlows &c, uint32_t cls, uint32_t f, const FlowAqm &aqm,
                                uint64_t now_ns, AqmVerdict &verdict) {
    Flow &fl = flows_[f];
    if (!aqm.enabled) return fl.fifo.head;
    Codel &v = fl.codel;
    if (fl.fifo.empty()) {
        v.dropping = false;
        v.first_above_ns = 0;
        return kNoFrame;
    }
    // CoDel takes the head: marked, it stays and is sent (true); dropped,
    // the next frame is the head.
    auto take = [&]() {
        const uint32_t fr = fl.fifo.head;
        if (verdict.mark(cls, fr)) {
            ++counters_.aqm_marks;
            return true;
        }
        take_head(c, f);
        verdict.drop(cls, fr);
        ++counters_.aqm_drops;
        return false;
    };
    bool drop = should_take(fl, c, aqm, now_ns);
    if (v.dropping) {
        if (!drop) {
            v.dropping = false;
        } else {
            while (v.dropping && now_ns >= v.drop_next_ns) {
                ++v.count;
                if (take()) {
                    v.drop_next_ns = control_law(v.drop_next_ns, aqm.interval_ns, v.count);
                    break;
                }
                if (!should_take(fl, c, aqm, now_ns))
                    v.dropping = false;
                else
                    v.drop_next_ns = control_law(v.drop_next_ns, aqm.interval_ns, v.count);
            }
        }
    } else if (drop) {
        take();
        v.dropping = true;
        // Re-entering soon after the last dropping state: resume its count,
        // so a persistent queue is not given a fresh slow start each time.
        const uint32_t delta = v.count - v.last_count;
        if (delta > 1 && now_ns - v.drop_next_ns < 16 * aqm.interval_ns)
            v.count = delta;
        else
            v.count = 1;
        v.last_count = v.count;
        v.drop_next_ns = control_law(now_ns, aqm.interval_ns, v.count);
    }
    return fl.fifo.empty() ? kNoFrame : fl.fifo.head;
}

uint32_t FlowQueues::head(uint32_t cls, const FlowAqm &aqm, uint64_t now_ns, AqmVerdict &verdict) {
    ClassFlows &c = cls_(cls);
    if (c.chosen != kNoFlow) return flows_[c.chosen].fifo.head;
    // fq_codel_dequeue: new flows first; a flow out of deficit gets a
    // quantum and goes to the old list's tail; an empty new flow goes there
    // too (it must wait a round before it can be new again), an empty old
    // flow leaves.
    for (;;) {
        const bool from_new = c.new_head != kNoFlow;
        const uint32_t f = from_new ? c.new_head : c.old_head;
        if (f == kNoFlow) return kNoFrame;
        Flow &fl = flows_[f];
        // The first flow of the next round at the old list's head: a round
        // over (push_tail stamps them, oldest first).
        if (!from_new && int32_t(fl.round - c.round) > 0) c.round = fl.round;
        if (fl.deficit <= 0) {
            fl.deficit += quantum_;
            unlink(c, f);
            push_tail(c, List::Old, f);
            continue;
        }
        const uint32_t fr = codel_head(c, cls, f, aqm, now_ns, verdict);
        if (fr == kNoFrame) {
            emptied(c, f, from_new);
            continue;
        }
        c.chosen = f;
        const uint64_t waited = now_ns > arrived_ns_[fr] ? now_ns - arrived_ns_[fr] : 0;
        if (aqm.enabled && waited >= aqm.ce_threshold_ns && verdict.mark(cls, fr))
            ++counters_.aqm_marks;
        return fr;
    }
}

// A flow found empty. On the new list with quantum left (a sparse flow):
// out of the lists, lingering with its deficit and this round (enqueue
// makes it new again); with its quantum used: fq_codel's rule, to the old
// list's tail, so that it is not new again before the old flows had their
// round. An empty old flow goes (fq_codel), and so does every flow when
// the old list is empty: there is nobody a new flow could starve.
// A class with nothing queued keeps no flow in its lists: its lingering
// ones would only wait for a round that is not coming.
void FlowQueues::emptied(ClassFlows &c, uint32_t f, bool from_new) {
    unlink(c, f);
    Flow &fl = flows_[f];
    if (from_new && c.old_head != kNoFlow && c.frames) {
        if (fl.deficit > 0)
            fl.round = c.round;
        else
            push_tail(c, List::Old, f);
        linger(f);
    } else {
        release(f);
    }
    if (!c.frames)
        while (c.old_head != kNoFlow) {
            const uint32_t g = c.old_head;
            unlink(c, g);
            release(g);
        }
}

// Reclaiming lingering flow f loses its place: its turn in the old list,
// or a sparse flow's rest of quantum in a round not yet over.
bool FlowQueues::holds_round(uint32_t f) const {
    const Flow &fl = flows_[f];
    const ClassFlows &c = classes_[fl.cls];
    return fl.list == List::Old || (fl.round == c.round && c.old_head != kNoFlow);
}

size_t FlowQueues::pool_bytes() const {
    return flows_.capacity() * sizeof(Flow) + index_.capacity() * sizeof(uint32_t) +
           arrived_ns_.capacity() * sizeof(uint64_t) + bytes_.capacity() * sizeof(uint32_t);
}

size_t FlowQueues::flow_bytes() { return sizeof(Flow); }

uint32_t FlowQueues::pop(uint32_t cls) {
    ClassFlows &c = cls_(cls);
    const uint32_t f = c.chosen;
    c.chosen = kNoFlow;
    const uint32_t fr = take_head(c, f);
    Flow &fl = flows_[f];
    fl.deficit -= bytes_[fr];
    // At once rather than at the next head() (fq_codel's moment): an idle
    // class may not ask again for a long time, and every empty flow in the
    // lists must be lingering, so that the pool can reclaim it.
    if (fl.fifo.empty()) emptied(c, f, fl.list == List::New);
    return fr;
}

} // namespace pspxdp::datapath
