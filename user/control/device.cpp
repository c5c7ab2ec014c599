// Device: opening an attached DEV (lock, identity, pins), its state and
// counters, the pacer_state writes and the filters (filter.cpp does the work
// on the maps). The classes are classes.cpp's, a whole configuration apply.cpp's.
#include "control/control.hpp"

#include "common/pins.hpp"
#include "common/text.hpp"
#include "setup/attach.hpp"
#include "setup/netlink.hpp"

#include <bpf/bpf.h>
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace pspxdp::control {

using common::errno_text;

std::vector<std::string> attached_devices() {
    std::vector<std::string> out;
    DIR *d = opendir(common::kPinRoot);
    if (!d) return out;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.' || e->d_type != DT_DIR) continue;
        out.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

Result<Device> Device::open(const std::string &dev, Access access) {
    return open_as(dev, access, nullptr);
}

Result<Device> Device::open_locked(const common::DevLock &held) {
    if (held.dev().empty())
        return err("internal: opening a device under a lock that holds nothing");
    return open_as(held.dev(), Access::Change, &held);
}

Result<Device> Device::open_as(const std::string &dev, Access access, const common::DevLock *held) {
    auto paths = common::paths_for(dev); // refuses a name no device can have
    if (!paths) return paths.failure();
    Device d;
    d.dev_ = dev;
    d.paths_ = *paths;
    d.access_ = access;
    if (access != Access::Read && !held) {
        // Only an attached DEV has a lock file: taking the lock of one that
        // is not attached would leave files behind.
        if (::access(paths->state.c_str(), F_OK) != 0 && errno == ENOENT &&
            ::access(paths->pin_dir.c_str(), F_OK) != 0)
            return refuse(dev + " is not attached (pspxdp attach " + dev + ")");
        // Create::No: a detach that ran while we waited removed the lock
        // file (and maybe /run/pspxdp): not attached, and nothing recreated.
        using common::DevLock;
        auto lock = DevLock::acquire(*paths, DevLock::Wait::Yes, DevLock::Create::No);
        if (!lock && lock.exit_code() == 2 && ::access(paths->state.c_str(), F_OK) == 0)
            return refuse(paths->lock + " is gone (removed by hand?): pspxdp detach " + dev +
                          " and attach again");
        if (!lock) return lock.failure();
        d.lock_.emplace(std::move(lock.value()));
    }
    // Attached here: name, ifindex and network namespace as attach recorded
    // them (under the lock for a change: a detach that ran while we waited
    // removed the state).
    if (auto st = setup::check_here(*paths); !st) return refuse(st.error());
    using common::Need;
    const common::Access how =
        access == Access::Read ? common::Access::Read : common::Access::Write;
    struct Want {
        Fd *fd;
        const char *name;
        uint32_t key, value;
        Need need;
    };
    const Want want[] = {
        {&d.class_config_, "class_config", 4, sizeof(pspxdp_class_config), Need::Required},
        {&d.pacer_state_, "pacer_state", 4, sizeof(pspxdp_pacer_state), Need::Required},
        {&d.pacer_stats_, "pacer_stats", 4, sizeof(pspxdp_class_counters), Need::Required},
        {&d.filters_, "filters", 4, sizeof(pspxdp_filter), Need::Required},
        {&d.filter_entries_, "filter_entries", sizeof(pspxdp_filter_key),
         sizeof(pspxdp_filter_entry), Need::Required},
        {&d.filter_shapes_, "filter_shapes", 4, sizeof(pspxdp_filter_shape_slot), Need::Required},
        {&d.filter_state_, "filter_state", 4, sizeof(pspxdp_filter_state), Need::Required},
        // Counters: a missing one prints as zeros.
        {&d.filter_stats_, "filter_stats", 4, sizeof(pspxdp_filter_stats), Need::Optional},
        {&d.class_stats_, "class_stats", 4, sizeof(pspxdp_class_tc_stats), Need::Optional},
        {&d.daemon_stats_, "daemon_stats", 4, sizeof(pspxdp_daemon_stats), Need::Optional},
        {&d.tc_stats_, "tc_stats", 4, sizeof(pspxdp_tc_counters), Need::Optional},
        {&d.xdp_stats_, "xdp_stats", 4, sizeof(pspxdp_xdp_counters), Need::Optional},
        {&d.lateness_, "lateness", 4, sizeof(pspxdp_lateness), Need::Optional},
    };
    // pacer_stats is read in place (PacerStatsView), and a read-only fd cannot
    // be mapped: a reader who may write the pin (root) opens it writable and
    // maps it read-only, instead of copying 14 MB in batches on every show
    // (tens of ms, enough to make a live heartbeat look stale).
    if (access == Access::Read)
        if (auto fd =
                common::open_pinned_map(d.paths_, "pacer_stats", 4, sizeof(pspxdp_class_counters),
                                        common::Access::Write, Need::Required))
            d.pacer_stats_ = std::move(fd.value());
    for (const Want &w : want) {
        if (w.fd->valid()) continue;
        auto fd = common::open_pinned_map(d.paths_, w.name, w.key, w.value, how, w.need);
        if (!fd) return fd.failure();
        *w.fd = std::move(fd.value());
    }
    return d;
}

Result<void> Device::require_change() const {
    if (access_ == Access::Read) return err("internal: " + dev_ + " was opened read-only");
    return {};
}

Result<pspxdp_pacer_state> Device::state() const {
    uint32_t key = 0;
    pspxdp_pacer_state st{};
    if (bpf_map_lookup_elem(pacer_state_.get(), &key, &st) != 0)
        return err(dev_ + ": read pacer_state: " + errno_text(errno));
    return st;
}

Result<uint32_t> Device::mtu() const {
    // open() checked that dev_ here is the attached device (name, ifindex,
    // network namespace).
    auto link = setup::get_link(dev_);
    if (!link) return err(dev_ + ": " + link.error());
    return link->mtu;
}

Result<DeviceCounters> Device::counters() const {
    DeviceCounters d;
    const uint32_t zero = 0;
    common::percpu_sum(tc_stats_.get(), &zero, d.tc);
    common::percpu_sum(xdp_stats_.get(), &zero, d.xdp);
    if (daemon_stats_.valid())
        d.have_daemon = bpf_map_lookup_elem(daemon_stats_.get(), &zero, &d.daemon) == 0;
    if (lateness_.valid())
        d.have_lateness = bpf_map_lookup_elem(lateness_.get(), &zero, &d.lateness) == 0;
    return d;
}

// ---- pacer_state writes

Result<void> Device::update_pacer_state(const std::optional<uint32_t> &default_classid,
                                        const std::optional<uint64_t> &line_rate_bps) {
    if (auto r = require_change(); !r) return r;
    // The daemon writes its heartbeat in place: write only our fields, in
    // place too, then the generation that tells it to re-read.
    auto v = common::MapView::of(pacer_state_.get(), sizeof(pspxdp_pacer_state), true);
    if (!v) return err(dev_ + ": " + v.error());
    auto *st = v->as<pspxdp_pacer_state>();
    if (default_classid) {
        __u32 raw = *default_classid;
        __atomic_store_n(reinterpret_cast<__u32 *>(&st->default_classid), raw, __ATOMIC_RELEASE);
    }
    if (line_rate_bps) __atomic_store_n(&st->line_rate_bps, *line_rate_bps, __ATOMIC_RELEASE);
    __atomic_fetch_add(&st->config_gen, 1, __ATOMIC_RELEASE);
    return {};
}

Result<void> Device::set_prio_direct(bool on) {
    if (auto r = require_change(); !r) return r;
    auto v = common::MapView::of(pacer_state_.get(), sizeof(pspxdp_pacer_state), true);
    if (!v) return err(dev_ + ": " + v.error());
    auto *st = v->as<pspxdp_pacer_state>();
    // The daemon sets its own flag bits in place: change only ours.
    if (on)
        __atomic_fetch_and(&st->flags, ~PSPXDP_STATE_F_PRIO_DIRECT_OFF, __ATOMIC_RELEASE);
    else
        __atomic_fetch_or(&st->flags, PSPXDP_STATE_F_PRIO_DIRECT_OFF, __ATOMIC_RELEASE);
    return {};
}

// ---- filters (filter.hpp does the work on the maps)

FilterMaps Device::filter_maps() const {
    FilterMaps m;
    m.filters = filters_.get();
    m.entries = filter_entries_.get();
    m.shapes = filter_shapes_.get();
    m.state = filter_state_.get();
    m.stats = filter_stats_.get();
    m.class_config = class_config_.get();
    return m;
}

Result<std::vector<FilterSpec>> Device::filters() const {
    auto stored = read_filters(filter_maps());
    if (!stored) return stored.failure();
    std::vector<FilterSpec> out;
    for (const StoredFilter &f : *stored) out.push_back(f.spec);
    return out;
}

Result<std::vector<FilterInfo>> Device::filter_infos(bool with_stats) const {
    return read_filter_infos(filter_maps(), with_stats);
}

Result<void> Device::filter_add(const FilterSpec &spec) {
    if (auto r = require_change(); !r) return r;
    return add_filter(filter_maps(), spec);
}

Result<std::vector<FilterSpec>> Device::filter_del(const FilterSelect &sel) {
    if (auto r = require_change(); !r) return r.failure();
    return delete_filters(filter_maps(), sel);
}

Result<void> Device::replace_filters(const std::vector<FilterSpec> &specs) {
    if (auto r = require_change(); !r) return r;
    return control::replace_filters(filter_maps(), specs);
}

Result<Device> open_device(const std::string *dev, Access access) {
    if (dev) return Device::open(*dev, access);
    const auto devs = attached_devices();
    if (devs.empty()) return refuse("no device attached (pspxdp attach DEV)");
    if (devs.size() > 1) {
        std::string list;
        for (const auto &d : devs) list += (list.empty() ? "" : ", ") + d;
        return refuse("several devices attached (" + list + "): name one");
    }
    return Device::open(devs.front(), access);
}

} // namespace pspxdp::control
