// pspxdp daemon DEV: the pacer loop. Started by `pspxdp attach` (detached,
// logging to /run/pspxdp/DEV.log); not meant to be run by hand.
#include "cli/command.hpp"
#include "common/caps.hpp"
#include "common/paths.hpp"
#include "common/text.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "setup/attach.hpp"

namespace pspxdp::cli {

static int run(const Args &args) {
    daemon::DaemonConfig cfg;
    cfg.dev = args.positional[0];
    auto paths = common::paths_for(cfg.dev);
    if (!paths) return fail_input("daemon: " + paths.error());
    if (args.has("line-rate")) {
        auto r = parse_rate_bps(args.get("line-rate"));
        if (!r) return fail_input("daemon: --line-rate: " + r.error());
        cfg.line_rate_bps = *r;
    }
    struct {
        const char *name;
        uint64_t lo, hi;
        uint64_t *out;
        uint64_t scale;
    } nums[] = {{"window", 1514, 64ull << 20, &cfg.window_bytes, 1},
                {"buffer", 1ull << 20, 64ull << 30, &cfg.buffer_bytes, 1},
                {"sleep-min-us", 0, 1000000, &cfg.sleep_min_ns, 1000},
                {"spin-us", 0, 1000000, &cfg.spin_ns, 1000}};
    for (auto &n : nums) {
        if (!args.has(n.name)) continue;
        auto v = common::parse_u64(std::string("--") + n.name, args.get(n.name), n.lo, n.hi);
        if (!v) return fail_input("daemon: " + v.error());
        *n.out = *v * n.scale;
    }
    if (auto r = daemon::set_clock_options(cfg, args.text("gap-horizon"), args.text("clock"),
                                           args.flag("clockless"));
        !r)
        return fail_input("daemon: " + r.error());
    if (args.has("cpu")) {
        auto v = common::parse_u64("--cpu", args.get("cpu"), 0, 4095);
        if (!v) return fail_input("daemon: " + v.error());
        cfg.cpu = int(*v);
    }
    cfg.realtime = args.has("rt");
    cfg.busy_poll = args.has("busy-poll");
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
    "Runs the pacer of an attached DEV in the foreground until SIGTERM/SIGINT.\n"
    "The parameters default to those recorded by `pspxdp attach`.",
    {
        {"line-rate", 0, "RATE", "override the line rate"},
        {"window", 0, "BYTES", "override the window"},
        {"buffer", 0, "BYTES", "the UMEM shared by every class's queue (default 64 MiB)"},
        {"cpu", 0, "N", "pin to CPU N"},
        {"rt", 0, nullptr, "SCHED_FIFO, memory locked"},
        {"busy-poll", 0, nullptr, "busy-poll the pacer sockets"},
        {"sleep-min-us", 0, "US",
         "while backlogged, sleep through waits longer than US (default 50; 0: spin)"},
        {"spin-us", 0, "US",
         "spin the last US before a due time the engine has no slack for (default 20)"},
        gap_horizon_option(),
        clock_option(),
        clockless_option(),
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
