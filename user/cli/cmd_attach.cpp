// pspxdp attach DEV: set up the pacer on DEV and start its daemon. The logic
// is the attach library's (setup/attach.hpp); this is options and output.
#include "cli/command.hpp"
#include "common/paths.hpp"
#include "common/text.hpp"
#include "core/engine.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "setup/attach.hpp"
#include "setup/process.hpp"
#include "pspxdp/shared.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace pspxdp::cli {

namespace dp = pspxdp::setup;

static int run(const Args &args) {
    const std::string dev = args.positional[0];
    auto paths = common::paths_for(dev);
    if (!paths) return fail_input("attach: " + paths.error());

    dp::AttachOptions opt;
    opt.dev = dev;
    opt.force = args.has("force");
    // Tests inject the driver name (the refusal of i40e/ice needs no such NIC).
    if (const char *d = std::getenv("PSPXDP_TEST_DRIVER")) opt.driver = d;
    if (args.has("default-class")) {
        auto c = parse_classid(args.get("default-class"));
        if (!c) return fail_input("attach: --default-class: " + c.error());
        if (c->minor == 0) return fail_input("attach: --default-class: minor 0 is not a class");
        opt.default_classid = c->raw();
    }
    if (args.has("queues")) {
        auto q = common::parse_u64("--queues", args.get("queues"), 1, PSPXDP_MAX_QUEUES);
        if (!q) return fail_input("attach: " + q.error());
        opt.queues = uint32_t(*q);
    }
    opt.window_bytes = EngineConfig{}.window_bytes;
    if (args.has("window")) {
        auto w = common::parse_u64("--window", args.get("window"), 1514, 64ull << 20);
        if (!w) return fail_input("attach: " + w.error());
        opt.window_bytes = *w;
    }
    if (args.has("line-rate")) {
        auto r = parse_rate_bps(args.get("line-rate"));
        if (!r) return fail_input("attach: --line-rate: " + r.error());
        opt.line_rate_bps = *r;
    }

    auto att = dp::attach(opt, [](const std::string &w) { warn(w); });
    if (!att) return fail("attach: " + att.error());
    const dp::AttachState &st = att->state;
    std::printf(
        "pspxdp: attached to %s: line rate %s (%s), window %llu B, %u pacer queues on %s/%s\n",
        dev.c_str(), format_rate(st.line_rate_bps).c_str(), att->line_rate_source.c_str(),
        (unsigned long long)st.window_bytes, st.queues, st.pacer_a.c_str(), st.pacer_b.c_str());
    std::fflush(stdout);

    if (args.has("foreground")) {
        // The daemon runs here; when it stops (SIGINT/SIGTERM) the attachment
        // goes with it, unless a concurrent `pspxdp detach` is already on it.
        // Our pid in the pidfile before the lock goes: a state file without a
        // live daemon is what a concurrent attach takes for a dead attachment
        // to replace. (daemon::run rewrites it with the same pid.)
        if (auto r = dp::write_pidfile(*paths, getpid()); !r) return fail("attach: " + r.error());
        { common::DevLock release = std::move(att.value().lock); } // detach may run meanwhile
        daemon::DaemonConfig cfg;
        cfg.dev = dev;
        if (args.has("spin")) cfg.sleep_min_ns = 0;
        int rc = daemon::run(cfg);
        auto after = dp::probe(*paths);
        // Stopped because of its device: the attachment stays (dead, with
        // its classes and filters) for a re-attach, as with a spawned daemon.
        if (after.state && !after.state->stopped.empty()) return rc;
        if (after.kind == dp::Probe::Kind::NotAttached) return rc; // a detach cleaned up
        auto d = dp::detach(*paths);
        if (!d) return fail("detach after foreground run: " + d.error());
        for (const auto &n : d->notes) warn(n);
        std::printf("pspxdp: detached from %s\n", dev.c_str());
        return rc;
    }

    std::vector<std::string> dargs;
    if (args.has("spin")) dargs = {"--sleep-min-us", "0"};
    auto pid = dp::start_daemon(*paths, st, dargs);
    if (!pid) return fail("attach: " + pid.error());
    std::printf("pspxdp: daemon pid %d, log %s\n", int(*pid), paths->log.c_str());
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
    "or DEV was deleted and created again, attach replaces the dead attachment\n"
    "and keeps its classes and filters (refused if they sum above the line rate).\n"
    "Refused, changing nothing: DEV attached already or from another network\n"
    "namespace, an ingress qdisc on DEV (a clsact is shared), a foreign filter at\n"
    "egress prio 1, and NICs that drop host-sent PAUSE frames (i40e, ice) unless\n"
    "--force. Needs CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW.\n"
    "Then: pspxdp class set DEV 1:1 500mbit; pspxdp filter add ...",
    {
        {"line-rate", 'r', "RATE", "the wire's rate M (tc syntax: 1gbit, 500mbit)"},
        {"window", 'w', "BYTES", "how far the schedule may run ahead of real time (default 65536)"},
        {"queues", 'q', "N", "pacer queues = max classes served (default 16)"},
        {"default-class", 'd', "CLASSID",
         "class of unclassified traffic (default 1:ffff, a normal class)"},
        {"foreground", 'f', nullptr, "run the daemon here; detach when it stops"},
        {"spin", 0, nullptr,
         "busy-poll while backlogged: steadiest real-time rate, one core at 100 % "
         "(default: sleep through waits > 50 us)"},
        {"force", 0, nullptr,
         "attach even if DEV's driver is known to drop host-sent PAUSE frames (i40e, ice)"},
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
