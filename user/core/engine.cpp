#include "core/engine.hpp"

#include "core/units.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <stdexcept>

namespace pspxdp {

namespace {

using u128 = unsigned __int128;

} // namespace

// ---------------------------------------------------------------- classes

Engine::Engine(const EngineConfig &config) : cfg_(config) {
    if (cfg_.line_rate_bps == 0 || cfg_.line_rate_bps > kMaxLineRateBps)
        throw std::invalid_argument("engine: line rate out of range");
    // The exact earliest pending C_k matters only up to one largest plus one
    // smallest gap frame ahead of G (see emit_gap).
    pending_.init(uint64_t(cfg_.framing.max_gap_wire_bytes()) + cfg_.framing.min_gap_wire_bytes(),
                  g_);
    update_horizon();
}

// H in byte times at the line rate (H = 0 and no run-ahead when clockless).
// A finite H so large that it saturates behaves as the paper's rule anyway.
void Engine::update_horizon() {
    ahead_limit_ = cfg_.clockless ? 1 : cfg_.window_bytes;
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
}

bool Engine::has_class(uint32_t cls) const {
    return cls < classes_.size() && classes_[cls].state != State::Free;
}

uint64_t Engine::class_rate(uint32_t cls) const { return classes_[cls].rate_bps; }

const ClassCounters &Engine::class_counters(uint32_t cls) const { return cold_[cls].counters; }

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

Result<uint32_t> Engine::add_class(uint64_t rate_bps) {
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
    }
    Class &c = classes_[cls];
    const uint32_t gen = c.gen; // stale heap entries of a former user may remain
    c = Class{};
    c.gen = gen;
    set_class_rate(c, rate_bps);
    c.clock = g_;
    c.state = State::Idle;
    cold_[cls] = ClassCold{};
    if (rate_bps) cold_[cls].lag_limit = lag_limit_for(rate_bps);
    paced_sum_bps_ += rate_bps;
    return cls;
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
    uint64_t others = paced_sum_bps_ - c.rate_bps;
    if (rate_bps > cfg_.line_rate_bps - others)
        return err("rate " + format_rate(rate_bps) + " would make the paced rates sum to " +
                   format_rate(others + rate_bps) + ", above the line rate " +
                   format_rate(cfg_.line_rate_bps));
    paced_sum_bps_ = others + rate_bps;
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
    cold_[cls].lag_limit = rate_bps ? lag_limit_for(rate_bps) : 0;
    if (backlogged) admit(cls);
    return {};
}

Result<void> Engine::remove_class(uint32_t cls) {
    ++inputs_;
    if (!has_class(cls)) return err("no such class");
    Class &c = classes_[cls];
    if (c.state == State::Backlogged || c.state == State::Sent)
        return err("class still has queued frames");
    paced_sum_bps_ -= c.rate_bps;
    if (last_cls_ == cls) last_cls_ = kNone;
    const uint32_t gen = c.gen;
    c = Class{};
    c.gen = gen;
    free_.push_back(cls);
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
    for (uint32_t cls = 0; cls < classes_.size(); ++cls) {
        Class &c = classes_[cls];
        if (c.state == State::Free || !c.rate_bps) continue;
        cold_[cls].lag_limit = lag_limit_for(c.rate_bps);
        c.frac = 0;
        if (c.state == State::Backlogged) {
            unlink(cls);
            admit(cls);
        }
    }
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
        if (g_ > lag_limit && c.clock < g_ - lag_limit) {
            counters_.lag_clamped_bytes += g_ - lag_limit - c.clock;
            c.clock = g_ - lag_limit;
            c.frac = 0;
        }
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
    if (c.clock <= g_) {
        make_eligible(cls);
    } else {
        c.where = Where::Pending;
        pending_.insert(classes_.data(), cls);
    }
}

void Engine::make_eligible(uint32_t cls) {
    Class &c = classes_[cls];
    c.where = Where::Eligible;
    if (solo_ == kNone)
        solo_ = cls;
    else
        eligible_.push(c.finish, cls, c.gen);
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

void Engine::set_head(uint32_t cls, uint32_t len) {
    ++inputs_;
    assert(has_class(cls));
    Class &c = classes_[cls];
    switch (c.state) {
    case State::Idle:
        // Idle classes bank no credit: a clock left behind restarts from G.
        if (c.clock < g_) {
            c.clock = g_;
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
}

void Engine::set_empty(uint32_t cls) {
    ++inputs_;
    assert(has_class(cls));
    Class &c = classes_[cls];
    if (c.state == State::Sent) --awaiting_head_;
    if (c.state == State::Backlogged) {
        unlink(cls);
        --backlogged_;
        restore_frac(c);
    }
    if (c.state != State::Free) c.state = State::Idle;
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
            Decision d = resync_or_wait(now_ns);
            if (d.action == Action::Wait) return d;
        }
    }
    idle_ = false;
    planned_ = false;

    pending_.advance(classes_.data(), g_, [this](uint32_t cls) { make_eligible(cls); });
    uint32_t cls = solo_;
    if (!eligible_.empty())
        cls = pick_eligible(); // may find only stale entries
    else
        solo_ = kNone;
    if (cls == kNone) return next_unpaced();
    Class &c = classes_[cls];
    if (c.fresh) restart_fresh(cls);
    // Made late by a late wake-up, or late beyond the lag limit since F_k
    // was computed (G jumped past it): only then can F_k be a largest gap
    // behind G.
    if (c.clock < jump_to_ || c.finish + cfg_.framing.max_gap_wire_bytes() <= g_) [[unlikely]]
        relag(cls);
    c.clock = c.finish; // and frac already holds F_k's remainder
    return emit_frame(cls);
}

// Drops the lateness a class may not catch up. A class due before the last
// late wake-up's wire position (jump_to_) was made late by the host's timer,
// not by other classes' frames: it catches up one frame's period at most
// (clockless: less kClocklessJitterNs, at most half), so a late wake-up
// costs at most one frame of burst (2 MTU at the class rate) however late.
// Otherwise the lag limit (see compute_finish), which F_k was computed
// against before G jumped: late beyond it implies F_k + a
// largest gap <= G (lag_limit_for() is a full frame's period plus a largest
// gap; F_k - C_k is at most that period, plus one for the remainder), so
// next() calls this for every such class.
void Engine::relag(uint32_t cls) {
    Class &c = classes_[cls];
    uint64_t limit = cold_[cls].lag_limit;
    if (c.clock < jump_to_) {
        limit -= cfg_.framing.max_gap_wire_bytes();
        // Clockless, the release itself jitters by a few us (the sendto()
        // and the receiver's stamp: 7 us measured at 500 Mbit/s), and a
        // full period caught up plus that is over 2 MTU: leave room for
        // kClocklessJitterNs of it, at most half the period (fq's rule for
        // timer drift).
        if (cfg_.clockless)
            limit -= std::min(limit / 2, bytes_in_ns_floor(kClocklessJitterNs, cfg_.line_rate_bps));
    }
    if (g_ - c.clock <= limit) return;
    counters_.lag_clamped_bytes += g_ - limit - c.clock;
    c.clock = g_ - limit;
    c.frac = 0;
    compute_finish(cls);
}

void Engine::late_release(uint64_t now_ns) {
    if (!cfg_.clockless || last_cls_ == kNone || !anchored_) return;
    const uint32_t cls = last_cls_;
    last_cls_ = kNone;
    const uint64_t wire = wire_position(now_ns);
    if (wire <= last_g_) return;
    const uint64_t late = wire - last_g_;
    ++inputs_;
    ++counters_.late_wakeups;
    counters_.late_bytes += late;
    counters_.late_max_bytes = std::max(counters_.late_max_bytes, late);
    g_ = std::max(g_, wire + last_wire_);
    Class &c = classes_[cls];
    if (!c.rate_bps) return; // a normal class (or one removed since) has no schedule
    // As set_rate: out of the wheel before its key (C_k) changes.
    const bool backlogged = c.state == State::Backlogged;
    if (backlogged) {
        unlink(cls);
        restore_frac(c);
    }
    c.clock += late;
    if (backlogged) admit(cls);
}

// The wire position is past G (the wire idled) or G is a window ahead of it
// (clockless: G is ahead at all).
Decision Engine::resync_or_wait(uint64_t now_ns) {
    const uint64_t wire = cached_wire_;
    if (wire > g_) {
        if (planned_ || cfg_.clockless) {
            resume(now_ns);
            return Decision{Action::Frame, 0, 0, 0}; // go on deciding
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
        return Decision{Action::Frame, 0, 0, 0}; // go on deciding
    }
    if (cfg_.clockless) return clockless_wait();
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

// Clockless, G ahead of the wire: nothing may leave before the wire reaches
// G, and nothing paced before its due time. Wait for the first of them.
Decision Engine::clockless_wait() {
    pending_.advance(classes_.data(), g_, [this](uint32_t cls) { make_eligible(cls); });
    eligible_.clean([this](uint32_t k) { return classes_[k].gen; });
    if (solo_ != kNone || !eligible_.empty()) return plan_wait(g_, g_, true);
    const uint64_t due = pending_.exact_min(classes_.data());
    if (normal_count_ || due == UINT64_MAX) return plan_wait(g_, due, true);
    return plan_wait(due, due, true);
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

// The first ns at which the wire position reaches g (g >= the anchor's).
uint64_t Engine::time_of(uint64_t g) const {
    return anchor_ns_ + ns_for_bytes_ceil(g - anchor_g_, cfg_.line_rate_bps);
}

// The eligible class of earliest (F_k, class) when the heap holds entries:
// solo_ against the heap's top. kNone if there is none.
uint32_t Engine::pick_eligible() {
    uint32_t cls = solo_;
    eligible_.clean([this](uint32_t k) { return classes_[k].gen; });
    if (!eligible_.empty()) {
        const ClassHeap::Entry &top = eligible_.top();
        if (cls == kNone || ClassHeap::order(top) < (u128(classes_[cls].finish) << 32 | cls)) {
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
    if (c.clock < g_) {
        c.clock = g_;
        c.frac = 0;
        compute_finish(cls);
    }
}

// No paced class is eligible: a normal class whose frame fits before the
// earliest paced class (give or take normal_block_bytes), else a gap, or
// beyond the gap horizon an idle wire.
Decision Engine::next_unpaced() {
    if (normal_count_) {
        uint32_t cls = normal_head_;
        // min_key() is exact when the earliest class is within a largest gap
        // and one smallest of G, else a bound beyond that: a frame fits then.
        uint64_t end = g_ + cfg_.framing.wire_bytes(classes_[cls].head_len);
        const uint64_t min = pending_.empty() ? UINT64_MAX : pending_.min_key();
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
        const uint64_t due = pending_.exact_min(classes_.data());
        if (due - g_ > horizon_bytes_) return plan_wait(due - horizon_bytes_, due, true);
    }
    return emit_gap();
}

Decision Engine::emit_frame(uint32_t cls) {
    Class &c = classes_[cls];
    uint32_t wire = cfg_.framing.wire_bytes(c.head_len);
    last_cls_ = cls;
    last_wire_ = wire;
    last_g_ = g_;
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
    const uint64_t bound = pending_.exact_min(classes_.data());
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
    uint64_t need = pending_.min_key() - g_;
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
