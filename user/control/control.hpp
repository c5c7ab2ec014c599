// The control plane: the maps pinned under /sys/fs/bpf/pspxdp/<DEV>/ by
// `pspxdp attach`, read and written through the bpf(2) syscall wrappers.
//
// A Device opened for changes holds DEV's lock (/run/pspxdp/DEV.lock, the
// lock attach and detach take) from open to destruction and checks, under
// it, that DEV is still attached: two CLI calls cannot interleave, and a
// change racing a detach either finishes before it or is refused cleanly
// ("not attached"). Every change validates first and writes last, so a
// refused command changes nothing; then it bumps pacer_state.config_gen, the
// daemon's cue to re-read its configuration.
//
// A Device opened for reading takes no lock and opens the pins read-only
// (BPF_F_RDONLY): show and stats work for any user allowed to read the pins.
#pragma once

#include "common/fd.hpp"
#include "common/lock.hpp"
#include "common/paths.hpp"
#include "control/config.hpp"
#include "control/filter.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pspxdp::control {

using common::Fd;

struct ClassInfo {
    uint32_t classid = 0;
    bool configured = false; // in class_config (else only seen in class_stats)
    pspxdp_class_config config{};
    pspxdp_class_tc_stats tc{}; // class_stats summed over CPUs
    // The pacer's side: served means the daemon has the class (TC hands its
    // frames over); state and counters come from pacer_stats[slot].
    bool served = false;
    pspxdp_slot_state state = PSPXDP_SLOT_FREE;
    pspxdp_class_counters pacer{};
};

struct DeviceCounters {
    pspxdp_tc_counters tc{};   // tc_stats summed over CPUs
    pspxdp_xdp_counters xdp{}; // xdp_stats summed over CPUs
    bool have_daemon = false;  // daemon_stats read
    pspxdp_daemon_stats daemon{};
    bool have_lateness = false; // the lateness pin read
    pspxdp_lateness lateness{}; // the daemon's release-lateness histogram
};

// All of a class's drop_* counters: what the pacer threw away, whatever the cause.
inline uint64_t total_drops(const pspxdp_class_counters &c) {
    return c.drop_limit + c.drop_overflow + c.drop_deleted + c.drop_shutdown + c.drop_died +
           c.drop_invalid;
}

// Devices with a pin directory, sorted.
std::vector<std::string> attached_devices();

enum class Access {
    Read,   // no lock, pins opened read-only
    Change, // takes DEV's lock (waits for it) and checks DEV is attached
};

// What apply changed.
struct ApplySummary {
    size_t classes_added = 0, classes_changed = 0, classes_deleted = 0;
    size_t filters_added = 0, filters_deleted = 0;
    bool default_changed = false, line_rate_changed = false, prio_direct_changed = false;
    bool nothing() const {
        return !classes_added && !classes_changed && !classes_deleted && !filters_added &&
               !filters_deleted && !default_changed && !line_rate_changed && !prio_direct_changed;
    }
    // "2 classes changed, 1 filter added"; "nothing to change".
    std::string text() const;
};

class Device {
  public:
    // "eth0 is not attached" (exit 2) if the directory or a required map is missing.
    static Result<Device> open(const std::string &dev, Access access);
    // For changes under DEV's lock that the caller holds already (attach
    // --config applies the file under the lock attach took, so no other
    // command sees DEV attached without its configuration). The Device
    // does not hold the lock: `held` must outlive it.
    static Result<Device> open_locked(const common::DevLock &held);

    const std::string &name() const { return dev_; }

    Result<pspxdp_pacer_state> state() const;
    // The device's MTU now: what bounds a class's rate (check_rates).
    Result<uint32_t> mtu() const;
    // Configured classes plus any class that only appears in class_stats,
    // sorted by class id.
    Result<std::vector<ClassInfo>> classes() const;
    Result<DeviceCounters> counters() const;
    // Filters (filter.hpp), in evaluation order: lowest pref first, equal
    // prefs in the order they were added.
    Result<std::vector<FilterSpec>> filters() const;
    Result<std::vector<FilterInfo>> filter_infos(bool with_stats) const;
    // The live configuration: line rate, classes, default class, filters.
    Result<Config> config() const;

    // tc semantics: Add fails if the class exists, Change if it does not,
    // Set does either. The whole class is replaced by spec (what is not
    // given is the default), its slot kept.
    enum class Put { Add, Change, Set };
    Result<void> class_put(Put how, const ClassSpec &spec) { return class_put_many(how, {spec}); }
    // Any number of classes as one change: all checked first (a class given
    // twice: the last counts), one batch write in the order given, one
    // config_gen. `before_write` as for set_rate.
    Result<void> class_put_many(Put how, const std::vector<ClassSpec> &specs,
                                const std::function<Result<void>()> &before_write = {});
    Result<void> class_del(uint32_t classid);
    // A paced class's rate, the rest of it kept (what `class change` with
    // every other parameter as it is does): one lookup, one update, one
    // config_gen bump. A raise is checked against the line rate as any
    // class change is (one batched read of the classes); a lowering needs
    // no check. `before_write`, if given, runs under DEV's lock right
    // before the write: an error from it is returned with nothing written
    // (the cluster agent proves there that the rate is still its own).
    // Returns the rate the class had.
    Result<uint64_t> set_rate(uint32_t classid, uint64_t rate_bps,
                              const std::function<Result<void>()> &before_write = {});
    Result<void> set_default(uint32_t classid);
    // Refused if the paced classes would not fit the new rate.
    Result<void> set_line_rate(uint64_t line_rate_bps);
    // skb->priority naming a class picks it before the filters (htb's rule,
    // the default) or not: PSPXDP_STATE_F_PRIO_DIRECT_OFF.
    Result<void> set_prio_direct(bool on);
    // Makes the device's configuration c, or changes nothing: c is checked
    // whole first; a write that fails is rolled back.
    Result<ApplySummary> apply(const Config &c);

    // The filter's class must exist.
    Result<void> filter_add(const FilterSpec &spec);
    // Returns the filters deleted.
    Result<std::vector<FilterSpec>> filter_del(const FilterSelect &sel);
    // Atomic: validates all, writes a diff, rolls back on a map error.
    Result<void> replace_filters(const std::vector<FilterSpec> &specs);

  private:
    static Result<Device> open_as(const std::string &dev, Access access,
                                  const common::DevLock *held);
    Result<void> require_change() const;
    Result<std::vector<ClassSpec>> class_specs() const;
    // class_config in one batched read (100,000 classes in milliseconds).
    Result<std::vector<std::pair<ClassSpec, uint32_t>>> class_specs_with_slots() const;
    Result<bool> class_exists(uint32_t classid) const;
    // Refuses ("class X does not exist on DEV" + hint) unless classid exists.
    Result<void> require_class(uint32_t classid, const std::string &hint) const;
    FilterMaps filter_maps() const;
    // Writes fields of pacer_state (default class, line rate) and bumps
    // config_gen.
    Result<void> update_pacer_state(const std::optional<uint32_t> &default_classid,
                                    const std::optional<uint64_t> &line_rate_bps);
    Result<void> bump_config_gen() { return update_pacer_state(std::nullopt, std::nullopt); }
    Result<void> write_classes(const std::vector<uint32_t> &ids,
                               const std::vector<pspxdp_class_config> &values);
    Result<void> delete_classes(const std::vector<uint32_t> &ids);

    std::string dev_;
    common::Paths paths_;
    Access access_ = Access::Read;
    std::optional<common::DevLock> lock_;
    Fd class_config_, class_stats_, pacer_stats_, pacer_state_, daemon_stats_, tc_stats_,
        xdp_stats_, lateness_;
    Fd filters_, filter_entries_, filter_shapes_, filter_state_, filter_stats_;
};

// DEV given: opens it. DEV omitted (nullptr): opens the only attached
// device, or explains why there is none to pick.
Result<Device> open_device(const std::string *dev, Access access);

} // namespace pspxdp::control
