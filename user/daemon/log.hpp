// The daemon's log: one line per event on stderr (attach sends it to
// /run/pspxdp/DEV.log), stamped with the time and the device.
#pragma once

#include <string>
#include <vector>

namespace pspxdp::daemon {

void set_log_device(const std::string &dev);
__attribute__((format(printf, 1, 2))) void logf(const char *fmt, ...);

// Lines about many classes at once (a reconcile adding 10,000): the first
// few as they are, then one line with how many more. A log line is a
// syscall; 10,000 of them delay the loop and fill the log.
class LogBatch {
  public:
    __attribute__((format(printf, 2, 3))) void add(const char *fmt, ...);
    // Writes what was added (at most kLines lines, then "... and N more
    // <what>"), and empties the batch.
    void flush(const char *what);

  private:
    static constexpr size_t kLines = 8;
    std::vector<std::string> lines_;
    size_t more_ = 0;
};

} // namespace pspxdp::daemon
