// The control plane: the maps pinned under /sys/fs/bpf/pspxdp/<DEV>/ by
// `pspxdp attach`, read and written through the bpf(2) syscall wrappers.
//
// Every mutation validates first and writes last, under an flock on the
// device's pin directory, so a refused command changes nothing and two
// concurrent `pspxdp class set` cannot both pass the line-rate check.
#pragma once

#include "control/filter.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::control {

// An owned file descriptor.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd &&o) noexcept : fd_(o.release()) {}
    Fd &operator=(Fd &&o) noexcept;
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    ~Fd();
    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }

  private:
    int fd_ = -1;
};

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
    // Opens the pins; "eth0: not attached" if the directory or a required
    // map is missing.
    static Result<Device> open(const std::string &dev);

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
    Result<void> lock();
    Result<bool> class_exists(uint32_t classid) const;
    FilterMaps filter_maps() const;

    std::string dev_;
    Fd dir_;
    Fd class_config_, class_stats_, pacer_stats_, pacer_state_;
    Fd filters_, filter_entries_, filter_shapes_, filter_state_, filter_stats_;
};

// DEV given: opens it. DEV omitted (nullptr): opens the only attached
// device, or explains why there is none to pick.
Result<Device> open_device(const std::string *dev);

} // namespace pspxdp::control
