#include "core/quote.hpp"

#include <cstdio>

namespace pspxdp {

std::string quote(std::string_view word) {
    std::string out = "\"";
    for (unsigned char c : word) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
            if (c < 0x20 || c >= 0x7f) {
                char hex[5];
                std::snprintf(hex, sizeof(hex), "\\x%02x", c);
                out += hex;
            } else {
                out += char(c);
            }
        }
    }
    return out + "\"";
}

} // namespace pspxdp
