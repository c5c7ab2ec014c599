#include "daemon/log.hpp"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace pspxdp::daemon {

namespace {
std::string g_dev;
}

void set_log_device(const std::string &dev) { g_dev = dev; }

void logf(const char *fmt, ...) {
    char ts[32];
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    tm tmv;
    localtime_r(&now.tv_sec, &tmv);
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tmv);
    // Milliseconds: how fast a configuration change takes effect shows here.
    std::fprintf(stderr, "%s.%03ld pspxdp daemon %s: ", ts, now.tv_nsec / 1'000'000, g_dev.c_str());
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

void LogBatch::add(const char *fmt, ...) {
    if (lines_.size() >= kLines) {
        ++more_;
        return;
    }
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    lines_.emplace_back(buf);
}

void LogBatch::flush(const char *what) {
    for (const auto &l : lines_) logf("%s", l.c_str());
    if (more_) logf("... and %zu more %s", more_, what);
    lines_.clear();
    more_ = 0;
}

} // namespace pspxdp::daemon
