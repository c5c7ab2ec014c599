// Placeholder until the issue that builds "pspxdp attach" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("attach: not built yet"); }

const Command kAttach = {"attach", "DEV", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
