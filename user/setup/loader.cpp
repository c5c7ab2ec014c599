#include "setup/loader.hpp"

#include "control/config_map.hpp"
#include "control/slots.hpp"
#include "setup/netlink.hpp"
#include "pspxdp/shared.h"

#include "classifier.skel.h"
#include "redirect.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <sstream>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace pspxdp::setup {

namespace {

std::string errstr(int e) {
    return std::strerror(e < 0 ? -e : e);
}

Result<void> mkdir_p(const std::string &path, mode_t mode) {
    std::string cur;
    std::stringstream ss(path);
    std::string part;
    while (std::getline(ss, part, '/')) {
        if (part.empty()) continue;
        cur += "/" + part;
        if (mkdir(cur.c_str(), mode) < 0 && errno != EEXIST)
            return err("mkdir " + cur + ": " + errstr(errno));
    }
    return {};
}

// Removes every pin in DEV's pin dir and the dir itself (and the pspxdp root
// when it is left empty). Only files in our own per-DEV dir are touched.
Result<void> remove_pins(const std::string &dir) {
    DIR *d = opendir(dir.c_str());
    if (!d) {
        if (errno == ENOENT) return {};
        return err("opening " + dir + ": " + errstr(errno));
    }
    std::string first_error;
    while (dirent *e = readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
        std::string f = dir + "/" + e->d_name;
        if (unlink(f.c_str()) < 0 && first_error.empty())
            first_error = "removing pin " + f + ": " + errstr(errno);
    }
    closedir(d);
    if (rmdir(dir.c_str()) < 0 && errno != ENOENT && first_error.empty())
        first_error = "removing " + dir + ": " + errstr(errno);
    rmdir(PSPXDP_PIN_ROOT); // fails harmlessly while other DEVs are attached
    if (!first_error.empty()) return err(first_error);
    return {};
}

// Every user map of obj is pinned at pin_dir/<name>; libbpf reuses an
// existing compatible pin at load (so class config survives a re-attach) and
// pins the new ones after load. Maps of the same name in the two programs
// thereby become one map.
Result<void> set_pins(bpf_object *obj, const std::string &pin_dir) {
    bpf_map *map;
    bpf_object__for_each_map(map, obj) {
        if (bpf_map__is_internal(map)) continue;
        std::string path = pin_dir + "/" + bpf_map__name(map);
        int rc = bpf_map__set_pin_path(map, path.c_str());
        if (rc) return err("setting pin path " + path + ": " + errstr(rc));
    }
    return {};
}

std::string libbpf_err(int rc) {
    return errstr(rc);
}

Result<void> write_pacer_state(const Paths &p, uint32_t ifindex, uint64_t line_rate_bps,
                               uint32_t default_classid) {
    // The default class first: the TC program must find it configured as
    // soon as it can see default_classid.
    auto cfd = open_pinned_map(p, "class_config");
    if (!cfd) return err(cfd.error());
    auto sfd = open_pinned_map(p, "pacer_stats");
    if (!sfd) {
        close(*cfd);
        return err(sfd.error());
    }
    // The control plane's lock (an flock on the pin directory): slots are
    // given out under it.
    int dir = open(p.pin_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) flock(dir, LOCK_EX);
    std::string error;
    pspxdp_class_config cc{};
    if (bpf_map_lookup_elem(*cfd, &default_classid, &cc) != 0) { // keep a reused pin's config
        cc = pspxdp_class_config{};
        cc.kind = PSPXDP_CLASS_NORMAL;
        auto slots = control::SlotAllocator::open(*cfd, *sfd);
        auto slot = slots ? slots.value().allocate() : Result<uint32_t>(Error{slots.error()});
        if (!slot) error = "a slot for the default class: " + slot.error();
        else cc.slot = *slot;
        if (error.empty() && bpf_map_update_elem(*cfd, &default_classid, &cc, BPF_NOEXIST))
            error = "writing the default class into class_config: " + errstr(errno);
    }
    if (dir >= 0) close(dir);
    close(*cfd);
    close(*sfd);
    if (!error.empty()) return err(error);
    auto fd = open_pinned_map(p, "pacer_state");
    if (!fd) return err(fd.error());
    uint32_t key = 0;
    pspxdp_pacer_state st{};
    bpf_map_lookup_elem(*fd, &key, &st); // keeps the flags of a reused pin
    st.default_classid = pspxdp_classid_of(default_classid);
    st.pacer_ifindex = ifindex;
    st.line_rate_bps = line_rate_bps; // the control plane validates class rates against it
    st.heartbeat_ns = 0;              // no daemon yet: TC passes
    int rc = bpf_map_update_elem(*fd, &key, &st, BPF_ANY) ? -errno : 0;
    auto bumped = rc ? Result<void>() : control::bump_config_gen(*fd);
    close(*fd);
    if (rc) return err("writing pacer_state: " + errstr(rc));
    if (!bumped) return err(bumped.error());
    return {};
}

} // namespace

Paths paths_for(const std::string &dev) {
    Paths p;
    p.dev = dev;
    p.pin_dir = std::string(PSPXDP_PIN_ROOT) + "/" + dev;
    std::string base = std::string(kRunDir) + "/" + dev;
    p.lock = base + ".lock";
    p.state = base + ".state";
    p.pid = base + ".pid";
    p.log = base + ".log";
    p.stats = base + ".stats";
    return p;
}

std::map<std::string, std::string> AttachState::to_kv() const {
    auto b = [](bool v) { return std::string(v ? "1" : "0"); };
    return {{"dev", dev},
            {"dev_ifindex", std::to_string(dev_ifindex)},
            {"pacer_a", pacer_a},
            {"pacer_b", pacer_b},
            {"pacer_a_ifindex", std::to_string(pacer_a_ifindex)},
            {"pacer_b_ifindex", std::to_string(pacer_b_ifindex)},
            {"queues", std::to_string(queues)},
            {"line_rate_bps", std::to_string(line_rate_bps)},
            {"window_bytes", std::to_string(window_bytes)},
            {"veth_created", b(veth_created)},
            {"clsact_created", b(clsact_created)},
            {"tc_attached", b(tc_attached)},
            {"xdp_attached", b(xdp_attached)},
            {"pins_created", b(pins_created)}};
}

Result<AttachState> AttachState::from_kv(const std::map<std::string, std::string> &kv) {
    AttachState s;
    auto str = [&](const char *k) {
        auto it = kv.find(k);
        return it == kv.end() ? std::string() : it->second;
    };
    auto num = [&](const char *k) -> uint64_t {
        auto v = str(k);
        return v.empty() ? 0 : std::strtoull(v.c_str(), nullptr, 10);
    };
    s.dev = str("dev");
    if (s.dev.empty()) return err("state file has no dev");
    s.dev_ifindex = uint32_t(num("dev_ifindex"));
    s.pacer_a = str("pacer_a");
    s.pacer_b = str("pacer_b");
    s.pacer_a_ifindex = uint32_t(num("pacer_a_ifindex"));
    s.pacer_b_ifindex = uint32_t(num("pacer_b_ifindex"));
    s.queues = uint32_t(num("queues"));
    s.line_rate_bps = num("line_rate_bps");
    s.window_bytes = num("window_bytes");
    s.veth_created = num("veth_created");
    s.clsact_created = num("clsact_created");
    s.tc_attached = num("tc_attached");
    s.xdp_attached = num("xdp_attached");
    s.pins_created = num("pins_created");
    return s;
}

Result<void> write_state(const Paths &p, const AttachState &s) {
    std::string tmp = p.state + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        if (!f) return err("writing " + tmp + ": " + errstr(errno));
        for (auto &[k, v] : s.to_kv())
            f << k << "=" << v << "\n";
        f.flush();
        if (!f) return err("writing " + tmp + ": " + errstr(errno));
    }
    // rename: a reader never sees half a state file.
    if (rename(tmp.c_str(), p.state.c_str()) < 0)
        return err("renaming " + tmp + ": " + errstr(errno));
    return {};
}

Result<AttachState> read_state(const Paths &p) {
    std::ifstream f(p.state);
    if (!f) {
        if (errno == ENOENT) return err(p.dev + " is not attached (no " + p.state + ")");
        return err("reading " + p.state + ": " + errstr(errno));
    }
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(f, line)) {
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    auto s = AttachState::from_kv(kv);
    if (!s) return err(p.state + ": " + s.error());
    return s;
}

Result<DevLock> DevLock::acquire(const Paths &p, bool wait) {
    if (auto r = ensure_run_dir(); !r) return err(r.error());
    int fd = open(p.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return err("opening lock " + p.lock + ": " + errstr(errno));
    if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return err("another pspxdp attach/detach on " + p.dev + " is running");
        return err("locking " + p.lock + ": " + errstr(e));
    }
    return DevLock(fd);
}

DevLock::~DevLock() {
    if (fd_ >= 0) close(fd_); // releases the flock; the lock file stays (unlinking it races)
}

Result<void> ensure_run_dir() {
    return mkdir_p(kRunDir, 0755);
}

Result<void> ensure_bpffs() {
    struct statfs st {};
    if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC) return {};
    if (auto r = mkdir_p("/sys/fs/bpf", 0755); !r) return r;
    if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") < 0)
        return err("mounting bpffs on /sys/fs/bpf: " + errstr(errno));
    return {};
}

void remove_run_files(const Paths &p) {
    unlink(p.stats.c_str());
    unlink(p.log.c_str());
    unlink(p.pid.c_str());   // normally gone with the daemon, but not after a SIGKILL
    unlink(p.state.c_str()); // normally gone with detach; a failed attach may leave it
    unlink(p.lock.c_str()); // a waiter on the old inode finds the state file gone
    rmdir(kRunDir);         // only when empty
}

Result<int> open_pinned_map(const Paths &p, const std::string &map) {
    std::string path = p.pin(map);
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return err("map " + path + " not found (is " + p.dev + " attached?)");
        return err("opening pinned map " + path + ": " + errstr(e));
    }
    return fd;
}

Result<AttachState> attach(const AttachRequest &req) {
    Paths p = paths_for(req.dev);
    auto dev = get_link(req.dev);
    if (!dev) return err(dev.error());
    AttachState s;
    s.dev = req.dev;
    s.dev_ifindex = dev->ifindex;
    s.pacer_a = pacer_name_a(dev->ifindex);
    s.pacer_b = pacer_name_b(dev->ifindex);
    s.queues = req.queues;
    s.line_rate_bps = req.line_rate_bps;
    s.window_bytes = req.window_bytes;

    classifier_bpf *cls = nullptr;
    redirect_bpf *rdr = nullptr;
    std::string error;
    auto fail = [&](std::string msg) -> Result<AttachState> {
        error = std::move(msg);
        if (cls) classifier_bpf__destroy(cls);
        if (rdr) redirect_bpf__destroy(rdr);
        (void)detach(p, s); // undo exactly what the state says
        return err(error);
    };

    if (auto r = ensure_run_dir(); !r) return err(r.error());
    if (auto r = ensure_bpffs(); !r) return err(r.error());
    // The state file goes first: whatever happens next, detach can undo it.
    if (auto r = write_state(p, s); !r) return err(r.error());

    // A stale pair from a crashed run would make creation fail with EEXIST;
    // it is ours by name, so it can go.
    if (get_link(s.pacer_a)) {
        if (auto r = delete_link(s.pacer_a); !r) return fail(r.error());
    }
    // The pacer carries DEV's frames with a tag in front (shared.h).
    if (auto r = create_veth_pair(s.pacer_a, s.pacer_b, s.queues, dev->mtu + PSPXDP_TAG_BYTES); !r)
        return fail(r.error());
    s.veth_created = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());
    for (const auto &n : {s.pacer_a, s.pacer_b})
        if (auto r = disable_ipv6(n); !r) return fail(r.error());
    if (auto r = set_tx_checksum(s.pacer_a, false); !r) return fail(r.error());
    for (const auto &n : {s.pacer_a, s.pacer_b})
        if (auto r = set_link_up(n); !r) return fail(r.error());
    auto a = get_link(s.pacer_a);
    auto b = get_link(s.pacer_b);
    if (!a) return fail(a.error());
    if (!b) return fail(b.error());
    s.pacer_a_ifindex = a->ifindex;
    s.pacer_b_ifindex = b->ifindex;

    if (auto r = mkdir_p(p.pin_dir, 0700); !r) return fail(r.error());
    s.pins_created = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());

    cls = classifier_bpf__open();
    if (!cls) return fail("opening classifier BPF object: " + libbpf_err(errno));
    rdr = redirect_bpf__open();
    if (!rdr) return fail("opening redirect BPF object: " + libbpf_err(errno));
    if (auto r = set_pins(cls->obj, p.pin_dir); !r) return fail(r.error());
    if (auto r = set_pins(rdr->obj, p.pin_dir); !r) return fail(r.error());
    if (int rc = classifier_bpf__load(cls))
        return fail("loading classifier BPF program: " + libbpf_err(rc) + " (a pin under " +
                    p.pin_dir + " from an older version? detach first)");
    if (int rc = redirect_bpf__load(rdr))
        return fail("loading redirect BPF program: " + libbpf_err(rc));
    if (auto r = write_pacer_state(p, s.pacer_a_ifindex, s.line_rate_bps, req.default_classid); !r)
        return fail(r.error());

    // XDP native on b: generic XDP never sees the redirected skbs.
    int rc = bpf_xdp_attach(int(s.pacer_b_ifindex), bpf_program__fd(rdr->progs.pspxdp_redirect),
                            XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr);
    if (rc) return fail("attaching XDP (native) on " + s.pacer_b + ": " + libbpf_err(rc));
    s.xdp_attached = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());

    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(s.dev_ifindex), .attach_point = BPF_TC_EGRESS);
    // -EEXIST is an answer here, not an error: keep libbpf from printing it.
    libbpf_print_fn_t old_print = libbpf_set_print(nullptr);
    rc = bpf_tc_hook_create(&hook);
    libbpf_set_print(old_print);
    if (rc && rc != -EEXIST)
        return fail("creating clsact qdisc on " + s.dev + ": " + libbpf_err(rc));
    // -EEXIST: someone else's, never ours to delete - unless it is the one a
    // replaced (crashed) attachment of ours created and left in place.
    s.clsact_created = (rc == 0) || (rc == -EEXIST && req.clsact_ours);
    if (auto r = write_state(p, s); !r) return fail(r.error());
    // REPLACE: a filter at pspxdp's handle/prio is a leftover of a crashed
    // pspxdp (its state file gone), never someone else's.
    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(cls->progs.pspxdp_classify),
                .flags = BPF_TC_F_REPLACE, .handle = kTcHandle, .priority = kTcPriority);
    rc = bpf_tc_attach(&hook, &opts);
    if (rc)
        return fail("attaching TC egress filter on " + s.dev + ": " + libbpf_err(rc) +
                    (rc == -EEXIST ? " (a filter with handle 0x5053 prio 1 exists)" : ""));
    s.tc_attached = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());

    // The kernel holds the programs (TC filter, XDP link) and the pins hold
    // the maps; the skeletons can go.
    classifier_bpf__destroy(cls);
    redirect_bpf__destroy(rdr);
    return s;
}

Result<void> detach(const Paths &p, const AttachState &s) {
    std::string first;
    auto note = [&](const std::string &e) {
        if (first.empty()) first = e;
    };
    if (s.tc_attached) {
        LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(s.dev_ifindex),
                    .attach_point = BPF_TC_EGRESS);
        LIBBPF_OPTS(bpf_tc_opts, opts, .handle = kTcHandle, .priority = kTcPriority);
        int rc = bpf_tc_detach(&hook, &opts);
        if (rc && rc != -ENOENT && rc != -ENODEV && rc != -EINVAL)
            note("detaching TC filter from " + s.dev + ": " + libbpf_err(rc));
    }
    if (s.clsact_created) {
        // Only a qdisc pspxdp created; INGRESS|EGRESS is how libbpf names clsact.
        LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(s.dev_ifindex),
                    .attach_point = bpf_tc_attach_point(BPF_TC_INGRESS | BPF_TC_EGRESS));
        int rc = bpf_tc_hook_destroy(&hook);
        if (rc && rc != -ENOENT && rc != -ENODEV && rc != -EINVAL)
            note("deleting clsact qdisc on " + s.dev + ": " + libbpf_err(rc));
    }
    if (s.xdp_attached && s.pacer_b_ifindex) {
        int rc = bpf_xdp_detach(int(s.pacer_b_ifindex), XDP_FLAGS_DRV_MODE, nullptr);
        if (rc && rc != -ENODEV && rc != -ENOENT)
            note("detaching XDP from " + s.pacer_b + ": " + libbpf_err(rc));
    }
    if (s.veth_created && !s.pacer_a.empty()) {
        if (auto r = delete_link(s.pacer_a); !r) note(r.error());
    }
    if (s.pins_created) {
        if (auto r = remove_pins(p.pin_dir); !r) note(r.error());
    }
    if (!first.empty()) return err(first);
    unlink(p.state.c_str());
    return {};
}

} // namespace pspxdp::setup
