#include "core/engine.hpp"

#include "core/units.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <stdexcept>

namespace pspxdp {

namespace {

using u128 = unsigned __int128;

// resync_or_wait's answer when next() decides on after the resync.
constexpr std::nullopt_t kGoOnDeciding = std::nullopt;

} // namespace

// ---------------------------------------------------------------- classes

Engine::Engine(const EngineConfig &config) : cfg_(config) {
    if (cfg_.line_rate_bps == 0 || cfg_.line_rate_bps > kMaxLineRateBps)
        throw std::invalid_argument("engine: line rate out of range");
    // Clockless, a class's stored clock is D_k below its schedule (see
    // size_class()): G starts far enough up that a class starting at G
    // starts with its bound's worth from the first decision.
    if (cfg_.clockless) g_ = kClocklessStartG;
    // The exact earliest pending C_k matters only up to one largest plus one
    // smallest gap frame ahead of G (see emit_gap).
    pending_.init(uint64_t(cfg_.framing.max_gap_wire_bytes()) + cfg_.framing.min_gap_wire_bytes(),
                  g_);
    update_horizon();
}

// H in byte times at the line rate (H = 0 and no run-ahead when clockless).
// A finite H so large that it saturates behaves as the paper's rule anyway.
void Engine::update_horizon() {
    // Clockless, G is the wire's position: never ahead of it.
    ahead_limit_ = cfg_.clockless ? UINT64_MAX : cfg_.window_bytes;
    if (cfg_.clockless)
        horizon_bytes_ = 0;
    else if (cfg_.gap_horizon_ns == kGapHorizonInf)
        horizon_bytes_ = UINT64_MAX;
    else
        horizon_bytes_ = bytes_in_ns_floor(cfg_.gap_horizon_ns, cfg_.line_rate_bps);
}

void Engine::set_gap_horizon_ns(uint64_t horizon_ns) {
    ++inputs_;
    cfg_.gap_horizon_ns = horizon_ns;
    update_horizon();
}

// A planned idle in progress is the old mode's: the next wire position past
// G is then judged by the new mode's rules (an idle or an underrun).
void Engine::set_clockless(bool clockless) {
    ++inputs_;
    cfg_.clockless = clockless;
    planned_ = false;
    update_horizon();
    resize_classes();
    if (tree_) tree_rebuild();
}

// Every class's limits again (a mode or the line rate changed): a backlogged
// class is re-admitted under them.
void Engine::resize_classes() {
    min_slack_bytes_ = UINT64_MAX;
    for (uint32_t cls = 0; cls < classes_.size(); ++cls) {
        Class &c = classes_[cls];
        if (c.state == State::Free || !c.rate_bps) continue;
        size_class(cls);
        c.frac = 0;
        if (c.state == State::Backlogged) {
            unlink(cls);
            admit(cls);
        }
    }
}

bool Engine::has_class(uint32_t cls) const {
    return cls < classes_.size() && classes_[cls].state != State::Free;
}

uint64_t Engine::class_rate(uint32_t cls) const { return classes_[cls].rate_bps; }

const ClassCounters &Engine::class_counters(uint32_t cls) const { return cold_[cls].counters; }

uint64_t Engine::class_burst(uint32_t cls) const {
    return class_burst_at(cls, classes_[cls].rate_bps);
}

// The bound class cls would have at rate_bps (a tree's ceil clock runs at
// its ceil: docs/design.md §3.12).
uint64_t Engine::class_burst_at(uint32_t cls, uint64_t rate_bps) const {
    return burst_for(cold_[cls].burst_bytes, rate_bps);
}

// The bound of a clock of rate_bps whose class set set_bytes (0: the
// engine's default, at least burst_floor_ns of its rate).
uint64_t Engine::burst_for(uint64_t set_bytes, uint64_t rate_bps) const {
    const uint64_t largest = cfg_.framing.mtu_unit_bytes();
    uint64_t b = set_bytes ? set_bytes : cfg_.burst_bytes;
    if (!b) b = kDefaultBurstMtus * largest;
    if (!set_bytes && cfg_.burst_floor_ns)
        b = std::max(b, uint64_t(u128(rate_bps) * cfg_.burst_floor_ns / 8'000'000'000));
    return std::max(b, largest);
}

// A paced class's limits. Byte clock: the lag limit. Clockless, the burst
// bound B_k as a token bucket of rate r_k in front of the fluid schedule:
// with T_k = B_k * M / r_k byte times (the bound's worth of the class's
// time) a frame may leave T_k - its own period ahead of its schedule, so a
// class that has been backlogged all along is some way ahead of it and a
// late wake-up eats into that first; only lateness past its schedule (C_k
// behind the wire) is given up. The class's stored clock is C_k - D_k, the
// wake-up planned D_k before that point, so the pending wheel keys every
// class by its wake-up:
//   wake-up:      stored clock <= W                  (the wheel, as G's)
//   may leave:    F_k(stored) + D_k - T_k <= W, i.e. F_k <= W + reach
//   exceeds B_k:  stored clock < W - D_k             (lag_limit = D_k)
// With a bound of one largest frame D_k = 0: no frame leaves before its due
// time, and none catches up.
// D_k is how late a wake-up may come at no cost in rate, and T_k - D_k what
// an on-time wake-up releases. The slack S (clockless_slack_ns) sets the
// batch: n = floor((T_k - S) / q) largest frames a wake-up (q: a largest
// frame's period; at least one). D_k is then the most lateness that leaves
// that batch whole, T_k - n * q (between S and S + q; q rounded up): the same wake-ups as
// waking S before overflow, but a 10 Mbit/s class with a 3-frame bound
// absorbs 1.2 ms instead of 50 us (docs/design.md §4.5: on a shared host wake-ups came
// up to milliseconds late, other deadline tasks ahead of the daemon, and
// every one past 50 us cost rate). A bound within S + q of one frame:
// D_k = T_k - q, one frame a wake-up, as much lateness as the bound holds.
void Engine::size_class(uint32_t cls) {
    Class &c = classes_[cls];
    ClassCold &k = cold_[cls];
    if (!cfg_.clockless) {
        k.lag_limit = lag_limit_for(c.rate_bps);
        k.reach = 0;
        return;
    }
    const BoundSplit split = clockless_split(class_burst(cls), c.rate_bps, false);
    k.lag_limit = split.lag;
    k.reach = split.reach;
    min_slack_bytes_ = std::min(min_slack_bytes_, k.lag_limit);
}

// A bound of burst_bytes at rate_bps, T = burst_bytes · M / rate_bps byte
// times, split into D (the lateness a wake-up may have at no cost) and the
// reach T - D (what an on-time wake-up releases), as size_class() explains.
// keep_half: D at least T / 2 (a tree's ceil clock, docs/design.md §3.12).
Engine::BoundSplit Engine::clockless_split(uint64_t burst_bytes, uint64_t rate_bps,
                                           bool keep_half) const {
    const uint64_t m = cfg_.line_rate_bps;
    // Saturated far beyond any schedule (2^62 byte times: years at any rate).
    const u128 wide = u128(burst_bytes) * m / rate_bps;
    const uint64_t bound = wide > (u128(1) << 62) ? uint64_t(1) << 62 : uint64_t(wide);
    const uint64_t largest =
        std::min(bound, uint64_t(u128(cfg_.framing.mtu_unit_bytes()) * m / rate_bps));
    uint64_t slack = bytes_in_ns_floor(cfg_.clockless_slack_ns, m);
    if (keep_half) slack = std::max(slack, bound / 2);
    // q rounded up, with a byte time for F_k's remainder: a frame's finish
    // is at most that past its wake-up, so an on-time wake-up's n frames
    // are all within reach (reach = n * step) and none waits for a second.
    const uint64_t step = largest + 2;
    const uint64_t room = bound > largest ? bound - largest : 0; // T_k - q: one frame a wake-up
    uint64_t lag;
    if (room <= slack || bound < slack + step)
        lag = room;
    else
        lag = bound - (bound - slack) / step * step; // T_k - n * step
    return {lag, bound - lag};
}

// The earliest stored clock a backlogged class may have: G, or clockless the
// point past which it would exceed its bound.
uint64_t Engine::clock_floor(uint32_t cls) const {
    if (!cfg_.clockless || !classes_[cls].rate_bps) return g_;
    const uint64_t d = cold_[cls].lag_limit;
    return g_ > d ? g_ - d : 0;
}
// The lateness a paced class can reach when the paced load fits on the wire:
// one full frame's period at its own rate plus one largest frame of blocking
// (WF2Q+'s bound). A class later than that is offered more than the wire can
// carry for it (e.g. 95 % of M in 64-byte frames); its excess lateness is
// dropped rather than kept as credit that would let it starve every other
// class later on.
uint64_t Engine::lag_limit_for(uint64_t rate_bps) const {
    u128 period = u128(cfg_.framing.mtu_unit_bytes()) * cfg_.line_rate_bps / rate_bps;
    return uint64_t(period) + cfg_.framing.max_gap_wire_bytes();
}

Result<uint32_t> Engine::add_class(uint64_t rate_bps, uint64_t burst_bytes) {
    ++inputs_;
    if (rate_bps > cfg_.line_rate_bps - paced_sum_bps_)
        return err("rate " + format_rate(rate_bps) + " would make the paced rates sum to " +
                   format_rate(paced_sum_bps_ + rate_bps) + ", above the line rate " +
                   format_rate(cfg_.line_rate_bps));
    uint32_t cls;
    if (!free_.empty()) {
        cls = free_.back();
        free_.pop_back();
    } else {
        cls = uint32_t(classes_.size());
        classes_.emplace_back();
        cold_.emplace_back();
        tnodes_.emplace_back();
    }
    Class &c = classes_[cls];
    const uint32_t gen = c.gen; // stale heap entries of a former user may remain
    c = Class{};
    c.gen = gen;
    set_class_rate(c, rate_bps);
    c.clock = g_;
    c.state = State::Idle;
    cold_[cls] = ClassCold{};
    cold_[cls].burst_bytes = burst_bytes;
    if (rate_bps) size_class(cls);
    c.clock = clock_floor(cls);
    paced_sum_bps_ += rate_bps;
    // A new class is flat: top level, its ceil its rate (configure_tree()).
    ++troot_.nchildren;
    TreeNode &t = tnodes_[cls];
    const uint32_t tgen = t.gen; // stale tree entries of a former user may remain
    t = TreeNode{};
    t.gen = tgen + 1;
    t.ceil_bps = rate_bps;
    if (tree_) {
        tree_init_node(cls);
        tree_size_node(cls);
        tree_size_batch();
    }
    return cls;
}

Result<void> Engine::set_burst(uint32_t cls, uint64_t burst_bytes) {
    ++inputs_;
    if (!has_class(cls)) return err("no such class");
    Class &c = classes_[cls];
    const bool backlogged = c.state == State::Backlogged;
    if (backlogged) {
        unlink(cls);
        restore_frac(c);
    }
    const uint64_t old_d = cold_[cls].lag_limit;
    cold_[cls].burst_bytes = burst_bytes;
    if (c.rate_bps) {
        size_class(cls);
        // The stored clock is C_k - D_k (clockless): C_k stays.
        if (cfg_.clockless)
            c.clock = std::max(c.clock + old_d, cold_[cls].lag_limit) - cold_[cls].lag_limit;
    }
    if (backlogged) admit(cls);
    if (tree_) {
        // Its ceil clock's reach moves where its parent holds it.
        tree_size_node(cls);
        tree_size_batch();
        tree_refresh_path(cls);
    }
    return {};
}

// The per-frame division by r_k becomes a multiplication by the reciprocal
// (see compute_finish).
void Engine::set_class_rate(Class &c, uint64_t rate_bps) {
    c.rate_bps = rate_bps;
    c.inv_rate = rate_bps ? UINT64_MAX / rate_bps : 0;
}

void Engine::unlink(uint32_t cls) {
    Class &c = classes_[cls];
    switch (c.where) {
    case Where::Pending: pending_.remove(classes_.data(), cls); break;
    case Where::Eligible:
        if (solo_ == cls) {
            solo_ = kNone;
            break;
        }
        ++c.gen; // its heap entry is stale from now on
        if (++stale_eligible_ > 64 && stale_eligible_ > eligible_.size() / 2) {
            eligible_.compact([this](uint32_t k) { return classes_[k].gen; });
            stale_eligible_ = 0;
        }
        break;
    case Where::Normal: normal_unlink(cls); break;
    case Where::None: break;
    }
    c.where = Where::None;
}

Result<void> Engine::set_rate(uint32_t cls, uint64_t rate_bps) {
    ++inputs_;
    if (!has_class(cls)) return err("no such class");
    Class &c = classes_[cls];
    if (tree_) {
        // In a tree the rate is checked against the parent's: the whole tree.
        const TreeNode &t = tnodes_[cls];
        return configure_tree(
            {TreeSpec{cls, rate_bps, t.parent, std::max(t.ceil_bps, rate_bps), t.prio}});
    }
    uint64_t others = paced_sum_bps_ - c.rate_bps;
    if (rate_bps > cfg_.line_rate_bps - others)
        return err("rate " + format_rate(rate_bps) + " would make the paced rates sum to " +
                   format_rate(others + rate_bps) + ", above the line rate " +
                   format_rate(cfg_.line_rate_bps));
    paced_sum_bps_ = others + rate_bps;
    tnodes_[cls].ceil_bps = rate_bps;
    apply_rate(cls, rate_bps);
    return {};
}

// set_rate() without its checks (configure_tree() checks the whole tree).
void Engine::apply_rate(uint32_t cls, uint64_t rate_bps) {
    Class &c = classes_[cls];
    // Out of the pending wheel before its key (C_k) changes.
    const bool backlogged = c.state == State::Backlogged;
    if (backlogged) unlink(cls);
    if (rate_bps && c.rate_bps && c.clock > g_) {
        // The wait left before the next frame was sized for the old rate:
        // rescale it, so a slow class made fast does not sit out its old period.
        c.clock = g_ + uint64_t(u128(c.clock - g_) * c.rate_bps / rate_bps);
    } else if (c.clock < g_) {
        c.clock = g_;
    }
    c.frac = 0; // the remainder's unit was 1/old rate: less than a byte time is dropped
    set_class_rate(c, rate_bps);
    cold_[cls].lag_limit = 0;
    if (rate_bps) size_class(cls);
    if (c.clock < clock_floor(cls)) c.clock = clock_floor(cls);
    if (backlogged) admit(cls);
}

// The tree's rules end: due classes go back to the flat eligible heap.
void Engine::tree_off() {
    tree_ = false;
    for (uint32_t k = 0; k < classes_.size(); ++k)
        if (classes_[k].where == Where::Eligible) make_eligible(k);
}

Result<void> Engine::remove_class(uint32_t cls) {
    ++inputs_;
    if (!has_class(cls)) return err("no such class");
    Class &c = classes_[cls];
    if (c.state == State::Backlogged || c.state == State::Sent)
        return err("class still has queued frames");
    TreeNode &t = tnodes_[cls];
    if (t.nchildren) return err("class has children");
    if (t.parent == kNone) paced_sum_bps_ -= c.rate_bps;
    if (tree_making(cls) && --tree_making_ == 0) tree_off();
    --tnode(t.parent).nchildren;
    ++t.gen; // its stale tree entries (it is idle: placed nowhere)
    t.place = t.dplace = kPlaceNone;
    t.parent = kNone;
    if (last_cls_ == cls) last_cls_ = kNone;
    const uint32_t gen = c.gen;
    c = Class{};
    c.gen = gen;
    free_.push_back(cls);
    if (tree_) tree_size_batch();
    return {};
}

Result<void> Engine::set_line_rate(uint64_t line_rate_bps) {
    ++inputs_;
    if (line_rate_bps == 0 || line_rate_bps > kMaxLineRateBps)
        return err("line rate " + format_rate(line_rate_bps) + " out of range (1bit .. " +
                   format_rate(kMaxLineRateBps) + ")");
    if (paced_sum_bps_ > line_rate_bps)
        return err("paced rates sum to " + format_rate(paced_sum_bps_) + ", above the line rate " +
                   format_rate(line_rate_bps));
    cfg_.line_rate_bps = line_rate_bps;
    anchored_ = false; // the wire position restarts at the next decision
    planned_ = false;
    update_horizon();
    resize_classes();
    if (tree_) tree_rebuild(); // lag limits are in byte times at M
    return {};
}

// ---------------------------------------------------------------- backlog

// F_k = C_k + (s * M + remainder) / r_k, quotient and remainder exact. The
// quotient comes from the reciprocal inv = floor((2^64 - 1) / r): with
// num < 2^64, num * inv / 2^64 lies in (num / r - 1, num / r], so the
// estimate is the quotient or one less, and one correction step makes it
// exact. That replaces a 64-bit division (tens of cycles) per frame.
void Engine::compute_finish(uint32_t cls) {
    Class &c = classes_[cls];
    if (c.clock < g_) { // only a late class can be past its lag limit
        const uint64_t lag_limit = cold_[cls].lag_limit;
        if (g_ > lag_limit && c.clock < g_ - lag_limit) drop_late(cls, g_ - lag_limit);
    }
    const uint64_t num = uint64_t(cfg_.framing.l2_bytes(c.head_len)) * cfg_.line_rate_bps + c.frac;
    uint64_t q = uint64_t((u128(num) * c.inv_rate) >> 64);
    uint64_t r = num - q * c.rate_bps;
    if (r >= c.rate_bps) {
        ++q;
        r -= c.rate_bps;
    }
    c.finish = c.clock + q;
    c.frac = r; // F_k's remainder from now on (see Class::frac)
}

void Engine::admit(uint32_t cls) {
    Class &c = classes_[cls];
    if (!c.rate_bps) {
        normal_push(cls);
        return;
    }
    compute_finish(cls);
    // Clockless: within its bound a class may leave before its wake-up (the
    // rest of a batch; see size_class()).
    // F_k's remainder counts: a frame whose finish is within reach only once
    // rounded down would leave a fraction of a byte time beyond the bound.
    if (c.clock <= g_ || (cfg_.clockless && (c.finish <= g_ || c.finish - g_ < cold_[cls].reach ||
                                             (c.finish - g_ == cold_[cls].reach && c.frac == 0)))) {
        make_eligible(cls);
    } else {
        c.where = Where::Pending;
        pending_.insert(classes_.data(), cls);
    }
}

void Engine::make_eligible(uint32_t cls) {
    Class &c = classes_[cls];
    c.where = Where::Eligible;
    if (tree_) [[unlikely]] {
        // Due: the tree's guarantee heaps hold it (docs/design.md §3.12).
        tree_refresh_path(cls);
        return;
    }
    if (solo_ == kNone)
        solo_ = cls;
    else
        eligible_.push(order_key(cls), cls, c.gen);
}

// A backlogged paced class's frac holds F_k's remainder (see Class::frac).
// When it leaves the backlog without sending, C_k's own remainder, as
// compute_finish() left it, comes back: F_k - C_k and F_k's remainder are
// the quotient and remainder of (s * M + C_k's remainder) / r_k.
void Engine::restore_frac(Class &c) {
    if (!c.rate_bps) return;
    const uint64_t num = (c.finish - c.clock) * c.rate_bps + c.frac;
    c.frac = num - uint64_t(cfg_.framing.l2_bytes(c.head_len)) * cfg_.line_rate_bps;
}

void Engine::set_head(uint32_t cls, uint32_t len, uint64_t now_ns) {
    ++inputs_;
    assert(has_class(cls));
    // A class with children holds no frames (docs/design.md §3.12): the
    // caller must not queue any on it.
    assert(!tnodes_[cls].nchildren);
    if (tnodes_[cls].nchildren) [[unlikely]]
        return;
    Class &c = classes_[cls];
    switch (c.state) {
    case State::Idle:
        if (ClassCold &k = cold_[cls]; k.empty_from_ns != kNoTime) {
            if (now_ns != kNoTime && now_ns > k.empty_from_ns) {
                k.counters.empty_ns += now_ns - k.empty_from_ns;
                ++k.counters.empty_events;
            }
            k.empty_from_ns = kNoTime;
        }
        // Idle classes bank no credit: a clock left behind restarts from G
        // (clockless: with its bound's worth, as a full token bucket).
        if (c.clock < clock_floor(cls)) {
            c.clock = clock_floor(cls);
            c.frac = 0;
        }
        c.fresh = true;
        break;
    case State::Sent: --awaiting_head_; break;
    case State::Backlogged: // the head changed under us
        unlink(cls);
        --backlogged_;
        restore_frac(c);
        break;
    case State::Free: return;
    }
    c.state = State::Backlogged;
    ++backlogged_;
    c.head_len = len;
    admit(cls);
    if (tree_) tree_refresh_path(cls);
}

void Engine::set_empty(uint32_t cls, uint64_t now_ns) {
    ++inputs_;
    assert(has_class(cls));
    Class &c = classes_[cls];
    if (c.state == State::Free || c.state == State::Idle) return;
    if (c.state == State::Sent) --awaiting_head_;
    if (c.state == State::Backlogged) {
        unlink(cls);
        --backlogged_;
        restore_frac(c);
    }
    if (c.state != State::Free) c.state = State::Idle;
    // From here the class could have sent once its next frame may start:
    // C_k (clockless the stored clock is C_k - D_k, size_class()).
    if (now_ns != kNoTime && c.rate_bps && anchored_) {
        const uint64_t next = cfg_.clockless ? c.clock + cold_[cls].lag_limit : c.clock;
        cold_[cls].empty_from_ns = std::max(now_ns, real_time_of(next));
    }
    if (tree_) tree_refresh_path(cls);
}

void Engine::normal_push(uint32_t cls) {
    Class &c = classes_[cls];
    c.next = kNone;
    c.prev = normal_tail_;
    if (normal_tail_ != kNone)
        classes_[normal_tail_].next = cls;
    else
        normal_head_ = cls;
    normal_tail_ = cls;
    c.where = Where::Normal;
    ++normal_count_;
}

void Engine::normal_unlink(uint32_t cls) {
    Class &c = classes_[cls];
    if (c.prev != kNone)
        classes_[c.prev].next = c.next;
    else
        normal_head_ = c.next;
    if (c.next != kNone)
        classes_[c.next].prev = c.prev;
    else
        normal_tail_ = c.prev;
    c.where = Where::None;
    if (--normal_count_ == 0) normal_held_since_ = UINT64_MAX;
}

// ---------------------------------------------------------------- decisions

uint64_t Engine::wire_position(uint64_t now_ns) const {
    if (!anchored_ || now_ns <= anchor_ns_) return anchored_ ? anchor_g_ : g_;
    return anchor_g_ + bytes_in_ns_floor(now_ns - anchor_ns_, cfg_.line_rate_bps);
}

void Engine::anchor(uint64_t now_ns) {
    anchored_ = true;
    anchor_ns_ = now_ns;
    anchor_g_ = g_;
    cached_now_ns_ = now_ns;
    cached_wire_ = g_;
}

// The per-frame path is kept short (few registers to save, no calls): what
// is rare (real-time corrections, several classes eligible at once, fresh
// classes, normal classes, gaps) is out of line.
Decision Engine::next(uint64_t now_ns) {
    if (!backlogged()) {
        idle_ = true;
        planned_ = false;
        return Decision{Action::Idle, 0, 0, 0};
    }
    if (!anchored_) {
        anchor(now_ns);
    } else {
        // A caller emits a batch of decisions per clock reading: compute the
        // wire position once per reading.
        if (now_ns != cached_now_ns_) {
            cached_now_ns_ = now_ns;
            cached_wire_ = wire_position(now_ns);
        }
        if (cached_wire_ > g_ || g_ - cached_wire_ >= ahead_limit_) {
            if (std::optional<Decision> wait = resync_or_wait(now_ns)) return *wait;
        }
    }
    idle_ = false;
    planned_ = false;

    pending_.advance(classes_.data(), g_, [this](uint32_t cls) { make_eligible(cls); });
    uint32_t cls;
    if (tree_) [[unlikely]] {
        // A due leaf whose ancestors' ceils allow it, chosen level by level
        // (docs/design.md §3.12).
        cls = tree_pick_due();
        if (cls == kNone) return next_unpaced();
        classes_[cls].where = Where::None;
        return send_due(cls);
    }
    cls = solo_;
    if (!eligible_.empty())
        cls = pick_eligible(); // may find only stale entries
    else
        solo_ = kNone;
    if (cls == kNone) return next_unpaced();
    return send_due(cls);
}

// The paced class chosen in (a) sends its head frame on its own rate.
[[gnu::always_inline]] inline Decision Engine::send_due(uint32_t cls) {
    Class &c = classes_[cls];
    if (c.fresh) restart_fresh(cls);
    if (cfg_.clockless) {
        // Later than its bound lets it catch up: the rest is given up.
        if (c.clock < clock_floor(cls)) [[unlikely]] {
            drop_late(cls, clock_floor(cls));
            compute_finish(cls);
        }
    } else if (c.clock < jump_to_ || c.finish + cfg_.framing.max_gap_wire_bytes() <= g_)
        [[unlikely]] {
        // Made late by a late wake-up, or late beyond the lag limit since
        // F_k was computed (G jumped past it): only then can F_k be a
        // largest gap behind G.
        relag(cls);
    }
    c.clock = c.finish; // and frac already holds F_k's remainder
    if (tree_) tree_charge_guaranteed(cls);
    return emit_frame(cls);
}

// Byte clock (clockless: the burst bound, size_class()). Drops the lateness
// a class may not catch up. A class due before the last late wake-up's wire
// position (jump_to_) was made late by the host's timer, not by other
// classes' frames: it catches up one frame's period at most, so a late
// wake-up costs at most one frame of burst (2 MTU at the class rate).
// Otherwise the lag limit (see compute_finish), which F_k was computed
// against before G jumped: late beyond it implies F_k + a
// largest gap <= G (lag_limit_for() is a full frame's period plus a largest
// gap; F_k - C_k is at most that period, plus one for the remainder), so
// next() calls this for every such class.
void Engine::relag(uint32_t cls) {
    Class &c = classes_[cls];
    uint64_t limit = cold_[cls].lag_limit;
    if (c.clock < jump_to_) limit -= cfg_.framing.max_gap_wire_bytes();
    if (g_ - c.clock <= limit) return;
    drop_late(cls, g_ - limit);
    compute_finish(cls);
}

// Moves a late class's clock up to floor: lateness it may not catch up.
// Clockless, that is real time the class gave up (its bound was exceeded).
void Engine::drop_late(uint32_t cls, uint64_t floor) {
    Class &c = classes_[cls];
    const uint64_t lost = floor - c.clock;
    if (cfg_.clockless) {
        cold_[cls].counters.late_lost_bytes += lost;
        counters_.late_lost_bytes += lost;
    } else {
        counters_.lag_clamped_bytes += lost;
    }
    c.clock = floor;
    c.frac = 0;
}

// Before the burst bound a late send restarted its class's schedule from the
// send (a rate loss at every preemption); now the bound absorbs it like a
// late wake-up: only counted.
void Engine::late_release(uint64_t now_ns) {
    if (!cfg_.clockless || last_cls_ == kNone || !anchored_) return;
    last_cls_ = kNone;
    const uint64_t wire = wire_position(now_ns);
    if (wire <= last_g_) return;
    const uint64_t late = wire - last_g_;
    ++counters_.late_wakeups;
    counters_.late_bytes += late;
    counters_.late_max_bytes = std::max(counters_.late_max_bytes, late);
}

// The wire position is past G (the wire idled) or G is a window ahead of it
// (clockless: G is ahead at all).
std::optional<Decision> Engine::resync_or_wait(uint64_t now_ns) {
    const uint64_t wire = cached_wire_;
    if (wire > g_) {
        if (planned_ || cfg_.clockless) {
            resume(now_ns);
            return kGoOnDeciding;
        }
        // The wire ran dry: everything sent so far has left and more time
        // passed. Cut that time out of the byte clock rather than paying
        // it back with a burst.
        if (idle_) {
            ++counters_.idle_resyncs;
            counters_.idle_bytes += wire - g_;
        } else {
            ++counters_.underrun_resyncs;
            counters_.underrun_bytes += wire - g_;
        }
        anchor(now_ns);
        return kGoOnDeciding;
    }
    // Until the window has room for one more byte; a paced frame is queued
    // on the wire as long as what is ahead of it lasts.
    return plan_wait(g_ - cfg_.window_bytes + 1, g_, false);
}

// The wire idled by plan, or (clockless) nothing serialises: G moves up to
// the wire's position instead of the anchor moving. The idle was wire time,
// as gap frames would have been; a due time it passed makes its class late,
// and the class catches up (see engine.hpp).
void Engine::resume(uint64_t now_ns) {
    const uint64_t wire = cached_wire_;
    if (planned_) {
        ++counters_.planned_idles;
        counters_.planned_idle_bytes += wire - g_;
        // Late by less than one ns of rounding is on time.
        if (wire > due_g_ && now_ns > time_of(due_g_)) {
            const uint64_t late = wire - due_g_;
            ++counters_.late_wakeups;
            counters_.late_bytes += late;
            counters_.late_max_bytes = std::max(counters_.late_max_bytes, late);
            jump_to_ = wire;
        }
    } else if (idle_) {
        ++counters_.idle_resyncs;
        counters_.idle_bytes += wire - g_;
    } else { // clockless: the caller came back late after a frame
        ++counters_.underrun_resyncs;
        counters_.underrun_bytes += wire - g_;
        jump_to_ = wire;
    }
    planned_ = false;
    g_ = wire;
}

// Clockless, no paced class may leave now (G is the wire's real-time
// position): a normal frame once the wire's line-rate model has room (it
// carries what the paced classes leave of M), else wait for that or for the
// earliest paced wake-up; a wake-up is late only past its slack, where a
// class would exceed its bound.
Decision Engine::clockless_unpaced() {
    // A tree's borrowed frames may run ahead of the line-rate model by a
    // batch (docs/design.md §3.12).
    if (tree_ && vwire_ <= g_ + wire_reach_bytes_) {
        const uint32_t leaf = tree_borrow();
        if (leaf != kNone) {
            tree_charge_borrowed(leaf);
            return emit_frame(leaf);
        }
    }
    if (normal_count_ && vwire_ <= g_) {
        const uint32_t cls = normal_head_;
        normal_unlink(cls);
        return emit_frame(cls);
    }
    uint64_t wake = pending_.exact_min(classes_.data());
    // A due leaf held by an ancestor's ceil (docs/design.md §3.12): woken a
    // batch after its path opens, no later than its ceils' own clocks.
    const auto later = [this](uint64_t t) {
        if (t <= g_) return t; // open now (held only by the line-rate model)
        return t > UINT64_MAX - tree_batch_bytes_ ? UINT64_MAX : t + tree_batch_bytes_;
    };
    if (tree_) wake = std::min(wake, later(tree_due_guaranteed()));
    uint64_t due = UINT64_MAX;
    if (wake != UINT64_MAX) due = wake + std::min(min_slack_bytes_, UINT64_MAX - wake);
    uint64_t target = normal_count_ ? std::min(wake, vwire_) : wake;
    // Borrowing waits for what the wire's line-rate model has room for.
    if (tree_) target = std::min(target, std::max(later(tree_due_borrow()), vwire_));
    return plan_wait(target, due, true);
}

// Wait until the wire reaches `target`; the earliest paced frame is due at
// `due` (UINT64_MAX: none). A planned wait lets the wire idle: see resume().
Decision Engine::plan_wait(uint64_t target, uint64_t due, bool planned) {
    if (planned) {
        planned_ = true;
        due_g_ = due;
    }
    const uint64_t wake = time_of(target);
    const uint64_t slack = due == UINT64_MAX ? UINT64_MAX : time_of(due) - wake;
    return Decision{Action::Wait, 0, 0, wake, slack};
}

// When the wire position is (or was) g, for any g: before the anchor too.
uint64_t Engine::real_time_of(uint64_t g) const {
    if (g >= anchor_g_) return time_of(g);
    const uint64_t back = ns_for_bytes_floor(anchor_g_ - g, cfg_.line_rate_bps);
    return anchor_ns_ > back ? anchor_ns_ - back : 0;
}

// The first ns at which the wire position reaches g (g >= the anchor's).
uint64_t Engine::time_of(uint64_t g) const {
    return anchor_ns_ + ns_for_bytes_ceil(g - anchor_g_, cfg_.line_rate_bps);
}

// The finish time the eligible classes are ordered by: F_k on the class's
// schedule. Clockless, the stored clock is D_k below it (size_class()), and
// D_k differs between classes (up to a period more than the slack): their
// stored finishes would order a pass by wake-ups, not by WF2Q+'s finishes.
uint64_t Engine::order_key(uint32_t cls) const {
    return cfg_.clockless ? classes_[cls].finish + cold_[cls].lag_limit : classes_[cls].finish;
}

// The eligible class of earliest (F_k, class) when the heap holds entries:
// solo_ against the heap's top. kNone if there is none.
uint32_t Engine::pick_eligible() {
    uint32_t cls = solo_;
    eligible_.clean([this](uint32_t k) { return classes_[k].gen; });
    if (!eligible_.empty()) {
        const ClassHeap::Entry &top = eligible_.top();
        if (cls == kNone || ClassHeap::order(top) < (u128(order_key(cls)) << 32 | cls)) {
            cls = top.cls;
            eligible_.pop();
            return cls;
        }
    }
    solo_ = kNone;
    return cls;
}

// A class back from idle owes nothing: if other classes' frames delayed its
// first one, its schedule starts when that frame leaves instead of catching
// up with a burst.
void Engine::restart_fresh(uint32_t cls) {
    Class &c = classes_[cls];
    c.fresh = false;
    if (c.clock < clock_floor(cls)) {
        c.clock = clock_floor(cls);
        c.frac = 0;
        compute_finish(cls);
    }
}

// No paced class is eligible: a normal class whose frame fits before the
// earliest paced class (give or take normal_block_bytes), else a gap, or
// beyond the gap horizon an idle wire.
Decision Engine::next_unpaced() {
    if (cfg_.clockless) return clockless_unpaced();
    if (tree_) {
        const uint32_t leaf = tree_borrow();
        if (leaf != kNone) {
            tree_charge_borrowed(leaf);
            return emit_frame(leaf);
        }
    }
    if (normal_count_) {
        uint32_t cls = normal_head_;
        // min_key() is exact when the earliest class is within a largest gap
        // and one smallest of G, else a bound beyond that: a frame fits then.
        uint64_t end = g_ + cfg_.framing.wire_bytes(classes_[cls].head_len);
        uint64_t min = pending_.empty() ? UINT64_MAX : pending_.min_key();
        if (tree_) min = std::min(min, tree_due());
        bool fits = end <= min || end - min <= cfg_.normal_block_bytes;
        if (!fits && normal_held_since_ == UINT64_MAX) normal_held_since_ = g_;
        bool starving = !fits && g_ - normal_held_since_ >= cfg_.normal_starve_bytes;
        if (fits || starving) {
            counters_.normal_forced += starving;
            normal_held_since_ = UINT64_MAX;
            normal_unlink(cls);
            return emit_frame(cls);
        }
        ++counters_.normal_held;
    }
    // The gap horizon: a due time further than H is reached by idling, not
    // by gap frames (clockless: H = 0, never a gap).
    if (horizon_bytes_ != UINT64_MAX) {
        uint64_t due = pending_.exact_min(classes_.data());
        if (tree_) due = std::min(due, tree_due());
        if (due - g_ > horizon_bytes_) return plan_wait(due - horizon_bytes_, due, true);
    }
    return emit_gap();
}

Decision Engine::emit_frame(uint32_t cls) {
    Class &c = classes_[cls];
    uint32_t wire = cfg_.framing.wire_bytes(c.head_len);
    last_cls_ = cls;
    last_g_ = g_;
    // Clockless, a frame leaves at once: G stays the wire's real-time
    // position; the line-rate model moves on.
    if (cfg_.clockless)
        vwire_ = std::max(vwire_, g_) + wire;
    else
        g_ += wire;
    ++counters_.frames;
    counters_.frame_wire_bytes += wire;
    ClassCounters &cc = cold_[cls].counters;
    ++cc.frames;
    cc.l2_bytes += cfg_.framing.l2_bytes(c.head_len);
    c.state = State::Sent;
    c.where = Where::None;
    --backlogged_;
    ++awaiting_head_;
    return Decision{Action::Frame, cls, c.head_len, 0};
}

uint32_t Engine::more_gaps(uint32_t max_n) {
    // next() would pick a class (eligible, solo) or an unpaced frame first;
    // clockless has no gaps. Conservative: stale eligible entries stop it.
    if (!max_n || cfg_.clockless || !anchored_ || !eligible_.empty() || solo_ != kNone ||
        normal_count_ || pending_.empty())
        return 0;
    const uint64_t min_wire = cfg_.framing.min_gap_wire_bytes();
    const uint64_t max_wire = cfg_.framing.max_gap_wire_bytes();
    // emit_gap() gives a largest gap while the earliest key is a largest
    // plus a smallest gap away or more (advance() takes nothing before it).
    // min_key() may only be a bound a few gaps ahead: the exact key lets a
    // slow class's whole run go at once.
    // next() checks the window before each decision: G - wire below it.
    if (cached_wire_ > g_ || g_ - cached_wire_ >= ahead_limit_) return 0;
    uint64_t bound = pending_.exact_min(classes_.data());
    if (tree_) bound = std::min(bound, tree_due());
    if (bound < g_ + max_wire + min_wire) return 0;
    uint64_t n = (bound - g_ - min_wire) / max_wire;
    n = std::min<uint64_t>(n, (cached_wire_ + ahead_limit_ - 1 - g_) / max_wire + 1);
    n = std::min<uint64_t>(n, max_n);
    // The gap horizon needs nothing: the earliest due time was within H of
    // G when next() gave the first gap, and G only comes closer.
    g_ += n * max_wire;
    counters_.gap_frames += n;
    counters_.gap_wire_bytes += n * max_wire;
    return uint32_t(n);
}

// A gap that reaches the earliest pending class clock. Pieces are never
// shorter than the smallest gap frame nor longer than the largest; a target
// closer than the smallest gap is overshot by less than one smallest gap,
// which the late class absorbs (its clock does not move with G).
Decision Engine::emit_gap() {
    const uint64_t min_wire = cfg_.framing.min_gap_wire_bytes();
    const uint64_t max_wire = cfg_.framing.max_gap_wire_bytes();
    // next() advanced the wheel to G. When its minimum is only a bound, the
    // bound is at least max_wire + min_wire ahead: a largest gap either way.
    uint64_t need = (tree_ ? std::min(pending_.min_key(), tree_due()) : pending_.min_key()) - g_;
    uint64_t wire;
    if (need < min_wire) {
        wire = min_wire;
        counters_.gap_overshoot_bytes += min_wire - need;
    } else if (need <= max_wire) {
        wire = need;
    } else if (need - max_wire < min_wire) {
        wire = need - min_wire; // leave a remainder that is itself a whole gap
    } else {
        wire = max_wire;
    }
    g_ += wire;
    ++counters_.gap_frames;
    counters_.gap_wire_bytes += wire;
    return Decision{Action::Gap, 0, uint32_t(wire - cfg_.framing.overhead_bytes), 0};
}

} // namespace pspxdp
