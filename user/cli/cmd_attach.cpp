// pspxdp attach DEV: set up the pacer on DEV and start its daemon. The logic
// is the attach library's (setup/attach.hpp); this is options and output.
#include "cli/command.hpp"
#include "common/paths.hpp"
#include "common/text.hpp"
#include "control/control.hpp"
#include "core/engine.hpp"
#include "core/framing.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "datapath/xsk.hpp"
#include "pspxdp/shared.h"
#include "setup/attach.hpp"
#include "setup/netlink.hpp"
#include "setup/process.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace pspxdp::cli {

// Shared with `pspxdp daemon` (command.hpp); the defaults are the daemon's.
static_assert(kTimeInf == kGapHorizonInf, "--gap-horizon inf is the engine's paper rule");
Option gap_horizon_option() {
    return opt(OptType::TimeOrInf, "gap-horizon", 0, "TIME|inf",
               "gap frames only within TIME of a paced frame's due time; the wire idles "
               "before (inf: always, the paper's rule; 0: never)")
        .by_default(daemon::DaemonConfig{}.gap_horizon_ns)
        .bare_unit(0)
        .within(0, 3600'000'000'000); // beyond an hour H means "never idle": inf says it
}
Option clock_option() {
    using daemon::WireClock;
    // In the order of WireClock: Args::choice numbers them so.
    return opt(OptType::Choice, "clock", 0, nullptr,
               "what paces the wire: byte = gap frames (a NIC serialises), none = clockless "
               "(frames released at their real-time due time, no gap frames), auto = none on "
               "veth, virtio_net and other virtual drivers, byte otherwise")
        .one_of({daemon::wire_clock_name(WireClock::Auto), daemon::wire_clock_name(WireClock::Byte),
                 daemon::wire_clock_name(WireClock::None)})
        .by_default(std::string(daemon::wire_clock_name(daemon::DaemonConfig{}.clock)));
}
Option clockless_option() { return flag("clockless", 0, "--clock none"); }
static_assert(kDefaultBurstMtus == 3 && kDefaultBurstFloorNs == 150'000, "--burst's help");
Option burst_option() {
    return opt(OptType::Burst, "burst", 0, "SIZE",
               "clockless: the burst bound of classes that set none (class ... burst)")
        .default_is("3mtu, or what the class sends in 150us if more (6.2mtu at 500mbit: "
                    "fewer wake-ups)");
}
Result<void> clock_options(daemon::DaemonConfig &cfg, const Args &args) {
    if (args.has("burst")) { // a bound given is the bound: no 150 us floor
        cfg.burst = args.burst("burst");
        cfg.burst_floor_ns = 0;
    }
    return daemon::set_clock_options(cfg, args.number("gap-horizon"),
                                     daemon::WireClock(args.choice("clock")),
                                     args.flag("clockless"));
}

Option sched_option() {
    using daemon::SchedPolicy;
    // In the order of SchedPolicy: Args::choice numbers them so.
    return opt(OptType::Choice, "sched", 0, nullptr,
               "how the kernel schedules the daemon: deadline = SCHED_DEADLINE, 60 % of a CPU "
               "reserved, no more clockless unless --reclaim (a busy host cannot delay it); fifo = "
               "SCHED_FIFO 10 (stopped 50 ms a second when it takes a CPU whole); "
               "normal = a normal task; auto = deadline where the kernel grants it, else "
               "normal (attach says which). A policy named is had or refused (exit 1)")
        .one_of({daemon::sched_policy_name(SchedPolicy::Auto),
                 daemon::sched_policy_name(SchedPolicy::Normal),
                 daemon::sched_policy_name(SchedPolicy::Fifo),
                 daemon::sched_policy_name(SchedPolicy::Deadline)})
        .by_default(std::string(daemon::sched_policy_name(daemon::DaemonConfig{}.sched)));
}
Option reclaim_option() {
    return flag("reclaim", 0,
                "deadline, clockless: use idle CPU time beyond the 60 % reserved, up to ~94 % "
                "of a CPU, for classes that need it (near 1 Gbit/s); what runs beside the daemon "
                "gets less (a local receiver, the senders). The byte clock always reclaims");
}
Result<void> sched_options(daemon::DaemonConfig &cfg, const Args &args) {
    const auto c = args.maybe_number("cpu");
    return daemon::set_sched_options(cfg, daemon::SchedPolicy(args.choice("sched")),
                                     c ? int(*c) : -1, args.flag("reclaim"));
}

// At most this many online CPUs: attach says what the pacer costs there.
constexpr long kSmallHostCpus = 2;

// What the kernel gave the daemon, on stdout: the scheduling is part of
// what the user asked for. With the default (auto), a fall-back to a normal
// task says why and what to do.
static void print_scheduling(pid_t pid, daemon::SchedPolicy asked) {
    auto f = daemon::sched_in_force(pid);
    if (!f) return warn("daemon scheduling unknown: " + f.error());
    std::string why;
    if (asked == daemon::SchedPolicy::Auto && f->policy != daemon::kAutoSched) {
        why = daemon::sched_obstacle(daemon::kAutoSched);
        why = std::string(", not ") + daemon::sched_policy_name(daemon::kAutoSched) +
              ": the kernel refused it (" + (why.empty() ? "see the log" : why) +
              "; --sched normal to choose this)";
    }
    std::printf("pspxdp: daemon scheduling: %s%s\n", f->text().c_str(), why.c_str());
    // A small host: what runs beside the pacer shares it (design §4.4, "A good
    // neighbour").
    if (const long cpus = sysconf(_SC_NPROCESSORS_ONLN); cpus > 0 && cpus <= kSmallHostCpus)
        std::printf("pspxdp: note: a small host (%ld CPUs): the daemon (a third of a CPU at "
                    "500 Mbit/s), the senders and a local receiver share it; judge the pacer "
                    "from another host\n",
                    cpus);
}

static int run(const Args &args) {
    const std::string dev = args.positional[0];
    auto paths = common::paths_for(dev);
    if (!paths) return fail_input("attach: " + paths.error());

    // --config FILE: read and checked before anything is created; its line
    // rate and default class unless given here; applied under the lock
    // before the daemon starts.
    std::optional<control::Config> config;
    if (args.has("config")) {
        auto c = control::load_config(args.text("config"));
        if (!c) return fail_input("attach: --config " + c.error());
        config = *c;
    }

    setup::AttachOptions opt;
    opt.dev = dev;
    opt.force = args.flag("force");
    // Tests inject the driver name (the refusal of i40e/ice needs no such NIC).
    if (const char *d = std::getenv("PSPXDP_TEST_DRIVER")) opt.driver = d;
    if (config && config->default_classid) opt.default_classid = *config->default_classid;
    if (args.has("default-class")) {
        const ClassId c = args.classid("default-class");
        if (c.minor == 0) return fail_input("attach: --default-class: minor 0 is not a class");
        opt.default_classid = c.raw();
    }
    // One pacer queue and AF_XDP RX socket per core by default: classes are
    // not sockets (any number of classes share them).
    if (auto q = args.maybe_number("sockets")) opt.queues = uint32_t(*q);
    if (auto w = args.maybe_number("window")) opt.window_bytes = *w;
    if (config && config->line_rate_bps) opt.line_rate_bps = *config->line_rate_bps;
    if (auto r = args.maybe_number("line-rate")) opt.line_rate_bps = *r;

    daemon::DaemonConfig dcfg;
    dcfg.dev = dev;
    if (auto r = clock_options(dcfg, args); !r) return fail_input("attach: " + r.error());
    if (dcfg.burst.bytes)
        if (auto link = setup::get_link(dev)) {
            Framing f;
            f.mtu_bytes = link->mtu;
            if (dcfg.burst.bytes < f.mtu_unit_bytes())
                return fail_input("attach: --burst " + format_burst(dcfg.burst) +
                                  " is below one largest frame (" +
                                  std::to_string(f.mtu_unit_bytes()) + " bytes at MTU " +
                                  std::to_string(link->mtu) + " of " + dev + ")");
        }
    dcfg.buffer_bytes = args.number("buffer");
    if (args.flag("spin")) dcfg.sleep_min_ns = 0;
    if (auto c = args.maybe_number("cpu")) {
        const long cpus = sysconf(_SC_NPROCESSORS_CONF);
        if (*c >= uint64_t(std::max(cpus, 1L)))
            return fail_input("attach: --cpu " + std::to_string(*c) +
                              ": this machine has CPUs 0.." +
                              std::to_string(std::max(cpus, 1L) - 1));
    }
    if (auto r = sched_options(dcfg, args); !r) return fail_input("attach: " + r.error());
    dcfg.busy_poll = args.flag("busy-poll");
    // Absolute: the daemon (and systemctl reload) re-reads it on SIGHUP from
    // wherever it runs. Standard input cannot be read twice.
    if (config && args.text("config") != "-")
        dcfg.config_file = std::filesystem::absolute(args.text("config")).string();
    // Checked before anything is created when the line rate is known here
    // (at DEV's MTU; a DEV that does not exist is attach's to refuse).
    if (config && opt.line_rate_bps)
        if (auto link = setup::get_link(dev))
            if (auto r = control::check_config(*config, *opt.line_rate_bps, opt.default_classid,
                                               dev, link->mtu);
                !r)
                return fail_input("attach: --config " + args.text("config") + ": " + r.error());

    opt.default_classid_given = args.has("default-class") || (config && config->default_classid);
    opt.daemon_args = daemon::to_args(dcfg);
    // A policy named that this process (and so the daemon it starts) cannot
    // have: refused before anything is created. What only the kernel knows
    // (deadline admission control) stops the daemon, and attach undoes all.
    if (dcfg.sched != daemon::SchedPolicy::Auto)
        if (auto why = daemon::sched_obstacle(dcfg.sched); !why.empty())
            opt.cannot_start = std::string("--sched ") + daemon::sched_policy_name(dcfg.sched) +
                               " cannot be had here: " + why +
                               " (--sched auto runs a normal task instead)";
    auto att = setup::attach(opt, [](const std::string &w) { warn(w); });
    if (!att) return fail("attach: " + att.error(), att.exit_code());
    if (!att->already.empty()) {
        // Run again by a script: no change, exit 0, one line.
        std::printf("pspxdp: %s\n", att->already.c_str());
        return 0;
    }
    const setup::AttachState &st = att->state;
    if (config) {
        // Under the lock attach still holds.
        auto d = control::Device::open_locked(att->lock);
        auto r = d ? d.value().apply(*config) : Result<control::ApplySummary>(d.failure());
        if (!r) {
            (void)setup::detach(*paths);
            return fail("attach: --config " + args.text("config") + ": " + r.error() + " (" + dev +
                            " left detached)",
                        r.exit_code());
        }
    }
    std::printf("pspxdp: attached to %s: line rate %s (%s), window %llu B (%s), %u pacer sockets "
                "on %s/%s\n",
                dev.c_str(), format_rate(st.line_rate_bps).c_str(),
                config && config->line_rate_bps && !args.has("line-rate")
                    ? "--config"
                    : att->line_rate_source.c_str(),
                (unsigned long long)st.window_bytes, att->window_source.c_str(), st.queues,
                st.pacer_a.c_str(), st.pacer_b.c_str());
    std::fflush(stdout);

    if (args.has("foreground")) {
        // The daemon runs here; when it stops (SIGINT/SIGTERM) the attachment
        // goes with it, unless a concurrent `pspxdp detach` is already on it.
        // Our pid in the pidfile before the lock goes: a state file without a
        // live daemon is what a concurrent attach takes for a dead attachment
        // to replace. (daemon::run rewrites it with the same pid.)
        if (auto r = setup::write_pidfile(*paths, getpid()); !r)
            return fail("attach: " + r.error());
        { common::DevLock release = std::move(att.value().lock); } // detach may run meanwhile
        int rc = daemon::run(dcfg);
        auto after = setup::probe(*paths);
        // Stopped because of its device: the attachment stays (dead, with
        // its classes and filters) for a re-attach, as with a spawned daemon.
        if (after.state && !after.state->stopped.empty()) return rc;
        if (after.kind == setup::Probe::Kind::NotAttached) return rc; // a detach cleaned up
        auto d = setup::detach(*paths);
        if (!d) return fail("detach after foreground run: " + d.error());
        for (const auto &n : d->notes) warn(n);
        std::printf("pspxdp: detached from %s\n", dev.c_str());
        return rc;
    }

    auto pid = setup::start_daemon(*paths, st, daemon::to_args(dcfg));
    if (!pid) return fail("attach: " + pid.error());
    std::printf("pspxdp: daemon pid %d, log %s\n", int(*pid), paths->log.c_str());
    print_scheduling(*pid, dcfg.sched);
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
    "Run again on DEV alive with the same options: exit 0, one line, nothing done;\n"
    "with other options: refused (exit 2), naming the first difference. An attach\n"
    "killed midway leaves a half-made attachment the next attach replaces.\n"
    "Refused, changing nothing: DEV attached from another network\n"
    "namespace, an ingress qdisc on DEV (a clsact is shared), a foreign filter at\n"
    "egress prio 1, and NICs that drop host-sent PAUSE frames (i40e, ice) unless\n"
    "--force. Needs CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW.\n"
    "With --config FILE, SIGHUP to the daemon (systemctl reload) applies FILE again,\n"
    "all or nothing (as pspxdp apply); a refused file is logged and changes nothing.\n"
    "Then: pspxdp class set DEV 1:1 500mbit; pspxdp filter add ...",
    {
        opt(OptType::Rate, "line-rate", 'r', "RATE", "the wire's rate M")
            .default_is("DEV's ethtool speed; 1gbit on a veth"),
        opt(OptType::Bytes, "window", 'w', "BYTES",
            "how far the schedule may run ahead of real time")
            .within(1514, 64ull << 20)
            .default_is("DEV's TX ring of full frames; 64kb on a veth"),
        opt(OptType::Integer, "sockets", 's', "N",
            "pacer queues, one AF_XDP RX socket each; any number of classes share them")
            .within(1, PSPXDP_MAX_SOCKETS)
            .default_is("online CPUs"),
        opt(OptType::Bytes, "buffer", 'b', "BYTES",
            "the pacer's buffer (UMEM) shared by all classes' queues")
            .by_default(datapath::kDefaultBufferBytes)
            .within(1ull << 20, 64ull << 30),
        opt(OptType::ClassId, "default-class", 'd', "CLASSID",
            "class of unclassified traffic (a normal class unless configured)")
            .by_default(ClassId{1, 0xffff}),
        flag("foreground", 'f', "run the daemon here; detach when it stops"),
        opt(OptType::String, "config", 'c', "FILE",
            "configure classes, default class, filters (and the line rate, unless --line-rate) "
            "from FILE, the format of pspxdp save"),
        flag("spin", 0,
             "busy-poll while backlogged: steadiest real-time rate, one core at 100 % "
             "(default: sleep through waits > 50 us, clockless any its burst bound covers)"),
        gap_horizon_option(),
        clock_option(),
        clockless_option(),
        burst_option(),
        opt(OptType::Integer, "cpu", 0, "N",
            "pin the daemon to CPU N (with --sched fifo or normal)")
            .within(0, 4095),
        sched_option(),
        reclaim_option(),
        flag("busy-poll", 0, "SO_PREFER_BUSY_POLL on the pacer sockets"),
        flag("force", 0,
             "attach even if DEV's driver is known to drop host-sent PAUSE frames (i40e, ice)"),
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
