#include "control/control.hpp"

#include "core/units.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <tuple>

namespace pspxdp::control {

Fd &Fd::operator=(Fd &&o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

Fd::~Fd() {
    if (fd_ >= 0) ::close(fd_);
}

std::string pin_dir(const std::string &dev) { return std::string(PSPXDP_PIN_ROOT) + "/" + dev; }

std::vector<std::string> attached_devices() {
    std::vector<std::string> out;
    DIR *d = opendir(PSPXDP_PIN_ROOT);
    if (!d) return out;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.' || e->d_type != DT_DIR) continue;
        out.emplace_back(e->d_name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

Result<void> check_device_name(const std::string &dev) {
    // The kernel's dev_valid_name(): 1..15 bytes, not "." or "..", no '/',
    // ':' or white space. Anything else cannot be a device (and must not
    // become a path under /sys/fs/bpf or /run).
    const std::string q = "\"" + dev + "\"";
    if (dev.empty()) return refuse("device name " + q + ": empty");
    if (dev.size() >= 16) return refuse("device name " + q + ": longer than 15 bytes");
    if (dev == "." || dev == "..") return refuse("device name " + q + ": not a device");
    for (unsigned char c : dev)
        if (c == '/' || c == ':' || std::isspace(c) || c < 0x20)
            return refuse("device name " + q + ": contains '/', ':' or white space");
    return {};
}

namespace {

std::string cls(uint32_t raw) { return class_name(raw); }

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

// What a pinned map must look like; `alt` accepts a second layout (the v1
// pacer_stats) and reports which one matched.
struct MapShape {
    const char *name;
    uint32_t key, value;
    bool required;
    uint32_t alt_type = 0, alt_key = 0, alt_value = 0;
};

// Opens a pinned map (read-only for Access::Read) and checks its key and
// value sizes against shared.h, so a pin left by another pspxdp version is
// reported instead of misread. A missing optional map is an invalid Fd.
Result<Fd> open_map(const std::string &dev, const MapShape &m, bool read_only,
                    bpf_map_info *info_out = nullptr, bool *alt_out = nullptr) {
    const std::string path = pin_dir(dev) + "/" + m.name;
    LIBBPF_OPTS(bpf_obj_get_opts, opts, .file_flags = read_only ? uint32_t(BPF_F_RDONLY) : 0u);
    int fd = bpf_obj_get_opts(path.c_str(), &opts);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !m.required) return Fd();
        if (e == ENOENT) return refuse(dev + " is not attached (no " + path + ")");
        if (e == EACCES || e == EPERM)
            return err(path + ": " + errno_text(e) +
                       (read_only ? " (reading the pins needs read permission on them)"
                                  : " (changing pspxdp needs root: CAP_BPF and CAP_NET_ADMIN)"));
        return err(path + ": " + errno_text(e));
    }
    Fd owned(fd);
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return err(path + ": " + errno_text(errno));
    bool alt = m.alt_type && info.type == m.alt_type && info.key_size == m.alt_key &&
               info.value_size == m.alt_value;
    if (!alt && (info.key_size != m.key || info.value_size != m.value))
        return err(path + ": key/value size " + std::to_string(info.key_size) + "/" +
                   std::to_string(info.value_size) + ", expected " + std::to_string(m.key) + "/" +
                   std::to_string(m.value) +
                   " (pins from another pspxdp version? detach and attach again)");
    if (info_out) *info_out = info;
    if (alt_out) *alt_out = alt;
    return owned;
}

// Iterates the keys of any map; fn(key) returns false to stop.
template <class K, class F> int for_each_key(int fd, F fn) {
    K key{}, next{};
    const K *prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        key = next;
        prev = &key;
        if (!fn(key)) return 0;
    }
    return errno == ENOENT ? 0 : -errno;
}

// Sum over CPUs of a per-CPU value made of __u64 counters only.
template <class T> bool percpu_sum(int fd, const void *key, T &out) {
    const int ncpu = libbpf_num_possible_cpus();
    if (fd < 0 || ncpu <= 0) return false;
    std::vector<T> v(static_cast<size_t>(ncpu));
    if (bpf_map_lookup_elem(fd, key, v.data()) != 0) return false;
    static_assert(sizeof(T) % sizeof(uint64_t) == 0);
    auto *sum = reinterpret_cast<uint64_t *>(&out);
    for (const T &x : v) {
        auto *p = reinterpret_cast<const uint64_t *>(&x);
        for (size_t i = 0; i < sizeof(T) / sizeof(uint64_t); ++i) sum[i] += p[i];
    }
    return true;
}

// An mmap of an mmapable ARRAY map (pacer_state, pacer_stats of the v2 data
// path): the daemon writes them in place, so this reads (and writes) what it
// sees without a syscall per field.
class MapView {
  public:
    static std::optional<MapView> of(int fd, size_t bytes, bool writable) {
        const long page = sysconf(_SC_PAGESIZE);
        size_t len = (bytes + size_t(page) - 1) / size_t(page) * size_t(page);
        void *p = mmap(nullptr, len, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return std::nullopt;
        return MapView(p, len);
    }
    MapView(MapView &&o) noexcept : p_(o.p_), len_(o.len_) { o.p_ = nullptr; }
    ~MapView() {
        if (p_) munmap(p_, len_);
    }
    template <class T> T *as() const { return static_cast<T *>(p_); }

  private:
    MapView(void *p, size_t len) : p_(p), len_(len) {}
    void *p_;
    size_t len_;
};

// v1 data path (one queue per class), until the v2 daemon replaces it: its
// per-class counters in the v2 names. Its "drops" were FIFO or socket ring
// overflows, i.e. the buffer was full: drop_overflow.
void from_v1(const pspxdp_pacer_stats &v1, pspxdp_class_counters &c) {
    c.rx_frames = v1.rx_frames;
    c.tx_frames = v1.tx_frames;
    c.tx_bytes = v1.tx_bytes;
    c.backlog_frames = v1.backlog;
    c.drop_overflow = v1.drops;
}

// v1 daemon: device-wide counters from its JSON stats file, in the v2 names
// (daemon_stats). Read with nlohmann-json; a missing key reads as 0.
bool daemon_counters_from_stats_file(const std::string &path, pspxdp_daemon_stats &d) {
    std::ifstream f(path);
    if (!f) return false;
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return false;
    auto get = [&](const char *section, const char *key) -> uint64_t {
        auto s = j.find(section);
        if (s == j.end() || !s->is_object()) return 0;
        auto v = s->find(key);
        return v != s->end() && v->is_number_unsigned() ? v->get<uint64_t>() : 0;
    };
    d.wire_frames = get("tx", "frames");
    d.wire_frame_bytes = get("engine", "frame_wire_bytes");
    d.gap_frames = get("tx", "gaps");
    d.gap_bytes = get("engine", "gap_wire_bytes");
    d.gap_overshoot_bytes = get("engine", "gap_overshoot_bytes");
    d.idle_resyncs = get("engine", "idle_resyncs");
    d.underruns = get("engine", "underrun_resyncs");
    d.underrun_bytes = get("engine", "underrun_bytes");
    d.kicks = get("tx", "kicks");
    d.kick_errors = get("tx", "kick_errors");
    d.socket_ring_full = get("rx", "kernel_lost");
    d.socket_fill_empty = get("rx", "fill_ring_empty");
    d.unknown_class = get("rx", "unassigned_drops");
    d.config_refused = get("loop", "config_refused");
    d.accounting_failures = get("loop", "accounting_failures");
    return true;
}

} // namespace

Result<Device> Device::open(const std::string &dev, Access access) {
    if (auto r = check_device_name(dev); !r) return r.failure();
    Device d;
    d.dev_ = dev;
    d.access_ = access;
    const auto paths = setup::paths_for(dev);
    if (access == Access::Change) {
        // Only an attached DEV has a lock file: taking the lock of one that
        // is not attached would leave files behind.
        if (::access(paths.state.c_str(), F_OK) != 0 && errno == ENOENT)
            return refuse(dev + " is not attached (pspxdp attach " + dev + ")");
        auto lock = setup::DevLock::acquire(paths, true);
        if (!lock) return err(lock.error());
        d.lock_.emplace(std::move(lock.value()));
        // Under the lock: a detach that ran while we waited removed it.
        if (::access(paths.state.c_str(), F_OK) != 0)
            return refuse(dev + " is not attached (detached meanwhile)");
    }
    const bool ro = access == Access::Read;
    struct Want {
        Fd *fd;
        MapShape shape;
    };
    const Want want[] = {
        {&d.class_config_, {"class_config", 4, sizeof(pspxdp_class_config), true}},
        {&d.pacer_state_, {"pacer_state", 4, sizeof(pspxdp_pacer_state), true}},
        // Filters (v1 maps; the filters' own module replaces them).
        {&d.dst_v4_, {"rules_dst_v4", sizeof(pspxdp_lpm_v4), 4, false}},
        {&d.src_v4_, {"rules_src_v4", sizeof(pspxdp_lpm_v4), 4, false}},
        {&d.dst_v6_, {"rules_dst_v6", sizeof(pspxdp_lpm_v6), 4, false}},
        {&d.src_v6_, {"rules_src_v6", sizeof(pspxdp_lpm_v6), 4, false}},
        {&d.port_, {"rules_port", sizeof(pspxdp_port_key), 4, false}},
        // Counters: a missing one prints as zeros.
        {&d.class_stats_, {"class_stats", 4, sizeof(pspxdp_class_tc_stats), false}},
        {&d.daemon_stats_, {"daemon_stats", 4, sizeof(pspxdp_daemon_stats), false}},
        {&d.tc_stats_, {"tc_stats", 4, sizeof(pspxdp_tc_counters), false}},
        {&d.xdp_stats_, {"xdp_stats", 4, sizeof(pspxdp_xdp_counters), false}},
        {&d.class_slot_, {"class_slot", 4, sizeof(pspxdp_class_slot), false}},
    };
    for (const Want &w : want) {
        bpf_map_info info{};
        auto fd = open_map(dev, w.shape, ro, &info);
        if (!fd) return fd.failure();
        *w.fd = std::move(fd.value());
        if (w.fd == &d.pacer_state_) d.pacer_state_mmapable_ = info.map_flags & BPF_F_MMAPABLE;
    }
    bool v1 = false;
    auto ps = open_map(dev,
                       {"pacer_stats", 4, sizeof(pspxdp_class_counters), false, BPF_MAP_TYPE_HASH,
                        4, sizeof(pspxdp_pacer_stats)},
                       ro, nullptr, &v1);
    if (!ps) return ps.failure();
    d.pacer_stats_ = std::move(ps.value());
    d.pacer_stats_by_slot_ = d.pacer_stats_.valid() && !v1;
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

Result<bool> Device::class_exists(uint32_t classid) const {
    pspxdp_class_config cfg{};
    if (bpf_map_lookup_elem(class_config_.get(), &classid, &cfg) == 0) return true;
    if (errno == ENOENT) return false;
    return err(dev_ + ": read class_config: " + errno_text(errno));
}

Result<std::vector<ClassSpec>> Device::class_specs() const {
    std::vector<ClassSpec> out;
    const int fd = class_config_.get();
    int rc = for_each_key<uint32_t>(fd, [&](uint32_t key) {
        pspxdp_class_config c{};
        if (bpf_map_lookup_elem(fd, &key, &c) == 0) out.push_back(ClassSpec::from_config(key, c));
        return true;
    });
    if (rc) return err(dev_ + ": read class_config: " + errno_text(rc));
    std::sort(out.begin(), out.end(),
              [](const ClassSpec &a, const ClassSpec &b) { return a.classid < b.classid; });
    return out;
}

Result<std::vector<ClassInfo>> Device::classes() const {
    std::map<uint32_t, ClassInfo> by_id;
    const int cfd = class_config_.get();
    int rc = for_each_key<uint32_t>(cfd, [&](uint32_t key) {
        ClassInfo ci;
        ci.classid = key;
        if (bpf_map_lookup_elem(cfd, &key, &ci.config) == 0) {
            ci.configured = true;
            by_id[key] = ci;
        }
        return true;
    });
    if (rc) return err(dev_ + ": read class_config: " + errno_text(rc));

    if (class_stats_.valid()) {
        const int sfd = class_stats_.get();
        rc = for_each_key<uint32_t>(sfd, [&](uint32_t key) {
            pspxdp_class_tc_stats sum{};
            if (!percpu_sum(sfd, &key, sum)) return true;
            ClassInfo &ci = by_id[key];
            ci.classid = key;
            ci.tc = sum;
            return true;
        });
        if (rc) return err(dev_ + ": read class_stats: " + errno_text(rc));
    }

    if (pacer_stats_by_slot_) {
        // v2: pacer_stats[slot], the class on the slot and its state. A
        // deleted class still draining shows up on its old slot.
        auto view = MapView::of(pacer_stats_.get(),
                                sizeof(pspxdp_class_counters) * PSPXDP_MAX_CLASSES, false);
        auto slot_of = [&](uint32_t slot, pspxdp_class_counters &c) {
            if (view) {
                c = view->as<pspxdp_class_counters>()[slot];
                return true;
            }
            return bpf_map_lookup_elem(pacer_stats_.get(), &slot, &c) == 0;
        };
        for (auto &[id, ci] : by_id) {
            pspxdp_class_counters c{};
            if (!ci.configured || !ci.config.slot || ci.config.slot >= PSPXDP_MAX_CLASSES ||
                !slot_of(ci.config.slot, c) || pspxdp_classid_raw(c.classid) != id)
                continue;
            ci.pacer = c;
            ci.state = c.state;
            ci.served = c.state == PSPXDP_SLOT_SERVED;
        }
        if (view) {
            const auto *all = view->as<pspxdp_class_counters>();
            for (uint32_t s = 1; s < PSPXDP_MAX_CLASSES; ++s) {
                if (all[s].state != PSPXDP_SLOT_DRAINING) continue;
                const uint32_t id = pspxdp_classid_raw(all[s].classid);
                ClassInfo &ci = by_id[id];
                if (ci.configured) continue; // re-added meanwhile
                ci.classid = id;
                ci.pacer = all[s];
                ci.state = all[s].state;
            }
        }
    } else {
        for (auto &[id, ci] : by_id) {
            uint32_t key = id;
            pspxdp_class_slot slot{};
            if (class_slot_.valid() && bpf_map_lookup_elem(class_slot_.get(), &key, &slot) == 0 &&
                slot.queue) {
                ci.served = true;
                ci.state = PSPXDP_SLOT_SERVED;
            }
            pspxdp_pacer_stats v1{};
            if (pacer_stats_.valid() && bpf_map_lookup_elem(pacer_stats_.get(), &key, &v1) == 0)
                from_v1(v1, ci.pacer);
        }
    }
    std::vector<ClassInfo> out;
    for (auto &[id, ci] : by_id) out.push_back(ci);
    return out;
}

Result<DeviceCounters> Device::counters() const {
    DeviceCounters d;
    const uint32_t zero = 0;
    percpu_sum(tc_stats_.get(), &zero, d.tc);
    percpu_sum(xdp_stats_.get(), &zero, d.xdp);
    if (daemon_stats_.valid()) {
        d.have_daemon = bpf_map_lookup_elem(daemon_stats_.get(), &zero, &d.daemon) == 0;
    } else {
        d.have_daemon = daemon_counters_from_stats_file(setup::paths_for(dev_).stats, d.daemon);
        d.daemon.no_socket = d.xdp.no_socket;
    }
    return d;
}

Result<Config> Device::config() const {
    auto st = state();
    if (!st) return st.failure();
    auto specs = class_specs();
    if (!specs) return specs.failure();
    auto fl = filters();
    if (!fl) return fl.failure();
    Config c;
    if (st->line_rate_bps) c.line_rate_bps = st->line_rate_bps;
    c.default_classid = pspxdp_classid_raw(st->default_classid);
    c.classes = std::move(specs.value());
    for (const auto &f : *fl) c.filters.push_back(FilterSpec{f.selector, f.classid});
    return c;
}

// ---- slots and config_gen (the datapath's allocator replaces the former)

Result<std::vector<bool>> Device::taken_slots() const {
    std::vector<bool> taken(PSPXDP_MAX_CLASSES, false);
    taken[0] = true; // slot 0 means "no slot"
    const int fd = class_config_.get();
    int rc = for_each_key<uint32_t>(fd, [&](uint32_t key) {
        pspxdp_class_config c{};
        if (bpf_map_lookup_elem(fd, &key, &c) == 0 && c.slot < PSPXDP_MAX_CLASSES)
            taken[c.slot] = true;
        return true;
    });
    if (rc) return err(dev_ + ": read class_config: " + errno_text(rc));
    // A slot the daemon still uses (a deleted class draining) is not free.
    if (pacer_stats_by_slot_) {
        if (auto view = MapView::of(pacer_stats_.get(),
                                    sizeof(pspxdp_class_counters) * PSPXDP_MAX_CLASSES, false)) {
            const auto *all = view->as<pspxdp_class_counters>();
            for (uint32_t s = 1; s < PSPXDP_MAX_CLASSES; ++s)
                if (all[s].state != PSPXDP_SLOT_FREE) taken[s] = true;
        }
    }
    return taken;
}

Result<uint32_t> Device::free_slot(std::vector<bool> &taken) const {
    for (uint32_t s = 1; s < taken.size(); ++s) {
        if (taken[s]) continue;
        taken[s] = true;
        return s;
    }
    return refuse(dev_ + " has no free class slot (" + std::to_string(PSPXDP_MAX_CLASSES - 1) +
                  " classes at most)");
}

Result<void> Device::update_pacer_state(const std::optional<uint32_t> &default_classid,
                                        const std::optional<uint64_t> &line_rate_bps) {
    if (auto r = require_change(); !r) return r;
    if (pacer_state_mmapable_) {
        // The daemon writes its heartbeat in place: write only our fields,
        // in place too, then the generation that tells it to re-read.
        if (auto v = MapView::of(pacer_state_.get(), sizeof(pspxdp_pacer_state), true)) {
            auto *st = v->as<pspxdp_pacer_state>();
            if (default_classid) {
                __u32 raw = *default_classid;
                __atomic_store_n(reinterpret_cast<__u32 *>(&st->default_classid), raw,
                                 __ATOMIC_RELEASE);
            }
            if (line_rate_bps) __atomic_store_n(&st->line_rate_bps, *line_rate_bps, __ATOMIC_RELEASE);
            __atomic_fetch_add(&st->config_gen, 1, __ATOMIC_RELEASE);
            return {};
        }
    }
    // A whole-value update. The v1 daemon writes its heartbeat the same way
    // (lookup, update, every 10 ms), so a change can be overwritten by its
    // stale copy: check after a beat and write again.
    for (int attempt = 0; attempt < 4; ++attempt) {
        auto st = state();
        if (!st) return st.failure();
        pspxdp_pacer_state s = *st;
        if (default_classid) s.default_classid = pspxdp_classid_of(*default_classid);
        if (line_rate_bps) s.line_rate_bps = *line_rate_bps;
        if (attempt == 0) ++s.config_gen;
        uint32_t key = 0;
        if (bpf_map_update_elem(pacer_state_.get(), &key, &s, BPF_ANY) != 0)
            return err(dev_ + ": write pacer_state: " + errno_text(errno));
        if (!default_classid && !line_rate_bps) return {};
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
        auto again = state();
        if (!again) return again.failure();
        if ((!default_classid ||
             pspxdp_classid_raw(again->default_classid) == *default_classid) &&
            (!line_rate_bps || again->line_rate_bps == *line_rate_bps))
            return {};
    }
    return err(dev_ + ": pacer_state keeps being overwritten (is the daemon writing it?)");
}

Result<void> Device::write_classes(const std::vector<uint32_t> &ids,
                                   const std::vector<pspxdp_class_config> &values) {
    if (ids.empty()) return {};
    // One syscall for the lot (10,000 classes in milliseconds); element by
    // element where the kernel has no batch update for the map.
    uint32_t count = uint32_t(ids.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
    if (bpf_map_update_batch(class_config_.get(), ids.data(), values.data(), &count, &opts) == 0)
        return {};
    const int e = errno;
    if (e != EINVAL && e != ENOTSUP && e != EOPNOTSUPP)
        return err(dev_ + ": write class_config: " + errno_text(e) +
                   (e == E2BIG || e == ENOSPC || e == ENOMEM ? " (class_config is full)" : ""));
    for (size_t i = count; i < ids.size(); ++i)
        if (bpf_map_update_elem(class_config_.get(), &ids[i], &values[i], BPF_ANY) != 0)
            return err(dev_ + ": write class_config: " + errno_text(errno));
    return {};
}

Result<void> Device::delete_classes(const std::vector<uint32_t> &ids) {
    for (uint32_t id : ids) {
        if (bpf_map_delete_elem(class_config_.get(), &id) != 0 && errno != ENOENT)
            return err(dev_ + ": delete from class_config: " + errno_text(errno));
        // Its TC counters go with it, as tc's do with a class (a frame in
        // flight may count once more; a re-added class starts from zero).
        if (class_stats_.valid()) bpf_map_delete_elem(class_stats_.get(), &id);
    }
    return {};
}

// ---- classes

Result<void> Device::class_put(Put how, const ClassSpec &spec) {
    if (auto r = require_change(); !r) return r;
    if ((spec.classid & 0xffff) == 0)
        return refuse("class id " + cls(spec.classid) + ": minor 0 names a qdisc, not a class");
    if (spec.paced() && spec.rate_bps == 0)
        return refuse("class " + cls(spec.classid) + ": a paced class needs a rate above 0");
    pspxdp_class_config old{};
    bool exists = bpf_map_lookup_elem(class_config_.get(), &spec.classid, &old) == 0;
    if (!exists && errno != ENOENT) return err(dev_ + ": read class_config: " + errno_text(errno));
    const std::string name = "class " + cls(spec.classid);
    if (how == Put::Add && exists)
        return refuse(name + " already exists on " + dev_ + " (pspxdp class change or set)");
    if (how == Put::Change && !exists) return refuse(name + " does not exist on " + dev_);

    auto st = state();
    if (!st) return st.failure();
    auto specs = class_specs();
    if (!specs) return specs.failure();
    // The device's classes with this one replaced, this one last: a sum
    // that does not fit names it.
    std::vector<ClassSpec> all;
    for (auto &c : *specs)
        if (c.classid != spec.classid) all.push_back(c);
    all.push_back(spec);
    if (auto r = check_rates(all, st->line_rate_bps, dev_); !r) return r;

    uint32_t slot = exists ? old.slot : 0;
    if (!slot) {
        auto taken = taken_slots();
        if (!taken) return taken.failure();
        auto s = free_slot(taken.value());
        if (!s) return s.failure();
        slot = *s;
    }
    if (auto r = write_classes({spec.classid}, {spec.to_config(slot)}); !r) return r;
    return bump_config_gen();
}

Result<void> Device::class_del(uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    auto exists = class_exists(classid);
    if (!exists) return exists.failure();
    if (!*exists) return refuse("class " + cls(classid) + " does not exist on " + dev_);
    auto st = state();
    if (!st) return st.failure();
    if (pspxdp_classid_raw(st->default_classid) == classid)
        return refuse("class " + cls(classid) + " is the default class of " + dev_ +
                      " (pspxdp default " + dev_ + " ANOTHER first)");
    auto fl = filters();
    if (!fl) return fl.failure();
    size_t used = 0;
    std::string first;
    for (const auto &f : *fl) {
        if (f.classid != classid) continue;
        if (!used++) first = format_selector(f.selector);
    }
    if (used)
        return refuse("class " + cls(classid) + " is used by " + std::to_string(used) +
                      (used == 1 ? " filter" : " filters") + " (\"" + first +
                      "\"): delete them first");
    if (auto r = delete_classes({classid}); !r) return r;
    return bump_config_gen();
}

Result<void> Device::set_default(uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    auto exists = class_exists(classid);
    if (!exists) return exists.failure();
    if (!*exists)
        return refuse("class " + cls(classid) + " does not exist on " + dev_ +
                      " (pspxdp class add " + dev_ + " " + cls(classid) + " normal)");
    return update_pacer_state(classid, std::nullopt);
}

Result<void> Device::set_line_rate(uint64_t line_rate_bps) {
    if (auto r = require_change(); !r) return r;
    auto specs = class_specs();
    if (!specs) return specs.failure();
    if (auto r = check_rates(*specs, line_rate_bps, dev_); !r)
        return refuse("line-rate " + format_rate(line_rate_bps) + " refused: " + r.error());
    // The state file too: a restarted daemon paces at what it says.
    const auto paths = setup::paths_for(dev_);
    auto as = setup::read_state(paths);
    if (!as) return err(as.error());
    if (auto r = update_pacer_state(std::nullopt, line_rate_bps); !r) return r;
    as.value().line_rate_bps = line_rate_bps;
    if (auto r = setup::write_state(paths, *as); !r) return err(r.error());
    return {};
}

Result<ApplySummary> Device::apply(const Config &c) {
    if (auto r = require_change(); !r) return r.failure();
    auto st = state();
    if (!st) return st.failure();
    const uint64_t old_line = st->line_rate_bps;
    const uint32_t old_default = pspxdp_classid_raw(st->default_classid);
    const uint64_t line = c.line_rate_bps.value_or(old_line);
    const uint32_t def = c.default_classid.value_or(old_default);
    if (auto r = check_config(c, line, def, dev_); !r) return r.failure();

    // The live configuration, with slots.
    std::map<uint32_t, pspxdp_class_config> cur;
    {
        const int fd = class_config_.get();
        int rc = for_each_key<uint32_t>(fd, [&](uint32_t key) {
            pspxdp_class_config v{};
            if (bpf_map_lookup_elem(fd, &key, &v) == 0) cur[key] = v;
            return true;
        });
        if (rc) return err(dev_ + ": read class_config: " + errno_text(rc));
    }
    auto cur_filters = filters();
    if (!cur_filters) return cur_filters.failure();

    // The plan.
    ApplySummary sum;
    auto taken = taken_slots();
    if (!taken) return taken.failure();
    struct Write {
        uint32_t id;
        pspxdp_class_config v;
        int64_t rate_delta; // lowered rates go first: the sum never exceeds the line meanwhile
    };
    std::vector<Write> writes;
    std::set<uint32_t> wanted;
    for (const ClassSpec &cs : c.classes) {
        wanted.insert(cs.classid);
        auto it = cur.find(cs.classid);
        uint32_t slot = 0;
        int64_t old_rate = 0;
        if (it != cur.end()) {
            if (cs.same_config(ClassSpec::from_config(cs.classid, it->second)) && it->second.slot)
                continue;
            slot = it->second.slot;
            old_rate = it->second.kind == PSPXDP_CLASS_PACED ? int64_t(it->second.rate_bps) : 0;
            ++sum.classes_changed;
        } else {
            ++sum.classes_added;
        }
        if (!slot) {
            auto s = free_slot(taken.value());
            if (!s) return s.failure();
            slot = *s;
        }
        writes.push_back({cs.classid, cs.to_config(slot), int64_t(cs.paced() ? cs.rate_bps : 0) - old_rate});
    }
    std::stable_sort(writes.begin(), writes.end(),
                     [](const Write &a, const Write &b) { return a.rate_delta < b.rate_delta; });
    std::vector<uint32_t> deletes;
    for (const auto &[id, v] : cur)
        if (!wanted.count(id)) deletes.push_back(id);
    sum.classes_deleted = deletes.size();

    std::map<std::string, const FilterInfo *> have;
    for (const auto &f : *cur_filters) have[format_selector(f.selector)] = &f;
    std::vector<const FilterSpec *> add_filters;
    std::vector<Selector> del_filters;
    std::set<std::string> keep;
    for (const auto &f : c.filters) {
        const std::string k = format_selector(f.selector);
        auto it = have.find(k);
        if (it != have.end() && it->second->classid == f.classid) {
            keep.insert(k);
            continue;
        }
        add_filters.push_back(&f);
    }
    for (const auto &f : *cur_filters)
        if (!keep.count(format_selector(f.selector))) del_filters.push_back(f.selector);
    sum.filters_added = add_filters.size();
    sum.filters_deleted = del_filters.size();
    sum.default_changed = def != old_default;
    sum.line_rate_changed = line != old_line;
    if (sum.nothing()) return sum; // apply(save()) writes nothing, not even config_gen

    // The writes, in an order whose every step is a valid configuration;
    // on a failure, back to the snapshot.
    auto rollback = [&](const Error &e) -> Result<ApplySummary> {
        for (const auto &w : writes)
            if (!cur.count(w.id)) bpf_map_delete_elem(class_config_.get(), &w.id);
        for (const auto &[id, v] : cur) bpf_map_update_elem(class_config_.get(), &id, &v, BPF_ANY);
        for (const auto *f : add_filters) {
            auto key = f->selector;
            (void)filter_del(key);
        }
        for (const auto &f : *cur_filters) (void)filter_add(f.selector, f.classid);
        (void)update_pacer_state(old_default, old_line);
        return Error{e.message + " (nothing changed)", e.exit_code};
    };
    if (line > old_line)
        if (auto r = update_pacer_state(std::nullopt, line); !r) return rollback(r.failure());
    for (const auto &sel : del_filters)
        if (auto r = filter_del(sel); !r) return rollback(r.failure());
    {
        std::vector<uint32_t> ids;
        std::vector<pspxdp_class_config> vals;
        for (const auto &w : writes) {
            ids.push_back(w.id);
            vals.push_back(w.v);
        }
        if (auto r = write_classes(ids, vals); !r) return rollback(r.failure());
    }
    if (def != old_default)
        if (auto r = update_pacer_state(def, std::nullopt); !r) return rollback(r.failure());
    for (const auto *f : add_filters)
        if (auto r = filter_add(f->selector, f->classid); !r) return rollback(r.failure());
    if (auto r = delete_classes(deletes); !r) return rollback(r.failure());
    if (line < old_line) {
        if (auto r = update_pacer_state(std::nullopt, line); !r) return rollback(r.failure());
    }
    if (line != old_line) {
        const auto paths = setup::paths_for(dev_);
        if (auto as = setup::read_state(paths)) {
            as.value().line_rate_bps = line;
            (void)setup::write_state(paths, *as);
        }
    }
    if (auto r = bump_config_gen(); !r) return r.failure();
    return sum;
}

// ---- filters (v1 selectors)

int Device::rules_fd(const Selector &s) const {
    switch (s.kind) {
    case Selector::Kind::Dst: return s.family == 4 ? dst_v4_.get() : dst_v6_.get();
    case Selector::Kind::Src: return s.family == 4 ? src_v4_.get() : src_v6_.get();
    case Selector::Kind::Port: return port_.get();
    }
    return -1;
}

// The key bytes of a selector in its map.
static std::vector<uint8_t> key_bytes(const Selector &s) {
    std::vector<uint8_t> k;
    auto put = [&](const auto &v) {
        const auto *p = reinterpret_cast<const uint8_t *>(&v);
        k.assign(p, p + sizeof(v));
    };
    if (s.kind == Selector::Kind::Port) put(s.port_key());
    else if (s.family == 4) put(s.lpm_v4());
    else put(s.lpm_v6());
    return k;
}

Result<void> Device::filter_add(const Selector &selector, uint32_t classid) {
    if (auto r = require_change(); !r) return r;
    if ((classid & 0xffff) == 0)
        return refuse("class id " + cls(classid) + ": minor 0 names a qdisc, not a class");
    auto exists = class_exists(classid);
    if (!exists) return exists.failure();
    if (!*exists)
        return refuse("class " + cls(classid) + " does not exist on " + dev_ +
                      " (create it with: pspxdp class add " + dev_ + " " + cls(classid) + " RATE)");
    const auto key = key_bytes(selector);
    const int fd = rules_fd(selector);
    if (fd < 0) return err(dev_ + ": no " + selector.map_name() + " pinned");
    if (bpf_map_update_elem(fd, key.data(), &classid, BPF_NOEXIST) != 0) {
        int e = errno;
        if (e == EEXIST) {
            uint32_t old = 0;
            bpf_map_lookup_elem(fd, key.data(), &old);
            return refuse("filter \"" + format_selector(selector) + "\" already exists (classid " +
                          cls(old) + "): delete it first");
        }
        if (e == E2BIG || e == ENOMEM || e == ENOSPC)
            return refuse(std::string(selector.map_name()) + " is full (" +
                          std::to_string(PSPXDP_MAX_RULES) + " rules)");
        return err(dev_ + ": write " + selector.map_name() + ": " + errno_text(e));
    }
    return {};
}

Result<void> Device::filter_del(const Selector &selector) {
    if (auto r = require_change(); !r) return r;
    const auto key = key_bytes(selector);
    const int fd = rules_fd(selector);
    if (fd < 0) return err(dev_ + ": no " + selector.map_name() + " pinned");
    if (bpf_map_delete_elem(fd, key.data()) != 0) {
        int e = errno;
        if (e == ENOENT) return refuse("no filter \"" + format_selector(selector) + "\" on " + dev_);
        return err(dev_ + ": delete from " + selector.map_name() + ": " + errno_text(e));
    }
    return {};
}

Result<std::vector<FilterInfo>> Device::filters() const {
    std::vector<FilterInfo> out;
    if (!port_.valid()) return out;
    int fd = port_.get();
    int rc = for_each_key<pspxdp_port_key>(fd, [&](const pspxdp_port_key &k) {
        FilterInfo f;
        f.selector.kind = Selector::Kind::Port;
        f.selector.proto = k.proto;
        f.selector.dir = k.dir;
        f.selector.port = k.port;
        if (bpf_map_lookup_elem(fd, &k, &f.classid) == 0) out.push_back(f);
        return true;
    });
    if (rc) return err(dev_ + ": read rules_port: " + errno_text(rc));
    // Port rules: dst before src, as the classifier tries them.
    std::stable_sort(out.begin(), out.end(), [](const FilterInfo &a, const FilterInfo &b) {
        return std::tie(a.selector.dir, a.selector.proto, a.selector.port) <
               std::tie(b.selector.dir, b.selector.proto, b.selector.port);
    });

    auto lpm = [&](int mfd, Selector::Kind kind, int family) -> int {
        if (mfd < 0) return 0;
        const size_t first = out.size();
        auto add = [&](const auto &k) {
            FilterInfo f;
            f.selector.kind = kind;
            f.selector.family = family;
            f.selector.prefixlen = k.prefixlen;
            std::memcpy(f.selector.addr, k.addr, sizeof(k.addr));
            if (bpf_map_lookup_elem(mfd, &k, &f.classid) == 0) out.push_back(f);
            return true;
        };
        int r = family == 4 ? for_each_key<pspxdp_lpm_v4>(mfd, add)
                            : for_each_key<pspxdp_lpm_v6>(mfd, add);
        // Longest prefix first: the one that wins is listed first.
        std::stable_sort(out.begin() + long(first), out.end(),
                         [](const FilterInfo &a, const FilterInfo &b) {
                             if (a.selector.prefixlen != b.selector.prefixlen)
                                 return a.selector.prefixlen > b.selector.prefixlen;
                             return std::memcmp(a.selector.addr, b.selector.addr, 16) < 0;
                         });
        return r;
    };
    if ((rc = lpm(dst_v4_.get(), Selector::Kind::Dst, 4)))
        return err(dev_ + ": read rules_dst_v4: " + errno_text(rc));
    if ((rc = lpm(dst_v6_.get(), Selector::Kind::Dst, 6)))
        return err(dev_ + ": read rules_dst_v6: " + errno_text(rc));
    if ((rc = lpm(src_v4_.get(), Selector::Kind::Src, 4)))
        return err(dev_ + ": read rules_src_v4: " + errno_text(rc));
    if ((rc = lpm(src_v6_.get(), Selector::Kind::Src, 6)))
        return err(dev_ + ": read rules_src_v6: " + errno_text(rc));
    return out;
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
