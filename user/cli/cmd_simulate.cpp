// Placeholder until the issue that builds "pspxdp simulate" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("simulate: not built yet"); }

const Command kSimulate = {"simulate", "", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
