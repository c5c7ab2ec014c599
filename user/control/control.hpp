// The control plane: the maps pinned under /sys/fs/bpf/pspxdp/<DEV>/ by
// `pspxdp attach`, read and written through the bpf(2) syscall wrappers.
//
// Every mutation validates first and writes last, under the device's lock
// (common::DevLock, shared with attach and detach), so a refused command
// changes nothing, two concurrent `pspxdp class set` cannot both pass the
// line-rate check, and a `class set` racing a `detach` is refused cleanly.
#pragma once

#include "common/fd.hpp"
#include "common/lock.hpp"
#include "common/paths.hpp"
#include "common/pins.hpp"
#include "control/selector.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::control {

using common::Fd;

struct ClassInfo {
    uint32_t classid = 0;
    bool configured = false; // in class_config (else only seen in stats)
    pspxdp_class_config config{};
    uint32_t queue = 0;            // class_slot, 0 = not served
    pspxdp_class_tc_stats tc{};       // class_stats summed over CPUs
    bool has_pacer = false;
    pspxdp_pacer_stats pacer{};
};

struct FilterInfo {
    Selector selector;
    uint32_t classid = 0;
};

// The pin directory of a device, e.g. "/sys/fs/bpf/pspxdp/eth0".
std::string pin_dir(const std::string &dev);
// Devices with a pin directory, sorted.
std::vector<std::string> attached_devices();

class Device {
  public:
    // Opens the pins (checked device name; read-only unless write); "eth0
    // is not attached" if the directory or a required map is missing.
    static Result<Device> open(const std::string &dev, common::Access access = common::Access::Write);

    const std::string &name() const { return dev_; }

    Result<pspxdp_pacer_state> state() const;

    // kind PSPXDP_CLASS_PACED needs rate_bps > 0; a normal class ignores it.
    Result<void> class_set(uint32_t classid, uint32_t kind, uint64_t rate_bps);
    Result<void> class_del(uint32_t classid);
    // Configured classes plus any class that only appears in class_stats
    // (e.g. an unconfigured default class), sorted by class id.
    Result<std::vector<ClassInfo>> classes() const;

    Result<void> filter_add(const Selector &selector, uint32_t classid);
    Result<void> filter_del(const Selector &selector);
    // Port rules first, then prefixes (the classifier's lookup order).
    Result<std::vector<FilterInfo>> filters() const;

  private:
    Result<common::DevLock> lock();
    Result<bool> class_exists(uint32_t classid) const;
    int rules_fd(const Selector &s) const;

    std::string dev_;
    common::Paths paths_;
    Fd class_config_, class_slot_, class_stats_, pacer_stats_, pacer_state_;
    Fd dst_v4_, src_v4_, dst_v6_, src_v6_, port_;
};

// DEV given: opens it. DEV omitted (nullptr): opens the only attached
// device, or explains why there is none to pick. Either way only if DEV is
// attached in this network namespace (setup::check_here): name, ifindex and
// namespace as attach recorded them.
Result<Device> open_device(const std::string *dev, common::Access access = common::Access::Write);

} // namespace pspxdp::control
