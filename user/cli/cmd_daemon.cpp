// pspxdp daemon DEV: the pacer loop. Started by `pspxdp attach` (detached,
// logging to /run/pspxdp/DEV.log); not meant to be run by hand.
#include "cli/command.hpp"
#include "common/caps.hpp"
#include "common/paths.hpp"
#include "common/text.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "datapath/xsk.hpp"
#include "setup/attach.hpp"

namespace pspxdp::cli {

static int run(const Args &args) {
    daemon::DaemonConfig cfg;
    cfg.dev = args.positional[0];
    auto paths = common::paths_for(cfg.dev);
    if (!paths) return fail_input("daemon: " + paths.error());
    // Parsed and range-checked by the option table (units as attach takes
    // them); absent, the recorded or built-in defaults stand.
    if (auto r = args.maybe_number("line-rate")) cfg.line_rate_bps = *r;
    if (auto w = args.maybe_number("window")) cfg.window_bytes = *w;
    cfg.buffer_bytes = args.number("buffer");
    cfg.sleep_min_ns = args.number("sleep-min");
    cfg.spin_ns = args.number("spin-last");
    if (auto r = clock_options(cfg, args); !r) return fail_input("daemon: " + r.error());
    if (auto r = sched_options(cfg, args); !r) return fail_input("daemon: " + r.error());
    cfg.busy_poll = args.flag("busy-poll");
    if (args.has("config")) cfg.config_file = args.text("config");
    if (auto r = common::need_caps("daemon", {CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW}); !r)
        return fail(r.error());
    // DEV must be attached here (name, ifindex, network namespace).
    auto st = setup::check_here(*paths);
    if (!st) return fail("daemon: " + st.error());
    // A line rate below the paced classes would accept them and never serve them.
    if (cfg.line_rate_bps) {
        auto sum = setup::paced_sum(*paths);
        if (!sum) return fail("daemon: " + sum.error());
        if (sum->bps > cfg.line_rate_bps)
            return fail("daemon: --line-rate " + format_rate(cfg.line_rate_bps) + " is below " +
                        cfg.dev + "'s paced classes (" + std::to_string(sum->classes) +
                        " classes, " + format_rate(uint64_t(sum->bps)) + ")");
    }
    return daemon::run(cfg);
}

const Command kDaemon = {
    "daemon",
    "DEV",
    "(internal) the pacer loop that `pspxdp attach` starts",
    "Runs the pacer of an attached DEV in the foreground until SIGTERM/SIGINT;\n"
    "SIGHUP applies --config FILE again.\n"
    "The parameters default to those recorded by `pspxdp attach`.",
    {
        opt(OptType::Rate, "line-rate", 0, "RATE", "override the line rate"),
        opt(OptType::Bytes, "window", 0, "BYTES", "override the window").within(1514, 64ull << 20),
        opt(OptType::Bytes, "buffer", 0, "BYTES", "the UMEM shared by every class's queue")
            .by_default(datapath::kDefaultBufferBytes)
            .within(1ull << 20, 64ull << 30),
        opt(OptType::Integer, "cpu", 0, "N", "pin to CPU N").within(0, 4095),
        sched_option(),
        reclaim_option(),
        flag("busy-poll", 0, "busy-poll the pacer sockets"),
        opt(OptType::Duration, "sleep-min", 0, "TIME",
            "while backlogged, sleep through waits longer than TIME (clockless: any wait the "
            "burst bound covers, down to 5us); 0: spin throughout")
            .by_default(daemon::DaemonConfig{}.sleep_min_ns)
            .bare_unit(0)
            .within(0, 1'000'000'000),
        // Not --spin: attach's --spin is a flag, this daemon's --sleep-min 0.
        opt(OptType::Duration, "spin-last", 0, "TIME",
            "spin the last TIME before a due time the engine has no slack for")
            .by_default(daemon::DaemonConfig{}.spin_ns)
            .bare_unit(0)
            .within(0, 1'000'000'000),
        opt(OptType::String, "config", 0, "FILE",
            "the file attach --config applied: SIGHUP applies it again"),
        gap_horizon_option(),
        clock_option(),
        clockless_option(),
        burst_option(),
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
