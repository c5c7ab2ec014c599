#include "setup/process.hpp"

#include "common/caps.hpp"
#include "common/clock.hpp"
#include "common/pins.hpp"
#include "common/text.hpp"
#include "pspxdp/shared.h"

#include <bpf/bpf.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pspxdp::setup {

using common::errno_text;
using common::mono_ns;

namespace {

// Is pid pspxdp working on dev? argv[0] is pspxdp (not comm: the daemon is
// exec'd through /proc/self/exe) and one of its arguments is dev.
bool is_ours(pid_t pid, const std::string &dev) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string arg;
    bool first = true, named = false, has_dev = false;
    while (std::getline(f, arg, '\0')) {
        if (first) {
            auto slash = arg.rfind('/');
            named = (slash == std::string::npos ? arg : arg.substr(slash + 1)) == "pspxdp";
            first = false;
        } else if (arg == dev) {
            has_dev = true;
        }
    }
    return named && has_dev;
}

// A zombie has exited: only its parent's wait() is missing.
bool is_zombie(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(f, stat);
    // pid (comm) S ...: comm may hold spaces and parentheses, the state
    // follows the last ')'.
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

bool alive(pid_t pid) {
    // A child of ours that exited is a zombie until reaped: reap it here.
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    if (kill(pid, 0) != 0 && errno != EPERM) return false;
    // The daemon's parent (the attach that started it) has exited, so it
    // is reaped by whatever adopted it, which may take a while (this VM's
    // init reaps about once a second): an exited daemon is not alive.
    return !is_zombie(pid);
}

} // namespace

pid_t running_pid(const Paths &p) {
    std::ifstream f(p.pid);
    pid_t pid = 0;
    if (!(f >> pid) || pid <= 0) return 0;
    if (!alive(pid) || !is_ours(pid, p.dev)) return 0;
    return pid;
}

uint64_t netns_of(pid_t pid) {
    struct stat st {};
    if (stat(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), &st) != 0) return 0;
    return st.st_ino;
}

Result<void> write_pidfile(const Paths &p, pid_t pid) {
    int fd = open(p.pid.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return err(common::path_error("writing the pidfile", p.pid, errno));
    std::string text = std::to_string(pid) + "\n";
    ssize_t n = write(fd, text.data(), text.size());
    int e = errno;
    close(fd);
    if (n != ssize_t(text.size())) return err("writing " + p.pid + ": " + errno_text(e));
    return {};
}

void remove_pidfile(const Paths &p, pid_t pid) {
    std::ifstream f(p.pid);
    pid_t in_file = 0;
    if (f >> in_file && in_file == pid) unlink(p.pid.c_str());
}

std::string log_tail(const Paths &p, int n) {
    std::ifstream f(p.log);
    std::deque<std::string> lines;
    std::string line;
    while (std::getline(f, line)) {
        lines.push_back(line);
        if (int(lines.size()) > n) lines.pop_front();
    }
    std::string out;
    for (auto &l : lines) out += "  " + l + "\n";
    return out;
}

Result<pid_t> spawn(const Paths &p, const std::vector<std::string> &args) {
    int logfd = open(p.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (logfd < 0) return err(common::path_error("opening the daemon's log", p.log, errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(logfd);
        return err("fork: " + errno_text(e));
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
        for (auto &s : argv_s) argv.push_back(s.data());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        std::fprintf(stderr, "pspxdp: exec /proc/self/exe: %s\n", std::strerror(errno));
        _exit(127);
    }
    close(logfd);
    return pid;
}

Result<void> wait_started(const Paths &p, pid_t pid, int timeout_ms) {
    auto fd = common::open_pinned_map<uint32_t, pspxdp_pacer_state>(p, "pacer_state",
                                                                    common::Access::Read);
    if (!fd) return fd.failure();
    uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * common::kNsPerMs;
    while (mono_ns() < deadline) {
        if (!alive(pid))
            return err("daemon exited at start; " + p.log + " says:\n" + log_tail(p, 5));
        uint32_t key = 0;
        pspxdp_pacer_state st{};
        if (bpf_map_lookup_elem(fd->get(), &key, &st) == 0 && pspxdp_pacer_alive(&st, mono_ns()))
            return {};
        usleep(10 * 1000);
    }
    return err("daemon did not start within " + std::to_string(timeout_ms) + " ms");
}

Result<bool> stop(const Paths &p, int timeout_ms) {
    pid_t pid = running_pid(p);
    if (!pid) {
        unlink(p.pid.c_str()); // stale
        return false;
    }
    if (kill(pid, SIGTERM) < 0 && errno != ESRCH)
        return err("stopping daemon pid " + std::to_string(pid) + ": " + errno_text(errno));
    uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * common::kNsPerMs;
    while (alive(pid) && mono_ns() < deadline) usleep(10 * 1000);
    if (alive(pid)) {
        std::fprintf(stderr,
                     "pspxdp: warning: daemon pid %d ignored SIGTERM for %d ms, killing it\n",
                     int(pid), timeout_ms);
        kill(pid, SIGKILL);
        for (int i = 0; i < 100 && alive(pid); ++i) usleep(10 * 1000);
    }
    unlink(p.pid.c_str());
    return true;
}

} // namespace pspxdp::setup
