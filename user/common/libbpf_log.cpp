#include "common/libbpf_log.hpp"

#include <bpf/libbpf.h>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace pspxdp::common {

namespace {
std::string g_last;
bool g_debug = false;

int printer(enum libbpf_print_level level, const char *fmt, va_list ap) {
    if (g_debug) return std::vfprintf(stderr, fmt, ap);
    if (level != LIBBPF_WARN) return 0;
    char buf[512];
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) g_last = line;
    return 0;
}
} // namespace

void install_libbpf_printer() {
    const char *d = std::getenv("PSPXDP_DEBUG");
    g_debug = d && *d && *d != '0';
    libbpf_set_print(printer);
}

std::string take_libbpf_warning() {
    std::string s;
    s.swap(g_last);
    return s;
}

} // namespace pspxdp::common
