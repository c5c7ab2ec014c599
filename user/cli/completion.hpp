// Shell completion for pspxdp, generated from the command table (command.hpp):
// a new command or option completes without an edit here.
#pragma once

#include <cstdio>

namespace pspxdp::cli {

// A bash completion script (`pspxdp completion bash`; the build installs its
// output as /usr/share/bash-completion/completions/pspxdp).
void print_bash_completion(FILE *out);

} // namespace pspxdp::cli
