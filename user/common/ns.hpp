// Namespaces. pspxdp's pins (/sys/fs/bpf/pspxdp) and run files (/run/pspxdp)
// are the host's, shared by every network namespace; a device and its
// ifindex are not. So an attachment records the network namespace it was
// made in (the inode of /proc/self/ns/net), and every command compares it
// with its own before acting.
#pragma once

#include "core/result.hpp"

#include <cstdint>
#include <string>

namespace pspxdp::common {

// The inode of this process's network namespace; 0 if /proc cannot tell.
uint64_t netns_inode();
// "net:[4026531840]", as ls -l /proc/self/ns/net shows it.
std::string netns_label(uint64_t inode);
// Does a network namespace with this inode still exist? Looks at every
// process's /proc/PID/ns/net and at the bind mounts in /run/netns (ip netns).
bool netns_exists(uint64_t inode);

// `ip netns exec NS cmd` runs cmd in a private mount namespace where /sys is
// a fresh sysfs: the host's bpffs (and pspxdp's pins) are not there, and a
// bpffs mounted there dies with the command. If this process's /sys/fs/bpf
// (or /run) is not the host's - PID 1's, or where PID 1 is hidden, the
// nearest ancestor's in another mount namespace - enter the host's mount
// namespace (keeping the network namespace and the working directory): then
// pins are where every other pspxdp command finds them. Must run before any
// thread starts. Needs CAP_SYS_ADMIN; without it, an error that explains the
// situation. Returns true if it switched.
Result<bool> enter_host_mount_ns();

} // namespace pspxdp::common
