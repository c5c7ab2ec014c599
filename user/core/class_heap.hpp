// A 4-ary min-heap of (byte-clock key, class): the engine's eligible set
// when more than one class is eligible, and the pending wheel's far tier.
//
// Order: by key, ties by class index, so the engine's choice among equal
// finish times is defined (not an accident of the heap's shape) and a model
// can reproduce it. The pair is compared as one 128-bit integer (key in the
// high half): no extra branch for the tie.
//
// Why this shape: a pop's sift-down is the cost that grows with the number
// of entries. Four children of 16 bytes fill exactly one 64-byte cache line
// (the array is offset so that every sibling group is line-aligned): one
// miss per level, and half the levels of a binary heap. Removal is lazy: a
// class's generation number changes when it leaves the heap, and entries
// with an old generation are skipped when they reach the top. That keeps
// no position index, whose random writes on every move cost more than the
// rare stale entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

namespace pspxdp {

class ClassHeap {
  public:
    struct Entry {
        uint32_t gen;
        uint32_t cls;
        uint64_t key;
    };
    static_assert(sizeof(Entry) == 16, "four entries per cache line");

    ClassHeap() = default;
    ClassHeap(const ClassHeap &) = delete;
    ClassHeap &operator=(const ClassHeap &) = delete;
    ~ClassHeap() { std::free(raw_); }

    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    const Entry &top() const { return at(0); }

    void push(uint64_t key, uint32_t cls, uint32_t gen) {
        if (size_ == capacity_) grow();
        sift_up(size_++, Entry{gen, cls, key});
    }

    void pop() {
        Entry last = at(--size_);
        if (size_) sift_down(0, last);
    }

    // (key, cls) as one integer: the heap's order.
    static unsigned __int128 order(const Entry &e) {
        return (unsigned __int128)e.key << 32 | e.cls;
    }

    // Drops stale entries from the top: gen(cls) is each class's live generation.
    template <class Gen> void clean(Gen &&gen) {
        while (size_ && gen(at(0).cls) != at(0).gen) pop();
    }

    // Rebuilds without stale entries when they outnumber the live ones, so
    // lazy removal never lets the heap grow without bound.
    template <class Gen> void compact(Gen &&gen) {
        size_t live = 0;
        for (size_t i = 0; i < size_; ++i)
            if (gen(at(i).cls) == at(i).gen) at(live++) = at(i);
        size_ = live;
        for (size_t i = size_; i-- > 0;) sift_down(i, at(i));
    }

  private:
    // Element i lives at base_[i + 3]: children 4i+1..4i+4 start at a
    // multiple of four, i.e. on a cache-line boundary.
    Entry &at(size_t i) { return base_[i + 3]; }
    const Entry &at(size_t i) const { return base_[i + 3]; }

    void grow() {
        size_t cap = capacity_ ? capacity_ * 2 : 64;
        void *p = std::aligned_alloc(64, (cap + 4) * sizeof(Entry));
        if (!p) throw std::bad_alloc();
        Entry *base = static_cast<Entry *>(p);
        for (size_t i = 0; i < size_; ++i) base[i + 3] = at(i);
        std::free(raw_);
        raw_ = p;
        base_ = base;
        capacity_ = cap;
    }

    void sift_up(size_t i, Entry e) {
        while (i > 0) {
            size_t parent = (i - 1) / 4;
            if (order(at(parent)) <= order(e)) break;
            at(i) = at(parent);
            i = parent;
        }
        at(i) = e;
    }

    void sift_down(size_t i, Entry e) {
        for (;;) {
            size_t first = 4 * i + 1;
            if (first >= size_) break;
            size_t best = first;
            if (first + 4 <= size_) {
                const Entry *c = &at(first);
                size_t a = order(c[1]) < order(c[0]) ? 1 : 0;
                size_t b = order(c[3]) < order(c[2]) ? 3 : 2;
                best = first + (order(c[b]) < order(c[a]) ? b : a);
            } else {
                for (size_t j = first + 1; j < size_; ++j)
                    if (order(at(j)) < order(at(best))) best = j;
            }
            if (order(at(best)) >= order(e)) break;
            at(i) = at(best);
            i = best;
        }
        at(i) = e;
    }

    void *raw_ = nullptr;
    Entry *base_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

} // namespace pspxdp
