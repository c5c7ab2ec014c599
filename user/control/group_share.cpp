// docs/design.md §11.10: a group's share on a class of a class tree.
#include "control/group_share.hpp"

#include "core/units.hpp"

#include <algorithm>
#include <deque>

namespace pspxdp::control {

namespace {

uint64_t ceil_of(const ClassSpec &c) { return c.ceil_bps ? c.ceil_bps : c.rate_bps; }

struct Tree {
    std::map<uint32_t, const ClassSpec *> by_id;
    std::map<uint32_t, std::vector<uint32_t>> children;
    explicit Tree(const std::vector<ClassSpec> &all) {
        for (const auto &c : all) by_id[c.classid] = &c;
        for (const auto &c : all)
            if (c.parent) children[c.parent].push_back(c.classid);
    }
    const std::vector<uint32_t> &kids(uint32_t id) const {
        static const std::vector<uint32_t> none;
        auto it = children.find(id);
        return it == children.end() ? none : it->second;
    }
    uint64_t hold(uint32_t id) const {
        uint64_t sum = 0;
        for (uint32_t k : kids(id)) sum += hold(k);
        return std::max<uint64_t>(sum, 1);
    }
};

} // namespace

std::vector<uint32_t> subtree_ids(const std::map<uint32_t, uint32_t> &parent_of, uint32_t root) {
    std::map<uint32_t, std::vector<uint32_t>> children;
    for (const auto &[id, parent] : parent_of)
        if (parent) children[parent].push_back(id);
    std::vector<uint32_t> out;
    std::deque<uint32_t> todo{root};
    // Bounded by the classes given: a cycle (a hand-written map) ends it.
    while (!todo.empty() && out.size() <= parent_of.size()) {
        uint32_t id = todo.front();
        todo.pop_front();
        out.push_back(id);
        for (uint32_t k : children[id]) todo.push_back(k);
    }
    return out;
}

std::vector<uint32_t> subtree_ids(const std::vector<ClassSpec> &all, uint32_t root) {
    std::map<uint32_t, uint32_t> parent_of;
    for (const auto &c : all) parent_of[c.classid] = c.parent;
    return subtree_ids(parent_of, root);
}

uint64_t subtree_hold_bps(const std::vector<ClassSpec> &all, uint32_t root) {
    return Tree(all).hold(root);
}

Result<void> check_group_class(const std::vector<ClassSpec> &all, uint32_t classid,
                               uint64_t floor_bps, const std::string &dev) {
    const std::string cls = "class " + format_classid(ClassId::from_raw(classid));
    Tree t(all);
    auto it = t.by_id.find(classid);
    if (it == t.by_id.end()) return refuse(cls + " does not exist on " + dev);
    if (!it->second->paced())
        return refuse(cls + " of " + dev + " is not paced (give it a rate first)");
    uint64_t guaranteed = 0;
    for (uint32_t k : t.kids(classid)) guaranteed += t.by_id.at(k)->rate_bps;
    if (guaranteed > floor_bps)
        return refuse(cls + " of " + dev + " has children guaranteed " + format_rate(guaranteed) +
                      " (their rates' sum), above --floor " + format_rate(floor_bps) +
                      ": at its floor the subtree could not keep them; join with --floor " +
                      format_rate(guaranteed) + " or more");
    return {};
}

std::vector<ClassSpec> fit_subtree(const std::vector<ClassSpec> &all, uint32_t root,
                                   uint64_t share_bps, uint64_t line_rate_bps,
                                   uint64_t current_ceil_bps) {
    Tree t(all);
    auto rit = t.by_id.find(root);
    if (rit == t.by_id.end()) return {};
    const ClassSpec &r = *rit->second;
    if (!r.parent && t.kids(root).empty() && ceil_of(r) == r.rate_bps) {
        ClassSpec flat = r;
        flat.rate_bps = std::max<uint64_t>(share_bps, 1);
        flat.ceil_bps = 0;
        return {flat};
    }
    uint64_t cap = line_rate_bps ? line_rate_bps : UINT64_MAX;
    if (auto p = t.by_id.find(r.parent); r.parent && p != t.by_id.end()) cap = ceil_of(*p->second);
    const std::vector<uint32_t> ids = subtree_ids(all, root);
    std::map<uint32_t, uint64_t> rate, ceil;
    ceil[root] = std::max(std::min(share_bps, cap), t.hold(root));
    rate[root] = std::min(r.rate_bps, ceil[root]);
    for (uint32_t k : ids) {
        const uint64_t own = t.by_id.at(k)->rate_bps, now = rate[k];
        uint64_t holds = 0;
        for (uint32_t c : t.kids(k)) holds += t.hold(c);
        for (uint32_t c : t.kids(k)) {
            const ClassSpec &cs = *t.by_id.at(c);
            ceil[c] = std::min(ceil_of(cs), ceil[k]);
            uint64_t x = cs.rate_bps;
            // The parent's rate lowered: the children's rates above their
            // holds shrink in proportion, so they sum within it.
            if (now < own && own > holds) {
                const uint64_t h = t.hold(c);
                x = h +
                    uint64_t((unsigned __int128)(cs.rate_bps - h) * (now - holds) / (own - holds));
            }
            rate[c] = std::min(x, ceil[c]);
        }
    }
    std::vector<ClassSpec> out;
    for (uint32_t k : ids) {
        ClassSpec s = *t.by_id.at(k);
        s.rate_bps = rate[k];
        s.ceil_bps = ceil[k] == rate[k] && !t.by_id.at(k)->ceil_bps ? 0 : ceil[k];
        out.push_back(s);
    }
    // Lowering: the deepest first, root last; raising: root first.
    if (current_ceil_bps >= ceil[root]) std::reverse(out.begin(), out.end());
    return out;
}

std::vector<ClassSpec> with_own_rates(std::vector<ClassSpec> all, const std::vector<OwnRate> &own) {
    for (auto &c : all)
        for (const auto &o : own)
            if (o.classid == c.classid) {
                c.rate_bps = o.rate_bps;
                c.ceil_bps = o.ceil_bps;
            }
    return all;
}

} // namespace pspxdp::control
