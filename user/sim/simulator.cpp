#include "sim/simulator.hpp"

#include "sim/reference_scan.hpp"

#include <deque>
#include <random>
#include <stdexcept>
#include <type_traits>

namespace pspxdp::sim {

namespace {

// One source's queue and arrival process.
struct Source {
    const SourceSpec *spec = nullptr;
    uint32_t cls = 0;
    std::deque<uint32_t> queue; // frame lengths; a greedy source keeps exactly one
    uint64_t next_arrival_ns = UINT64_MAX;
    uint64_t on_until_ns = 0;
    long double arrival_ns = 0; // exact arrival time, carried as a fraction
};

template <class Sched> SimResult run(Sched &sched, const SimConfig &cfg) {
    SimResult res;
    const Framing &f = cfg.engine.framing;
    const uint64_t line_bps = cfg.engine.line_rate_bps;
    std::mt19937_64 rng(cfg.seed);
    auto draw_len = [&](const SourceSpec &s) {
        if (s.min_len >= s.max_len) return s.min_len;
        return uint32_t(std::uniform_int_distribution<uint32_t>(s.min_len, s.max_len)(rng));
    };

    std::vector<Source> src(cfg.sources.size());
    res.sent.assign(src.size(), 0);
    res.drops.assign(src.size(), 0);
    // A tree's classes are added unpaced and given their rates by one
    // configure_tree() (a child's rate does not count against M).
    bool tree = false;
    for (const SourceSpec &s : cfg.sources)
        tree |= s.parent != kTreeNoParent || s.ceil_bps > s.rate_bps;
    for (size_t i = 0; i < src.size(); ++i) {
        const SourceSpec &s = cfg.sources[i];
        auto cls = sched.add_class(tree ? 0 : s.rate_bps);
        if (!cls) throw std::invalid_argument("source " + s.name + ": " + cls.error());
        src[i].spec = &s;
        src[i].cls = *cls;
    }
    if (tree) {
        if constexpr (std::is_same_v<Sched, Engine>) {
            std::vector<TreeSpec> specs;
            for (size_t i = 0; i < src.size(); ++i) {
                const SourceSpec &s = cfg.sources[i];
                if (!s.rate_bps) continue;
                const uint32_t parent =
                    s.parent == kTreeNoParent ? kTreeNoParent : src[s.parent].cls;
                specs.push_back(TreeSpec{src[i].cls, s.rate_bps, parent, s.ceil_bps, s.prio});
            }
            if (auto r = sched.configure_tree(specs); !r.ok())
                throw std::invalid_argument("tree: " + r.error());
        } else {
            throw std::invalid_argument("class trees: the engine only");
        }
    }
    for (size_t i = 0; i < src.size(); ++i) {
        const SourceSpec &s = cfg.sources[i];
        if (s.greedy) {
            src[i].queue.push_back(draw_len(s));
            sched.set_head(src[i].cls, src[i].queue.front());
        } else if (s.offered_bps) {
            src[i].next_arrival_ns = s.start_ns;
            src[i].arrival_ns = s.start_ns;
            src[i].on_until_ns = s.start_ns + s.on_ns;
        }
    }

    // Arrivals up to now, in each source's own order.
    auto deliver = [&](uint64_t now) {
        for (Source &s : src) {
            while (s.next_arrival_ns <= now) {
                uint32_t len = draw_len(*s.spec);
                if (s.spec->queue_limit && s.queue.size() >= s.spec->queue_limit) {
                    ++res.drops[&s - src.data()];
                } else {
                    s.queue.push_back(len);
                    if (s.queue.size() == 1) sched.set_head(s.cls, len);
                }
                s.arrival_ns += (long double)f.l2_bytes(len) * 8e9L / s.spec->offered_bps;
                if (s.arrival_ns >= s.on_until_ns) {
                    uint64_t cycle = s.spec->on_ns + s.spec->off_ns;
                    s.on_until_ns += cycle;
                    s.arrival_ns = s.on_until_ns - s.spec->on_ns;
                }
                s.next_arrival_ns = uint64_t(s.arrival_ns);
            }
        }
    };
    auto next_arrival = [&] {
        uint64_t t = UINT64_MAX;
        for (const Source &s : src) t = std::min(t, s.next_arrival_ns);
        return t;
    };

    // The model daemon's wake-up for a Wait: when it calls next() again.
    // Lateness has its own random stream: frame lengths stay the same
    // whatever the timer model.
    std::mt19937_64 wake_rng(cfg.seed ^ 0x9e3779b97f4a7c15ull);
    const WakeModel &wm = cfg.wake;
    auto late = [&](const LatenessTable *t) { return t ? t->sample(wake_rng) : 0; };
    auto woken = [&](uint64_t now, const Decision &d) -> uint64_t {
        if (d.wake_ns <= now) return now + 1;
        ++res.wakeups;
        if (d.slack_ns >= wm.spin_ns) return d.wake_ns + late(wm.sleep);
        uint64_t t = now;
        if (d.wake_ns - now > wm.spin_ns) t = d.wake_ns - wm.spin_ns + late(wm.sleep);
        if (t >= d.wake_ns) return t; // the sleep overran the spin margin
        res.spin_ns += d.wake_ns - t;
        return d.wake_ns + late(wm.spin);
    };

    uint64_t now = 0;
    long double wire_free_ns = 0; // the model NIC: when its wire is next free
    uint64_t class_frames = 0;
    bool started = false;
    bool woke = true;
    while (class_frames < cfg.max_class_frames && res.decisions < cfg.max_decisions &&
           now <= cfg.max_ns) {
        deliver(now);
        if constexpr (std::is_same_v<Sched, Engine>) {
            // Once per wake-up, before a run of decisions, as the daemon.
            if (wm.batch_bytes && woke && sched.backlogged() && !cfg.engine.clockless) {
                const uint64_t wire = sched.wire_position(now), g = sched.byte_clock();
                const uint64_t ahead = g > wire ? g - wire : 0;
                if (ahead + wm.batch_bytes > cfg.engine.window_bytes) {
                    // Room for a batch: the window's queued wire time covers the lateness.
                    const uint64_t room_ns = (ahead + wm.batch_bytes - cfg.engine.window_bytes) *
                                             8'000'000'000ull / cfg.engine.line_rate_bps;
                    Decision w{Action::Wait, 0, 0, now + std::max<uint64_t>(1, room_ns),
                               UINT64_MAX};
                    now = std::min(woken(now, w), std::max(now + 1, next_arrival()));
                    continue;
                }
            }
        }
        woke = false;
        Decision d = sched.next(now);
        ++res.decisions;
        if (!started && d.action != Action::Idle) {
            started = true;
            res.start_ns = now;
        }
        if (d.action == Action::Wait || d.action == Action::Idle) woke = true;
        if (d.action == Action::Wait) {
            // Traffic arriving wakes the daemon early (its poll sees RX).
            now = std::min(woken(now, d), std::max(now + 1, next_arrival()));
            continue;
        }
        if (d.action == Action::Idle) {
            uint64_t t = next_arrival();
            if (t == UINT64_MAX) break;
            now = std::max(now + 1, t);
            continue;
        }
        ++res.emitted;
        // Clockless: nothing serialises (a veth): a frame leaves when decided.
        long double start =
            cfg.engine.clockless ? (long double)now : std::max(wire_free_ns, (long double)now);
        uint32_t wire = f.wire_bytes(d.len);
        wire_free_ns = start + (long double)wire * 8e9L / line_bps;
        uint32_t flow = kFlowGap;
        if (d.action == Action::Frame) {
            Source &s = src[d.cls]; // class handles are assigned in source order
            flow = d.cls;
            s.queue.pop_front();
            if (s.spec->greedy) s.queue.push_back(draw_len(*s.spec));
            if (s.queue.empty())
                sched.set_empty(s.cls);
            else
                sched.set_head(s.cls, s.queue.front());
            ++res.sent[d.cls];
            ++class_frames;
        }
        if (cfg.record_trace) res.trace.push_back(TraceFrame{flow, d.len, uint64_t(start)});
    }
    res.end_ns = now;
    return res;
}

} // namespace

SimResult simulate(const SimConfig &config, Scheduler scheduler) {
    if (scheduler == Scheduler::ReferenceScan) {
        ReferenceScan sched(config.engine);
        return run(sched, config);
    }
    Engine sched(config.engine);
    SimResult res = run(sched, config);
    res.counters = sched.counters();
    return res;
}

} // namespace pspxdp::sim
