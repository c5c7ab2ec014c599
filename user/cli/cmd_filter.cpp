// Placeholder until the issue that builds "pspxdp filter" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("filter: not built yet"); }

const Command kFilter = {"filter", "add SELECTOR classid CLASSID", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
