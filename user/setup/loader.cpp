#include "setup/loader.hpp"

#include "common/caps.hpp"
#include "common/config_map.hpp"
#include "common/fd.hpp"
#include "common/libbpf_log.hpp"
#include "common/ns.hpp"
#include "common/slots.hpp"
#include "common/text.hpp"
#include "pspxdp/shared.h"
#include "setup/netlink.hpp"
#include "setup/ownership.hpp"

#include "classifier.skel.h"
#include "redirect.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace pspxdp::setup {

using common::errno_text;
using common::Fd;

namespace {

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
        if (rc) return err("setting pin path " + path + ": " + errno_text(rc));
    }
    return {};
}

// libbpf's error, with its last warning when it has one (the verifier's or
// the loader's reason), since its printer is quiet.
std::string libbpf_err(int rc) {
    std::string why = common::take_libbpf_warning();
    return errno_text(rc) + (why.empty() ? "" : " (libbpf: " + why + ")");
}

Result<void> write_pacer_state(const Paths &p, uint32_t ifindex, uint64_t line_rate_bps,
                               uint32_t default_classid, bool clsact_ours) {
    // The default class first: the TC program must find it configured as
    // soon as it can see default_classid.
    // Slots are given out under DEV's lock, which attach holds.
    auto cfd = common::open_pinned_map<uint32_t, pspxdp_class_config>(p, "class_config",
                                                                      common::Access::Write);
    if (!cfd) return cfd.failure();
    auto sfd = common::open_pinned_map<uint32_t, pspxdp_class_counters>(p, "pacer_stats",
                                                                        common::Access::Write);
    if (!sfd) return sfd.failure();
    pspxdp_class_config cc{};
    if (bpf_map_lookup_elem(cfd->get(), &default_classid, &cc) != 0) { // keep a reused pin's config
        cc = pspxdp_class_config{};
        cc.kind = PSPXDP_CLASS_NORMAL;
        auto slots = common::SlotAllocator::open(cfd->get(), sfd->get());
        auto slot = slots ? slots.value().allocate() : Result<uint32_t>(slots.failure());
        if (!slot) return err("a slot for the default class: " + slot.error());
        cc.slot = *slot;
        int rc = bpf_map_update_elem(cfd->get(), &default_classid, &cc, BPF_NOEXIST) ? -errno : 0;
        if (rc && rc != -EEXIST)
            return err("writing the default class into class_config: " + errno_text(rc));
    }
    auto fd = common::open_pinned_map<uint32_t, pspxdp_pacer_state>(p, "pacer_state",
                                                                    common::Access::Write);
    if (!fd) return fd.failure();
    uint32_t key = 0;
    pspxdp_pacer_state st{};
    bpf_map_lookup_elem(fd->get(), &key, &st); // keeps the config_gen of a reused pin
    st.default_classid = pspxdp_classid_of(default_classid);
    st.pacer_ifindex = ifindex;
    st.line_rate_bps = line_rate_bps; // the control plane validates class rates against it
    st.heartbeat_ns = 0;              // no daemon yet: TC passes
    if (clsact_ours)
        st.flags |= PSPXDP_STATE_F_CLSACT_OURS;
    else
        st.flags &= ~uint32_t(PSPXDP_STATE_F_CLSACT_OURS);
    if (bpf_map_update_elem(fd->get(), &key, &st, BPF_ANY) != 0)
        return err("writing pacer_state: " + errno_text(errno));
    if (auto r = common::bump_config_gen(fd->get()); !r) return r.failure();
    return {};
}

} // namespace

uint32_t max_pacer_mtu() {
    const long page = sysconf(_SC_PAGESIZE);
    constexpr uint32_t kXdpHeadroom = 256; // XDP_PACKET_HEADROOM
    constexpr uint32_t kSharedInfo = 320;  // SKB_DATA_ALIGN(sizeof(struct skb_shared_info))
    constexpr uint32_t kEthHeader = 14;
    return uint32_t(page > 0 ? page : 4096) - kXdpHeadroom - kSharedInfo - kEthHeader -
           PSPXDP_TAG_BYTES;
}

Result<void> ensure_bpffs() {
    struct statfs st {};
    if (statfs("/sys/fs/bpf", &st) == 0 && st.f_type == BPF_FS_MAGIC) return {};
    if (auto r = common::need_caps("mounting bpffs on /sys/fs/bpf", {CAP_SYS_ADMIN}); !r) return r;
    if (auto r = common::mkdir_p("/sys/fs/bpf", 0755); !r) return r;
    if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") < 0)
        return err("mounting bpffs on /sys/fs/bpf: " + errno_text(errno));
    return {};
}

void remove_run_files(const Paths &p) {
    unlink(p.log.c_str());
    unlink(p.pid.c_str());   // normally gone with the daemon, but not after a SIGKILL
    unlink(p.state.c_str()); // normally gone with detach; a failed attach may leave it
    unlink(p.lock.c_str());  // a waiter on the old file sees it went and locks the new one
    rmdir(common::kRunDir);  // only when empty
}

Result<void> remove_tc_filter(uint32_t ifindex) {
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(ifindex), .attach_point = BPF_TC_EGRESS);
    LIBBPF_OPTS(bpf_tc_opts, opts, .handle = kTcHandle, .priority = kTcPriority);
    int rc = bpf_tc_detach(&hook, &opts);
    if (rc && rc != -ENOENT && rc != -ENODEV && rc != -EINVAL)
        return err("detaching the TC filter from ifindex " + std::to_string(ifindex) + ": " +
                   libbpf_err(rc));
    return {};
}

Result<void> remove_pins(const Paths &p, Notes &notes) {
    DIR *d = opendir(p.pin_dir.c_str());
    if (!d) {
        if (errno == ENOENT) return {};
        return err(common::path_error("removing the pins of " + p.dev, p.pin_dir, errno));
    }
    std::string first_error;
    std::vector<std::string> left;
    while (dirent *e = readdir(d)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        const std::string path = p.pin_dir + "/" + name;
        struct stat st {};
        if (lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            left.push_back(name + "/");
            continue;
        }
        auto info = common::pinned_map_info(path);
        if (!info || !is_our_pin(name, *info)) {
            left.push_back(name);
            continue;
        }
        if (unlink(path.c_str()) < 0 && first_error.empty())
            first_error = common::path_error("removing a pin of " + p.dev, path, errno);
    }
    closedir(d);
    if (!left.empty()) {
        std::string list;
        for (const auto &l : left) list += (list.empty() ? "" : ", ") + common::quote(l);
        notes.push_back("left " + p.pin_dir + " in place: it holds " + list +
                        ", which pspxdp did not create");
    } else if (rmdir(p.pin_dir.c_str()) < 0 && errno != ENOENT && first_error.empty()) {
        first_error =
            common::path_error("removing the pin directory of " + p.dev, p.pin_dir, errno);
    }
    rmdir(common::kPinRoot); // fails harmlessly while other DEVs are attached
    if (!first_error.empty()) return err(first_error);
    return {};
}

Result<PacedSum> paced_sum(const Paths &p) {
    auto fd = common::open_pinned_map<uint32_t, pspxdp_class_config>(p, "class_config",
                                                                     common::Access::Read);
    if (!fd) return fd.failure();
    auto all = common::read_class_configs(fd->get());
    if (!all) return err(p.pin("class_config") + ": " + all.error());
    PacedSum sum;
    for (const auto &e : *all)
        if (e.config.kind == PSPXDP_CLASS_PACED) {
            sum.bps += e.config.rate_bps;
            ++sum.classes;
        }
    return sum;
}

// Read access by design: when the group kReadGroup exists (the package
// creates it), DEV's pin directory and pins are root:pspxdp 0750/0640, so
// its members run status, show, stats and save without privileges (maps
// opened BPF_F_RDONLY); writing stays root's. Without the group: root only.
static Result<void> share_pins(const Paths &p) {
    const group *g = getgrnam(common::kReadGroup);
    if (!g) return {};
    auto share = [&](const std::string &path, mode_t mode) -> Result<void> {
        if (chown(path.c_str(), uid_t(-1), g->gr_gid) != 0 || chmod(path.c_str(), mode) != 0)
            return err(common::path_error(
                std::string("giving group ") + common::kReadGroup + " read access", path, errno));
        return {};
    };
    if (auto r = share(p.pin_dir, 0750); !r) return r;
    DIR *d = opendir(p.pin_dir.c_str());
    if (!d) return err(common::path_error("listing the pins of " + p.dev, p.pin_dir, errno));
    Result<void> out;
    while (dirent *e = readdir(d))
        if (e->d_type == DT_REG && out) out = share(p.pin_dir + "/" + e->d_name, 0640);
    closedir(d);
    return out;
}

// Tests kill attach at one of build()'s steps (PSPXDP_TEST_KILL_AT=veth,
// ...): what a kill -9 a few ms in leaves, deterministically.
static void kill_point(const char *step) {
    const char *at = std::getenv("PSPXDP_TEST_KILL_AT");
    if (at && std::strcmp(at, step) == 0) raise(SIGKILL);
}

Result<AttachState> build(const AttachRequest &req) {
    auto paths = common::paths_for(req.dev);
    if (!paths) return paths.failure();
    const Paths &p = *paths;
    auto dev = get_link(req.dev);
    if (!dev) return dev.failure();
    AttachState s;
    s.dev = req.dev;
    s.dev_ifindex = dev->ifindex;
    const common::NetnsId here = common::netns_here();
    s.netns = here.inode;
    s.netns_cookie = here.cookie;
    s.pacer_a = pacer_name_a(dev->ifindex);
    s.pacer_b = pacer_name_b(dev->ifindex);
    s.queues = req.queues;
    s.line_rate_bps = req.line_rate_bps;
    s.window_bytes = req.window_bytes;

    if (auto r = ensure_run_dir(); !r) return r.failure();
    if (auto r = ensure_bpffs(); !r) return r.failure();
    // A replacement reuses the pins of the attachment it replaces: they
    // hold the user's classes and filters and survive a failed attach.
    const bool pins_existed = access(p.pin_dir.c_str(), F_OK) == 0;

    classifier_bpf *cls = nullptr;
    redirect_bpf *rdr = nullptr;
    auto fail = [&](std::string msg) -> Result<AttachState> {
        if (cls) classifier_bpf__destroy(cls);
        if (rdr) redirect_bpf__destroy(rdr);
        Notes ignored;
        (void)teardown(p, s, ignored, pins_existed); // undo exactly what the state says
        return err(std::move(msg));
    };
    // The state file goes first: whatever happens next, detach can undo it.
    if (auto r = write_state(p, s); !r) return r.failure();
    kill_point("state");

    // A pair left by a crashed run would make creation fail with EEXIST;
    // it can go if it is ours (name, kind and peer), never otherwise.
    switch (veth_pair_owner(s.pacer_a, s.pacer_b)) {
    case Ownership::Ours:
        if (auto r = delete_link(s.pacer_a); !r) return fail(r.error());
        break;
    case Ownership::Foreign:
        return fail("a device named " + s.pacer_a + " exists and is not a pspxdp pacer veth");
    case Ownership::Absent:
        if (get_link(s.pacer_b))
            return fail("a device named " + s.pacer_b + " exists and is not a pspxdp pacer veth");
        break;
    }
    // The pacer carries DEV's frames with a tag in front (shared.h).
    if (auto r = create_veth_pair(s.pacer_a, s.pacer_b, s.queues, dev->mtu + PSPXDP_TAG_BYTES); !r)
        return fail(r.error());
    s.veth_created = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());
    kill_point("veth");
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

    // The root readable by all, DEV's directory root's only until
    // share_pins() gives group kReadGroup read access.
    if (auto r = common::mkdir_p(common::kPinRoot, 0755); !r) return fail(r.error());
    if (auto r = common::mkdir_p(p.pin_dir, 0700); !r) return fail(r.error());
    s.pins_created = true; // this attachment's: a detach removes them
    if (auto r = write_state(p, s); !r) return fail(r.error());
    kill_point("pins");

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

    if (auto r = share_pins(p); !r) return fail(r.error());
    kill_point("loaded");

    // clsact: ours if we create it here, or if the attachment this one
    // replaces created it; a clsact someone else made is shared, never ours.
    auto qdisc = ingress_qdisc_kind(s.dev_ifindex);
    if (!qdisc) return fail(qdisc.error());
    const bool clsact_ours = qdisc->empty() || req.clsact_ours;
    if (auto r = write_pacer_state(p, s.pacer_a_ifindex, s.line_rate_bps, req.default_classid,
                                   clsact_ours);
        !r)
        return fail(r.error());

    // XDP native on b: generic XDP never sees the redirected skbs.
    int rc = bpf_xdp_attach(int(s.pacer_b_ifindex), bpf_program__fd(rdr->progs.pspxdp_redirect),
                            XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr);
    if (rc == -ERANGE) // veth: "Peer MTU is too large to set XDP" (a page per frame)
        return fail(s.dev + "'s MTU " + std::to_string(dev->mtu) +
                    " is more than the pacer veth can carry with XDP (" +
                    std::to_string(max_pacer_mtu()) + ")");
    if (rc) return fail("attaching XDP (native) on " + s.pacer_b + ": " + libbpf_err(rc));
    s.xdp_attached = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());
    kill_point("xdp");

    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(s.dev_ifindex), .attach_point = BPF_TC_EGRESS);
    rc = qdisc->empty() ? bpf_tc_hook_create(&hook) : 0;
    common::take_libbpf_warning();
    if (rc && rc != -EEXIST)
        return fail("creating clsact qdisc on " + s.dev + ": " + libbpf_err(rc));
    s.clsact_created = clsact_ours;
    if (auto r = write_state(p, s); !r) return fail(r.error());
    kill_point("clsact");
    // A filter at our handle/prio is replaced only if it is ours (a leftover
    // of a crashed pspxdp whose state file went); the caller refused a
    // foreign one, and this checks again.
    std::string who;
    auto owner = tc_filter_owner(s.dev_ifindex, &who);
    if (!owner) return fail(owner.error());
    if (*owner == Ownership::Foreign)
        return fail(s.dev + "'s egress prio " + std::to_string(kTcPriority) + " holds " + who +
                    " that is not pspxdp's");
    LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(cls->progs.pspxdp_classify),
                .flags = uint32_t(*owner == Ownership::Ours ? BPF_TC_F_REPLACE : 0),
                .handle = kTcHandle, .priority = kTcPriority);
    rc = bpf_tc_attach(&hook, &opts);
    if (rc) return fail("attaching TC egress filter on " + s.dev + ": " + libbpf_err(rc));
    s.tc_attached = true;
    if (auto r = write_state(p, s); !r) return fail(r.error());
    kill_point("tc");

    // The kernel holds the programs (TC filter, XDP link) and the pins hold
    // the maps; the skeletons can go.
    classifier_bpf__destroy(cls);
    redirect_bpf__destroy(rdr);
    return s;
}

Result<void> teardown(const Paths &p, const AttachState &s, Notes &notes, bool keep_pins) {
    std::string first;
    auto note = [&](const std::string &e) {
        if (first.empty()) first = e;
    };
    // DEV's TC parts only if DEV is still the device the state names, here:
    // after DEV was deleted they went with it, and its ifindex may belong to
    // another device by now.
    auto dev = get_link(s.dev_ifindex);
    const bool same_dev = s.dev_ifindex && dev && dev->name == s.dev &&
                          (s.netns == 0 || s.netns_id().same(common::netns_here()));
    if (same_dev && s.tc_attached) {
        std::string who;
        auto owner = tc_filter_owner(s.dev_ifindex, &who);
        if (!owner)
            note(owner.error());
        else if (*owner == Ownership::Ours) {
            if (auto r = remove_tc_filter(s.dev_ifindex); !r) note(r.error());
        } else if (*owner == Ownership::Foreign)
            notes.push_back("left " + who + " at " + s.dev + "'s egress prio " +
                            std::to_string(kTcPriority) + ": not pspxdp's");
    }
    if (same_dev && s.clsact_created) {
        auto kind = ingress_qdisc_kind(s.dev_ifindex);
        auto only_ours = clsact_holds_only_ours(s.dev_ifindex);
        if (!kind)
            note(kind.error());
        else if (!only_ours)
            note(only_ours.error());
        else if (*kind == "clsact" && !*only_ours)
            notes.push_back("left the clsact qdisc on " + s.dev +
                            ": pspxdp created it, but it now holds filters of others");
        else if (*kind == "clsact") {
            // INGRESS|EGRESS is how libbpf names clsact.
            LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = int(s.dev_ifindex),
                        .attach_point = bpf_tc_attach_point(BPF_TC_INGRESS | BPF_TC_EGRESS));
            int rc = bpf_tc_hook_destroy(&hook);
            common::take_libbpf_warning();
            if (rc && rc != -ENOENT && rc != -ENODEV && rc != -EINVAL)
                note("deleting clsact qdisc on " + s.dev + ": " + libbpf_err(rc));
        }
    }
    if (s.veth_created && !s.pacer_a.empty()) {
        // Deleting a deletes b, and the XDP program on b with it.
        switch (veth_pair_owner(s.pacer_a, s.pacer_b, s.pacer_a_ifindex)) {
        case Ownership::Ours:
            if (auto r = delete_link(s.pacer_a); !r) note(r.error());
            break;
        case Ownership::Foreign:
            notes.push_back("left " + s.pacer_a + ": it is no longer pspxdp's pacer veth");
            break;
        case Ownership::Absent: break;
        }
    } else if (s.xdp_attached && s.pacer_b_ifindex) {
        int rc = bpf_xdp_detach(int(s.pacer_b_ifindex), XDP_FLAGS_DRV_MODE, nullptr);
        common::take_libbpf_warning();
        if (rc && rc != -ENODEV && rc != -ENOENT)
            note("detaching XDP from " + s.pacer_b + ": " + libbpf_err(rc));
    }
    if (s.pins_created && !keep_pins) {
        if (auto r = remove_pins(p, notes); !r) note(r.error());
    }
    if (!first.empty()) return err(first);
    unlink(p.state.c_str());
    return {};
}

} // namespace pspxdp::setup
