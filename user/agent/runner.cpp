// docs/design.md §11.5: the agent's runner and its threads.
#include "agent/runner.hpp"

#include "agent/codec.hpp"
#include "agent/registry.hpp"
#include "cluster/demand.hpp"
#include "common/cgroup.hpp"
#include "common/clock.hpp"
#include "control/control.hpp"
#include "core/units.hpp"
#include "etcd/etcd.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <variant>

namespace pspxdp::agent {

using etcd::Json;

namespace {

struct Granted {
    uint64_t lease, sent_ns;
};
struct Renewed {
    uint64_t lease, sent_ns;
};
struct Lost {
    uint64_t lease;
};
// The live record could not be put: the name is held under another lease.
struct NameTaken {
    cluster::Live there;
};
// Leave the group: code is the agent's exit code (0: asked to, by a signal).
struct Stop {
    int code = 0;
};
using Event = std::variant<cluster::View, Granted, Renewed, Lost, NameTaken, Stop>;

class Runner final : public cluster::Effects {
  public:
    Runner(const AgentConfig &cfg, Shared *sh, RateLog log, pid_t watchdog)
        : cfg_(cfg), keys_(cfg.group), sh_(sh), log_(log), watchdog_(watchdog),
          proto_(cfg.host,
                 cluster::Member{cfg.floor_bps, cfg.weight, cfg.classid, cfg.classes_below},
                 cfg.budget_bps, cfg.timing, *this) {
        proto_.set_identity(node_name(), boot_id() + "/" + cfg.dev + "/" +
                                             format_classid(ClassId::from_raw(cfg.classid)));
    }

    int run();

    // Effects
    void apply_rate(uint64_t rate_bps) override;
    void grant_lease() override {
        request([this](etcd::Client &c) {
            uint64_t sent = common::boot_ns();
            auto id = c.grant(int64_t(cfg_.timing.lease_ttl_ns / common::kNsPerSec));
            if (!id) return note_failure("lease grant: " + id.error());
            note_ok();
            push(Granted{uint64_t(*id), sent});
        });
    }
    void put_live(const cluster::Live &record) override {
        request([this, record](etcd::Client &c) {
            // Exclusive: a second host under the same name cannot replace
            // the first's record (one name, one member).
            auto r =
                c.put_exclusive(keys_.live(cfg_.host), live_json(record), int64_t(record.lease));
            if (!r) {
                // The lease is gone on the server: ask for a new one (R4).
                if (r.error().find("lease not found") != std::string::npos)
                    push(Lost{record.lease});
                return note_failure("put live: " + r.error());
            }
            note_ok();
            if (*r) {
                auto there = parse_live((*r)->value);
                if (there) push(NameTaken{*there});
            }
        });
    }
    void cas_alloc(const cluster::Allocation &alloc, int64_t expected_rev) override {
        request([this, alloc, expected_rev](etcd::Client &c) {
            auto r = c.cas(keys_.alloc(), alloc_json(alloc), expected_rev);
            if (!r) return note_failure("write epoch: " + r.error());
            note_ok();
            if (*r) log_line("proposed epoch " + std::to_string(alloc.epoch));
        });
    }
    void cas_roster(const cluster::Roster &roster, int64_t expected_rev) override {
        request([this, roster, expected_rev](etcd::Client &c) {
            auto r = c.cas(keys_.roster(), roster_json(roster), expected_rev);
            if (!r) return note_failure("write roster: " + r.error());
            note_ok();
        });
    }
    void revoke_lease(uint64_t lease) override {
        request([this, lease](etcd::Client &c) {
            if (auto r = c.revoke(int64_t(lease)); !r) return note_failure("revoke: " + r.error());
            note_ok();
        });
    }
    void wake_at(uint64_t local_ns) override { wake_ns_ = std::min(wake_ns_, local_ns); }

  private:
    void push(Event e) {
        std::lock_guard g(mu_);
        events_.push_back(std::move(e));
        cv_.notify_one();
    }
    void request(std::function<void(etcd::Client &)> fn) {
        std::lock_guard g(req_mu_);
        // With etcd away requests pile up faster than they time out; the
        // protocol asks again for whatever is lost (any may be), so the
        // oldest go first.
        if (requests_.size() >= 16) requests_.pop_front();
        requests_.push_back(std::move(fn));
        req_cv_.notify_all();
    }
    void note_ok() { last_ok_ns_ = common::boot_ns(); }
    // After the agent or the whole class change: the class's own rate back
    // if the group no longer holds it, else one line saying what is left.
    void release_class(int code);
    // A gap between two turns of the loop (§11.4.2), by either clock.
    bool gap(uint64_t boot_now, uint64_t mono_now);
    void note_failure(const std::string &what) {
        // One line per failure burst, not one per retry.
        if (failing_.exchange(true)) return;
        log_line("etcd: " + what);
    }
    void requester();
    void watcher();
    void keeper();
    void sample_demand(uint64_t now);
    void write_state(uint64_t now);
    void sync_shared();

    const AgentConfig &cfg_;
    GroupKeys keys_;
    Shared *sh_;
    RateLog log_;
    pid_t watchdog_;
    cluster::HostProtocol proto_;
    std::optional<control::Device> reader_;

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Event> events_;
    std::mutex req_mu_;
    std::condition_variable req_cv_;
    std::deque<std::function<void(etcd::Client &)>> requests_;
    std::atomic<bool> stop_{false};
    // A second SIGTERM/SIGINT: exit now, without waiting for etcd.
    std::atomic<bool> hurry_{false};
    // After stop_, the requester runs what is queued (the revoke) until then.
    std::atomic<uint64_t> drain_until_ns_{0};
    // Since when DEV or the class could not be read (0: it can).
    uint64_t dev_missing_since_ns_ = 0;
    bool dev_gone_ = false;
    std::atomic<bool> rewatch_{false};
    std::atomic<bool> failing_{false};
    std::atomic<uint64_t> lease_{0};
    std::atomic<uint64_t> last_ok_ns_{0};
    // The last keep-alive answered (the lease renewed), CLOCK_BOOTTIME.
    std::atomic<uint64_t> last_renewed_ns_{0};
    // Set by the loop: the keeper sends a keep-alive at once, the watcher
    // reads the keys afresh (after a gap).
    std::atomic<bool> renew_now_{false};
    // When the loop last turned, by both clocks; when the protocol call
    // now running was decided (the apply guard's reference).
    uint64_t turn_boot_ns_ = 0, turn_mono_ns_ = 0, decided_ns_ = 0;
    bool gap_seen_ = false, said_joined_ = false;
    uint64_t next_waiting_ = 0;
    // The class's own rate, read when the group first held it (0: never
    // held), and its subtree's rates and ceils then, the class first
    // (docs/design.md §11.10).
    uint64_t own_rate_bps_ = 0;
    std::vector<control::OwnRate> own_;
    uint64_t wake_ns_ = UINT64_MAX;
    uint64_t epoch_applied_ = 0;

    // Demand: the class's offered bytes (rx: taken + dropped at the limit)
    // over the window, with headroom while it sits at its limit.
    uint64_t last_rx_bytes_ = 0, last_tx_bytes_ = 0, last_drops_ = 0, last_sample_ns_ = 0;
    uint64_t demand_bps_ = 0, offered_bps_ = 0;
    cluster::DemandEstimator estimator_;
};

void Runner::apply_rate(uint64_t rate_bps) {
    // The deadline first: the watchdog must not lower a raise made on a
    // renewal it has not seen yet.
    sync_shared();
    // The watchdog got there first (we were late): nothing to change.
    if (sh_->applied_bps.load() == rate_bps && sh_->rate_changes.load() > 0) return;
    auto d = control::Device::open(cfg_.dev, control::Access::Change);
    if (!d) {
        log_line("apply " + format_rate(rate_bps) + ": " + d.error());
        return;
    }
    uint64_t before = sh_->applied_bps.load();
    // A rate above what the host may hold without etcd is written only if
    // it is still provably this host's at the moment of the write (§11.4.2):
    // decided within the margin (the agent was not stopped since), before
    // the lease's deadline and with no gap unproven. Checked under DEV's
    // lock, as the last thing before the map write.
    const bool raise = rate_bps > proto_.fallback_bps() && rate_bps > before;
    uint64_t checked_ns = 0;
    auto still_ours = [&]() -> Result<void> {
        if (!raise) return {};
        checked_ns = common::boot_ns();
        uint64_t waited = checked_ns - decided_ns_;
        if (waited > cfg_.timing.margin_ns)
            return err("decided " + std::to_string(waited / 1'000'000) +
                       " ms ago (the agent did not run meanwhile): not applied");
        if (checked_ns >= proto_.raise_until_ns())
            return err("the lease is not proven safe now: not applied");
        return {};
    };
    auto was = set_group_rate(d.value(), cfg_.classid, rate_bps, still_ours, own_);
    if (!was) {
        log_line("apply " + format_rate(rate_bps) + ": " + was.error());
        // A raise refused as stale is a gap: re-prove before any other.
        if (raise && checked_ns != 0) gap_seen_ = true;
        return;
    }
    if (own_rate_bps_ == 0) {
        // A killed predecessor's record, else the subtree as found now.
        own_ = cfg_.inherited_own.empty() ? *was : cfg_.inherited_own;
        if (cfg_.inherited_own.empty() && cfg_.inherited_own_rate_bps)
            own_.front().rate_bps = cfg_.inherited_own_rate_bps;
        own_rate_bps_ = own_.front().rate_bps;
    }
    sh_->applied_bps = rate_bps;
    sh_->rate_changes++;
    log_.write(rate_bps);
    // Stopped between the check and the write (a window of a few
    // instructions): the raise may have landed late. Undo it at once.
    if (raise && common::boot_ns() - checked_ns > cfg_.timing.margin_ns) {
        uint64_t to = proto_.fallback_bps();
        if (set_group_rate(d.value(), cfg_.classid, to, {}, own_)) {
            sh_->applied_bps = to;
            sh_->rate_changes++;
            log_.write(to);
        }
        log_line("stopped while applying " + format_rate(rate_bps) + ": back at " +
                 format_rate(to));
        gap_seen_ = true;
        return;
    }
    log_line("rate " + format_rate(before) + " -> " + format_rate(rate_bps) + " (epoch " +
             std::to_string(proto_.epoch()) + ")");
}

void Runner::sync_shared() {
    sh_->safe_until_ns = proto_.safe_until_ns();
    sh_->fallback_bps = proto_.fallback_bps();
    sh_->orphan_at_ns = proto_.orphan_at_ns();
    sh_->lease = proto_.lease();
}

void Runner::requester() {
    etcd::Client c(cfg_.endpoints, cfg_.request_timeout_ms);
    for (;;) {
        std::function<void(etcd::Client &)> fn;
        {
            std::unique_lock g(req_mu_);
            req_cv_.wait(g, [&] { return stop_ || !requests_.empty(); });
            if (requests_.empty()) return;
            // Leaving: what is queued gets until the drain deadline, no more
            // (each request may wait its timeout on every endpoint).
            if (stop_ && (hurry_ || common::boot_ns() >= drain_until_ns_)) return;
            fn = std::move(requests_.front());
            requests_.pop_front();
        }
        fn(c);
    }
}

void Runner::keeper() {
    etcd::Client c(cfg_.endpoints, cfg_.request_timeout_ms);
    uint64_t next = common::boot_ns();
    while (!stop_) {
        uint64_t now = common::boot_ns();
        uint64_t lease = lease_.load();
        if (renew_now_.exchange(false)) next = now;
        if (lease == 0 || now < next) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        // Hedged across the endpoints (a leader lost: the survivors hold
        // renewals through the election), given up after one period: the
        // next keep-alive starts then, on whatever endpoint answered last.
        uint64_t started = common::boot_ns();
        auto ka = c.keepalive_hedged(int64_t(lease), cfg_.keepalive_hedge_ns,
                                     started + cfg_.keepalive_every_ns);
        if (!ka) {
            note_failure("keep-alive: " + ka.error());
            rewatch_ = true; // the watch may sit on a dead connection
            next = started + cfg_.keepalive_every_ns / 4;
            continue;
        }
        note_ok();
        if (ka->ttl_s > 0) last_renewed_ns_ = common::boot_ns();
        if (failing_.exchange(false)) log_line("etcd: answering again");
        // The send of the try that was answered, not of the first: the
        // deadline counts from the latest renewal etcd surely saw.
        push(ka->ttl_s > 0 ? Event(Renewed{lease, ka->sent_ns}) : Event(Lost{lease}));
        next = started + cfg_.keepalive_every_ns;
    }
}

void Runner::watcher() {
    etcd::Client c(cfg_.endpoints, cfg_.request_timeout_ms);
    std::string end = etcd::prefix_end(keys_.prefix);
    while (!stop_) {
        rewatch_ = false;
        auto range = c.range_prefix(keys_.prefix);
        if (!range) {
            note_failure("range: " + range.error());
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            continue;
        }
        note_ok();
        auto first = view_from_range(keys_, *range);
        if (!first) {
            log_line("etcd: " + first.error());
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            continue;
        }
        cluster::View view = *first;
        // Deletions before this read were not seen as events (R8).
        view.fresh = true;
        push(view);
        std::atomic<bool> &stop = stop_;
        std::atomic<bool> abort{false};
        std::thread guard([&] {
            // The progress callback polls one flag: stop or a re-watch.
            while (!stop && !rewatch_ && !abort)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            abort = true;
        });
        auto r = c.watch(
            keys_.prefix, end, range->revision + 1,
            [&](const etcd::WatchAnswer &a) {
                if (a.canceled) return false;
                if (a.events.empty()) return true;
                view.fresh = false;
                view.live_deleted.clear();
                for (const auto &ev : a.events) {
                    bool del = ev.type == etcd::Event::Type::del;
                    // A live record deleted here, even if put again in the
                    // same answer: R8 counts its absence from now. Only a
                    // deletion needs the records before it (puts, mostly).
                    std::optional<decltype(view.live)> before;
                    if (del) before = view.live;
                    auto ok = apply_kv(view, keys_, ev.kv, del);
                    if (!ok) log_line("etcd: " + ok.error());
                    if (before)
                        for (const auto &[host, live] : *before)
                            if (!view.live.count(host)) view.live_deleted.insert(host);
                }
                view.revision = a.revision;
                note_ok();
                push(view);
                return true;
            },
            abort);
        bool by_us = abort.load();
        abort = true;
        guard.join();
        if (stop) return;
        if (!r) note_failure("watch: " + r.error());
        if (!by_us) {
            c.fail_over();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

void Runner::sample_demand(uint64_t now) {
    // DEV detached (or its namespace gone) or the class deleted for 2 s:
    // there is nothing left to pace, so the agent leaves rather than hold
    // a share for nobody (and stay behind as an orphan).
    auto missing = [&](const std::string &why) {
        if (dev_missing_since_ns_ == 0) dev_missing_since_ns_ = now;
        if (now - dev_missing_since_ns_ >= 2'000'000'000 && !dev_gone_) {
            dev_gone_ = true;
            log_line(why + ": leaving");
            push(Stop{1});
        }
    };
    if (!reader_) {
        auto d = control::Device::open(cfg_.dev, control::Access::Read);
        if (!d) return missing(d.error());
        reader_.emplace(std::move(d.value()));
    }
    auto classes = reader_->classes();
    if (!classes) {
        reader_.reset();
        return missing(classes.error());
    }
    // The class and, of a tree, every class below it (inner classes hold
    // no frames: their counters are 0): the subtree's demand (§11.10).
    std::map<uint32_t, uint32_t> parent_of;
    for (const auto &c : *classes)
        if (c.configured) parent_of[c.classid] = pspxdp_classid_raw(c.config.parent);
    const auto subtree = control::subtree_ids(parent_of, cfg_.classid);
    const bool found = parent_of.count(cfg_.classid) != 0;
    uint64_t rx = 0, tx = 0, marks = 0;
    for (const auto &c : *classes) {
        if (!c.configured || std::find(subtree.begin(), subtree.end(), c.classid) == subtree.end())
            continue;
        rx += c.pacer.rx_bytes;
        tx += c.pacer.tx_bytes;
        marks += c.pacer.drop_limit + c.pacer.ce_marked + c.pacer.drop_aqm;
    }
    if (found) {
        // Offered: what the class took in (rx_bytes counts every frame
        // handed to the pacer, including those it then dropped at the
        // limit) over the window; delivered: what it sent. Limited: frames
        // dropped at the limit or CE-marked in the window. A sender held
        // down by the rate (TCP backs off) offers what is delivered, one
        // that does not (UDP) more: the estimator tells them apart (§11.2).
        // A backlog alone is not a limit: a class paced at the rate of its
        // sender always has one.
        if (last_sample_ns_ != 0 && now > last_sample_ns_ && rx >= last_rx_bytes_ &&
            tx >= last_tx_bytes_) {
            const double per_s = 8e9 / double(now - last_sample_ns_);
            cluster::DemandWindow w;
            w.offered_bps = uint64_t(double(rx - last_rx_bytes_) * per_s);
            w.delivered_bps = uint64_t(double(tx - last_tx_bytes_) * per_s);
            w.applied_bps = sh_->applied_bps.load();
            w.limited = marks != last_drops_ && w.applied_bps > kHoldRateBps;
            demand_bps_ = estimator_.sample(now, w, proto_.budget_bps());
            offered_bps_ = w.offered_bps;
            proto_.on_demand(now, demand_bps_);
        }
        last_rx_bytes_ = rx;
        last_tx_bytes_ = tx;
        last_drops_ = marks;
        last_sample_ns_ = now;
    }
    // Opened again next time: the maps of a detached DEV stay readable
    // through the descriptors held, and the agent must see it is gone.
    reader_.reset();
    if (!found)
        return missing("class " + format_classid(ClassId::from_raw(cfg_.classid)) +
                       " is gone from " + cfg_.dev);
    dev_missing_since_ns_ = 0;
}

void Runner::write_state(uint64_t now) {
    // Reachable: etcd answered within one keep-alive period and a request
    // timeout (a keep-alive, once there is a lease).
    uint64_t ok = lease_.load() ? last_renewed_ns_.load() : last_ok_ns_.load();
    bool reachable = ok != 0 && now - ok < cfg_.keepalive_every_ns + 2 * cfg_.keepalive_hedge_ns +
                                               uint64_t(cfg_.request_timeout_ms) * 1'000'000;
    bool safe = proto_.lease_safe(now);
    const char *phase = "joining";
    switch (proto_.phase()) {
    case cluster::HostProtocol::Phase::joining: phase = "joining"; break;
    case cluster::HostProtocol::Phase::member: phase = "member"; break;
    case cluster::HostProtocol::Phase::refused: phase = "refused"; break;
    case cluster::HostProtocol::Phase::leaving: phase = "leaving"; break;
    case cluster::HostProtocol::Phase::left: phase = "left"; break;
    }
    Json j{{"pid", getpid()},
           {"start_time", common::process_start_time(getpid())},
           {"dev", cfg_.dev},
           {"group", cfg_.group},
           {"host", cfg_.host},
           {"classid", format_classid(ClassId::from_raw(cfg_.classid))},
           {"etcd", cfg_.endpoints},
           {"budget_bps", proto_.budget_bps()},
           {"floor_bps", cfg_.floor_bps},
           {"weight", cfg_.weight},
           {"phase", phase},
           {"epoch", proto_.epoch()},
           {"applied_bps", sh_->applied_bps.load()},
           {"demand_bps", demand_bps_},
           {"offered_bps", offered_bps_},
           {"own_rate_bps", own_rate_bps_},
           {"own_classes", own_json(own_)},
           // Since the last keep-alive etcd answered (the lease's age).
           {"renewed_ago_ns", last_renewed_ns_.load() ? now - last_renewed_ns_.load() : 0},
           {"lease_safe", safe},
           {"etcd_reachable", reachable},
           {"floor_established", proto_.floor_established()},
           // What the host holds without etcd, and that it is safe: the
           // floor is reserved in every epoch (§11.4 Lemma 2).
           {"safe_allocation_bps", proto_.fallback_bps()},
           {"holding_safe_allocation", !safe && sh_->applied_bps.load() <= proto_.fallback_bps()},
           {"rate_changes", sh_->rate_changes.load()},
           {"watchdog_lowerings", sh_->watchdog_lowerings.load()},
           {"log", cfg_.log_path},
           {"updated_ns", real_ns()}};
    write_state_file(cfg_.dev, cfg_.classid, j);
}

int Runner::run() {
    // SIGTERM/SIGINT arrive through sigwait in one thread; the others block them.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    // The class is not touched until the join is accepted (the protocol
    // holds it at 0 before the roster can name this host): a refused join
    // changes nothing.
    std::thread req([this] { requester(); });
    std::thread watch([this] { watcher(); });
    std::thread keep([this] { keeper(); });
    // The first signal: leave; a second: leave without waiting for etcd.
    // Joined before the Runner goes (woken by a SIGTERM of its own).
    std::atomic<bool> finished{false};
    std::thread sig([this, sigs, &finished] {
        for (int seen = 0;; ++seen) {
            int s = 0;
            sigwait(&sigs, &s);
            if (finished) return;
            if (seen == 0) {
                push(Stop{});
                continue;
            }
            hurry_ = true;
            cv_.notify_one();
            req_cv_.notify_all();
        }
    });

    uint64_t now = common::boot_ns();
    uint64_t next_sample = now, next_state = now;
    uint64_t leave_deadline = 0;
    int code = 0;
    bool leaving = false;
    turn_boot_ns_ = now;
    turn_mono_ns_ = common::mono_ns();
    for (;;) {
        now = common::boot_ns();
        decided_ns_ = now;
        // The agent did not run for longer than a late timer may be late
        // (stopped, suspended, starved): down to the fallback at once, and
        // nothing above it until the lease and the keys are proven again
        // by a keep-alive and a read made after the gap (§11.4.2).
        if (gap(now, common::mono_ns()) || gap_seen_) {
            gap_seen_ = false;
            renew_now_ = true;
            rewatch_ = true;
            proto_.on_gap(now);
        }
        // The watchdog may have lowered the class while we were late.
        if (uint64_t real = sh_->applied_bps.load(); real < proto_.applied_bps())
            proto_.on_rate_lowered(now, real);
        if (wake_ns_ <= now) {
            wake_ns_ = UINT64_MAX;
            proto_.on_timer(now);
        }
        if (!leaving && now >= next_sample) {
            sample_demand(now);
            next_sample = now + cfg_.demand_window_ns;
        }
        lease_ = proto_.lease();
        sync_shared();
        // Joining without an answer from etcd: said again every 5 s (the
        // class untouched meanwhile), not once and then silence.
        if (proto_.phase() == cluster::HostProtocol::Phase::joining && !leaving &&
            now >= next_waiting_) {
            if (next_waiting_ != 0)
                log_line("still joining group " + cfg_.group + ": no answer from etcd at " +
                         cfg_.endpoints.front() +
                         (cfg_.endpoints.size() > 1 ? " or the others" : "") + " (class " +
                         format_classid(ClassId::from_raw(cfg_.classid)) +
                         " untouched until the group accepts it)");
            next_waiting_ = now + 5'000'000'000;
        }
        // Said once the group accepted it (a refused join says one line).
        if (!said_joined_ && proto_.phase() == cluster::HostProtocol::Phase::member) {
            said_joined_ = true;
            log_line("joined group " + cfg_.group + " as " + cfg_.host + " on " + cfg_.dev +
                     " class " + format_classid(ClassId::from_raw(cfg_.classid)) + " (budget " +
                     format_rate(proto_.budget_bps()) + ", floor " + format_rate(cfg_.floor_bps) +
                     ", weight " + std::to_string(cfg_.weight) + "; watchdog pid " +
                     std::to_string(watchdog_) + ")");
        }
        if (proto_.phase() == cluster::HostProtocol::Phase::refused && !leaving) {
            std::fprintf(stderr, "pspxdp group join: %s\n", proto_.refusal().c_str());
            if (proto_.lease()) revoke_lease(proto_.lease());
            code = 2;
            leaving = true;
            leave_deadline = now + 1'000'000'000;
        }
        // The watchdog gone (killed): the deadline no longer holds if this
        // process stops, so leave rather than pace without it (§11.4, A4).
        if (!leaving && watchdog_ > 0 && waitpid(watchdog_, nullptr, WNOHANG) == watchdog_) {
            log_line("the watchdog (pid " + std::to_string(watchdog_) + ") is gone: leaving");
            push(Stop{1});
            watchdog_ = -1;
        }
        if (leaving && hurry_) break;
        if (leaving &&
            (proto_.phase() == cluster::HostProtocol::Phase::left ||
             proto_.phase() == cluster::HostProtocol::Phase::refused || now >= leave_deadline)) {
            if (proto_.phase() == cluster::HostProtocol::Phase::leaving)
                log_line("left without etcd's answer: the reservation of " + cfg_.host +
                         " stays in the roster (run group join and leave again to clear it)");
            break; // the requester runs what is queued (the revoke) before it ends
        }
        if (now >= next_state) {
            write_state(now);
            next_state = now + 250'000'000;
        }
        uint64_t until = std::min({wake_ns_, next_state, leaving ? leave_deadline : next_sample});
        std::unique_lock g(mu_);
        if (events_.empty() && until > now)
            cv_.wait_for(g,
                         std::chrono::nanoseconds(std::min<uint64_t>(until - now, 1'000'000'000)));
        std::deque<Event> batch;
        batch.swap(events_);
        g.unlock();
        for (auto &e : batch) {
            now = common::boot_ns();
            decided_ns_ = now;
            if (auto *v = std::get_if<cluster::View>(&e)) {
                proto_.on_view(now, *v);
            } else if (auto *gr = std::get_if<Granted>(&e)) {
                proto_.on_lease_granted(now, gr->lease, gr->sent_ns);
            } else if (auto *rn = std::get_if<Renewed>(&e)) {
                proto_.on_lease_renewed(now, rn->lease, rn->sent_ns);
            } else if (auto *nt = std::get_if<NameTaken>(&e)) {
                proto_.on_name_taken(now, nt->there);
            } else if (auto *l = std::get_if<Lost>(&e)) {
                log_line("lease " + std::to_string(l->lease) + " is gone on etcd");
                proto_.on_lease_lost(now, l->lease);
            } else if (auto *st = std::get_if<Stop>(&e); st && !leaving) {
                log_line("leaving group " + cfg_.group);
                code = st->code;
                proto_.leave(now);
                leaving = true;
                leave_deadline = now + 2'000'000'000;
            }
        }
    }
    drain_until_ns_ = common::boot_ns() + 2'000'000'000;
    stop_ = true;
    req_cv_.notify_all();
    req.join();
    watch.join();
    keep.join();
    finished = true;
    pthread_kill(sig.native_handle(), SIGTERM);
    sig.join();
    sh_->safe_until_ns = 0;
    sh_->lease = 0; // revoked by the requester, or left to expire
    release_class(code);
    unlink(state_path(cfg_.dev, cfg_.classid).c_str());
    return code;
}

bool Runner::gap(uint64_t boot_now, uint64_t mono_now) {
    // The loop turns at least every demand window (25 ms); a turn later
    // than 200 ms and twice the margin (1.2 s), by either clock, is a gap:
    // CLOCK_MONOTONIC jumps over a stop, CLOCK_BOOTTIME over a suspend as
    // well. (A shorter stop is caught at the write, G2; twice the margin
    // keeps a loaded machine's scheduling delays from counting.)
    uint64_t by_boot = boot_now - turn_boot_ns_, by_mono = mono_now - turn_mono_ns_;
    turn_boot_ns_ = boot_now;
    turn_mono_ns_ = mono_now;
    uint64_t limit =
        std::max<uint64_t>(cfg_.demand_window_ns, 200'000'000) + 2 * cfg_.timing.margin_ns;
    if (std::max(by_boot, by_mono) <= limit) return false;
    log_line("the agent did not run for " + std::to_string(std::max(by_boot, by_mono) / 1'000'000) +
             " ms: at the fallback until the lease and the keys are proven again");
    return true;
}

void Runner::release_class(int code) {
    // Nothing was touched: a join refused before the roster could hold us.
    if (own_rate_bps_ == 0) return;
    const std::string cls = format_classid(ClassId::from_raw(cfg_.classid));
    const bool left = proto_.phase() == cluster::HostProtocol::Phase::left;
    const bool refused = proto_.phase() == cluster::HostProtocol::Phase::refused;
    if (!left && !refused) {
        // The roster may still reserve a floor for this host, which the
        // others' shares leave room for and no more: the class stays held.
        std::fprintf(stderr,
                     "pspxdp group %s: class %s of %s left at %s, not its own %s: etcd did not "
                     "confirm the leave, so the group may still count this host (run group "
                     "join and leave again, then set the class's rate)\n",
                     code == 2 ? "join" : "leave", cls.c_str(), cfg_.dev.c_str(),
                     format_rate(std::max(sh_->applied_bps.load(), kHoldRateBps)).c_str(),
                     format_rate(own_rate_bps_).c_str());
        return;
    }
    auto d = control::Device::open(cfg_.dev, control::Access::Change);
    if (!d) return log_line("restore " + format_rate(own_rate_bps_) + ": " + d.error());
    // Before the write, under DEV's lock: the watchdog must not lower it.
    sh_->released = true;
    // Its subtree's rates and ceils (§11.10).
    if (auto r = restore_own_rates(d.value(), own_); !r) {
        std::fprintf(stderr, "pspxdp group: class %s of %s left at %s: its own rate %s: %s\n",
                     cls.c_str(), cfg_.dev.c_str(), format_rate(sh_->applied_bps.load()).c_str(),
                     format_rate(own_rate_bps_).c_str(), r.error().c_str());
        sh_->released = false;
        return;
    }
    log_line("class " + cls + " back at its own rate " + format_rate(own_rate_bps_));
}

} // namespace

int run_group_member(const AgentConfig &cfg, Shared *sh, RateLog log, pid_t watchdog) {
    Runner r(cfg, sh, log, watchdog);
    return r.run();
}

} // namespace pspxdp::agent
