// Class trees (docs/design.md §3.12):
//   - the engine against ModelEngine (engine_model.hpp), which applies the
//     tree's rules literally (recursive scans over every class, 128-bit
//     division), decision by decision, on random trees, rates, ceils,
//     prios, arrivals, changes of rate, ceil, prio and parent mid-run, the
//     line rate, the gap horizon and clockless mode;
//   - per-leaf service on saturated trees against the water-filling of the
//     rules (guarantee, then the spare by prio, then in proportion to rate,
//     capped by ceils), within a stated bound;
//   - the refusals, one condition each, and nothing changed.
#include "core/engine.hpp"
#include "engine_model.hpp"
#include "sim/lateness.hpp"
#include "sim/simulator.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace pspxdp;
using engine_model::ModelEngine;

namespace {

constexpr uint32_t kNone = kTreeNoParent;

struct TreeCoverage {
    uint64_t frames = 0, lent = 0, borrowed = 0, gaps = 0, refused = 0, accepted = 0;
    uint64_t clockless_frames = 0;
};

void tree_against_model(uint64_t seed, TreeCoverage &cov) {
    std::mt19937_64 rng(seed);
    EngineConfig cfg;
    const uint64_t lines[] = {10'000'000, 1'000'000'000, 10'000'000'000};
    cfg.line_rate_bps = lines[rng() % 3];
    if (rng() % 4 == 0) cfg.framing = Framing::didactic();
    const bool real_time = rng() % 2;
    cfg.window_bytes = real_time ? 2000 + rng() % 200'000 : UINT64_MAX / 4;
    if (rng() % 3 == 0) cfg.gap_horizon_ns = rng() % 200'000;
    cfg.clockless = rng() % 5 == 0;
    Engine e(cfg);
    ModelEngine m(cfg);

    auto random_len = [&]() -> uint32_t {
        switch (rng() % 3) {
        case 0: return cfg.framing.max_frame_len();
        default: return 60 + uint32_t(rng() % (cfg.framing.max_frame_len() - 59));
        }
    };
    std::vector<uint32_t> classes;
    std::vector<int> queue;
    auto add = [&](uint64_t rate) -> uint32_t {
        auto r = e.add_class(rate);
        REQUIRE(m.add_class(rate, r.ok() ? r.value() : 0) == r.ok());
        if (!r.ok()) return kNone;
        classes.push_back(r.value());
        if (queue.size() <= r.value()) queue.resize(r.value() + 1, 0);
        queue[r.value()] = 0;
        return r.value();
    };
    std::string last_error;
    auto configure = [&](const std::vector<TreeSpec> &specs) {
        const auto res = e.configure_tree(specs);
        const bool ok = res.ok();
        last_error = ok ? std::string() : res.error();
        REQUIRE(ok == m.configure_tree(specs));
        ++(ok ? cov.accepted : cov.refused);
        return ok;
    };

    // A random tree: top-level classes summing below M, children summing
    // below their parent's rate, depth up to 4; ceils from the rate up to
    // the parent's ceil (top level: up to M); prios 0..2.
    const uint64_t M = cfg.line_rate_bps;
    std::vector<TreeSpec> specs;
    std::function<void(uint32_t, uint64_t, uint64_t, int)> grow =
        [&](uint32_t parent, uint64_t room, uint64_t ceil, int depth) {
            const int n = 1 + int(rng() % (depth == 0 ? 4 : 3));
            for (int i = 0; i < n && room >= 2; ++i) {
                const uint64_t rate = 1 + rng() % (room / 2);
                room -= rate;
                const uint64_t c = rate + (rng() % 2 ? 0 : rng() % (ceil - rate + 1));
                const uint32_t k = add(rate / 4); // added small; the tree sets the rate
                REQUIRE(k != kNone);
                specs.push_back(TreeSpec{k, rate, parent, c, uint32_t(rng() % 3)});
                if (depth < 3 && rng() % 2) grow(k, rate, c, depth + 1);
            }
        };
    grow(kNone, M - M / 10, M, 0);
    if (rng() % 3 == 0) add(0); // a normal class beside the tree
    const bool built = configure(specs);
    INFO(last_error);
    REQUIRE(built);

    auto leaves = [&] {
        std::vector<uint32_t> out;
        for (uint32_t k : classes)
            if (!e.class_children(k) && e.class_rate(k)) out.push_back(k);
        return out;
    };
    auto normals = [&] {
        std::vector<uint32_t> out;
        for (uint32_t k : classes)
            if (!e.class_rate(k)) out.push_back(k);
        return out;
    };

    uint64_t now = 1'000'000, last_wake = 0;
    for (int step = 0; step < 3000; ++step) {
        const unsigned op = unsigned(rng() % 100);
        const uint32_t k = classes[rng() % classes.size()];
        if (op < 10) {
            std::vector<uint32_t> l = leaves();
            for (uint32_t n : normals()) l.push_back(n);
            if (l.empty()) continue;
            const uint32_t leaf = l[rng() % l.size()];
            const uint32_t len = random_len();
            if (queue[leaf] == 0) queue[leaf] = 1 + int(rng() % 40);
            e.set_head(leaf, len);
            m.set_head(leaf, len);
        } else if (op < 12) {
            if (e.class_children(k)) continue;
            queue[k] = 0;
            e.set_empty(k);
            m.set_empty(k);
        } else if (op < 16) {
            // A change of rate, ceil, prio (and now and then parent) of one
            // class: often valid, sometimes refused; both must agree.
            const uint64_t r = e.class_rate(k);
            if (!r) continue;
            TreeSpec s{k, r, e.class_parent(k), e.class_ceil(k), e.class_prio(k)};
            switch (rng() % 5) {
            case 0: s.rate_bps = std::max<uint64_t>(1, r / 2 + rng() % (r + 1)); break;
            case 1: s.ceil_bps = s.rate_bps + rng() % (s.ceil_bps + 1); break;
            case 2: s.prio = uint32_t(rng() % 3); break;
            case 3: s.parent = rng() % 3 ? classes[rng() % classes.size()] : kNone; break;
            default:
                s.rate_bps = std::max<uint64_t>(1, r - r / 3);
                s.ceil_bps = s.rate_bps + (s.ceil_bps - r);
                break;
            }
            if (s.ceil_bps < s.rate_bps && rng() % 2) s.ceil_bps = s.rate_bps;
            configure({s});
        } else if (op < 17) {
            const uint64_t r = e.class_rate(k) - e.class_rate(k) / 4;
            const bool ok = e.set_rate(k, r).ok();
            REQUIRE(ok == m.set_rate(k, r));
        } else if (op < 18 && step % 5 == 0) {
            const bool ok = e.remove_class(k).ok();
            REQUIRE(ok == m.remove_class(k));
            if (ok) {
                classes.erase(std::find(classes.begin(), classes.end(), k));
                queue[k] = 0;
                if (classes.empty()) add(M / 10);
            }
        } else if (op < 19 && classes.size() < 60) {
            const uint32_t n = add(rng() % 2 ? 0 : 1 + rng() % (M / 20));
            (void)n;
        } else if (op < 20 && step % 11 == 0) {
            const uint64_t line = std::min(kMaxLineRateBps, e.paced_rate_sum() + 1 + rng() % M);
            const bool ok = e.set_line_rate(line).ok();
            REQUIRE(ok == m.set_line_rate(line));
        } else if (op < 21 && step % 13 == 0) {
            const bool on = rng() % 4 == 0;
            e.set_clockless(on);
            m.set_clockless(on);
        } else {
            if (real_time) {
                if (last_wake && rng() % 2)
                    now = std::max(now, last_wake + (rng() % 4 == 0 ? rng() % 100'000 : rng() % 3));
                else
                    now += rng() % 3 == 0 ? rng() % 2'000'000 : rng() % 2000;
            }
            last_wake = 0;
            for (int batch = 0; batch < 24; ++batch) {
                INFO("seed " << seed << " step " << step << " batch " << batch);
                const Decision a = engine_model::decide_both(e, m, now, queue, random_len);
                if (a.action == Action::Wait) last_wake = a.wake_ns;
                if (a.action == Action::Gap) ++cov.gaps;
                if (a.action == Action::Frame) {
                    ++cov.frames;
                    if (e.config().clockless) ++cov.clockless_frames;
                }
                if (a.action == Action::Wait || a.action == Action::Idle) break;
            }
        }
        REQUIRE(e.tree() == m.tree());
    }
    for (uint32_t k : classes) {
        INFO("seed " << seed << " class " << k);
        REQUIRE(e.class_counters(k).lent_bytes == m.lent(k));
        REQUIRE(e.class_counters(k).borrowed_bytes == m.borrowed(k));
        cov.lent += m.lent(k);
        cov.borrowed += m.borrowed(k);
    }
}

} // namespace

TEST_CASE("a class tree decides exactly as the literal model", "[engine][tree][model]") {
    TreeCoverage cov;
    for (uint64_t seed = 1; seed <= 100; ++seed) tree_against_model(seed, cov);
    INFO("frames " << cov.frames << ", lent " << cov.lent << ", borrowed " << cov.borrowed
                   << ", gaps " << cov.gaps << ", configs accepted " << cov.accepted << ", refused "
                   << cov.refused << ", clockless frames " << cov.clockless_frames);
    CHECK(cov.frames > 20'000);
    CHECK(cov.lent > 1'000'000);
    CHECK(cov.borrowed > 1'000'000);
    CHECK(cov.gaps > 1000);
    CHECK(cov.accepted > 500);
    CHECK(cov.refused > 100);
    CHECK(cov.clockless_frames > 1000);
}

namespace {

// The rules' fluid allocation (docs/design.md §3.12) by water-filling: a
// class's children first get min(rate, demand); what is left of what the
// class gets goes by prio, lowest first, and within a prio in proportion to
// rate, each capped by what it can still take (its ceil, its demand).
struct Fluid {
    uint64_t rate, ceil;
    uint32_t parent, prio;
    bool backlogged;
    double offered = 0; // a backlogged leaf's demand (bit/s of L2 bytes); 0: greedy
};

double demand(const std::vector<Fluid> &t, uint32_t k) {
    bool inner = false;
    double d = 0;
    for (uint32_t j = 0; j < t.size(); ++j)
        if (t[j].parent == k) inner = true, d += demand(t, j);
    if (!inner) d = !t[k].backlogged ? 0 : t[k].offered > 0 ? t[k].offered : 1e300;
    return std::min(d, double(t[k].ceil));
}

void water_fill(const std::vector<Fluid> &t, uint32_t k, double have, std::vector<double> &out) {
    std::vector<uint32_t> ch;
    for (uint32_t j = 0; j < t.size(); ++j)
        if (t[j].parent == k) ch.push_back(j);
    if (k != kNone) out[k] = have;
    if (ch.empty()) return;
    std::map<uint32_t, double> x;
    std::map<uint32_t, double> cap;
    for (uint32_t j : ch) {
        const double d = demand(t, j);
        x[j] = std::min(double(t[j].rate), d);
        cap[j] = d - x[j];
        have -= x[j];
    }
    for (uint32_t prio = 0; prio < 8 && have > 1e-9; ++prio) {
        std::vector<uint32_t> open;
        for (uint32_t j : ch)
            if (t[j].prio == prio && cap[j] > 1e-9) open.push_back(j);
        while (!open.empty() && have > 1e-9) {
            double w = 0;
            for (uint32_t j : open) w += double(t[j].rate);
            double lambda = have / w; // extra per unit of rate
            for (uint32_t j : open) lambda = std::min(lambda, cap[j] / double(t[j].rate));
            for (uint32_t j : open) {
                const double add = lambda * double(t[j].rate);
                x[j] += add;
                cap[j] -= add;
                have -= add;
            }
            std::erase_if(open, [&](uint32_t j) { return cap[j] <= 1e-9; });
        }
    }
    for (uint32_t j : ch) water_fill(t, j, x[j], out);
}

// The ISP-like tree (docs/design.md §3.12): 4 sites of rate 200 ceil 400
// Mbit/s, 25 subscribers each of ceil 50 and rate 8 (spread: 7-8), all
// backlogged but lone_site's 22 last (4: none).
std::vector<Fluid> isp_tree(bool spread, uint32_t lone_site) {
    const uint64_t Mb = 1'000'000;
    std::mt19937_64 rng(5);
    std::vector<Fluid> t;
    for (uint32_t s = 0; s < 4; ++s) {
        const uint32_t site = uint32_t(t.size());
        t.push_back({200 * Mb, 400 * Mb, kNone, 0, false});
        for (uint32_t i = 0; i < 25; ++i)
            t.push_back(
                {spread ? 7 * Mb + rng() % Mb : 8 * Mb, 50 * Mb, site, 0, s != lone_site || i < 3});
    }
    return t;
}

// Runs a saturated tree on the byte clock (didactic framing: a frame's wire
// time is its L2 size, so the wire carries exactly M of rate) and compares
// each backlogged leaf's rate with the water-filling.
void shares_match(const std::vector<Fluid> &t, uint64_t frames, double tolerance) {
    EngineConfig cfg;
    cfg.framing = Framing::didactic();
    cfg.window_bytes = UINT64_MAX / 4;
    Engine e(cfg);
    std::vector<TreeSpec> specs;
    for (uint32_t k = 0; k < t.size(); ++k) {
        REQUIRE(e.add_class(0).value() == k);
        specs.push_back(TreeSpec{k, t[k].rate, t[k].parent, t[k].ceil, t[k].prio});
    }
    REQUIRE(e.configure_tree(specs).ok());
    std::vector<bool> leaf(t.size(), true);
    for (const Fluid &f : t)
        if (f.parent != kNone) leaf[f.parent] = false;
    for (uint32_t k = 0; k < t.size(); ++k)
        if (leaf[k] && t[k].backlogged) e.set_head(k, 1500);
    auto run = [&](uint64_t n) {
        for (uint64_t i = 0; i < n;) {
            Decision d = e.next(0);
            REQUIRE(d.action != Action::Wait);
            if (d.action == Action::Frame) {
                e.set_head(d.cls, 1500);
                ++i;
            }
        }
    };
    run(frames / 10); // warm-up: borrowing settles
    std::vector<uint64_t> before(t.size());
    for (uint32_t k = 0; k < t.size(); ++k) before[k] = e.class_counters(k).l2_bytes;
    const uint64_t g0 = e.byte_clock();
    run(frames);
    const double span = double(e.byte_clock() - g0);
    std::vector<double> ideal(t.size(), 0);
    water_fill(t, kNone, double(cfg.line_rate_bps), ideal);
    for (uint32_t k = 0; k < t.size(); ++k) {
        if (!leaf[k] || !t[k].backlogged) continue;
        const double got =
            double(e.class_counters(k).l2_bytes - before[k]) / span * double(cfg.line_rate_bps);
        INFO("leaf " << k << " got " << got << " ideal " << ideal[k]);
        CHECK(std::abs(got - ideal[k]) <= tolerance * ideal[k]);
    }
}

} // namespace

TEST_CASE("a saturated tree shares as the water-filling of its rules", "[engine][tree]") {
    const uint64_t G = 1'000'000'000, Mb = 1'000'000;
    SECTION("prio: the lower prio takes the spare up to its ceil") {
        // The tc example: 1:1 1gbit; 1:10 300mbit ceil 1gbit prio 0;
        // 1:20 100mbit ceil 600mbit prio 1; 1:30 50mbit (ceil = rate).
        shares_match({{G, G, kNone, 0, false},
                      {300 * Mb, G, 0, 0, true},
                      {100 * Mb, 600 * Mb, 0, 1, true},
                      {50 * Mb, 50 * Mb, 0, 0, true}},
                     200'000, 1e-3);
    }
    SECTION("equal prio: the spare in proportion to rate, capped by a ceil") {
        shares_match({{G, G, kNone, 0, false},
                      {300 * Mb, G, 0, 0, true},
                      {100 * Mb, G, 0, 0, true},
                      {50 * Mb, 60 * Mb, 0, 0, true},
                      {10 * Mb, G, 0, 0, true}},
                     200'000, 1e-3);
    }
    SECTION("an inner class lends its own spare before the wire lends") {
        // A (500) with A1, A2 (100 each); B (400) with B1 (400): the wire's
        // spare (100) goes to A and B by rate, A's own spare (300) to A1/A2.
        shares_match({{500 * Mb, G, kNone, 0, false},
                      {100 * Mb, G, 0, 0, true},
                      {100 * Mb, G, 0, 0, true},
                      {400 * Mb, G, kNone, 0, false},
                      {400 * Mb, G, 3, 0, true}},
                     200'000, 1e-3);
    }
    SECTION("the ISP-like tree: 4 sites of 25 subscribers, some idle") {
        shares_match(isp_tree(true, 0), 400'000, 1e-3);
        shares_match(isp_tree(false, 0), 400'000, 1e-3);
    }
}

namespace {

// A tree run through the simulator (sim::simulate: sources, queues, the
// model daemon and NIC): per class, leaf or inner, the frames its subtree
// sent, (start ns, L2 bytes).
struct TreeFrame {
    uint64_t start_ns, end_ns, l2;
};
struct TreeRun {
    std::vector<std::vector<TreeFrame>> frames;
    EngineCounters counters;
    uint64_t wakeups = 0; // the model daemon's timed wake-ups
};

TreeRun run_tree(const sim::SimConfig &cfg) {
    const sim::SimResult res = sim::simulate(cfg);
    TreeRun run;
    run.counters = res.counters;
    run.wakeups = res.wakeups;
    run.frames.resize(cfg.sources.size());
    for (const TraceFrame &f : res.trace) {
        if (f.flow == kFlowGap) continue;
        const uint64_t wire_ns = uint64_t(cfg.engine.framing.wire_bytes(f.len)) * 8'000'000'000 /
                                 cfg.engine.line_rate_bps;
        for (uint32_t k = f.flow; k != kNone; k = cfg.sources[k].parent)
            run.frames[k].push_back(
                {f.time_ns, f.time_ns + wire_ns, cfg.engine.framing.l2_bytes(f.len)});
    }
    return run;
}

// Bit/s of L2 bytes from the first frame that started in [from, to) to
// the last (not counted): no error of a frame's worth at either end.
double rate_in(const TreeRun &r, uint32_t k, uint64_t from, uint64_t to) {
    uint64_t bytes = 0, first = 0, last = 0, last_bytes = 0, n = 0;
    for (const auto &[t, end, b] : r.frames[k]) {
        if (t < from || t >= to) continue;
        if (!n++) first = t;
        bytes += b;
        last = t;
        last_bytes = b;
    }
    return n < 2 ? 0 : double(bytes - last_bytes) * 8e9 / double(last - first);
}

// The most that class k's subtree sent over any window beyond its ceil, in
// largest frames (mtu L2 bytes): over every window from the start of a
// frame i to the end of a frame j on the wire (at the line rate), the L2
// bytes of frames i..j minus what the ceil allows in that window.
double burst_at(const TreeRun &r, uint32_t k, uint64_t ceil_bps, uint64_t mtu) {
    double best = 0, low = 1e300, sum = 0;
    for (const auto &[t, end, b] : r.frames[k]) {
        low = std::min(low, sum - double(t) * double(ceil_bps) / 8e9);
        sum += double(b);
        best = std::max(best, sum - double(end) * double(ceil_bps) / 8e9 - low);
    }
    return best / double(mtu);
}

bool report_wanted() { return std::getenv("PSPXDP_TREE_REPORT") != nullptr; }

} // namespace

namespace {

// The daemon's default clockless run (1 Gbit/s line, the default bound: 3
// MTU, or 150 us of the rate if more) for run_ns, in the simulator.
sim::SimConfig daemon_clockless(uint64_t run_ns) {
    sim::SimConfig cfg;
    cfg.engine.line_rate_bps = 1'000'000'000;
    cfg.engine.clockless = true;
    cfg.engine.burst_floor_ns = kDefaultBurstFloorNs;
    cfg.max_class_frames = UINT64_MAX;
    cfg.max_ns = run_ns;
    return cfg;
}

// A class of the tree, its source index returned: silent (an inner class,
// or an idle leaf: offered 0), or offered offered_bps (64 frames queued at
// most) for on_ns (0: all along), then silent.
uint32_t tree_class(sim::SimConfig &cfg, uint64_t rate, uint64_t ceil, uint32_t parent,
                    uint32_t prio, uint64_t offered = 0, uint64_t on_ns = 0) {
    sim::SourceSpec s;
    s.name = std::to_string(cfg.sources.size());
    s.rate_bps = rate;
    s.ceil_bps = ceil;
    s.parent = parent;
    s.prio = prio;
    s.greedy = false;
    if (offered) {
        s.offered_bps = offered;
        s.on_ns = on_ns ? on_ns : 100 * cfg.max_ns;
        s.off_ns = 100 * cfg.max_ns;
        s.queue_limit = 64;
    }
    cfg.sources.push_back(s);
    return uint32_t(cfg.sources.size() - 1);
}

} // namespace

TEST_CASE("the tree of the real-time comparison, engine only, finite load",
          "[engine][tree][load]") {
    // docs/results/2026-11-28-tree-vs-htb: a 400 Mbit/s root on a 1 Gbit/s
    // line, 2 sites of rate 150 ceil 300, 3 subscribers each of rate 30
    // ceil 120 (the third at prio 1), 100 Mbit/s offered each (1514-byte
    // frames, evenly spaced, 64 queued at most), the second site's stop
    // after a phase. Per leaf the rate over the steady part of each phase
    // against the water-filling, per class its burst at its ceil.
    const uint64_t Mb = 1'000'000, ms = 1'000'000, phase = 200 * ms;
    std::vector<Fluid> t{{400 * Mb, 400 * Mb, kNone, 0, false}};
    // The daemon's default bound (at least 150 us of the rate, §4.5); the
    // clock is set per mode below.
    sim::SimConfig cfg = daemon_clockless(2 * phase);
    tree_class(cfg, 400 * Mb, 400 * Mb, kNone, 0);
    for (uint32_t site = 0; site < 2; ++site) {
        const uint32_t p = tree_class(cfg, 150 * Mb, 300 * Mb, 0, 0);
        for (uint32_t i = 0; i < 3; ++i)
            tree_class(cfg, 30 * Mb, 120 * Mb, p, i == 2, 100 * Mb, (2 - site) * phase);
    }
    struct Mode {
        const char *name;
        bool clockless;
        const sim::LatenessTable *sleep;
    };
    const Mode modes[] = {{"byte clock", false, nullptr},
                          {"clockless, perfect timer", true, nullptr},
                          {"clockless, this machine's timer", true, &sim::measured_sleep()}};
    for (const Mode &mode : modes) {
        cfg.engine.clockless = mode.clockless;
        cfg.wake.sleep = mode.sleep;
        const TreeRun r = run_tree(cfg);
        if (report_wanted())
            std::printf("%-32s %llu frames, %llu wake-ups (%.2f frames a wake-up), late lost "
                        "%llu bytes\n",
                        mode.name, (unsigned long long)r.counters.frames,
                        (unsigned long long)r.wakeups,
                        double(r.counters.frames) / double(r.wakeups),
                        (unsigned long long)r.counters.late_lost_bytes);
        // Clockless, the tree's frames leave in batches (docs/design.md
        // §3.12): a class held at its ceil sends several frames a wake-up
        // within its bound, as a flat class does. Frame by frame (the rules
        // before) the daemon woke 0.87-0.98 times a frame here.
        if (mode.clockless) {
            INFO(mode.name << ": " << r.counters.frames << " frames, " << r.wakeups << " wake-ups");
            CHECK(2 * r.counters.frames >= 3 * r.wakeups);
        }
        std::vector<Fluid> f;
        for (uint32_t ph = 0; ph < 2; ++ph) {
            f.clear();
            for (const sim::SourceSpec &s : cfg.sources)
                f.push_back({s.rate_bps, s.ceil_bps, s.parent, s.prio, s.on_ns > ph * phase,
                             double(s.offered_bps)});
            std::vector<double> ideal(f.size(), 0);
            water_fill(f, kNone, double(cfg.engine.line_rate_bps), ideal);
            const uint64_t from = ph * phase + 50 * ms, to = (ph + 1) * phase;
            for (uint32_t k = 0; k < f.size(); ++k) {
                const double got = rate_in(r, k, from, to);
                const double burst = burst_at(r, k, f[k].ceil, cfg.engine.framing.mtu_unit_bytes());
                if (report_wanted())
                    std::printf("%-32s phase %u class %u: got %7.2f ideal %7.2f Mbit/s (%+.2f %%), "
                                "burst at ceil %.2f MTU\n",
                                mode.name, ph + 1, k, got / 1e6, ideal[k] / 1e6,
                                ideal[k] > 0 ? 100 * (got - ideal[k]) / ideal[k] : 0.0, burst);
                INFO(mode.name << ", phase " << ph + 1 << ", class " << k << ": got " << got
                               << " ideal " << ideal[k] << ", burst " << burst);
                // Byte clock: the rules' shares within 0.1 %, every class
                // within its ceil + 2 MTU. Clockless, with the timer
                // modelled on this machine's (sim/lateness.hpp): within
                // 0.3 %, and within its bound at its ceil (the daemon's: 3
                // MTU, or 150 us of the ceil if more) + 2 MTU.
                const double unit = double(cfg.engine.framing.mtu_unit_bytes());
                const double bound =
                    std::max(double(kDefaultBurstMtus),
                             double(f[k].ceil) * double(kDefaultBurstFloorNs) / 8e9 / unit);
                const double tolerance = mode.clockless ? 3e-3 : 1e-3;
                CHECK(std::abs(got - ideal[k]) <= tolerance * std::max(ideal[k], 1e6));
                CHECK(burst <= (mode.clockless ? bound + 2 : 2.0));
            }
        }
    }
}

namespace {

// A saturated tree through the simulator on the byte clock (didactic
// framing: the wire carries exactly M of rate), from the first decision:
// per backlogged leaf its rate after a warm-up against the water-filling,
// per class (inner or leaf) its burst at its ceil over the whole run,
// start included.
void tree_exact(const std::vector<Fluid> &t, const char *name, uint64_t run_ns, double tolerance,
                double max_burst_mtu) {
    sim::SimConfig cfg;
    cfg.engine.framing = Framing::didactic();
    cfg.max_class_frames = UINT64_MAX;
    cfg.max_ns = run_ns;
    std::vector<bool> leaf(t.size(), true);
    for (const Fluid &f : t)
        if (f.parent != kNone) leaf[f.parent] = false;
    for (uint32_t k = 0; k < t.size(); ++k) {
        sim::SourceSpec s;
        s.name = std::to_string(k);
        s.rate_bps = t[k].rate;
        s.ceil_bps = t[k].ceil;
        s.parent = t[k].parent;
        s.prio = t[k].prio;
        s.greedy = leaf[k] && t[k].backlogged;
        s.min_len = s.max_len = 1500;
        cfg.sources.push_back(s);
    }
    const TreeRun r = run_tree(cfg);
    std::vector<double> ideal(t.size(), 0);
    water_fill(t, kNone, double(cfg.engine.line_rate_bps), ideal);
    double worst = 0, worst_burst[2] = {0, 0};
    for (uint32_t k = 0; k < t.size(); ++k) {
        const double burst = burst_at(r, k, t[k].ceil, cfg.engine.framing.mtu_unit_bytes());
        worst_burst[leaf[k]] = std::max(worst_burst[leaf[k]], burst);
        INFO(name << ": class " << k << " burst at its ceil " << burst << " MTU");
        CHECK(burst <= max_burst_mtu);
        if (!leaf[k] || !t[k].backlogged) continue;
        const double got = rate_in(r, k, run_ns / 10, run_ns);
        worst = std::max(worst, std::abs(got - ideal[k]) / ideal[k]);
        INFO(name << ": leaf " << k << " got " << got << " ideal " << ideal[k]);
        CHECK(std::abs(got - ideal[k]) <= tolerance * ideal[k]);
    }
    if (report_wanted())
        std::printf("%s: worst leaf %.3f %% off its ideal; largest burst at ceil: inner %.2f MTU, "
                    "leaf %.2f MTU\n",
                    name, 100 * worst, worst_burst[0], worst_burst[1]);
}

} // namespace

TEST_CASE("the ISP-like tree delivers every leaf's share, every class within its ceil",
          "[engine][tree][isp]") {
    const uint64_t ms = 1'000'000;
    tree_exact(isp_tree(false, 4), "ISP, equal rates, all backlogged", 300 * ms, 1e-3, 2.0);
    tree_exact(isp_tree(false, 0), "ISP, equal rates, 3 lone subscribers", 300 * ms, 1e-3, 2.0);
    tree_exact(isp_tree(true, 0), "ISP, spread rates, 3 lone subscribers", 300 * ms, 1e-3, 2.0);
}

TEST_CASE("clockless, a prio-0 class does not wait behind a sibling's borrowed batch",
          "[engine][tree][prio]") {
    // docs/results/2026-11-28-tree-vs-htb-fair, the priority case: under a
    // 100 Mbit/s parent (rate = ceil) on a 1 Gbit/s line, a prio-0 class
    // (rate 10 ceil 100) with 1 Mbit/s of 200-byte frames beside a prio-1
    // class (rate 10 ceil 100) whose greedy bulk borrows all the spare.
    // Clockless with the daemon's default bound, the model daemon woken by
    // each arrival: a prio-0 frame is due at once (it is far below its
    // rate), and its ancestor's ceil must let it through at once too: the
    // borrowed frames get one frame less of a ceil's reach than guaranteed
    // ones (docs/design.md §3.12, "Clockless, in batches"), so they never
    // leave the parent's ceil closed to a due frame.
    const uint64_t Mb = 1'000'000, ms = 1'000'000;
    sim::SimConfig cfg = daemon_clockless(200 * ms);
    tree_class(cfg, 100 * Mb, 100 * Mb, kNone, 0);
    const uint32_t lat = tree_class(cfg, 10 * Mb, 100 * Mb, 0, 0, 1 * Mb);
    cfg.sources[lat].min_len = cfg.sources[lat].max_len = 200;
    cfg.sources[lat].start_ns = 10 * ms; // the bulk has filled its batches by then
    cfg.sources[tree_class(cfg, 10 * Mb, 100 * Mb, 0, 1)].greedy = true;
    const uint64_t lat_start = cfg.sources[lat].start_ns;
    const Framing f = cfg.engine.framing;
    const long double period = (long double)f.l2_bytes(200) * 8e9L / (long double)(1 * Mb);
    const struct {
        const char *name;
        const sim::LatenessTable *sleep;
    } modes[] = {{"perfect timer", nullptr}, {"this machine's timer", &sim::measured_sleep()}};
    for (const auto &mode : modes) {
        cfg.wake.sleep = mode.sleep;
        const TreeRun r = run_tree(cfg);
        std::vector<uint64_t> delay;
        for (const TreeFrame &fr : r.frames[1]) {
            const uint64_t arrival = uint64_t(lat_start + (long double)delay.size() * period);
            REQUIRE(fr.start_ns >= arrival);
            delay.push_back(fr.start_ns - arrival);
        }
        std::sort(delay.begin(), delay.end());
        const double bulk = rate_in(r, 2, 20 * ms, cfg.max_ns);
        if (report_wanted())
            std::printf("%s: %zu prio-0 frames, delay p50 %llu ns, max %llu ns; bulk %.2f Mbit/s\n",
                        mode.name, delay.size(), (unsigned long long)delay[delay.size() / 2],
                        (unsigned long long)delay.back(), bulk / 1e6);
        INFO(mode.name << ": delay max " << delay.back() << " ns, bulk " << bulk);
        REQUIRE(delay.size() > 100);
        // Sent at its arrival (the model daemon decides then): no wait for
        // the parent's ceil.
        CHECK(delay.back() == 0);
        // With a perfect timer the bulk takes all the spare, 100 - 1
        // Mbit/s, within 0.1 %. (With this machine's timer a wake-up later
        // than the ceil's bound absorbs costs the bulk rate; a borrowed
        // batch now starts a frame later in the bound, so a frame's period
        // less lateness is free: 98.2-99.1 Mbit/s over seeds 1-8, 98.8-99.1
        // before. Printed with PSPXDP_TREE_REPORT, not held.)
        if (!mode.sleep) CHECK(std::abs(bulk - 99 * Mb) <= 1e-3 * 99 * Mb);
    }
}

TEST_CASE("clockless, the bench's tree: every class within its bound at its ceil",
          "[engine][tree][load]") {
    // docs/results/2026-11-28-tree-vs-htb-fair's tree (bench/run_tree_htb.sh):
    // a 400 Mbit/s root (rate = ceil) on a 1 Gbit/s line, 4 sites of rate
    // 80 ceil 160, 5 subscribers each of rate 16 ceil 48, 3 of them offered
    // 60 Mbit/s (1514-byte frames, 64 queued at most); clockless with the
    // daemon's default bound (3 MTU, or 150 us of the ceil if more: 4.95 MTU
    // for the root). There the root sent up to 8.4 MTU over its ceil in real
    // time at the far end. The engine's own bound for a class with children
    // is its bound at its ceil + 1 frame (every frame through it waits for K
    // - reach <= G and K falls at most D behind G, D + reach = the bound);
    // a leaf's guaranteed frames do not wait for its own ceil: + 2 frames.
    // Held with a perfect timer and with this machine's (sim/lateness.hpp):
    // the rest of the 8.4 is between the daemon's decision and the capture.
    const uint64_t Mb = 1'000'000, ms = 1'000'000;
    sim::SimConfig cfg = daemon_clockless(300 * ms);
    tree_class(cfg, 400 * Mb, 400 * Mb, kNone, 0);
    for (uint32_t site = 0; site < 4; ++site) {
        const uint32_t p = tree_class(cfg, 80 * Mb, 160 * Mb, 0, 0);
        for (uint32_t i = 0; i < 5; ++i)
            tree_class(cfg, 16 * Mb, 48 * Mb, p, 0, i < 3 ? 60 * Mb : 0);
    }
    const double unit = double(cfg.engine.framing.mtu_unit_bytes());
    for (const sim::LatenessTable *sleep :
         {static_cast<const sim::LatenessTable *>(nullptr), &sim::measured_sleep()}) {
        cfg.wake.sleep = sleep;
        const TreeRun r = run_tree(cfg);
        for (uint32_t k = 0; k < cfg.sources.size(); ++k) {
            const sim::SourceSpec &s = cfg.sources[k];
            const bool inner = std::any_of(cfg.sources.begin(), cfg.sources.end(),
                                           [&](const sim::SourceSpec &c) { return c.parent == k; });
            const double bound =
                std::max(double(kDefaultBurstMtus),
                         double(s.ceil_bps) * double(kDefaultBurstFloorNs) / 8e9 / unit);
            const double burst = burst_at(r, k, s.ceil_bps, uint64_t(unit));
            if (report_wanted() && (k < 3))
                std::printf("%s: class %u burst at its ceil %.2f MTU (bound %.2f)\n",
                            sleep ? "this machine's timer" : "perfect timer", k, burst, bound);
            INFO((sleep ? "this machine's timer" : "perfect timer")
                 << ": class " << k << " burst " << burst << " bound " << bound);
            CHECK(burst <= bound + (inner ? 1.0 : 2.0));
        }
        // The root is the limit: 400 Mbit/s within 0.3 %.
        const double root = rate_in(r, 0, 50 * ms, cfg.max_ns);
        CHECK(std::abs(root - 400e6) <= 3e-3 * 400e6);
    }
}
