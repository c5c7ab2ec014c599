// The pacing engine: PSPacer's scheduler (paper §3.4, docs/design.md §3-§4) over a
// byte clock, in O(1) per decision for the usual class (O(log n) at worst).
//
// The engine does not hold frames. The caller owns the per-class queues and
// tells the engine the length of each class's head-of-line frame; the engine
// answers, one decision at a time, what goes on the wire next: a class's head
// frame, a PAUSE gap frame of a given length, "wait until" (the schedule is a
// window ahead of the wire, or the wire is to idle until a due time: gap
// horizon, clockless mode) or "idle" (nothing is backlogged).
//
// Protocol:
//   set_head(c, len)  class c's queue has a head frame of len bytes: after it
//                     became non-empty, and after every Frame decision for c
//                     that left frames behind.
//   set_empty(c)      class c's queue is empty (after a Frame decision that
//                     took its last frame). The class stops banking credit.
//   Both take the caller's time (optional): with it the engine counts, per
//   paced class, how long its queue sat empty after its schedule let it send
//   the next frame (ClassCounters::empty_ns, empty_events; see there).
//   next(now_ns)      the next decision. After a Frame decision the engine has
//                     already accounted the frame; the caller pops it and must
//                     call set_head or set_empty for that class before the
//                     next call to next(). After a Wait, call next() again
//                     at wake_ns, no more than slack_ns later if precision
//                     matters (earlier is harmless: it waits again).
//
// Scheduling. G is the byte clock: wire byte times of everything emitted.
// A paced class k of rate r_k has a clock C_k: the byte-clock time at which
// it may start its next frame. Sending a frame of L2 size s advances C_k by
// s * M / r_k exactly (the remainder is carried, so the long-run rate has no
// truncation bias). Each decision:
//   (a) among paced classes with C_k <= G (eligible), the one whose frame
//       would finish first in its own fluid schedule, F_k = C_k + s*M/r_k.
//       This is WF2Q+'s rule: a frame then starts no later than
//       F_k + one max frame - its own wire time, which bounds every class's
//       burstiness by 2 MTU whenever the paced load fits on the wire;
//   (b) else a backlogged normal class, round robin: the free filler, as
//       long as its frame delays the earliest pending paced class by no more
//       than normal_block_bytes. A greedy filler would otherwise block a
//       paced class for up to one full frame at random moments, and that
//       jitter is what a burstiness measurement sees. A frame that does not
//       fit waits for a hole that it does (gaps fill the one at hand);
//   (c) else a gap frame that reaches min C_k. A gap longer than the largest
//       gap frame is split so that no piece is shorter than the smallest; a
//       gap shorter than the smallest gap frame (84 byte times on Ethernet)
//       is sent as the smallest and overshoots by less than 84. The class is
//       then late by that much and catches up on its own because its clock
//       advances by its period, not from G: no banked burst, no rate loss.
//
// Data structures (why: each frame moves its class pending -> eligible ->
// sent -> pending again, so that round trip is the whole per-decision cost):
//   pending  (C_k > G): ClassWheel, exact keys, O(1) insert/remove/hand-over
//            (class_wheel.hpp); classes slower than its 2^28-byte-time mid
//            horizon wait in a heap first (O(log n)).
//   eligible (C_k <= G): one class in solo_, the rest in a 4-ary heap by
//            (F_k, class index): ties go to the lower index, by definition.
//   normal:  an intrusive round-robin list.
// F_k's division by r_k is a multiplication by a per-class reciprocal with
// one exact correction. A class's per-frame state is one cache line.
// tests/unit/test_engine_internals.cpp checks all of it decision by decision
// against a plain-scan model.
//
// Real time. The wire position is anchor_G + (now - anchor_ns) * M / 8. The
// engine never runs more than window_bytes ahead of it (Wait). When the wire
// position is past G the wire has idled (nothing was backlogged, or the
// caller stalled): the anchor moves to (now, G). Idle time is thereby cut out
// of the byte clock instead of being paid back as a burst; it is counted.
//
// Gap horizon H (docs/design.md §4.5). The paper fills every idle byte with gap frames
// while a paced class is backlogged: at 20 Mbit/s on 1 Gbit/s that is 98 %
// of the wire in PAUSE frames and a decision per 1538 byte times. Byte-exact
// gaps buy something only close to a due time. So, in (c), when the earliest
// backlogged paced class is due more than H past G (C_min - G > H; G is at
// or ahead of the wire), the engine emits nothing: it returns Wait until the
// wire reaches C_min - H (slack_ns = H) and the wire idles. This is a
// planned idle: on the next call the wire's real-time position W is past G
// and G moves up to W (the idle counts as wire time, it is not cut out), so
// the gaps that follow are C_min - W long: a wake-up up to H late is
// absorbed by a shorter gap and the frame still starts at C_min exactly (on
// the wire's real-time anchor). A wake-up later than that finds W > C_min:
// the class is late by W - C_min, counted (late_wakeups, late_bytes), and
// catches up like any late class (its clock advances by its period, not
// from G), by one frame's period at most (relag()): the excess is dropped,
// so a late wake-up costs at most one more frame of burst, and the rate
// only when it is later than a period. That, and only that, costs
// precision. Normal classes still fill holes, and within H everything is as
// in the paper (same gaps, same window): a class whose period is shorter
// than H never sees a difference.
//
// Clockless mode (veth, virtio, VM NICs: nothing serialises, PAUSE frames
// pace nothing). No gap frames at all; G is the wire's real-time position
// and every paced class is a token bucket of its rate r_k and its burst
// bound B_k in front of its exact fluid schedule (size_class() in
// engine.cpp): a frame leaves when the class's bucket holds it, so in real
// time the class never sends more than B_k beyond r_k over any interval
// (its burstiness at its rate is at most B_k), and a class backlogged all
// along stays some way ahead of its schedule. A late wake-up eats into that
// lead and is caught up at once, within B_k; only lateness beyond it (the
// bucket would overflow) is given up, counted per class (late_lost_bytes).
// The byte accounting is exact, so the long-run rate is r_k whenever no
// wake-up is later than the bound absorbs. The frames a bucket holds leave
// together (one pass, one sendto()): the engine plans a class's wake-up
// at least clockless_slack_ns before it would overflow, so a bound of n
// largest frames wakes about once per n - 1 frames or fewer, and as early
// as that batch allows (up to a period more than the slack: the lateness a
// wake-up may have at no cost); Decision::slack_ns says how late the
// caller may come (0 with a bound of one frame: spin).
// Normal frames take what the paced ones leave of M: one leaves when the
// wire's line-rate model (vwire_) has room. A bound of one largest frame is
// the old no-early-release rule: nothing before its due time, no catch-up.
#pragma once

#include "core/class_heap.hpp"
#include "core/class_wheel.hpp"
#include "core/framing.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace pspxdp {

inline constexpr uint64_t kDefaultNormalBlockBytes = 1024;
// No gap horizon: the paper's rule, gap frames however far the next due time.
inline constexpr uint64_t kGapHorizonInf = UINT64_MAX;
// The gap horizon a pacer should use on a host like this project's VM, from
// bench_timers: clock_nanosleep wakes 15 us late at the median, 36 us at
// p95, 66 us at p99. 50 us absorbs ~97 % of wake-ups; a later one costs one
// frame of burst at most (2 MTU), and the rate only when it is later than
// a period. It keeps a 20 Mbit/s class's PAUSE frames to ~5 % of a 1 Gbit/s
// wire (98 % with the paper's rule) and leaves every class whose period is
// shorter, 250 Mbit/s and up in full frames on 1 GbE, exactly as the paper.
// EngineConfig's default stays the paper's rule: the daemon opts in.
inline constexpr uint64_t kDefaultGapHorizonNs = 50'000;

// Clockless, the burst bound a class gets when neither it nor the attachment
// sets one (`class ... burst`, `attach --burst`), in largest frames: half
// the wake-ups of one frame each below ~240 Mbit/s for one frame more of
// burst. Not chosen by the 0.1 % rate criterion: on this project's shared
// VM no bound of 2, 3, 4 or 8 MTU met it at 10-500 Mbit/s (docs/design.md
// §4.5: 3 MTU held 10 Mbit/s, lost 0.24 % at 100 and 5 % at 500).
inline constexpr uint64_t kDefaultBurstMtus = 3;
// Clockless, wake-up batching: the daemon's default bound (no `class ...
// burst`, no `attach --burst`) is at least what the class sends in this
// long: 3 MTU up to 243 Mbit/s, 6.2 at 500, 12.4 at 1 Gbit/s. A wake-up then
// releases several frames at high rates, not one per 24 us at 500 Mbit/s:
// on a 2-core host those wake-ups took the daemon to its reservation and a
// local receiver of the class got 85 % of it; batched, 92 %, as with tbf
// (docs/results/2026-11-28-good-neighbour). EngineConfig's default is 0
// (no floor): the daemon opts in.
inline constexpr uint64_t kDefaultBurstFloorNs = 150'000;
// Clockless, the least lateness a wake-up may have at no cost in rate: the
// engine plans a class's wake-up at least this long before the class would
// exceed its burst bound (less when the bound leaves less room; more, up to
// a period, when that releases as many frames a wake-up: size_class()).
// 50 us absorbs ~97 % of this VM's timer wake-ups (bench_timers), as the
// gap horizon does.
inline constexpr uint64_t kDefaultClocklessSlackNs = 50'000;

struct EngineConfig {
    // M. At most kMaxLineRateBps, so a frame's share s * M fits in 64 bits.
    uint64_t line_rate_bps = 1'000'000'000;
    Framing framing{};
    // How far (byte times) the schedule may run ahead of the wire's real-time
    // position. On a NIC: about the TX ring's depth. On a veth: the only pace.
    uint64_t window_bytes = 64 * 1024;
    // How long (byte times) a normal frame may hold back a paced class that
    // becomes due while it is on the wire. UINT64_MAX: never hold a normal
    // frame back (the paper's rule). The default, two thirds of a largest
    // frame, lets a greedy filler of full frames use every hole of 514 byte
    // times or more and cuts the worst blocking a paced class sees by a third.
    uint64_t normal_block_bytes = kDefaultNormalBlockBytes;
    // A normal class held back this long (byte times) goes anyway: when the
    // paced load leaves only holes smaller than its frames, the filler must
    // not starve. 4 largest frames: at most one full block per 4 frames.
    uint64_t normal_starve_bytes = 4 * (1514 + 24);
    // Gap horizon H, ns (see above). kGapHorizonInf: the paper's rule.
    uint64_t gap_horizon_ns = kGapHorizonInf;
    // No gap frames, every frame released at its real-time start (see above).
    // window_bytes and gap_horizon_ns are then ignored.
    bool clockless = false;
    // Clockless only: the burst bound of a class that sets none (L2 bytes;
    // 0: kDefaultBurstMtus largest frames), and how long before a class
    // would exceed its bound its wake-up is planned (see above).
    uint64_t burst_bytes = 0;
    // Clockless: a class without a bound of its own gets at least what it
    // sends in this long (kDefaultBurstFloorNs); 0: burst_bytes as it is.
    uint64_t burst_floor_ns = 0;
    uint64_t clockless_slack_ns = kDefaultClocklessSlackNs;
};

// 2^47 bit/s (140 Tbit/s): keeps l2_bytes * M + remainder below 2^64 on
// the per-frame path, which then needs no 128-bit division.
inline constexpr uint64_t kMaxLineRateBps = uint64_t(1) << 47;

enum class Action : uint8_t {
    Frame, // send class `cls`'s head frame (len bytes)
    Gap,   // send a PAUSE gap frame of len bytes
    Wait,  // nothing may be emitted before wake_ns
    Idle,  // nothing is backlogged
};

struct Decision {
    Action action = Action::Idle;
    uint32_t cls = 0;
    uint32_t len = 0;
    uint64_t wake_ns = 0;
    // Wait only: how long after wake_ns the caller may call next() at no cost
    // in precision. 0: a paced frame is due at wake_ns (clockless): be on
    // time. H after a gap-horizon Wait (the gaps absorb that much lateness);
    // the queued wire time after a window Wait; UINT64_MAX when no paced
    // frame waits (only normal traffic: lateness costs it throughput only).
    uint64_t slack_ns = 0;
};

struct EngineCounters {
    uint64_t frames = 0; // class frames emitted
    uint64_t frame_wire_bytes = 0;
    uint64_t gap_frames = 0;
    uint64_t gap_wire_bytes = 0;
    uint64_t gap_overshoot_bytes = 0; // byte times a minimum gap went past its target
    uint64_t idle_resyncs = 0;        // wire idled with nothing backlogged
    uint64_t idle_bytes = 0;
    uint64_t underrun_resyncs = 0; // wire idled although something was backlogged
    uint64_t underrun_bytes = 0;
    uint64_t lag_clamped_bytes = 0; // lateness dropped from overloaded classes
    uint64_t normal_held = 0;       // gaps sent because a normal frame would block a paced one
    uint64_t normal_forced = 0;     // normal frames sent anyway, after normal_starve_bytes held
    // Planned idles (gap horizon, clockless): the wire idled instead of
    // carrying gap frames, and resumed with G at the wire's position.
    uint64_t planned_idles = 0;
    uint64_t planned_idle_bytes = 0;
    uint64_t late_wakeups = 0; // resumed after the earliest paced due time
    uint64_t late_bytes = 0;   // ... by this much in all (byte times)
    uint64_t late_max_bytes = 0;
    uint64_t late_lost_bytes = 0; // clockless: every class's late_lost_bytes
};

struct ClassCounters {
    uint64_t frames = 0;
    uint64_t l2_bytes = 0;
    // Clockless: wire time (byte times at the line rate) the class gave up
    // because it was later than its burst bound lets it catch up.
    uint64_t late_lost_bytes = 0;
    // Paced classes, when the caller gives set_empty/set_head its time: how
    // long the queue sat empty while the class's schedule would have let it
    // send (ns), and how many such stretches ended with a frame arriving. A
    // stretch runs from max(the class went empty, its next frame's start
    // C_k on the wire in real time; clockless: C_k of its fluid schedule) to
    // the arrival: empty time up to C_k is the rate's own pause, not lost.
    // Time a frame waits upstream of the caller (the daemon's socket rings
    // during a planned idle) counts as empty: the engine cannot see it.
    uint64_t empty_ns = 0;
    uint64_t empty_events = 0;
    // Class trees (docs/design.md §3.12). An inner class counts the frames
    // and L2 bytes of its subtree above. L2 bytes a class lent from its rate
    // to a borrower below it, and that a class (inner or leaf) took beyond
    // its rate from a lender above it (or from the wire).
    uint64_t lent_bytes = 0;
    uint64_t borrowed_bytes = 0;
};

// set_head/set_empty without the caller's time: no empty-time accounting.
inline constexpr uint64_t kNoTime = UINT64_MAX;

// Where a class sits in a tree (docs/design.md §3.12); see configure_tree().
struct TreeSpec {
    uint32_t cls = 0;
    uint64_t rate_bps = 0;
    uint32_t parent = UINT32_MAX; // a class handle; UINT32_MAX: the wire (top level)
    uint64_t ceil_bps = 0;        // 0: the rate
    uint32_t prio = 0;            // lower borrows first
};

inline constexpr uint32_t kTreeNoParent = UINT32_MAX;
inline constexpr uint32_t kMaxTreeDepth = 8; // htb's

class Engine {
  public:
    explicit Engine(const EngineConfig &config);

    // rate_bps 0 makes a normal (gap-filling, unpaced) class. Refused when the
    // paced rates would sum above the line rate. Returns the class handle:
    // small, dense, reused after remove_class.
    // burst_bytes: the class's burst bound (clockless; 0: the engine's
    // default, EngineConfig::burst_bytes); a bound below one largest frame
    // is taken as one largest frame.
    Result<uint32_t> add_class(uint64_t rate_bps, uint64_t burst_bytes = 0);
    // Takes effect from the class's next frame; its queue is untouched.
    Result<void> set_rate(uint32_t cls, uint64_t rate_bps);
    // As add_class's; takes effect at once (the class's schedule keeps its
    // fluid position, only how far ahead of it the class may go changes).
    Result<void> set_burst(uint32_t cls, uint64_t burst_bytes);
    // The bound in force for a class (L2 bytes), its default resolved.
    uint64_t class_burst(uint32_t cls) const;
    uint64_t class_burst_at(uint32_t cls, uint64_t rate_bps) const;
    // Refused while the class is backlogged: nothing queued is lost silently.
    Result<void> remove_class(uint32_t cls);
    Result<void> set_line_rate(uint64_t line_rate_bps);
    void set_gap_horizon_ns(uint64_t horizon_ns);
    void set_clockless(bool clockless);

    void set_head(uint32_t cls, uint32_t len, uint64_t now_ns = kNoTime);
    void set_empty(uint32_t cls, uint64_t now_ns = kNoTime);

    // Class trees (docs/design.md §3.12). Sets rate, parent, ceil and prio
    // of the listed classes at once (others keep theirs) and checks the
    // whole result: parents exist and are paced, no cycle, depth at most
    // kMaxTreeDepth, ceil >= rate, a child's ceil <= its parent's, the
    // children's rates sum to at most their parent's, the top-level rates
    // to at most M, no class with children has frames. Refused as a whole,
    // nothing changed. Rate changes take effect as set_rate's do. The tree's
    // rules are in force while some class has a parent or a ceil above its
    // rate; otherwise the engine is the flat one, decision for decision.
    Result<void> configure_tree(const std::vector<TreeSpec> &specs);
    bool tree() const { return tree_; }
    uint32_t class_parent(uint32_t cls) const;
    uint64_t class_ceil(uint32_t cls) const;
    uint32_t class_prio(uint32_t cls) const;
    uint32_t class_children(uint32_t cls) const;

    Decision next(uint64_t now_ns);
    // Right after next() returned a largest gap: how many more largest gaps
    // the next calls at the same now_ns would return in a row (nothing comes
    // due, no unpaced frame waits, the window has room), at most max_n,
    // taken as if they had been (G and the counters move past them). Flat
    // out, 9 decisions in 10 are such gaps: one call instead of one next()
    // each. The state afterwards is next()'s, which a test holds it to.
    uint32_t more_gaps(uint32_t max_n);
    // Clockless: the frame next() last returned may have left as late as
    // now_ns (the caller was held up between deciding and sending it: 3 us
    // is usual, a preemption makes it 100). Counted as a late wake-up; the
    // schedule does not move: the class catches the delay up within its
    // burst bound, as after any late wake-up. Nothing in byte-clock mode
    // (the NIC serialises).
    void late_release(uint64_t now_ns);

    uint64_t byte_clock() const { return g_; }
    uint64_t wire_position(uint64_t now_ns) const;
    bool backlogged() const { return backlogged_ > 0; }
    bool has_class(uint32_t cls) const;
    uint64_t class_rate(uint32_t cls) const;
    uint64_t paced_rate_sum() const { return paced_sum_bps_; }
    const EngineConfig &config() const { return cfg_; }
    // Bumped by every call but next() that can change what next() decides
    // (heads, classes, rates, modes): a caller that got a Wait need not ask
    // again before wake_ns while this stands still (each ask during a planned
    // idle would resume and re-plan it, and count it again).
    uint64_t inputs() const { return inputs_; }
    const EngineCounters &counters() const { return counters_; }
    const ClassCounters &class_counters(uint32_t cls) const;

  private:
    static constexpr uint32_t kNone = 0xffffffffu;

  public:
    // Where G starts in clockless mode (byte times): above any D_k.
    static constexpr uint64_t kClocklessStartG = uint64_t(1) << 32;

  private:
    enum class State : uint8_t { Free, Idle, Backlogged, Sent };
    enum class Where : uint8_t { None, Pending, Eligible, Normal };

    // What every decision touches, in one cache line: at 100k classes each
    // class's line is a likely cache miss, so a frame must cost one line.
    struct alignas(64) Class {
        uint64_t clock = 0; // C_k, byte times
        // Remainder carried with C_k, in 1/rate_bps of a byte time. From
        // compute_finish() on, while the class is backlogged, it holds the
        // remainder of F_k instead (the one C_k takes when the frame is sent).
        uint64_t frac = 0;
        uint64_t finish = 0;   // F_k of the head frame: C_k after it is sent
        uint64_t rate_bps = 0; // 0: normal
        uint64_t inv_rate = 0; // floor((2^64 - 1) / rate_bps): division by multiplication
        uint32_t head_len = 0;
        uint32_t next = kNone; // pending-wheel bucket, or the round robin of normal classes
        uint32_t prev = kNone;
        uint32_t gen = 0; // live eligible-heap entry generation
        State state = State::Free;
        Where where = Where::None;
        bool fresh = false; // first frame after idle: its schedule starts when it leaves
    };
    static_assert(sizeof(Class) == 64, "one cache line per class");

    // Read off the per-frame path.
    struct ClassCold {
        // Lateness beyond which the class is overloaded (byte clock), or
        // (clockless) beyond which it exceeds its burst bound: D_k below.
        uint64_t lag_limit = 0;
        uint64_t burst_bytes = 0; // as set: 0 is the engine's default
        // Clockless: a frame is released once its F_k is within reach_ of
        // the wire's position (F_k - reach <= W, see engine.cpp).
        uint64_t reach = 0;
        // Empty since (real time, ns): max(when it went empty, when its next
        // frame could have started); kNoTime: not empty, or not timed.
        uint64_t empty_from_ns = kNoTime;
        ClassCounters counters;
    };

    // The per-frame path, inlined into next() and set_head() (engine.cpp).
    [[gnu::always_inline]] inline void compute_finish(uint32_t cls);
    [[gnu::always_inline]] inline void admit(uint32_t cls);
    [[gnu::always_inline]] inline void make_eligible(uint32_t cls);
    [[gnu::always_inline]] inline Decision emit_frame(uint32_t cls);
    void restore_frac(Class &c);
    // A Wait, or kGoOnDeciding: the clock was resynced and next() decides
    // on (a Decision never carries that to a caller).
    [[gnu::noinline]] std::optional<Decision> resync_or_wait(uint64_t now_ns);
    [[gnu::noinline]] uint32_t pick_eligible();
    Decision send_due(uint32_t cls);
    [[gnu::noinline]] void restart_fresh(uint32_t cls);
    [[gnu::noinline]] void relag(uint32_t cls);
    void drop_late(uint32_t cls, uint64_t floor);
    void resize_classes();
    void size_class(uint32_t cls);
    struct BoundSplit {
        uint64_t lag, reach;
    };
    BoundSplit clockless_split(uint64_t burst_bytes, uint64_t rate_bps, bool keep_half) const;
    uint64_t burst_for(uint64_t set_bytes, uint64_t rate_bps) const;
    uint64_t order_key(uint32_t cls) const;
    uint64_t clock_floor(uint32_t cls) const;
    Decision clockless_unpaced();
    [[gnu::noinline]] Decision next_unpaced();
    void anchor(uint64_t now_ns);
    void resume(uint64_t now_ns);
    Decision plan_wait(uint64_t target, uint64_t due, bool planned);
    uint64_t time_of(uint64_t g) const;
    uint64_t real_time_of(uint64_t g) const;
    void update_horizon();
    Decision emit_gap();
    void unlink(uint32_t cls);
    void normal_push(uint32_t cls);
    void normal_unlink(uint32_t cls);
    uint64_t lag_limit_for(uint64_t rate_bps) const;
    void set_class_rate(Class &c, uint64_t rate_bps);
    void apply_rate(uint32_t cls, uint64_t rate_bps);

    // ---- class trees (engine_tree.cpp; docs/design.md §3.12)
    using u128 = unsigned __int128;
    struct TreeEntry {
        u128 key;
        uint32_t prio;
        uint32_t node;
        uint32_t gen;
    };
    // A lazy min-heap of (prio, key, node); an entry is live while its
    // node's generation and placement match (see TreeNode::gen).
    struct TreeHeap {
        std::vector<TreeEntry> v;
    };
    // place: in the parent's borrowing heaps (pend, or green and yellow);
    // dplace: in its guarantee heaps (dpend, or due).
    enum : uint8_t {
        kPlaceNone = 0,
        kPlacePending = 1,
        kPlaceEligible = 2,
        kPlaceDuePending = 3,
        kPlaceDue = 4
    };
    struct TreeNode {
        uint32_t parent = kNone;
        uint32_t nchildren = 0;
        uint32_t prio = 0;
        uint32_t gen = 0; // bumped whenever the node leaves its parent's heaps
        uint8_t place = kPlaceNone;
        uint8_t dplace = kPlaceNone;
        bool active = false; // a backlogged leaf below (V joins the share clock on activation)
        uint32_t n_pend = 0; // children placed pending / eligible
        uint32_t n_elig = 0;
        uint32_t n_dpend = 0; // children with a due leaf below, held by a ceil / not
        uint32_t n_due = 0;
        uint64_t ceil_bps = 0;
        uint64_t lag_r = 0, lag_k = 0; // lag limits at the rate and at the ceil
        uint64_t reach_k = 0; // clockless: how far ahead of G K may be and let a frame through
        uint64_t reach_b = 0; // ... a borrowed frame: a largest frame less (tree_size_node())
        uint64_t kclock = 0, kfrac = 0; // K, the ceil clock
        uint64_t rclock = 0, rfrac = 0; // R, the rate clock (a leaf's due clock is Class::clock)
        u128 vtag = 0;                  // V, the share tag
        uint64_t vfrac = 0;
        u128 vsys = 0; // the share clock of this node's children
        TreeHeap pend, green, yellow;
        TreeHeap dpend, due; // children with a due leaf below: by T_due; by (R or F_l, index)
    };
    struct TreeStep {
        uint32_t node;
        bool green;
    };
    TreeNode &tnode(uint32_t k) { return k == kNone ? troot_ : tnodes_[k]; }
    void tree_init_node(uint32_t cls);
    uint64_t tree_lag(uint32_t cls, uint64_t rate_bps) const;
    void tree_size_node(uint32_t cls);
    void tree_size_batch();
    uint64_t tree_open(const TreeNode &n) const;
    uint64_t tree_open_borrow(const TreeNode &n) const;
    bool tree_making(uint32_t k) const;
    void tree_update_mode();
    void tree_off();
    void tree_rebuild();
    void tree_refresh(uint32_t k);
    void tree_refresh_path(uint32_t k);
    bool tree_entry_live(const TreeEntry &e, uint8_t place) const;
    void tree_clean(TreeHeap &h, uint8_t place);
    void tree_push(TreeNode &p, TreeHeap &h, const TreeEntry &e);
    uint32_t tree_pop_reached(TreeHeap &h, uint8_t place);
    void tree_hand_over(TreeNode &n);
    void tree_due_hand_over(TreeNode &n);
    bool tree_leaf_due(uint32_t k) const;
    u128 tree_due_key(uint32_t k) const;
    uint64_t tree_due();
    uint64_t tree_due_borrow();
    uint64_t tree_due_guaranteed();
    uint32_t tree_pick_due();
    uint32_t tree_borrow();
    void tree_charge(uint64_t &clock, uint64_t &frac, uint64_t rate_bps, uint64_t l2) const;
    void tree_charge_share(TreeNode &n, uint64_t rate_bps, uint64_t l2) const;
    void tree_charge_guaranteed(uint32_t leaf);
    void tree_charge_borrowed(uint32_t leaf);
    void tree_rescale(uint64_t &clock, uint64_t &frac, uint64_t old_bps, uint64_t new_bps) const;

    EngineConfig cfg_;
    uint64_t g_ = 0;
    bool anchored_ = false;
    uint64_t anchor_ns_ = 0;
    uint64_t anchor_g_ = 0;
    bool idle_ = true;
    // The last Wait let the wire idle by plan (gap horizon, clockless): when
    // the wire is past G, G moves up to it instead of the anchor moving.
    bool planned_ = false;
    uint64_t due_g_ = UINT64_MAX;         // the earliest paced due time then
    uint64_t jump_to_ = 0;                // the wire position of the last late resume
    uint32_t last_cls_ = kNone;           // the last frame emitted: its class
    uint64_t last_g_ = 0;                 // and G when it was decided
    uint64_t horizon_bytes_ = UINT64_MAX; // H at the line rate; 0 when clockless
    uint64_t ahead_limit_ = 0;            // window_bytes; unbounded when clockless
    uint64_t paced_sum_bps_ = 0;
    // Clockless: where the wire's line-rate model is after the frames
    // released so far (G stays at the real-time position: paced frames
    // leave at once); a normal frame waits until the wire reaches it.
    uint64_t vwire_ = 0;
    // Clockless, a class tree's batch (docs/design.md §3.12): how much later
    // than a ceil opens the daemon wakes (the least reach of a ceil clock),
    // and how far the line-rate model may run ahead of G for borrowed frames
    // (the reach of the default bound at M).
    uint64_t tree_batch_bytes_ = 0, wire_reach_bytes_ = 0;
    // Clockless: the smallest D_k of the paced classes (only lowered
    // between full recomputations): the slack of a paced Wait.
    uint64_t min_slack_bytes_ = UINT64_MAX;
    uint32_t awaiting_head_ = 0; // classes in State::Sent
    std::vector<Class> classes_;
    std::vector<ClassCold> cold_;
    std::vector<uint32_t> free_;
    ClassWheel<Class> pending_; // paced, backlogged, C_k > G; keyed by C_k exactly
    // Paced, backlogged, C_k <= G, by (F_k, class): at most one class in
    // solo_ (the common case under load: a class or two eligible at a time,
    // no heap traffic), the others in the heap.
    uint32_t solo_ = kNone;
    ClassHeap eligible_;
    uint32_t stale_eligible_ = 0;
    uint32_t backlogged_ = 0; // classes in State::Backlogged
    uint64_t cached_now_ns_ = UINT64_MAX;
    uint64_t cached_wire_ = 0;
    uint32_t normal_head_ = kNone;
    uint32_t normal_tail_ = kNone;
    uint32_t normal_count_ = 0;
    uint64_t normal_held_since_ = UINT64_MAX; // G when the normal head was first held back
    EngineCounters counters_;
    uint64_t inputs_ = 0;
    // Class trees: on while some class has a parent or a ceil above its rate.
    bool tree_ = false;
    uint32_t tree_making_ = 0;     // classes with a parent or a ceil above their rate
    std::vector<TreeNode> tnodes_; // per class handle (while tree_)
    TreeNode troot_;               // the wire
    TreeStep tpath_[kMaxTreeDepth + 1];
    uint32_t tpath_n_ = 0;
};

} // namespace pspxdp
