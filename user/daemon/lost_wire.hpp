// The wire time the daemon lost by running late (daemon_stats lost_wire_ns:
// underruns on the byte clock, late wake-ups clockless), as people read it:
// the share of the last second (lost_wire_ppm, which status prints) and a
// log line at most once a minute. Pure: the loop gives it the time and the
// counter (docs/design.md §4.4).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace pspxdp::daemon {

inline constexpr uint64_t kLostWireLogEveryNs = 60'000'000'000; // one line a minute at most

class LostWire {
  public:
    using Log = std::function<void(const std::string &)>;
    // From now on; lost_ns: the counter now (a restarted daemon's is not 0).
    void start(uint64_t now_ns, uint64_t lost_ns);
    // About once a second: the counter now. Returns the share of the time
    // since the previous call that was lost, in parts per million (at most
    // 1,000,000). Logs the loss since the last line when there was one and
    // the last line is a minute old (the first one at once).
    uint64_t update(uint64_t now_ns, uint64_t lost_ns, const Log &log);

  private:
    uint64_t prev_ns_ = 0, prev_lost_ns_ = 0;
    uint64_t line_ns_ = 0, line_lost_ns_ = 0; // the last line (or the start)
    bool logged_ = false;
};

} // namespace pspxdp::daemon
