#include "common/ns.hpp"

#include "common/caps.hpp"
#include "common/fd.hpp"
#include "common/text.hpp"

#include <cerrno>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pspxdp::common {

namespace {
bool same_file(const char *a, const char *b) {
    struct stat sa {
    }, sb{};
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool inode_is(const std::string &path, uint64_t inode) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && uint64_t(st.st_ino) == inode;
}
} // namespace

namespace {
uint64_t cookie_of_current() {
    Fd sock(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    uint64_t cookie = 0;
    socklen_t len = sizeof(cookie);
    if (!sock.valid() || getsockopt(sock.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0)
        return 0;
    return cookie;
}

// The cookie of the network namespace at path (an nsfs file): a child
// enters it and reports, so this process stays where it is.
uint64_t cookie_of(const std::string &path) {
    Fd ns(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return 0;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t c = setns(ns.get(), CLONE_NEWNET) == 0 ? cookie_of_current() : 0;
        ssize_t w = write(pfd[1], &c, sizeof(c));
        _exit(w == sizeof(c) ? 0 : 1);
    }
    close(pfd[1]);
    uint64_t c = 0;
    if (pid < 0 || read(pfd[0], &c, sizeof(c)) != sizeof(c)) c = 0;
    close(pfd[0]);
    if (pid > 0) waitpid(pid, nullptr, 0);
    return c;
}
} // namespace

uint64_t netns_inode() {
    struct stat st {};
    if (stat("/proc/self/ns/net", &st) != 0) return 0;
    return st.st_ino;
}

NetnsId netns_here() { return NetnsId{netns_inode(), cookie_of_current()}; }

std::string netns_label(uint64_t inode) { return "net:[" + std::to_string(inode) + "]"; }

bool netns_exists(const NetnsId &id) {
    if (id.inode == 0) return false;
    auto matches = [&](const std::string &path) {
        if (!inode_is(path, id.inode)) return false;
        if (!id.cookie) return true;
        uint64_t c = cookie_of(path);
        return c == 0 || c == id.cookie; // cannot tell: assume it is (the safe answer)
    };
    if (DIR *d = opendir("/run/netns")) {
        bool found = false;
        while (dirent *e = readdir(d))
            if (e->d_name[0] != '.' && matches(std::string("/run/netns/") + e->d_name)) {
                found = true;
                break;
            }
        closedir(d);
        if (found) return true;
    }
    DIR *d = opendir("/proc");
    if (!d) return true; // cannot tell: assume it exists (the safe answer)
    bool found = false;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (matches(std::string("/proc/") + e->d_name + "/ns/net")) {
            found = true;
            break;
        }
    }
    closedir(d);
    return found;
}

namespace {
uint64_t inode_of(const std::string &path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

pid_t parent_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(f, line))
        if (line.starts_with("PPid:")) return pid_t(std::strtol(line.c_str() + 5, nullptr, 10));
    return 0;
}

// The mount namespace the other pspxdp commands see: PID 1's; where PID 1
// is hidden from us (some sandboxes), that of the nearest ancestor in
// another mount namespace - the shell `ip netns exec` was started from.
pid_t reference_process() {
    if (inode_of("/proc/1/ns/mnt")) return 1;
    const uint64_t self = inode_of("/proc/self/ns/mnt");
    for (pid_t p = getppid(); p > 1; p = parent_of(p)) {
        uint64_t ino = inode_of("/proc/" + std::to_string(p) + "/ns/mnt");
        if (ino && ino != self) return p;
    }
    return 0;
}
} // namespace

Result<bool> enter_host_mount_ns() {
    const pid_t ref = reference_process();
    if (!ref) return false; // no other mount namespace in sight: this is the host's
    const std::string root = "/proc/" + std::to_string(ref);
    if (same_file("/proc/self/ns/mnt", (root + "/ns/mnt").c_str())) return false;
    // Another mount namespace that sees the same bpffs and /run (a systemd
    // service with ProtectSystem=, a plain unshare -m) is fine: compare the
    // file systems, not the namespaces.
    struct stat ours {
    }, theirs{}, run_ours{}, run_theirs{};
    if (stat("/sys/fs/bpf", &ours) == 0 &&
        stat((root + "/root/sys/fs/bpf").c_str(), &theirs) == 0 && ours.st_dev == theirs.st_dev &&
        stat("/run", &run_ours) == 0 && stat((root + "/root/run").c_str(), &run_theirs) == 0 &&
        run_ours.st_dev == run_theirs.st_dev)
        return false;
    const std::string why =
        "this pspxdp runs in a private mount namespace (ip netns exec?) whose /sys/fs/bpf is "
        "not the host's: pins made here would be invisible to every other pspxdp command";
    if (!has_cap(CAP_SYS_ADMIN))
        return err(why + "; run it with nsenter --net=/run/netns/NS instead, or with "
                         "CAP_SYS_ADMIN (pspxdp then enters the host's mount namespace itself)");
    Fd ns(open((root + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return err(why + "; opening " + root + "/ns/mnt: " + errno_text(errno));
    Fd cwd(open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    char buf[4096];
    const char *cwd_path = getcwd(buf, sizeof(buf));
    if (setns(ns.get(), CLONE_NEWNS) != 0)
        return err(why + "; entering the mount namespace of pid " + std::to_string(ref) + ": " +
                   errno_text(errno));
    // setns() moved us to the new namespace's root: come back to where the
    // user was, so relative file names keep their meaning.
    if (!(cwd_path && chdir(cwd_path) == 0) && cwd.valid() && fchdir(cwd.get()) != 0)
        return err("entered the host's mount namespace but cannot return to the working directory");
    return true;
}

} // namespace pspxdp::common
