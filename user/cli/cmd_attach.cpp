// pspxdp attach DEV: set up the pacer on DEV and start its daemon.
#include "cli/command.hpp"
#include "control/control.hpp"
#include "core/engine.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "daemon/process.hpp"
#include "setup/loader.hpp"
#include "setup/netlink.hpp"
#include "pspxdp/shared.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace pspxdp::cli {

namespace dp = pspxdp::setup;

static Result<uint64_t> parse_u64(const std::string &what, const std::string &s, uint64_t lo,
                                  uint64_t hi) {
    char *end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end || errno || v < lo || v > hi)
        return err(what + " \"" + s + "\": expected an integer in " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    return uint64_t(v);
}

// An attachment whose daemon is dead (kill -9, OOM, a crash) is stale: TC
// fails open and nothing is paced, but the state file, the pins, the pacer
// veth pair, the XDP program and the TC filter are all still there. Attach
// replaces it instead of calling DEV "already attached" forever: everything
// the old attachment created goes (so nothing is duplicated), except
//  - the pins: they hold the classes and filters the user configured; the new
//    programs reuse them, so pacing resumes as configured;
//  - the clsact qdisc if the old attachment created it: kept, and handed on
//    as still ours (AttachRequest::clsact_ours) so detach removes it later.
// The caller holds the DevLock and has seen that no daemon runs.
static Result<void> remove_stale(const dp::Paths &paths, dp::AttachState old,
                                 uint32_t dev_ifindex, dp::AttachRequest &req) {
    if (old.dev_ifindex != dev_ifindex) {
        // DEV was re-created: its old qdisc and filter went with the old one
        // (and the old ifindex may belong to another device by now).
        old.tc_attached = false;
        old.clsact_created = false;
    }
    req.clsact_ours = old.clsact_created;
    old.pins_created = false;
    old.clsact_created = false;
    return dp::detach(paths, old); // removes the state file when done
}

static int run(const Args &args) {
    const std::string dev = args.positional[0];
    // Checks first: a refused attach changes nothing.
    auto link = dp::get_link(dev);
    if (!link) return fail("attach: " + link.error());
    if (!link->is_ether()) return fail("attach: " + dev + " is not an Ethernet device");
    if (!link->is_up()) return fail("attach: " + dev + " is down");
    if (link->name.starts_with("psp") && (link->name.ends_with("a") || link->name.ends_with("b")) &&
        link->kind == "veth")
        return fail("attach: " + dev + " looks like a pspxdp pacer veth");
    auto paths = dp::paths_for(dev);
    // Attached = a state file and a live daemon; without the daemon the
    // attachment is stale and replaced below, under the lock.
    if (auto st = dp::read_state(paths); st && daemon::running_pid(paths))
        return fail("attach: " + dev + " is already attached (pspxdp detach " + dev + " first)");

    // --config FILE: read and checked before anything is created; its line
    // rate and default class unless given here; applied under the lock
    // before the daemon starts.
    std::optional<control::Config> config;
    if (args.has("config")) {
        auto c = control::load_config(args.get("config"));
        if (!c) return fail("attach: --config " + c.error(), 2);
        config = *c;
    }
    ClassId default_class{1, 0xffff};
    if (config && config->default_classid) default_class = ClassId::from_raw(*config->default_classid);
    if (args.has("default-class")) {
        auto c = parse_classid(args.get("default-class"));
        if (!c) return fail("attach: --default-class: " + c.error());
        if (c->minor == 0) return fail("attach: --default-class: minor 0 is not a class");
        default_class = *c;
    }
    uint64_t queues = 16;
    if (args.has("queues")) {
        auto q = parse_u64("--queues", args.get("queues"), 1, PSPXDP_MAX_QUEUES);
        if (!q) return fail("attach: " + q.error());
        queues = *q;
    }
    uint64_t window = EngineConfig{}.window_bytes;
    if (args.has("window")) {
        auto w = parse_u64("--window", args.get("window"), 1514, 64ull << 20);
        if (!w) return fail("attach: " + w.error());
        window = *w;
    }
    uint64_t line = 0;
    std::string source;
    if (args.has("line-rate")) {
        auto r = parse_rate_bps(args.get("line-rate"));
        if (!r) return fail("attach: --line-rate: " + r.error());
        line = *r;
        source = "--line-rate";
    } else if (config && config->line_rate_bps) {
        line = *config->line_rate_bps;
        source = "--config";
    } else if (auto mbps = dp::get_speed_mbps(*link)) {
        line = *mbps * 1000000ull;
        source = "ethtool speed";
    } else {
        line = 1000000000ull;
        source = "default";
        std::fprintf(stderr,
                     "pspxdp: warning: %s reports no link speed (%s); assuming 1Gbit, "
                     "use --line-rate to set it\n",
                     dev.c_str(), link->kind == "veth" ? "a veth has none" : "unknown");
    }
    if (auto pause = dp::get_pause(dev); pause && pause->tx_pause)
        std::fprintf(stderr,
                     "pspxdp: warning: 802.3x TX pause is on on %s: the switch may stop the wire "
                     "(ethtool -A %s tx off)\n",
                     dev.c_str(), dev.c_str());
    if (!link->has_carrier())
        std::fprintf(stderr, "pspxdp: warning: %s has no carrier: nothing will reach the wire\n",
                     dev.c_str());

    if (config)
        if (auto r = control::check_config(*config, line, default_class.raw(), dev); !r)
            return fail("attach: --config " + args.get("config") + ": " + r.error(), 2);

    auto lock = dp::DevLock::acquire(paths, false);
    if (!lock) return fail("attach: " + lock.error());
    // Again under the lock: another attach may have finished in between
    // (an attach in progress holds the lock until its daemon beats).
    auto old = dp::read_state(paths);
    if (old && daemon::running_pid(paths))
        return fail("attach: " + dev + " is already attached (pspxdp detach " + dev + " first)");
    dp::AttachRequest req;
    req.dev = dev;
    req.queues = uint32_t(queues);
    req.line_rate_bps = line;
    req.window_bytes = window;
    req.default_classid = default_class.raw();
    if (old) {
        std::fprintf(stderr,
                     "pspxdp: warning: %s's daemon is dead (killed or crashed; TC was passing "
                     "traffic unpaced): replacing its attachment, classes and filters kept\n",
                     dev.c_str());
        if (auto r = remove_stale(paths, *old, link->ifindex, req); !r)
            return fail("attach: removing the dead attachment: " + r.error() + " (try pspxdp detach " +
                        dev + ")");
    }
    auto st = dp::attach(req);
    if (!st) {
        dp::remove_run_files(paths); // attach undid the rest
        return fail("attach: " + st.error());
    }
    if (config) {
        auto d = control::Device::open(dev, control::Access::ChangeLocked);
        auto r = d ? d.value().apply(*config) : Result<control::ApplySummary>(d.failure());
        if (!r) {
            (void)dp::detach(paths, *st);
            dp::remove_run_files(paths);
            return fail("attach: --config " + args.get("config") + ": " + r.error() + " (" + dev +
                        " left detached)");
        }
    }
    std::printf(
        "pspxdp: attached to %s: line rate %s (%s), window %llu B, %u pacer queues on %s/%s\n",
        dev.c_str(), format_rate(line).c_str(), source.c_str(), (unsigned long long)window,
        st->queues, st->pacer_a.c_str(), st->pacer_b.c_str());
    std::fflush(stdout);

    if (args.has("foreground")) {
        // The daemon runs here; when it stops (SIGINT/SIGTERM) the attachment
        // goes with it, unless a concurrent `pspxdp detach` is already on it.
        // Our pid in the pidfile before the lock goes: a state file without a
        // live daemon is what a concurrent attach takes for a dead attachment
        // to replace. (daemon::run rewrites it with the same pid.)
        if (FILE *f = std::fopen(paths.pid.c_str(), "w")) {
            std::fprintf(f, "%d\n", int(getpid()));
            std::fclose(f);
        }
        { dp::DevLock release = std::move(lock.value()); } // detach may run meanwhile
        daemon::DaemonConfig cfg;
        cfg.dev = dev;
        if (args.has("spin")) cfg.sleep_min_ns = 0;
        int rc = daemon::run(cfg);
        auto l2 = dp::DevLock::acquire(paths, false);
        if (!l2) return rc; // detach is running and will clean up
        auto s2 = dp::read_state(paths);
        if (s2) {
            if (auto r = dp::detach(paths, *s2); !r)
                return fail("detach after foreground run: " + r.error());
            dp::remove_run_files(paths);
            std::printf("pspxdp: detached from %s\n", dev.c_str());
        }
        return rc;
    }

    std::vector<std::string> dargs;
    if (args.has("spin")) dargs = {"--sleep-min-us", "0"};
    auto pid = daemon::spawn(paths, dargs);
    if (!pid) {
        (void)dp::detach(paths, *st);
        dp::remove_run_files(paths);
        return fail("attach: starting daemon: " + pid.error());
    }
    if (auto r = daemon::wait_started(paths, *pid, 5000); !r) {
        (void)daemon::stop(paths, 1000);
        (void)dp::detach(paths, *st);
        dp::remove_run_files(paths);
        return fail("attach: " + r.error() + "(" + dev + " left detached)");
    }
    std::printf("pspxdp: daemon pid %d, log %s\n", int(*pid), paths.log.c_str());
    return 0;
}

const Command kAttach = {
    "attach",
    "DEV",
    "start pacing DEV's egress (veth pair, BPF programs, daemon)",
    "Creates the pacer veth pair, loads the TC classifier (clsact egress on DEV) and\n"
    "the XDP redirect, pins the maps under /sys/fs/bpf/pspxdp/DEV/ and starts the\n"
    "daemon (pidfile and log under /run/pspxdp/). The line rate is DEV's ethtool\n"
    "speed unless --line-rate is given; a veth has none (1gbit is assumed).\n"
    "If DEV's daemon died (killed, crashed: TC passes traffic unpaced meanwhile),\n"
    "attach replaces the dead attachment and keeps its classes and filters.\n"
    "Then: pspxdp class set DEV 1:1 500mbit; pspxdp filter add ...",
    {
        {"line-rate", 'r', "RATE", "the wire's rate M (tc syntax: 1gbit, 500mbit)"},
        {"window", 'w', "BYTES", "how far the schedule may run ahead of real time (default 65536)"},
        {"queues", 'q', "N", "pacer queues = max classes served (default 16)"},
        {"default-class", 'd', "CLASSID",
         "class of unclassified traffic (default 1:ffff, a normal class)"},
        {"foreground", 'f', nullptr, "run the daemon here; detach when it stops"},
        {"config", 'c', "FILE",
         "configure classes, default class, filters (and the line rate, unless --line-rate) "
         "from FILE, the format of pspxdp save"},
        {"spin", 0, nullptr,
         "busy-poll while backlogged: steadiest real-time rate, one core at 100 % "
         "(default: sleep through waits > 50 us)"},
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
