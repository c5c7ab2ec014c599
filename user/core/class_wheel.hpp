// The engine's pending set: paced, backlogged classes whose class clock C_k
// is still ahead of the byte clock G, keyed by C_k EXACTLY (byte times).
//
// Why a wheel and not a heap: every frame moves its class out of the pending
// set and back in, and a heap pays a full sift-down per frame (log n levels
// of unpredictable branches and cache misses). The engine only ever asks two
// things of this set, both about the keys nearest to G, and G only grows:
//   - advance(G): hand over every class with C_k <= G, and
//   - min_key(): the smallest C_k, exactly, but only when it is closer to G
//     than the gap-splitting rule cares about (a target further away than
//     one largest plus one smallest gap frame always gets a largest gap).
//
// Shape, three tiers by distance from G:
//   near: a circular array of W exact one-byte-time buckets (intrusive doubly
//     linked lists of classes) with a bitmap and a summary bitmap. It holds
//     every key below near_limit, and near_limit stays within (G + W/2,
//     G + W], so its keys span less than W and a bucket is key mod W without
//     collisions. W/2 >= the exact span above: whenever the near tier is
//     empty, the minimum is too far for its exact value to matter.
//   mid: a circular array of blocks of W/2 byte times (lists again, no
//     bitmap: blocks are visited in order, one each time G crosses W/2 byte
//     times) for the keys from near_limit up to mid_limit = near_limit +
//     kMidBlocks * W/2 (2^28 byte times by default: classes down to ~6e-6 M,
//     56 kbit/s on a 10 Gbit/s wire, with full-size frames).
//   far: keys beyond the mid horizon in a 4-ary heap (lazy removal by
//     generation), popped into the mid tier as the horizon passes them.
//     O(log n), and only classes slower than the horizon pay it.
// A class thus moves at most mid -> near -> out, O(1) each, with no
// comparison against any other class. Unlike a hierarchical timing wheel,
// no step ever cascades a whole coarse slot at once (a latency spike of
// thousands of classes at 100k): the only bulk moves are of classes due
// within one block, which a heap would also hand over at once. Removal is
// an O(1) unlink (the tier and bucket follow from the key, which does not
// change while the class is linked).
#pragma once

#include "core/class_heap.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <vector>

namespace pspxdp {

// Node: an array element with `uint64_t clock` (the key), `uint32_t next,
// prev` (the list links) and `uint32_t gen` (a generation number that only
// grows; the far heap's entries carry it). The wheel stores only indices.
template <class Node> class ClassWheel {
  public:
    static constexpr uint32_t kNone = 0xffffffffu;
    static constexpr size_t kMidBlocks = size_t(1) << 17;

    // exact_span: how far past G the exact minimum still matters. g: the
    // byte clock now; every key inserted later is above it. mid_blocks: the
    // mid tier's length in blocks of W/2, a power of two (tests shorten it to
    // reach the far tier quickly).
    void init(uint64_t exact_span, uint64_t g, size_t mid_blocks = kMidBlocks) {
        assert(mid_blocks >= 2 && (mid_blocks & (mid_blocks - 1)) == 0);
        mid_mask_ = mid_blocks - 1;
        blk_bits_ = 6;
        while ((uint64_t(1) << blk_bits_) < exact_span) ++blk_bits_;
        const uint64_t w = uint64_t(2) << blk_bits_;
        mask_ = w - 1;
        near_head_.assign(w, kNone);
        near_bits_.assign(w / 64, 0);
        near_sum_.assign((w / 64 + 63) / 64, 0);
        mid_head_.assign(mid_blocks, kNone);
        near_count_ = 0;
        near_min_ = kEmpty;
        count_ = 0;
        far_stale_ = 0;
        near_limit_ = ((g >> blk_bits_) + 2) << blk_bits_; // in (g + W/2, g + W]
        mid_limit_ = near_limit_ + (uint64_t(mid_blocks) << blk_bits_);
    }

    bool empty() const { return count_ == 0; }
    uint32_t size() const { return count_; }

    // key = nodes[cls].clock, above every G passed to advance() so far.
    [[gnu::always_inline]] void insert(Node *nodes, uint32_t cls) {
        ++count_;
        const uint64_t key = nodes[cls].clock;
        assert(key + mask_ + 1 >= near_limit_);
        if (key < near_limit_)
            near_insert(nodes, cls, key);
        else if (key < mid_limit_)
            push(nodes, cls, mid_head_[size_t(key >> blk_bits_) & mid_mask_]);
        else
            far_.push(key, cls, nodes[cls].gen);
    }

    void remove(Node *nodes, uint32_t cls) {
        --count_;
        const uint64_t key = nodes[cls].clock;
        if (key < near_limit_) {
            const size_t i = size_t(key & mask_);
            --near_count_;
            if (unlink(nodes, cls, near_head_[i])) {
                near_clear(i);
                if (key == near_min_) near_min_ = near_next_min();
            }
        } else if (key < mid_limit_) {
            unlink(nodes, cls, mid_head_[size_t(key >> blk_bits_) & mid_mask_]);
        } else {
            ++nodes[cls].gen; // its heap entry is stale from now on
            if (++far_stale_ > 64 && far_stale_ > far_.size() / 2) {
                far_.compact([nodes](uint32_t k) { return nodes[k].gen; });
                far_stale_ = 0;
            }
        }
    }

    // Removes every class with key <= g, in key order, calling take(cls).
    // g never decreases from one call to the next.
    template <class Take> void advance(Node *nodes, uint64_t g, Take &&take) {
        for (;;) {
            // The near tier's minimum is kept exact, so the keys due are
            // found without a search; only the next minimum needs one.
            while (near_min_ <= g) {
                const size_t i = size_t(near_min_ & mask_);
                uint32_t cls = near_head_[i];
                near_head_[i] = kNone;
                near_clear(i);
                // A bucket holds one key exactly: take the whole list.
                while (cls != kNone) {
                    const uint32_t next = nodes[cls].next;
                    --near_count_;
                    --count_;
                    take(cls);
                    cls = next;
                }
                near_min_ = near_next_min();
            }
            if (near_limit_ > g + (uint64_t(1) << blk_bits_)) return;
            migrate(nodes);
        }
    }

    // After advance(g): the smallest key if it is below g + exact_span (the
    // near tier is then not empty); otherwise a lower bound of it that is
    // itself at least g + exact_span.
    uint64_t min_key() const { return near_count_ ? near_min_ : near_limit_; }

  private:
    // Pushes cls at the front of list `head`.
    static void push(Node *nodes, uint32_t cls, uint32_t &head) {
        Node &n = nodes[cls];
        n.prev = kNone;
        n.next = head;
        if (head != kNone) nodes[head].prev = cls;
        head = cls;
    }

    // Unlinks cls from list `head`; true when the list is now empty.
    static bool unlink(Node *nodes, uint32_t cls, uint32_t &head) {
        Node &n = nodes[cls];
        if (n.prev != kNone)
            nodes[n.prev].next = n.next;
        else
            head = n.next;
        if (n.next != kNone) nodes[n.next].prev = n.prev;
        return head == kNone;
    }

    static constexpr uint64_t kEmpty = ~uint64_t(0);

    // The smallest near key (after a bucket was emptied), or kEmpty. Near
    // keys lie in [near_limit_ - W, near_limit_): above G, and near_limit_
    // is at most G + W. So the first bucket from near_limit_ - W on, around
    // the circle, holds the smallest key.
    uint64_t near_next_min() const {
        if (!near_count_) return kEmpty;
        const uint64_t origin = near_limit_ - mask_ - 1;
        const size_t i = near_first(size_t(origin & mask_));
        return origin + ((i - origin) & mask_);
    }

    void near_insert(Node *nodes, uint32_t cls, uint64_t key) {
        near_min_ = std::min(near_min_, key);
        const size_t i = size_t(key & mask_);
        if (near_head_[i] == kNone) {
            near_bits_[i / 64] |= uint64_t(1) << (i % 64);
            near_sum_[i / 4096] |= uint64_t(1) << (i / 64 % 64);
        }
        push(nodes, cls, near_head_[i]);
        ++near_count_;
    }

    void near_clear(size_t i) {
        uint64_t &word = near_bits_[i / 64];
        word &= ~(uint64_t(1) << (i % 64));
        if (!word) near_sum_[i / 4096] &= ~(uint64_t(1) << (i / 64 % 64));
    }

    // The first non-empty bucket at or after bucket `pos`, circularly. The
    // near window must not be empty.
    size_t near_first(size_t pos) const {
        const size_t w = pos / 64;
        const uint64_t here = near_bits_[w] & (~uint64_t(0) << (pos % 64));
        if (here) return w * 64 + size_t(__builtin_ctzll(here));
        size_t word = w + 1 < near_bits_.size() ? near_word_from(w + 1) : kNoWord;
        // Around the circle: word w itself may hold the buckets below pos.
        if (word == kNoWord) word = near_word_from(0);
        assert(word != kNoWord && "near window empty");
        return word * 64 + size_t(__builtin_ctzll(near_bits_[word]));
    }

    static constexpr size_t kNoWord = ~size_t(0);

    // The first non-empty bitmap word at or after word `from`, if any.
    size_t near_word_from(size_t from) const {
        size_t s = from / 64;
        uint64_t sum = near_sum_[s] & (~uint64_t(0) << (from % 64));
        for (;;) {
            if (sum) return s * 64 + size_t(__builtin_ctzll(sum));
            if (++s == near_sum_.size()) return kNoWord;
            sum = near_sum_[s];
        }
    }

    // Moves the first mid block into the near tier, and what the far heap
    // holds below the new mid horizon into the mid tier.
    [[gnu::noinline]] void migrate(Node *nodes) {
        uint32_t &head = mid_head_[size_t(near_limit_ >> blk_bits_) & mid_mask_];
        uint32_t cls = head;
        head = kNone;
        near_limit_ += uint64_t(1) << blk_bits_;
        mid_limit_ += uint64_t(1) << blk_bits_;
        while (cls != kNone) {
            const uint32_t next = nodes[cls].next;
            near_insert(nodes, cls, nodes[cls].clock);
            cls = next;
        }
        if (far_.empty()) return;
        for (auto gen = [nodes](uint32_t k) { return nodes[k].gen; };;) {
            far_.clean(gen);
            if (far_.empty() || far_.top().key >= mid_limit_) return;
            cls = far_.top().cls;
            far_.pop();
            const uint64_t key = nodes[cls].clock;
            assert(key >= near_limit_); // the mid tier is wider than a block
            push(nodes, cls, mid_head_[size_t(key >> blk_bits_) & mid_mask_]);
        }
    }

    unsigned blk_bits_ = 6; // W = 2 << blk_bits_
    uint64_t mask_ = 0;     // W - 1
    size_t mid_mask_ = 0;   // mid blocks - 1
    uint64_t near_limit_ = 0;  // keys below: near window; from here on: far
    uint64_t mid_limit_ = 0;   // keys below: near or mid; from here on: far
    uint64_t near_min_ = kEmpty; // the smallest near key, exact
    uint32_t near_count_ = 0;
    uint32_t count_ = 0;
    uint32_t far_stale_ = 0;
    std::vector<uint32_t> near_head_;
    std::vector<uint64_t> near_bits_;
    std::vector<uint64_t> near_sum_;
    std::vector<uint32_t> mid_head_;
    ClassHeap far_;
};

} // namespace pspxdp
