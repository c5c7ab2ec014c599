// docs/design.md §11.3.
#include "cluster/protocol.hpp"

#include "cluster/allocator.hpp"

#include <algorithm>

namespace pspxdp::cluster {

uint64_t Timing::safe_span_ns() const {
    // The leader expires the lease no earlier than TTL of its own time after
    // it received the keep-alive, which is after it was sent; a local span D
    // lasts at most D / (1 - drift) of real time.
    double span = double(lease_ttl_ns) * (1.0 - clock_drift) / (1.0 + clock_drift);
    return span > double(margin_ns) ? uint64_t(span) - margin_ns : 0;
}

uint64_t Timing::release_after_ns() const {
    // A host's orphan_after of its clock is at most orphan_after / (1 - drift)
    // of real time; release_after of another's at least release_after /
    // (1 + drift) (§11.4.1).
    uint64_t span = uint64_t(double(orphan_after_ns) * (1.0 + clock_drift) / (1.0 - clock_drift)) +
                    1 + margin_ns;
    return span > release_early_ns ? span - release_early_ns : 0;
}

HostProtocol::HostProtocol(HostId host, Member member, uint64_t budget_bps, Timing timing,
                           Effects &effects)
    : host_(std::move(host)), member_(member), budget_bps_(budget_bps), timing_(timing),
      effects_(effects) {}

void HostProtocol::set_identity(std::string node, std::string instance) {
    node_ = std::move(node);
    instance_ = std::move(instance);
}

void HostProtocol::on_name_taken(uint64_t now_ns, const Live &there) {
    if (there.instance != instance_) {
        phase_ = Phase::refused;
        refusal_ = "host name " + host_ + " is in use in the group by a live member on " +
                   (there.node.empty() ? std::string("another host") : there.node) + " (lease " +
                   std::to_string(there.lease) + "): give this host its own --name";
        return;
    }
    // Our own earlier record: put again once its lease has gone.
    put_lease_ = 0;
    step(now_ns);
}

void HostProtocol::on_gap(uint64_t now_ns) {
    gap_ = true;
    gap_ns_ = now_ns;
    gap_lease_proven_ = gap_view_proven_ = false;
    step(now_ns);
}

void HostProtocol::on_view(uint64_t now_ns, const View &view) {
    // A fresh read made after a gap proves the keys are current (a watch
    // stream may have sat on a dead connection through it).
    if (gap_ && view.fresh) gap_view_proven_ = true;
    // Watches deliver revisions in order, but a re-read after a reconnect may
    // race one: never step back.
    if (view_ && view.revision <= view_->revision) {
        if (gap_) step(now_ns);
        return;
    }
    view_ = std::make_unique<View>(view);
    // R8: since when each absent member is known absent. Never earlier than
    // its record's deletion: a deletion is seen as an event, or it falls
    // before a fresh read (or before this host's first view), which counts
    // from now.
    if (view_->roster) {
        const auto &members = view_->roster->members;
        std::erase_if(absent_since_, [&](const auto &kv) {
            return !members.count(kv.first) || view_->live.count(kv.first);
        });
        for (const auto &[host, member] : members) {
            if (host == host_ || view_->live.count(host)) continue;
            auto [it, added] = absent_since_.try_emplace(host, now_ns);
            if (!added && (view_->fresh || view_->live_deleted.count(host))) it->second = now_ns;
        }
    }
    // A member's demand leaving 0: a start; others may be starting with it.
    std::map<HostId, uint64_t> seen;
    for (const auto &[host, rec] : view_->live) {
        auto was = seen_demand_.find(host);
        if (rec.demand_bps != 0 && was != seen_demand_.end() && was->second == 0 &&
            coalesce_until_ns_ <= now_ns)
            coalesce_until_ns_ = now_ns + timing_.start_coalesce_ns;
        seen[host] = rec.demand_bps;
    }
    seen_demand_ = std::move(seen);
    // A member new to the roster, not live yet: a join whose record is on
    // its way. The proposer waits for it (bounded), not once it shows.
    if (view_->roster) {
        std::set<HostId> members;
        for (const auto &[host, member] : view_->roster->members) {
            members.insert(host);
            if (host != host_ && !seen_members_.empty() && !seen_members_.count(host) &&
                !view_->live.count(host))
                joining_until_ns_[host] = now_ns + timing_.join_coalesce_ns;
        }
        std::erase_if(joining_until_ns_, [&](const auto &kv) {
            return !members.count(kv.first) || view_->live.count(kv.first) || kv.second <= now_ns;
        });
        seen_members_ = std::move(members);
    }
    step(now_ns);
}

void HostProtocol::on_lease_granted(uint64_t now_ns, uint64_t lease, uint64_t sent_ns) {
    lease_asked_ = false;
    // A second grant (a retried request answered twice) is not taken: our
    // rate may rest on the record under the current lease, which the
    // current lease's deadline, not the new one's, protects (§11.4 Lemma 1).
    if (lease_ != 0 || phase_ == Phase::refused || phase_ == Phase::leaving ||
        phase_ == Phase::left) {
        effects_.revoke_lease(lease);
        return;
    }
    lease_ = lease;
    if (gap_ && sent_ns >= gap_ns_) gap_lease_proven_ = true;
    safe_until_ns_ = sent_ns + timing_.safe_span_ns();
    deadline_ns_ = safe_until_ns_;
    step(now_ns);
}

void HostProtocol::on_lease_renewed(uint64_t now_ns, uint64_t lease, uint64_t sent_ns) {
    if (lease != lease_) return;
    if (gap_ && sent_ns >= gap_ns_) gap_lease_proven_ = true;
    safe_until_ns_ = std::max(safe_until_ns_, sent_ns + timing_.safe_span_ns());
    deadline_ns_ = safe_until_ns_;
    step(now_ns);
}

void HostProtocol::on_lease_lost(uint64_t now_ns, uint64_t lease) {
    if (lease != lease_) return;
    lease_ = 0;
    safe_until_ns_ = 0;
    step(now_ns);
}

void HostProtocol::on_demand(uint64_t now_ns, uint64_t demand_bps) {
    demand_bps_ = demand_bps;
    step(now_ns);
}

void HostProtocol::on_timer(uint64_t now_ns) { step(now_ns); }

uint64_t HostProtocol::orphan_at_ns() const {
    if (!established_ || timing_.orphan_after_ns == 0) return UINT64_MAX;
    if (orphan_at_ns_ != 0) return orphan_at_ns_;
    return deadline_ns_ + timing_.orphan_after_ns;
}

std::set<HostId> HostProtocol::released(uint64_t now_ns) const {
    std::set<HostId> out;
    if (timing_.orphan_after_ns == 0) return out;
    for (const auto &[host, since] : absent_since_)
        if (now_ns - since >= timing_.release_after_ns()) out.insert(host);
    return out;
}

void HostProtocol::on_rate_lowered(uint64_t now_ns, uint64_t rate_bps) {
    applied_bps_ = std::min(applied_bps_, rate_bps);
    step(now_ns);
}

void HostProtocol::leave(uint64_t now_ns) {
    if (phase_ == Phase::left || phase_ == Phase::leaving) return;
    // At 0 first: once the reservation is gone no epoch holds a floor for us.
    if (held_) apply(0);
    established_ = false;
    phase_ = Phase::leaving;
    if (lease_ != 0) effects_.revoke_lease(lease_);
    lease_ = 0;
    safe_until_ns_ = 0;
    roster_cas_rev_ = -1;
    step(now_ns);
}

void HostProtocol::apply(uint64_t rate_bps) {
    if (held_ && rate_bps == applied_bps_) return;
    effects_.apply_rate(rate_bps);
    applied_bps_ = rate_bps;
    held_ = true;
}

void HostProtocol::hold() {
    if (!held_) apply(0);
}

bool HostProtocol::all_acked() const {
    // Our own record must be in the view, under our lease: a raise decided
    // on a view that does not show us could race an epoch computed without
    // us (§11.4, case c of the proof).
    auto own = view_->live.find(host_);
    if (own == view_->live.end() || own->second.lease != lease_) return false;
    return all_acknowledged(*view_);
}

bool HostProtocol::proposer() const {
    // The live member with the lowest name writes epochs; the compare-and-
    // swap on the allocation key, not this choice, keeps them in sequence.
    return !view_->live.empty() && view_->live.begin()->first == host_ &&
           view_->live.begin()->second.lease == lease_;
}

namespace {

bool material(const Allocation &next, const Allocation &now, uint64_t step_bps,
              uint32_t rate_step) {
    if (next.rate_bps.size() != now.rate_bps.size()) return true;
    for (auto a = next.rate_bps.begin(), b = now.rate_bps.begin(); a != next.rate_bps.end();
         ++a, ++b) {
        if (a->first != b->first) return true;
        uint64_t diff = a->second > b->second ? a->second - b->second : b->second - a->second;
        // A floor released (or given back) is news however small.
        if (diff > step_bps || diff * rate_step > std::max(a->second, b->second) ||
            (a->second == 0) != (b->second == 0))
            return true;
    }
    return false;
}

} // namespace

uint64_t HostProtocol::waiting_until_ns() const {
    uint64_t until = coalesce_until_ns_;
    for (const auto &[host, joining] : joining_until_ns_) until = std::max(until, joining);
    return until;
}

void HostProtocol::propose(uint64_t now_ns) {
    if (!view_->roster) return;
    if (now_ns < waiting_until_ns()) return; // starts or a join's record on their way
    uint64_t n = epoch();
    // One epoch in flight: the next waits for every live member's ack.
    if (view_->alloc && !all_acked()) return;
    Allocation next = allocate(*view_->roster, view_->live, n + 1, released(now_ns));
    // R2: a member whose rate does not fall needs no new ack; its old one
    // (from the epoch its rate last fell on) shows it at most at the new
    // rate too. A member new to the epoch, or lowered, acknowledges n + 1.
    for (const auto &[host, rate] : next.rate_bps) {
        bool kept =
            view_->alloc && view_->alloc->rate_bps.count(host) && rate >= view_->alloc->of(host);
        next.ack_from[host] = kept ? view_->alloc->ack_needed(host) : n + 1;
    }
    if (view_->alloc &&
        !material(next, *view_->alloc, view_->roster->budget_bps / timing_.hysteresis_of_budget,
                  timing_.rate_step))
        return;
    if (proposed_rev_ == view_->alloc_rev && now_ns - proposed_ns_ < timing_.retry_ns) return;
    proposed_rev_ = view_->alloc_rev;
    proposed_ns_ = now_ns;
    effects_.cas_alloc(next, view_->alloc_rev);
}

void HostProtocol::join(uint64_t now_ns) {
    bool asked_here = roster_cas_rev_ == view_->roster_rev;
    if (asked_here && now_ns - roster_cas_ns_ < timing_.retry_ns) return;
    Roster next;
    if (!view_->roster || view_->roster->members.empty()) {
        // The first member, or the first after all left, sets the budget
        // and how long floors outlive leases.
        next.budget_bps = budget_bps_;
        next.orphan_after_ns = timing_.orphan_after_ns;
    } else {
        next = *view_->roster;
        if (next.orphan_after_ns != timing_.orphan_after_ns) {
            // Our orphan timer and the others' releases must use one span.
            phase_ = Phase::refused;
            refusal_ = "group releases a dead member's floor after " +
                       std::to_string(next.orphan_after_ns / 1'000'000) + " ms, not " +
                       std::to_string(timing_.orphan_after_ns / 1'000'000) +
                       " ms: join with the group's --orphan-after";
            return;
        }
        // One name, one member: a live record under our name is another
        // host's (refused), or this instance's from a run whose lease has
        // not expired yet (wait for it to go).
        if (auto there = view_->live.find(host_);
            there != view_->live.end() && (lease_ == 0 || there->second.lease != lease_)) {
            if (there->second.instance != instance_) return on_name_taken(now_ns, there->second);
            effects_.wake_at(now_ns + timing_.retry_ns);
            return;
        }
        auto it = next.members.find(host_);
        if (it != next.members.end() && it->second == member_) {
            hold();
            phase_ = Phase::member;
            return;
        }
        if (it != next.members.end()) {
            // Raising a floor in place would break "the floor is reserved in
            // every epoch since it was established".
            phase_ = Phase::refused;
            refusal_ =
                "host " + host_ + " is a member with another floor, weight or class: leave first";
            return;
        }
        if (auto ok = check_join(next, budget_bps_, host_, member_); !ok) {
            phase_ = Phase::refused;
            refusal_ = ok.error();
            return;
        }
    }
    // At 0 before the roster can hold us: the epochs until one counts us
    // give us nothing. Nothing before this point has changed anything.
    hold();
    next.members[host_] = member_;
    roster_cas_rev_ = view_->roster_rev;
    roster_cas_ns_ = now_ns;
    effects_.cas_roster(next, view_->roster_rev);
}

void HostProtocol::step(uint64_t now_ns) {
    if (phase_ == Phase::refused || phase_ == Phase::left) return;
    if (phase_ == Phase::leaving) {
        if (!view_ || !view_->roster || !view_->roster->members.count(host_)) {
            phase_ = Phase::left;
            return;
        }
        if (roster_cas_rev_ != view_->roster_rev || now_ns - roster_cas_ns_ >= timing_.retry_ns) {
            Roster next = *view_->roster;
            next.members.erase(host_);
            roster_cas_rev_ = view_->roster_rev;
            roster_cas_ns_ = now_ns;
            effects_.cas_roster(next, view_->roster_rev);
        }
        effects_.wake_at(roster_cas_ns_ + timing_.retry_ns);
        return;
    }
    if (phase_ == Phase::joining && view_) join(now_ns);
    if (phase_ == Phase::refused) return;
    uint64_t wake_ns = UINT64_MAX;
    // A lease once a member (a join refused has asked etcd for nothing).
    if (phase_ == Phase::member && lease_ == 0 &&
        (!lease_asked_ || now_ns - lease_asked_ns_ >= timing_.retry_ns)) {
        lease_asked_ = true;
        lease_asked_ns_ = now_ns;
        effects_.grant_lease();
    }
    if (phase_ == Phase::member && lease_ == 0) wake_ns = lease_asked_ns_ + timing_.retry_ns;

    // The most this host may hold now. Without a safe lease: the floor, if
    // an acknowledged epoch ever held it for us, else nothing.
    if (gap_ && proven()) gap_ = false;
    // After a gap, not safe until proven again (on_gap): the rate falls to
    // the fallback here and rises only once both proofs are in.
    bool safe = lease_safe(now_ns) && proven();
    // R7: without a safe lease the established floor lasts orphan_after
    // past the deadline (or the loss, if that came first), then goes: the
    // others may take it once this host's record has been gone
    // release_after (§11.4.1). Only a raise re-arms it.
    if (established_ && timing_.orphan_after_ns != 0) {
        if (!safe && orphan_at_ns_ == 0)
            orphan_at_ns_ = std::min(deadline_ns_, now_ns) + timing_.orphan_after_ns;
        if (orphan_at_ns_ != 0 && now_ns >= orphan_at_ns_) {
            established_ = false;
            orphan_at_ns_ = 0;
        }
    }
    uint64_t fallback_bps = established_ ? member_.floor_bps : 0;
    uint64_t cap_bps = fallback_bps;
    if (safe && view_ && view_->alloc) cap_bps = view_->alloc->of(host_);
    if (held_ && applied_bps_ > cap_bps) apply(cap_bps); // lower at once

    if (phase_ == Phase::member && safe && view_) {
        uint64_t n = epoch();
        // The ack the others need of us (R2): n if our rate fell in it (or
        // we are new to it), else the one from when it last fell.
        uint64_t need = view_->alloc ? view_->alloc->ack_needed(host_) : 0;
        auto own = view_->live.find(host_);
        bool own_current = own != view_->live.end() && own->second.lease == lease_ &&
                           own->second.ack_epoch >= need;
        // Against the last write, or once it should have shown, against what
        // etcd shows, so a lost write is made again.
        bool settled = own_current && now_ns - put_ns_ >= timing_.retry_ns;
        uint64_t shown_bps = settled ? own->second.demand_bps : put_demand_bps_;
        uint64_t moved_bps =
            demand_bps_ > shown_bps ? demand_bps_ - shown_bps : shown_bps - demand_bps_;
        bool demand_moved =
            moved_bps * timing_.demand_step > shown_bps || (demand_bps_ == 0) != (shown_bps == 0);
        // The bucket: credit accrues with time, up to demand_burst tokens.
        uint64_t cap_ns = timing_.demand_token_ns * timing_.demand_burst;
        if (credit_ns_ == UINT64_MAX || now_ns < bucket_ns_)
            credit_ns_ = cap_ns;
        else
            credit_ns_ = std::min(cap_ns, credit_ns_ + (now_ns - bucket_ns_));
        bucket_ns_ = now_ns;
        bool demand_due = demand_moved && credit_ns_ >= timing_.demand_token_ns;
        bool lost = !own_current && put_lease_ == lease_ && put_ack_ >= need &&
                    now_ns - put_ns_ >= timing_.retry_ns;
        if (put_lease_ != lease_ || put_ack_ < need || demand_due || lost) {
            // A write for the demand alone takes a token; an ack (or a
            // first or lost write) carries the demand free.
            if (put_lease_ == lease_ && put_ack_ >= need && !lost)
                credit_ns_ -= timing_.demand_token_ns;
            // Acknowledges n: the rate applied is already at most epoch n's.
            put_lease_ = lease_;
            put_ack_ = n;
            put_demand_bps_ = demand_bps_;
            put_ns_ = now_ns;
            effects_.put_live(Live{lease_, n, demand_bps_, node_, instance_});
        } else if (demand_moved) {
            wake_ns = std::min(wake_ns, now_ns + (timing_.demand_token_ns - credit_ns_));
        }
        if (!own_current) wake_ns = std::min(wake_ns, put_ns_ + timing_.retry_ns);
        if (view_->alloc && applied_bps_ < cap_bps && all_acked()) {
            apply(cap_bps);
            if (view_->alloc->rate_bps.count(host_) && cap_bps >= member_.floor_bps) {
                established_ = true;
                orphan_at_ns_ = 0;
            }
        }
        if (proposer()) {
            propose(now_ns);
            if (uint64_t until = waiting_until_ns(); now_ns < until)
                wake_ns = std::min(wake_ns, until);
            if (proposed_rev_ == view_->alloc_rev)
                wake_ns = std::min(wake_ns, proposed_ns_ + timing_.retry_ns);
            // A release falling due is a change to propose.
            if (timing_.orphan_after_ns != 0)
                for (const auto &[host, since] : absent_since_)
                    if (since + timing_.release_after_ns() > now_ns)
                        wake_ns = std::min(wake_ns, since + timing_.release_after_ns());
        }
    }
    if (phase_ == Phase::joining) wake_ns = std::min(wake_ns, roster_cas_ns_ + timing_.retry_ns);
    if (safe) wake_ns = std::min(wake_ns, safe_until_ns_);
    if (orphan_at_ns_ != 0) wake_ns = std::min(wake_ns, orphan_at_ns_);
    // A retry that is already due waits for the next event, not a timer
    // that would fire now again.
    if (wake_ns != UINT64_MAX && wake_ns > now_ns) effects_.wake_at(wake_ns);
}

} // namespace pspxdp::cluster
