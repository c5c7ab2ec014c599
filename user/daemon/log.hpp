// The daemon's log: one line per event on stderr (attach sends it to
// /run/pspxdp/DEV.log), stamped with the time and the device.
#pragma once

#include <string>

namespace pspxdp::daemon {

void set_log_device(const std::string &dev);
__attribute__((format(printf, 1, 2))) void logf(const char *fmt, ...);

// "1:ffff", for log lines.
std::string classid_text(uint32_t classid);

} // namespace pspxdp::daemon
