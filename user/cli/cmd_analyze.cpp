// Placeholder until the issue that builds "pspxdp analyze" lands.
#include "cli/command.hpp"

namespace pspxdp::cli {

static int run(const Args &) { return fail("analyze: not built yet"); }

const Command kAnalyze = {"analyze", "FILE.pcap", "(not built yet)", nullptr, {}, 0, 16, run};

} // namespace pspxdp::cli
