// docs/design.md §11: the agent, its threads and its watchdog.
#include "agent/agent.hpp"

#include "agent/codec.hpp"
#include "cluster/demand.hpp"
#include "common/cgroup.hpp"
#include "common/clock.hpp"
#include "common/paths.hpp"
#include "control/control.hpp"
#include "core/units.hpp"
#include "etcd/etcd.hpp"

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <curl/curl.h>
#include <deque>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <ifaddrs.h>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sstream>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <variant>

namespace pspxdp::agent {

using etcd::Json;

namespace {

std::string class_word(uint32_t classid) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%x-%x", classid >> 16, classid & 0xffff);
    return buf;
}

std::string base_path(const std::string &dev, uint32_t classid) {
    return std::string(common::kRunDir) + "/" + dev + ".group-" + class_word(classid);
}

uint64_t real_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * common::kNsPerSec + uint64_t(ts.tv_nsec);
}

void log_line(const std::string &text) {
    std::fprintf(stderr, "%.3f %s\n", double(real_ns()) / 1e9, text.c_str());
    std::fflush(stderr);
}

// What the agent and its watchdog share (one page, MAP_SHARED): the
// deadline, the fallback and the applied rate. Every class change by either
// is made under DEV's lock, with these read and written there.
struct Shared {
    std::atomic<uint64_t> safe_until_ns{0}; // CLOCK_MONOTONIC; 0: not safe
    std::atomic<uint64_t> fallback_bps{0};
    // R7: when the established floor goes to 0 (UINT64_MAX: never).
    std::atomic<uint64_t> orphan_at_ns{UINT64_MAX};
    std::atomic<uint64_t> applied_bps{0};
    std::atomic<uint64_t> rate_changes{0};
    std::atomic<uint64_t> watchdog_lowerings{0};
};

// Sets the class's rate (kHoldRateBps for 0), the rest of the class kept:
// the control plane's class change, hitless. Under DEV's lock, which the
// caller's Device holds.
Result<void> set_class_rate(control::Device &d, uint32_t classid, uint64_t rate_bps) {
    auto classes = d.classes();
    if (!classes) return classes.failure();
    for (const auto &c : *classes) {
        if (c.classid != classid || !c.configured) continue;
        control::ClassSpec spec = control::ClassSpec::from_config(classid, c.config);
        spec.rate_bps = std::max(rate_bps, kHoldRateBps);
        spec.rate_word.clear();
        return d.class_put(control::Device::Put::Change, spec);
    }
    return err("class " + format_classid(ClassId::from_raw(classid)) + " is gone from " + d.name());
}

struct RateLog {
    int fd = -1;
    void write(uint64_t rate_bps) const {
        std::string line = rate_log_line(real_ns(), rate_bps);
        // O_APPEND: the agent's and the watchdog's lines never interleave.
        if (fd >= 0 && ::write(fd, line.data(), line.size()) < 0) {
        }
    }
};

// The watchdog (a child process): at the deadline, with the agent not
// having renewed it, lowers the class to the fallback. Also when the agent
// is gone (its pipe closed, or PR_SET_PDEATHSIG) or the watchdog is told to
// stop (SIGTERM, SIGINT, SIGHUP): it lowers once if the class is above the
// fallback, then exits. It blocks in poll() on the agent's pipe and a
// signalfd, woken by the deadline at the latest: a lowering that fails (DEV
// gone) is tried again after kRetryMs, never in a loop.
[[noreturn]] void watchdog(const std::string &dev, uint32_t classid, Shared *sh, int pipe_rd,
                           const RateLog &log, pid_t agent) {
    constexpr int kRetryMs = 250;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);
    int sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
    // The agent's death as a signal too (the pipe says the same unless
    // something inherited its write end); checked after, as it may have
    // died before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    bool agent_gone = getppid() != agent, told = false;
    uint64_t retry_at = 0;
    // What the class may be at now: the floor (fallback) past the deadline,
    // 0 past the orphan time; with the agent gone, 0 at once unless floors
    // are never released (nobody will renew; R7). UINT64_MAX: no limit.
    auto limit = [sh](uint64_t t, bool ending) -> uint64_t {
        uint64_t orphan = sh->orphan_at_ns.load();
        if (ending) return orphan != UINT64_MAX ? 0 : sh->fallback_bps.load();
        if (t >= orphan) return 0;
        if (t >= sh->safe_until_ns.load()) return sh->fallback_bps.load();
        return UINT64_MAX;
    };
    for (;;) {
        uint64_t now = common::mono_ns();
        bool ending = agent_gone || told;
        uint64_t applied = sh->applied_bps.load();
        bool lower = applied > limit(now, ending);
        if (ending && !lower) _exit(0);
        if (lower && now >= retry_at) {
            auto d = control::Device::open(dev, control::Access::Change);
            // Under the lock: the agent may have renewed or lowered meanwhile.
            uint64_t to = limit(common::mono_ns(), ending);
            if (d && sh->applied_bps.load() > to) {
                if (auto r = set_class_rate(d.value(), classid, to); r) {
                    sh->applied_bps = to;
                    sh->rate_changes++;
                    sh->watchdog_lowerings++;
                    log.write(to);
                    log_line(
                        std::string("watchdog: ") +
                        (ending ? "the agent is gone" : "lease deadline passed without the agent") +
                        ": class at " + format_rate(to));
                } else {
                    log_line("watchdog: " + r.error());
                    retry_at = common::mono_ns() + kRetryMs * 1'000'000ull;
                }
            } else if (!d) {
                log_line("watchdog: " + d.error());
                retry_at = common::mono_ns() + kRetryMs * 1'000'000ull;
            }
            // Nothing more it can do: the class is at the limit, or DEV
            // is gone (and its pacer with it).
            if (ending) _exit(0);
            continue;
        }
        // Woken by the deadline, the orphan time (or the retry), else once a
        // second.
        uint64_t next = now + 1'000'000'000;
        if (lower) {
            next = retry_at;
        } else {
            if (applied > sh->fallback_bps.load()) next = std::min(next, sh->safe_until_ns.load());
            if (applied > 0) next = std::min(next, sh->orphan_at_ns.load());
        }
        int timeout_ms =
            next > now ? int(std::min<uint64_t>(1000, (next - now) / 1'000'000 + 1)) : kRetryMs;
        pollfd p[2] = {{pipe_rd, POLLIN, 0}, {sig_fd, POLLIN, 0}};
        int n = poll(p, sig_fd >= 0 ? 2 : 1, timeout_ms);
        if (n > 0 && p[0].revents) {
            char buf[64];
            if (read(pipe_rd, buf, sizeof buf) <= 0) agent_gone = true;
        }
        if (n > 0 && sig_fd >= 0 && p[1].revents) {
            signalfd_siginfo si{};
            if (read(sig_fd, &si, sizeof si) > 0) told = true;
        }
        if (getppid() != agent) agent_gone = true;
    }
}

struct Granted {
    uint64_t lease, sent_ns;
};
struct Renewed {
    uint64_t lease, sent_ns;
};
struct Lost {
    uint64_t lease;
};
// Leave the group: code is the agent's exit code (0: asked to, by a signal).
struct Stop {
    int code = 0;
};
using Event = std::variant<cluster::View, Granted, Renewed, Lost, Stop>;

class Runner final : public cluster::Effects {
  public:
    Runner(const AgentConfig &cfg, Shared *sh, RateLog log, pid_t watchdog)
        : cfg_(cfg), keys_(cfg.group), sh_(sh), log_(log), watchdog_(watchdog),
          proto_(cfg.host, cluster::Member{cfg.floor_bps, cfg.weight, cfg.classid}, cfg.budget_bps,
                 cfg.timing, *this) {}

    int run();

    // Effects
    void apply_rate(uint64_t rate_bps) override;
    void grant_lease() override {
        request([this](etcd::Client &c) {
            uint64_t sent = common::mono_ns();
            auto id = c.grant(int64_t(cfg_.timing.lease_ttl_ns / common::kNsPerSec));
            if (!id) return note_failure("lease grant: " + id.error());
            note_ok();
            push(Granted{uint64_t(*id), sent});
        });
    }
    void put_live(const cluster::Live &record) override {
        request([this, record](etcd::Client &c) {
            auto r = c.put(keys_.live(cfg_.host), live_json(record), int64_t(record.lease));
            if (r) return note_ok();
            // The lease is gone on the server: ask for a new one (R4).
            if (r.error().find("lease not found") != std::string::npos) push(Lost{record.lease});
            note_failure("put live: " + r.error());
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
    void note_ok() { last_ok_ns_ = common::mono_ns(); }
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
    uint64_t wake_ns_ = UINT64_MAX;
    uint64_t epoch_applied_ = 0;

    // Demand: the class's offered bytes (rx: taken + dropped at the limit)
    // over the window, with headroom while it sits at its limit.
    uint64_t last_rx_bytes_ = 0, last_drops_ = 0, last_sample_ns_ = 0;
    uint64_t demand_bps_ = 0;
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
    if (auto r = set_class_rate(d.value(), cfg_.classid, rate_bps); !r) {
        log_line("apply " + format_rate(rate_bps) + ": " + r.error());
        return;
    }
    sh_->applied_bps = rate_bps;
    sh_->rate_changes++;
    log_.write(rate_bps);
    log_line("rate " + format_rate(before) + " -> " + format_rate(rate_bps) + " (epoch " +
             std::to_string(proto_.epoch()) + ")");
}

void Runner::sync_shared() {
    sh_->safe_until_ns = proto_.safe_until_ns();
    sh_->fallback_bps = proto_.fallback_bps();
    sh_->orphan_at_ns = proto_.orphan_at_ns();
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
            if (stop_ && (hurry_ || common::mono_ns() >= drain_until_ns_)) return;
            fn = std::move(requests_.front());
            requests_.pop_front();
        }
        fn(c);
    }
}

void Runner::keeper() {
    etcd::Client c(cfg_.endpoints, cfg_.request_timeout_ms);
    uint64_t next = common::mono_ns();
    while (!stop_) {
        uint64_t now = common::mono_ns();
        uint64_t lease = lease_.load();
        if (lease == 0 || now < next) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        // Hedged across the endpoints (a leader lost: the survivors hold
        // renewals through the election), given up after one period: the
        // next keep-alive starts then, on whatever endpoint answered last.
        uint64_t started = common::mono_ns();
        auto ka = c.keepalive_hedged(int64_t(lease), cfg_.keepalive_hedge_ns,
                                     started + cfg_.keepalive_every_ns);
        if (!ka) {
            note_failure("keep-alive: " + ka.error());
            rewatch_ = true; // the watch may sit on a dead connection
            next = started + cfg_.keepalive_every_ns / 4;
            continue;
        }
        note_ok();
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
    bool found = false;
    for (const auto &c : *classes) {
        if (c.classid != cfg_.classid || !c.configured) continue;
        found = true;
        uint64_t rx = c.pacer.rx_bytes, drops = c.pacer.drop_limit + c.pacer.ce_marked;
        if (last_sample_ns_ != 0 && now > last_sample_ns_ && rx >= last_rx_bytes_) {
            uint64_t arrival =
                uint64_t(double(rx - last_rx_bytes_) * 8e9 / double(now - last_sample_ns_));
            // Limited: frames dropped at the limit or CE-marked (a backlog
            // past ce_threshold) in the window, or a backlog now. The
            // arrival is then capped by the rate, not the demand (§11.2).
            bool limited = (drops != last_drops_ || c.pacer.backlog_bytes > 0) &&
                           sh_->applied_bps.load() > kHoldRateBps;
            demand_bps_ = estimator_.sample(now, arrival, limited, cfg_.budget_bps);
            proto_.on_demand(now, demand_bps_);
        }
        last_rx_bytes_ = rx;
        last_drops_ = drops;
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
    uint64_t ok = last_ok_ns_.load();
    bool reachable = ok != 0 && now - ok < cfg_.timing.lease_ttl_ns;
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
           {"budget_bps", cfg_.budget_bps},
           {"floor_bps", cfg_.floor_bps},
           {"weight", cfg_.weight},
           {"phase", phase},
           {"epoch", proto_.epoch()},
           {"applied_bps", sh_->applied_bps.load()},
           {"demand_bps", demand_bps_},
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
    std::string path = state_path(cfg_.dev, cfg_.classid);
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << j.dump() << "\n";
    }
    std::rename(tmp.c_str(), path.c_str());
}

int Runner::run() {
    // SIGTERM/SIGINT arrive through sigwait in one thread; the others block them.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    // The real rate and the protocol's agree from the start: 0 (held).
    apply_rate(0);

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

    uint64_t now = common::mono_ns();
    uint64_t next_sample = now, next_state = now;
    uint64_t leave_deadline = 0;
    int code = 0;
    bool leaving = false;
    for (;;) {
        now = common::mono_ns();
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
            now = common::mono_ns();
            if (auto *v = std::get_if<cluster::View>(&e)) {
                proto_.on_view(now, *v);
            } else if (auto *gr = std::get_if<Granted>(&e)) {
                proto_.on_lease_granted(now, gr->lease, gr->sent_ns);
            } else if (auto *rn = std::get_if<Renewed>(&e)) {
                proto_.on_lease_renewed(now, rn->lease, rn->sent_ns);
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
    drain_until_ns_ = common::mono_ns() + 2'000'000'000;
    stop_ = true;
    req_cv_.notify_all();
    req.join();
    watch.join();
    keep.join();
    finished = true;
    pthread_kill(sig.native_handle(), SIGTERM);
    sig.join();
    sh_->safe_until_ns = 0;
    unlink(state_path(cfg_.dev, cfg_.classid).c_str());
    return code;
}

} // namespace

std::string state_path(const std::string &dev, uint32_t classid) {
    return base_path(dev, classid) + ".json";
}

std::string default_log_path(const std::string &dev, uint32_t classid) {
    return base_path(dev, classid) + ".rates";
}

std::vector<Json> running_agents(const std::string &dev) {
    std::vector<Json> out;
    DIR *d = opendir(common::kRunDir);
    if (!d) return out;
    std::string prefix = dev + ".group-";
    while (dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (!name.starts_with(prefix) || !name.ends_with(".json")) continue;
        std::ifstream f(std::string(common::kRunDir) + "/" + name);
        Json j = Json::parse(f, nullptr, false);
        if (j.is_discarded() || !j.contains("pid") || !j.contains("start_time")) continue;
        pid_t pid = j["pid"].get<pid_t>();
        if (kill(pid, 0) != 0 || common::process_start_time(pid) != j["start_time"].get<uint64_t>())
            continue;
        out.push_back(std::move(j));
    }
    closedir(d);
    return out;
}

namespace {

// Does prefix p hold the address (family 4 or 6, network order)?
bool prefix_has(const control::Prefix &p, int family, const uint8_t *addr) {
    if (p.family != family) return false;
    for (unsigned bit = 0; bit < p.len; ++bit) {
        unsigned byte = bit / 8, mask = 0x80u >> (bit % 8);
        if ((p.addr[byte] & mask) != (addr[byte] & mask)) return false;
    }
    return true;
}

const uint8_t *addr_bytes(const sockaddr_storage &s) {
    return s.ss_family == AF_INET ? reinterpret_cast<const uint8_t *>(
                                        &reinterpret_cast<const sockaddr_in &>(s).sin_addr)
                                  : reinterpret_cast<const uint8_t *>(
                                        &reinterpret_cast<const sockaddr_in6 &>(s).sin6_addr);
}

// The interface the kernel sends to `to` by: the one holding the source
// address a connected UDP socket gets (no packet is sent).
std::string egress_dev(const sockaddr_storage &to, socklen_t len, sockaddr_storage &src) {
    int fd = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    socklen_t slen = sizeof src;
    bool ok = connect(fd, reinterpret_cast<const sockaddr *>(&to), len) == 0 &&
              getsockname(fd, reinterpret_cast<sockaddr *>(&src), &slen) == 0;
    close(fd);
    if (!ok) return "";
    std::string dev;
    ifaddrs *all = nullptr;
    if (getifaddrs(&all) != 0) return "";
    size_t n = src.ss_family == AF_INET ? 4 : 16;
    for (ifaddrs *i = all; i && dev.empty(); i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == src.ss_family &&
            std::memcmp(addr_bytes(reinterpret_cast<const sockaddr_storage &>(*i->ifa_addr)),
                        addr_bytes(src), n) == 0)
            dev = i->ifa_name;
    freeifaddrs(all);
    return dev;
}

} // namespace

uint32_t class_for_tcp(std::span<const control::FilterSpec> filters, uint32_t default_classid,
                       int family, const uint8_t *src, const uint8_t *dst, uint16_t dport) {
    // The first filter (evaluation order) that can match the connection; its
    // source port is the kernel's choice, so a filter on sport, a VLAN or a
    // DSCP other than 0 is taken not to.
    for (const auto &f : filters) {
        if (f.sport || f.vlan || (f.dscp && *f.dscp != 0)) continue;
        if (f.proto && *f.proto != IPPROTO_TCP) continue;
        if (f.dport && (dport < f.dport->min || dport > f.dport->max)) continue;
        if (f.dst && !prefix_has(*f.dst, family, dst)) continue;
        if (f.src && !prefix_has(*f.src, family, src)) continue;
        return f.classid.raw();
    }
    return default_classid;
}

Result<void> check_etcd_path(const control::Device &d, const AgentConfig &cfg) {
    auto filters = d.filters();
    if (!filters) return filters.failure();
    auto state = d.state();
    if (!state) return state.failure();
    uint32_t default_classid = pspxdp_classid_raw(state->default_classid);
    const std::string cls = format_classid(ClassId::from_raw(cfg.classid));
    for (const std::string &url : cfg.endpoints) {
        CURLU *u = curl_url();
        char *host = nullptr, *port = nullptr;
        curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
        curl_url_get(u, CURLUPART_HOST, &host, 0);
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
        std::string h = host ? host : "", p = port ? port : "";
        curl_free(host);
        curl_free(port);
        curl_url_cleanup(u);
        if (h.size() > 2 && h.front() == '[') h = h.substr(1, h.size() - 2); // IPv6 literal
        addrinfo hints{}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        if (h.empty() || getaddrinfo(h.c_str(), p.c_str(), &hints, &res) != 0) continue;
        sockaddr_storage to{}, src{};
        std::memcpy(&to, res->ai_addr, res->ai_addrlen);
        socklen_t len = res->ai_addrlen;
        freeaddrinfo(res);
        if (egress_dev(to, len, src) != cfg.dev) continue;
        int family = to.ss_family == AF_INET ? 4 : 6;
        uint16_t dport = uint16_t(std::stoul(p));
        uint32_t via = class_for_tcp(*filters, default_classid, family, addr_bytes(src),
                                     addr_bytes(to), dport);
        if (via == cfg.classid)
            return refuse("etcd at " + url + " is reached through " + cfg.dev + "'s class " + cls +
                          ", the class the group holds at 0 while it joins: send its port to an "
                          "unpaced class first (pspxdp class set " +
                          cfg.dev + " 1:ffff normal; pspxdp filter add " + cfg.dev +
                          " proto tcp dport " + p + " classid 1:ffff)");
    }
    return {};
}

int run(const AgentConfig &given) {
    AgentConfig cfg = given;
    if (cfg.log_path.empty()) cfg.log_path = default_log_path(cfg.dev, cfg.classid);
    if (auto r = common::mkdir_p(common::kRunDir, 0755); !r) {
        std::fprintf(stderr, "pspxdp group join: %s\n", r.error().c_str());
        return 1;
    }
    // One agent per class of DEV, for its life: the lock is the proof.
    std::string lock_path = base_path(cfg.dev, cfg.classid) + ".lock";
    int lock_fd = -1;
    for (int tries = 0; tries < 3; ++tries) {
        lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) break;
        // The agent that held it may have removed the file between our open
        // and our flock (it does, when it leaves): a lock on a file no
        // longer at the path proves nothing, so open the path again.
        struct stat held {
        }, at_path{};
        if (fstat(lock_fd, &held) == 0 && stat(lock_path.c_str(), &at_path) == 0 &&
            held.st_ino == at_path.st_ino && held.st_dev == at_path.st_dev)
            break;
        close(lock_fd);
        lock_fd = -1;
    }
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        std::string who;
        for (const auto &j : running_agents(cfg.dev))
            if (j.value("classid", "") == format_classid(ClassId::from_raw(cfg.classid)))
                who = " (group " + j.value("group", "?") + ", pid " +
                      std::to_string(j.value("pid", 0)) + ")";
        std::fprintf(
            stderr, "pspxdp group join: class %s of %s is already in a group%s: leave it first\n",
            format_classid(ClassId::from_raw(cfg.classid)).c_str(), cfg.dev.c_str(), who.c_str());
        return 2;
    }
    // What the agent made of itself goes with it, whichever way run()
    // returns: the lock, removed while still held (a joiner that opened it
    // meanwhile sees it is no longer at the path). The state file goes in
    // Runner::run; the rate log stays: it is the record `group check` replays.
    struct LockFile {
        std::string path;
        int fd;
        ~LockFile() {
            unlink(path.c_str());
            close(fd);
        }
    } held_lock{lock_path, lock_fd};
    int log_fd = open(cfg.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        std::fprintf(stderr, "pspxdp group join: %s: %s\n", cfg.log_path.c_str(),
                     std::strerror(errno));
        return 1;
    }
    RateLog log{log_fd};

    void *page =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        std::fprintf(stderr, "pspxdp group join: mmap: %s\n", std::strerror(errno));
        return 1;
    }
    auto *sh = new (page) Shared;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "pspxdp group join: pipe: %s\n", std::strerror(errno));
        return 1;
    }
    // Forked before any thread or curl handle exists.
    pid_t agent_pid = getpid();
    pid_t child = fork();
    if (child < 0) {
        std::fprintf(stderr, "pspxdp group join: fork: %s\n", std::strerror(errno));
        return 1;
    }
    if (child == 0) {
        close(pipefd[1]);
        close(lock_fd); // the agent's: it must go when the agent goes
        watchdog(cfg.dev, cfg.classid, sh, pipefd[0], log, agent_pid);
    }
    close(pipefd[0]);
    log_line("joining group " + cfg.group + " as " + cfg.host + " on " + cfg.dev + " class " +
             format_classid(ClassId::from_raw(cfg.classid)) + " (budget " +
             format_rate(cfg.budget_bps) + ", floor " + format_rate(cfg.floor_bps) + ", weight " +
             std::to_string(cfg.weight) + "; watchdog pid " + std::to_string(child) + ")");
    int code = 1;
    {
        Runner r(cfg, sh, log, child);
        code = r.run();
    }
    close(pipefd[1]); // the watchdog's cue
    waitpid(child, nullptr, 0);
    log_line("left group " + cfg.group + ": " + std::to_string(sh->rate_changes.load()) +
             " rate changes, " + std::to_string(sh->watchdog_lowerings.load()) +
             " by the watchdog");
    close(log_fd);
    return code;
}

} // namespace pspxdp::agent
