// The daemon's log: one line per event on stderr, which is one of
//   - the journal (under systemd: JOURNAL_STREAM names stderr): each line
//     carries an sd-daemon priority prefix ("<6>") and no time stamp, the
//     journal has both;
//   - /run/pspxdp/DEV.log (a daemon attach started): stamped with the time
//     and the device, and rotated at kLogMaxBytes to DEV.log.1 (one old
//     file kept), so it never grows past twice that;
//   - a terminal (attach --foreground by hand): stamped, never rotated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::daemon {

inline constexpr uint64_t kLogMaxBytes = 4ull << 20;

// Names the device in every line and looks at what stderr is (above). A
// regular file is rotated at max_bytes.
void set_log_device(const std::string &dev, uint64_t max_bytes = kLogMaxBytes);
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
