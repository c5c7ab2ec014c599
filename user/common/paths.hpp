// Where pspxdp keeps things, per device. Everything is keyed by the device
// name, which is checked (check_dev_name) before any of these paths exists:
//
//   /sys/fs/bpf/pspxdp/DEV/<map>   pinned maps (the control plane; bpftool)
//   /run/pspxdp/DEV.lock           the device's one lock (DevLock)
//   /run/pspxdp/DEV.state          what attach created, and where (identity)
//   /run/pspxdp/DEV.pid, DEV.log   the daemon
#pragma once

#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <string>
#include <string_view>

namespace pspxdp::common {

inline constexpr const char *kRunDir = "/run/pspxdp";
// Members of this group may read every attached device's pins (status,
// show, stats, save without privileges) when it exists: attach gives it
// DEV's pin directory and pins; the package creates it.
inline constexpr const char *kReadGroup = "pspxdp";
inline constexpr const char *kPinRoot = PSPXDP_PIN_ROOT;

struct Paths {
    std::string dev;
    std::string pin_dir;
    std::string lock;
    std::string state;
    std::string pid;
    std::string log;
    std::string pin(std::string_view map) const { return pin_dir + "/" + std::string(map); }
};

// The paths of DEV, or the name check's error.
Result<Paths> paths_for(std::string_view dev);

// mkdir -p with mode for the parts it creates.
Result<void> mkdir_p(const std::string &path, unsigned mode);

} // namespace pspxdp::common
