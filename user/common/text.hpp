// Words for people: errno text, user input echoed safely, device names
// checked before any path is built from them.
#pragma once

#include "core/quote.hpp"
#include "core/result.hpp"

#include <string>
#include <string_view>

namespace pspxdp::common {

// strerror of an errno value, either sign (libbpf returns -errno).
std::string errno_text(int err);

// quote(word): core/quote.hpp, here for everyone above core.
using pspxdp::quote;

// The one device-name check, made before a name becomes part of a path
// (/sys/fs/bpf/pspxdp/DEV, /run/pspxdp/DEV.*) or a netlink request. It is
// the kernel's dev_valid_name() (non-empty, shorter than IFNAMSIZ, not "."
// or "..", no '/', ':' or white space) restricted to printable ASCII. The
// error names the word and what is wrong with it.
Result<void> check_dev_name(std::string_view name);

} // namespace pspxdp::common
