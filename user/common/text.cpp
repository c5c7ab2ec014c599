#include "common/text.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <net/if.h>

namespace pspxdp::common {

std::string errno_text(int err) {
    return std::strerror(err < 0 ? -err : err);
}

Result<void> check_dev_name(std::string_view name) {
    auto bad = [&](const std::string &why) {
        return refuse("device name " + quote(name) + ": " + why); // a word no device can have
    };
    if (name.empty()) return bad("empty");
    if (name.size() >= IFNAMSIZ)
        return bad("longer than " + std::to_string(IFNAMSIZ - 1) + " bytes");
    if (name == "." || name == "..") return bad("not a device name");
    for (unsigned char c : name) {
        if (c == '/') return bad("contains '/'");
        if (c == ':') return bad("contains ':'");
        if (c <= ' ' || c >= 0x7f) return bad("contains a space or a non-printable character");
    }
    return {};
}

Result<uint64_t> parse_u64(const std::string &what, const std::string &word, uint64_t lo,
                           uint64_t hi) {
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(word.c_str(), &end, 10);
    if (word.empty() || word[0] < '0' || word[0] > '9' || *end || errno || v < lo || v > hi)
        return err(what + " " + quote(word) + ": expected an integer in " + std::to_string(lo) +
                   ".." + std::to_string(hi));
    return uint64_t(v);
}

} // namespace pspxdp::common
