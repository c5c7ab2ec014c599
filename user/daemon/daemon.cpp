#include "daemon/daemon.hpp"
#include "daemon/process.hpp"
#include "daemon/watch.hpp"
#include "setup/attach.hpp"

#include "setup/loader.hpp"
#include "setup/netlink.hpp"
#include "datapath/xsk.hpp"
#include "pspxdp/shared.h"

#include <bpf/bpf.h>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <memory>
#include <optional>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace pspxdp::daemon {

using datapath::RxDesc;
using datapath::XskPlane;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
    g_stop = 1;
}

constexpr uint64_t kMs = 1000 * 1000;
constexpr uint64_t kHeartbeatNs = 10 * kMs; // TC's timeout is 100 ms: 10 beats of slack
constexpr uint64_t kReconcileNs = 20 * kMs;
constexpr uint64_t kPublishNs = 100 * kMs;
constexpr uint64_t kSlowNs = 1000 * kMs;     // accounting check, stats file
constexpr uint64_t kDrainGraceNs = 50 * kMs; // a deleted class's last clones still arrive
constexpr uint64_t kShutdownDrainNs = 500 * kMs;
constexpr uint32_t kRxBurst = 64;

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::string errstr(int e) {
    return std::strerror(e < 0 ? -e : e);
}

std::string g_dev;
__attribute__((format(printf, 1, 2))) void logf(const char *fmt, ...) {
    char ts[32];
    time_t t = time(nullptr);
    tm tmv;
    localtime_r(&t, &tmv);
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tmv);
    std::fprintf(stderr, "%s pspxdp daemon %s: ", ts, g_dev.c_str());
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

// A bounded FIFO of descriptors; a queue never holds more than it owns frames.
class Fifo {
  public:
    explicit Fifo(uint32_t capacity_pow2) : buf_(capacity_pow2), mask_(capacity_pow2 - 1) {}
    bool empty() const { return size_ == 0; }
    uint32_t size() const { return size_; }
    bool push(const RxDesc &d) {
        if (size_ > mask_) return false;
        buf_[(head_ + size_++) & mask_] = d;
        return true;
    }
    const RxDesc &front() const { return buf_[head_ & mask_]; }
    RxDesc pop() {
        RxDesc d = buf_[head_ & mask_];
        ++head_;
        --size_;
        return d;
    }

  private:
    std::vector<RxDesc> buf_;
    uint32_t mask_;
    uint32_t head_ = 0, size_ = 0;
};

struct Class {
    uint32_t classid = 0;
    uint32_t handle = 0; // engine's
    uint32_t rxq = 0;    // pacer rx queue; class_slot.queue = rxq + 1
    uint64_t rate_bps = 0;
    uint32_t kind = 0;
    bool draining = false;
    uint64_t drain_since_ns = 0;
    pspxdp_pacer_stats stats{};
    uint64_t lost_base = 0; // socket's kernel drops when the class took the queue
};

struct LoopCounters {
    uint64_t loops = 0;
    uint64_t sleeps = 0;
    uint64_t unassigned_drops = 0; // frames on a queue no class owns
    uint64_t fifo_overflow = 0;    // cannot happen (FIFO holds all the queue's frames): a bug
    uint64_t shutdown_drops = 0;
    uint64_t config_refused = 0; // class_config entries the engine refused
    uint64_t no_free_queue = 0;
    uint64_t map_errors = 0;
    uint64_t accounting_failures = 0;
    uint64_t classes_added = 0, classes_removed = 0, rate_changes = 0;
    uint64_t batch_waits = 0;
};

class Loop {
  public:
    ~Loop();
    Result<void> init(const DaemonConfig &cfg);
    int run();
    // Why run() returned early, if DEV changed under it (watch.hpp).
    const DevEvent &dev_event() const { return dev_event_; }
    const setup::AttachState &state() const { return st_; }

  private:
    void beat(uint64_t now, bool alive);
    void receive();
    void schedule(uint64_t now);
    void reconcile(uint64_t now);
    void read_class_config(std::map<uint32_t, pspxdp_class_config> &want);
    void publish();
    void write_stats_file(uint64_t now);
    void check_accounting(const char *when);
    void release_queue(Class &c);
    void shutdown();
    int sleep_until(uint64_t now, uint64_t deadline);

    setup::Paths paths_;
    setup::AttachState st_;
    std::optional<DevWatch> watch_;
    DevEvent dev_event_;
    DaemonConfig cfg_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<XskPlane> plane_;
    int class_config_ = -1, class_slot_ = -1, pacer_state_ = -1, pacer_stats_ = -1, xsks_map_ = -1;
    std::map<uint32_t, Class> classes_;  // by classid
    std::vector<Class *> by_queue_;      // rx queue -> class
    std::vector<uint32_t> handle_queue_; // engine handle -> rx queue
    std::vector<Fifo> fifos_;            // per rx queue
    int epfd_ = -1; // RX sockets, EPOLLIN: registered once (ppoll on 16 XSKs cost ~60 us a call)
    std::map<uint32_t, uint64_t> refused_; // classid -> rate we already complained about
    LoopCounters lc_;
    uint64_t wake_ns_ = 0; // engine's Wait
    bool waiting_ = false;
    uint64_t start_ns_ = 0;
    uint64_t kick_errors_logged_ = 0;
    std::vector<uint32_t> batch_keys_;
    std::vector<pspxdp_class_config> batch_vals_;
    bool batch_ok_ = true;
    uint64_t sleep_min_ns_ = 0; // 0: spin whenever backlogged
    uint64_t batch_bytes_ = 0;  // decisions are taken in batches of about this many byte times
    Framing framing_{};
};

Loop::~Loop() {
    for (int fd : {epfd_, class_config_, class_slot_, pacer_state_, pacer_stats_, xsks_map_})
        if (fd >= 0) close(fd);
}

Result<void> Loop::init(const DaemonConfig &cfg) {
    cfg_ = cfg;
    sleep_min_ns_ = cfg.sleep_min_ns;
    paths_ = setup::paths_for(cfg.dev);
    auto st = setup::read_state(paths_);
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

    struct MapRef {
        int *fd;
        const char *name;
    } maps[] = {{&class_config_, "class_config"},
                {&class_slot_, "class_slot"},
                {&pacer_state_, "pacer_state"},
                {&pacer_stats_, "pacer_stats"},
                {&xsks_map_, "xsks_map"}};
    for (auto &m : maps) {
        auto fd = setup::open_pinned_map(paths_, m.name);
        if (!fd) return err(fd.error());
        *m.fd = *fd;
    }

    framing_ = Framing{};
    framing_.mtu_bytes = dev->mtu;
    EngineConfig ec;
    ec.line_rate_bps = line;
    ec.framing = framing_;
    uint64_t window = cfg.window_bytes ? cfg.window_bytes : st_.window_bytes;
    if (window) ec.window_bytes = window;
    engine_ = std::make_unique<Engine>(ec);
    // About one kick's worth (32 descriptors), at most half the window.
    batch_bytes_ = std::min<uint64_t>(ec.window_bytes / 2, 32ull * framing_.max_gap_wire_bytes());

    datapath::PlaneConfig pc;
    pc.tx_dev = cfg.dev;
    pc.rx_dev = st_.pacer_b;
    pc.rx_queues = st_.queues;
    pc.frames_per_queue = cfg.frames_per_queue;
    pc.mtu = dev->mtu;
    pc.mac = dev->mac;
    pc.framing = framing_;
    pc.xsks_map_fd = xsks_map_;
    auto plane = XskPlane::create(pc);
    if (!plane) return err(plane.error());
    plane_ = std::move(plane.value());

    by_queue_.assign(st_.queues, nullptr);
    for (uint32_t q = 0; q < st_.queues; ++q) {
        fifos_.emplace_back(plane_->frames_per_queue());
    }
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return err("epoll_create1: " + errstr(errno));
    for (uint32_t q = 0; q < st_.queues; ++q) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u32 = q;
        if (epoll_ctl(epfd_, EPOLL_CTL_ADD, plane_->rx_fd(q), &ev) < 0)
            return err("epoll_ctl on RX socket " + std::to_string(q) + ": " + errstr(errno));
    }
    // Slots from an earlier daemon point at sockets that are gone; start clean.
    uint32_t key, next;
    std::vector<uint32_t> stale;
    for (int rc = bpf_map_get_next_key(class_slot_, nullptr, &next); rc == 0;
         rc = bpf_map_get_next_key(class_slot_, &key, &next)) {
        stale.push_back(next);
        key = next;
    }
    for (uint32_t k : stale)
        bpf_map_delete_elem(class_slot_, &k);
    logf("started: line rate %llu bit/s, window %llu B, %u queues x %u frames of %u B on %s, TX on "
         "%s q0",
         (unsigned long long)line, (unsigned long long)engine_->config().window_bytes, st_.queues,
         plane_->frames_per_queue(), plane_->frame_size(), st_.pacer_b.c_str(), cfg.dev.c_str());
    return {};
}

void Loop::beat(uint64_t now, bool alive) {
    uint32_t key = 0;
    pspxdp_pacer_state s{};
    // Read-modify-write: attach owns pacer_ifindex/line rate, the CLI the default class.
    if (bpf_map_lookup_elem(pacer_state_, &key, &s)) ++lc_.map_errors;
    s.heartbeat_ns = alive ? now : 0;
    if (bpf_map_update_elem(pacer_state_, &key, &s, BPF_ANY)) ++lc_.map_errors;
}

void Loop::receive() {
    RxDesc buf[kRxBurst];
    for (uint32_t q = 0; q < by_queue_.size(); ++q) {
        if (!plane_->rx_ready(q)) continue;
        uint32_t n = plane_->rx_burst(q, buf, kRxBurst);
        Class *c = by_queue_[q];
        for (uint32_t i = 0; i < n; ++i) {
            if (!c) {
                // A queue without a class (e.g. after its class was removed):
                // nothing to pace it with.
                plane_->drop(buf[i].addr);
                ++lc_.unassigned_drops;
                continue;
            }
            ++c->stats.rx_frames;
            bool was_empty = fifos_[q].empty();
            if (!fifos_[q].push(buf[i])) {
                plane_->drop(buf[i].addr);
                ++lc_.fifo_overflow;
                ++c->stats.drops;
                continue;
            }
            if (was_empty) engine_->set_head(c->handle, buf[i].len);
        }
    }
}

void Loop::schedule(uint64_t now) {
    waiting_ = false;
    // Batching: once the schedule is ahead of the wire, wait until the window
    // has room for a whole batch. Otherwise the steady state is one decision
    // and one sendto per loop (measured: 0.9 kicks per descriptor, and the
    // daemon fell behind real time at 80 k gap frames/s). A frame is still
    // never late: batch_bytes_ < window, so it leaves early or on time.
    if (engine_->backlogged()) {
        uint64_t wire = engine_->wire_position(now);
        uint64_t g = engine_->byte_clock();
        uint64_t ahead = g > wire ? g - wire : 0;
        uint64_t window = engine_->config().window_bytes;
        if (ahead + batch_bytes_ > window) {
            uint64_t short_bytes = ahead + batch_bytes_ - window;
            waiting_ = true;
            wake_ns_ = now + short_bytes * 8'000'000'000ull / engine_->config().line_rate_bps;
            ++lc_.batch_waits;
            return;
        }
    }
    uint32_t budget = plane_->tx_free();
    while (budget > 0) {
        Decision d = engine_->next(now);
        if (d.action == Action::Frame) {
            uint32_t q = handle_queue_[d.cls];
            Class *c = by_queue_[q];
            RxDesc desc = fifos_[q].pop();
            if (plane_->tx_frame(desc)) {
                ++c->stats.tx_frames;
                c->stats.tx_bytes += framing_.l2_bytes(desc.len);
            } else {
                plane_->drop(desc.addr);
                ++c->stats.drops;
            }
            if (fifos_[q].empty())
                engine_->set_empty(d.cls);
            else
                engine_->set_head(d.cls, fifos_[q].front().len);
            --budget;
        } else if (d.action == Action::Gap) {
            plane_->tx_gap(d.len);
            --budget;
        } else {
            if (d.action == Action::Wait) {
                waiting_ = true;
                wake_ns_ = d.wake_ns;
            }
            break;
        }
        // Copy mode sends <= 32 per kick: keep the ring moving on long runs.
        if (plane_->tx_unsent() >= 64) plane_->kick(2);
    }
}

void Loop::release_queue(Class &c) {
    by_queue_[c.rxq] = nullptr;
}

// The whole class_config in one BPF_MAP_LOOKUP_BATCH (every 20 ms: a key
// walk would be two syscalls per class), falling back to the walk.
void Loop::read_class_config(std::map<uint32_t, pspxdp_class_config> &want) {
    if (batch_keys_.empty()) {
        batch_keys_.resize(PSPXDP_MAX_CLASSES);
        batch_vals_.resize(PSPXDP_MAX_CLASSES);
    }
    uint32_t in_batch = 0, out_batch = 0;
    bool first = true;
    while (batch_ok_) {
        uint32_t count = uint32_t(batch_keys_.size());
        int rc = bpf_map_lookup_batch(class_config_, first ? nullptr : &in_batch, &out_batch,
                                      batch_keys_.data(), batch_vals_.data(), &count, nullptr);
        int e = errno;
        for (uint32_t i = 0; i < count; ++i)
            want[batch_keys_[i]] = batch_vals_[i];
        if (rc == 0) {
            in_batch = out_batch;
            first = false;
            continue;
        }
        if (e == ENOENT) return; // the end of the map
        batch_ok_ = false;       // not supported: walk the keys from now on
        ++lc_.map_errors;
        want.clear();
    }
    uint32_t key = 0, next = 0;
    for (int rc = bpf_map_get_next_key(class_config_, nullptr, &next); rc == 0;
         rc = bpf_map_get_next_key(class_config_, &key, &next)) {
        pspxdp_class_config cc{};
        if (bpf_map_lookup_elem(class_config_, &next, &cc) == 0) want[next] = cc;
        key = next;
    }
}

void Loop::reconcile(uint64_t now) {
    std::map<uint32_t, pspxdp_class_config> want;
    read_class_config(want);
    // Gone from the config: stop TC first, then drain what is queued.
    for (auto &[id, c] : classes_) {
        if (c.draining || want.count(id)) continue;
        if (bpf_map_delete_elem(class_slot_, &id) && errno != ENOENT) ++lc_.map_errors;
        c.draining = true;
        c.drain_since_ns = now;
        logf("class %x:%x deleted: draining %u queued frames", id >> 16, id & 0xffff,
             fifos_[c.rxq].size());
    }
    for (auto &[id, cc] : want) {
        uint64_t rate = cc.kind == PSPXDP_CLASS_PACED ? cc.rate_bps : 0;
        auto it = classes_.find(id);
        if (it != classes_.end()) {
            Class &c = it->second;
            if (c.draining) { // re-added while draining: serve it again
                c.draining = false;
                pspxdp_class_slot slot{c.rxq + 1, 0};
                if (bpf_map_update_elem(class_slot_, &id, &slot, BPF_ANY)) ++lc_.map_errors;
            }
            if (c.rate_bps != rate) {
                auto r = engine_->set_rate(c.handle, rate);
                if (!r) {
                    if (refused_[id] != rate + 1) {
                        logf("class %x:%x: rate %llu refused, keeping %llu: %s", id >> 16,
                             id & 0xffff, (unsigned long long)rate, (unsigned long long)c.rate_bps,
                             r.error().c_str());
                        ++lc_.config_refused;
                        refused_[id] = rate + 1;
                    }
                } else {
                    logf("class %x:%x: rate %llu -> %llu bit/s", id >> 16, id & 0xffff,
                         (unsigned long long)c.rate_bps, (unsigned long long)rate);
                    c.rate_bps = rate;
                    c.kind = cc.kind;
                    ++lc_.rate_changes;
                    refused_.erase(id);
                }
            }
            continue;
        }
        // New class: a free queue (not owned, not draining), then the engine.
        uint32_t q = 0;
        while (q < by_queue_.size() && by_queue_[q])
            ++q;
        if (q == by_queue_.size()) {
            if (refused_[id] != ~0ull) {
                logf("class %x:%x: no free pacer queue (%zu in use; attach with more --queues)",
                     id >> 16, id & 0xffff, by_queue_.size());
                ++lc_.no_free_queue;
                refused_[id] = ~0ull;
            }
            continue;
        }
        auto h = engine_->add_class(rate);
        if (!h) {
            if (refused_[id] != rate + 1) {
                logf("class %x:%x: refused: %s", id >> 16, id & 0xffff, h.error().c_str());
                ++lc_.config_refused;
                refused_[id] = rate + 1;
            }
            continue;
        }
        refused_.erase(id);
        Class c;
        c.classid = id;
        c.handle = *h;
        c.rxq = q;
        c.rate_bps = rate;
        c.kind = cc.kind;
        c.lost_base = plane_->rx_stats(q).rx_lost();
        auto [pos, ok] = classes_.emplace(id, c);
        (void)ok;
        by_queue_[q] = &pos->second;
        if (handle_queue_.size() <= *h) handle_queue_.resize(*h + 1);
        handle_queue_[*h] = q;
        // The socket is already in xsks_map: only now may TC send here.
        pspxdp_class_slot slot{q + 1, 0};
        if (bpf_map_update_elem(class_slot_, &id, &slot, BPF_ANY)) ++lc_.map_errors;
        ++lc_.classes_added;
        logf("class %x:%x: %s %llu bit/s on queue %u", id >> 16, id & 0xffff,
             rate ? "paced" : "normal", (unsigned long long)rate, q + 1);
    }
    // Finish drains: nothing queued, nothing arriving, grace period over.
    for (auto it = classes_.begin(); it != classes_.end();) {
        Class &c = it->second;
        if (!c.draining || !fifos_[c.rxq].empty() || plane_->rx_ready(c.rxq) ||
            now - c.drain_since_ns < kDrainGraceNs) {
            ++it;
            continue;
        }
        auto r = engine_->remove_class(c.handle);
        if (!r) {
            ++it; // still backlogged in the engine's view: try again later
            continue;
        }
        uint32_t id = c.classid;
        bpf_map_delete_elem(pacer_stats_, &id);
        release_queue(c);
        ++lc_.classes_removed;
        uint64_t drops = c.stats.drops + plane_->rx_stats(c.rxq).rx_lost() - c.lost_base;
        logf("class %x:%x removed (sent %llu frames, %llu drops)", id >> 16, id & 0xffff,
             (unsigned long long)c.stats.tx_frames, (unsigned long long)drops);
        it = classes_.erase(it);
    }
}

void Loop::publish() {
    for (auto &[id, c] : classes_) {
        auto ks = plane_->rx_stats(c.rxq);
        pspxdp_pacer_stats s = c.stats;
        s.drops += ks.rx_lost() - c.lost_base;
        s.backlog = fifos_[c.rxq].size();
        uint32_t k = id;
        if (bpf_map_update_elem(pacer_stats_, &k, &s, BPF_ANY)) ++lc_.map_errors;
    }
}

void Loop::check_accounting(const char *when) {
    auto a = plane_->check_accounting();
    // The plane's Held frames are exactly the FIFOs' contents.
    uint64_t fifo = 0;
    for (auto &f : fifos_)
        fifo += f.size();
    if (a.balanced && fifo != a.held) {
        a.balanced = false;
        a.detail = "held " + std::to_string(a.held) + " != queued " + std::to_string(fifo);
    }
    if (!a.balanced) {
        ++lc_.accounting_failures;
        logf("UMEM accounting does not balance (%s): %s", when, a.detail.c_str());
    } else if (std::strcmp(when, "periodic")) {
        logf("UMEM accounting balanced (%s): %llu frames: free %llu, fill %llu, queued %llu, tx "
             "%llu",
             when, (unsigned long long)a.total, (unsigned long long)a.free,
             (unsigned long long)a.fill, (unsigned long long)a.held, (unsigned long long)a.tx);
    }
}

void Loop::write_stats_file(uint64_t now) {
    const auto &e = engine_->counters();
    const auto &p = plane_->counters();
    auto a = plane_->check_accounting();
    auto tx = plane_->tx_stats();
    uint64_t rx_lost = 0, fill_empty = 0;
    for (uint32_t q = 0; q < by_queue_.size(); ++q) {
        auto s = plane_->rx_stats(q);
        rx_lost += s.rx_lost();
        fill_empty += s.rx_fill_ring_empty_descs;
    }
    std::string tmp = paths_.stats + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "w");
    if (!f) return;
    auto u = [](uint64_t v) { return (unsigned long long)v; };
    std::fprintf(
        f,
        "{\"pid\":%d,\"uptime_ms\":%llu,\"line_rate_bps\":%llu,\"window_bytes\":%llu,"
        "\"byte_clock\":%llu,\"classes\":%zu,"
        "\"engine\":{\"frames\":%llu,\"frame_wire_bytes\":%llu,\"gap_frames\":%llu,"
        "\"gap_wire_bytes\":%llu,\"gap_overshoot_bytes\":%llu,\"idle_resyncs\":%llu,"
        "\"underrun_resyncs\":%llu,\"underrun_bytes\":%llu,\"lag_clamped_bytes\":%llu},"
        "\"tx\":{\"frames\":%llu,\"frame_bytes\":%llu,\"gaps\":%llu,\"gap_bytes\":%llu,"
        "\"kicks\":%llu,\"kick_transient\":%llu,\"kick_errors\":%llu,\"completions\":%llu,"
        "\"in_flight\":%llu,\"tx_invalid_descs\":%llu},"
        "\"rx\":{\"kernel_lost\":%llu,\"fill_ring_empty\":%llu,\"unassigned_drops\":%llu},"
        "\"umem\":{\"frames\":%llu,\"free\":%llu,\"fill\":%llu,\"queued\":%llu,\"tx\":%llu,"
        "\"balanced\":%s,\"state_errors\":%llu,\"bad_completions\":%llu},"
        "\"loop\":{\"loops\":%llu,\"sleeps\":%llu,\"config_refused\":%llu,"
        "\"no_free_queue\":%llu,\"map_errors\":%llu,\"accounting_failures\":%llu,"
        "\"classes_added\":%llu,\"classes_removed\":%llu,\"rate_changes\":%llu,"
        "\"shutdown_drops\":%llu,\"batch_waits\":%llu}}\n",
        int(getpid()), u((now - start_ns_) / kMs), u(engine_->config().line_rate_bps),
        u(engine_->config().window_bytes), u(engine_->byte_clock()), classes_.size(), u(e.frames),
        u(e.frame_wire_bytes), u(e.gap_frames), u(e.gap_wire_bytes), u(e.gap_overshoot_bytes),
        u(e.idle_resyncs), u(e.underrun_resyncs), u(e.underrun_bytes), u(e.lag_clamped_bytes),
        u(p.tx_frames), u(p.tx_frame_bytes), u(p.tx_gaps), u(p.tx_gap_bytes), u(p.kicks),
        u(p.kick_transient), u(p.kick_errors), u(p.completions), u(plane_->tx_in_flight()),
        u(tx.tx_invalid_descs), u(rx_lost), u(fill_empty), u(lc_.unassigned_drops), u(a.total),
        u(a.free), u(a.fill), u(a.held), u(a.tx), a.balanced ? "true" : "false", u(p.state_errors),
        u(p.bad_completions), u(lc_.loops), u(lc_.sleeps), u(lc_.config_refused),
        u(lc_.no_free_queue), u(lc_.map_errors), u(lc_.accounting_failures), u(lc_.classes_added),
        u(lc_.classes_removed), u(lc_.rate_changes), u(lc_.shutdown_drops), u(lc_.batch_waits));
    std::fclose(f);
    rename(tmp.c_str(), paths_.stats.c_str());
}

// Blocks in epoll on the RX sockets until a frame arrives or deadline.
int Loop::sleep_until(uint64_t now, uint64_t deadline) {
    if (deadline <= now) return 0;
    uint64_t d = deadline - now;
    timespec ts{time_t(d / 1000000000ull), long(d % 1000000000ull)};
    ++lc_.sleeps;
    epoll_event evs[8];
    return epoll_pwait2(epfd_, evs, 8, &ts, nullptr);
}

void Loop::shutdown() {
    // Fail open first: TC passes from the next packet on.
    beat(0, false);
    for (auto &[id, c] : classes_) {
        uint32_t k = id;
        bpf_map_delete_elem(class_slot_, &k);
    }
    // Send what is queued (still paced) for a bounded time.
    uint64_t t0 = mono_ns();
    for (;;) {
        uint64_t now = mono_ns();
        plane_->reap();
        plane_->refill();
        receive();
        schedule(now);
        plane_->kick();
        bool queued = engine_->backlogged();
        if (!queued && plane_->tx_in_flight() == 0 && plane_->tx_unsent() == 0) break;
        if (now - t0 > kShutdownDrainNs) break;
    }
    // Whatever is still queued is lost: count it against its class.
    for (auto &[id, c] : classes_) {
        auto &f = fifos_[c.rxq];
        while (!f.empty()) {
            plane_->drop(f.pop().addr);
            ++c.stats.drops;
            ++lc_.shutdown_drops;
        }
    }
    for (int i = 0; i < 20 && plane_->tx_in_flight(); ++i) {
        plane_->kick();
        plane_->reap();
        usleep(1000);
    }
    plane_->reap();
    publish();
    check_accounting("shutdown");
    if (lc_.shutdown_drops)
        logf("%llu queued frames dropped at shutdown", (unsigned long long)lc_.shutdown_drops);
    write_stats_file(mono_ns());
}

int Loop::run() {
    start_ns_ = mono_ns();
    uint64_t now = start_ns_;
    // All periodic work hangs off the heartbeat tick, so an idle daemon wakes
    // 100 times a second and not once per timer.
    uint64_t t_beat = 0;
    uint64_t ticks = 0;
    reconcile(now);
    while (!g_stop) {
        ++lc_.loops;
        now = mono_ns();
        plane_->reap();
        plane_->refill();
        receive();
        schedule(now);
        plane_->kick();

        if (now >= t_beat) {
            if ((dev_event_ = watch_->poll(now)).kind != DevEvent::Kind::None) break;
            beat(now, true);
            t_beat = now + kHeartbeatNs;
            ++ticks;
            if (ticks % (kReconcileNs / kHeartbeatNs) == 0) reconcile(now);
            if (ticks % (kPublishNs / kHeartbeatNs) == 0) publish();
            if (ticks % (kSlowNs / kHeartbeatNs) == 0) {
                check_accounting("periodic");
                write_stats_file(now);
                uint64_t errs = plane_->counters().kick_errors;
                if (errs != kick_errors_logged_) {
                    // Rate-limited: one line a second at most.
                    logf("TX on %s failing: %llu sendto errors, last: %s", cfg_.dev.c_str(),
                         (unsigned long long)(errs - kick_errors_logged_),
                         errstr(plane_->last_kick_errno()).c_str());
                    kick_errors_logged_ = errs;
                    if (plane_->last_kick_errno() == ENXIO || plane_->last_kick_errno() == ENODEV) {
                        logf("%s is gone: stopping", cfg_.dev.c_str());
                        break;
                    }
                }
            }
        }

        uint64_t next_timer = t_beat;
        if (plane_->tx_unsent() || plane_->tx_in_flight()) continue; // the ring needs kicks/reaps
        if (!engine_->backlogged()) {
            sleep_until(now, next_timer); // idle: wait for RX or a timer
        } else if (sleep_min_ns_ && waiting_ && wake_ns_ > now + sleep_min_ns_) {
            // Ahead of the wire by more than a batch: sleep (hrtimer, 1 ns
            // slack) instead of spinning, which gives the CPU to the senders
            // and the kernel's TX path on a small machine. Oversleeping is
            // harmless up to the window minus a batch (~260 us at 1 Gbit/s).
            sleep_until(now, std::min(next_timer, wake_ns_));
        }
        // else: due now or very soon: spin.
    }
    logf("stopping");
    shutdown();
    return lc_.accounting_failures ? 1 : 0;
}

} // namespace

void request_stop() {
    g_stop = 1;
}

int run(const DaemonConfig &cfg) {
    g_dev = cfg.dev;
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_TIMERSLACK, 1UL); // sleeps end on time, not up to 50 us late

    auto paths = setup::paths_for(cfg.dev);
    if (cfg.write_pidfile) {
        if (auto r = setup::ensure_run_dir(); !r) {
            logf("%s", r.error().c_str());
            return 1;
        }
        // One daemon per DEV: a second one would fail on the sockets anyway,
        // but only after clobbering the first one's pidfile.
        if (pid_t other = running_pid(paths); other && other != getpid()) {
            logf("another daemon (pid %d) already runs for %s", int(other), cfg.dev.c_str());
            return 1;
        }
        FILE *f = std::fopen(paths.pid.c_str(), "w");
        if (!f) {
            logf("writing pidfile %s: %s", paths.pid.c_str(), errstr(errno).c_str());
            return 1;
        }
        std::fprintf(f, "%d\n", int(getpid()));
        std::fclose(f);
    }
    int rc;
    for (bool restarted = false;; restarted = true) {
        Loop loop;
        auto r = loop.init(cfg);
        if (!r) {
            logf("cannot start: %s", r.error().c_str());
            rc = 1;
            if (restarted) { // after following DEV's MTU: say why in the state too
                (void)setup::retire(paths, "restart failed: " + r.error(), false);
                rc = kExitDeviceGone;
            }
            break;
        }
        rc = loop.run();
        if (loop.dev_event().kind == DevEvent::Kind::None) break;
        auto out = handle_dev_event(paths, loop.state(), loop.dev_event(), 0,
                                    [](const std::string &m) { logf("%s", m.c_str()); });
        if (!out.restart) {
            rc = out.exit_code;
            break;
        }
    } // the loop's destructor releases the sockets and the UMEM
    if (cfg.write_pidfile) {
        // Only our own pidfile: a newer daemon may have replaced it.
        FILE *f = std::fopen(paths.pid.c_str(), "r");
        int pid = 0;
        if (f) {
            if (std::fscanf(f, "%d", &pid) != 1) pid = 0;
            std::fclose(f);
        }
        if (pid == getpid()) unlink(paths.pid.c_str());
    }
    logf("exited (%d)", rc);
    return rc;
}

} // namespace pspxdp::daemon
