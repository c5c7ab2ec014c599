#include "daemon/watch.hpp"

#include "common/clock.hpp"
#include "common/text.hpp"
#include "pspxdp/shared.h"
#include "setup/attach.hpp"
#include "setup/loader.hpp"
#include "setup/netlink.hpp"

#include <cerrno>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <vector>

namespace pspxdp::daemon {

namespace {
constexpr uint64_t kCheckEveryNs = common::kNsPerSec;
}

Result<DevWatch> DevWatch::open(const std::string &dev, uint32_t ifindex, uint32_t mtu) {
    DevWatch w;
    w.dev_ = dev;
    w.ifindex_ = ifindex;
    w.mtu_ = mtu;
    w.sock_.reset(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
    if (!w.sock_.valid()) return err("rtnetlink socket: " + common::errno_text(errno));
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_LINK;
    if (bind(w.sock_.get(), reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) != 0)
        return err("subscribing to link events: " + common::errno_text(errno));
    return w;
}

DevEvent DevWatch::check(const std::string &name, uint32_t mtu, bool deleted) {
    DevEvent ev;
    if (deleted) {
        ev.kind = DevEvent::Kind::Gone;
        ev.why = dev_ + " was deleted or moved to another network namespace";
    } else if (name != dev_) {
        ev.kind = DevEvent::Kind::Gone;
        ev.why = dev_ + " was renamed to " + common::quote(name) + " (attach it under that name)";
    } else if (mtu != mtu_) {
        ev.kind = DevEvent::Kind::Mtu;
        ev.mtu = mtu;
        ev.why =
            dev_ + "'s MTU changed from " + std::to_string(mtu_) + " to " + std::to_string(mtu);
        mtu_ = mtu;
    }
    return ev;
}

DevEvent DevWatch::poll(uint64_t now_ns) {
    bool lost = false;
    std::vector<uint8_t> buf(16384);
    for (;;) {
        ssize_t n = recv(sock_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            lost = errno == ENOBUFS; // events were dropped: look for ourselves
            break;
        }
        if (n == 0) break;
        for (auto *h = reinterpret_cast<nlmsghdr *>(buf.data()); NLMSG_OK(h, size_t(n));
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type != RTM_NEWLINK && h->nlmsg_type != RTM_DELLINK) continue;
            auto li = setup::link_from_msg(h);
            if (li.ifindex != ifindex_) continue;
            DevEvent ev = check(li.name, li.mtu, h->nlmsg_type == RTM_DELLINK);
            if (ev.kind != DevEvent::Kind::None) return ev;
        }
    }
    if (!lost && now_ns < next_check_ns_) return {};
    next_check_ns_ = now_ns + kCheckEveryNs;
    auto li = setup::get_link(ifindex_);
    return check(li ? li->name : dev_, li ? li->mtu : mtu_, !li);
}

DevOutcome handle_dev_event(const common::Paths &p, const setup::AttachState &st,
                            const DevEvent &ev,
                            const std::function<void(const std::string &)> &log) {
    DevOutcome out;
    std::string why = ev.why;
    bool gone = ev.kind == DevEvent::Kind::Gone;
    if (ev.kind == DevEvent::Kind::Mtu) {
        // Both ends: b receives what TC redirects into a.
        const uint32_t mtu = ev.mtu + PSPXDP_TAG_BYTES;
        Result<void> r = ev.mtu > setup::max_pacer_mtu()
                             ? err("more than " + std::to_string(setup::max_pacer_mtu()))
                             : setup::set_mtu(st.pacer_a, mtu);
        if (r) r = setup::set_mtu(st.pacer_b, mtu);
        if (r) {
            log(why + ": the pacer follows it (" + st.pacer_a + "/" + st.pacer_b + " MTU " +
                std::to_string(mtu) + ", restarting the loop)");
            out.restart = true;
            return out;
        }
        why += ", which the pacer cannot carry (" + r.error() + ")";
    }
    log(why + ": stopping; traffic on " + p.dev + " passes unpaced");
    if (auto r = setup::retire(p, why, gone); !r) log("retiring the attachment: " + r.error());
    out.exit_code = kExitDeviceGone;
    return out;
}

} // namespace pspxdp::daemon
