// The daemon as a process: pidfile, spawn (detached, logging to
// /run/pspxdp/DEV.log), liveness, stop (SIGTERM, wait, SIGKILL).
#pragma once

#include "common/paths.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pspxdp::setup {

using common::Paths;

// The pid in DEV's pidfile if that process is alive and is pspxdp working on
// DEV (its argv names DEV: a pid from a stale pidfile may have been reused);
// 0 otherwise.
pid_t running_pid(const Paths &p);

// The network namespace inode of a process; 0 if it cannot be read.
uint64_t netns_of(pid_t pid);

// Writes the pidfile (pid, newline). Mode 0644.
Result<void> write_pidfile(const Paths &p, pid_t pid);
// Removes the pidfile if it still holds pid (a newer daemon may own it).
void remove_pidfile(const Paths &p, pid_t pid);

// Forks and execs `/proc/self/exe daemon DEV args...` in a new session with
// stdin /dev/null and stdout/stderr appended to the log file. Returns its pid.
Result<pid_t> spawn(const Paths &p, const std::vector<std::string> &args);

// Waits until the daemon's heartbeat shows up in pacer_state (it is up) or
// the process dies (error carrying the log's last lines) or timeout.
Result<void> wait_started(const Paths &p, pid_t pid, int timeout_ms);

// SIGTERM, wait up to timeout_ms, then SIGKILL. True if a daemon was stopped.
Result<bool> stop(const Paths &p, int timeout_ms);

// Last n lines of the log (for error messages).
std::string log_tail(const Paths &p, int n);

} // namespace pspxdp::setup
