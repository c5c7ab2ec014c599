// A group's share on a class of a class tree (docs/design.md §11.10): what
// the agent writes (control::fit_subtree), in what order, and which joins
// are refused (control::check_group_class).
#include "control/config.hpp"
#include "control/group_share.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <random>

using namespace pspxdp;
using control::ClassSpec;

namespace {

constexpr uint64_t M = 1'000'000;

ClassSpec cls(uint32_t minor, uint64_t rate, uint64_t ceil = 0, uint32_t parent_minor = 0) {
    ClassSpec c;
    c.classid = 0x10000 | minor;
    c.kind = PSPXDP_CLASS_PACED;
    c.rate_bps = rate;
    c.ceil_bps = ceil;
    c.parent = parent_minor ? 0x10000 | parent_minor : 0;
    return c;
}

// A 1 Gbit/s wire: 1:1 (400M) over the site 1:10 (100M ceil 300M) with two
// leaves that borrow (1:11 30M ceil 200M, 1:12 50M ceil 300M), beside 1:20.
std::vector<ClassSpec> tree() {
    return {cls(1, 400 * M), cls(10, 100 * M, 300 * M, 1), cls(11, 30 * M, 200 * M, 10),
            cls(12, 50 * M, 300 * M, 10), cls(20, 200 * M, 400 * M, 1)};
}

std::map<uint32_t, ClassSpec> by_minor(const std::vector<ClassSpec> &v) {
    std::map<uint32_t, ClassSpec> m;
    for (const auto &c : v) m[c.classid & 0xffff] = c;
    return m;
}

uint64_t ceil_of(const ClassSpec &c) { return c.ceil_bps ? c.ceil_bps : c.rate_bps; }

// `all` with `writes` (the first n) put in place.
std::vector<ClassSpec> written(std::vector<ClassSpec> all, const std::vector<ClassSpec> &writes,
                               size_t n) {
    for (size_t i = 0; i < n; ++i)
        for (auto &c : all)
            if (c.classid == writes[i].classid) c = writes[i];
    return all;
}

bool consistent(const std::vector<ClassSpec> &all) {
    for (const auto &c : all)
        if (ceil_of(c) < c.rate_bps || c.rate_bps == 0) return false;
    return control::check_tree(all).ok();
}

} // namespace

TEST_CASE("group share on an inner class: the share is the subtree's ceil", "[cluster][tree]") {
    const auto all = tree();
    const uint32_t site = 0x1000a;
    CHECK(control::subtree_ids(all, site) == std::vector<uint32_t>{0x1000a, 0x1000b, 0x1000c});
    CHECK(control::subtree_hold_bps(all, site) == 2);

    // Within the children's ceils: the children keep their rates and borrow
    // up to the share; a lowering writes the leaves first, the site last.
    auto w = control::fit_subtree(all, site, 250 * M, 1000 * M, 300 * M);
    REQUIRE(w.size() == 3);
    CHECK(w.back().classid == site);
    auto m = by_minor(w);
    CHECK(m[10].ceil_bps == 250 * M);
    CHECK(m[10].rate_bps == 100 * M);
    CHECK(m[11].rate_bps == 30 * M);
    CHECK(m[11].ceil_bps == 200 * M);
    CHECK(m[12].rate_bps == 50 * M);
    CHECK(m[12].ceil_bps == 250 * M);

    // Below the site's rate: its rate follows, the children's rates shrink
    // in proportion above their 1 bit/s holds and still fit.
    m = by_minor(control::fit_subtree(all, site, 60 * M, 1000 * M, 250 * M));
    CHECK(m[10].ceil_bps == 60 * M);
    CHECK(m[10].rate_bps == 60 * M);
    CHECK(m[11].rate_bps == 1 + (30 * M - 1) * (60 * M - 2) / (100 * M - 2));
    CHECK(m[12].rate_bps == 1 + (50 * M - 1) * (60 * M - 2) / (100 * M - 2));
    CHECK(m[11].rate_bps + m[12].rate_bps <= 60 * M);
    CHECK(m[11].ceil_bps == 60 * M);

    // "0": the hold, 1 bit/s per leaf.
    m = by_minor(control::fit_subtree(all, site, 1, 1000 * M, 60 * M));
    CHECK(m[10].ceil_bps == 2);
    CHECK(m[10].rate_bps == 2);
    CHECK(m[11].rate_bps == 1);
    CHECK(m[12].ceil_bps == 2); // within the site's, which bounds them together

    // Above its parent's ceil: clamped to it; a raise writes the site first.
    w = control::fit_subtree(all, site, 900 * M, 1000 * M, 2);
    CHECK(w.front().classid == site);
    m = by_minor(w);
    CHECK(m[10].ceil_bps == 400 * M);
    CHECK(m[12].ceil_bps == 300 * M); // its own ceil, below the share
}

TEST_CASE("group share: flat classes and leaves of a tree", "[cluster][tree]") {
    // A flat class: the share is its rate, as before trees.
    std::vector<ClassSpec> flat = {cls(1, 100 * M), cls(2, 300 * M)};
    auto w = control::fit_subtree(flat, 0x10001, 250 * M, 1000 * M, 100 * M);
    REQUIRE(w.size() == 1);
    CHECK(w[0].rate_bps == 250 * M);
    CHECK(w[0].ceil_bps == 0);
    // A flat class given a ceil equal to its rate stays flat (ceil follows).
    flat[0].ceil_bps = 100 * M;
    w = control::fit_subtree(flat, 0x10001, 50 * M, 1000 * M, 100 * M);
    CHECK(w[0].rate_bps == 50 * M);
    CHECK(w[0].ceil_bps == 0);

    // A leaf of a tree: the share is its ceil (it would otherwise borrow
    // past it), its rate at most its own (its parent's sum still holds).
    auto all = tree();
    auto m = by_minor(control::fit_subtree(all, 0x1000b, 120 * M, 1000 * M, 200 * M));
    CHECK(m[11].ceil_bps == 120 * M);
    CHECK(m[11].rate_bps == 30 * M);
    m = by_minor(control::fit_subtree(all, 0x1000b, 20 * M, 1000 * M, 120 * M));
    CHECK(m[11].ceil_bps == 20 * M);
    CHECK(m[11].rate_bps == 20 * M);
    // A top-level leaf that borrows from the wire: clamped to the line rate.
    m = by_minor(control::fit_subtree({cls(5, 10 * M, 50 * M)}, 0x10005, 2000 * M, 1000 * M, 0));
    CHECK(m[5].ceil_bps == 1000 * M);
    CHECK(m[5].rate_bps == 10 * M);
}

TEST_CASE("group share: every write order keeps the tree whole, any share", "[cluster][tree]") {
    // Random trees of depth up to 3, random shares in sequence: each fit is
    // consistent (the daemon would accept it), the subtree's ceil is the
    // share (clamped, or the hold), and every prefix of the writes, as a
    // reader of the map may see it mid-change, is consistent too, so the
    // subtree is never bounded by anything but the old or the new ceil.
    std::mt19937_64 rng(20261128);
    for (int seed = 0; seed < 300; ++seed) {
        std::vector<ClassSpec> own = {cls(1, 1000 * M)};
        const uint32_t root_minor = 2;
        own.push_back(cls(root_minor, 500 * M, 800 * M, 1));
        // Children and grandchildren whose rates fit and ceils are within.
        uint32_t next = 3;
        std::vector<uint32_t> parents = {root_minor};
        for (int level = 0; level < 2; ++level) {
            std::vector<uint32_t> made;
            for (uint32_t p : parents) {
                uint64_t prate = 0, pceil = 0;
                for (const auto &c : own)
                    if ((c.classid & 0xffff) == p) {
                        prate = c.rate_bps;
                        pceil = ceil_of(c);
                    }
                const int n = int(rng() % 4);
                for (int i = 0; i < n; ++i) {
                    const uint64_t r = 1 + rng() % (prate / 4);
                    const uint64_t c = r + rng() % (pceil - r + 1);
                    own.push_back(cls(next, r, c, p));
                    made.push_back(next++);
                }
            }
            parents = made;
        }
        REQUIRE(consistent(own));
        const uint32_t root = 0x10000 | root_minor;
        auto map = control::fit_subtree(own, root, 800 * M, 1000 * M, 800 * M);
        map = written(own, map, map.size());
        uint64_t share = 800 * M;
        for (int step = 0; step < 6; ++step) {
            const uint64_t next_share = rng() % 4 == 0 ? 0 : rng() % (1100 * M);
            uint64_t now_ceil = 0;
            for (const auto &c : map)
                if (c.classid == root) now_ceil = ceil_of(c);
            // From the own rates (what the agent holds), not from the map.
            auto w = control::fit_subtree(own, root, next_share, 1000 * M, now_ceil);
            INFO("seed " << seed << " step " << step << " share " << share << " -> " << next_share);
            for (size_t n = 0; n <= w.size(); ++n) REQUIRE(consistent(written(map, w, n)));
            map = written(map, w, w.size());
            uint64_t got = 0;
            for (const auto &c : map)
                if (c.classid == root) got = ceil_of(c);
            CHECK(got == std::max(std::min(next_share, uint64_t(1000 * M)),
                                  control::subtree_hold_bps(own, root)));
            share = next_share;
        }
        // Leave: the own rates put back give the tree as it was.
        std::vector<control::OwnRate> rec;
        for (const auto &c : own) rec.push_back({c.classid, c.rate_bps, c.ceil_bps});
        const auto back = control::with_own_rates(map, rec);
        for (size_t i = 0; i < own.size(); ++i) {
            CHECK(back[i].rate_bps == own[i].rate_bps);
            CHECK(back[i].ceil_bps == own[i].ceil_bps);
        }
    }
}

TEST_CASE("group join on a tree class: what is refused", "[cluster][tree]") {
    auto all = tree();
    all.push_back(ClassSpec{});
    all.back().classid = 0x1ffff; // normal
    auto bad = [&](uint32_t id, uint64_t floor) {
        auto r = control::check_group_class(all, id, floor, "tC0");
        REQUIRE_FALSE(r.ok());
        CHECK(r.exit_code() == 2);
        return r.error();
    };
    CHECK(bad(0x1000a, 0) == "class 1:a of tC0 has children guaranteed 80Mbit (their rates' sum), "
                             "above --floor 0bit: at its floor the subtree could not keep them; "
                             "join with --floor 80Mbit or more");
    CHECK(bad(0x10063, 0) == "class 1:63 does not exist on tC0");
    CHECK(bad(0x1ffff, 0) == "class 1:ffff of tC0 is not paced (give it a rate first)");
    CHECK(control::check_group_class(all, 0x1000a, 80 * M, "tC0").ok());
    CHECK(control::check_group_class(all, 0x1000b, 0, "tC0").ok()); // a leaf: no floor asked
    // 1:1's children (the site and 1:20) guarantee 300M.
    CHECK(bad(0x10001, 299 * M).find("guaranteed 300Mbit") != std::string::npos);
}
