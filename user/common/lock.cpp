#include "common/lock.hpp"

#include "common/caps.hpp"
#include "common/text.hpp"

#include <cerrno>
#include <fcntl.h>
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
} // namespace

Result<void> ensure_run_dir() { return mkdir_p(kRunDir, 0755); }

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
        int fd = open(p.lock.c_str(), flags, 0600);
        if (fd < 0 && errno == ENOENT && create == Create::No)
            return refuse(p.dev + " is not attached (pspxdp attach " + p.dev + ")");
        if (fd < 0) return err(path_error("locking " + p.dev, p.lock, errno));
        if (flock(fd, LOCK_EX | (wait == Wait::Yes ? 0 : LOCK_NB)) < 0) {
            int e = errno;
            close(fd);
            if (e == EWOULDBLOCK)
                return err("another pspxdp command is working on " + p.dev + " (" + p.lock + ")");
            return err("locking " + p.lock + ": " + errno_text(e));
        }
        struct stat locked {
        }, now{};
        if (fstat(fd, &locked) == 0 && stat(p.lock.c_str(), &now) == 0 &&
            locked.st_ino == now.st_ino && locked.st_dev == now.st_dev) {
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
    close(it->second.fd); // releases the flock
    h.erase(it);
}

} // namespace pspxdp::common
