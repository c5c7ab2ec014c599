// One host's protocol (docs/design.md §11.3) step by step, against views
// and lease events written by hand.
#include "cluster/protocol.hpp"

#include <catch2/catch.hpp>

using namespace pspxdp::cluster;

namespace {

constexpr uint64_t ms = 1'000'000, s = 1'000'000'000;

struct Recorder final : Effects {
    std::vector<uint64_t> rates;
    int grants = 0;
    std::vector<Live> puts;
    std::vector<std::pair<Allocation, int64_t>> allocs;
    std::vector<std::pair<Roster, int64_t>> rosters;
    std::vector<uint64_t> revoked;
    uint64_t wake_ns = 0;

    void apply_rate(uint64_t rate_bps) override { rates.push_back(rate_bps); }
    void grant_lease() override { ++grants; }
    void put_live(const Live &record) override { puts.push_back(record); }
    void cas_alloc(const Allocation &a, int64_t rev) override { allocs.emplace_back(a, rev); }
    void cas_roster(const Roster &r, int64_t rev) override { rosters.emplace_back(r, rev); }
    void revoke_lease(uint64_t lease) override { revoked.push_back(lease); }
    void wake_at(uint64_t local_ns) override { wake_ns = local_ns; }
};

const Member kMember{100, 1, 0x10001};

// A group of a (this host, lease 7) and b, budget 1000, floors 100 each.
View group(int64_t revision, uint64_t epoch, std::map<HostId, uint64_t> rates, uint64_t a_ack,
           uint64_t b_ack) {
    View v;
    v.revision = revision;
    v.roster = Roster{1000, {{"a", kMember}, {"b", kMember}}};
    v.roster_rev = 1;
    if (epoch) {
        v.alloc = Allocation{epoch, rates};
        v.alloc_rev = revision - 1;
    }
    v.live["a"] = Live{7, a_ack, 2000};
    v.live["b"] = Live{8, b_ack, 2000};
    return v;
}

// A member with lease 7 granted at t = 0, at epoch 1 (a 500, b 500: what
// their demands ask) fully acknowledged: applied 500, floor established.
struct Joined {
    Recorder fx;
    HostProtocol p{"a", kMember, 1000, Timing{}, fx};
    Joined() {
        p.on_lease_granted(1 * ms, 7, 0);
        p.on_view(2 * ms, group(10, 1, {{"a", 500}, {"b", 500}}, 1, 1));
        REQUIRE(p.phase() == HostProtocol::Phase::member);
        REQUIRE(p.applied_bps() == 500);
        REQUIRE(p.floor_established());
    }
};

} // namespace

TEST_CASE("protocol: lowers at once, raises only when every member acknowledged", "[cluster]") {
    Joined j;
    // Epoch 2 lowers a to 300: at once, then the ack, even with b behind.
    j.p.on_view(3 * ms, group(12, 2, {{"a", 300}, {"b", 700}}, 1, 1));
    CHECK(j.fx.rates.back() == 300);
    REQUIRE_FALSE(j.fx.puts.empty());
    CHECK(j.fx.puts.back().ack_epoch == 2);
    CHECK(j.fx.puts.back().lease == 7);
    // Epoch 3 raises a to 800: not while b has not acknowledged it...
    j.p.on_view(4 * ms, group(14, 3, {{"a", 800}, {"b", 200}}, 3, 2));
    CHECK(j.p.applied_bps() == 300);
    CHECK(j.fx.puts.back().ack_epoch == 3);
    // ...nor when b has but our own record is not in the view yet...
    View v = group(15, 3, {{"a", 800}, {"b", 200}}, 3, 3);
    v.live.erase("a");
    j.p.on_view(5 * ms, v);
    CHECK(j.p.applied_bps() == 300);
    // ...nor when it is there under another lease (an old incarnation's)...
    v = group(16, 3, {{"a", 800}, {"b", 200}}, 3, 3);
    v.live["a"].lease = 6;
    j.p.on_view(6 * ms, v);
    CHECK(j.p.applied_bps() == 300);
    // ...but when both are.
    j.p.on_view(7 * ms, group(17, 3, {{"a", 800}, {"b", 200}}, 3, 3));
    CHECK(j.p.applied_bps() == 800);
    // An older view changes nothing.
    j.p.on_view(8 * ms, group(12, 2, {{"a", 300}, {"b", 700}}, 2, 2));
    CHECK(j.p.applied_bps() == 800);
}

TEST_CASE("protocol: a member whose rate did not fall writes no ack; a raise waits for the acks "
          "the epoch asks (ack_from)",
          "[cluster]") {
    Joined j;
    size_t puts = j.fx.puts.size();
    // Epoch 2 raises a (500 -> 800) and lowers b: only b's ack is asked.
    View v = group(12, 2, {{"a", 800}, {"b", 200}}, 1, 1);
    v.alloc->ack_from = {{"a", 1}, {"b", 2}};
    j.p.on_view(3 * ms, v);
    CHECK(j.fx.puts.size() == puts); // a's ack of 1 serves
    CHECK(j.p.applied_bps() == 500); // b has not acknowledged 2
    v = group(14, 2, {{"a", 800}, {"b", 200}}, 1, 2);
    v.alloc->ack_from = {{"a", 1}, {"b", 2}};
    j.p.on_view(4 * ms, v);
    CHECK(j.p.applied_bps() == 800);
    CHECK(j.fx.puts.size() == puts);
    // a proposes the next epoch (both ask for 2000: 500 each): a falls, so
    // it must acknowledge 3; b rises and keeps its ack of 2.
    REQUIRE_FALSE(j.fx.allocs.empty());
    const Allocation &next = j.fx.allocs.back().first;
    CHECK(next.epoch == 3);
    CHECK(next.ack_from == std::map<HostId, uint64_t>{{"a", 3}, {"b", 2}});
    // Epoch 3 seen: a lowers at once and writes its ack.
    v = group(16, 3, {{"a", 500}, {"b", 500}}, 1, 2);
    v.alloc->ack_from = next.ack_from;
    j.p.on_view(5 * ms, v);
    CHECK(j.p.applied_bps() == 500);
    REQUIRE(j.fx.puts.size() == puts + 1);
    CHECK(j.fx.puts.back().ack_epoch == 3);
    // An epoch without ack_from (written before it existed) asks every ack.
    Allocation old{4, {{"a", 500}, {"b", 500}}};
    CHECK(old.ack_needed("a") == 4);
}

TEST_CASE("protocol: falls to its floor before the lease can expire on the server", "[cluster]") {
    Joined j;
    Timing t;
    uint64_t deadline = t.safe_span_ns(); // the lease was sent at 0
    CHECK(deadline < t.lease_ttl_ns - t.margin_ns);
    CHECK(deadline > t.lease_ttl_ns - t.margin_ns - 10 * ms); // drift 1e-3 of 3 s: 6 ms
    CHECK(j.fx.wake_ns == deadline);
    j.p.on_timer(deadline - 1);
    CHECK(j.p.applied_bps() == 500);
    j.p.on_timer(deadline);
    CHECK(j.p.applied_bps() == 100);
    // A later view does not raise it without a safe lease.
    j.p.on_view(deadline + 1, group(20, 1, {{"a", 500}, {"b", 500}}, 1, 1));
    CHECK(j.p.applied_bps() == 100);
    // A keep-alive sent before the deadline and answered after it makes the
    // lease safe again (the server refreshed it when it got it)...
    j.p.on_lease_renewed(deadline + 2, 7, deadline - 5 * ms);
    CHECK(j.p.lease_safe(deadline + 2));
    CHECK(j.p.applied_bps() == 500);
    // ...a lost one makes it ask for another.
    int grants = j.fx.grants;
    j.p.on_lease_lost(deadline + 3, 7);
    CHECK(j.p.applied_bps() == 100);
    CHECK(j.fx.grants == grants + 1);
}

TEST_CASE("protocol: a second lease granted while one is held is revoked, not taken", "[cluster]") {
    Joined j;
    j.p.on_lease_granted(3 * ms, 9, 2 * ms);
    CHECK(j.p.lease() == 7);
    CHECK(j.fx.revoked == std::vector<uint64_t>{9});
    // The deadline is still the first lease's.
    j.p.on_timer(Timing{}.safe_span_ns());
    CHECK(j.p.applied_bps() == 100);
}

TEST_CASE("protocol: without an acknowledged epoch holding its floor, a host holds nothing",
          "[cluster]") {
    Recorder fx;
    HostProtocol p{"a", kMember, 1000, Timing{}, fx};
    p.on_demand(0, 500);
    // No lease before the join is accepted (a refusal asks etcd for nothing).
    CHECK(fx.grants == 0);
    p.on_lease_granted(1 * ms, 7, 0);
    // Epoch 1 gives a 500 but b has not acknowledged it: a stays at 0.
    p.on_view(2 * ms, group(10, 1, {{"a", 500}, {"b", 500}}, 1, 0));
    CHECK(p.applied_bps() == 0);
    CHECK_FALSE(p.floor_established());
    p.on_timer(Timing{}.safe_span_ns());
    // Held at 0 when it joined, and nothing since.
    CHECK(fx.rates == std::vector<uint64_t>{0});
}

TEST_CASE("protocol: joins by compare-and-swap, refuses floors that do not fit", "[cluster]") {
    Recorder fx;
    HostProtocol p{"c", Member{300, 2, 0x10002}, 1000, Timing{}, fx};
    View empty;
    empty.revision = 3;
    p.on_view(0, empty);
    REQUIRE(fx.rosters.size() == 1);
    CHECK(fx.rosters[0].second == 0);
    CHECK(fx.rosters[0].first.budget_bps == 1000);
    CHECK(fx.rosters[0].first.members.at("c") == Member{300, 2, 0x10002});
    // Someone else created it first, with floors 100 + 100: 300 fits.
    p.on_view(1 * ms, group(5, 0, {}, 0, 0));
    REQUIRE(fx.rosters.size() == 2);
    CHECK(fx.rosters[1].second == 1);
    CHECK(fx.rosters[1].first.members.size() == 3);

    Recorder fx2;
    HostProtocol big{"c", Member{801, 1, 0x10002}, 1000, Timing{}, fx2};
    big.on_view(0, group(5, 0, {}, 0, 0));
    CHECK(big.phase() == HostProtocol::Phase::refused);
    CHECK(big.refusal() ==
          "floor 801bit does not fit: the floors would sum to 1001bit, above the budget 1Kbit");
    CHECK(fx2.rosters.empty());
    // Refused: the class was never touched, no lease was asked.
    CHECK(fx2.rates.empty());
    CHECK(fx2.grants == 0);
}

TEST_CASE("protocol: one name, one member: a live record of another instance refuses the join",
          "[cluster]") {
    // b is live under lease 8 from instance "vm-b/..."; a second "b" joins.
    Recorder fx;
    HostProtocol p{"b", kMember, 1000, Timing{}, fx};
    p.set_identity("vm-c", "boot-c/d/1:1");
    View v = group(10, 1, {{"a", 500}, {"b", 500}}, 1, 1);
    v.live["b"].node = "vm-b";
    v.live["b"].instance = "boot-b/d/1:1";
    p.on_view(1 * ms, v);
    CHECK(p.phase() == HostProtocol::Phase::refused);
    CHECK(p.refusal() == "host name b is in use in the group by a live member on vm-b (lease 8): "
                         "give this host its own --name");
    CHECK(fx.rates.empty());
    CHECK(fx.grants == 0);
    CHECK(fx.rosters.empty());

    // The same instance (this agent restarted before its old lease expired):
    // it waits for the old record to go, then joins.
    Recorder fx2;
    HostProtocol again{"b", kMember, 1000, Timing{}, fx2};
    again.set_identity("vm-b", "boot-b/d/1:1");
    again.on_view(1 * ms, v);
    CHECK(again.phase() == HostProtocol::Phase::joining);
    CHECK(fx2.rates.empty());
    View gone = v;
    gone.revision = 11;
    gone.live.erase("b");
    again.on_view(2 * ms, gone);
    CHECK(again.phase() == HostProtocol::Phase::member);
    CHECK(fx2.rates == std::vector<uint64_t>{0});
    CHECK(fx2.grants == 1);
}

TEST_CASE("protocol: a name taken while a member (a put refused) refuses it", "[cluster]") {
    Joined j;
    j.p.set_identity("vm-a", "boot-a/d/1:1");
    Live other{9, 1, 0, "vm-x", "boot-x/d/1:1"};
    j.p.on_name_taken(5 * ms, other);
    CHECK(j.p.phase() == HostProtocol::Phase::refused);
    CHECK(j.p.refusal().find("in use in the group by a live member on vm-x") != std::string::npos);
}

TEST_CASE("protocol: after a gap, the fallback at once; a raise only once re-proven", "[cluster]") {
    Joined j;
    REQUIRE(j.p.applied_bps() == 500);
    // Stopped for a while (still within the lease as far as the clock goes).
    j.p.on_gap(10 * ms);
    CHECK(j.p.applied_bps() == 100); // the floor, established
    CHECK(j.p.raise_until_ns() == 0);
    // A renewal sent before the gap does not prove it over, nor does a view
    // from the watch stream.
    j.p.on_lease_renewed(11 * ms, 7, 5 * ms);
    j.p.on_view(12 * ms, group(11, 1, {{"a", 500}, {"b", 500}}, 1, 1));
    CHECK(j.p.applied_bps() == 100);
    // A keep-alive sent after the gap, answered; still no fresh read.
    j.p.on_lease_renewed(20 * ms, 7, 15 * ms);
    CHECK(j.p.applied_bps() == 100);
    // A fresh read: both proofs in, back to its share.
    View fresh = group(12, 1, {{"a", 500}, {"b", 500}}, 1, 1);
    fresh.fresh = true;
    j.p.on_view(21 * ms, fresh);
    CHECK(j.p.applied_bps() == 500);
    CHECK(j.p.raise_until_ns() == 15 * ms + Timing{}.safe_span_ns());
}

TEST_CASE("protocol: the proposer writes an epoch when all acknowledged and rates move by 1 % of "
          "the budget or 1/32 of themselves",
          "[cluster]") {
    Joined j; // a is the lowest live name: the proposer
    size_t before = j.fx.allocs.size();
    // b's demand drops to 50: epoch 2 should give a 900, b its floor 100.
    View v = group(20, 1, {{"a", 500}, {"b", 500}}, 1, 1);
    v.live["b"].demand_bps = 50;
    j.p.on_view(5 * ms, v);
    REQUIRE(j.fx.allocs.size() == before + 1);
    CHECK(j.fx.allocs.back().second == v.alloc_rev);
    CHECK(j.fx.allocs.back().first.epoch == 2);
    CHECK(j.fx.allocs.back().first.rate_bps == std::map<HostId, uint64_t>{{"a", 900}, {"b", 100}});
    // Not again for the same allocation before the retry time.
    v.revision = 21;
    j.p.on_view(6 * ms, v);
    CHECK(j.fx.allocs.size() == before + 1);
    // Epoch 2 written, b not yet acknowledged: no epoch 3, whatever the demand.
    View w = group(23, 2, {{"a", 900}, {"b", 100}}, 2, 1);
    w.live["b"].demand_bps = 2000;
    j.p.on_view(7 * ms, w);
    CHECK(j.fx.allocs.size() == before + 1);
    // A change within the hysteresis (1% of the budget) is not worth an epoch.
    w = group(25, 2, {{"a", 500}, {"b", 500}}, 2, 2);
    w.live["a"].demand_bps = 495;
    w.live["b"].demand_bps = 505;
    j.p.on_view(2 * s, w);
    CHECK(j.fx.allocs.size() == before + 1);
    // A small member's rate moving by more than 1/32 of itself is, however
    // small against the budget (6 of 1000, to 106).
    w = group(27, 2, {{"a", 900}, {"b", 100}}, 2, 2);
    w.live["b"].demand_bps = 106;
    j.p.on_view(2 * s + 1 * ms, w);
    REQUIRE(j.fx.allocs.size() == before + 2);
    CHECK(j.fx.allocs.back().first.rate_bps == std::map<HostId, uint64_t>{{"a", 894}, {"b", 106}});
}

TEST_CASE("protocol: demand is written when it moves by 1/32, at once while the bucket has a "
          "token",
          "[cluster]") {
    Joined j; // its record in the view says demand 2000
    Timing t;
    REQUIRE(t.demand_step == 32);
    size_t puts = j.fx.puts.size();
    j.p.on_demand(1 * s, 2060); // +3 %: not worth a write
    CHECK(j.fx.puts.size() == puts);
    j.p.on_demand(1 * s, 2100); // +5 %: at once (the bucket starts full)
    REQUIRE(j.fx.puts.size() == puts + 1);
    CHECK(j.fx.puts.back().demand_bps == 2100);
    // Three more moves use the rest of the burst, at once too.
    j.p.on_demand(1 * s + 1 * ms, 5000);
    j.p.on_demand(1 * s + 2 * ms, 10000);
    j.p.on_demand(1 * s + 3 * ms, 15000);
    REQUIRE(j.fx.puts.size() == puts + 4);
    CHECK(j.fx.puts.back().demand_bps == 15000);
    REQUIRE(t.demand_burst == 4);
    // The bucket is empty: the next waits for a token (one per
    // demand_token_ns, counted from the first write's time).
    j.p.on_demand(1 * s + 4 * ms, 20000);
    CHECK(j.fx.puts.size() == puts + 4);
    REQUIRE(t.demand_token_ns == 2 * s);
    j.p.on_lease_renewed(2 * s, 7, 2 * s); // (the lease's deadline is a wake too)
    CHECK(j.fx.wake_ns == 1 * s + t.demand_token_ns);
    j.p.on_timer(1 * s + t.demand_token_ns - 1 * ms);
    CHECK(j.fx.puts.size() == puts + 4);
    j.p.on_timer(1 * s + t.demand_token_ns);
    REQUIRE(j.fx.puts.size() == puts + 5);
    CHECK(j.fx.puts.back().demand_bps == 20000);
}

TEST_CASE("protocol: leave goes to 0, then out of the roster", "[cluster]") {
    Joined j;
    j.p.leave(5 * ms);
    CHECK(j.p.applied_bps() == 0);
    CHECK(j.fx.revoked == std::vector<uint64_t>{7});
    REQUIRE_FALSE(j.fx.rosters.empty());
    CHECK(j.fx.rosters.back().first.members.count("a") == 0);
    View v = group(30, 1, {{"a", 500}, {"b", 500}}, 1, 1);
    v.roster->members.erase("a");
    v.live.erase("a");
    j.p.on_view(6 * ms, v);
    CHECK(j.p.phase() == HostProtocol::Phase::left);
    CHECK(j.p.applied_bps() == 0);
}
