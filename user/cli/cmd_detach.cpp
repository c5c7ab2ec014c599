// pspxdp detach DEV: stop the daemon and remove everything attach created.
// The logic is the attach library's (setup/attach.hpp).
#include "cli/command.hpp"
#include "common/paths.hpp"
#include "setup/attach.hpp"

#include <cstdio>

namespace pspxdp::cli {

static int run(const Args &args) {
    const std::string dev = args.positional[0];
    auto paths = common::paths_for(dev);
    if (!paths) return fail_input("detach: " + paths.error());
    auto d = setup::detach(*paths);
    if (!d) return fail("detach: " + d.error());
    for (const auto &n : d->notes) warn(n);
    if (!d->was_attached) {
        std::printf("pspxdp: %s is not attached: nothing to detach\n", dev.c_str());
        return 0;
    }
    std::printf("pspxdp: detached from %s%s\n", dev.c_str(),
                d->daemon_stopped ? " (daemon stopped)" : "");
    return 0;
}

const Command kDetach = {
    "detach",
    "DEV",
    "stop pacing DEV and remove everything attach created",
    "Stops the daemon (SIGTERM, SIGKILL after 3 s + 25 ms per queue), removes the\n"
    "TC filter, the clsact qdisc if pspxdp created it (and nobody else's filters\n"
    "sit on it), the pacer veth pair and the pins. Works from any partial state\n"
    "(state file or pins removed by hand, DEV deleted) and removes only what is\n"
    "pspxdp's: the TC filter by handle, prio and program name, the veth pair by\n"
    "name, kind and peer, pins by name and map identity; anything else is left\n"
    "and named. Refused when DEV is attached in another network namespace.\n"
    "DEV not attached: exit 0 with a one-line note (scripts run detach again).\n"
    "Needs CAP_NET_ADMIN.",
    {},
    1,
    1,
    run,
};

} // namespace pspxdp::cli
