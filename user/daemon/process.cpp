#include "daemon/process.hpp"

#include "pspxdp/shared.h"

#include <bpf/bpf.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace pspxdp::daemon {

namespace {
std::string errstr(int e) {
    return std::strerror(e < 0 ? -e : e);
}

bool is_pspxdp(pid_t pid) {
    // A pid from a stale pidfile may have been reused: only signal a pspxdp.
    // argv[0], not comm: the daemon is exec'd through /proc/self/exe.
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string argv0;
    std::getline(f, argv0, '\0');
    auto slash = argv0.rfind('/');
    return (slash == std::string::npos ? argv0 : argv0.substr(slash + 1)) == "pspxdp";
}

bool alive(pid_t pid) {
    // A child of ours that exited is a zombie until reaped: reap it here.
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    return kill(pid, 0) == 0 || errno == EPERM;
}

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
} // namespace

pid_t running_pid(const setup::Paths &p) {
    std::ifstream f(p.pid);
    pid_t pid = 0;
    if (!(f >> pid) || pid <= 0) return 0;
    if (!alive(pid) || !is_pspxdp(pid)) return 0;
    return pid;
}

std::string log_tail(const setup::Paths &p, int n) {
    std::ifstream f(p.log);
    std::deque<std::string> lines;
    std::string line;
    while (std::getline(f, line)) {
        lines.push_back(line);
        if (int(lines.size()) > n) lines.pop_front();
    }
    std::string out;
    for (auto &l : lines)
        out += "  " + l + "\n";
    return out;
}

Result<pid_t> spawn(const setup::Paths &p, const std::vector<std::string> &args) {
    int logfd = open(p.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) return err("opening log " + p.log + ": " + errstr(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(logfd);
        return err("fork: " + errstr(e));
    }
    if (pid == 0) {
        setsid();
        int nullfd = open("/dev/null", O_RDONLY);
        dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        std::vector<std::string> argv_s = {"pspxdp", "daemon", p.dev};
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        std::vector<char *> argv;
        for (auto &s : argv_s)
            argv.push_back(s.data());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        std::fprintf(stderr, "pspxdp: exec /proc/self/exe: %s\n", std::strerror(errno));
        _exit(127);
    }
    close(logfd);
    return pid;
}

Result<void> wait_started(const setup::Paths &p, pid_t pid, int timeout_ms) {
    auto fd = setup::open_pinned_map(p, "pacer_state");
    if (!fd) return err(fd.error());
    uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * 1000000ull;
    Result<void> result = err("daemon did not start within " + std::to_string(timeout_ms) + " ms");
    while (mono_ns() < deadline) {
        if (!alive(pid)) {
            result = err("daemon exited at start; " + p.log + " says:\n" + log_tail(p, 5));
            break;
        }
        uint32_t key = 0;
        pspxdp_pacer_state st{};
        if (bpf_map_lookup_elem(*fd, &key, &st) == 0 && st.heartbeat_ns != 0) {
            result = {};
            break;
        }
        usleep(10 * 1000);
    }
    close(*fd);
    return result;
}

Result<bool> stop(const setup::Paths &p, int timeout_ms) {
    pid_t pid = running_pid(p);
    if (!pid) {
        unlink(p.pid.c_str()); // stale
        return false;
    }
    if (kill(pid, SIGTERM) < 0 && errno != ESRCH)
        return err("stopping daemon pid " + std::to_string(pid) + ": " + errstr(errno));
    uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * 1000000ull;
    while (alive(pid) && mono_ns() < deadline)
        usleep(10 * 1000);
    if (alive(pid)) {
        std::fprintf(stderr,
                     "pspxdp: warning: daemon pid %d ignored SIGTERM for %d ms, killing it\n",
                     int(pid), timeout_ms);
        kill(pid, SIGKILL);
        for (int i = 0; i < 100 && alive(pid); ++i)
            usleep(10 * 1000);
    }
    unlink(p.pid.c_str());
    return true;
}

} // namespace pspxdp::daemon
