// `pspxdp status DEV`'s cluster part (cmd_group.cpp): the groups DEV's
// classes are in, as their agents last wrote it.
#pragma once

#include "cli/output.hpp"

#include <string>

namespace pspxdp::cli {

void print_groups(Printer &p, const std::string &dev);

} // namespace pspxdp::cli
