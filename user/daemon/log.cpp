#include "daemon/log.hpp"

#include "core/units.hpp"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <ctime>

namespace pspxdp::daemon {

namespace {
std::string g_dev;
}

void set_log_device(const std::string &dev) {
    g_dev = dev;
}

void logf(const char *fmt, ...) {
    char ts[32];
    time_t t = time(nullptr);
    tm tmv;
    localtime_r(&t, &tmv);
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tmv);
    std::fprintf(stderr, "%s pspxdp daemon %s: ", ts, g_dev.c_str());
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

std::string classid_text(uint32_t classid) {
    return format_classid(ClassId::from_raw(classid));
}

} // namespace pspxdp::daemon
