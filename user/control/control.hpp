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
#include "control/filter.hpp"
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
    pspxdp_class_tc_stats tc{};       // class_stats summed over CPUs
    // pacer_stats[config.slot] while that slot holds this class (the daemon
    // serves it, or drains it); else zeros and has_pacer false.
    bool has_pacer = false;
    pspxdp_class_counters pacer{};
};

// All of a class's drop_* counters: what the pacer threw away, whatever the cause.
inline uint64_t total_drops(const pspxdp_class_counters &c) {
    return c.drop_limit + c.drop_overflow + c.drop_deleted + c.drop_shutdown + c.drop_died +
           c.drop_invalid;
}

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
    // A new class gets a slot (slots.hpp); an existing one keeps its own.
    // Every change bumps pacer_state.config_gen, so the daemon applies it.
    Result<void> class_set(uint32_t classid, uint32_t kind, uint64_t rate_bps);
    // Any number of classes in one go: one lock, one read of class_config,
    // one line-rate check for all, one batched write, one config_gen bump.
    // Nothing is written when a check fails.
    struct ClassSpec {
        uint32_t classid;
        uint32_t kind;
        uint64_t rate_bps;
    };
    Result<void> class_set_many(std::vector<ClassSpec> specs);
    Result<void> class_del(uint32_t classid);
    // Configured classes plus any class that only appears in class_stats
    // (e.g. an unconfigured default class), sorted by class id.
    Result<std::vector<ClassInfo>> classes() const;

    // Filters (filter.hpp), in evaluation order: lowest pref first, equal
    // prefs in the order they were added.
    Result<std::vector<FilterSpec>> filters() const;
    Result<std::vector<FilterInfo>> filter_infos(bool with_stats) const;
    Result<void> filter_add(const FilterSpec &spec);
    // Returns the filters deleted.
    Result<std::vector<FilterSpec>> filter_del(const FilterSelect &sel);
    // Atomic: validates all, writes a diff, rolls back on a map error.
    Result<void> replace_filters(const std::vector<FilterSpec> &specs);

  private:
    Result<common::DevLock> lock();
    Result<bool> class_exists(uint32_t classid) const;
    FilterMaps filter_maps() const;

    std::string dev_;
    common::Paths paths_;
    Fd class_config_, class_stats_, pacer_stats_, pacer_state_;
    Fd filters_, filter_entries_, filter_shapes_, filter_state_, filter_stats_;
};

// DEV given: opens it. DEV omitted (nullptr): opens the only attached
// device, or explains why there is none to pick. Either way only if DEV is
// attached in this network namespace (setup::check_here): name, ifindex and
// namespace as attach recorded them.
Result<Device> open_device(const std::string *dev, common::Access access = common::Access::Write);

} // namespace pspxdp::control
