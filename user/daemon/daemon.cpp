// The daemon's entry point: signals, the pidfile, and the loop (loop.hpp).
#include "daemon/daemon.hpp"

#include "daemon/log.hpp"
#include "daemon/loop.hpp"
#include "daemon/process.hpp"
#include "setup/loader.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/prctl.h>
#include <unistd.h>

namespace pspxdp::daemon {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
    g_stop = 1;
}

// One daemon per DEV: a second one would fail on the sockets anyway, but
// only after clobbering the first one's pidfile.
bool write_pidfile(const setup::Paths &paths) {
    if (auto r = setup::ensure_run_dir(); !r) {
        logf("%s", r.error().c_str());
        return false;
    }
    if (pid_t other = running_pid(paths); other && other != getpid()) {
        logf("another daemon (pid %d) already runs for %s", int(other), paths.dev.c_str());
        return false;
    }
    FILE *f = std::fopen(paths.pid.c_str(), "w");
    if (!f) {
        logf("writing pidfile %s: %s", paths.pid.c_str(), std::strerror(errno));
        return false;
    }
    std::fprintf(f, "%d\n", int(getpid()));
    std::fclose(f);
    return true;
}

// Only our own pidfile: a newer daemon may have replaced it.
void remove_pidfile(const setup::Paths &paths) {
    FILE *f = std::fopen(paths.pid.c_str(), "r");
    int pid = 0;
    if (f) {
        if (std::fscanf(f, "%d", &pid) != 1) pid = 0;
        std::fclose(f);
    }
    if (pid == getpid()) unlink(paths.pid.c_str());
}

} // namespace

void request_stop() {
    g_stop = 1;
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
    prctl(PR_SET_TIMERSLACK, 1UL); // sleeps end on time, not up to 50 us late

    auto paths = setup::paths_for(cfg.dev);
    if (cfg.write_pidfile && !write_pidfile(paths)) return 1;
    int rc;
    {
        Loop loop;
        auto r = loop.init(cfg);
        if (!r) {
            logf("cannot start: %s", r.error().c_str());
            rc = 1;
        } else {
            rc = loop.run(g_stop);
        }
    } // the loop's destructor releases the sockets and the UMEM
    if (cfg.write_pidfile) remove_pidfile(paths);
    logf("exited (%d)", rc);
    return rc;
}

} // namespace pspxdp::daemon
