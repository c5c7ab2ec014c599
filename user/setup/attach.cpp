#include "setup/attach.hpp"

#include "core/engine.hpp"
#include "core/framing.hpp"

#include "common/caps.hpp"
#include "common/cgroup.hpp"
#include "common/clock.hpp"
#include "common/ns.hpp"
#include "common/pins.hpp"
#include "common/text.hpp"
#include "core/units.hpp"
#include "setup/netlink.hpp"
#include "setup/ownership.hpp"
#include "setup/process.hpp"

#include <bpf/bpf.h>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <linux/magic.h>
#include <map>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace pspxdp::setup {

using common::quote;
using K = Probe::Kind;

namespace {

bool pins_present(const Paths &p) {
    struct stat st {};
    if (stat(p.pin("pacer_state").c_str(), &st) == 0) return true;
    return errno == EACCES; // cannot look: do not call it broken
}

std::string detach_hint(const Paths &p) {
    return "pspxdp detach " + p.dev + " removes what is left";
}

// The daemon's stop grace: its shutdown sends what is queued (<= 200 ms, plus
// 20 ms for frames still on their way) and closes one AF_XDP socket per pacer
// queue at ~16 ms each (an RCU grace period per socket). The grace is far
// above that: SIGKILL would cut the daemon's drop accounting short.
int stop_grace_ms(const std::optional<AttachState> &s) {
    return 3000 + (s ? int(s->queues) * 25 : 0);
}

uint32_t pacer_ifindex_from_pins(const Paths &p, uint32_t *flags) {
    auto fd = common::open_pinned_map<uint32_t, pspxdp_pacer_state>(p, "pacer_state",
                                                                    common::Access::Read);
    if (!fd) return 0;
    uint32_t key = 0;
    pspxdp_pacer_state st{};
    if (bpf_map_lookup_elem(fd->get(), &key, &st) != 0) return 0;
    if (flags) *flags = st.flags;
    return st.pacer_ifindex;
}

// What the state file would say, rebuilt from what is there when it is
// gone: DEV here by name, the pacer veth from pacer_state, the clsact flag
// from pacer_state. Every part is still checked for ownership by teardown.
AttachState reconstruct(const Paths &p) {
    AttachState s;
    s.dev = p.dev;
    s.netns = common::netns_inode();
    s.netns_cookie = common::netns_here().cookie;
    if (auto l = get_link(p.dev)) s.dev_ifindex = l->ifindex;
    uint32_t flags = 0;
    uint32_t pacer = pacer_ifindex_from_pins(p, &flags);
    if (auto a = pacer ? get_link(pacer) : Result<LinkInfo>(err("none")); a && a->link) {
        s.pacer_a = a->name;
        s.pacer_a_ifindex = a->ifindex;
        if (auto b = get_link(a->link)) {
            s.pacer_b = b->name;
            s.pacer_b_ifindex = b->ifindex;
        }
    } else if (s.dev_ifindex) {
        s.pacer_a = pacer_name_a(s.dev_ifindex);
        s.pacer_b = pacer_name_b(s.dev_ifindex);
    }
    s.veth_created = !s.pacer_a.empty();
    s.tc_attached = s.dev_ifindex != 0;
    s.clsact_created = flags & PSPXDP_STATE_F_CLSACT_OURS;
    s.pins_created = true;
    return s;
}

// Why a dead attachment died, in a few words, for the replacement warning.
std::string old_why(const Probe &pr) {
    if (!pr.state) return {};
    if (!pr.state->stopped.empty()) return pr.state->stopped;
    if (pr.kind == K::Dead) return "daemon killed or crashed";
    return {};
}

// The options of the daemon's argv, "--name" -> value ("" for a flag).
std::map<std::string, std::string> option_map(const std::vector<std::string> &args) {
    std::map<std::string, std::string> m;
    for (size_t i = 0; i < args.size(); ++i) {
        if (!args[i].starts_with("--")) continue;
        const bool valued = i + 1 < args.size() && !args[i + 1].starts_with("--");
        m[args[i]] = valued ? args[i + 1] : "";
        if (valued) ++i;
    }
    return m;
}

std::vector<std::string> cmdline_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> out;
    for (std::string a; std::getline(f, a, '\0');) out.push_back(a);
    return out;
}

// How an attachment alive already differs from what this attach asks for,
// in words ("line rate 1Gbit, not 500Mbit"); empty when the same. Compared:
// what the state file records, the default class when the user gave one, and
// the daemon's argv (clock, buffer, spin, CPU, config file...).
std::string difference(const Paths &p, const Probe &pr, const AttachRequest &req,
                       const AttachOptions &opt) {
    const AttachState &s = *pr.state;
    auto num = [](const char *what, const std::string &have, const std::string &want) {
        return std::string(what) + " " + have + ", not " + want;
    };
    if (s.line_rate_bps != req.line_rate_bps)
        return num("line rate", format_rate(s.line_rate_bps), format_rate(req.line_rate_bps));
    if (s.queues != req.queues)
        return num("sockets", std::to_string(s.queues), std::to_string(req.queues));
    if (s.window_bytes != req.window_bytes)
        return num("window", std::to_string(s.window_bytes) + " B",
                   std::to_string(req.window_bytes) + " B");
    if (opt.default_classid_given) {
        auto fd = common::open_pinned_map<uint32_t, pspxdp_pacer_state>(p, "pacer_state",
                                                                        common::Access::Read);
        uint32_t key = 0;
        pspxdp_pacer_state st{};
        if (fd && bpf_map_lookup_elem(fd->get(), &key, &st) == 0 &&
            PSPXDP_CLASSID(st.default_classid.major, st.default_classid.minor) !=
                req.default_classid)
            return num("default class",
                       format_classid(ClassId{st.default_classid.major, st.default_classid.minor}),
                       format_classid(ClassId::from_raw(req.default_classid)));
    }
    const auto argv = cmdline_of(pr.daemon);
    if (argv.size() < 3 || argv[1] != "daemon" || argv[2] != p.dev)
        return "its daemon (pid " + std::to_string(pr.daemon) +
               ") is a foreground pspxdp attach, whose options are not compared";
    const auto have = option_map({argv.begin() + 3, argv.end()});
    const auto want = option_map(opt.daemon_args);
    for (const auto &m : {have, want})
        for (const auto &[name, v] : m) {
            auto h = have.find(name);
            auto w = want.find(name);
            const std::string hv = h == have.end() ? "(not given)" : h->second;
            const std::string wv = w == want.end() ? "(not given)" : w->second;
            if (hv != wv) return name + (hv.empty() ? "" : " " + hv) + ", not " + wv;
        }
    return {};
}

} // namespace

const char *kind_name(K k) {
    switch (k) {
    case K::NotAttached: return "not attached";
    case K::Alive: return "alive";
    case K::Dead: return "dead";
    case K::DevGone: return "device gone";
    case K::Elsewhere: return "attached elsewhere";
    case K::Broken: return "broken";
    case K::HalfMade: return "half attached";
    }
    return "?";
}

Probe probe(const Paths &p) {
    Probe r;
    r.netns_here = common::netns_here();
    if (state_exists(p)) {
        auto st = read_state(p);
        if (!st) {
            r.kind = K::Broken;
            r.why = st.error() + "; " + detach_hint(p);
            return r;
        }
        r.state = *st;
    }
    r.pins = pins_present(p);
    r.daemon = running_pid(p);
    if (!r.state) {
        if (!r.pins && !r.daemon) return r; // NotAttached
        r.kind = K::Broken;
        r.why = p.dev + " has " + (r.pins ? "pins" : "") + (r.pins && r.daemon ? " and " : "") +
                (r.daemon ? "a daemon (pid " + std::to_string(r.daemon) + ")" : "") +
                " but no state file (" + p.state + " removed by hand?); " + detach_hint(p);
        return r;
    }
    const AttachState &s = *r.state;
    if (s.netns && !s.netns_id().same(r.netns_here)) {
        r.kind = K::Elsewhere;
        if (common::netns_exists(s.netns_id()))
            r.why = p.dev + " is attached in network namespace " + common::netns_label(s.netns) +
                    ", not this one (" + common::netns_label(r.netns_here.inode) +
                    (s.netns == r.netns_here.inode ? ", a namespace that reused its inode" : "") +
                    "); run pspxdp there";
        else
            r.why = p.dev + " was attached in network namespace " + common::netns_label(s.netns) +
                    ", which no longer exists (its devices went with it); " + detach_hint(p);
        return r;
    }
    auto link = get_link(p.dev);
    const std::string stopped = s.stopped.empty() ? "" : " (" + s.stopped + ")";
    if (!link || link->ifindex != s.dev_ifindex) {
        r.kind = K::DevGone;
        r.why = !link ? p.dev + " (ifindex " + std::to_string(s.dev_ifindex) +
                            ") is gone from this network namespace" + stopped
                      : p.dev + " was re-created (ifindex " + std::to_string(link->ifindex) +
                            ", attached was " + std::to_string(s.dev_ifindex) + ")" + stopped;
        r.why += ": the attachment is dead; " + detach_hint(p) + ", or (re-)create " + p.dev +
                 " and pspxdp attach " + p.dev + " (classes and filters are kept)";
        return r;
    }
    // The last step of build() records tc_attached: an attachment without
    // it and without a daemon is one an attach did not finish (killed
    // midway, or still at work: the lock says who).
    if (!s.tc_attached && !r.daemon && s.stopped.empty()) {
        r.kind = K::HalfMade;
        const pid_t holder = common::lock_holder(p);
        r.why = holder ? p.dev + " is being attached by another pspxdp (pid " +
                             std::to_string(holder) + ")"
                       : p.dev + " is half attached (an attach was stopped before it finished: " +
                             (r.pins ? "" : "no pins, ") + "TC not attached); pspxdp attach " +
                             p.dev + " replaces it, " + detach_hint(p);
        return r;
    }
    if (!r.pins) {
        r.kind = K::Broken;
        struct statfs fs {};
        if (statfs("/sys/fs/bpf", &fs) != 0 || fs.f_type != BPF_FS_MAGIC)
            // Not removed: out of sight (ip netns exec mounts its own /sys,
            // and without CAP_SYS_ADMIN pspxdp cannot leave it).
            r.why = "cannot see " + p.dev +
                    "'s pins: /sys/fs/bpf here is not the bpf file "
                    "system (ip netns exec mounts its own /sys): run pspxdp with nsenter "
                    "--net=/run/netns/NS instead";
        else
            r.why = p.dev + "'s pins under " + p.pin_dir + " are gone (removed by hand?); " +
                    detach_hint(p);
        return r;
    }
    if (!r.daemon) {
        r.kind = K::Dead;
        r.why = p.dev + "'s daemon is not running" +
                (s.stopped.empty() ? " (killed or crashed)" : stopped) +
                ": TC passes traffic unpaced; pspxdp attach " + p.dev +
                " replaces the attachment, keeping classes and filters";
        return r;
    }
    r.kind = K::Alive;
    return r;
}

bool drops_host_pause(std::string_view driver) {
    // Their embedded switch drops every host-sent 802.3x frame (docs/design.md §6.1).
    return driver == "i40e" || driver == "ice";
}

Result<AttachState> check_here(const Paths &p) {
    Probe r = probe(p);
    switch (r.kind) {
    case K::Alive:
    case K::Dead:
    case K::DevGone: return *r.state;
    case K::NotAttached: return err(p.dev + " is not attached");
    case K::Elsewhere:
    case K::HalfMade:
    case K::Broken: return err(r.why);
    }
    return err(r.why);
}

Result<Attached> attach(const AttachOptions &opt, const Warn &warn) {
    auto paths = common::paths_for(opt.dev);
    if (!paths) return paths.failure();
    const Paths &p = *paths;
    if (auto r = common::need_caps("attach", {CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW}); !r)
        return r.failure();
    if (!opt.cannot_start.empty()) return err(opt.cannot_start);

    // Checks first: a refused attach changes nothing.
    auto link = get_link(opt.dev);
    if (!link) return link.failure();
    if (!link->is_ether()) return err(opt.dev + " is not an Ethernet device");
    if (!link->is_up()) return err(opt.dev + " is down");
    if (link->kind == "veth" && link->name.starts_with("psp") &&
        (link->name.ends_with("a") || link->name.ends_with("b")))
        return err(opt.dev + " looks like a pspxdp pacer veth");
    const std::string driver = opt.driver.empty() ? link->driver : opt.driver;
    if (drops_host_pause(driver)) {
        const std::string why = opt.dev + " is driven by " + driver +
                                ", whose NIC drops every host-sent 802.3x PAUSE frame: the gap "
                                "frames would never reach the wire and pacing would silently "
                                "degrade";
        if (!opt.force) return err(why + " (--force attaches anyway)");
        warn(why + " (attaching anyway: --force)");
    }
    if (link->mtu > max_pacer_mtu())
        return err(opt.dev + "'s MTU " + std::to_string(link->mtu) +
                   " is more than the pacer can carry (" + std::to_string(max_pacer_mtu()) +
                   ": native XDP on a veth needs each frame in one page); lower it first");
    auto qdisc = ingress_qdisc_kind(link->ifindex);
    if (!qdisc) return qdisc.failure();
    if (!qdisc->empty() && *qdisc != "clsact")
        return err(opt.dev + " has " + (*qdisc == "ingress" ? "an ingress" : "a " + quote(*qdisc)) +
                   " qdisc at ffff: where pspxdp needs a clsact qdisc for its egress filter "
                   "(only a clsact is shared); remove it first (tc qdisc del dev " +
                   opt.dev + " " + (*qdisc == "ingress" ? "ingress" : "handle ffff:") +
                   "), and use clsact for ingress filters");
    if (*qdisc == "clsact") {
        std::string who;
        auto owner = tc_filter_owner(link->ifindex, &who);
        if (!owner) return owner.failure();
        if (*owner == Ownership::Foreign)
            return err(opt.dev + "'s egress prio " + std::to_string(kTcPriority) + " holds " + who +
                       " that is not pspxdp's: pspxdp classifies at prio " +
                       std::to_string(kTcPriority) +
                       ", before any other filter; move that "
                       "filter to another prio first");
    }

    // The lock before the look: an attach that looked first could see
    // another's attachment half built and call it broken. A refusal from
    // here on leaves no lock file it created (a refused attach changes
    // nothing).
    const bool lock_existed = access(p.lock.c_str(), F_OK) == 0;
    auto lock = DevLock::acquire(p, DevLock::Wait::No);
    if (!lock) return lock.failure();
    Attached out;
    out.lock.swap(lock.value());
    auto refused = [&](const Error &e) -> Result<Attached> {
        if (!lock_existed) unlink(p.lock.c_str());
        return e;
    };
    Probe pr = probe(p);
    switch (pr.kind) {
    case K::Elsewhere:
    case K::Broken: return refused(err(pr.why));
    case K::Alive:
    case K::NotAttached:
    case K::Dead:
    case K::DevGone:
    case K::HalfMade: break;
    }

    // What this attach asks for, in full: the line rate, the queues, the
    // window (compared with an attachment alive already, or built).
    AttachRequest req;
    req.dev = opt.dev;
    req.queues = opt.queues;
    if (!req.queues) {
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        req.queues = uint32_t(std::clamp<long>(cpus, 1, PSPXDP_MAX_SOCKETS));
    }
    std::string no_speed; // the warning, given only if something is built
    if (opt.line_rate_bps) {
        req.line_rate_bps = *opt.line_rate_bps;
        out.line_rate_source = "--line-rate";
    } else if (auto mbps = get_speed_mbps(*link)) {
        req.line_rate_bps = *mbps * 1000000ull;
        out.line_rate_source = "ethtool speed";
    } else {
        req.line_rate_bps = 1000000000ull;
        out.line_rate_source = "default";
        no_speed = opt.dev + " reports no link speed (" +
                   (link->kind == "veth" ? "a veth has none" : "unknown") +
                   "); assuming 1Gbit, use --line-rate to set it";
    }
    const uint64_t line = req.line_rate_bps;
    // The window: how far the schedule may run ahead of the wire. A NIC's TX
    // ring holds that much already (full frames), so it sizes the window; a
    // veth has no ring and gets the engine's default.
    req.window_bytes = opt.window_bytes;
    out.window_source = "--window";
    if (!req.window_bytes) {
        req.window_bytes = EngineConfig{}.window_bytes;
        out.window_source = "default";
        if (auto ring = get_tx_ring(opt.dev)) {
            const uint64_t frame = link->mtu + kEthHeaderBytes + kEthOverheadBytes;
            req.window_bytes = std::clamp<uint64_t>(*ring * frame, req.window_bytes, 64ull << 20);
            out.window_source = "TX ring of " + std::to_string(*ring);
        }
    }
    req.default_classid = opt.default_classid;

    if (pr.kind == K::Alive) {
        // Scripts and configuration management run attach again: the same
        // options are no change; other options are refused, naming one.
        const std::string diff = difference(p, pr, req, opt);
        if (!diff.empty())
            return refused(refuse(opt.dev + " is attached already, " + diff + ": pspxdp detach " +
                                  opt.dev + " first to attach it with other options"));
        out.state = *pr.state;
        out.already = opt.dev + " is attached already with these options (daemon pid " +
                      std::to_string(pr.daemon) + "): nothing to do";
        DevLock release; // nothing to start: the lock goes now
        out.lock.swap(release);
        return out;
    }
    if (!no_speed.empty()) warn(no_speed);

    // What a replaced attachment keeps is checked against the line rate:
    // accepting a line rate below its paced classes would leave classes
    // configured that the pacer can never serve.
    // An attach killed while libbpf pinned the maps one by one leaves some
    // pinned and not class_config: no classes to keep, and the load below
    // pins what is missing.
    const bool half_pinned =
        pr.kind == K::HalfMade && access(p.pin("class_config").c_str(), F_OK) != 0;
    if (pr.pins && pr.kind != K::NotAttached && !half_pinned) {
        auto sum = paced_sum(p);
        if (!sum) return refused(sum.failure());
        if (sum->bps > line)
            return refused(
                err(opt.dev + "'s paced classes sum to " +
                    (sum->bps > UINT64_MAX ? std::string("more than 2^64 bit/s")
                                           : format_rate(uint64_t(sum->bps))) +
                    " (" + std::to_string(sum->classes) + " classes), above the line rate " +
                    format_rate(line) + " (" + out.line_rate_source +
                    "): they could never be served; lower them first (pspxdp class set " + opt.dev +
                    " CLASSID RATE) or attach with a higher --line-rate"));
    }
    if (auto pause = get_pause(opt.dev); pause && pause->tx_pause)
        warn("802.3x TX pause is on on " + opt.dev + ": the switch may stop the wire (ethtool -A " +
             opt.dev + " tx off)");
    if (!link->has_carrier()) warn(opt.dev + " has no carrier: nothing will reach the wire");
    const Probe &now = pr;
    if (now.state) {
        // Replace the dead attachment: everything it created goes (so nothing
        // is duplicated), except the pins - the user's classes and filters,
        // which the new programs reuse - and its clsact qdisc, handed on as
        // still ours so a detach removes it later.
        if (now.kind == K::HalfMade)
            warn(opt.dev + " was half attached (an attach stopped before it finished): "
                           "replacing what it made");
        else
            warn(opt.dev + "'s attachment is dead (" + kind_name(now.kind) +
                 (old_why(now).empty() ? "" : ": " + old_why(now)) +
                 "; TC was passing traffic unpaced): replacing it, classes and filters kept");
        if (now.daemon) (void)stop(p, stop_grace_ms(now.state)); // DEV gone under a live daemon
        AttachState old = *now.state;
        const bool same_dev = now.kind == K::Dead || now.kind == K::HalfMade;
        req.clsact_ours = same_dev && old.clsact_created;
        old.clsact_created = false;
        if (!same_dev) old.tc_attached = false; // went with the old device
        Notes notes;
        if (auto r = teardown(p, old, notes, true); !r)
            return refused(err("removing the dead attachment: " + r.error() +
                               " (try pspxdp detach " + opt.dev + ")"));
        for (const auto &n : notes) warn(n);
        out.replaced = true;
    }
    auto st = build(req);
    if (!st) {
        if (!out.replaced) remove_run_files(p); // build undid the rest
        return st.failure();
    }
    out.state = *st;
    return out;
}

Result<pid_t> start_daemon(const Paths &p, const AttachState &s,
                           const std::vector<std::string> &args) {
    auto undo = [&](const std::string &why) -> Result<pid_t> {
        Notes ignored;
        (void)teardown(p, s, ignored);
        remove_run_files(p);
        return err(why + " (" + p.dev + " left detached)");
    };
    auto pid = spawn(p, args);
    if (!pid) return undo("starting the daemon: " + pid.error());
    if (auto r = wait_started(p, *pid, 5000); !r) {
        (void)stop(p, 1000);
        return undo(r.error());
    }
    return *pid;
}

Result<Detached> detach(const Paths &p) {
    if (auto r = common::need_caps("detach", {CAP_NET_ADMIN}); !r) return r.failure();
    auto lock = DevLock::acquire(p, DevLock::Wait::Yes);
    if (!lock) return lock.failure();
    Probe pr = probe(p);
    Detached out;

    if (pr.kind == K::Elsewhere) {
        // Never touch a device in another namespace. If that namespace is
        // gone, so are its devices (and DEV's TC parts and our veth with
        // them): only the pins and run files are left, and they are ours.
        if (common::netns_exists(pr.state->netns_id())) return err(pr.why);
        if (auto r = remove_pins(p, out.notes); !r) return r.failure();
        remove_run_files(p);
        out.notes.push_back(p.dev + " was attached in network namespace " +
                            common::netns_label(pr.state->netns) +
                            ", which no longer exists: removed its pins and run files");
        return out;
    }
    // pspxdp run's cgroups of DEV (processes still in them go back where
    // they came from); its filters and classes go with the pins.
    common::remove_all_runs(p.dev, out.notes);
    if (pr.daemon) {
        // A live process's namespace is alive: its inode cannot have been reused.
        uint64_t ns = netns_of(pr.daemon);
        if (ns && ns != pr.netns_here.inode)
            return err(p.dev + "'s daemon (pid " + std::to_string(pr.daemon) +
                       ") runs in network namespace " + common::netns_label(ns) +
                       ", not this one (" + common::netns_label(pr.netns_here.inode) +
                       "); run pspxdp detach there");
        auto stopped = stop(p, stop_grace_ms(pr.state));
        if (!stopped) return stopped.failure();
        out.daemon_stopped = *stopped;
    }
    AttachState s = pr.state ? *pr.state : reconstruct(p);
    if (pr.kind == K::NotAttached) {
        // No state, no pins, no daemon: only leftovers of ours in this
        // namespace can remain (a crash between steps of an old version).
        bool any = false;
        if (s.dev_ifindex) {
            auto owner = tc_filter_owner(s.dev_ifindex);
            any |= owner && *owner == Ownership::Ours;
            any |= pacer_veth_owner(s.dev_ifindex) == Ownership::Ours;
        }
        if (!any) {
            // Scripts run detach again: nothing to do is no failure.
            remove_run_files(p);
            out.was_attached = false;
            return out;
        }
        s.clsact_created = false; // no record says it is ours
    }
    if (auto r = teardown(p, s, out.notes); !r)
        return err(r.error() + " (state kept in " + p.state + ")");
    remove_run_files(p);
    return out;
}

Result<void> retire(const Paths &p, const std::string &why, bool dev_gone) {
    auto lock = DevLock::acquire(p, DevLock::Wait::No);
    if (!lock) return {}; // a detach (or attach) holds it and cleans up
    auto st = read_state(p);
    if (!st) return st.failure();
    AttachState s = *st;
    if (s.netns && !s.netns_id().same(common::netns_here()))
        return err("not retiring " + p.dev + ": its state names another network namespace");
    AttachState gone = s;
    gone.tc_attached = gone.clsact_created = false; // the TC parts are left as they are
    gone.pins_created = false;                      // the configuration stays
    Notes notes;
    if (auto r = teardown(p, gone, notes, true); !r) return r;
    s.veth_created = s.xdp_attached = false;
    if (dev_gone) s.tc_attached = s.clsact_created = false; // went with DEV
    s.stopped = why;
    return write_state(p, s);
}

} // namespace pspxdp::setup
