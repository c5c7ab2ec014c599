// Judging a frame trace (docs/design.md §5). See analyzer.hpp.
//
// Everything is computed on integer "ticks" and converted to seconds only at
// the end, so a 10^6-frame trace loses no precision to accumulated rounding:
//   byte clock: a tick is one wire byte time, a rate is bytes * M / ticks;
//   real time:  a tick is one nanosecond,     a rate is bytes * 8e9 / ticks.
// The burstiness queue is kept exactly as well (see FlowState::queue_scaled).
#include "core/analyzer.hpp"

#include "core/units.hpp"

#include <algorithm>
#include <unordered_map>

namespace pspxdp {

namespace {

using u128 = unsigned __int128;

struct WindowEntry {
    uint64_t tick;
    uint64_t l2_bytes;
};

struct FlowState {
    uint32_t flow = 0;
    uint64_t frames = 0;
    uint64_t l2_bytes = 0;
    uint64_t first_tick = 0;
    uint64_t last_tick = 0;
    uint64_t last_l2_bytes = 0;
    // Rate per n packets: the last n frames, as a ring, and their byte sum.
    std::vector<WindowEntry> ring;
    uint64_t ring_bytes = 0;
    uint64_t windows = 0;
    long double rate_n_min = 0, rate_n_max = 0, rate_n_sum = 0;
};

// The burstiness pass needs the flow's mean rate, known only at the end, so
// it runs as a second pass over the frames. A = L / D bytes per tick, with
// L = l2 bytes of all frames but the last and D = last - first tick. The
// queue is kept multiplied by D: it then drains by L * dt and grows by s * D,
// all integers, so a perfectly periodic flow gives exactly one frame.
struct BurstState {
    uint64_t drain_bytes = 0; // L
    uint64_t span_ticks = 0;  // D
    uint64_t prev_tick = 0;
    bool started = false;
    u128 queue_scaled = 0;
    u128 max_scaled = 0;
};

} // namespace

TraceReport analyze_trace(std::span<const TraceFrame> frames, const AnalyzerConfig &config) {
    const Framing &fr = config.framing;
    // Hybrid ticks are byte times too: only where a frame starts differs.
    const bool byte_clock = config.mode != ClockMode::RealTime;
    const bool hybrid = config.mode == ClockMode::Hybrid;
    const uint64_t threshold_bytes =
        bytes_in_ns_floor(config.idle_threshold_ns, config.line_rate_bps);
    const uint64_t n = std::max<uint32_t>(config.rate_window_packets, 1);
    // rate_bps = bytes * rate_k / ticks.
    const long double rate_k = byte_clock ? (long double)config.line_rate_bps : 8e9L;
    const long double seconds_per_tick =
        byte_clock ? (config.line_rate_bps ? 8.0L / (long double)config.line_rate_bps : 0.0L)
                   : 1e-9L;
    auto rate_bps = [&](uint64_t bytes, uint64_t ticks) -> long double {
        if (ticks == 0) return 0;
        return (long double)((u128)bytes) * rate_k / (long double)ticks;
    };

    TraceReport report;
    std::vector<FlowState> flows;
    std::unordered_map<uint32_t, size_t> index;
    std::vector<uint32_t> slot_of_frame(frames.size());
    std::vector<uint64_t> tick_of_frame(frames.size());

    uint64_t wire_clock = 0; // byte clock: where the wire is free (b_i)
    uint64_t real_tick = 0;  // real time, made monotonic
    uint32_t last_flow = 0;
    size_t last_slot = SIZE_MAX;
    for (size_t i = 0; i < frames.size(); ++i) {
        const TraceFrame &f = frames[i];
        // A capture clock that steps backwards (NTP, multi-queue capture)
        // would give negative intervals; treat such a frame as simultaneous
        // with the one before it.
        real_tick = i == 0 ? f.time_ns : std::max(real_tick, f.time_ns);
        uint64_t tick;
        if (hybrid) {
            const uint64_t r =
                bytes_in_ns_floor(real_tick - frames[0].time_ns, config.line_rate_bps);
            if (i > 0 && r > wire_clock + threshold_bytes) { // the wire idled
                ++report.idle_periods;
                report.idle_bytes += r - wire_clock;
                wire_clock = r;
            }
            tick = wire_clock;
        } else {
            tick = byte_clock ? wire_clock : real_tick;
        }
        tick_of_frame[i] = tick;
        uint64_t wire = fr.wire_bytes(f.len);
        wire_clock += wire;
        report.wire_bytes += wire;
        ++report.frames;
        if (f.flow == kFlowGap) {
            ++report.gap_frames;
            report.gap_wire_bytes += wire;
            slot_of_frame[i] = UINT32_MAX;
            continue;
        }

        size_t slot;
        if (last_slot != SIZE_MAX && f.flow == last_flow) {
            slot = last_slot;
        } else {
            auto [it, inserted] = index.try_emplace(f.flow, flows.size());
            if (inserted) {
                flows.emplace_back();
                flows.back().flow = f.flow;
            }
            slot = it->second;
            last_flow = f.flow;
            last_slot = slot;
        }
        slot_of_frame[i] = uint32_t(slot);

        FlowState &s = flows[slot];
        uint64_t size = fr.l2_bytes(f.len);
        if (s.frames == 0) s.first_tick = tick;
        // Rate per n packets, window starting at frame j = this - n: the
        // bytes of frames j..j+n-1 over t(j+n) - t(j).
        if (s.frames >= n) {
            size_t pos = size_t(s.frames % n);
            uint64_t dt = tick - s.ring[pos].tick;
            if (dt > 0) { // only in real-time mode can two frames coincide
                long double r = rate_bps(s.ring_bytes, dt);
                if (s.windows == 0) {
                    s.rate_n_min = s.rate_n_max = r;
                } else {
                    s.rate_n_min = std::min(s.rate_n_min, r);
                    s.rate_n_max = std::max(s.rate_n_max, r);
                }
                s.rate_n_sum += r;
                ++s.windows;
            }
            s.ring_bytes -= s.ring[pos].l2_bytes;
            s.ring[pos] = {tick, size};
        } else {
            s.ring.push_back({tick, size});
        }
        s.ring_bytes += size;

        ++s.frames;
        s.l2_bytes += size;
        s.last_tick = tick;
        s.last_l2_bytes = size;
    }
    if (!frames.empty()) {
        report.duration_s =
            double((long double)(tick_of_frame.back() - tick_of_frame.front()) * seconds_per_tick);
    }
    if (report.wire_bytes) {
        report.gap_share = double(report.gap_wire_bytes) / report.wire_bytes;
        report.gap_time_share =
            double(report.gap_wire_bytes) / double(report.wire_bytes + report.idle_bytes);
    }

    // Second pass: burstiness against each flow's mean rate, and against its
    // target rate where one is given: R bit/s drains R bytes per rate_k ticks
    // (rate_bps = bytes * rate_k / ticks), the same integer form.
    std::vector<BurstState> burst(flows.size()), at_target(flows.size());
    std::vector<uint64_t> target(flows.size(), 0);
    for (size_t k = 0; k < flows.size(); ++k) {
        burst[k].drain_bytes = flows[k].l2_bytes - flows[k].last_l2_bytes;
        burst[k].span_ticks = flows[k].last_tick - flows[k].first_tick;
        for (const auto &[flow, rate] : config.target_rate_bps)
            if (flow == flows[k].flow && rate) target[k] = rate;
        at_target[k].drain_bytes = target[k];
        at_target[k].span_ticks = uint64_t(rate_k);
    }
    auto arrive = [](BurstState &b, uint64_t tick, uint64_t size) {
        if (b.span_ticks == 0) {
            // One frame, or every frame at the same instant: no drain can
            // happen between arrivals, the queue is simply everything.
            b.queue_scaled += size;
        } else {
            if (b.started) {
                u128 drained = (u128)b.drain_bytes * (tick - b.prev_tick);
                b.queue_scaled = b.queue_scaled > drained ? b.queue_scaled - drained : 0;
            }
            b.queue_scaled += (u128)size * b.span_ticks;
        }
        b.started = true;
        b.prev_tick = tick;
        b.max_scaled = std::max(b.max_scaled, b.queue_scaled);
    };
    for (size_t i = 0; i < frames.size(); ++i) {
        uint32_t k = slot_of_frame[i];
        if (k == UINT32_MAX) continue;
        uint64_t size = fr.l2_bytes(frames[i].len);
        arrive(burst[k], tick_of_frame[i], size);
        if (target[k]) arrive(at_target[k], tick_of_frame[i], size);
    }

    report.flows.reserve(flows.size());
    for (size_t k = 0; k < flows.size(); ++k) {
        const FlowState &s = flows[k];
        const BurstState &b = burst[k];
        FlowReport r;
        r.flow = s.flow;
        r.frames = s.frames;
        r.l2_bytes = s.l2_bytes;
        uint64_t span = s.last_tick - s.first_tick;
        r.duration_s = double((long double)span * seconds_per_tick);
        r.mean_rate_bps = double(rate_bps(b.drain_bytes, span));
        if (s.windows) {
            r.rate_n_min_bps = double(s.rate_n_min);
            r.rate_n_max_bps = double(s.rate_n_max);
            r.rate_n_mean_bps = double(s.rate_n_sum / (long double)s.windows);
        }
        long double burst_bytes = b.span_ticks
                                      ? (long double)b.max_scaled / (long double)b.span_ticks
                                      : (long double)b.max_scaled;
        r.max_burst_bytes = double(burst_bytes);
        r.max_burst_mtu = double(burst_bytes / (long double)fr.mtu_unit_bytes());
        if (target[k]) {
            const BurstState &t = at_target[k];
            long double at = (long double)t.max_scaled / (long double)t.span_ticks;
            r.target_bps = target[k];
            r.max_burst_at_target_bytes = double(at);
            r.max_burst_at_target_mtu = double(at / (long double)fr.mtu_unit_bytes());
        }
        report.flows.push_back(r);
    }
    std::sort(report.flows.begin(), report.flows.end(),
              [](const FlowReport &a, const FlowReport &b) { return a.flow < b.flow; });
    return report;
}

} // namespace pspxdp
