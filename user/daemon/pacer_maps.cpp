#include "daemon/pacer_maps.hpp"

#include "common/pins.hpp"

#include <algorithm>
#include <utility>

namespace pspxdp::daemon {

Result<PacerMaps> PacerMaps::open(const common::Paths &p) {
    using common::Access;
    // Each checked against shared.h's layout: a pin left by another pspxdp
    // version is an error, not a misreading.
    auto class_config =
        common::open_pinned_map<uint32_t, pspxdp_class_config>(p, "class_config", Access::Read);
    if (!class_config) return class_config.failure();
    auto xsks = common::open_pinned_map(p, "xsks_map", 4, 4, Access::Write);
    if (!xsks) return xsks.failure();
    auto xdp = common::open_pinned_map<uint32_t, pspxdp_xdp_counters>(p, "xdp_stats", Access::Read);
    if (!xdp) return xdp.failure();
    // The mmapable arrays, mapped whole: pacer_stats has a value per slot.
    auto mapped = [&](const char *name, uint32_t value_size,
                      size_t entries) -> Result<common::MapView> {
        auto fd = common::open_pinned_map(p, name, 4, value_size, Access::Write);
        if (!fd) return fd.failure();
        auto view = common::MapView::of(fd->get(), size_t(value_size) * entries, true);
        if (!view) return err(p.pin(name) + ": " + view.error());
        return std::move(view).value();
    };
    auto state = mapped("pacer_state", sizeof(pspxdp_pacer_state), 1);
    if (!state) return state.failure();
    auto slots = mapped("pacer_stats", sizeof(pspxdp_class_counters), PSPXDP_MAX_CLASSES);
    if (!slots) return slots.failure();
    auto daemon = mapped("daemon_stats", sizeof(pspxdp_daemon_stats), 1);
    if (!daemon) return daemon.failure();
    auto lateness = mapped("lateness", sizeof(pspxdp_lateness), 1);
    if (!lateness) return lateness.failure();
    return PacerMaps(std::move(class_config).value(), std::move(xsks).value(),
                     std::move(xdp).value(), std::move(state).value(), std::move(slots).value(),
                     std::move(daemon).value(), std::move(lateness).value());
}

void PacerMaps::note_slot(uint32_t s) {
    if (s >= state_->slots_end) __atomic_store_n(&state_->slots_end, s + 1, __ATOMIC_RELEASE);
}

uint64_t PacerMaps::xdp_counter(enum pspxdp_xdp_counter counter) const {
    pspxdp_xdp_counters sum{};
    const uint32_t key = 0;
    if (counter >= PSPXDP_XDP_NR_COUNTERS || !common::percpu_sum(xdp_stats_.get(), &key, sum))
        return 0;
    return reinterpret_cast<const uint64_t *>(&sum)[counter];
}

Recovery PacerMaps::recover() {
    Recovery r;
    if (state_->flags & PSPXDP_STATE_F_DAEMON_STARTED) {
        r.restart = true;
        ++daemon_->restarts;
    }
    __atomic_fetch_or(&state_->flags, PSPXDP_STATE_F_DAEMON_STARTED, __ATOMIC_RELAXED);

    uint32_t end = std::min<uint32_t>(state_->slots_end, PSPXDP_MAX_CLASSES);
    for (uint32_t s = 1; s < end; ++s) {
        pspxdp_class_counters &c = slots_[s];
        if (c.state == PSPXDP_SLOT_FREE) continue;
        if (c.backlog_frames) {
            c.drop_died += c.backlog_frames;
            r.died_frames += c.backlog_frames;
            c.backlog_frames = 0;
            c.backlog_bytes = 0;
        }
        if (c.state == PSPXDP_SLOT_DRAINING) {
            set_state(s, PSPXDP_SLOT_FREE);
            ++r.freed_slots;
        }
    }
    // Every frame XDP redirected was taken by a daemon, dropped by the
    // kernel (counted, as of the last publish), or lost in the rings of a
    // daemon that died (counted now). No socket exists at this point.
    pspxdp_daemon_stats &d = *daemon_;
    uint64_t accounted = d.rx_frames + d.socket_ring_full + d.socket_fill_empty + d.died_in_rings;
    uint64_t redirected = xdp_counter(PSPXDP_XDP_REDIRECTED);
    if (redirected > accounted) {
        r.died_in_rings = redirected - accounted;
        d.died_in_rings += r.died_in_rings;
    }
    return r;
}

} // namespace pspxdp::daemon
