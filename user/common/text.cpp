#include "common/text.hpp"

#include <cstring>
#include <net/if.h>

namespace pspxdp::common {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

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

} // namespace pspxdp::common
