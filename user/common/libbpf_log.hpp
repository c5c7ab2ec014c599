// libbpf's own printer writes "libbpf: ..." lines to stderr, also for errors
// pspxdp expects and reports itself ("Exclusivity flag on", a missing hook).
// pspxdp installs this printer instead: libbpf's warnings are kept (the last
// few) for the one error message that needs them - a program that fails to
// load - and printed only with PSPXDP_DEBUG=1 in the environment.
#pragma once

#include <string>

namespace pspxdp::common {

void install_libbpf_printer();
// libbpf's last warning line since the last call (trimmed), or "".
std::string take_libbpf_warning();

} // namespace pspxdp::common
