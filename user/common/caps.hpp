// Capabilities: what a command needs, checked before it acts, so a user
// without privileges reads "needs CAP_NET_ADMIN" instead of a raw
// "Permission denied" on some path.
#pragma once

#include "core/result.hpp"

#include <initializer_list>
#include <linux/capability.h>
#include <string>

namespace pspxdp::common {

// Is cap in this process's effective set? CAP_BPF also counts as held with
// CAP_SYS_ADMIN, as the kernel's bpf_capable() does.
bool has_cap(int cap);
// "CAP_NET_ADMIN", ...
std::string cap_name(int cap);

// Ok if every cap is held; else "WHAT needs CAP_X and CAP_Y (missing: CAP_Y;
// run it as root)".
Result<void> need_caps(const std::string &what, std::initializer_list<int> caps);

// For an EACCES/EPERM on a path that needs nothing but file permission
// (pins, run files): "WHAT: PATH is root's: run as root (or with
// CAP_DAC_OVERRIDE)"; other errors: "WHAT: PATH: <strerror>".
std::string path_error(const std::string &what, const std::string &path, int err);

} // namespace pspxdp::common
