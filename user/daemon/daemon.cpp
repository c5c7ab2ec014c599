// The daemon's entry point: signals, the pidfile, and the loop (loop.hpp).
#include "daemon/daemon.hpp"

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

// --cpu / --rt. RT throttling (sched_rt_runtime_us, 950 ms of every 1 s by
// default) already keeps a CPU from being taken whole by a FIFO task: no
// watchdog of our own; the loop sleeps whenever nothing is due anyway.
bool set_realtime(const DaemonConfig &cfg) {
    if (cfg.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cfg.cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set) < 0) {
            logf("cannot pin to CPU %d: %s", cfg.cpu, common::errno_text(errno).c_str());
            return false;
        }
    }
    if (!cfg.realtime) return true;
    // Page faults are the slowest thing a real-time loop can hit.
    if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
        logf("warning: mlockall: %s (continuing unlocked)", common::errno_text(errno).c_str());
    sched_param sp{};
    sp.sched_priority = kRealtimePriority;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
        logf("cannot run SCHED_FIFO: %s", common::errno_text(errno).c_str());
        return false;
    }
    FILE *f = std::fopen("/proc/sys/kernel/sched_rt_runtime_us", "r");
    long runtime = -2;
    if (f) {
        if (std::fscanf(f, "%ld", &runtime) != 1) runtime = -2;
        std::fclose(f);
    }
    logf("SCHED_FIFO priority %d%s; RT throttling: %s", kRealtimePriority,
         cfg.cpu >= 0 ? (" on CPU " + std::to_string(cfg.cpu)).c_str() : "",
         runtime == -1
             ? "off (sched_rt_runtime_us -1): a spinning pacer can take a CPU whole"
             : ("at most " + std::to_string(runtime / 1000) + " ms of every second").c_str());
    return true;
}

} // namespace

std::vector<std::string> to_args(const DaemonConfig &cfg) {
    std::vector<std::string> a = {
        "--buffer", std::to_string(cfg.buffer_bytes), "--sleep-min",
        format_duration(cfg.sleep_min_ns), "--spin-last", format_duration(cfg.spin_ns),
        // Always, so what attach chose is explicit in the daemon's argv.
        "--gap-horizon", format_gap_horizon(cfg.gap_horizon_ns), "--clock",
        wire_clock_name(cfg.clock), "--burst", format_burst(cfg.burst)};
    if (cfg.line_rate_bps) a.insert(a.end(), {"--line-rate", std::to_string(cfg.line_rate_bps)});
    if (cfg.window_bytes) a.insert(a.end(), {"--window", std::to_string(cfg.window_bytes)});
    if (cfg.cpu >= 0) a.insert(a.end(), {"--cpu", std::to_string(cfg.cpu)});
    if (cfg.realtime) a.push_back("--rt");
    if (cfg.busy_poll) a.push_back("--busy-poll");
    if (!cfg.config_file.empty()) a.insert(a.end(), {"--config", cfg.config_file});
    return a;
}

void request_stop() { g_stop = 1; }

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

    auto paths = setup::paths_for(cfg.dev);
    if (cfg.write_pidfile && !claim_pidfile(paths)) return 1;
    if (!set_realtime(cfg)) {
        if (cfg.write_pidfile) setup::remove_pidfile(paths, getpid());
        return 1;
    }
    Reloader reloader(cfg, paths);
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
    const uint64_t released_ns = common::mono_ns() - t0_ns;
    if (cfg.write_pidfile) setup::remove_pidfile(paths, getpid());
    logf("exited (%d); sockets and buffer released in %llu ms", rc,
         (unsigned long long)(released_ns / common::kNsPerMs));
    return rc;
}

} // namespace pspxdp::daemon
