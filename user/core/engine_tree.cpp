// Class trees: rate, ceil, prio, parent (docs/design.md §3.12).
//
// The flat engine (engine.cpp) still decides when a leaf is due (its class
// clock, D_l); this file adds what a tree needs on top: the ceil clock K
// and the rate clock R of every class, charged along the frame's path, the
// guarantee's descent that picks a due leaf level by level under its
// ancestors' ceils (at each class the child of smallest R, or F_l for a
// leaf), and the borrowing descent that fills a slot no due leaf can use
// (the root first, at each class green children, R <= G, by (R, index),
// else by (prio, V, index); the leaf itself lends while R_l <= G, else the
// deepest green class).
//
// Each class with children (and the root, the wire) keeps its children in
// lazy heaps. For the guarantee: `dpend` by T_due(c), the earliest byte
// time a due leaf below may go (T_due(leaf) = now when due, T_due(c) =
// max(K_c, min over its children)), and, once T_due(c) <= G, `due` by (R_c
// or F_l, index). For borrowing: `pend` by T(c), the earliest byte time the
// child's subtree can borrow (exact: T(leaf) = K when backlogged, T(c) =
// max(K_c, min over its children)), and, once T(c) <= G, `green` by R_c
// (inner children only) and `yellow` by (prio, V_c). A child is re-placed
// (tree_refresh) only when its own clocks change, which happens only on
// the path of a frame, or when its subtree's backlog or due leaves do: both
// walk one path, O(depth) heap pushes. A held child is handed over to the
// free heaps lazily, when a descent or tree_due() passes its parent.
// Clockless, every K above reads K - reach_k (tree_open()): a ceil lets a
// batch through (tree_size_node()); for borrowing K - reach_b, a largest
// frame less (tree_open_borrow()), so that borrowed frames never leave a
// ceil closed to a due leaf's frame.
#include "core/engine.hpp"

#include "core/units.hpp"

#include <algorithm>
#include <cassert>

namespace pspxdp {

namespace {

using u128 = unsigned __int128;

bool entry_less(const u128 &ka, uint32_t pa, uint32_t na, const u128 &kb, uint32_t pb,
                uint32_t nb) {
    if (pa != pb) return pa < pb;
    if (ka != kb) return ka < kb;
    return na < nb;
}

} // namespace

// ---------------------------------------------------------------- heaps

// Heap order: the smallest (prio, key, node) on top (std heaps are max-heaps).
namespace {
struct TreeEntryAfter {
    template <class E> bool operator()(const E &a, const E &b) const {
        return entry_less(b.key, b.prio, b.node, a.key, a.prio, a.node);
    }
};
} // namespace

bool Engine::tree_entry_live(const TreeEntry &e, uint8_t place) const {
    const TreeNode &n = tnodes_[e.node];
    return n.gen == e.gen && (place >= kPlaceDuePending ? n.dplace : n.place) == place;
}

void Engine::tree_clean(TreeHeap &h, uint8_t place) {
    while (!h.v.empty() && !tree_entry_live(h.v.front(), place)) {
        std::pop_heap(h.v.begin(), h.v.end(), TreeEntryAfter{});
        h.v.pop_back();
    }
}

// Pushes, and rebuilds the heap without its stale entries when they
// outnumber the parent's children: lazy removal stays bounded.
void Engine::tree_push(TreeNode &p, TreeHeap &h, const TreeEntry &e) {
    h.v.push_back(e);
    std::push_heap(h.v.begin(), h.v.end(), TreeEntryAfter{});
    if (h.v.size() > 2 * size_t(p.nchildren) + 16) {
        const uint8_t place = &h == &p.pend    ? kPlacePending
                              : &h == &p.dpend ? kPlaceDuePending
                              : &h == &p.due   ? kPlaceDue
                                               : kPlaceEligible;
        std::erase_if(h.v, [&](const TreeEntry &x) { return !tree_entry_live(x, place); });
        std::make_heap(h.v.begin(), h.v.end(), TreeEntryAfter{});
    }
}

// ---------------------------------------------------------------- structure

uint32_t Engine::class_parent(uint32_t cls) const { return tnodes_[cls].parent; }
uint64_t Engine::class_ceil(uint32_t cls) const { return tnodes_[cls].ceil_bps; }
uint32_t Engine::class_prio(uint32_t cls) const { return tnodes_[cls].prio; }
uint32_t Engine::class_children(uint32_t cls) const { return tnodes_[cls].nchildren; }

// A class's clocks when the tree's rules come into force or it is added
// under them: K and (inner) R start where its flat clock is, V at its
// parent's share clock.
void Engine::tree_init_node(uint32_t cls) {
    TreeNode &n = tnodes_[cls];
    const uint64_t at = std::max(classes_[cls].clock, g_);
    n.kclock = at;
    n.kfrac = 0;
    n.rclock = at;
    n.rfrac = 0;
    n.vtag = tnode(n.parent).vsys;
    n.vfrac = 0;
    n.active = false;
}

// How far a class clock of rate x may fall behind G and still catch up:
// on the byte clock the lag limit of a flat class of rate x (§3.6);
// clockless the class's burst bound at x, as a flat class's (§4.5): a late
// wake-up is caught up within the bound instead of costing the borrowed
// share.
uint64_t Engine::tree_lag(uint32_t cls, uint64_t x) const {
    const uint64_t lag = lag_limit_for(x);
    if (!cfg_.clockless) return lag;
    const u128 wide = u128(class_burst_at(cls, x)) * cfg_.line_rate_bps / x;
    return std::max(lag, wide > (u128(1) << 62) ? uint64_t(1) << 62 : uint64_t(wide));
}

// The ceil clock, clockless, has its class's bound at its ceil split as a
// flat class's (size_class()): K may be up to reach_k ahead of G and let a
// frame through, and fall D behind it; the daemon wakes for it a batch
// after it opens (tree_batch_bytes_), so a class held at its ceil sends
// several frames a wake-up within its bound, as a flat class does.
// Borrowed frames get a largest frame (at the ceil, a byte time more for a
// charge's remainder) less of that reach: after them K is still within
// reach_k of G, so a due leaf's frame finds the ceil open and does not wait
// behind a sibling's borrowed batch (a prio-0 class beside borrowing bulk:
// docs/design.md §3.12, docs/results/2026-11-28-tree-prio-reach).
void Engine::tree_size_node(uint32_t cls) {
    TreeNode &n = tnodes_[cls];
    const uint64_t rate = classes_[cls].rate_bps;
    n.lag_r = rate ? tree_lag(cls, rate) : 0;
    n.lag_k = n.ceil_bps ? tree_lag(cls, n.ceil_bps) : 0;
    n.reach_k = n.reach_b = 0;
    if (cfg_.clockless && n.ceil_bps) {
        const BoundSplit s = clockless_split(class_burst_at(cls, n.ceil_bps), n.ceil_bps, true);
        n.lag_k = s.lag;
        n.reach_k = s.reach;
        const uint64_t frame =
            uint64_t(u128(cfg_.framing.mtu_unit_bytes()) * cfg_.line_rate_bps / n.ceil_bps) + 2;
        n.reach_b = s.reach > frame ? s.reach - frame : 0;
    }
}

// The batch: the least reach of a ceil clock (a wake-up that late still
// comes before every ceil on the path would have let a frame through under
// a reach of 0), and the reach of the default bound at M for the wire.
void Engine::tree_size_batch() {
    tree_batch_bytes_ = 0;
    wire_reach_bytes_ = 0;
    if (!cfg_.clockless) return;
    uint64_t least = UINT64_MAX;
    for (uint32_t k = 0; k < classes_.size(); ++k)
        if (classes_[k].state != State::Free && classes_[k].rate_bps)
            least = std::min(least, tnodes_[k].reach_k);
    tree_batch_bytes_ = least == UINT64_MAX ? 0 : least;
    wire_reach_bytes_ =
        clockless_split(burst_for(0, cfg_.line_rate_bps), cfg_.line_rate_bps, false).reach;
}

// When a class's ceil lets a frame through: K_k <= G + reach_k; a borrowed
// frame K_k <= G + reach_b.
uint64_t Engine::tree_open(const TreeNode &n) const {
    return n.kclock > n.reach_k ? n.kclock - n.reach_k : 0;
}
uint64_t Engine::tree_open_borrow(const TreeNode &n) const {
    return n.kclock > n.reach_b ? n.kclock - n.reach_b : 0;
}

// The tree's rules are in force while some class has a parent or a ceil
// above its rate; turning them off leaves the flat engine's state as is.
bool Engine::tree_making(uint32_t k) const {
    return classes_[k].state != State::Free &&
           (tnodes_[k].parent != kNone || tnodes_[k].ceil_bps > classes_[k].rate_bps);
}

void Engine::tree_update_mode() {
    tree_making_ = 0;
    for (uint32_t k = 0; k < classes_.size(); ++k) tree_making_ += tree_making(k);
    const bool on = tree_making_ > 0;
    if (on && !tree_) {
        troot_.vsys = 0;
        for (uint32_t k = 0; k < classes_.size(); ++k)
            if (classes_[k].state != State::Free) tree_init_node(k);
    }
    if (on && !tree_) {
        // A due class leaves the flat engine's eligible heap for the tree's
        // guarantee heaps (tree_rebuild() places it).
        tree_ = true;
        for (uint32_t k = 0; k < classes_.size(); ++k) {
            if (classes_[k].where != Where::Eligible) continue;
            unlink(k);
            classes_[k].where = Where::Eligible;
        }
    } else if (!on && tree_) {
        tree_off();
    }
    if (tree_) tree_rebuild();
}

// Every heap from scratch (after a change of structure, rates, M or mode):
// each backlogged leaf's path re-placed, O(n · depth · log fanout).
void Engine::tree_rebuild() {
    auto reset = [](TreeNode &n) {
        ++n.gen;
        n.place = n.dplace = kPlaceNone;
        n.n_pend = n.n_elig = n.n_dpend = n.n_due = 0;
        n.pend.v.clear();
        n.green.v.clear();
        n.yellow.v.clear();
        n.dpend.v.clear();
        n.due.v.clear();
    };
    reset(troot_);
    for (uint32_t k = 0; k < classes_.size(); ++k) {
        if (classes_[k].state == State::Free) continue;
        TreeNode &n = tnodes_[k];
        reset(n);
        tree_size_node(k);
    }
    tree_size_batch();
    for (uint32_t k = 0; k < classes_.size(); ++k)
        if (classes_[k].state == State::Backlogged && !tnodes_[k].nchildren) tree_refresh_path(k);
    // A class with no backlogged leaf below is not active, whatever it was
    // before the change (a former inner class now an idle leaf): it joins
    // its siblings' share clock when its subtree comes back.
    for (uint32_t k = 0; k < classes_.size(); ++k)
        if (classes_[k].state != State::Free && tnodes_[k].place == kPlaceNone)
            tnodes_[k].active = false;
}

// A leaf is due when the flat engine made it eligible: its own clock
// allows a frame (§3.3, clockless within its burst bound).
bool Engine::tree_leaf_due(uint32_t k) const {
    const Class &c = classes_[k];
    return c.state == State::Backlogged && c.rate_bps && c.where == Where::Eligible &&
           !tnodes_[k].nchildren;
}

// Among the children with a due leaf below: a leaf by its finish F_l (as
// §3.3 orders eligible classes), an inner class by its rate clock R.
Engine::u128 Engine::tree_due_key(uint32_t k) const {
    return tnodes_[k].nchildren ? u128(tnodes_[k].rclock) : u128(order_key(k));
}

// Re-places class k in its parent's heaps after its clocks, its backlog or
// its children's placement changed.
void Engine::tree_refresh(uint32_t k) {
    TreeNode &n = tnodes_[k];
    TreeNode &p = tnode(n.parent);
    if (n.place == kPlacePending)
        --p.n_pend;
    else if (n.place == kPlaceEligible)
        --p.n_elig;
    if (n.dplace == kPlaceDuePending)
        --p.n_dpend;
    else if (n.dplace == kPlaceDue)
        --p.n_due;
    ++n.gen;
    n.place = n.dplace = kPlaceNone;
    const bool leaf = n.nchildren == 0;
    // The guarantee: T_due(leaf) = now when due, T_due(k) = max(K_k, min
    // over its children): a due leaf waits for its ancestors' ceils only.
    if (leaf ? tree_leaf_due(k) : n.n_dpend + n.n_due > 0) {
        uint64_t t = 0;
        if (!leaf) {
            t = tree_open(n);
            if (n.n_due == 0) {
                tree_clean(n.dpend, kPlaceDuePending);
                t = std::max(t, uint64_t(n.dpend.v.front().key));
            }
        }
        if (t <= g_) {
            n.dplace = kPlaceDue;
            ++p.n_due;
            tree_push(p, p.due, TreeEntry{tree_due_key(k), 0, k, n.gen});
        } else {
            n.dplace = kPlaceDuePending;
            ++p.n_dpend;
            tree_push(p, p.dpend, TreeEntry{t, 0, k, n.gen});
        }
    }
    const bool active = leaf ? classes_[k].state == State::Backlogged && classes_[k].rate_bps
                             : n.n_pend + n.n_elig > 0;
    // A class whose subtree comes back from idle joins its siblings' share
    // clock: what it did not use while idle is not banked (start-time fair
    // queueing). One held back by a ceil stays active and keeps its tag.
    if (active && !n.active) n.vtag = std::max(n.vtag, p.vsys);
    n.active = active;
    if (!active) return;
    uint64_t t = tree_open_borrow(n);
    if (!leaf && n.n_elig == 0) {
        tree_clean(n.pend, kPlacePending);
        t = std::max(t, uint64_t(n.pend.v.front().key));
    }
    if (t <= g_) {
        n.place = kPlaceEligible;
        ++p.n_elig;
        tree_push(p, p.yellow, TreeEntry{n.vtag, n.prio, k, n.gen});
        if (!leaf) tree_push(p, p.green, TreeEntry{n.rclock, 0, k, n.gen});
    } else {
        n.place = kPlacePending;
        ++p.n_pend;
        tree_push(p, p.pend, TreeEntry{t, 0, k, n.gen});
    }
}

void Engine::tree_refresh_path(uint32_t k) {
    for (; k != kNone; k = tnodes_[k].parent) tree_refresh(k);
}

// The child on top of a held heap once G has reached its time (kNone:
// none), taken off the heap.
uint32_t Engine::tree_pop_reached(TreeHeap &h, uint8_t place) {
    tree_clean(h, place);
    if (h.v.empty() || h.v.front().key > g_) return kNone;
    const uint32_t k = h.v.front().node;
    std::pop_heap(h.v.begin(), h.v.end(), TreeEntryAfter{});
    h.v.pop_back();
    return k;
}

// Children whose subtree became borrowable as G passed their T go to the
// eligible heaps.
void Engine::tree_hand_over(TreeNode &n) {
    for (uint32_t k; (k = tree_pop_reached(n.pend, kPlacePending)) != kNone;) {
        TreeNode &c = tnodes_[k];
        c.place = kPlaceEligible;
        --n.n_pend;
        ++n.n_elig;
        tree_push(n, n.yellow, TreeEntry{c.vtag, c.prio, k, c.gen});
        if (c.nchildren) tree_push(n, n.green, TreeEntry{c.rclock, 0, k, c.gen});
    }
}

// Children whose due leaves' path opened as G passed their ceil clocks.
void Engine::tree_due_hand_over(TreeNode &n) {
    for (uint32_t k; (k = tree_pop_reached(n.dpend, kPlaceDuePending)) != kNone;) {
        TreeNode &c = tnodes_[k];
        c.dplace = kPlaceDue;
        --n.n_dpend;
        ++n.n_due;
        tree_push(n, n.due, TreeEntry{tree_due_key(k), 0, k, c.gen});
    }
}

// T_root: the earliest byte time anything can borrow (G: now).
uint64_t Engine::tree_due_borrow() {
    tree_hand_over(troot_);
    if (troot_.n_elig) return g_;
    return troot_.pend.v.empty() ? UINT64_MAX : uint64_t(troot_.pend.v.front().key);
}

// T_due of the root: the earliest byte time a due leaf's ceils let it go.
uint64_t Engine::tree_due_guaranteed() {
    tree_due_hand_over(troot_);
    if (troot_.n_due) return g_;
    tree_clean(troot_.dpend, kPlaceDuePending);
    return troot_.dpend.v.empty() ? UINT64_MAX : uint64_t(troot_.dpend.v.front().key);
}

uint64_t Engine::tree_due() { return std::min(tree_due_borrow(), tree_due_guaranteed()); }

// The guarantee's descent: from the root, at each class the child with a
// due leaf below whose ceils allow it, of smallest (R, or F_l for a leaf,
// index). kNone: no due leaf may go now.
uint32_t Engine::tree_pick_due() {
    uint32_t a = kNone;
    for (;;) {
        TreeNode &n = tnode(a);
        tree_due_hand_over(n);
        tree_clean(n.due, kPlaceDue);
        if (n.due.v.empty()) {
            // T_due is exact: a class placed due has a due child.
            assert(a == kNone);
            return kNone;
        }
        a = n.due.v.front().node;
        if (!tnodes_[a].nchildren) return a;
    }
}

// The borrowing descent: from the root, at each class a green child
// (R <= G) of smallest (R, index), else the child of smallest (prio, V,
// index), down to a leaf. The path is left in tpath_. kNone: nothing is
// borrowable now.
uint32_t Engine::tree_borrow() {
    uint32_t a = kNone;
    tpath_n_ = 0;
    for (;;) {
        TreeNode &n = tnode(a);
        tree_hand_over(n);
        tree_clean(n.green, kPlaceEligible);
        uint32_t pick;
        bool green = false;
        if (!n.green.v.empty() && n.green.v.front().key <= g_) {
            pick = n.green.v.front().node;
            green = true;
        } else {
            tree_clean(n.yellow, kPlaceEligible);
            if (n.yellow.v.empty()) {
                // T is exact, so a class placed eligible has a borrowable
                // child; the root may have none.
                assert(a == kNone);
                tpath_n_ = 0;
                return kNone;
            }
            pick = n.yellow.v.front().node;
        }
        tpath_[tpath_n_++] = TreeStep{pick, green};
        if (!tnodes_[pick].nchildren) return pick;
        a = pick;
    }
}

// ---------------------------------------------------------------- charges

// A class clock of rate x advanced by a frame of l2 bytes at G: no more
// than its lag limit behind G first (an idle class banks no more credit
// than a flat one), then by l2 · M / x exactly (remainder carried).
void Engine::tree_charge(uint64_t &clock, uint64_t &frac, uint64_t rate_bps, uint64_t l2) const {
    const uint64_t num = l2 * cfg_.line_rate_bps + frac;
    clock += num / rate_bps;
    frac = num % rate_bps;
}

// The share tag V advances by every frame through the class, at its rate:
// among siblings that borrow, the one with the least service per unit of
// rate so far goes first, which shares the spare so that every borrower's
// total is in proportion to its rate (weighted max-min, docs/design.md §3.12).
void Engine::tree_charge_share(TreeNode &n, uint64_t rate_bps, uint64_t l2) const {
    const uint64_t num = l2 * cfg_.line_rate_bps + n.vfrac;
    n.vtag += num / rate_bps;
    n.vfrac = num % rate_bps;
}

// A leaf's frame on its guarantee: K and V of the leaf, R, K and V of every
// ancestor.
void Engine::tree_charge_guaranteed(uint32_t leaf) {
    const uint64_t l2 = cfg_.framing.l2_bytes(classes_[leaf].head_len);
    TreeNode &t = tnodes_[leaf];
    if (g_ > t.lag_k && t.kclock < g_ - t.lag_k) t.kclock = g_ - t.lag_k, t.kfrac = 0;
    tree_charge(t.kclock, t.kfrac, t.ceil_bps, l2);
    if (g_ > t.lag_r && t.rclock < g_ - t.lag_r) t.rclock = g_ - t.lag_r, t.rfrac = 0;
    tree_charge(t.rclock, t.rfrac, classes_[leaf].rate_bps, l2);
    tree_charge_share(t, classes_[leaf].rate_bps, l2);
    for (uint32_t k = t.parent; k != kNone; k = tnodes_[k].parent) {
        TreeNode &n = tnodes_[k];
        if (g_ > n.lag_k && n.kclock < g_ - n.lag_k) n.kclock = g_ - n.lag_k, n.kfrac = 0;
        tree_charge(n.kclock, n.kfrac, n.ceil_bps, l2);
        if (g_ > n.lag_r && n.rclock < g_ - n.lag_r) n.rclock = g_ - n.lag_r, n.rfrac = 0;
        tree_charge(n.rclock, n.rfrac, classes_[k].rate_bps, l2);
        tree_charge_share(n, classes_[k].rate_bps, l2);
        ClassCounters &cc = cold_[k].counters;
        ++cc.frames;
        cc.l2_bytes += l2;
    }
}

// A borrowed frame along tpath_: K and V of every class on the path, R of
// the lender (the deepest green class) and its ancestors; a parent's share
// clock moves up to the tag of the child it chose by tag. The leaf leaves the flat engine's pending
// set with its R untouched (what it borrows does not spend its guarantee); the caller emits the
// frame.
void Engine::tree_charge_borrowed(uint32_t leaf) {
    Class &c = classes_[leaf];
    unlink(leaf);
    restore_frac(c);
    const uint64_t l2 = cfg_.framing.l2_bytes(c.head_len);
    // The leaf's due clock: its next frame on its guarantee no earlier than
    // one period after this one, so that a leaf served beyond its rate is
    // not also due on a fixed grid (docs/design.md §3.12, "Why it holds").
    {
        const uint64_t num = l2 * cfg_.line_rate_bps;
        uint64_t at = g_ + num / c.rate_bps;
        const uint64_t frac = num % c.rate_bps;
        if (cfg_.clockless) at = at > cold_[leaf].lag_limit ? at - cold_[leaf].lag_limit : 0;
        if (c.clock < at || (c.clock == at && c.frac < frac)) c.clock = at, c.frac = frac;
    }
    // The lender: the leaf itself while its own rate has room (R_l <= G),
    // else the deepest green class on the path, else the wire.
    const bool own = tnodes_[leaf].rclock <= g_;
    int lender = -1;
    for (uint32_t i = 0; i < tpath_n_; ++i)
        if (tpath_[i].green || (own && i + 1 == tpath_n_)) lender = int(i);
    for (uint32_t i = 0; i < tpath_n_; ++i) {
        const uint32_t k = tpath_[i].node;
        TreeNode &n = tnodes_[k];
        if (g_ > n.lag_k && n.kclock < g_ - n.lag_k) n.kclock = g_ - n.lag_k, n.kfrac = 0;
        tree_charge(n.kclock, n.kfrac, n.ceil_bps, l2);
        if (int(i) <= lender) {
            if (g_ > n.lag_r && n.rclock < g_ - n.lag_r) n.rclock = g_ - n.lag_r, n.rfrac = 0;
            tree_charge(n.rclock, n.rfrac, classes_[k].rate_bps, l2);
        }
        if (!tpath_[i].green) {
            TreeNode &p = tnode(i ? tpath_[i - 1].node : kNone);
            p.vsys = std::max(p.vsys, n.vtag);
        }
        tree_charge_share(n, classes_[k].rate_bps, l2);
        ClassCounters &cc = cold_[k].counters;
        if (int(i) == lender && !own)
            cc.lent_bytes += l2;
        else if (int(i) > lender)
            cc.borrowed_bytes += l2;
        if (n.nchildren) {
            ++cc.frames;
            cc.l2_bytes += l2;
        }
    }
}

// A clock waiting ahead of G keeps its position in its own period when the
// rate changes (as set_rate() rescales C_k).
void Engine::tree_rescale(uint64_t &clock, uint64_t &frac, uint64_t old_bps,
                          uint64_t new_bps) const {
    if (old_bps && new_bps && old_bps != new_bps && clock > g_)
        clock = g_ + uint64_t(u128(clock - g_) * old_bps / new_bps);
    if (old_bps != new_bps) frac = 0;
}

// ---------------------------------------------------------------- config

Result<void> Engine::configure_tree(const std::vector<TreeSpec> &specs) {
    ++inputs_;
    const uint32_t n = uint32_t(classes_.size());
    struct Want {
        uint64_t rate, ceil;
        uint32_t parent, prio;
    };
    std::vector<Want> want(n);
    for (uint32_t k = 0; k < n; ++k)
        want[k] = {classes_[k].rate_bps, tnodes_[k].ceil_bps, tnodes_[k].parent, tnodes_[k].prio};
    for (const TreeSpec &s : specs) {
        if (!has_class(s.cls)) return err("no such class");
        want[s.cls] = {s.rate_bps, s.ceil_bps ? s.ceil_bps : s.rate_bps, s.parent, s.prio};
        if (s.parent != kTreeNoParent && !has_class(s.parent)) return err("unknown parent");
        if (s.parent == s.cls) return err("a class cannot be its own parent");
    }
    std::vector<uint64_t> child_sum(n, 0);
    std::vector<uint32_t> children(n, 0);
    uint64_t top_sum = 0;
    for (uint32_t k = 0; k < n; ++k) {
        if (classes_[k].state == State::Free) continue;
        const Want &w = want[k];
        if (!w.rate && w.ceil) return err("a normal (unpaced) class has no ceil");
        if (w.ceil < w.rate)
            return err("ceil " + format_rate(w.ceil) + " is below the rate " + format_rate(w.rate));
        if (w.parent == kNone) {
            top_sum += w.rate;
            continue;
        }
        if (!w.rate) return err("a normal (unpaced) class cannot have a parent");
        if (!want[w.parent].rate) return err("the parent is a normal (unpaced) class");
        uint32_t depth = 1;
        for (uint32_t p = w.parent; p != kNone; p = want[p].parent)
            if (++depth > kMaxTreeDepth)
                return err("the tree is deeper than " + std::to_string(kMaxTreeDepth) +
                           " levels, or has a cycle");
        if (w.ceil > want[w.parent].ceil)
            return err("a child's ceil " + format_rate(w.ceil) + " is above its parent's " +
                       format_rate(want[w.parent].ceil));
        child_sum[w.parent] += w.rate;
        ++children[w.parent];
    }
    if (top_sum > cfg_.line_rate_bps)
        return err("the top-level rates sum to " + format_rate(top_sum) + ", above the line rate " +
                   format_rate(cfg_.line_rate_bps));
    for (uint32_t k = 0; k < n; ++k) {
        if (classes_[k].state == State::Free) continue;
        if (child_sum[k] > want[k].rate)
            return err("the children's rates sum to " + format_rate(child_sum[k]) +
                       ", above their parent's rate " + format_rate(want[k].rate));
        if (children[k] && classes_[k].state != State::Idle)
            return err("a class with children holds frames");
    }
    // Accepted: clocks rescaled, then the structure, then the heaps.
    for (uint32_t k = 0; k < n; ++k) {
        if (classes_[k].state == State::Free) continue;
        TreeNode &t = tnodes_[k];
        const Want &w = want[k];
        if (tree_) {
            tree_rescale(t.kclock, t.kfrac, t.ceil_bps, w.ceil);
            tree_rescale(t.rclock, t.rfrac, classes_[k].rate_bps, w.rate);
        }
        if (w.rate != classes_[k].rate_bps) apply_rate(k, w.rate);
        t.ceil_bps = w.ceil;
        t.prio = w.prio;
        t.parent = w.parent;
        t.nchildren = children[k];
    }
    paced_sum_bps_ = top_sum;
    troot_.nchildren = 0;
    for (uint32_t k = 0; k < n; ++k)
        troot_.nchildren += classes_[k].state != State::Free && want[k].parent == kNone;
    tree_update_mode();
    return {};
}

} // namespace pspxdp
