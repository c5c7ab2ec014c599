// What is pspxdp's: every removal and replacement (teardown, attach over a
// dead attachment, detach of a half-made one) asks these first, so that a
// foreign map pinned under our name, someone else's TC filter or a veth that
// only has our name stays.
#pragma once

#include "common/pins.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pspxdp::setup {

// Our TC filter on DEV's clsact egress: handle/prio and the program's name.
// A filter is ours only if all three match.
inline constexpr uint32_t kTcHandle = 0x5053; // "PS"
inline constexpr uint32_t kTcPriority = 1;
inline constexpr const char *kTcProgName = "pspxdp_classify";

// A map pspxdp's BPF objects define: a pin is ours only if its name, type
// and key/value sizes are these (a foreign map pinned in our directory
// under one of our names stays).
struct MapIdentity {
    std::string name;
    uint32_t type = 0, key_size = 0, value_size = 0;
};
const std::vector<MapIdentity> &our_maps();
// Is the pinned object at dir/file one of our maps?
bool is_our_pin(const std::string &file, const common::PinnedMapInfo &info);

enum class Ownership { Absent, Ours, Foreign };
// Our TC filter at handle/prio on ifindex's clsact egress? *who describes a
// foreign one ("u32 filter handle 800::800 prio 1").
Result<Ownership> tc_filter_owner(uint32_t ifindex, std::string *who = nullptr);
// The pacer veth pair of DEV's ifindex: psp<ifindex>a, a veth whose peer is
// psp<ifindex>b.
Ownership pacer_veth_owner(uint32_t dev_ifindex);
// Is the qdisc at DEV's clsact slot free of filters pspxdp did not put there?
Result<bool> clsact_holds_only_ours(uint32_t ifindex);
// The veth pair a (peer b) is ours: a veth whose peer is b, also a veth.
// a_ifindex: a's ifindex when known (the state file's): a pair of the same
// names made since (ifindexes can be reused) is not ours.
Ownership veth_pair_owner(const std::string &a, const std::string &b, uint32_t a_ifindex = 0);

} // namespace pspxdp::setup
