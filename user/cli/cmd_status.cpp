// Placeholder until the issue that builds "pspxdp status" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("status: not built yet"); }

const Command kStatus = {"status", "DEV", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
