// Placeholder until the issue that builds "pspxdp class" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("class: not built yet"); }

const Command kClass = {"class", "set CLASSID RATE|normal", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
