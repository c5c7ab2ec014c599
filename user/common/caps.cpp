#include "common/caps.hpp"

#include "common/text.hpp"

#include <cerrno>
#include <cstdint>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

namespace pspxdp::common {

namespace {
bool effective(int cap) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &hdr, data) != 0) return false;
    if (cap < 0 || cap >= 32 * _LINUX_CAPABILITY_U32S_3) return false;
    return data[cap / 32].effective & (1u << (cap % 32));
}
} // namespace

bool has_cap(int cap) {
    if (cap == CAP_BPF) return effective(CAP_BPF) || effective(CAP_SYS_ADMIN);
    return effective(cap);
}

std::string cap_name(int cap) {
    switch (cap) {
    case CAP_DAC_OVERRIDE: return "CAP_DAC_OVERRIDE";
    case CAP_DAC_READ_SEARCH: return "CAP_DAC_READ_SEARCH";
    case CAP_KILL: return "CAP_KILL";
    case CAP_NET_ADMIN: return "CAP_NET_ADMIN";
    case CAP_NET_RAW: return "CAP_NET_RAW";
    case CAP_SYS_ADMIN: return "CAP_SYS_ADMIN";
    case CAP_PERFMON: return "CAP_PERFMON";
    case CAP_BPF: return "CAP_BPF";
    default: return "capability " + std::to_string(cap);
    }
}

Result<void> need_caps(const std::string &what, std::initializer_list<int> caps) {
    std::string all, missing;
    size_t i = 0, n = caps.size();
    for (int c : caps) {
        all += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + cap_name(c);
        ++i;
        if (!has_cap(c)) missing += (missing.empty() ? "" : ", ") + cap_name(c);
    }
    if (missing.empty()) return {};
    return err(what + " needs " + all + " (missing: " + missing + "; run it as root)");
}

std::string path_error(const std::string &what, const std::string &path, int err) {
    if (err < 0) err = -err;
    if (err == EACCES || err == EPERM)
        return what + ": permission denied on " + path +
               " (root's: run as root, or with CAP_DAC_OVERRIDE)";
    return what + ": " + path + ": " + errno_text(err);
}

} // namespace pspxdp::common
