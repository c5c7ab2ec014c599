// The daemon's entry point: signals, the pidfile, and the loop (loop.hpp).
#include "daemon/daemon.hpp"

#include "common/caps.hpp"
#include "common/clock.hpp"
#include "common/lock.hpp"
#include "common/pins.hpp"
#include "common/text.hpp"
#include "control/control.hpp"
#include "core/units.hpp"
#include "daemon/log.hpp"
#include "daemon/loop.hpp"
#include "daemon/watch.hpp"
#include "setup/attach.hpp"
#include "setup/loader.hpp"
#include "setup/netlink.hpp"
#include "setup/process.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>
#include <thread>
#include <unistd.h>

namespace pspxdp::daemon {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// One of the SIGHUP counters of daemon_stats, through a mapping of its own:
// the loop's maps come and go with its restarts; the pins stay.
void count_reload(const setup::Paths &paths, __u64 pspxdp_daemon_stats::*counter) {
    auto fd = common::open_pinned_map(paths, "daemon_stats", 4, sizeof(pspxdp_daemon_stats),
                                      common::Access::Write);
    auto view = fd ? common::MapView::of(fd->get(), sizeof(pspxdp_daemon_stats), true)
                   : Result<common::MapView>(fd.failure());
    if (!view) {
        logf("SIGHUP: not counted: %s", view.error().c_str());
        return;
    }
    // The loop writes the other fields of the same struct meanwhile.
    __atomic_fetch_add(&(view->as<pspxdp_daemon_stats>()->*counter), 1, __ATOMIC_RELAXED);
}

// SIGHUP is taken by a thread of its own (sigwait; blocked everywhere else),
// so the loop paces on while the file is read and applied: apply takes DEV's
// lock and writes class_config, and the loop follows config_gen as after any
// `pspxdp apply`.
class Reloader {
  public:
    Reloader(const DaemonConfig &cfg, const setup::Paths &paths) {
        // SIGTERM/SIGINT blocked in the thread from its start: delivered to
        // it, their handler would not wake the loop from its sleep.
        sigset_t stop, old;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        pthread_sigmask(SIG_BLOCK, &stop, &old);
        t_ = std::thread([this, &cfg, &paths] {
            sigset_t hup;
            sigemptyset(&hup);
            sigaddset(&hup, SIGHUP);
            for (int sig = 0; sigwait(&hup, &sig) == 0 && !stop_.load();) reload(cfg, paths);
        });
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    ~Reloader() {
        stop_ = true;
        pthread_kill(t_.native_handle(), SIGHUP);
        t_.join();
    }

  private:
    // DEV's lock without waiting, tried again until it is had or the daemon
    // stops: a detach holds the lock while it waits for this daemon to exit,
    // and the exit waits for this thread.
    Result<common::DevLock> lock(const setup::Paths &paths) {
        constexpr int kTries = 500; // 20 ms apart: 10 s
        for (int i = 0;; ++i) {
            auto l = common::DevLock::acquire(paths, common::DevLock::Wait::No,
                                              common::DevLock::Create::No);
            if (l || stop_.load() || i == kTries) return l;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }

    void reload(const DaemonConfig &cfg, const setup::Paths &paths) {
        // systemctl reload waits for READY=1 after RELOADING=1 (Type=notify):
        // it returns once the file is applied or refused. No-ops without systemd.
        sd_notify(0, "RELOADING=1");
        struct Ready {
            ~Ready() { sd_notify(0, "READY=1"); }
        } ready;
        if (cfg.config_file.empty()) {
            logf("SIGHUP ignored: attached without --config, no file to re-read");
            return;
        }
        auto refuse = [&](const std::string &why) {
            logf("SIGHUP: %s refused, configuration unchanged: %s", cfg.config_file.c_str(),
                 why.c_str());
            count_reload(paths, &pspxdp_daemon_stats::file_reload_failures);
        };
        auto c = control::load_config(cfg.config_file);
        if (!c) return refuse(c.error());
        auto l = lock(paths);
        if (!l) return refuse(l.error());
        auto d = control::Device::open_locked(*l);
        if (!d) return refuse(d.error());
        auto s = d.value().apply(*c);
        if (!s) return refuse(s.error());
        logf("SIGHUP: %s applied: %s", cfg.config_file.c_str(), s->text().c_str());
        count_reload(paths, &pspxdp_daemon_stats::file_reloads);
    }

    std::atomic<bool> stop_{false};
    std::thread t_;
};

// One daemon per DEV: a second one would fail on the sockets anyway, but
// only after clobbering the first one's pidfile.
bool claim_pidfile(const setup::Paths &paths) {
    if (auto r = setup::ensure_run_dir(); !r) {
        logf("%s", r.error().c_str());
        return false;
    }
    if (pid_t other = setup::running_pid(paths); other && other != getpid()) {
        logf("another daemon (pid %d) already runs for %s", int(other), paths.dev.c_str());
        return false;
    }
    if (auto r = setup::write_pidfile(paths, getpid()); !r) {
        logf("%s", r.error().c_str());
        return false;
    }
    return true;
}

// sched_setattr(2) and its struct: glibc 2.36 wraps neither.
struct SchedAttr {
    uint32_t size = sizeof(SchedAttr);
    uint32_t policy = 0;
    uint64_t flags = 0;
    int32_t nice = 0;
    uint32_t priority = 0;
    uint64_t runtime_ns = 0, deadline_ns = 0, period_ns = 0;
};
#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
constexpr uint64_t kSchedFlagResetOnFork = 0x01; // SCHED_FLAG_RESET_ON_FORK
constexpr uint64_t kSchedFlagReclaim = 0x02;     // SCHED_FLAG_RECLAIM

long read_long(const char *path) {
    FILE *f = std::fopen(path, "r");
    long v = -2;
    if (f) {
        if (std::fscanf(f, "%ld", &v) != 1) v = -2;
        std::fclose(f);
    }
    return v;
}

// Does the deadline daemon reclaim idle CPU time? Asked (--reclaim), or on
// the byte clock: a NIC's pacer, whose copy-mode socket moves frames only
// while the daemon runs (a throttled daemon is an underrun), and whose
// receivers are not on this host. Clockless (veth, VM NICs) the senders and
// receivers are local, and a reclaiming daemon took their CPU (kDeadline*).
bool reclaims(const DaemonConfig &cfg) {
    if (cfg.reclaim) return true;
    auto link = setup::get_link(cfg.dev);
    return link ? !resolve_wire_clock(cfg.clock, link->driver).clockless
                : cfg.clock == WireClock::Byte;
}

// --cpu and --sched, applied to the calling thread (the loop's). A policy
// asked by name (--sched deadline|fifo) that the kernel refuses (no
// CAP_SYS_NICE, deadline admission control, an affinity narrower than the
// root domain for deadline) is logged and stops the daemon (false): what
// the user asked for is had or refused. The default (Auto) falls back to
// normal priority, logged, and attach and status say so: a pacer that
// runs late says so (lost_wire_ns, status, the log). The kernel's own
// limits are the guard rails: the deadline reservation and its reclaim
// limit, or RT throttling (the fair server) for fifo; no watchdog of our own.
bool set_scheduling(const DaemonConfig &cfg) {
    if (cfg.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cfg.cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0)
            logf("warning: cannot pin to CPU %d: %s (running on any)", cfg.cpu,
                 common::errno_text(errno).c_str());
    }
    const std::string on = cfg.cpu >= 0 ? " on CPU " + std::to_string(cfg.cpu) : "";
    if (cfg.sched == SchedPolicy::Normal) {
        logf("scheduling: SCHED_OTHER%s (--sched normal): a busy host delays the pacer",
             on.c_str());
        return true;
    }
    const SchedPolicy want = cfg.sched == SchedPolicy::Auto ? kAutoSched : cfg.sched;
    SchedAttr a;
    // The Reloader thread and anything forked run normal: a deadline task
    // cannot fork otherwise (EAGAIN), and they need no real time.
    a.flags = kSchedFlagResetOnFork;
    if (want == SchedPolicy::Fifo) {
        a.policy = SCHED_FIFO;
        a.priority = kRealtimePriority;
    } else {
        a.policy = SCHED_DEADLINE;
        if (reclaims(cfg)) a.flags |= kSchedFlagReclaim;
        a.runtime_ns = kDeadlineRuntimeNs;
        a.deadline_ns = a.period_ns = kDeadlinePeriodNs;
    }
    const char *name = a.policy == SCHED_FIFO ? "SCHED_FIFO" : "SCHED_DEADLINE";
    if (syscall(SYS_sched_setattr, 0, &a, 0) < 0) {
        const int e = errno;
        std::string why = sched_obstacle(want);
        if (why.empty() && e == EBUSY)
            why = "admission control: deadline CPU time already reserved by other tasks";
        why = common::errno_text(e) + (why.empty() ? "" : " (" + why + ")");
        if (cfg.sched != SchedPolicy::Auto) {
            logf("cannot run %s (--sched %s): %s; stopping (--sched auto falls back to a "
                 "normal task)",
                 name, sched_policy_name(cfg.sched), why.c_str());
            return false;
        }
        logf("warning: cannot run %s: %s; running SCHED_OTHER: a busy host delays the pacer "
             "(lost_wire_ns counts it)",
             name, why.c_str());
        return true;
    }
    // Page faults are the slowest thing a real-time loop can hit.
    if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
        logf("warning: mlockall: %s (continuing unlocked)", common::errno_text(errno).c_str());
    const long rt_runtime = read_long("/proc/sys/kernel/sched_rt_runtime_us");
    const long rt_period = read_long("/proc/sys/kernel/sched_rt_period_us");
    const std::string limit =
        rt_runtime == -1 ? std::string("none (sched_rt_runtime_us -1): it can take a CPU whole")
        : rt_runtime < 0 || rt_period <= 0
            ? std::string("unknown")
            : "at most " + std::to_string(rt_runtime * 100 / rt_period) + " % of a CPU";
    if (a.policy == SCHED_FIFO)
        logf("scheduling: SCHED_FIFO priority %d%s; RT throttling: %s (the fair server stops "
             "it up to 50 ms at once when it takes that)",
             kRealtimePriority, on.c_str(), limit.c_str());
    else if (a.flags & kSchedFlagReclaim)
        logf("scheduling: SCHED_DEADLINE, %llu us of every %llu us reserved, reclaiming unused "
             "CPU time up to the kernel's limit (%s): %s, less the fair server's share",
             (unsigned long long)(kDeadlineRuntimeNs / 1000),
             (unsigned long long)(kDeadlinePeriodNs / 1000),
             cfg.reclaim ? "--reclaim" : "the byte clock", limit.c_str());
    else
        logf("scheduling: SCHED_DEADLINE, %llu us of every %llu us reserved and no more "
             "(--reclaim: more when idle)",
             (unsigned long long)(kDeadlineRuntimeNs / 1000),
             (unsigned long long)(kDeadlinePeriodNs / 1000));
    return true;
}

} // namespace

const char *sched_policy_name(SchedPolicy p) {
    switch (p) {
    case SchedPolicy::Auto: return "auto";
    case SchedPolicy::Normal: return "normal";
    case SchedPolicy::Fifo: return "fifo";
    case SchedPolicy::Deadline: return "deadline";
    }
    return "?";
}

std::string SchedInForce::text() const {
    switch (policy) {
    case SchedPolicy::Fifo: return "fifo (SCHED_FIFO priority " + std::to_string(priority) + ")";
    case SchedPolicy::Deadline:
        return "deadline (SCHED_DEADLINE): " + std::to_string(runtime_ns / 1000) + " us of every " +
               std::to_string(period_ns / 1000) + " us reserved" +
               (reclaim ? ", reclaiming idle CPU time" : "");
    default: return "normal (SCHED_OTHER): a busy host delays the pacer";
    }
}

Result<SchedInForce> sched_in_force(int pid) {
    SchedAttr a;
    if (syscall(SYS_sched_getattr, pid, &a, sizeof(a), 0) < 0)
        return err("sched_getattr of pid " + std::to_string(pid) + ": " +
                   common::errno_text(errno));
    SchedInForce f;
    if (a.policy == SCHED_FIFO || a.policy == SCHED_RR) {
        f.policy = SchedPolicy::Fifo;
        f.priority = a.priority;
    } else if (a.policy == SCHED_DEADLINE) {
        f.policy = SchedPolicy::Deadline;
        f.runtime_ns = a.runtime_ns;
        f.period_ns = a.period_ns;
        f.reclaim = a.flags & kSchedFlagReclaim;
    }
    return f;
}

std::string sched_obstacle(SchedPolicy p) {
    if (p == SchedPolicy::Normal) return {};
    if (!common::has_cap(CAP_SYS_NICE)) return "no CAP_SYS_NICE";
    if (p == SchedPolicy::Fifo) return {};
    cpu_set_t set;
    CPU_ZERO(&set);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && online > 0 && CPU_COUNT(&set) < online)
        return "confined to " + std::to_string(CPU_COUNT(&set)) + " of " + std::to_string(online) +
               " CPUs: a deadline task needs every CPU of its cpuset";
    return {};
}

Result<void> set_sched_options(DaemonConfig &cfg, SchedPolicy sched, int cpu, bool reclaim) {
    if (reclaim && (sched == SchedPolicy::Normal || sched == SchedPolicy::Fifo))
        return refuse(std::string("--reclaim with --sched ") + sched_policy_name(sched) +
                      ": only a deadline task reclaims");
    if (cpu >= 0 && (sched == SchedPolicy::Deadline || sched == SchedPolicy::Auto))
        return refuse("--cpu " + std::to_string(cpu) + " with --sched " + sched_policy_name(sched) +
                      ": the kernel runs a deadline task on any CPU of its root domain, never "
                      "pinned; add --sched fifo (or normal) to pin it");
    cfg.sched = sched;
    cfg.cpu = cpu;
    cfg.reclaim = reclaim;
    return {};
}

std::vector<std::string> to_args(const DaemonConfig &cfg) {
    std::vector<std::string> a = {"--buffer", std::to_string(cfg.buffer_bytes), "--sleep-min",
                                  format_duration(cfg.sleep_min_ns), "--spin-last",
                                  format_duration(cfg.spin_ns),
                                  // Always, so what attach chose is explicit in the daemon's argv.
                                  "--gap-horizon", format_gap_horizon(cfg.gap_horizon_ns),
                                  "--clock", wire_clock_name(cfg.clock)};
    // Given, a bound as it is; not given, the default with its floor.
    if (!cfg.burst_floor_ns) a.insert(a.end(), {"--burst", format_burst(cfg.burst)});
    if (cfg.line_rate_bps) a.insert(a.end(), {"--line-rate", format_rate(cfg.line_rate_bps)});
    if (cfg.window_bytes) a.insert(a.end(), {"--window", std::to_string(cfg.window_bytes)});
    if (cfg.cpu >= 0) a.insert(a.end(), {"--cpu", std::to_string(cfg.cpu)});
    a.insert(a.end(), {"--sched", sched_policy_name(cfg.sched)});
    if (cfg.reclaim) a.push_back("--reclaim");
    if (cfg.busy_poll) a.push_back("--busy-poll");
    if (!cfg.config_file.empty()) a.insert(a.end(), {"--config", cfg.config_file});
    return a;
}

int run(const DaemonConfig &cfg) {
    set_log_device(cfg.dev);
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    // Before any thread starts: only the Reloader's sigwait takes SIGHUP.
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hup, nullptr);
    prctl(PR_SET_TIMERSLACK, 1UL); // sleeps end on time, not up to 50 us late
    // attach execs the daemon through /proc/self/exe: ps, top and perf
    // would call it "exe".
    prctl(PR_SET_NAME, "pspxdp");

    auto checked = common::paths_for(cfg.dev);
    if (!checked) {
        logf("cannot start: %s", checked.error().c_str());
        return 1;
    }
    const setup::Paths &paths = *checked;
    if (cfg.write_pidfile && !claim_pidfile(paths)) return 1;
    Reloader reloader(cfg, paths);
    // After the Reloader's thread: it runs normal.
    if (!set_scheduling(cfg)) {
        if (cfg.write_pidfile) setup::remove_pidfile(paths, getpid());
        return 1;
    }
    int rc;
    uint64_t t0_ns = common::mono_ns();
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
            t0_ns = common::mono_ns();
            break;
        }
        // Type=notify: systemctl start returns now, with DEV paced.
        sd_notifyf(0, "READY=1\nSTATUS=pacing %s", cfg.dev.c_str());
        rc = loop.run(g_stop);
        t0_ns = common::mono_ns();
        if (loop.dev_event().kind == DevEvent::Kind::None) break;
        // DEV changed under the loop (watch.hpp): the loop has drained.
        auto out = handle_dev_event(paths, loop.state(), loop.dev_event(),
                                    [](const std::string &m) { logf("%s", m.c_str()); });
        if (!out.restart) {
            rc = out.exit_code;
            break;
        }
    } // the loop's destructor releases the sockets and the UMEM
    sd_notify(0, "STOPPING=1");
    const uint64_t released_ns = common::mono_ns() - t0_ns;
    if (cfg.write_pidfile) setup::remove_pidfile(paths, getpid());
    logf("exited (%d); sockets and buffer released in %llu ms", rc,
         (unsigned long long)(released_ns / common::kNsPerMs));
    return rc;
}

} // namespace pspxdp::daemon
