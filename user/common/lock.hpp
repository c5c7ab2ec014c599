// The one lock of a device: flock on /run/pspxdp/DEV.lock. attach, detach,
// the daemon's own clean-up and every configuration change (class, filter,
// default) take it, so two commands on one device never interleave and a
// `class set` racing a `detach` ends with one of them refused cleanly.
// Read-only commands (status, show) do not lock.
//
// The lock file is removed when the device is detached. A waiter that was
// blocked on the removed file would otherwise hold a lock nobody else sees,
// so acquire() checks, once it holds the flock, that the file it locked is
// still the one at the path, and starts over if not.
//
// Re-entrant within a process: an attach that fails after it created things
// detaches (which locks) under the lock it holds.
#pragma once

#include "common/paths.hpp"
#include "core/result.hpp"

#include <string>
#include <sys/types.h>

namespace pspxdp::common {

class DevLock {
  public:
    enum class Wait { No, Yes };
    // Create::No (a configuration change): only an attached device has a
    // lock file; when there is none (never attached, or a detach removed it
    // while we waited) the answer is "not attached" (exit 2) and nothing is
    // created. Create::Yes (attach, detach) makes /run/pspxdp and the file.
    enum class Create { No, Yes };
    static Result<DevLock> acquire(const Paths &p, Wait wait, Create create = Create::Yes);
    DevLock() = default; // holds nothing
    DevLock(DevLock &&o) noexcept : dev_(std::move(o.dev_)) { o.dev_.clear(); }
    DevLock &operator=(DevLock &&) = delete;
    void swap(DevLock &o) noexcept { dev_.swap(o.dev_); }
    DevLock(const DevLock &) = delete;
    ~DevLock();
    // The device this lock is held on; empty when it holds nothing.
    const std::string &dev() const { return dev_; }

  private:
    explicit DevLock(std::string dev) : dev_(std::move(dev)) {}
    std::string dev_; // empty when moved from
};

// The pid of another process holding DEV's lock now, 0 if none (or the lock
// file cannot be read): status and attach name who is at work on DEV.
pid_t lock_holder(const Paths &p);

// /run/pspxdp, created 0755 when missing.
Result<void> ensure_run_dir();

} // namespace pspxdp::common
