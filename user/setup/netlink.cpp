#include "setup/netlink.hpp"

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
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <linux/veth.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace pspxdp::setup {

namespace {

std::string errstr(int err) {
    return std::strerror(err < 0 ? -err : err);
}

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

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() {
        if (fd >= 0) close(fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
};

// Sends one request and collects the reply. With want_reply, the first
// RTM_NEWLINK payload is copied to *reply; otherwise only the ACK counts.
// Returns 0 or -errno from the kernel's NLMSG_ERROR.
int nl_transact(NlMsg &msg, std::vector<uint8_t> *reply) {
    Fd sock(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (sock.fd < 0) return -errno;
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    static uint32_t seq = 1;
    msg.hdr()->nlmsg_seq = ++seq;
    if (!reply) msg.hdr()->nlmsg_flags |= NLM_F_ACK;
    const auto &b = msg.bytes();
    if (sendto(sock.fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0)
        return -errno;
    std::vector<uint8_t> buf(32768);
    for (;;) {
        ssize_t n = recv(sock.fd, buf.data(), buf.size(), 0);
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
            if (reply && h->nlmsg_type == RTM_NEWLINK) {
                auto *p = reinterpret_cast<uint8_t *>(h);
                reply->assign(p, p + h->nlmsg_len);
                return 0;
            }
        }
    }
}

int ethtool_ioctl(const std::string &name, void *data) {
    Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (sock.fd < 0) return -errno;
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = static_cast<char *>(data);
    if (ioctl(sock.fd, SIOCETHTOOL, &ifr) < 0) return -errno;
    return 0;
}

std::string driver_of(const std::string &name) {
    ethtool_drvinfo info{};
    info.cmd = ETHTOOL_GDRVINFO;
    if (ethtool_ioctl(name, &info) < 0) return {};
    return std::string(info.driver, strnlen(info.driver, sizeof(info.driver)));
}

Result<LinkInfo> parse_link(const std::vector<uint8_t> &msg) {
    const auto *h = reinterpret_cast<const nlmsghdr *>(msg.data());
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
        case IFLA_MTU:
            std::memcpy(&li.mtu, d, 4);
            break;
        case IFLA_NUM_TX_QUEUES:
            std::memcpy(&li.num_tx_queues, d, 4);
            break;
        case IFLA_NUM_RX_QUEUES:
            std::memcpy(&li.num_rx_queues, d, 4);
            break;
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
        default:
            break;
        }
    }
    li.driver = driver_of(li.name);
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
    if (rc == -ENODEV) return err(what + ": no such device");
    if (rc < 0) return err(what + ": RTM_GETLINK failed: " + errstr(rc));
    if (reply.empty()) return err(what + ": RTM_GETLINK returned nothing");
    return parse_link(reply);
}

Result<uint32_t> ifindex_of(const std::string &name) {
    unsigned idx = if_nametoindex(name.c_str());
    if (!idx) return err("device \"" + name + "\": " + errstr(errno));
    return idx;
}

} // namespace

bool LinkInfo::is_ether() const {
    return type == ARPHRD_ETHER;
}
bool LinkInfo::is_up() const {
    return flags & IFF_UP;
}
bool LinkInfo::has_carrier() const {
    return flags & IFF_LOWER_UP;
}

Result<LinkInfo> get_link(const std::string &name) {
    return get_link_impl(&name, 0);
}
Result<LinkInfo> get_link(uint32_t ifindex) {
    return get_link_impl(nullptr, ifindex);
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
                   " queues): " + errstr(rc));
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
    if (rc < 0 && rc != -ENODEV) return err("deleting " + name + ": " + errstr(rc));
    return {};
}

Result<void> set_link_up(const std::string &name) {
    auto idx = ifindex_of(name);
    if (!idx) return err(idx.error());
    NlMsg msg(RTM_NEWLINK, 0);
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = int(*idx);
    ifi.ifi_flags = IFF_UP;
    ifi.ifi_change = IFF_UP;
    msg.put_struct(ifi);
    int rc = nl_transact(msg, nullptr);
    if (rc < 0) return err("setting " + name + " up: " + errstr(rc));
    return {};
}

Result<void> disable_ipv6(const std::string &name) {
    std::string path = "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6";
    int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return {}; // no IPv6 in this kernel/netns
        return err("disabling IPv6 on " + name + ": open " + path + ": " + errstr(errno));
    }
    ssize_t n = write(fd, "1\n", 2);
    int e = errno;
    close(fd);
    if (n != 2) return err("disabling IPv6 on " + name + ": write " + path + ": " + errstr(e));
    return {};
}

Result<void> set_tx_checksum(const std::string &name, bool on) {
    ethtool_value v{};
    v.cmd = ETHTOOL_STXCSUM;
    v.data = on ? 1 : 0;
    int rc = ethtool_ioctl(name, &v);
    if (rc < 0)
        return err(std::string("turning tx checksum offload ") + (on ? "on" : "off") + " on " +
                   name + ": " + errstr(rc));
    return {};
}

std::string pacer_name_a(uint32_t dev_ifindex) {
    return "psp" + std::to_string(dev_ifindex) + "a";
}
std::string pacer_name_b(uint32_t dev_ifindex) {
    return "psp" + std::to_string(dev_ifindex) + "b";
}

} // namespace pspxdp::setup
