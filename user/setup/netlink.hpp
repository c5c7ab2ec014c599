// Small rtnetlink and ethtool helpers: what pspxdp needs to know about DEV and
// to build the pacer veth pair, without shelling out to ip(8) or ethtool(8).
// Everything acts in the caller's network namespace.
#pragma once

#include "core/framing.hpp"
#include "core/result.hpp"

#include <cstdint>
#include <linux/netlink.h>
#include <optional>
#include <string>
#include <vector>

namespace pspxdp::setup {

struct LinkInfo {
    std::string name;
    uint32_t ifindex = 0;
    uint16_t type = 0;  // ARPHRD_*
    uint32_t flags = 0; // IFF_*
    uint32_t mtu = 0;
    MacAddr mac{};
    uint32_t num_tx_queues = 0;
    uint32_t num_rx_queues = 0;
    std::string kind;   // rtnetlink IFLA_INFO_KIND ("veth", ...); empty for physical NICs
    std::string driver; // ethtool driver name, empty if unknown
    uint32_t link = 0;  // IFLA_LINK: a veth's peer ifindex (same netns), 0 if none

    bool is_ether() const;
    bool is_up() const;       // administratively up
    bool has_carrier() const; // IFF_LOWER_UP
};

struct PauseParams {
    bool autoneg = false;
    bool rx_pause = false;
    bool tx_pause = false;
};

// A LinkInfo from an RTM_NEWLINK/RTM_DELLINK message (e.g. one received on
// an RTNLGRP_LINK subscription); no ethtool query (driver stays empty).
LinkInfo link_from_msg(const struct nlmsghdr *msg);

// RTM_GETLINK by name. "no such device" is an error naming the device.
Result<LinkInfo> get_link(const std::string &name);
Result<LinkInfo> get_link(uint32_t ifindex);

// The qdisc at DEV's ingress/clsact slot (parent ffff:fff1): "clsact",
// "ingress", or empty when there is none.
Result<std::string> ingress_qdisc_kind(uint32_t ifindex);

// One TC filter as RTM_GETTFILTER dumps it.
struct TcFilter {
    uint32_t prio = 0;
    uint32_t handle = 0;
    uint16_t protocol = 0; // network byte order, as tc shows it (ETH_P_ALL = all)
    std::string kind;      // "bpf", "u32", ...
    std::string bpf_name;  // cls_bpf: the program's name as tc shows it ("classifier.bpf.o:[..]" or
                           // the prog name)
    uint32_t bpf_id = 0;   // cls_bpf: the program's id
};
// The filters on DEV's clsact egress (egress=true) or ingress hook. No
// clsact/ingress qdisc: an empty list.
Result<std::vector<TcFilter>> list_tc_filters(uint32_t ifindex, bool egress);

// Link speed in Mbit/s from ETHTOOL_GLINKSETTINGS (or the legacy GSET).
// nullopt when the device does not know it (unknown speed, veth, ...).
std::optional<uint64_t> get_speed_mbps(const LinkInfo &link);

// Descriptors in the TX ring (ETHTOOL_GRINGPARAM tx_pending); nullopt when
// the driver has no ring to report (veth).
std::optional<uint32_t> get_tx_ring(const std::string &name);

// 802.3x pause parameters; nullopt when the driver does not report them.
std::optional<PauseParams> get_pause(const std::string &name);

// Creates the veth pair a <-> b in the current netns with `queues` tx and rx
// queues on both sides (veth XDP refuses fewer rx queues than the peer's tx
// queues) and the given MTU.
Result<void> create_veth_pair(const std::string &a, const std::string &b, uint32_t queues,
                              uint32_t mtu);
// RTM_DELLINK; deleting one end of a veth pair deletes both. Missing is ok.
Result<void> delete_link(const std::string &name);
Result<void> set_link_up(const std::string &name);
Result<void> set_mtu(const std::string &name, uint32_t mtu);
// net.ipv6.conf.NAME.disable_ipv6 = 1 (no-op success when IPv6 is absent):
// otherwise the pacer veths' own ND/MLD frames land in the pacer queues.
Result<void> disable_ipv6(const std::string &name);
// ETHTOOL_STXCSUM: tx checksum offload on/off. Must be off on the veth that
// receives the redirect, or CHECKSUM_PARTIAL frames reach the XSK unresolved.
Result<void> set_tx_checksum(const std::string &name, bool on);

// Pacer veth names derived from DEV's ifindex (<= 15 chars): a is the side TC
// redirects into, b carries the XDP program and the AF_XDP RX sockets.
std::string pacer_name_a(uint32_t dev_ifindex);
std::string pacer_name_b(uint32_t dev_ifindex);

} // namespace pspxdp::setup
