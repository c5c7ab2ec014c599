#include "daemon/pacer_maps.hpp"

#include "common/pins.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace pspxdp::daemon {

namespace {

std::string errstr(int e) {
    return std::strerror(e < 0 ? -e : e);
}

// A pinned map of DEV with the key/value sizes (and mmapability) shared.h
// says; a pin from another pspxdp version is an error, not a misreading.
Result<int> open_checked(const setup::Paths &p, const char *name, uint32_t key_size,
                         uint32_t value_size, bool mmapable, bpf_map_info *info_out = nullptr) {
    auto fd = setup::open_pinned_map(p, name);
    if (!fd) return fd.failure();
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(*fd, &info, &len) != 0) {
        int e = errno;
        close(*fd);
        return err(p.pin(name) + ": " + errstr(e));
    }
    if (info.key_size != key_size || info.value_size != value_size ||
        (mmapable && !(info.map_flags & BPF_F_MMAPABLE))) {
        close(*fd);
        return err(p.pin(name) + ": key/value size " + std::to_string(info.key_size) + "/" +
                   std::to_string(info.value_size) + ", expected " + std::to_string(key_size) +
                   "/" + std::to_string(value_size) + (mmapable ? ", mmapable" : "") +
                   " (pins from another pspxdp version? detach and attach again)");
    }
    if (info_out) *info_out = info;
    return *fd;
}

// An mmapable ARRAY's values, shared with the kernel (and TC).
Result<void *> map_array(int fd, const bpf_map_info &info, size_t *len_out, const char *name) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    size_t stride = (info.value_size + 7) & ~size_t(7);
    size_t len = (size_t(info.max_entries) * stride + page - 1) & ~(page - 1);
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return err(std::string("mapping ") + name + ": " + errstr(errno));
    *len_out = len;
    return m;
}

} // namespace

Result<PacerMaps> PacerMaps::open(const setup::Paths &p) {
    PacerMaps m;
    bpf_map_info info{};
    struct Want {
        int *fd;
        const char *name;
        uint32_t key, value;
        bool mmapable;
        void **area;
        size_t *len;
    } want[] = {
        {&m.class_config_, "class_config", 4, sizeof(pspxdp_class_config), false, nullptr, nullptr},
        {&m.pacer_state_fd_, "pacer_state", 4, sizeof(pspxdp_pacer_state), true,
         reinterpret_cast<void **>(&m.state_), &m.state_len_},
        {&m.pacer_stats_fd_, "pacer_stats", 4, sizeof(pspxdp_class_counters), true,
         reinterpret_cast<void **>(&m.slots_), &m.slots_len_},
        {&m.daemon_stats_fd_, "daemon_stats", 4, sizeof(pspxdp_daemon_stats), true,
         reinterpret_cast<void **>(&m.daemon_), &m.daemon_len_},
        {&m.xsks_map_, "xsks_map", 4, 4, false, nullptr, nullptr},
        {&m.xdp_stats_, "xdp_stats", 4, sizeof(pspxdp_xdp_counters), false, nullptr, nullptr},
    };
    for (auto &w : want) {
        auto fd = open_checked(p, w.name, w.key, w.value, w.mmapable, &info);
        if (!fd) return fd.failure();
        *w.fd = *fd;
        if (!w.area) continue;
        if (std::string(w.name) == "pacer_stats" && info.max_entries != PSPXDP_MAX_CLASSES)
            return err(p.pin(w.name) + ": " + std::to_string(info.max_entries) + " slots, expected " +
                       std::to_string(PSPXDP_MAX_CLASSES) + " (detach and attach again)");
        auto area = map_array(*fd, info, w.len, w.name);
        if (!area) return area.failure();
        *w.area = *area;
    }
    return m;
}

PacerMaps::PacerMaps(PacerMaps &&o) noexcept {
    std::swap(class_config_, o.class_config_);
    std::swap(pacer_state_fd_, o.pacer_state_fd_);
    std::swap(pacer_stats_fd_, o.pacer_stats_fd_);
    std::swap(daemon_stats_fd_, o.daemon_stats_fd_);
    std::swap(xsks_map_, o.xsks_map_);
    std::swap(xdp_stats_, o.xdp_stats_);
    std::swap(state_, o.state_);
    std::swap(slots_, o.slots_);
    std::swap(daemon_, o.daemon_);
    std::swap(state_len_, o.state_len_);
    std::swap(slots_len_, o.slots_len_);
    std::swap(daemon_len_, o.daemon_len_);
}

PacerMaps::~PacerMaps() {
    if (state_) munmap(state_, state_len_);
    if (slots_) munmap(slots_, slots_len_);
    if (daemon_) munmap(daemon_, daemon_len_);
    for (int fd : {class_config_, pacer_state_fd_, pacer_stats_fd_, daemon_stats_fd_, xsks_map_,
                   xdp_stats_})
        if (fd >= 0) close(fd);
}

void PacerMaps::note_slot(uint32_t s) {
    if (s >= state_->slots_end) __atomic_store_n(&state_->slots_end, s + 1, __ATOMIC_RELEASE);
}

uint64_t PacerMaps::xdp_counter(enum pspxdp_xdp_counter counter) const {
    pspxdp_xdp_counters sum{};
    const uint32_t key = 0;
    if (counter >= PSPXDP_XDP_NR_COUNTERS || !common::percpu_sum(xdp_stats_, &key, sum)) return 0;
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
