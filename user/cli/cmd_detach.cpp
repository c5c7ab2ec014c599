// pspxdp detach DEV: stop the daemon and remove everything attach created.
#include "cli/command.hpp"
#include "daemon/process.hpp"
#include "setup/loader.hpp"

#include <cstdio>
#include <unistd.h>

namespace pspxdp::cli {

namespace dp = pspxdp::setup;

static int run(const Args &args) {
    const std::string dev = args.positional[0];
    auto paths = dp::paths_for(dev);
    auto lock = dp::DevLock::acquire(paths, true);
    if (!lock) return fail("detach: " + lock.error());
    auto st = dp::read_state(paths);
    // Stop the daemon even without a state file (it would fail open anyway).
    // Its shutdown drains queues (<= 500 ms) and closes one AF_XDP socket per
    // pacer queue at ~16 ms each (an RCU grace period per socket): give it
    // that long before SIGKILL cuts its UMEM accounting short.
    const int grace_ms = 3000 + (st ? int(st->queues) * 25 : 0);
    auto stopped = daemon::stop(paths, grace_ms);
    if (!stopped) return fail("detach: " + stopped.error());
    if (!st) {
        unlink(paths.lock.c_str());
        return fail("detach: " + st.error());
    }
    if (auto r = dp::detach(paths, *st); !r)
        return fail("detach: " + r.error() + " (state kept in " + paths.state + ")");
    dp::remove_run_files(paths);
    std::printf("pspxdp: detached from %s%s\n", dev.c_str(), *stopped ? " (daemon stopped)" : "");
    return 0;
}

const Command kDetach = {
    "detach",
    "DEV",
    "stop pacing DEV and remove everything attach created",
    "Stops the daemon (SIGTERM, SIGKILL after 3 s + 25 ms per queue), detaches the TC filter (and the\n"
    "clsact qdisc only if pspxdp created it), deletes the pacer veth pair and the pins.",
    {},
    1,
    1,
    run,
};

} // namespace pspxdp::cli
