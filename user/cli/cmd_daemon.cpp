// Placeholder until the issue that builds "pspxdp daemon" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("daemon: not built yet"); }

const Command kDaemon = {"daemon", "DEV", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
