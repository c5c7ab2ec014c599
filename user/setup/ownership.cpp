// What is pspxdp's on a system: our maps among the pins, our TC filter on a
// device's egress, our pacer veth pair. Teardown and attach remove or replace
// only what these say is ours.
#include "setup/ownership.hpp"

#include "common/fd.hpp"
#include "common/text.hpp"
#include "setup/netlink.hpp"

#include "classifier.skel.h"
#include "redirect.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cstdio>

namespace pspxdp::setup {

using common::Fd;

namespace {

std::string prog_name(uint32_t id) {
    Fd fd(bpf_prog_get_fd_by_id(id));
    if (!fd.valid()) return {};
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0) return {};
    return info.name;
}

} // namespace

const std::vector<MapIdentity> &our_maps() {
    static const std::vector<MapIdentity> maps = [] {
        std::vector<MapIdentity> out;
        auto add = [&](bpf_object *obj) {
            bpf_map *m;
            bpf_object__for_each_map(m, obj) {
                if (bpf_map__is_internal(m)) continue;
                MapIdentity id{bpf_map__name(m), uint32_t(bpf_map__type(m)), bpf_map__key_size(m),
                               bpf_map__value_size(m)};
                bool dup = false;
                for (const auto &o : out) dup |= o.name == id.name;
                if (!dup) out.push_back(id);
            }
        };
        // Opened, never loaded: the maps' definitions are all we need.
        if (classifier_bpf *c = classifier_bpf__open()) {
            add(c->obj);
            classifier_bpf__destroy(c);
        }
        if (redirect_bpf *r = redirect_bpf__open()) {
            add(r->obj);
            redirect_bpf__destroy(r);
        }
        return out;
    }();
    return maps;
}

bool is_our_pin(const std::string &file, const common::PinnedMapInfo &info) {
    if (!info.is_map) return false;
    for (const auto &m : our_maps()) {
        if (m.name != file) continue;
        // The kernel keeps at most BPF_OBJ_NAME_LEN - 1 characters of a name.
        return info.name == m.name.substr(0, BPF_OBJ_NAME_LEN - 1) && info.type == m.type &&
               info.key_size == m.key_size && info.value_size == m.value_size;
    }
    return false;
}

Result<Ownership> tc_filter_owner(uint32_t ifindex, std::string *who) {
    auto fl = list_tc_filters(ifindex, true);
    if (!fl) return fl.failure();
    for (const auto &f : *fl) {
        if (f.prio != kTcPriority) continue;
        bool ours = f.kind == "bpf" && f.handle == kTcHandle &&
                    (prog_name(f.bpf_id) == kTcProgName ||
                     f.bpf_name.starts_with(std::string(kTcProgName) + ":"));
        if (ours) return Ownership::Ours;
        if (who) {
            char h[16];
            std::snprintf(h, sizeof(h), "%x", f.handle);
            *who = "a " + f.kind + " filter (handle 0x" + h +
                   (f.bpf_name.empty() ? "" : ", " + common::quote(f.bpf_name)) + ")";
        }
        return Ownership::Foreign;
    }
    return Ownership::Absent;
}

// Is the qdisc at DEV's clsact slot free of filters pspxdp did not put there?
Result<bool> clsact_holds_only_ours(uint32_t ifindex) {
    for (bool egress : {true, false}) {
        auto fl = list_tc_filters(ifindex, egress);
        if (!fl) return fl.failure();
        for (const auto &f : *fl)
            if (!(egress && f.handle == kTcHandle && f.prio == kTcPriority)) return false;
    }
    return true;
}

// a_ifindex: a's ifindex when known (the state file's): a pair of the same
// names made since (ifindexes can be reused) is not ours.
Ownership veth_pair_owner(const std::string &a, const std::string &b, uint32_t a_ifindex) {
    auto la = get_link(a);
    if (!la) return Ownership::Absent;
    if (la->kind != "veth" || !la->link || (a_ifindex && la->ifindex != a_ifindex))
        return Ownership::Foreign;
    auto lb = get_link(la->link);
    if (!lb || lb->name != b || lb->kind != "veth") return Ownership::Foreign;
    return Ownership::Ours;
}

Ownership pacer_veth_owner(uint32_t dev_ifindex) {
    return veth_pair_owner(pacer_name_a(dev_ifindex), pacer_name_b(dev_ifindex));
}

} // namespace pspxdp::setup
