// Placeholder until the issue that builds "pspxdp detach" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("detach: not built yet"); }

const Command kDetach = {"detach", "DEV", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
