#include "daemon/loop.hpp"

#include "common/clock.hpp"
#include "common/text.hpp"
#include "core/units.hpp"
#include "daemon/log.hpp"
#include "daemon/wait_plan.hpp"
#include "setup/netlink.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <sys/epoll.h>
#include <unistd.h>

namespace pspxdp::daemon {

namespace {

using common::kNsPerMs;
using common::kNsPerSec;
using common::mono_ns;
// Everything periodic hangs off one tick, so an idle daemon wakes 100 times
// a second and not once per timer. TC's heartbeat timeout is 100 ms: ten
// beats of slack.
constexpr uint64_t kTickNs = 10 * kNsPerMs;
constexpr uint64_t kTicksPerPublish = 10; // 100 ms: kernel and engine counters
constexpr uint64_t kTicksPerCheck = 100;  // 1 s: accounting, TX errors
// Shutdown sends what is queued (still paced) for at most this long, and
// keeps taking frames for at least the second: packets TC handed over just
// before the heartbeat stopped are still on their way.
constexpr uint64_t kShutdownDrainNs = 200 * kNsPerMs;
constexpr uint64_t kShutdownLateFramesNs = 20 * kNsPerMs;
constexpr uint32_t kRxBurst = 256;
// How long a planned idle may ignore arriving frames (wait_backlogged): the
// most a frame for an idle class waits for the pacer to look. 81 full-size
// frames at 1 Gbit/s: the RX rings (2048) hold them.
constexpr uint64_t kDeafNs = 1'000'000;
// Deciding a frame and sending it (the sendto() returns) take 3 us, rarely
// over 5 (measured at 500 Mbit/s clockless on a bare veth; 0.3 % took 8 us
// or more, up to 100 when preempted). A send more than kLateSendNs over the
// median may have left that late: counted (the class's burst bound absorbs
// it, engine.hpp). The median moves by a step per frame (41,000 a second at
// 500 Mbit/s: a new level within milliseconds).
constexpr uint64_t kSendMedianStepNs = 50;
constexpr uint64_t kLateSendNs = 10'000;
// A batch (schedule()) is at most this many largest frames, and half the
// window: one sendto()'s worth at the kernel's default TX budget (§4.4).
constexpr uint64_t kBatchFrames = 32;

} // namespace

Loop::~Loop() {
    // The queues and the table refer to the plane and the engine: first out.
    queues_.reset();
    table_.reset();
    plane_.reset(); // closes the sockets; the kernel removes them from xsks_map
    if (epfd_ >= 0) close(epfd_);
}

Result<void> Loop::init(const DaemonConfig &cfg) {
    cfg_ = cfg;
    auto paths = common::paths_for(cfg.dev);
    if (!paths) return paths.failure();
    auto st = setup::read_state(*paths);
    if (!st) return err(st.error());
    st_ = *st;
    if (!st_.tc_attached || !st_.xdp_attached)
        return err(cfg.dev + " is only partly attached (run pspxdp detach, then attach)");
    auto dev = setup::get_link(cfg.dev);
    if (!dev) return err(dev.error());
    auto watch = DevWatch::open(cfg.dev, dev->ifindex, dev->mtu);
    if (!watch) return err(watch.error());
    watch_.emplace(std::move(watch.value()));
    uint64_t line = cfg.line_rate_bps ? cfg.line_rate_bps : st_.line_rate_bps;
    if (!line) return err("no line rate (state file and --line-rate both empty)");

    auto maps = PacerMaps::open(*paths);
    if (!maps) return err(maps.error());
    maps_.emplace(std::move(maps.value()));
    // Before any socket exists: what a killed predecessor left is countable
    // only now.
    Recovery rec = maps_->recover();
    if (rec.restart)
        logf("restart: a killed daemon left %llu queued frames (drop_died) and %llu in its socket "
             "rings (died_in_rings); %u slots it was draining are free",
             (unsigned long long)rec.died_frames, (unsigned long long)rec.died_in_rings,
             rec.freed_slots);
    base_ = maps_->daemon();
    lost_wire_.start(mono_ns(), base_.lost_wire_ns);

    framing_ = Framing{};
    framing_.mtu_bytes = dev->mtu;
    EngineConfig ec;
    ec.line_rate_bps = line;
    ec.framing = framing_;
    uint64_t window = cfg.window_bytes ? cfg.window_bytes : st_.window_bytes;
    if (window) ec.window_bytes = window;
    // Resolved at every start: DEV may have been re-created meanwhile.
    clock_ = resolve_wire_clock(cfg.clock, dev->driver);
    ec.clockless = clock_.clockless;
    ec.gap_horizon_ns = cfg.gap_horizon_ns;
    ec.burst_bytes = cfg.burst.resolve(framing_.mtu_unit_bytes());
    ec.burst_floor_ns = cfg.burst_floor_ns;
    engine_ = std::make_unique<Engine>(ec);
    // What this daemon runs with (status reads it): settings, not counters.
    maps_->daemon().clockless = clock_.clockless;
    maps_->daemon().clock_forced = clock_.forced;
    maps_->daemon().gap_horizon_ns = cfg.gap_horizon_ns;
    // About one kick's worth, at most half the window.
    batch_bytes_ =
        std::min<uint64_t>(ec.window_bytes / 2, kBatchFrames * framing_.max_gap_wire_bytes());

    datapath::PlaneConfig pc;
    pc.tx_dev = cfg.dev;
    pc.rx_dev = st_.pacer_b;
    pc.rx_sockets = st_.queues;
    pc.buffer_bytes = cfg.buffer_bytes;
    pc.mtu = dev->mtu;
    pc.rx_prefix = PSPXDP_TAG_BYTES;
    pc.mac = dev->mac;
    pc.framing = framing_;
    pc.xsks_map_fd = maps_->xsks_map_fd();
    pc.busy_poll = cfg.busy_poll;
    auto plane = datapath::XskPlane::create(pc);
    if (!plane) return err(plane.error());
    plane_ = std::move(plane.value());

    table_ = std::make_unique<ClassTable>(*engine_, *maps_);
    queues_ = std::make_unique<ClassQueues>(*plane_, *engine_, *table_, *maps_, framing_);

    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return err("epoll_create1: " + common::errno_text(errno));
    for (uint32_t q = 0; q < plane_->rx_sockets(); ++q) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = q;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, plane_->rx_fd(q), &ev) < 0)
            return err("epoll_ctl on RX socket " + std::to_string(q) + ": " +
                       common::errno_text(errno));
    }
    config_gen_ = maps_->config_gen();
    logged_ = maps_->state();
    if (!table_->reconcile(mono_ns())) return err("cannot read class_config");
    table_->free_orphans();
    auto entries = ClassEntries::open(*paths);
    if (!entries) return err(entries.error());
    entries_.emplace(std::move(entries.value()));
    entries_->publish(*table_, *maps_, mono_ns());
    logf("started: line rate %llu bit/s, %s, gap horizon %s, window %llu B, buffer %u frames of "
         "%u B, %u RX sockets on %s (fill %u each), TX on %s q0, %u classes",
         (unsigned long long)line, clock_.describe().c_str(),
         clock_.clockless ? "- (no gap frames)" : format_gap_horizon(cfg.gap_horizon_ns).c_str(),
         (unsigned long long)engine_->config().window_bytes, plane_->frames(), plane_->frame_size(),
         plane_->rx_sockets(), st_.pacer_b.c_str(), plane_->fill_target(), cfg.dev.c_str(),
         table_->served());
    return {};
}

void Loop::receive() {
    uint32_t frames[kRxBurst];
    const uint64_t now = mono_ns(); // arrival time for CoDel's sojourn: per burst
    for (uint32_t q = 0; q < plane_->rx_sockets(); ++q) {
        if (cfg_.busy_poll) plane_->busy_poll(q);
        if (!plane_->rx_ready(q)) continue;
        uint32_t n = plane_->rx_burst(q, frames, kRxBurst);
        for (uint32_t i = 0; i < n; ++i) queues_->receive(frames[i], now);
    }
}

bool Loop::schedule(uint64_t now) {
    // The engine's Wait stands until wake_ns unless its inputs changed (a
    // frame for an empty class, a configuration change): asking again
    // would only re-plan the same idle.
    if (engine_wait_ && now < wake_ns_ && engine_->inputs() == wait_inputs_) return false;
    // Release lateness (common/lateness.hpp): a wake-up from the engine's wait for a
    // paced frame, against its plan (clockless: the frame's due time).
    if (engine_wait_ && now >= wake_ns_ && slack_ns_ != UINT64_MAX)
        maps_->lateness().record(now - wake_ns_);
    waiting_ = false;
    engine_wait_ = false;
    // Batching: once the schedule is ahead of the wire, wait until the window
    // has room for a whole batch. Otherwise the steady state is one decision
    // and one sendto per loop (measured: 0.9 kicks per descriptor, and the
    // daemon fell behind real time at 80 k gap frames/s). A frame is still
    // never late: batch_bytes_ < window, so it leaves early or on time.
    // Clockless: nothing runs ahead of the wire, every frame is released at
    // its own time; the batch is whatever is due now.
    if (engine_->backlogged() && !clock_.clockless) {
        uint64_t wire = engine_->wire_position(now);
        uint64_t g = engine_->byte_clock();
        uint64_t ahead = g > wire ? g - wire : 0;
        uint64_t window = engine_->config().window_bytes;
        if (ahead + batch_bytes_ > window) {
            uint64_t short_bytes = ahead + batch_bytes_ - window;
            waiting_ = true;
            const uint64_t rate = engine_->config().line_rate_bps;
            wake_ns_ = now + ns_for_bytes_floor(short_bytes, rate);
            // The wire has what is ahead queued: a late wake-up eats into it.
            slack_ns_ = ns_for_bytes_floor(ahead > short_bytes ? ahead - short_bytes : 0, rate);
            return false;
        }
    }
    bool framed = false;
    for (uint32_t budget = plane_->tx_free(); budget > 0; --budget) {
        Decision d = engine_->next(now);
        if (d.action == Action::Frame) {
            framed = true;
            queues_->transmit_head(d.cls, now);
        } else if (d.action == Action::Gap) {
            plane_->tx_gap(d.len);
            // A largest gap is mostly followed by more of them (flat out, or
            // a slow class on a fast wire): taken in one call.
            if (d.len == framing_.max_frame_len()) {
                const uint32_t n = engine_->more_gaps(budget - 1);
                if (n && plane_->tx_gaps(d.len, n)) budget -= n;
            }
        } else {
            if (d.action == Action::Wait) {
                waiting_ = true;
                engine_wait_ = true;
                wait_inputs_ = engine_->inputs();
                wake_ns_ = d.wake_ns;
                slack_ns_ = d.slack_ns;
            }
            break;
        }
    }
    return framed;
}

uint64_t Loop::move_frames() {
    plane_->reap();
    receive();
    queues_->relieve_overflow();
    plane_->refill();
    // The engine decides at the time the frame leaves, not at the top of the
    // pass: after a stall, taking a few hundred arrivals costs tens of us,
    // and a stale time would release the next frames early by as much
    // (clockless: a burst of up to 2.5 MTU at 500 Mbit/s).
    const uint64_t now = mono_ns();
    const bool framed = schedule(now);
    plane_->kick(*queues_);
    if (framed && clock_.clockless) {
        // Clockless, a frame leaves when its sendto() reaches the device.
        // What the receiving side does in the same call (the peer's
        // softirq: a router, a capture) makes a send take 3 to 20 us,
        // steadily: tracked as a running median. A send that takes more
        // than kLateSendNs over it was held up, maybe before the frame
        // left: it may have left that much late (counted, engine.hpp).
        const uint64_t took = mono_ns() - now;
        if (took > send_median_ns_)
            send_median_ns_ += kSendMedianStepNs;
        else if (send_median_ns_ >= kSendMedianStepNs)
            send_median_ns_ -= kSendMedianStepNs;
        if (took > send_median_ns_ + kLateSendNs)
            engine_->late_release(now + took - send_median_ns_);
    }
    return now;
}

void Loop::publish_counts() {
    pspxdp_daemon_stats &d = maps_->daemon();
    uint64_t ring_full = 0, fill_empty = 0;
    for (uint32_t q = 0; q < plane_->rx_sockets(); ++q) {
        auto s = plane_->rx_stats(q);
        ring_full += s.rx_ring_full + s.rx_invalid_descs;
        fill_empty += s.rx_dropped;
    }
    d.socket_ring_full = base_.socket_ring_full + ring_full;
    d.socket_fill_empty = base_.socket_fill_empty + fill_empty;
    const auto &e = engine_->counters();
    d.gap_overshoot_bytes = base_.gap_overshoot_bytes + e.gap_overshoot_bytes;
    d.idle_resyncs = base_.idle_resyncs + e.idle_resyncs;
    d.underruns = base_.underruns + e.underrun_resyncs;
    d.underrun_bytes = base_.underrun_bytes + e.underrun_bytes;
    d.planned_idles = base_.planned_idles + e.planned_idles;
    d.planned_idle_bytes = base_.planned_idle_bytes + e.planned_idle_bytes;
    d.late_wakeups = base_.late_wakeups + e.late_wakeups;
    // The engine counts byte times at the line rate; people read ns.
    const uint64_t rate = engine_->config().line_rate_bps;
    d.late_ns = base_.late_ns + ns_for_bytes_floor(e.late_bytes, rate);
    d.late_max_ns =
        std::max<uint64_t>(base_.late_max_ns, ns_for_bytes_floor(e.late_max_bytes, rate));
    d.lost_wire_ns = base_.lost_wire_ns + ns_for_bytes_floor(e.underrun_bytes + e.late_bytes, rate);
    const auto &p = plane_->counters();
    d.kicks = base_.kicks + p.kicks;
    d.kick_errors = base_.kick_errors + p.kick_errors;
    d.flow_reclaims = base_.flow_reclaims + queues_->flow_counters().flow_reclaims;
    // XDP's own count, kept in its pinned map across daemons.
    d.no_socket = maps_->xdp_counter(PSPXDP_XDP_NO_SOCKET);
    table_->publish_engine_counters();
}

void Loop::check_accounting(const char *when) {
    auto a = plane_->check_accounting();
    std::string detail = a.detail + queues_->check_backlogs();
    // Counted, so a test can wait for a check instead of sleeping out its period.
    ++maps_->daemon().accounting_checks;
    if (!detail.empty()) {
        ++maps_->daemon().accounting_failures;
        logf("UMEM accounting does not balance (%s): %s", when, detail.c_str());
    } else if (std::strcmp(when, "periodic")) {
        logf("UMEM accounting balanced (%s): %llu frames: free %llu, fill %llu, queued %llu, tx "
             "%llu",
             when, (unsigned long long)a.total, (unsigned long long)a.free,
             (unsigned long long)a.fill, (unsigned long long)a.held, (unsigned long long)a.tx);
    }
}

void Loop::tick(uint64_t now) {
    maps_->beat(now);
    next_tick_ns_ = now + kTickNs;
    ++ticks_;
    queues_->expire_drains(now);
    table_->finish_drains(now);
    if (ticks_ % kTicksPerPublish == 0) publish_counts();
    if (ticks_ % kTicksPerCheck == 0) { // (publish_counts ran too: the entries are current)
        pspxdp_daemon_stats &d = maps_->daemon();
        d.lost_wire_ppm = lost_wire_.update(now, d.lost_wire_ns,
                                            [](const std::string &m) { logf("%s", m.c_str()); });
        check_accounting("periodic");
        entries_->publish(*table_, *maps_, now);
        uint64_t errs = plane_->counters().kick_errors;
        if (errs != kick_errors_logged_) {
            // Rate-limited: one line a second at most.
            logf("TX on %s failing: %llu sendto errors, last: %s", cfg_.dev.c_str(),
                 (unsigned long long)(errs - kick_errors_logged_),
                 common::errno_text(plane_->last_kick_errno()).c_str());
            kick_errors_logged_ = errs;
        }
    }
}

// Blocks in epoll on the RX sockets until a frame arrives or deadline.
void Loop::sleep_until(uint64_t now, uint64_t deadline) {
    if (deadline <= now) return;
    uint64_t d = deadline - now;
    timespec ts{time_t(d / kNsPerSec), long(d % kNsPerSec)};
    epoll_event evs[8];
    epoll_pwait2(epfd_, evs, 8, &ts, nullptr);
}

// Sleeps until deadline on the clock alone: frames arriving meanwhile wait
// in the RX rings (the next pass takes them).
void Loop::nap_until(uint64_t deadline) {
    timespec ts{time_t(deadline / kNsPerSec), long(deadline % kNsPerSec)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

// Backlogged, and the engine (or the batch) said wait until wake_ns_ with
// slack_ns_ to spare: sleep, nap or spin (wait_plan.hpp). Sleeping gives
// the CPU to the senders and the kernel's TX path on a small machine; the
// hrtimer has 1 ns slack.
void Loop::wait_backlogged(uint64_t now) {
    WaitInput in;
    in.now_ns = now;
    in.wake_ns = wake_ns_;
    in.slack_ns = slack_ns_;
    in.engine_wait = engine_wait_;
    in.clockless = clock_.clockless;
    in.sleep_min_ns = cfg_.sleep_min_ns;
    in.spin_ns = cfg_.spin_ns;
    in.next_tick_ns = next_tick_ns_;
    in.deaf_ns = kDeafNs;
    const WaitPlan p = plan_wait(in);
    if (p.kind == WaitPlan::Kind::Nap)
        nap_until(p.until_ns);
    else if (p.kind == WaitPlan::Kind::Sleep)
        sleep_until(now, p.until_ns);
}

// A configuration change of the device (not of a class: the class table
// logs those) in the daemon's log, saying what changed.
static void log_device_changes(pspxdp_pacer_state &last, const pspxdp_pacer_state &now,
                               uint64_t gen) {
    if (now.line_rate_bps != last.line_rate_bps)
        logf("line rate %s -> %s (config_gen %llu)", format_rate(last.line_rate_bps).c_str(),
             format_rate(now.line_rate_bps).c_str(), (unsigned long long)gen);
    const uint32_t was = pspxdp_classid_raw(last.default_classid);
    const uint32_t is = pspxdp_classid_raw(now.default_classid);
    if (was != is)
        logf("default class %s -> %s (config_gen %llu)",
             format_classid(ClassId::from_raw(was)).c_str(),
             format_classid(ClassId::from_raw(is)).c_str(), (unsigned long long)gen);
    last.line_rate_bps = now.line_rate_bps;
    last.default_classid = now.default_classid;
}

int Loop::run(const volatile sig_atomic_t &stop) {
    next_tick_ns_ = 0; // the first pass beats: TC may hand over from now on
    while (!stop) {
        uint64_t now = mono_ns();
        uint64_t gen = maps_->config_gen();
        if (gen != config_gen_) {
            config_gen_ = gen;
            log_device_changes(logged_, maps_->state(), gen);
            table_->reconcile(now);
            publish_counts();
            entries_->publish(*table_, *maps_, now);
        }
        now = move_frames();
        if (now >= next_tick_ns_) {
            if ((dev_event_ = watch_->poll(now)).kind != DevEvent::Kind::None) break;
            tick(now);
            int e = plane_->last_kick_errno();
            if (e == ENXIO || e == ENODEV) {
                logf("%s is gone: stopping", cfg_.dev.c_str());
                break;
            }
        }

        if (plane_->tx_unsent() || plane_->tx_in_flight()) continue; // the ring needs kicks/reaps
        if (!engine_->backlogged())
            sleep_until(now, next_tick_ns_); // idle: wait for RX or a tick
        else if (waiting_)
            wait_backlogged(now);
        // else: due now: go on.
    }
    logf("stopping");
    shutdown();
    return maps_->daemon().accounting_failures ? 1 : 0;
}

void Loop::shutdown() {
    // Fail open first: TC passes from the next packet on.
    maps_->beat(0);
    // Send what is queued (still paced) for a bounded time.
    const uint64_t t0 = mono_ns();
    for (;;) {
        uint64_t now = move_frames();
        bool busy = engine_->backlogged() || plane_->tx_in_flight() || plane_->tx_unsent();
        if (!busy && now - t0 >= kShutdownLateFramesNs) break;
        if (now - t0 > kShutdownDrainNs) break;
    }
    uint64_t dropped = queues_->drop_all_queued();
    for (int i = 0; i < 20 && plane_->tx_in_flight(); ++i) {
        plane_->kick(*queues_);
        plane_->reap();
        usleep(1000);
    }
    plane_->reap();
    publish_counts();
    entries_->publish(*table_, *maps_, mono_ns());
    check_accounting("shutdown");
    logf("shutdown: drained in %llu ms, %llu queued frames dropped",
         (unsigned long long)((mono_ns() - t0) / kNsPerMs), (unsigned long long)dropped);
}

} // namespace pspxdp::daemon
