// One host's side of a group (docs/design.md §11.3): a state machine fed with
// the group's keys as etcd shows them (View), lease events and demand
// samples, acting through Effects. It holds the invariant's local half: the
// rate it applies is lowered at once to the newest epoch's, raised only when
// every live member has acknowledged that epoch, and falls to the floor
// before its lease can have expired on the server.
#pragma once

#include "cluster/group.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace pspxdp::cluster {

// What the protocol asks of the world. Store writes are requests: their
// outcome comes back as a later View (or lease event); any may be lost.
class Effects {
  public:
    virtual ~Effects() = default;
    // Returns once the pacer paces the class at rate_bps (0: holds it).
    virtual void apply_rate(uint64_t rate_bps) = 0;
    // Grant a lease (on_lease_granted answers).
    virtual void grant_lease() = 0;
    // Put this host's live record, attached to `lease` (fails on a dead one).
    virtual void put_live(const Live &record) = 0;
    // Write the allocation if its key's mod revision is still expected_rev.
    virtual void cas_alloc(const Allocation &alloc, int64_t expected_rev) = 0;
    virtual void cas_roster(const Roster &roster, int64_t expected_rev) = 0;
    // Revoke the lease, which deletes the live record.
    virtual void revoke_lease(uint64_t lease) = 0;
    // Call on_timer at or after this local time.
    virtual void wake_at(uint64_t local_ns) = 0;
};

struct Timing {
    // The TTL the agent asks etcd for, and the bound it assumes on how far a
    // host's clock rate and the etcd leader's may each differ from real time.
    uint64_t lease_ttl_ns = 3'000'000'000;
    double clock_drift = 1e-3;
    // Taken off the lease's safe span for a late timer and the time a lower
    // rate needs to reach the pacer.
    uint64_t margin_ns = 500'000'000;
    // A member's demand is written again when it moved by more than
    // 1/demand_step (the estimator holds it steady, §11.2), at once if a
    // token is in the bucket: one comes every demand_token_ns, up to
    // demand_burst (a bound on etcd writes that still writes a change
    // promptly; acks are not counted, they follow epochs).
    uint32_t demand_step = 32;
    uint64_t demand_token_ns = 2'000'000'000;
    uint32_t demand_burst = 4;
    // The proposer writes a new epoch when a rate would move by more than
    // 1/hysteresis_of_budget of the budget or by more than 1/rate_step of
    // itself (a small member's share within a few per cent too), or the
    // roster or live set changed.
    uint32_t hysteresis_of_budget = 100;
    uint32_t rate_step = 32;
    // A member's demand seen leaving 0 (a start) makes the proposer wait
    // this long before the next epoch, so hosts that start together (their
    // first demands written within a few ms) get one epoch, not one each
    // with acks between.
    uint64_t start_coalesce_ns = 20'000'000;
    // A member seen new to the roster without a live record yet (a join:
    // its record follows its roster write once it has a lease) makes the
    // proposer wait up to this long for the record, so a join costs one
    // epoch (the member at its share) instead of two (at its floor, then at
    // its share), each with the acks of the members it lowers.
    uint64_t join_coalesce_ns = 100'000'000;
    // A lost store request is asked again after this long.
    uint64_t retry_ns = 500'000'000;
    // R7: an established floor is held without etcd this long (local) past
    // the deadline, then the host goes to 0 (§11.4.1). 0: until the host
    // leaves (floors never released). The group's (Roster::orphan_after_ns).
    uint64_t orphan_after_ns = 0;
    // Tests only: taken off release_after, to show that a release before the
    // orphan time breaks the invariant.
    uint64_t release_early_ns = 0;

    // How long after a keep-alive was *sent* the lease is surely alive on
    // the server: TTL in the leader's time, read through two clocks that
    // may each drift, less the margin.
    uint64_t safe_span_ns() const;
    // R8: a member absent this long (local, since its record's deletion was
    // seen or the keys read afresh) is released: orphan_after through both
    // clocks' drift, plus the margin (§11.4.1).
    uint64_t release_after_ns() const;
};

// The events a host's agent receives; HostProtocol is the real one, the
// tests wrap or replace it to prove the checker catches a broken one.
class Agent {
  public:
    virtual ~Agent() = default;
    virtual void on_view(uint64_t now_ns, const View &view) = 0;
    virtual void on_lease_granted(uint64_t now_ns, uint64_t lease, uint64_t sent_ns) = 0;
    virtual void on_lease_renewed(uint64_t now_ns, uint64_t lease, uint64_t sent_ns) = 0;
    virtual void on_lease_lost(uint64_t now_ns, uint64_t lease) = 0;
    virtual void on_demand(uint64_t now_ns, uint64_t demand_bps) = 0;
    virtual void on_timer(uint64_t now_ns) = 0;
    virtual void leave(uint64_t now_ns) = 0;
    virtual uint64_t lease() const = 0;
};

class HostProtocol final : public Agent {
  public:
    enum class Phase { joining, member, refused, leaving, left };

    HostProtocol(HostId host, Member member, uint64_t budget_bps, Timing timing, Effects &effects);

    void on_view(uint64_t now_ns, const View &view) override;
    void on_lease_granted(uint64_t now_ns, uint64_t lease, uint64_t sent_ns) override;
    void on_lease_renewed(uint64_t now_ns, uint64_t lease, uint64_t sent_ns) override;
    void on_lease_lost(uint64_t now_ns, uint64_t lease) override;
    void on_demand(uint64_t now_ns, uint64_t demand_bps) override;
    void on_timer(uint64_t now_ns) override;
    // Apply 0, take the reservation out of the roster, revoke the lease.
    void leave(uint64_t now_ns) override;
    uint64_t lease() const override { return lease_; }

    // Who this agent is (Live::node, Live::instance): put in its live
    // record; a live record under its name from another instance refuses
    // the join (one name, one member).
    void set_identity(std::string node, std::string instance);
    // The live record could not be put: `there` holds the name under
    // another lease. Another instance: refused (it names the other);
    // this one's (a previous run's lease not yet expired): put again later.
    void on_name_taken(uint64_t now_ns, const Live &there);
    // The agent was not running for a while (stopped, suspended, starved:
    // a gap between its loop's turns longer than the margin, §11.4.2): at
    // the fallback at once, and no raise until a keep-alive sent after
    // now_ns is answered and the keys are read afresh.
    void on_gap(uint64_t now_ns);
    // Until when (local) a raise may be written: the lease's safe span,
    // 0 while a gap is not yet proven over.
    uint64_t raise_until_ns() const { return proven() ? safe_until_ns() : 0; }
    // The group's budget as the roster says (the one asked before a roster
    // is seen): `group budget` changes it live.
    uint64_t budget_bps() const {
        return view_ && view_->roster ? view_->roster->budget_bps : budget_bps_;
    }

    Phase phase() const { return phase_; }
    const std::string &refusal() const { return refusal_; }
    uint64_t applied_bps() const { return applied_bps_; }
    // The newest epoch seen (0: none).
    uint64_t epoch() const { return view_ && view_->alloc ? view_->alloc->epoch : 0; }
    // Whether the floor is this host's to hold without etcd (§11.3).
    bool floor_established() const { return established_; }
    // Whether the lease is surely alive on the server at now_ns.
    bool lease_safe(uint64_t now_ns) const { return lease_ != 0 && now_ns < safe_until_ns_; }
    // Until when (local time) the lease is surely alive: the deadline the
    // agent's watchdog enforces if the agent itself stops (§11.4). 0: none.
    uint64_t safe_until_ns() const { return lease_ != 0 ? safe_until_ns_ : 0; }
    // What this host may hold without etcd: the floor if established, else 0.
    uint64_t fallback_bps() const { return established_ ? member_.floor_bps : 0; }
    // R7: when (local) the established floor goes (to 0) if no raise comes
    // first: the orphan timer if armed, else the deadline + orphan_after.
    // UINT64_MAX: never (nothing established, or no release configured).
    uint64_t orphan_at_ns() const;
    // Members this host takes as released now (R8), for tests and `status`.
    std::set<HostId> released(uint64_t now_ns) const;
    // Something else (the watchdog) lowered the applied rate: only ever
    // lower, so the invariant still holds; a later raise follows R3 as usual.
    void on_rate_lowered(uint64_t now_ns, uint64_t rate_bps);

  private:
    void step(uint64_t now_ns);
    void join(uint64_t now_ns);
    void apply(uint64_t rate_bps);
    // Before the roster can hold this host: the class at 0 (held).
    void hold();
    bool proven() const { return !gap_ || (gap_lease_proven_ && gap_view_proven_); }
    bool all_acked() const;
    bool proposer() const;
    void propose(uint64_t now_ns);

    HostId host_;
    Member member_;
    uint64_t budget_bps_;
    Timing timing_;
    Effects &effects_;
    Phase phase_ = Phase::joining;
    std::string refusal_;
    std::unique_ptr<View> view_;
    uint64_t applied_bps_ = 0;
    // The class is the group's (held at 0 or more) from the join on;
    // before, the protocol has not touched it.
    bool held_ = false;
    std::string node_, instance_;
    // A gap (on_gap) not yet proven over: since when, and what proved.
    bool gap_ = false;
    uint64_t gap_ns_ = 0;
    bool gap_lease_proven_ = false, gap_view_proven_ = false;
    bool established_ = false;
    uint64_t lease_ = 0;
    uint64_t safe_until_ns_ = 0;
    // The last deadline, kept when the lease is lost (R7 counts from it).
    uint64_t deadline_ns_ = 0;
    uint64_t orphan_at_ns_ = 0; // 0: not armed
    // R8: roster members without a live record, since when (local) known so.
    std::map<HostId, uint64_t> absent_since_;
    // Starts: each live member's demand as last seen, and until when the
    // proposer waits for the others starting with one (0: not waiting).
    std::map<HostId, uint64_t> seen_demand_;
    uint64_t coalesce_until_ns_ = 0;
    // Joins: the roster's members as last seen, and the members new to it
    // whose live record the proposer waits for, until when.
    std::set<HostId> seen_members_;
    std::map<HostId, uint64_t> joining_until_ns_;
    // Until when the proposer waits for either (0 or past: it does not).
    uint64_t waiting_until_ns() const;
    bool lease_asked_ = false;
    uint64_t lease_asked_ns_ = 0;
    // The live record last put: under which lease, acknowledging what.
    uint64_t put_lease_ = 0;
    uint64_t put_ack_ = 0;
    uint64_t put_demand_bps_ = 0;
    uint64_t put_ns_ = 0;
    uint64_t demand_bps_ = 0;
    // The demand writes' token bucket: credit (ns of tokens, at most
    // demand_burst of them) as of bucket_ns_; starts full.
    uint64_t credit_ns_ = UINT64_MAX;
    uint64_t bucket_ns_ = 0;
    // The last epoch proposed and the last roster change asked (join or
    // leave): on which mod revision, when; asked again only after retry_ns.
    int64_t proposed_rev_ = -1;
    uint64_t proposed_ns_ = 0;
    int64_t roster_cas_rev_ = -1;
    uint64_t roster_cas_ns_ = 0;
};

} // namespace pspxdp::cluster
