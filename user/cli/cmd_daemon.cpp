// pspxdp daemon DEV: the pacer loop. Started by `pspxdp attach` (detached,
// logging to /run/pspxdp/DEV.log); not meant to be run by hand.
#include "cli/command.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"

#include <cstdlib>

namespace pspxdp::cli {

static int run(const Args &args) {
    daemon::DaemonConfig cfg;
    cfg.dev = args.positional[0];
    if (args.has("line-rate")) {
        auto r = parse_rate_bps(args.get("line-rate"));
        if (!r) return fail("daemon: --line-rate: " + r.error());
        cfg.line_rate_bps = *r;
    }
    if (args.has("window"))
        cfg.window_bytes = std::strtoull(args.get("window").c_str(), nullptr, 10);
    if (args.has("buffer")) cfg.buffer_bytes = std::strtoull(args.get("buffer").c_str(), nullptr, 10);
    if (args.has("cpu")) cfg.cpu = std::atoi(args.get("cpu").c_str());
    cfg.realtime = args.has("rt");
    cfg.busy_poll = args.has("busy-poll");
    if (args.has("sleep-min-us"))
        cfg.sleep_min_ns = std::strtoull(args.get("sleep-min-us").c_str(), nullptr, 10) * 1000;
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
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
