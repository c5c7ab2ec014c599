#include "common/lock.hpp"

#include "common/caps.hpp"
#include "common/text.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pspxdp::common {

namespace {
struct Held {
    int fd = -1;
    int count = 0;
};
// Locks this process holds, by device (one thread: the CLI and the daemon's
// clean-up never lock from two threads).
std::map<std::string, Held> &held() {
    static std::map<std::string, Held> h;
    return h;
}

// The holder's pid, in the lock file while it is held (emptied on release):
// the one who finds the lock taken can say who has it. A holder killed with
// the lock leaves its pid behind, but no flock: nobody is refused by it.
void record_holder(int fd) {
    const std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid.data(), pid.size(), 0);
}

// The pspxdp subcommand process pid runs ("attach", "daemon", ...); empty
// when it is gone or not pspxdp.
std::string command_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string argv0, cmd;
    if (!std::getline(f, argv0, '\0') || !std::getline(f, cmd, '\0')) return {};
    const auto slash = argv0.rfind('/');
    return (slash == std::string::npos ? argv0 : argv0.substr(slash + 1)) == "pspxdp" ? cmd : "";
}

// Who holds p's lock, in words, for the refusal of a command that found it
// taken.
std::string busy_message(const Paths &p, int fd) {
    char buf[32] = {};
    pid_t pid = 0;
    // The holder writes its pid right after it took the lock: one that won
    // a race a moment ago may not have yet. Asked again for up to 50 ms.
    for (int tries = 0; tries < 20; ++tries) {
        if (pread(fd, buf, sizeof(buf) - 1, 0) > 0 && (pid = pid_t(std::atol(buf))) > 0) break;
        usleep(2500);
    }
    const std::string cmd = pid > 0 ? command_of(pid) : "";
    const std::string who = pid > 0 ? " (pid " + std::to_string(pid) + ")" : "";
    if (cmd == "attach") return p.dev + " is being attached by another pspxdp" + who;
    if (cmd == "detach") return p.dev + " is being detached by another pspxdp" + who;
    return "another pspxdp " + (cmd.empty() ? "command" : cmd) + who + " is working on " + p.dev +
           " (" + p.lock + ")";
}
} // namespace

Result<void> ensure_run_dir() { return mkdir_p(kRunDir, 0755); }

pid_t lock_holder(const Paths &p) {
    int fd = open(p.lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 0;
    char buf[32] = {};
    const bool got = pread(fd, buf, sizeof(buf) - 1, 0) > 0;
    close(fd);
    // No flock test (even a shared one would refuse someone's LOCK_NB): the
    // pid is emptied on release, and one left by a killed holder is dead.
    const pid_t pid = got ? pid_t(std::atol(buf)) : 0;
    return pid > 0 && pid != getpid() && !command_of(pid).empty() ? pid : 0;
}

Result<DevLock> DevLock::acquire(const Paths &p, Wait wait, Create create) {
    auto &h = held();
    if (auto it = h.find(p.dev); it != h.end()) {
        ++it->second.count;
        return DevLock(p.dev);
    }
    for (;;) {
        if (create == Create::Yes)
            if (auto r = ensure_run_dir(); !r) return r.failure(); // a detach may remove it
        const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create == Create::Yes ? O_CREAT : 0);
        int fd = open(p.lock.c_str(), flags, 0644); // the holder's pid: status reads it
        if (fd < 0 && errno == ENOENT && create == Create::No)
            return refuse(p.dev + " is not attached (pspxdp attach " + p.dev + ")");
        if (fd < 0) return err(path_error("locking " + p.dev, p.lock, errno));
        if (flock(fd, LOCK_EX | (wait == Wait::Yes ? 0 : LOCK_NB)) < 0) {
            int e = errno;
            if (e == EWOULDBLOCK) {
                std::string busy = busy_message(p, fd);
                close(fd);
                return err(busy);
            }
            close(fd);
            return err("locking " + p.lock + ": " + errno_text(e));
        }
        struct stat locked {
        }, now{};
        if (fstat(fd, &locked) == 0 && stat(p.lock.c_str(), &now) == 0 &&
            locked.st_ino == now.st_ino && locked.st_dev == now.st_dev) {
            record_holder(fd);
            h[p.dev] = Held{fd, 1};
            return DevLock(p.dev);
        }
        close(fd); // detached and unlinked meanwhile: lock the new file
    }
}

DevLock::~DevLock() {
    if (dev_.empty()) return;
    auto &h = held();
    auto it = h.find(dev_);
    if (it == h.end() || --it->second.count > 0) return;
    (void)!ftruncate(it->second.fd, 0); // no holder's pid left behind
    close(it->second.fd);               // releases the flock
    h.erase(it);
}

} // namespace pspxdp::common
