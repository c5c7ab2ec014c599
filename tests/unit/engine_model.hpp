// The engine's rules as plain scans, for tests: ModelEngine mirrors
// engine.cpp (docs/design.md §3-§4) and the class tree's rules (§3.12) with
// scans over all classes and real 128-bit division. Used decision by
// decision against the engine (test_engine_internals.cpp, test_engine_tree.cpp).
#pragma once

#include "core/engine.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace pspxdp::engine_model {

using u128 = unsigned __int128;
inline constexpr uint32_t kNone = 0xffffffffu;

// The engine's rules as plain scans. Mirrors engine.cpp line by line where
// the rules are subtle (lag clamp, fresh classes, gap splitting, real time).
class ModelEngine {
  public:
    explicit ModelEngine(const EngineConfig &cfg) : cfg_(cfg) {
        if (cfg.clockless) g_ = Engine::kClocklessStartG;
    }

    void set_gap_horizon_ns(uint64_t ns) { cfg_.gap_horizon_ns = ns; }
    void set_clockless(bool on) {
        cfg_.clockless = on;
        planned_ = false;
        resize();
        if (tree_) settle_active();
    }

    // Whenever the engine rebuilds its tree: a class with no backlogged
    // leaf below is not active (a former inner class now an idle leaf).
    void settle_active() {
        for (uint32_t k = 0; k < cls_.size(); ++k)
            if (cls_[k].used && !subtree_active(k)) cls_[k].active = false;
    }

    void set_burst(uint32_t k, uint64_t burst) {
        C &c = cls_[k];
        const uint64_t old_d = c.lag_limit;
        c.burst = burst;
        if (c.rate) {
            size(c);
            if (cfg_.clockless) c.clock = std::max(c.clock + old_d, c.lag_limit) - c.lag_limit;
        }
        if (c.state == Backlogged) {
            normal_remove(k);
            admit(k);
        }
    }

    bool add_class(uint64_t rate, uint32_t expect_cls) {
        if (rate > cfg_.line_rate_bps - paced_sum_) return false;
        if (expect_cls >= cls_.size()) cls_.resize(expect_cls + 1);
        C &c = cls_[expect_cls];
        c = C{};
        c.used = true;
        c.rate = rate;
        c.state = Idle;
        if (rate) size(c);
        c.clock = floor(c);
        paced_sum_ += rate;
        c.ceil = rate;
        if (tree_) init_node(expect_cls);
        return true;
    }

    bool set_rate(uint32_t k, uint64_t rate) {
        C &c = cls_[k];
        if (tree_)
            return configure_tree({TreeSpec{k, rate, c.parent, std::max(c.ceil, rate), c.prio}});
        uint64_t others = paced_sum_ - c.rate;
        if (rate > cfg_.line_rate_bps - others) return false;
        paced_sum_ = others + rate;
        c.ceil = rate;
        apply_rate(k, rate);
        return true;
    }

    void apply_rate(uint32_t k, uint64_t rate) {
        C &c = cls_[k];
        if (rate && c.rate && c.clock > g_)
            c.clock = g_ + uint64_t(u128(c.clock - g_) * c.rate / rate);
        else if (c.clock < g_)
            c.clock = g_;
        c.frac = 0;
        c.rate = rate;
        c.lag_limit = 0;
        if (rate) size(c);
        c.clock = std::max(c.clock, floor(c));
        if (c.state == Backlogged) {
            normal_remove(k);
            admit(k);
        }
    }

    bool remove_class(uint32_t k) {
        C &c = cls_[k];
        if (c.state == Backlogged || c.state == Sent) return false;
        if (children(k)) return false;
        if (c.parent == kNone) paced_sum_ -= c.rate;
        c = C{};
        if (tree_ && !any_tree_making()) tree_ = false;
        return true;
    }

    // ---- class trees (docs/design.md §3.12), literally

    bool configure_tree(const std::vector<TreeSpec> &specs) {
        const uint32_t n = uint32_t(cls_.size());
        struct Want {
            uint64_t rate, ceil;
            uint32_t parent, prio;
        };
        std::vector<Want> want(n);
        for (uint32_t k = 0; k < n; ++k)
            want[k] = {cls_[k].rate, cls_[k].ceil, cls_[k].parent, cls_[k].prio};
        for (const TreeSpec &sp : specs) {
            want[sp.cls] = {sp.rate_bps, sp.ceil_bps ? sp.ceil_bps : sp.rate_bps, sp.parent,
                            sp.prio};
            if (sp.parent != kNone && (sp.parent >= n || !cls_[sp.parent].used)) return false;
            if (sp.parent == sp.cls) return false;
        }
        uint64_t top = 0;
        for (uint32_t k = 0; k < n; ++k) {
            if (!cls_[k].used) continue;
            const Want &w = want[k];
            if (!w.rate && w.ceil) return false;
            if (w.ceil < w.rate) return false;
            if (w.parent == kNone) {
                top += w.rate;
                continue;
            }
            if (!w.rate || !want[w.parent].rate) return false;
            uint32_t depth = 1;
            for (uint32_t p = w.parent; p != kNone; p = want[p].parent)
                if (++depth > kMaxTreeDepth) return false;
            if (w.ceil > want[w.parent].ceil) return false;
        }
        if (top > cfg_.line_rate_bps) return false;
        for (uint32_t k = 0; k < n; ++k) {
            if (!cls_[k].used) continue;
            uint64_t sum = 0;
            uint32_t nch = 0;
            for (uint32_t j = 0; j < n; ++j)
                if (cls_[j].used && want[j].parent == k) sum += want[j].rate, ++nch;
            if (sum > want[k].rate) return false;
            if (nch && cls_[k].state != Idle) return false;
        }
        for (uint32_t k = 0; k < n; ++k) {
            C &c = cls_[k];
            if (!c.used) continue;
            const Want &w = want[k];
            if (tree_) {
                rescale(c.kclock, c.kfrac, c.ceil, w.ceil);
                rescale(c.rclock, c.rfrac, c.rate, w.rate);
            }
            if (w.rate != c.rate) apply_rate(k, w.rate);
            c.ceil = w.ceil;
            c.prio = w.prio;
            c.parent = w.parent;
        }
        paced_sum_ = top;
        const bool on = any_tree_making();
        if (on && !tree_) {
            root_vsys_ = 0;
            for (uint32_t k = 0; k < n; ++k)
                if (cls_[k].used) init_node(k);
        }
        tree_ = on;
        if (tree_) {
            for (uint32_t k = 0; k < n; ++k)
                if (cls_[k].used && cls_[k].state == Backlogged && cls_[k].rate && !children(k))
                    update_active(k);
            settle_active();
        }
        return true;
    }

    uint64_t lent(uint32_t k) const { return cls_[k].lent; }
    uint64_t borrowed(uint32_t k) const { return cls_[k].borrowed; }
    bool tree() const { return tree_; }

    bool set_line_rate(uint64_t m) {
        if (paced_sum_ > m) return false;
        cfg_.line_rate_bps = m;
        anchored_ = false;
        planned_ = false;
        resize();
        if (tree_) settle_active();
        return true;
    }

    void resize() {
        min_slack_ = UINT64_MAX;
        for (uint32_t k = 0; k < cls_.size(); ++k) {
            C &c = cls_[k];
            if (!c.used || !c.rate) continue;
            size(c);
            c.frac = 0;
            if (c.state == Backlogged) admit(k);
        }
    }

    void set_head(uint32_t k, uint32_t len) {
        C &c = cls_[k];
        if (c.state == Idle) {
            if (c.clock < floor(c)) {
                c.clock = floor(c);
                c.frac = 0;
            }
            c.fresh = true;
        } else if (c.state == Backlogged) {
            normal_remove(k);
            --backlogged_;
        }
        c.state = Backlogged;
        ++backlogged_;
        c.head_len = len;
        admit(k);
        if (tree_) update_active(k);
    }

    void set_empty(uint32_t k) {
        C &c = cls_[k];
        if (c.state == Backlogged) {
            normal_remove(k);
            --backlogged_;
        }
        c.state = Idle;
        if (tree_) update_active(k);
    }

    Decision next(uint64_t now) {
        if (!backlogged_) {
            idle_ = true;
            planned_ = false;
            return Decision{Action::Idle, 0, 0, 0};
        }
        if (!anchored_) {
            anchor(now);
        } else {
            uint64_t wire = wire_position(now);
            if (wire > g_ && (planned_ || cfg_.clockless)) {
                // The wire idled by plan (or nothing serialises): G follows it.
                if (planned_) {
                    ++counters.planned_idles;
                    counters.planned_idle_bytes += wire - g_;
                    if (wire > due_ && now > time_of(due_)) {
                        ++counters.late_wakeups;
                        counters.late_bytes += wire - due_;
                        counters.late_max_bytes = std::max(counters.late_max_bytes, wire - due_);
                        jump_to_ = wire;
                    }
                } else if (idle_) {
                    ++counters.idle_resyncs;
                    counters.idle_bytes += wire - g_;
                } else {
                    ++counters.underrun_resyncs;
                    counters.underrun_bytes += wire - g_;
                    jump_to_ = wire;
                }
                planned_ = false;
                g_ = wire;
            } else if (wire > g_) {
                if (idle_) {
                    ++counters.idle_resyncs;
                    counters.idle_bytes += wire - g_;
                } else {
                    ++counters.underrun_resyncs;
                    counters.underrun_bytes += wire - g_;
                }
                anchor(now);
            } else if (!cfg_.clockless && g_ - wire >= cfg_.window_bytes) {
                return wait(g_ - cfg_.window_bytes + 1, g_, false);
            }
        }
        idle_ = false;
        planned_ = false;
        // (a) the eligible paced class of earliest (finish, index); clockless
        // the finish on its schedule (the stored one is D below it)
        uint32_t best = kNone;
        const auto key = [&](const C &c) { return c.finish + (cfg_.clockless ? c.lag_limit : 0); };
        if (tree_) {
            // In a tree: from the root, at each class the child with a due
            // leaf below whose ceils allow it (T_due <= G), of smallest (R,
            // or F for a leaf, index).
            uint32_t a = kNone;
            for (;;) {
                uint32_t pick = kNone;
                u128 pick_key = 0;
                for (uint32_t j = 0; j < cls_.size(); ++j) {
                    const C &c = cls_[j];
                    if (!c.used || c.parent != a || t_due(j) > g_) continue;
                    const u128 kj = children(j) ? u128(c.rclock) : u128(key(c));
                    if (pick == kNone || kj < pick_key) pick = j, pick_key = kj;
                }
                if (pick == kNone || !children(pick)) {
                    best = pick;
                    break;
                }
                a = pick;
            }
        } else {
            for (uint32_t k = 0; k < cls_.size(); ++k) {
                const C &c = cls_[k];
                if (!due(c)) continue;
                if (best == kNone || key(c) < key(cls_[best])) best = k;
            }
        }
        if (best != kNone) {
            C &c = cls_[best];
            if (c.fresh && c.clock < floor(c)) {
                c.clock = floor(c);
                c.frac = 0;
                compute_finish(c);
            }
            c.fresh = false;
            if (cfg_.clockless) {
                // Beyond its burst bound: given up.
                if (c.clock < floor(c)) {
                    counters.late_lost_bytes += floor(c) - c.clock;
                    c.clock = floor(c);
                    c.frac = 0;
                    compute_finish(c);
                }
            } else {
                // Late at the time it is sent beyond what it may catch up:
                // one frame's period after a late wake-up, else the lag limit.
                uint64_t limit = c.lag_limit;
                if (c.clock < jump_to_) limit -= cfg_.framing.max_gap_wire_bytes();
                if (g_ - c.clock > limit) {
                    counters.lag_clamped_bytes += g_ - limit - c.clock;
                    c.clock = g_ - limit;
                    c.frac = 0;
                    compute_finish(c);
                }
            }
            c.clock = c.finish;
            c.frac = c.finish_frac;
            if (tree_) charge_guaranteed(best);
            return emit_frame(best);
        }
        // (b) normal round robin, if its frame holds the earliest paced
        // class back by at most normal_block_bytes, or it starved too long
        uint64_t min = UINT64_MAX;
        for (const C &c : cls_)
            if (c.state == Backlogged && c.rate && !due(c)) min = std::min(min, c.clock);
        const auto later = [&](uint64_t t) { return t == UINT64_MAX || t <= g_ ? t : t + batch(); };
        if (cfg_.clockless) {
            // A due leaf held by an ancestor's ceil, a batch after its path
            // opens.
            if (tree_) min = std::min(min, later(t_due(kNone)));
            // A borrowed frame (the line-rate model a batch ahead at most),
            // then a normal one, once the line-rate model has room; else
            // wait for it or for the earliest paced wake-up (or borrowing).
            if (tree_ && vwire_ <= g_ + wire_reach()) {
                const uint32_t leaf = borrow();
                if (leaf != kNone) return emit_borrowed(leaf);
            }
            if (!normal_.empty() && vwire_ <= g_) {
                uint32_t k = normal_.front();
                normal_.pop_front();
                return emit_frame(k);
            }
            uint64_t due =
                min == UINT64_MAX ? UINT64_MAX : min + std::min(min_slack_, UINT64_MAX - min);
            uint64_t target = normal_.empty() ? min : std::min(min, vwire_);
            if (tree_) target = std::min(target, std::max(later(t_of(kNone)), vwire_));
            return wait(target, due, true);
        }
        // A due leaf held by an ancestor's ceil.
        if (tree_) min = std::min(min, t_due(kNone));
        if (tree_) {
            const uint32_t leaf = borrow();
            if (leaf != kNone) return emit_borrowed(leaf);
            min = std::min(min, t_of(kNone));
        }
        if (!normal_.empty()) {
            uint32_t k = normal_.front();
            uint64_t end = g_ + cfg_.framing.wire_bytes(cls_[k].head_len);
            bool fits = min == UINT64_MAX || end <= min || end - min <= cfg_.normal_block_bytes;
            if (!fits && held_since_ == UINT64_MAX) held_since_ = g_;
            bool starving = !fits && g_ - held_since_ >= cfg_.normal_starve_bytes;
            if (fits || starving) {
                counters.normal_forced += starving;
                held_since_ = UINT64_MAX;
                normal_.pop_front();
                if (normal_.empty()) held_since_ = UINT64_MAX;
                return emit_frame(k);
            }
            ++counters.normal_held;
        }
        // (c) beyond the gap horizon (clockless: always), idle until H
        // before the earliest clock; else a gap to it
        if (cfg_.clockless || cfg_.gap_horizon_ns != kGapHorizonInf) {
            u128 h = u128(cfg_.gap_horizon_ns) * cfg_.line_rate_bps / 8'000'000'000ull;
            const uint64_t horizon = cfg_.clockless ? 0 : h > UINT64_MAX ? UINT64_MAX : uint64_t(h);
            if (min - g_ > horizon) return wait(min - horizon, min, true);
        }
        const uint64_t min_wire = cfg_.framing.min_gap_wire_bytes();
        const uint64_t max_wire = cfg_.framing.max_gap_wire_bytes();
        uint64_t need = min - g_;
        uint64_t wire;
        if (need < min_wire) {
            wire = min_wire;
            counters.gap_overshoot_bytes += min_wire - need;
        } else if (need <= max_wire) {
            wire = need;
        } else if (need - max_wire < min_wire) {
            wire = need - min_wire;
        } else {
            wire = max_wire;
        }
        g_ += wire;
        ++counters.gap_frames;
        counters.gap_wire_bytes += wire;
        return Decision{Action::Gap, 0, uint32_t(wire - cfg_.framing.overhead_bytes), 0};
    }

    uint64_t byte_clock() const { return g_; }
    EngineCounters counters;

    uint64_t min_paced_clock() const {
        uint64_t min = UINT64_MAX;
        for (const C &c : cls_)
            if (c.state == Backlogged && c.rate) min = std::min(min, c.clock);
        return min;
    }

    uint64_t time_of(uint64_t g) const {
        u128 num = u128(g - anchor_g_) * 8 * 1'000'000'000ull;
        return anchor_ns_ + uint64_t((num + cfg_.line_rate_bps - 1) / cfg_.line_rate_bps);
    }

    Decision wait(uint64_t target, uint64_t due, bool planned) {
        if (planned) {
            planned_ = true;
            due_ = due;
        }
        uint64_t wake = time_of(target);
        return Decision{Action::Wait, 0, 0, wake,
                        due == UINT64_MAX ? UINT64_MAX : time_of(due) - wake};
    }

  private:
    enum State { Free, Idle, Backlogged, Sent };
    struct C {
        bool used = false;
        // class trees
        uint32_t parent = kNone, prio = 0;
        uint64_t ceil = 0, kclock = 0, kfrac = 0, rclock = 0, rfrac = 0, vfrac = 0;
        u128 vtag = 0, vsys = 0;
        bool active = false;
        uint64_t lent = 0, borrowed = 0;
        uint64_t rate = 0, clock = 0, frac = 0, finish = 0, finish_frac = 0, lag_limit = 0;
        uint64_t burst = 0, reach = 0;
        uint32_t head_len = 0;
        State state = Free;
        bool fresh = false;
        bool reach_ok = false; // clockless: may leave before its wake-up (admitted so)
    };

    // The burst bound as engine.cpp's size_class(), written out.
    void size(C &c) {
        if (!cfg_.clockless) {
            c.lag_limit = lag_limit_for(c.rate);
            c.reach = 0;
            return;
        }
        const uint64_t unit = cfg_.framing.mtu_unit_bytes();
        uint64_t b = c.burst ? c.burst : cfg_.burst_bytes ? cfg_.burst_bytes : 3 * unit;
        b = std::max(b, unit);
        c.lag_limit = split(b, c.rate, false).first;
        c.reach = split(b, c.rate, false).second;
        min_slack_ = std::min(min_slack_, c.lag_limit);
    }
    // A bound of b bytes at rate: (D, T - D).
    std::pair<uint64_t, uint64_t> split(uint64_t b, uint64_t rate, bool keep_half) const {
        const uint64_t unit = cfg_.framing.mtu_unit_bytes();
        const u128 t = u128(b) * cfg_.line_rate_bps / rate;
        const uint64_t bound = t > (u128(1) << 62) ? uint64_t(1) << 62 : uint64_t(t);
        const uint64_t largest =
            std::min<uint64_t>(bound, uint64_t(u128(unit) * cfg_.line_rate_bps / rate));
        uint64_t slack =
            uint64_t(u128(cfg_.clockless_slack_ns) * cfg_.line_rate_bps / 8'000'000'000ull);
        if (keep_half) slack = std::max(slack, bound / 2);
        // D: the most lateness that leaves the batch of a wake-up `slack`
        // before overflow whole (n full periods), or T - q for one frame.
        const uint64_t step = largest + 2; // q rounded up, and F's remainder
        const uint64_t lag = bound - largest <= slack || bound < slack + step
                                 ? bound - largest
                                 : bound - (bound - slack) / step * step;
        return {lag, bound - lag};
    }

    uint64_t floor(const C &c) const {
        if (!cfg_.clockless || !c.rate) return g_;
        return g_ > c.lag_limit ? g_ - c.lag_limit : 0;
    }

    uint64_t lag_limit_for(uint64_t rate) const {
        u128 period = u128(cfg_.framing.mtu_unit_bytes()) * cfg_.line_rate_bps / rate;
        return uint64_t(period) + cfg_.framing.max_gap_wire_bytes();
    }

    void compute_finish(C &c) {
        if (g_ > c.lag_limit && c.clock < g_ - c.lag_limit) {
            (cfg_.clockless ? counters.late_lost_bytes : counters.lag_clamped_bytes) +=
                g_ - c.lag_limit - c.clock;
            c.clock = g_ - c.lag_limit;
            c.frac = 0;
        }
        u128 num = u128(cfg_.framing.l2_bytes(c.head_len)) * cfg_.line_rate_bps + c.frac;
        c.finish = c.clock + uint64_t(num / c.rate);
        c.finish_frac = uint64_t(num % c.rate);
    }

    void admit(uint32_t k) {
        C &c = cls_[k];
        if (!c.rate) {
            normal_.push_back(k);
            return;
        }
        compute_finish(c);
        c.reach_ok = cfg_.clockless && (c.finish <= g_ || c.finish - g_ < c.reach ||
                                        (c.finish - g_ == c.reach && c.finish_frac == 0));
    }

    void normal_remove(uint32_t k) {
        auto it = std::find(normal_.begin(), normal_.end(), k);
        if (it != normal_.end()) normal_.erase(it);
        if (normal_.empty()) held_since_ = UINT64_MAX;
    }

    Decision emit_frame(uint32_t k) {
        C &c = cls_[k];
        if (cfg_.clockless)
            vwire_ = std::max(vwire_, g_) + cfg_.framing.wire_bytes(c.head_len);
        else
            g_ += cfg_.framing.wire_bytes(c.head_len);
        c.reach_ok = false;
        ++counters.frames;
        counters.frame_wire_bytes += cfg_.framing.wire_bytes(c.head_len);
        c.state = Sent;
        --backlogged_;
        return Decision{Action::Frame, k, c.head_len, 0};
    }

    uint64_t wire_position(uint64_t now) const {
        if (now <= anchor_ns_) return anchor_g_;
        return anchor_g_ + uint64_t(u128(now - anchor_ns_) * cfg_.line_rate_bps / 8'000'000'000ull);
    }

    void anchor(uint64_t now) {
        anchored_ = true;
        anchor_ns_ = now;
        anchor_g_ = g_;
    }

    EngineConfig cfg_;
    std::vector<C> cls_;
    std::deque<uint32_t> normal_;
    uint64_t held_since_ = UINT64_MAX;
    uint64_t g_ = 0, paced_sum_ = 0, anchor_ns_ = 0, anchor_g_ = 0;
    bool anchored_ = false, idle_ = true, planned_ = false;
    uint64_t due_ = UINT64_MAX, jump_to_ = 0, vwire_ = 0, min_slack_ = UINT64_MAX;
    uint32_t backlogged_ = 0;
    bool tree_ = false;
    u128 root_vsys_ = 0;

    uint32_t children(uint32_t k) const {
        uint32_t n = 0;
        for (const C &c : cls_) n += c.used && c.parent == k;
        return n;
    }
    bool any_tree_making() const {
        for (const C &c : cls_)
            if (c.used && (c.parent != kNone || c.ceil > c.rate)) return true;
        return false;
    }
    u128 &vsys(uint32_t k) { return k == kNone ? root_vsys_ : cls_[k].vsys; }
    void init_node(uint32_t k) {
        C &c = cls_[k];
        c.kclock = c.rclock = std::max(c.clock, g_);
        c.kfrac = c.rfrac = 0;
        c.vtag = vsys(c.parent);
        c.vfrac = 0;
        c.active = false;
    }
    bool subtree_active(uint32_t k) const {
        bool inner = false;
        for (uint32_t j = 0; j < cls_.size(); ++j)
            if (cls_[j].used && cls_[j].parent == k) {
                inner = true;
                if (subtree_active(j)) return true;
            }
        return !inner && cls_[k].state == Backlogged && cls_[k].rate;
    }
    // A class whose subtree comes back from idle joins the share clock.
    void update_active(uint32_t leaf) {
        for (uint32_t k = leaf; k != kNone; k = cls_[k].parent) {
            C &c = cls_[k];
            const bool act = subtree_active(k);
            if (act && !c.active) c.vtag = std::max(c.vtag, vsys(c.parent));
            c.active = act;
        }
    }
    void share(C &c, uint64_t l2) {
        const u128 num = u128(l2) * cfg_.line_rate_bps + c.vfrac;
        c.vtag += num / c.rate;
        c.vfrac = uint64_t(num % c.rate);
    }
    void rescale(uint64_t &clock, uint64_t &frac, uint64_t old_bps, uint64_t new_bps) const {
        if (old_bps && new_bps && old_bps != new_bps && clock > g_)
            clock = g_ + uint64_t(u128(clock - g_) * old_bps / new_bps);
        if (old_bps != new_bps) frac = 0;
    }
    // A tree clock's lag: the lag limit at its rate; clockless at least the
    // class's burst bound at that rate.
    uint64_t tree_burst(uint64_t set, uint64_t rate) const {
        const uint64_t unit = cfg_.framing.mtu_unit_bytes();
        uint64_t b = set ? set : cfg_.burst_bytes ? cfg_.burst_bytes : 3 * unit;
        if (!set && cfg_.burst_floor_ns)
            b = std::max(b, uint64_t(u128(rate) * cfg_.burst_floor_ns / 8'000'000'000));
        return std::max(b, unit);
    }
    uint64_t tree_lag(const C &c, uint64_t rate) const {
        uint64_t lag = lag_limit_for(rate);
        if (!cfg_.clockless) return lag;
        const u128 t = u128(tree_burst(c.burst, rate)) * cfg_.line_rate_bps / rate;
        return std::max(lag, t > (u128(1) << 62) ? uint64_t(1) << 62 : uint64_t(t));
    }
    // The ceil clock: clockless, (D, reach) of the bound at the ceil, as a
    // flat class's; on the byte clock the lag limit and no reach.
    std::pair<uint64_t, uint64_t> k_split(const C &c) const {
        if (!cfg_.clockless) return {lag_limit_for(c.ceil), 0};
        return split(tree_burst(c.burst, c.ceil), c.ceil, true);
    }
    uint64_t open(const C &c) const {
        const uint64_t reach = k_split(c).second;
        return c.kclock > reach ? c.kclock - reach : 0;
    }
    // A borrowed frame: the reach less a largest frame at the ceil (and a
    // byte time for a charge's remainder, and one to spare).
    uint64_t open_borrow(const C &c) const {
        const uint64_t reach = k_split(c).second;
        const uint64_t frame =
            uint64_t(u128(cfg_.framing.mtu_unit_bytes()) * cfg_.line_rate_bps / c.ceil) + 2;
        const uint64_t b = !cfg_.clockless || reach <= frame ? 0 : reach - frame;
        return c.kclock > b ? c.kclock - b : 0;
    }
    // Clockless, the wake-up a batch after a tree's path opens: the least
    // reach of a ceil clock; the line-rate model's run-ahead for borrowed
    // frames: the reach of the default bound at M.
    uint64_t batch() const {
        if (!cfg_.clockless) return 0;
        uint64_t least = UINT64_MAX;
        for (const C &c : cls_)
            if (c.used && c.rate) least = std::min(least, k_split(c).second);
        return least == UINT64_MAX ? 0 : least;
    }
    uint64_t wire_reach() const {
        if (!cfg_.clockless) return 0;
        return split(tree_burst(0, cfg_.line_rate_bps), cfg_.line_rate_bps, false).second;
    }
    void charge_k(C &c, uint64_t l2) const {
        const uint64_t lag = k_split(c).first;
        if (g_ > lag && c.kclock < g_ - lag) {
            c.kclock = g_ - lag;
            c.kfrac = 0;
        }
        const u128 num = u128(l2) * cfg_.line_rate_bps + c.kfrac;
        c.kclock += uint64_t(num / c.ceil);
        c.kfrac = uint64_t(num % c.ceil);
    }
    void charge(const C &owner, uint64_t &clock, uint64_t &frac, uint64_t rate, uint64_t l2) const {
        const uint64_t lag = tree_lag(owner, rate);
        if (g_ > lag && clock < g_ - lag) {
            clock = g_ - lag;
            frac = 0;
        }
        const u128 num = u128(l2) * cfg_.line_rate_bps + frac;
        clock += uint64_t(num / rate);
        frac = uint64_t(num % rate);
    }
    // T: the earliest byte time k's subtree can borrow (kNone: the root).
    uint64_t t_of(uint32_t k) const {
        uint64_t m = UINT64_MAX;
        bool any = false;
        for (uint32_t j = 0; j < cls_.size(); ++j)
            if (cls_[j].used && cls_[j].parent == k) any = true, m = std::min(m, t_of(j));
        if (k == kNone) return m;
        const C &c = cls_[k];
        if (!any) return c.state == Backlogged && c.rate ? open_borrow(c) : UINT64_MAX;
        return m == UINT64_MAX ? UINT64_MAX : std::max(open_borrow(c), m);
    }
    bool borrowable(uint32_t k) const { return t_of(k) <= g_; }
    bool due(const C &c) const {
        return c.state == Backlogged && c.rate && (c.clock <= g_ || c.reach_ok);
    }
    // T_due: when k's subtree can send a due leaf's frame (kNone: the root):
    // a due leaf at once, a class once its ceil and a child allow it.
    uint64_t t_due(uint32_t k) const {
        uint64_t m = UINT64_MAX;
        bool any = false;
        for (uint32_t j = 0; j < cls_.size(); ++j)
            if (cls_[j].used && cls_[j].parent == k) any = true, m = std::min(m, t_due(j));
        if (k == kNone) return m;
        const C &c = cls_[k];
        if (!any) return due(c) ? 0 : UINT64_MAX;
        return m == UINT64_MAX ? UINT64_MAX : std::max(open(c), m);
    }
    struct Step {
        uint32_t node;
        bool green;
    };
    std::vector<Step> path_;
    uint32_t borrow() {
        path_.clear();
        uint32_t a = kNone;
        for (;;) {
            uint32_t best = kNone;
            bool green = false;
            for (uint32_t j = 0; j < cls_.size(); ++j) {
                const C &c = cls_[j];
                if (!c.used || c.parent != a || !children(j) || c.rclock > g_ || !borrowable(j))
                    continue;
                if (best == kNone || c.rclock < cls_[best].rclock) best = j;
            }
            if (best != kNone) {
                green = true;
            } else {
                for (uint32_t j = 0; j < cls_.size(); ++j) {
                    const C &c = cls_[j];
                    if (!c.used || c.parent != a || !borrowable(j)) continue;
                    if (best == kNone) {
                        best = j;
                        continue;
                    }
                    const C &b = cls_[best];
                    if (c.prio < b.prio || (c.prio == b.prio && c.vtag < b.vtag)) best = j;
                }
            }
            if (best == kNone) return kNone;
            path_.push_back({best, green});
            if (!children(best)) return best;
            a = best;
        }
    }
    void charge_guaranteed(uint32_t leaf) {
        const uint64_t l2 = cfg_.framing.l2_bytes(cls_[leaf].head_len);
        C &c = cls_[leaf];
        charge_k(c, l2);
        charge(c, c.rclock, c.rfrac, c.rate, l2);
        share(c, l2);
        for (uint32_t k = c.parent; k != kNone; k = cls_[k].parent) {
            charge_k(cls_[k], l2);
            charge(cls_[k], cls_[k].rclock, cls_[k].rfrac, cls_[k].rate, l2);
            share(cls_[k], l2);
        }
    }
    Decision emit_borrowed(uint32_t leaf) {
        const uint64_t l2 = cfg_.framing.l2_bytes(cls_[leaf].head_len);
        // The leaf's due clock: no earlier than one period after this frame
        // (clockless: its stored clock, that less its bound).
        C &l = cls_[leaf];
        const u128 num = u128(l2) * cfg_.line_rate_bps;
        uint64_t at = g_ + uint64_t(num / l.rate);
        const uint64_t at_frac = uint64_t(num % l.rate);
        if (cfg_.clockless) at = at > l.lag_limit ? at - l.lag_limit : 0;
        if (l.clock < at || (l.clock == at && l.frac < at_frac)) {
            l.clock = at;
            l.frac = at_frac;
        }
        // The lender: the leaf while its own rate has room, else the
        // deepest green class, else the wire.
        const bool own = l.rclock <= g_;
        int lender = -1;
        for (size_t i = 0; i < path_.size(); ++i)
            if (path_[i].green || (own && i + 1 == path_.size())) lender = int(i);
        for (size_t i = 0; i < path_.size(); ++i) {
            C &c = cls_[path_[i].node];
            charge_k(c, l2);
            if (int(i) <= lender) charge(c, c.rclock, c.rfrac, c.rate, l2);
            if (!path_[i].green) {
                u128 &sys = vsys(i ? path_[i - 1].node : kNone);
                sys = std::max(sys, c.vtag);
            }
            share(c, l2);
            if (int(i) == lender && !own)
                c.lent += l2;
            else if (int(i) > lender)
                c.borrowed += l2;
        }
        return emit_frame(leaf);
    }
};
// One decision of the engine and of the model, held equal; after a Frame
// the class's next head (len()) or its end goes to both. queue: the frames
// left per class handle.
template <class Len>
Decision decide_both(Engine &e, ModelEngine &m, uint64_t now, std::vector<int> &queue, Len &&len) {
    const Decision a = e.next(now);
    const Decision b = m.next(now);
    REQUIRE(int(a.action) == int(b.action));
    REQUIRE(a.cls == b.cls);
    REQUIRE(a.len == b.len);
    REQUIRE(a.wake_ns == b.wake_ns);
    REQUIRE(a.slack_ns == b.slack_ns);
    REQUIRE(e.byte_clock() == m.byte_clock());
    if (a.action == Action::Frame) {
        if (--queue[a.cls] > 0) {
            const uint32_t l = len();
            e.set_head(a.cls, l);
            m.set_head(a.cls, l);
        } else {
            queue[a.cls] = 0;
            e.set_empty(a.cls);
            m.set_empty(a.cls);
        }
    }
    return a;
}

} // namespace pspxdp::engine_model
