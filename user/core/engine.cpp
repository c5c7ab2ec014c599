#include "core/engine.hpp"

#include "core/units.hpp"

#include <cassert>
#include <limits>

namespace pspxdp {

namespace {

constexpr uint32_t kNoPos = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kNsPerSec = 1'000'000'000ull;
using u128 = unsigned __int128;

// Byte times a wire of rate M covers in ns: ns * M / 8e9, exact in 128 bits.
uint64_t bytes_in(uint64_t ns, uint64_t line_rate_bps) {
    return uint64_t(u128(ns) * line_rate_bps / (8 * kNsPerSec));
}

// ns a wire of rate M needs for `bytes` byte times, rounded up.
uint64_t ns_for(uint64_t bytes, uint64_t line_rate_bps) {
    u128 num = u128(bytes) * 8 * kNsPerSec;
    return uint64_t((num + line_rate_bps - 1) / line_rate_bps);
}

} // namespace

// ---------------------------------------------------------------- the heap

void Engine::Heap::place(size_t i, uint32_t id, uint64_t key, std::vector<uint32_t> &pos) {
    keys_[i] = key;
    ids_[i] = id;
    pos[id] = uint32_t(i);
}

void Engine::Heap::sift_up(size_t i, std::vector<uint32_t> &pos) {
    uint64_t key = keys_[i];
    uint32_t id = ids_[i];
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (keys_[parent] <= key) break;
        place(i, ids_[parent], keys_[parent], pos);
        i = parent;
    }
    place(i, id, key, pos);
}

void Engine::Heap::sift_down(size_t i, std::vector<uint32_t> &pos) {
    const size_t n = keys_.size();
    uint64_t key = keys_[i];
    uint32_t id = ids_[i];
    for (;;) {
        size_t first = 4 * i + 1;
        if (first >= n) break;
        size_t last = first + 4 < n ? first + 4 : n;
        size_t best = first;
        for (size_t c = first + 1; c < last; ++c)
            if (keys_[c] < keys_[best]) best = c;
        if (keys_[best] >= key) break;
        place(i, ids_[best], keys_[best], pos);
        i = best;
    }
    place(i, id, key, pos);
}

void Engine::Heap::push(uint32_t id, uint64_t key, std::vector<uint32_t> &pos) {
    keys_.push_back(key);
    ids_.push_back(id);
    sift_up(keys_.size() - 1, pos);
}

void Engine::Heap::pop(std::vector<uint32_t> &pos) { erase(ids_[0], pos); }

void Engine::Heap::erase(uint32_t id, std::vector<uint32_t> &pos) {
    size_t i = pos[id];
    size_t last = keys_.size() - 1;
    pos[id] = kNoPos;
    if (i != last) {
        uint64_t key = keys_[last];
        uint32_t moved = ids_[last];
        keys_.pop_back();
        ids_.pop_back();
        place(i, moved, key, pos);
        sift_up(i, pos);
        sift_down(pos[moved], pos);
    } else {
        keys_.pop_back();
        ids_.pop_back();
    }
}

// ---------------------------------------------------------------- classes

Engine::Engine(const EngineConfig &config) : cfg_(config) {}

bool Engine::has_class(uint32_t cls) const {
    return cls < classes_.size() && classes_[cls].state != State::Free;
}

uint64_t Engine::class_rate(uint32_t cls) const { return classes_[cls].rate_bps; }

const ClassCounters &Engine::class_counters(uint32_t cls) const { return class_counters_[cls]; }

bool Engine::backlogged() const {
    return !pending_.empty() || !eligible_.empty() || normal_count_ > 0;
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

Result<uint32_t> Engine::add_class(uint64_t rate_bps) {
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
        class_counters_.emplace_back();
        pos_pending_.push_back(kNoPos);
        pos_eligible_.push_back(kNoPos);
    }
    Class &c = classes_[cls];
    c = Class{};
    c.rate_bps = rate_bps;
    c.clock = g_;
    c.state = State::Idle;
    if (rate_bps) c.lag_limit = lag_limit_for(rate_bps);
    class_counters_[cls] = ClassCounters{};
    paced_sum_bps_ += rate_bps;
    return cls;
}

void Engine::unlink(uint32_t cls) {
    Class &c = classes_[cls];
    switch (c.where) {
    case Where::Pending: pending_.erase(cls, pos_pending_); break;
    case Where::Eligible: eligible_.erase(cls, pos_eligible_); break;
    case Where::Normal: normal_unlink(cls); break;
    case Where::None: break;
    }
    c.where = Where::None;
}

Result<void> Engine::set_rate(uint32_t cls, uint64_t rate_bps) {
    if (!has_class(cls)) return err("no such class");
    Class &c = classes_[cls];
    uint64_t others = paced_sum_bps_ - c.rate_bps;
    if (rate_bps > cfg_.line_rate_bps - others)
        return err("rate " + format_rate(rate_bps) + " would make the paced rates sum to " +
                   format_rate(others + rate_bps) + ", above the line rate " +
                   format_rate(cfg_.line_rate_bps));
    paced_sum_bps_ = others + rate_bps;
    if (rate_bps && c.rate_bps && c.clock > g_) {
        // The wait left before the next frame was sized for the old rate:
        // rescale it, so a slow class made fast does not sit out its old period.
        c.clock = g_ + uint64_t(u128(c.clock - g_) * c.rate_bps / rate_bps);
    } else if (c.clock < g_) {
        c.clock = g_;
    }
    c.frac = 0; // the remainder's unit was 1/old rate: less than a byte time is dropped
    c.rate_bps = rate_bps;
    c.lag_limit = rate_bps ? lag_limit_for(rate_bps) : 0;
    if (c.state == State::Backlogged) {
        unlink(cls);
        admit(cls);
    }
    return {};
}

Result<void> Engine::remove_class(uint32_t cls) {
    if (!has_class(cls)) return err("no such class");
    Class &c = classes_[cls];
    if (c.state == State::Backlogged || c.state == State::Sent)
        return err("class still has queued frames");
    paced_sum_bps_ -= c.rate_bps;
    c = Class{};
    free_.push_back(cls);
    return {};
}

Result<void> Engine::set_line_rate(uint64_t line_rate_bps) {
    if (line_rate_bps == 0) return err("line rate must be positive");
    if (paced_sum_bps_ > line_rate_bps)
        return err("paced rates sum to " + format_rate(paced_sum_bps_) + ", above the line rate " +
                   format_rate(line_rate_bps));
    cfg_.line_rate_bps = line_rate_bps;
    anchored_ = false; // the wire position restarts at the next decision
    for (uint32_t cls = 0; cls < classes_.size(); ++cls) {
        Class &c = classes_[cls];
        if (c.state == State::Free || !c.rate_bps) continue;
        c.lag_limit = lag_limit_for(c.rate_bps);
        c.frac = 0;
        if (c.state == State::Backlogged) {
            unlink(cls);
            admit(cls);
        }
    }
    return {};
}

// ---------------------------------------------------------------- backlog

void Engine::compute_finish(Class &c) {
    if (g_ > c.lag_limit && c.clock < g_ - c.lag_limit) {
        counters_.lag_clamped_bytes += g_ - c.lag_limit - c.clock;
        c.clock = g_ - c.lag_limit;
        c.frac = 0;
    }
    u128 num = u128(cfg_.framing.l2_bytes(c.head_len)) * cfg_.line_rate_bps + c.frac;
    c.finish = c.clock + uint64_t(num / c.rate_bps);
}

void Engine::admit(uint32_t cls) {
    Class &c = classes_[cls];
    if (!c.rate_bps) {
        normal_push(cls);
        return;
    }
    compute_finish(c);
    if (c.clock <= g_) {
        eligible_.push(cls, c.finish, pos_eligible_);
        c.where = Where::Eligible;
    } else {
        pending_.push(cls, c.clock, pos_pending_);
        c.where = Where::Pending;
    }
}

void Engine::set_head(uint32_t cls, uint32_t len) {
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
    case State::Backlogged: unlink(cls); break; // the head changed under us
    case State::Free: return;
    }
    c.state = State::Backlogged;
    c.head_len = len;
    admit(cls);
}

void Engine::set_empty(uint32_t cls) {
    assert(has_class(cls));
    Class &c = classes_[cls];
    if (c.state == State::Sent) --awaiting_head_;
    if (c.state == State::Backlogged) unlink(cls);
    if (c.state != State::Free) c.state = State::Idle;
}

void Engine::normal_push(uint32_t cls) {
    Class &c = classes_[cls];
    c.next_normal = kNone;
    c.prev_normal = normal_tail_;
    if (normal_tail_ != kNone)
        classes_[normal_tail_].next_normal = cls;
    else
        normal_head_ = cls;
    normal_tail_ = cls;
    c.where = Where::Normal;
    ++normal_count_;
}

void Engine::normal_unlink(uint32_t cls) {
    Class &c = classes_[cls];
    if (c.prev_normal != kNone)
        classes_[c.prev_normal].next_normal = c.next_normal;
    else
        normal_head_ = c.next_normal;
    if (c.next_normal != kNone)
        classes_[c.next_normal].prev_normal = c.prev_normal;
    else
        normal_tail_ = c.prev_normal;
    c.where = Where::None;
    --normal_count_;
}

// ---------------------------------------------------------------- decisions

uint64_t Engine::wire_position(uint64_t now_ns) const {
    if (!anchored_ || now_ns <= anchor_ns_) return anchored_ ? anchor_g_ : g_;
    return anchor_g_ + bytes_in(now_ns - anchor_ns_, cfg_.line_rate_bps);
}

Decision Engine::next(uint64_t now_ns) {
    if (!backlogged()) {
        idle_ = true;
        return Decision{Action::Idle, 0, 0, 0};
    }
    if (!anchored_) {
        anchored_ = true;
        anchor_ns_ = now_ns;
        anchor_g_ = g_;
    } else {
        uint64_t wire = wire_position(now_ns);
        if (wire > g_) {
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
            anchor_ns_ = now_ns;
            anchor_g_ = g_;
        } else if (g_ - wire >= cfg_.window_bytes) {
            uint64_t target = g_ - cfg_.window_bytes + 1 - anchor_g_;
            return Decision{Action::Wait, 0, 0, anchor_ns_ + ns_for(target, cfg_.line_rate_bps)};
        }
    }
    idle_ = false;

    while (!pending_.empty() && pending_.top_key() <= g_) {
        uint32_t cls = pending_.top();
        pending_.pop(pos_pending_);
        eligible_.push(cls, classes_[cls].finish, pos_eligible_);
        classes_[cls].where = Where::Eligible;
    }
    if (!eligible_.empty()) {
        uint32_t cls = eligible_.top();
        eligible_.pop(pos_eligible_);
        Class &c = classes_[cls];
        if (c.fresh && c.clock < g_) {
            // A class back from idle owes nothing: if other classes' frames
            // delayed its first one, its schedule starts when that frame
            // leaves instead of catching up with a burst.
            c.clock = g_;
            c.frac = 0;
        }
        c.fresh = false;
        u128 num = u128(cfg_.framing.l2_bytes(c.head_len)) * cfg_.line_rate_bps + c.frac;
        c.clock += uint64_t(num / c.rate_bps);
        c.frac = uint64_t(num % c.rate_bps);
        return emit_frame(cls);
    }
    if (normal_count_) {
        uint32_t cls = normal_head_;
        normal_unlink(cls);
        return emit_frame(cls);
    }
    return emit_gap();
}

Decision Engine::emit_frame(uint32_t cls) {
    Class &c = classes_[cls];
    uint32_t wire = cfg_.framing.wire_bytes(c.head_len);
    g_ += wire;
    ++counters_.frames;
    counters_.frame_wire_bytes += wire;
    ClassCounters &cc = class_counters_[cls];
    ++cc.frames;
    cc.l2_bytes += cfg_.framing.l2_bytes(c.head_len);
    c.state = State::Sent;
    c.where = Where::None;
    ++awaiting_head_;
    return Decision{Action::Frame, cls, c.head_len, 0};
}

// A gap that reaches the earliest pending class clock. Pieces are never
// shorter than the smallest gap frame nor longer than the largest; a target
// closer than the smallest gap is overshot by less than one smallest gap,
// which the late class absorbs (its clock does not move with G).
Decision Engine::emit_gap() {
    const uint64_t min_wire = cfg_.framing.min_gap_wire_bytes();
    const uint64_t max_wire = cfg_.framing.max_gap_wire_bytes();
    uint64_t need = pending_.top_key() - g_;
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
