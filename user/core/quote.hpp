// A user's word, quoted for a one-line message: "eth0". Quotes, backslashes,
// control characters and bytes outside printable ASCII are escaped (\n, \",
// \x1b), so a hostile word can neither span lines nor forge output. Pure, so
// core's parsers use it too.
#pragma once

#include <string>
#include <string_view>

namespace pspxdp {

std::string quote(std::string_view word);

} // namespace pspxdp
