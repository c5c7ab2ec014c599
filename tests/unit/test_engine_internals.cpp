// The engine's internals against straightforward models:
//   - ClassWheel (the pending set) against a sorted multiset, tiers included;
//   - the whole Engine against ModelEngine: the same rules (docs/design.md §3-§4,
//     engine.hpp) written as plain scans over all classes with real 128-bit
//     division, decision by decision, on seeded random workloads. Ties on the
//     finish time go to the lower class index in both.
#include "core/class_wheel.hpp"
#include "core/engine.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <random>
#include <set>
#include <utility>
#include <vector>

using namespace pspxdp;

namespace {

using u128 = unsigned __int128;
constexpr uint32_t kNone = 0xffffffffu;

// ------------------------------------------------------------------ wheel

struct Node {
    uint64_t clock = 0;
    uint32_t next = kNone;
    uint32_t prev = kNone;
    uint32_t gen = 0;
};

void wheel_against_multiset(uint64_t seed, uint64_t exact_span, size_t mid_blocks,
                            uint64_t max_dist) {
    std::mt19937_64 rng(seed);
    const size_t n = 200;
    std::vector<Node> nodes(n);
    std::vector<bool> in(n, false);
    std::set<std::pair<uint64_t, uint32_t>> model;
    ClassWheel<Node> wheel;
    uint64_t g = rng() % 1'000'000;
    wheel.init(exact_span, g, mid_blocks);
    for (int step = 0; step < 20000; ++step) {
        const uint32_t cls = uint32_t(rng() % n);
        switch (rng() % 8) {
        case 0:
        case 1:
        case 2:
        case 3:
            if (!in[cls]) {
                // Keys above G: mostly close, some equal to others, some far.
                uint64_t dist;
                switch (rng() % 4) {
                case 0: dist = 1 + rng() % 200; break;
                case 1: dist = 1 + rng() % 5000; break;
                case 2: dist = 1 + rng() % max_dist; break;
                default: dist = model.empty() ? 1 : model.begin()->first - g; break;
                }
                nodes[cls].clock = g + dist;
                wheel.insert(nodes.data(), cls);
                model.insert({nodes[cls].clock, cls});
                in[cls] = true;
            }
            break;
        case 4:
            if (in[cls]) {
                wheel.remove(nodes.data(), cls);
                model.erase({nodes[cls].clock, cls});
                in[cls] = false;
            }
            break;
        default: {
            // G moves like the engine's: by at most a few frames at a time,
            // and, when nothing is near, by the gap to the earliest key; or
            // in one jump, as after a planned idle (gap horizon, clockless).
            uint64_t to = g + rng() % 3000;
            if (!model.empty() && rng() % 2)
                to = std::max(to, std::min(model.begin()->first, g + 300'000));
            const bool jump = rng() % 4 == 0;
            if (jump) to += rng() % (rng() % 2 ? max_dist : 50'000);
            std::vector<std::pair<uint64_t, uint32_t>> got;
            while (g < to) {
                g = jump ? to : std::min(to, g + 4000);
                wheel.advance(nodes.data(), g, [&](uint32_t c) {
                    got.push_back({nodes[c].clock, c});
                });
            }
            std::vector<std::pair<uint64_t, uint32_t>> want;
            while (!model.empty() && model.begin()->first <= g) {
                want.push_back(*model.begin());
                in[model.begin()->second] = false;
                model.erase(model.begin());
            }
            // Key order; any order among equal keys.
            for (size_t i = 1; i < got.size(); ++i) REQUIRE(got[i - 1].first <= got[i].first);
            std::sort(got.begin(), got.end());
            REQUIRE(got == want);
            REQUIRE(wheel.size() == model.size());
            if (!model.empty()) {
                const uint64_t min = model.begin()->first;
                const uint64_t bound = wheel.min_key();
                if (min < g + exact_span)
                    REQUIRE(bound == min);
                else
                    REQUIRE((bound >= g + exact_span && bound <= min));
                REQUIRE(wheel.exact_min(nodes.data()) == min); // however far
            } else {
                REQUIRE(wheel.exact_min(nodes.data()) == UINT64_MAX);
            }
            break;
        }
        }
    }
}

// ------------------------------------------------------------------ model

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
        return true;
    }

    bool set_rate(uint32_t k, uint64_t rate) {
        C &c = cls_[k];
        uint64_t others = paced_sum_ - c.rate;
        if (rate > cfg_.line_rate_bps - others) return false;
        paced_sum_ = others + rate;
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
        return true;
    }

    bool remove_class(uint32_t k) {
        C &c = cls_[k];
        if (c.state == Backlogged || c.state == Sent) return false;
        paced_sum_ -= c.rate;
        c = C{};
        return true;
    }

    bool set_line_rate(uint64_t m) {
        if (paced_sum_ > m) return false;
        cfg_.line_rate_bps = m;
        anchored_ = false;
        planned_ = false;
        resize();
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
    }

    void set_empty(uint32_t k) {
        C &c = cls_[k];
        if (c.state == Backlogged) {
            normal_remove(k);
            --backlogged_;
        }
        c.state = Idle;
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
        for (uint32_t k = 0; k < cls_.size(); ++k) {
            const C &c = cls_[k];
            if (c.state != Backlogged || !c.rate || (c.clock > g_ && !c.reach_ok)) continue;
            if (best == kNone || key(c) < key(cls_[best])) best = k;
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
            return emit_frame(best);
        }
        // (b) normal round robin, if its frame holds the earliest paced
        // class back by at most normal_block_bytes, or it starved too long
        uint64_t min = UINT64_MAX;
        for (const C &c : cls_)
            if (c.state == Backlogged && c.rate) min = std::min(min, c.clock);
        if (cfg_.clockless) {
            // A normal frame once the line-rate model has room; else wait
            // for it or for the earliest paced wake-up.
            if (!normal_.empty() && vwire_ <= g_) {
                uint32_t k = normal_.front();
                normal_.pop_front();
                return emit_frame(k);
            }
            uint64_t due =
                min == UINT64_MAX ? UINT64_MAX : min + std::min(min_slack_, UINT64_MAX - min);
            return wait(normal_.empty() ? min : std::min(min, vwire_), due, true);
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
        const u128 t = u128(b) * cfg_.line_rate_bps / c.rate;
        const uint64_t bound = t > (u128(1) << 62) ? uint64_t(1) << 62 : uint64_t(t);
        const uint64_t largest =
            std::min<uint64_t>(bound, uint64_t(u128(unit) * cfg_.line_rate_bps / c.rate));
        const uint64_t slack =
            uint64_t(u128(cfg_.clockless_slack_ns) * cfg_.line_rate_bps / 8'000'000'000ull);
        // D: the most lateness that leaves the batch of a wake-up `slack`
        // before overflow whole (n full periods), or T - q for one frame.
        const uint64_t step = largest + 2; // q rounded up, and F's remainder
        c.lag_limit = bound - largest <= slack || bound < slack + step
                          ? bound - largest
                          : bound - (bound - slack) / step * step;
        c.reach = bound - c.lag_limit;
        min_slack_ = std::min(min_slack_, c.lag_limit);
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
};

void same_counters(const EngineCounters &a, const EngineCounters &b) {
    REQUIRE(a.frames == b.frames);
    REQUIRE(a.frame_wire_bytes == b.frame_wire_bytes);
    REQUIRE(a.gap_frames == b.gap_frames);
    REQUIRE(a.gap_wire_bytes == b.gap_wire_bytes);
    REQUIRE(a.gap_overshoot_bytes == b.gap_overshoot_bytes);
    REQUIRE(a.idle_resyncs == b.idle_resyncs);
    REQUIRE(a.idle_bytes == b.idle_bytes);
    REQUIRE(a.underrun_resyncs == b.underrun_resyncs);
    REQUIRE(a.underrun_bytes == b.underrun_bytes);
    REQUIRE(a.lag_clamped_bytes == b.lag_clamped_bytes);
    REQUIRE(a.normal_held == b.normal_held);
    REQUIRE(a.normal_forced == b.normal_forced);
    REQUIRE(a.planned_idles == b.planned_idles);
    REQUIRE(a.planned_idle_bytes == b.planned_idle_bytes);
    REQUIRE(a.late_wakeups == b.late_wakeups);
    REQUIRE(a.late_bytes == b.late_bytes);
    REQUIRE(a.late_max_bytes == b.late_max_bytes);
    REQUIRE(a.late_lost_bytes == b.late_lost_bytes);
}

// What the random workloads exercised, over all seeds: each rule must have
// been compared at least once, or the comparison proves nothing about it.
struct Coverage {
    uint64_t gap_frames = 0, planned_idles = 0, late_wakeups = 0, underruns = 0, idle_resyncs = 0;
    uint64_t clockless_frames = 0, horizon_frames = 0;
};

// One random workload, engine and model side by side.
void engine_against_model(uint64_t seed, Coverage &cov) {
    std::mt19937_64 rng(seed);
    EngineConfig cfg;
    const uint64_t lines[] = {10'000'000, 1'000'000'000, 10'000'000'000, 100'000'000'000,
                              kMaxLineRateBps};
    cfg.line_rate_bps = lines[rng() % 5];
    if (rng() % 4 == 0) cfg.framing = Framing::didactic();
    if (rng() % 8 == 0) cfg.framing.mtu_bytes = 9000;
    const bool real_time = rng() % 2;
    cfg.window_bytes = real_time ? 2000 + rng() % 200'000 : UINT64_MAX / 4;
    // The paper's gaps, a gap horizon (short: within a frame or two; long),
    // or no gaps at all. Idling needs real time to end.
    auto random_horizon = [&]() -> uint64_t {
        switch (rng() % 3) {
        case 0: return rng() % 20'000;
        case 1: return rng() % 5'000'000;
        default: return kGapHorizonInf;
        }
    };
    cfg.gap_horizon_ns = random_horizon();
    cfg.clockless = rng() % 4 == 0;
    // Burst bounds (clockless): the default, one frame, or a few; slack
    // none, short or the default.
    if (rng() % 2) cfg.burst_bytes = rng() % 3 ? 1 + rng() % 20'000 : 0;
    if (rng() % 2) cfg.clockless_slack_ns = rng() % 3 ? rng() % 100'000 : 0;
    // The normal-frame rule in its three regimes: never held (the paper's),
    // the default, and tight (held often, starvation guard exercised).
    switch (rng() % 3) {
    case 0: cfg.normal_block_bytes = UINT64_MAX; break;
    case 1: break;
    case 2:
        cfg.normal_block_bytes = rng() % 300;
        cfg.normal_starve_bytes = rng() % 5000;
        break;
    }
    Engine e(cfg);
    ModelEngine m(cfg);

    // Equal rates and sizes make ties on the finish time: half the runs.
    const bool uniform = rng() % 2;
    const uint64_t uniform_rate = cfg.line_rate_bps / (2 + rng() % 50);
    auto random_rate = [&](uint64_t room) -> uint64_t {
        if (room == 0 || rng() % 6 == 0) return 0; // normal
        if (uniform && uniform_rate <= room) return uniform_rate;
        switch (rng() % 4) {
        case 0: return 1 + rng() % std::min<uint64_t>(room, 100'000); // very slow
        case 1: return 1 + rng() % std::max<uint64_t>(1, room / 50);
        default: return 1 + rng() % room;
        }
    };
    auto random_len = [&]() -> uint32_t {
        if (uniform) return 1514;
        switch (rng() % 4) {
        case 0: return 60;
        case 1: return cfg.framing.max_frame_len();
        default: return 1 + uint32_t(rng() % cfg.framing.max_frame_len());
        }
    };

    std::vector<uint32_t> classes;
    std::vector<int> queue; // frames queued per class handle
    auto add = [&] {
        uint64_t rate = random_rate((e.config().line_rate_bps - e.paced_rate_sum()) / 2);
        auto r = e.add_class(rate);
        REQUIRE(r.ok());
        REQUIRE(m.add_class(rate, r.value()));
        classes.push_back(r.value());
        if (queue.size() <= r.value()) queue.resize(r.value() + 1, 0);
        queue[r.value()] = 0;
    };
    const int n0 = 1 + int(rng() % 40);
    for (int i = 0; i < n0; ++i) add();

    uint64_t now = 1'000'000;
    uint64_t last_wake = 0;
    const int steps = 6000;
    for (int step = 0; step < steps; ++step) {
        const uint32_t k = classes[rng() % classes.size()];
        const unsigned op = unsigned(rng() % 100);
        if (op < 8) {
            // Traffic arrives, or the head changes under a backlogged class.
            uint32_t len = random_len();
            if (queue[k] == 0) queue[k] = 1 + int(rng() % 30);
            e.set_head(k, len);
            m.set_head(k, len);
        } else if (op < 10) {
            queue[k] = 0;
            e.set_empty(k);
            m.set_empty(k);
        } else if (op < 12) {
            uint64_t room = e.config().line_rate_bps - e.paced_rate_sum() + e.class_rate(k);
            uint64_t rate = rng() % 3 ? random_rate(room) : room + 1 + rng() % 1000;
            bool ok = e.set_rate(k, rate).ok();
            REQUIRE(ok == m.set_rate(k, rate));
        } else if (op < 13) {
            bool ok = e.remove_class(k).ok();
            REQUIRE(ok == m.remove_class(k));
            if (ok) {
                classes.erase(std::find(classes.begin(), classes.end(), k));
                queue[k] = 0;
                if (classes.empty()) add();
            }
        } else if (op < 14 && classes.size() < 60) {
            add();
        } else if (op < 15 && step % 7 == 0) {
            uint64_t line = std::max<uint64_t>(1, e.paced_rate_sum()) + rng() % cfg.line_rate_bps;
            line = std::min(line, kMaxLineRateBps);
            bool ok = e.set_line_rate(line).ok();
            REQUIRE(ok == m.set_line_rate(line));
        } else if (op < 18 && step % 3 == 0) {
            const uint64_t burst = rng() % 3 ? rng() % 30'000 : 0;
            REQUIRE(e.set_burst(k, burst).ok());
            m.set_burst(k, burst);
        } else if (op < 16 && step % 5 == 0) {
            if (rng() % 2) {
                uint64_t h = random_horizon();
                e.set_gap_horizon_ns(h);
                m.set_gap_horizon_ns(h);
            } else {
                bool on = rng() % 3 == 0;
                e.set_clockless(on);
                m.set_clockless(on);
            }
        } else {
            // Real time moves on a little, a lot, or to the last wake-up
            // time: exactly, a little early or late (within or beyond the
            // horizon), as a caller following Wait decisions would.
            if (real_time) {
                if (last_wake && rng() % 2)
                    now = std::max(now, last_wake + (rng() % 4 == 0 ? rng() % 100'000 : rng() % 3) -
                                            (rng() % 8 == 0 ? rng() % 1000 : 0));
                else
                    now += rng() % 3 == 0 ? rng() % 2'000'000 : rng() % 2000;
            }
            last_wake = 0;
            for (int batch = 0; batch < 16; ++batch) {
                Decision a = e.next(now);
                Decision b = m.next(now);
                INFO("seed " << seed << " step " << step);
                REQUIRE(int(a.action) == int(b.action));
                REQUIRE(a.cls == b.cls);
                REQUIRE(a.len == b.len);
                REQUIRE(a.wake_ns == b.wake_ns);
                REQUIRE(a.slack_ns == b.slack_ns);
                REQUIRE(e.byte_clock() == m.byte_clock());
                if (a.action == Action::Wait) last_wake = a.wake_ns;
                if (a.action == Action::Frame) {
                    if (--queue[a.cls] > 0) {
                        uint32_t len = random_len();
                        e.set_head(a.cls, len);
                        m.set_head(a.cls, len);
                    } else {
                        queue[a.cls] = 0;
                        e.set_empty(a.cls);
                        m.set_empty(a.cls);
                    }
                }
                if (a.action == Action::Wait || a.action == Action::Idle) break;
            }
        }
    }
    same_counters(e.counters(), m.counters);
    const EngineCounters &c = e.counters();
    cov.gap_frames += c.gap_frames;
    cov.planned_idles += c.planned_idles;
    cov.late_wakeups += c.late_wakeups;
    cov.underruns += c.underrun_resyncs;
    cov.idle_resyncs += c.idle_resyncs;
    if (e.config().clockless) cov.clockless_frames += c.frames;
    if (!e.config().clockless && e.config().gap_horizon_ns != kGapHorizonInf)
        cov.horizon_frames += c.frames;
}

} // namespace

TEST_CASE("the pending wheel hands over exactly the keys the byte clock passed",
          "[engine][wheel]") {
    for (uint64_t seed = 1; seed <= 12; ++seed) {
        SECTION("seed " + std::to_string(seed)) {
            // Default framing's span; a mid tier of 2^17 blocks, and a short
            // one so that the far heap is crossed often.
            const size_t mid = seed % 2 ? ClassWheel<Node>::kMidBlocks : 4;
            wheel_against_multiset(seed, 1622, mid, seed % 3 ? 200'000 : uint64_t(1) << 40);
            wheel_against_multiset(seed, 9122, mid, 2'000'000); // jumbo frames
        }
    }
}

TEST_CASE("the engine decides exactly as the plain-scan model", "[engine][model]") {
    Coverage cov;
    for (uint64_t seed = 1; seed <= 120; ++seed) engine_against_model(seed, cov);
    INFO("gaps " << cov.gap_frames << ", planned idles " << cov.planned_idles << ", late "
                 << cov.late_wakeups << ", underruns " << cov.underruns << ", idle resyncs "
                 << cov.idle_resyncs << ", frames clockless " << cov.clockless_frames
                 << ", with a horizon " << cov.horizon_frames);
    CHECK(cov.gap_frames > 1000);
    CHECK(cov.planned_idles > 1000);
    CHECK(cov.late_wakeups > 100);
    CHECK(cov.underruns > 10);
    CHECK(cov.idle_resyncs > 10);
    CHECK(cov.clockless_frames > 10'000);
    CHECK(cov.horizon_frames > 10'000);
}

TEST_CASE("the reciprocal division is exact", "[engine][model]") {
    // The engine's quotient estimate from floor((2^64-1)/d), corrected once.
    std::mt19937_64 rng(7);
    for (int i = 0; i < 500'000; ++i) {
        uint64_t d = 1 + (rng() >> (rng() % 64));
        d = std::min<uint64_t>(d, kMaxLineRateBps);
        uint64_t n = rng() >> (rng() % 64);
        if (i % 5 == 0) n = UINT64_MAX - rng() % 1000;
        if (i % 7 == 0) n = d * (rng() % (UINT64_MAX / d)) + (rng() % 2 ? d - 1 : 0);
        const uint64_t inv = UINT64_MAX / d;
        uint64_t q = uint64_t((u128(n) * inv) >> 64);
        uint64_t r = n - q * d;
        if (r >= d) {
            ++q;
            r -= d;
        }
        REQUIRE(q == n / d);
        REQUIRE(r == n % d);
    }
}
