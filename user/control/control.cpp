#include "control/control.hpp"

#include "common/text.hpp"
#include "setup/attach.hpp"

#include "core/units.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

namespace pspxdp::control {

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

namespace {

std::string cls(uint32_t raw) { return format_classid(ClassId::from_raw(raw)); }

using common::errno_text;

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

} // namespace

Result<Device> Device::open(const std::string &dev, common::Access access) {
    auto paths = common::paths_for(dev);
    if (!paths) return Error{paths.error()};
    Device d;
    d.dev_ = dev;
    d.paths_ = *paths;

    struct Want {
        Fd *fd;
        const char *name;
        uint32_t key, value;
        common::Need need;
    };
    using common::Need;
    const Want want[] = {
        {&d.class_config_, "class_config", 4, sizeof(pspxdp_class_config), Need::Required},
        {&d.pacer_state_, "pacer_state", 4, sizeof(pspxdp_pacer_state), Need::Required},
        {&d.dst_v4_, "rules_dst_v4", sizeof(pspxdp_lpm_v4), 4, Need::Required},
        {&d.src_v4_, "rules_src_v4", sizeof(pspxdp_lpm_v4), 4, Need::Required},
        {&d.dst_v6_, "rules_dst_v6", sizeof(pspxdp_lpm_v6), 4, Need::Required},
        {&d.src_v6_, "rules_src_v6", sizeof(pspxdp_lpm_v6), 4, Need::Required},
        {&d.port_, "rules_port", sizeof(pspxdp_port_key), 4, Need::Required},
        // Only for `show`: a missing one prints as zeros.
        {&d.class_slot_, "class_slot", 4, sizeof(pspxdp_class_slot), Need::Optional},
        {&d.class_stats_, "class_stats", 4, sizeof(pspxdp_class_tc_stats), Need::Optional},
        {&d.pacer_stats_, "pacer_stats", 4, sizeof(pspxdp_pacer_stats), Need::Optional},
    };
    for (const Want &w : want) {
        auto fd = common::open_pinned_map(d.paths_, w.name, w.key, w.value, access, w.need);
        if (!fd) return Error{fd.error()};
        *w.fd = std::move(fd.value());
    }
    return d;
}

Result<common::DevLock> Device::lock() {
    return common::DevLock::acquire(paths_, common::DevLock::Wait::Yes);
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

static Result<void> check_classid(uint32_t classid) {
    // 0:0 is "no class" to the classifier; X:0 names a qdisc in tc, not a class.
    if ((classid & 0xffff) == 0)
        return err("class id " + cls(classid) + ": minor 0 names a qdisc, not a class");
    return {};
}

Result<void> Device::class_set(uint32_t classid, uint32_t kind, uint64_t rate_bps) {
    if (auto r = check_classid(classid); !r) return r;
    if (kind == PSPXDP_CLASS_PACED && rate_bps == 0) return err("a paced class needs a rate > 0");
    if (kind != PSPXDP_CLASS_PACED && kind != PSPXDP_CLASS_NORMAL)
        return err("unknown class kind " + std::to_string(kind));
    if (kind == PSPXDP_CLASS_NORMAL) rate_bps = 0;
    auto held = lock();
    if (!held) return Error{held.error()};

    if (kind == PSPXDP_CLASS_PACED) {
        auto st = state();
        if (!st) return Error{st.error()};
        const uint64_t line = st->line_rate_bps;
        if (line == 0)
            return err(dev_ + ": line rate unknown (pacer_state.line_rate_bps is 0), "
                              "cannot check paced rates against it");
        // Sum in 128 bits: a hand-written huge rate must not wrap the check.
        unsigned __int128 sum = rate_bps;
        const int fd = class_config_.get();
        int rc = for_each_key<uint32_t>(fd, [&](uint32_t key) {
            pspxdp_class_config cfg{};
            if (key != classid && bpf_map_lookup_elem(fd, &key, &cfg) == 0 &&
                cfg.kind == PSPXDP_CLASS_PACED)
                sum += cfg.rate_bps;
            return true;
        });
        if (rc) return err(dev_ + ": read class_config: " + errno_text(rc));
        if (sum > line) {
            const std::string total =
                sum > UINT64_MAX ? std::string("more than 2^64 bit/s") : format_rate(uint64_t(sum));
            return err("class " + cls(classid) + " " + format_rate(rate_bps) +
                       ": paced rates would sum to " + total + ", above the line rate " +
                       format_rate(line) + " of " + dev_);
        }
    }
    pspxdp_class_config cfg{};
    cfg.rate_bps = rate_bps;
    cfg.kind = pspxdp_class_kind(kind);
    if (bpf_map_update_elem(class_config_.get(), &classid, &cfg, BPF_ANY) != 0)
        return err(dev_ + ": write class_config: " + errno_text(errno));
    return {};
}

Result<void> Device::class_del(uint32_t classid) {
    if (auto r = check_classid(classid); !r) return r;
    auto held = lock();
    if (!held) return Error{held.error()};
    auto exists = class_exists(classid);
    if (!exists) return Error{exists.error()};
    if (!*exists) return err("class " + cls(classid) + " does not exist on " + dev_);
    auto st = state();
    if (!st) return Error{st.error()};
    if (pspxdp_classid_raw(st->default_classid) == classid)
        return err("class " + cls(classid) + " is the default class of " + dev_);
    auto fl = filters();
    if (!fl) return Error{fl.error()};
    size_t used = 0;
    std::string first;
    for (const auto &f : *fl) {
        if (f.classid != classid) continue;
        if (!used++) first = format_selector(f.selector);
    }
    if (used)
        return err("class " + cls(classid) + " is used by " + std::to_string(used) +
                   (used == 1 ? " filter" : " filters") + " (\"" + first +
                   "\"): delete them first");
    if (bpf_map_delete_elem(class_config_.get(), &classid) != 0)
        return err(dev_ + ": delete from class_config: " + errno_text(errno));
    return {};
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

    const int ncpu = libbpf_num_possible_cpus();
    if (class_stats_.valid() && ncpu > 0) {
        std::vector<pspxdp_class_tc_stats> per_cpu(static_cast<size_t>(ncpu));
        const int sfd = class_stats_.get();
        rc = for_each_key<uint32_t>(sfd, [&](uint32_t key) {
            if (bpf_map_lookup_elem(sfd, &key, per_cpu.data()) != 0) return true;
            ClassInfo &ci = by_id[key];
            ci.classid = key;
            for (const auto &s : per_cpu) {
#define PSPXDP_SUM(name, help) ci.tc.name += s.name;
                PSPXDP_TC_CLASS_COUNTERS(PSPXDP_SUM)
#undef PSPXDP_SUM
            }
            return true;
        });
        if (rc) return err(dev_ + ": read class_stats: " + errno_text(rc));
    }
    std::vector<ClassInfo> out;
    for (auto &[id, ci] : by_id) {
        uint32_t key = id;
        pspxdp_class_slot slot{};
        if (class_slot_.valid() && bpf_map_lookup_elem(class_slot_.get(), &key, &slot) == 0)
            ci.queue = slot.queue;
        if (pacer_stats_.valid() &&
            bpf_map_lookup_elem(pacer_stats_.get(), &key, &ci.pacer) == 0)
            ci.has_pacer = true;
        out.push_back(ci);
    }
    return out;
}

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
    if (auto r = check_classid(classid); !r) return r;
    auto held = lock();
    if (!held) return Error{held.error()};
    auto exists = class_exists(classid);
    if (!exists) return Error{exists.error()};
    if (!*exists)
        return err("class " + cls(classid) + " does not exist on " + dev_ +
                   " (create it with: pspxdp class set " + dev_ + " " + cls(classid) + " RATE)");
    const auto key = key_bytes(selector);
    const int fd = rules_fd(selector);
    if (bpf_map_update_elem(fd, key.data(), &classid, BPF_NOEXIST) != 0) {
        int e = errno;
        if (e == EEXIST) {
            uint32_t old = 0;
            bpf_map_lookup_elem(fd, key.data(), &old);
            return err("filter \"" + format_selector(selector) + "\" already exists (classid " +
                       cls(old) + "): delete it first");
        }
        if (e == E2BIG || e == ENOMEM || e == ENOSPC)
            return err(std::string(selector.map_name()) + " is full (" +
                       std::to_string(PSPXDP_MAX_RULES) + " rules)");
        return err(dev_ + ": write " + selector.map_name() + ": " + errno_text(e));
    }
    return {};
}

Result<void> Device::filter_del(const Selector &selector) {
    auto held = lock();
    if (!held) return Error{held.error()};
    const auto key = key_bytes(selector);
    if (bpf_map_delete_elem(rules_fd(selector), key.data()) != 0) {
        int e = errno;
        if (e == ENOENT) return err("no filter \"" + format_selector(selector) + "\" on " + dev_);
        return err(dev_ + ": delete from " + selector.map_name() + ": " + errno_text(e));
    }
    return {};
}

Result<std::vector<FilterInfo>> Device::filters() const {
    std::vector<FilterInfo> out;
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

Result<Device> open_device(const std::string *dev, common::Access access) {
    auto open_here = [&](const std::string &name) -> Result<Device> {
        auto paths = common::paths_for(name);
        if (!paths) return Error{paths.error()};
        if (auto st = setup::check_here(*paths); !st) return Error{st.error()};
        return Device::open(name, access);
    };
    if (dev) return open_here(*dev);
    const auto devs = attached_devices();
    if (devs.empty()) return err("no device attached (pspxdp attach DEV)");
    if (devs.size() > 1) {
        std::string list;
        for (const auto &d : devs) list += (list.empty() ? "" : ", ") + d;
        return err("several devices attached (" + list + "): name one");
    }
    return open_here(devs.front());
}

} // namespace pspxdp::control
