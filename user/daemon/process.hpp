// The daemon as a process: pidfile, spawn (detached, logging to
// /run/pspxdp/DEV.log), liveness, stop (SIGTERM, wait, SIGKILL).
#pragma once

#include "core/result.hpp"
#include "setup/loader.hpp"

#include <string>
#include <sys/types.h>
#include <vector>

namespace pspxdp::daemon {

// The pid in DEV's pidfile if that process is alive and is a pspxdp; 0 otherwise.
pid_t running_pid(const setup::Paths &p);

// Forks and execs `/proc/self/exe daemon DEV args...` in a new session with
// stdin /dev/null and stdout/stderr appended to the log file. Returns its pid.
Result<pid_t> spawn(const setup::Paths &p, const std::vector<std::string> &args);

// Waits until the daemon's heartbeat shows up in pacer_state (it is up) or
// the process dies (error carrying the log's last lines) or timeout.
Result<void> wait_started(const setup::Paths &p, pid_t pid, int timeout_ms);

// SIGTERM, wait up to timeout_ms, then SIGKILL. True if a daemon was stopped.
Result<bool> stop(const setup::Paths &p, int timeout_ms);

// Last n lines of the log (for error messages).
std::string log_tail(const setup::Paths &p, int n);

} // namespace pspxdp::daemon
