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

// A network namespace as pspxdp records it: the inode of /proc/PID/ns/net
// (what people see: net:[4026531840]) and the kernel's netns cookie
// (SO_NETNS_COOKIE), which unlike the inode is never reused during a boot -
// a namespace created after another was deleted may get its inode.
struct NetnsId {
    uint64_t inode = 0;
    uint64_t cookie = 0; // 0: unknown (a state file of an older pspxdp)
    // Same namespace? By cookie when both are known, else by inode.
    bool same(const NetnsId &o) const {
        return cookie && o.cookie ? cookie == o.cookie : inode == o.inode;
    }
};
// This process's network namespace; zeros if /proc cannot tell.
NetnsId netns_here();
uint64_t netns_inode();
// "net:[4026531840]", as ls -l /proc/self/ns/net shows it.
std::string netns_label(uint64_t inode);
// Does this network namespace still exist? Looks at every process's
// /proc/PID/ns/net and at the bind mounts in /run/netns (ip netns); a
// namespace found with the inode is checked by its cookie (from a child
// that enters it), so a namespace that reused the inode does not count.
bool netns_exists(const NetnsId &id);

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
