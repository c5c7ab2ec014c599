// The engine's internals against straightforward models:
//   - ClassWheel (the pending set) against a sorted multiset, tiers included;
//   - the whole Engine against ModelEngine: the same rules (docs/design.md §3-§4,
//     engine.hpp) written as plain scans over all classes with real 128-bit
//     division, decision by decision, on seeded random workloads. Ties on the
//     finish time go to the lower class index in both.
#include "core/class_wheel.hpp"
#include "core/engine.hpp"
#include "engine_model.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <random>
#include <set>
#include <utility>
#include <vector>

using namespace pspxdp;
using engine_model::ModelEngine;

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

// ModelEngine: engine_model.hpp.

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
                INFO("seed " << seed << " step " << step);
                const Decision a = engine_model::decide_both(e, m, now, queue, random_len);
                if (a.action == Action::Wait) last_wake = a.wake_ns;
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
