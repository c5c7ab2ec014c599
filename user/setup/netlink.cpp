#include "setup/netlink.hpp"

#include "common/fd.hpp"
#include "common/text.hpp"

// net/if.h before any linux/ header: glibc then tells the UAPI headers not to
// redefine struct ifreq and the IFF_ flags.
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/if_arp.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <linux/veth.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace pspxdp::setup {

namespace {

using common::errno_text;
using common::Fd;

// A netlink request under construction: header, family struct, attributes,
// nested attributes. Everything 4-byte aligned as NLMSG_ALIGN/RTA_ALIGN want.
class NlMsg {
  public:
    NlMsg(uint16_t type, uint16_t flags) {
        buf_.resize(NLMSG_HDRLEN);
        hdr()->nlmsg_type = type;
        hdr()->nlmsg_flags = flags | NLM_F_REQUEST;
        hdr()->nlmsg_len = NLMSG_HDRLEN;
    }
    template <class T> void put_struct(const T &v) { append(&v, sizeof(v)); }
    void put_attr(uint16_t type, const void *data, size_t len) {
        rtattr rta{};
        rta.rta_type = type;
        rta.rta_len = RTA_LENGTH(len);
        append(&rta, sizeof(rta), false);
        append(data, len);
    }
    void put_u32(uint16_t type, uint32_t v) { put_attr(type, &v, sizeof(v)); }
    void put_str(uint16_t type, const std::string &s) { put_attr(type, s.c_str(), s.size() + 1); }
    size_t begin_nest(uint16_t type) {
        size_t off = buf_.size();
        rtattr rta{};
        rta.rta_type = type;
        append(&rta, sizeof(rta));
        return off;
    }
    void end_nest(size_t off) {
        auto *rta = reinterpret_cast<rtattr *>(buf_.data() + off);
        rta->rta_len = uint16_t(buf_.size() - off);
    }
    nlmsghdr *hdr() { return reinterpret_cast<nlmsghdr *>(buf_.data()); }
    const std::vector<uint8_t> &bytes() const { return buf_; }

  private:
    void append(const void *data, size_t len, bool pad = true) {
        const auto *p = static_cast<const uint8_t *>(data);
        buf_.insert(buf_.end(), p, p + len);
        if (pad) buf_.resize(NLMSG_ALIGN(buf_.size()), 0);
        hdr()->nlmsg_len = uint32_t(buf_.size());
    }
    std::vector<uint8_t> buf_;
};

// Sends one request and reads the answer. on_msg sees every message of the
// reply (a dump's parts until NLMSG_DONE, or the one answer of a GET); with
// no on_msg the request asks for an ACK. Returns 0 or -errno from the kernel.
template <class F> int nl_request(NlMsg &msg, F on_msg, bool dump) {
    Fd sock(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (sock.get() < 0) return -errno;
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    static uint32_t seq = 1;
    msg.hdr()->nlmsg_seq = ++seq;
    if (dump)
        msg.hdr()->nlmsg_flags |= NLM_F_DUMP;
    else
        msg.hdr()->nlmsg_flags |= NLM_F_ACK;
    const auto &b = msg.bytes();
    if (sendto(sock.get(), b.data(), b.size(), 0, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) <
        0)
        return -errno;
    std::vector<uint8_t> buf(65536);
    for (;;) {
        ssize_t n = recv(sock.get(), buf.data(), buf.size(), 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        for (auto *h = reinterpret_cast<nlmsghdr *>(buf.data()); NLMSG_OK(h, size_t(n));
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq != msg.hdr()->nlmsg_seq) continue;
            if (h->nlmsg_type == NLMSG_ERROR) {
                auto *e = static_cast<nlmsgerr *>(NLMSG_DATA(h));
                return e->error; // 0 is the ACK
            }
            if (h->nlmsg_type == NLMSG_DONE) return 0;
            on_msg(h);
        }
    }
}

// A request answered by an ACK, or (reply != nullptr) by one RTM_NEWLINK
// copied to *reply.
int nl_transact(NlMsg &msg, std::vector<uint8_t> *reply) {
    bool got = false;
    return nl_request(
        msg,
        [&](const nlmsghdr *h) {
            if (reply && !got && h->nlmsg_type == RTM_NEWLINK) {
                auto *p = reinterpret_cast<const uint8_t *>(h);
                reply->assign(p, p + h->nlmsg_len);
                got = true;
            }
        },
        false);
}

int ethtool_ioctl(const std::string &name, void *data) {
    Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!sock.valid()) return -errno;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = static_cast<char *>(data);
    if (ioctl(sock.get(), SIOCETHTOOL, &ifr) < 0) return -errno;
    return 0;
}

std::string driver_of(const std::string &name) {
    ethtool_drvinfo info{};
    info.cmd = ETHTOOL_GDRVINFO;
    if (ethtool_ioctl(name, &info) < 0) return {};
    return std::string(info.driver, strnlen(info.driver, sizeof(info.driver)));
}

LinkInfo parse_link(const nlmsghdr *h) {
    const auto *ifi = static_cast<const ifinfomsg *>(NLMSG_DATA(h));
    LinkInfo li;
    li.ifindex = uint32_t(ifi->ifi_index);
    li.type = ifi->ifi_type;
    li.flags = ifi->ifi_flags;
    int len = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof(*ifi)));
    for (auto *rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
        const void *d = RTA_DATA(rta);
        size_t dl = RTA_PAYLOAD(rta);
        switch (rta->rta_type) {
        case IFLA_IFNAME:
            li.name.assign(static_cast<const char *>(d), strnlen(static_cast<const char *>(d), dl));
            break;
        case IFLA_MTU: std::memcpy(&li.mtu, d, 4); break;
        case IFLA_LINK: std::memcpy(&li.link, d, 4); break;
        case IFLA_NUM_TX_QUEUES: std::memcpy(&li.num_tx_queues, d, 4); break;
        case IFLA_NUM_RX_QUEUES: std::memcpy(&li.num_rx_queues, d, 4); break;
        case IFLA_ADDRESS:
            if (dl == 6) std::memcpy(li.mac.data(), d, 6);
            break;
        case IFLA_LINKINFO: {
            int nl = int(dl);
            for (auto *n = static_cast<const rtattr *>(d); RTA_OK(n, nl); n = RTA_NEXT(n, nl))
                if (n->rta_type == IFLA_INFO_KIND)
                    li.kind.assign(static_cast<const char *>(RTA_DATA(n)),
                                   strnlen(static_cast<const char *>(RTA_DATA(n)), RTA_PAYLOAD(n)));
            break;
        }
        default: break;
        }
    }
    return li;
}

Result<LinkInfo> get_link_impl(const std::string *name, uint32_t ifindex) {
    NlMsg msg(RTM_GETLINK, 0);
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = int(ifindex);
    msg.put_struct(ifi);
    if (name) {
        if (name->empty() || name->size() >= IFNAMSIZ)
            return err("device \"" + *name + "\": not a valid interface name");
        msg.put_str(IFLA_IFNAME, *name);
    }
    msg.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
    std::vector<uint8_t> reply;
    int rc = nl_transact(msg, &reply);
    std::string what = name ? "device \"" + *name + "\"" : "ifindex " + std::to_string(ifindex);
    // What the user named is not there: refused (exit 2), as "not attached" is.
    if (rc == -ENODEV) return refuse(what + ": no such device");
    if (rc < 0) return err(what + ": RTM_GETLINK failed: " + errno_text(rc));
    if (reply.empty()) return err(what + ": RTM_GETLINK returned nothing");
    LinkInfo li = parse_link(reinterpret_cast<const nlmsghdr *>(reply.data()));
    li.driver = driver_of(li.name);
    return li;
}

Result<uint32_t> ifindex_of(const std::string &name) {
    unsigned idx = if_nametoindex(name.c_str());
    if (!idx) return err("device \"" + name + "\": " + errno_text(errno));
    return idx;
}

} // namespace

LinkInfo link_from_msg(const nlmsghdr *msg) { return parse_link(msg); }

bool LinkInfo::is_ether() const { return type == ARPHRD_ETHER; }
bool LinkInfo::is_up() const { return flags & IFF_UP; }
bool LinkInfo::has_carrier() const { return flags & IFF_LOWER_UP; }

Result<LinkInfo> get_link(const std::string &name) { return get_link_impl(&name, 0); }
Result<LinkInfo> get_link(uint32_t ifindex) { return get_link_impl(nullptr, ifindex); }

namespace {
// Walks the attributes after a tcmsg.
template <class F> void for_each_tc_attr(const nlmsghdr *h, F fn) {
    const auto *tcm = static_cast<const tcmsg *>(NLMSG_DATA(h));
    int len = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof(*tcm)));
    for (auto *rta = reinterpret_cast<const rtattr *>(reinterpret_cast<const uint8_t *>(tcm) +
                                                      NLMSG_ALIGN(sizeof(*tcm)));
         RTA_OK(rta, len); rta = RTA_NEXT(rta, len))
        fn(rta);
}

std::string rta_string(const rtattr *rta) {
    const char *d = static_cast<const char *>(RTA_DATA(rta));
    return std::string(d, strnlen(d, RTA_PAYLOAD(rta)));
}
} // namespace

Result<std::string> ingress_qdisc_kind(uint32_t ifindex) {
    NlMsg msg(RTM_GETQDISC, 0);
    tcmsg tcm{};
    tcm.tcm_family = AF_UNSPEC;
    tcm.tcm_ifindex = int(ifindex);
    msg.put_struct(tcm);
    std::string kind;
    int rc = nl_request(
        msg,
        [&](const nlmsghdr *h) {
            if (h->nlmsg_type != RTM_NEWQDISC) return;
            const auto *t = static_cast<const tcmsg *>(NLMSG_DATA(h));
            // clsact and ingress both sit at parent ffff:fff1.
            if (uint32_t(t->tcm_ifindex) != ifindex || t->tcm_parent != TC_H_INGRESS) return;
            for_each_tc_attr(h, [&](const rtattr *rta) {
                if (rta->rta_type == TCA_KIND) kind = rta_string(rta);
            });
        },
        true);
    if (rc < 0)
        return err("listing the qdiscs of ifindex " + std::to_string(ifindex) + ": " +
                   errno_text(rc));
    return kind;
}

Result<std::vector<TcFilter>> list_tc_filters(uint32_t ifindex, bool egress) {
    NlMsg msg(RTM_GETTFILTER, 0);
    tcmsg tcm{};
    tcm.tcm_family = AF_UNSPEC;
    tcm.tcm_ifindex = int(ifindex);
    tcm.tcm_parent = TC_H_MAKE(TC_H_CLSACT, egress ? TC_H_MIN_EGRESS : TC_H_MIN_INGRESS);
    msg.put_struct(tcm);
    std::vector<TcFilter> out;
    int rc = nl_request(
        msg,
        [&](const nlmsghdr *h) {
            if (h->nlmsg_type != RTM_NEWTFILTER) return;
            const auto *t = static_cast<const tcmsg *>(NLMSG_DATA(h));
            // A dump lists each prio's chain head (handle 0) too: only filters.
            if (t->tcm_handle == 0) return;
            TcFilter f;
            f.prio = TC_H_MAJ(t->tcm_info) >> 16;
            f.protocol = uint16_t(TC_H_MIN(t->tcm_info));
            f.handle = t->tcm_handle;
            for_each_tc_attr(h, [&](const rtattr *rta) {
                if (rta->rta_type == TCA_KIND) f.kind = rta_string(rta);
                if (rta->rta_type != TCA_OPTIONS) return;
                int nl = int(RTA_PAYLOAD(rta));
                for (auto *n = static_cast<const rtattr *>(RTA_DATA(rta)); RTA_OK(n, nl);
                     n = RTA_NEXT(n, nl)) {
                    if (n->rta_type == TCA_BPF_NAME) f.bpf_name = rta_string(n);
                    if (n->rta_type == TCA_BPF_ID && RTA_PAYLOAD(n) >= 4)
                        std::memcpy(&f.bpf_id, RTA_DATA(n), 4);
                }
            });
            out.push_back(f);
        },
        true);
    // No clsact/ingress qdisc: nothing to list.
    if (rc == -EINVAL || rc == -ENOENT) return out;
    if (rc < 0)
        return err("listing the TC filters of ifindex " + std::to_string(ifindex) + ": " +
                   errno_text(rc));
    return out;
}

std::optional<uint64_t> get_speed_mbps(const LinkInfo &link) {
    // A veth reports a made-up 10000 Mb/s: it has no serialization clock at all.
    if (link.kind == "veth" || link.driver == "veth") return std::nullopt;
    // GLINKSETTINGS handshake: the kernel answers the first call with the
    // negated number of mask words it wants.
    // ethtool_link_settings ends in a flexible array: room for 3 masks of 127 words.
    alignas(8) uint8_t buf[sizeof(ethtool_link_settings) + 3 * 127 * sizeof(uint32_t)] = {};
    auto *ls = reinterpret_cast<ethtool_link_settings *>(buf);
    ls->cmd = ETHTOOL_GLINKSETTINGS;
    if (ethtool_ioctl(link.name, buf) == 0 && ls->link_mode_masks_nwords < 0) {
        int8_t nwords = int8_t(-ls->link_mode_masks_nwords);
        std::memset(buf, 0, sizeof(buf));
        ls->cmd = ETHTOOL_GLINKSETTINGS;
        ls->link_mode_masks_nwords = nwords;
        if (ethtool_ioctl(link.name, buf) == 0) {
            if (ls->speed == 0 || ls->speed == uint32_t(SPEED_UNKNOWN)) return std::nullopt;
            return ls->speed;
        }
    }
    ethtool_cmd cmd{};
    cmd.cmd = ETHTOOL_GSET;
    if (ethtool_ioctl(link.name, &cmd) < 0) return std::nullopt;
    uint32_t speed = ethtool_cmd_speed(&cmd);
    if (speed == 0 || speed == uint32_t(SPEED_UNKNOWN)) return std::nullopt;
    return speed;
}

std::optional<uint32_t> get_tx_ring(const std::string &name) {
    ethtool_ringparam r{};
    r.cmd = ETHTOOL_GRINGPARAM;
    if (ethtool_ioctl(name, &r) < 0 || r.tx_pending == 0) return std::nullopt;
    return r.tx_pending;
}

std::optional<PauseParams> get_pause(const std::string &name) {
    ethtool_pauseparam p{};
    p.cmd = ETHTOOL_GPAUSEPARAM;
    if (ethtool_ioctl(name, &p) < 0) return std::nullopt;
    return PauseParams{p.autoneg != 0, p.rx_pause != 0, p.tx_pause != 0};
}

Result<void> create_veth_pair(const std::string &a, const std::string &b, uint32_t queues,
                              uint32_t mtu) {
    NlMsg msg(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    msg.put_struct(ifi);
    msg.put_str(IFLA_IFNAME, a);
    msg.put_u32(IFLA_NUM_TX_QUEUES, queues);
    msg.put_u32(IFLA_NUM_RX_QUEUES, queues);
    msg.put_u32(IFLA_MTU, mtu);
    size_t linkinfo = msg.begin_nest(IFLA_LINKINFO);
    msg.put_str(IFLA_INFO_KIND, "veth");
    size_t data = msg.begin_nest(IFLA_INFO_DATA);
    size_t peer = msg.begin_nest(VETH_INFO_PEER);
    msg.put_struct(ifi); // the peer's ifinfomsg precedes its attributes
    msg.put_str(IFLA_IFNAME, b);
    msg.put_u32(IFLA_NUM_TX_QUEUES, queues);
    msg.put_u32(IFLA_NUM_RX_QUEUES, queues);
    msg.put_u32(IFLA_MTU, mtu);
    msg.end_nest(peer);
    msg.end_nest(data);
    msg.end_nest(linkinfo);
    int rc = nl_transact(msg, nullptr);
    if (rc < 0)
        return err("creating veth pair " + a + "/" + b + " (" + std::to_string(queues) +
                   " queues): " + errno_text(rc));
    return {};
}

Result<void> delete_link(const std::string &name) {
    unsigned idx = if_nametoindex(name.c_str());
    if (!idx) return {}; // already gone
    NlMsg msg(RTM_DELLINK, 0);
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = int(idx);
    msg.put_struct(ifi);
    int rc = nl_transact(msg, nullptr);
    if (rc < 0 && rc != -ENODEV) return err("deleting " + name + ": " + errno_text(rc));
    return {};
}

namespace {
// RTM_NEWLINK on an existing device by name: flags (mask `change`) and
// attributes added by `attrs`; `what` names the change for the error.
template <class F>
Result<void> change_link(const std::string &name, uint32_t flags, uint32_t change, F attrs,
                         const std::string &what) {
    auto idx = ifindex_of(name);
    if (!idx) return err(idx.error());
    NlMsg msg(RTM_NEWLINK, 0);
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = int(*idx);
    ifi.ifi_flags = flags;
    ifi.ifi_change = change;
    msg.put_struct(ifi);
    attrs(msg);
    int rc = nl_transact(msg, nullptr);
    if (rc < 0) return err(what + ": " + errno_text(rc));
    return {};
}
} // namespace

Result<void> set_link_up(const std::string &name) {
    return change_link(
        name, IFF_UP, IFF_UP, [](NlMsg &) {}, "setting " + name + " up");
}

Result<void> set_mtu(const std::string &name, uint32_t mtu) {
    return change_link(
        name, 0, 0, [&](NlMsg &m) { m.put_u32(IFLA_MTU, mtu); },
        "setting the MTU of " + name + " to " + std::to_string(mtu));
}

Result<void> disable_ipv6(const std::string &name) {
    std::string path = "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6";
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return {}; // no IPv6 in this kernel/netns
        return err("disabling IPv6 on " + name + ": open " + path + ": " + errno_text(errno));
    }
    ssize_t n = write(fd, "1\n", 2);
    int e = errno;
    close(fd);
    if (n != 2) return err("disabling IPv6 on " + name + ": write " + path + ": " + errno_text(e));
    return {};
}

Result<void> set_tx_checksum(const std::string &name, bool on) {
    ethtool_value v{};
    v.cmd = ETHTOOL_STXCSUM;
    v.data = on ? 1 : 0;
    int rc = ethtool_ioctl(name, &v);
    if (rc < 0)
        return err(std::string("turning tx checksum offload ") + (on ? "on" : "off") + " on " +
                   name + ": " + errno_text(rc));
    return {};
}

std::string pacer_name_a(uint32_t dev_ifindex) { return "psp" + std::to_string(dev_ifindex) + "a"; }
std::string pacer_name_b(uint32_t dev_ifindex) { return "psp" + std::to_string(dev_ifindex) + "b"; }

} // namespace pspxdp::setup
