// Moved to setup/process.hpp (the attach library starts and stops the
// daemon); kept so the daemon's sources need not change their includes.
#pragma once

#include "setup/process.hpp"

namespace pspxdp::daemon {
using setup::log_tail;
using setup::running_pid;
using setup::spawn;
using setup::stop;
using setup::wait_started;
} // namespace pspxdp::daemon
