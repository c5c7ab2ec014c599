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
//     one largest plus one smallest gap frame always gets a largest gap);
//   - exact_min(): the smallest C_k however far, when the engine lets the
//     wire idle until it (gap horizon, clockless mode): off the per-frame
//     path, a bitmap search and one block's list.
//
// Shape, three tiers by distance from G:
//   near: a circular array of W exact one-byte-time buckets (intrusive doubly
//     linked lists of classes) with a bitmap and a summary bitmap. It holds
//     every key below near_limit, and near_limit stays within (G + W/2,
//     G + W], so its keys span less than W and a bucket is key mod W without
//     collisions. W/2 >= the exact span above: whenever the near tier is
//     empty, the minimum is too far for its exact value to matter.
//   mid: a circular array of blocks of W/2 byte times (lists again, visited
//     in order, one each time G crosses W/2 byte times; a bitmap of the
//     non-empty ones serves only exact_min) for the keys from near_limit up
//     to mid_limit = near_limit +
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

// Which of n buckets are non-empty, in two levels (a bit per bucket, a bit
// per non-zero 64-bucket word), so that the first non-empty bucket from any
// position, around the circle, costs a few word reads however sparse.
class BucketBits {
  public:
    static constexpr size_t kNone = ~size_t(0);

    void assign(size_t n) {
        bits_.assign((n + 63) / 64, 0);
        sum_.assign((bits_.size() + 63) / 64, 0);
    }
    void set(size_t i) {
        bits_[i / 64] |= uint64_t(1) << (i % 64);
        sum_[i / 4096] |= uint64_t(1) << (i / 64 % 64);
    }
    void clear(size_t i) {
        uint64_t &word = bits_[i / 64];
        word &= ~(uint64_t(1) << (i % 64));
        if (!word) sum_[i / 4096] &= ~(uint64_t(1) << (i / 64 % 64));
    }

    // The first set bucket at or after pos, circularly; kNone if none.
    size_t first_from(size_t pos) const {
        const size_t w = pos / 64;
        const uint64_t here = bits_[w] & (~uint64_t(0) << (pos % 64));
        if (here) return w * 64 + size_t(__builtin_ctzll(here));
        size_t word = w + 1 < bits_.size() ? word_from(w + 1) : kNone;
        // Around the circle: word w itself may hold the buckets below pos.
        if (word == kNone) word = word_from(0);
        if (word == kNone) return kNone;
        return word * 64 + size_t(__builtin_ctzll(bits_[word]));
    }

  private:
    // The first non-zero word at or after word `from`, if any.
    size_t word_from(size_t from) const {
        size_t s = from / 64;
        uint64_t sum = sum_[s] & (~uint64_t(0) << (from % 64));
        for (;;) {
            if (sum) return s * 64 + size_t(__builtin_ctzll(sum));
            if (++s == sum_.size()) return kNone;
            sum = sum_[s];
        }
    }

    std::vector<uint64_t> bits_;
    std::vector<uint64_t> sum_;
};

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
        near_bits_.assign(w);
        mid_head_.assign(mid_blocks, kNone);
        mid_bits_.assign(mid_blocks);
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
            mid_push(nodes, cls, key);
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
                near_bits_.clear(i);
                if (key == near_min_) near_min_ = near_next_min();
            }
        } else if (key < mid_limit_) {
            const size_t b = size_t(key >> blk_bits_) & mid_mask_;
            if (unlink(nodes, cls, mid_head_[b])) mid_bits_.clear(b);
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
                near_bits_.clear(i);
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
            migrate(nodes, g);
        }
    }

    // After advance(g): the smallest key if it is below g + exact_span (the
    // near tier is then not empty); otherwise a lower bound of it that is
    // itself at least g + exact_span.
    uint64_t min_key() const { return near_count_ ? near_min_ : near_limit_; }

    // After advance(g): the smallest key, exactly, however far; UINT64_MAX
    // when empty. The mid tier's blocks from near_limit_ on, around the
    // circle, are in key order, and every far key lies beyond them.
    uint64_t exact_min(const Node *nodes) {
        if (near_count_) return near_min_;
        const size_t b = mid_bits_.first_from(size_t(near_limit_ >> blk_bits_) & mid_mask_);
        if (b != BucketBits::kNone) {
            uint64_t min = kEmpty;
            for (uint32_t cls = mid_head_[b]; cls != kNone; cls = nodes[cls].next)
                min = std::min(min, nodes[cls].clock);
            return min;
        }
        far_.clean([nodes](uint32_t k) { return nodes[k].gen; });
        return far_.empty() ? kEmpty : far_.top().key;
    }

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
        const size_t i = near_bits_.first_from(size_t(origin & mask_));
        assert(i != BucketBits::kNone && "near window empty");
        return origin + ((i - origin) & mask_);
    }

    void near_insert(Node *nodes, uint32_t cls, uint64_t key) {
        near_min_ = std::min(near_min_, key);
        const size_t i = size_t(key & mask_);
        if (near_head_[i] == kNone) near_bits_.set(i);
        push(nodes, cls, near_head_[i]);
        ++near_count_;
    }

    void mid_push(Node *nodes, uint32_t cls, uint64_t key) {
        const size_t b = size_t(key >> blk_bits_) & mid_mask_;
        if (mid_head_[b] == kNone) mid_bits_.set(b);
        push(nodes, cls, mid_head_[b]);
    }

    // Moves the first mid block into the near tier, and what the far heap
    // holds below the new mid horizon into the mid tier. A run of empty
    // blocks is crossed in one step, as far as g allows: after a planned
    // idle (gap horizon, clockless) G jumps by the idle's length at once.
    [[gnu::noinline]] void migrate(Node *nodes, uint64_t g) {
        const size_t b = size_t(near_limit_ >> blk_bits_) & mid_mask_;
        if (mid_head_[b] == kNone) {
            // Blocks to cross until near_limit_ > g + W/2 (the loop's end in
            // advance()): near keys, all above g, stay within W below it.
            const uint64_t need = ((g + (uint64_t(1) << blk_bits_) - near_limit_) >> blk_bits_) + 1;
            const size_t first = mid_bits_.first_from(b);
            uint64_t empty;
            if (first != BucketBits::kNone) {
                empty = (first - b) & mid_mask_;
            } else {
                // The whole mid tier is empty: up to the far heap's first
                // key's block, which the new mid horizon then takes in. Far
                // keys are at least mid_limit_, two blocks or more away.
                far_.clean([nodes](uint32_t k) { return nodes[k].gen; });
                empty = far_.empty() ? need : (far_.top().key - near_limit_) >> blk_bits_;
            }
            const uint64_t skip = std::min(need, empty) << blk_bits_;
            near_limit_ += skip;
            mid_limit_ += skip;
        } else {
            uint32_t cls = mid_head_[b];
            mid_head_[b] = kNone;
            mid_bits_.clear(b);
            near_limit_ += uint64_t(1) << blk_bits_;
            mid_limit_ += uint64_t(1) << blk_bits_;
            while (cls != kNone) {
                const uint32_t next = nodes[cls].next;
                near_insert(nodes, cls, nodes[cls].clock);
                cls = next;
            }
        }
        if (far_.empty()) return;
        for (auto gen = [nodes](uint32_t k) { return nodes[k].gen; };;) {
            far_.clean(gen);
            if (far_.empty() || far_.top().key >= mid_limit_) return;
            const uint32_t cls = far_.top().cls;
            far_.pop();
            const uint64_t key = nodes[cls].clock;
            assert(key >= near_limit_); // beyond every block crossed
            mid_push(nodes, cls, key);
        }
    }

    unsigned blk_bits_ = 6;      // W = 2 << blk_bits_
    uint64_t mask_ = 0;          // W - 1
    size_t mid_mask_ = 0;        // mid blocks - 1
    uint64_t near_limit_ = 0;    // keys below: near window; from here on: far
    uint64_t mid_limit_ = 0;     // keys below: near or mid; from here on: far
    uint64_t near_min_ = kEmpty; // the smallest near key, exact
    uint32_t near_count_ = 0;
    uint32_t count_ = 0;
    uint32_t far_stale_ = 0;
    std::vector<uint32_t> near_head_;
    BucketBits near_bits_;
    std::vector<uint32_t> mid_head_;
    BucketBits mid_bits_;
    ClassHeap far_;
};

} // namespace pspxdp
