// docs/design.md §11.5.
#include "cluster/simulation.hpp"

#include "cluster/demand.hpp"

#include <algorithm>
#include <queue>
#include <random>

namespace pspxdp::cluster {

std::unique_ptr<Agent> make_host_protocol(const SimHost &host, uint64_t budget_bps,
                                          const Timing &timing, Effects &effects) {
    return std::make_unique<HostProtocol>(host.name, host.member, budget_bps, timing, effects);
}

namespace {

class Sim;

// One host: its agent, its clock, its pacer (the applied-rate log) and its
// connection to etcd.
struct Host final : Effects {
    Sim &sim;
    size_t index;
    SimHost spec;
    std::unique_ptr<Agent> agent;
    bool up = false;
    bool partitioned = false;
    uint64_t incarnation = 0; // a crash drops what was on its way to the old one
    uint64_t timer_seq = 0;
    uint64_t to_store_ns = 0; // FIFO: the last delivery time each way
    uint64_t from_store_ns = 0;
    uint64_t rate_bps = 0;
    uint64_t demand_bps = 0;
    uint64_t want_bps = 0;
    Estimator estimator;

    Host(Sim &s, size_t i, SimHost h) : sim(s), index(i), spec(std::move(h)) {}

    void apply_rate(uint64_t rate) override;
    void grant_lease() override;
    void put_live(const Live &record) override;
    void cas_alloc(const Allocation &alloc, int64_t expected_rev) override;
    void cas_roster(const Roster &roster, int64_t expected_rev) override;
    void revoke_lease(uint64_t lease) override;
    void wake_at(uint64_t local_ns) override;
};

struct Lease {
    size_t host;
    uint64_t expiry_ns;
};

class Sim {
  public:
    Sim(const SimConfig &config, const AgentFactory &factory)
        : config_(config), factory_(factory), rng_(config.seed) {
        estimator_ = config.estimator ? config.estimator : [](uint64_t budget) -> Estimator {
            auto est = std::make_shared<DemandEstimator>();
            return [est, budget](uint64_t now, const DemandWindow &w) {
                return est->sample(now, w, budget);
            };
        };
        for (size_t i = 0; i < config.hosts.size(); ++i)
            hosts_.push_back(std::make_unique<Host>(*this, i, config.hosts[i]));
        result_.logs.resize(hosts_.size());
    }

    SimResult run();

    uint64_t now() const { return now_ns_; }
    uint64_t local(const Host &h) const {
        return h.spec.clock_offset_ns + uint64_t(double(now_ns_) * h.spec.clock_rate);
    }
    uint64_t real_of(const Host &h, uint64_t local_ns) const {
        if (local_ns <= h.spec.clock_offset_ns) return 0;
        // Rounded up: a timer never fires before its local time.
        return uint64_t(double(local_ns - h.spec.clock_offset_ns) / h.spec.clock_rate) + 1;
    }
    void at(uint64_t time_ns, std::function<void()> fn) {
        queue_.push(Event{std::max(time_ns, now_ns_), seq_++, std::move(fn)});
    }
    uint64_t delay() {
        return std::uniform_int_distribution<uint64_t>(config_.min_delay_ns,
                                                       config_.max_delay_ns)(rng_);
    }
    uint64_t late() {
        return std::uniform_int_distribution<uint64_t>(0, config_.max_timer_late_ns)(rng_);
    }

    void log(Host &h, uint64_t rate_bps) {
        h.rate_bps = rate_bps;
        result_.logs[h.index].push_back({now_ns_, rate_bps});
    }

    // Host -> etcd: lost when either end is cut off at sending or arrival.
    void to_store(Host &h, std::function<void()> fn) {
        if (!h.up || h.partitioned) return;
        h.to_store_ns = std::max(h.to_store_ns, now_ns_ + delay());
        at(h.to_store_ns, [this, &h, fn = std::move(fn)] {
            if (!store_down_ && !h.partitioned) fn();
        });
    }
    // etcd -> host: lost as above, or when the host crashed meanwhile.
    void to_host(Host &h, std::function<void()> fn) {
        if (store_down_ || h.partitioned || !h.up) return;
        h.from_store_ns = std::max(h.from_store_ns, now_ns_ + delay());
        at(h.from_store_ns, [this, &h, inc = h.incarnation, fn = std::move(fn)] {
            if (h.up && !h.partitioned && h.incarnation == inc) fn();
        });
    }

    // The store.
    void changed(WriteKind kind) {
        ++state_.revision;
        ++result_.store_writes;
        result_.write_ns.push_back(now_ns_);
        result_.write_kind.push_back(kind);
        view_ = nullptr;
        for (auto &h : hosts_) send_view(*h);
    }
    void send_view(Host &h) {
        if (!view_) view_ = std::make_shared<const View>(state_);
        to_host(h, [this, &h, v = view_] { h.agent->on_view(local(h), *v); });
    }
    // A watch that reconnects reads the keys afresh: the views it missed
    // (deletions among them) are not seen one by one (R8).
    void send_fresh_view(Host &h) {
        auto v = std::make_shared<View>(state_);
        v->fresh = true;
        to_host(h, [this, &h, v] { h.agent->on_view(local(h), *v); });
    }
    void grant(Host &h, uint64_t sent) {
        uint64_t id = next_lease_++;
        leases_[id] = {h.index, now_ns_ + config_.timing.lease_ttl_ns};
        watch_expiry(id);
        to_host(h, [this, &h, id, sent] { h.agent->on_lease_granted(local(h), id, sent); });
    }
    void keepalive(Host &h, uint64_t lease, uint64_t sent_local) {
        auto it = leases_.find(lease);
        if (it == leases_.end()) {
            to_host(h, [this, &h, lease] { h.agent->on_lease_lost(local(h), lease); });
            return;
        }
        it->second.expiry_ns = now_ns_ + config_.timing.lease_ttl_ns;
        watch_expiry(lease);
        to_host(h, [this, &h, lease, sent_local] {
            h.agent->on_lease_renewed(local(h), lease, sent_local);
        });
    }
    void put_live(Host &h, const Live &record) {
        if (!leases_.count(record.lease)) return; // etcd: "requested lease not found"
        auto was = state_.live.find(h.spec.name);
        WriteKind kind = WriteKind::join;
        if (was != state_.live.end() && was->second.lease == record.lease) {
            bool ack = was->second.ack_epoch != record.ack_epoch;
            bool demand = was->second.demand_bps != record.demand_bps;
            kind = ack && demand ? WriteKind::demand_ack
                   : ack         ? WriteKind::ack
                   : demand      ? WriteKind::demand
                                 : WriteKind::other;
        }
        state_.live[h.spec.name] = record;
        changed(kind);
    }
    void cas_alloc(const Allocation &a, int64_t expected) {
        if (state_.alloc_rev != expected) return;
        state_.alloc = a;
        state_.alloc_rev = state_.revision + 1;
        changed(WriteKind::epoch);
    }
    void cas_roster(const Roster &r, int64_t expected) {
        if (state_.roster_rev != expected) return;
        state_.roster = r;
        state_.roster_rev = state_.revision + 1;
        changed(WriteKind::join);
    }
    void drop_lease(uint64_t lease) {
        leases_.erase(lease);
        std::erase_if(state_.live, [&](const auto &kv) { return kv.second.lease == lease; });
        changed(WriteKind::other);
    }
    void watch_expiry(uint64_t lease) {
        at(leases_[lease].expiry_ns, [this, lease] {
            auto it = leases_.find(lease);
            if (store_down_ || it == leases_.end() || it->second.expiry_ns > now_ns_) return;
            result_.expiries.push_back({now_ns_, hosts_[it->second.host]->spec.name});
            drop_lease(lease);
        });
    }

    // The host's side of the connection.
    void start(Host &h) {
        h.up = true;
        ++h.incarnation;
        h.agent = factory_(h.spec, config_.budget_bps, config_.timing, h);
        to_store(h, [this, &h] { send_view(h); }); // the watch's first range
        h.agent->on_demand(local(h), h.demand_bps);
        keepalive_loop(h, h.incarnation);
        if (!config_.offers.empty()) {
            h.estimator = estimator_(config_.budget_bps);
            measure_loop(h, h.incarnation);
        }
    }
    // The agent's demand sample: the class's arrival over the window.
    void measure_loop(Host &h, uint64_t inc) {
        if (!h.up || h.incarnation != inc) return;
        bool quiet = std::uniform_int_distribution<uint32_t>(0, 99)(rng_) < config_.quiet_percent;
        uint64_t arrival = std::min(h.want_bps, h.rate_bps);
        bool limited = h.want_bps > h.rate_bps;
        if (quiet) {
            arrival = arrival * 3 / 10;
            limited = false;
        }
        uint64_t now = local(h);
        // What it takes goes out: its offer is what is delivered.
        h.agent->on_demand(now, h.estimator(now, {arrival, arrival, h.rate_bps, limited}));
        at(now_ns_ + config_.demand_window_ns, [this, &h, inc] { measure_loop(h, inc); });
    }
    void keepalive_loop(Host &h, uint64_t inc) {
        if (!h.up || h.incarnation != inc) return;
        if (uint64_t lease = h.agent->lease()) {
            uint64_t sent = local(h);
            to_store(h, [this, &h, lease, sent] { keepalive(h, lease, sent); });
        }
        at(now_ns_ + config_.keepalive_every_ns, [this, &h, inc] { keepalive_loop(h, inc); });
    }
    void crash(Host &h) {
        h.up = false;
        ++h.incarnation;
        h.agent.reset();
        if (h.rate_bps != 0) log(h, 0); // the host is gone, and its traffic with it
    }
    void timer(Host &h, uint64_t local_ns) {
        uint64_t seq = ++h.timer_seq;
        at(real_of(h, local_ns) + late(), [this, &h, seq, inc = h.incarnation] {
            if (h.up && h.incarnation == inc && h.timer_seq == seq) h.agent->on_timer(local(h));
        });
    }

  private:
    struct Event {
        uint64_t time_ns;
        uint64_t seq;
        std::function<void()> fn;
        bool operator>(const Event &o) const {
            return time_ns != o.time_ns ? time_ns > o.time_ns : seq > o.seq;
        }
    };

    const SimConfig &config_;
    const AgentFactory &factory_;
    EstimatorFactory estimator_;
    std::mt19937_64 rng_;
    std::vector<std::unique_ptr<Host>> hosts_;
    std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
    uint64_t now_ns_ = 0;
    uint64_t seq_ = 0;
    SimResult result_;

    View state_; // etcd's keys, the view a watch sends
    std::map<uint64_t, Lease> leases_;
    uint64_t next_lease_ = 1;
    bool store_down_ = false;
    std::shared_ptr<const View> view_;

    friend struct Host;
};

void Host::apply_rate(uint64_t rate) { sim.log(*this, rate); }
void Host::grant_lease() {
    sim.to_store(*this, [this, sent = sim.local(*this)] { sim.grant(*this, sent); });
}
void Host::put_live(const Live &record) {
    sim.to_store(*this, [this, record] { sim.put_live(*this, record); });
}
void Host::cas_alloc(const Allocation &alloc, int64_t expected_rev) {
    sim.to_store(*this, [this, alloc, expected_rev] { sim.cas_alloc(alloc, expected_rev); });
}
void Host::cas_roster(const Roster &roster, int64_t expected_rev) {
    sim.to_store(*this, [this, roster, expected_rev] { sim.cas_roster(roster, expected_rev); });
}
void Host::revoke_lease(uint64_t lease) {
    sim.to_store(*this, [this, lease] {
        if (sim.leases_.count(lease)) sim.drop_lease(lease);
    });
}
void Host::wake_at(uint64_t local_ns) { sim.timer(*this, local_ns); }

SimResult Sim::run() {
    for (auto &h : hosts_) {
        Host *host = h.get();
        at(host->spec.join_ns, [this, host] { start(*host); });
        if (host->spec.leave_ns != 0)
            at(host->spec.leave_ns, [this, host] {
                if (host->up) host->agent->leave(local(*host));
            });
    }
    for (const SimDemand &d : config_.demands) {
        Host *host = hosts_[d.host].get();
        at(d.time_ns, [this, host, d] {
            host->demand_bps = d.demand_bps;
            if (host->up) host->agent->on_demand(local(*host), d.demand_bps);
        });
    }
    for (const SimOffer &o : config_.offers) {
        Host *host = hosts_[o.host].get();
        at(o.time_ns, [host, o] { host->want_bps = o.want_bps; });
    }
    for (const SimFault &f : config_.faults) {
        Host *host = hosts_[f.host].get();
        switch (f.kind) {
        case SimFault::Kind::partition:
            at(f.start_ns, [host] { host->partitioned = true; });
            at(f.end_ns, [this, host] {
                host->partitioned = false;
                if (host->up) send_fresh_view(*host); // the watch reconnects
            });
            break;
        case SimFault::Kind::crash:
            at(f.start_ns, [this, host] {
                if (host->up) crash(*host);
            });
            at(f.end_ns, [this, host] {
                if (!host->up && host->spec.join_ns <= now_ns_ &&
                    (host->spec.leave_ns == 0 || host->spec.leave_ns > now_ns_))
                    start(*host);
            });
            break;
        case SimFault::Kind::etcd_down:
            at(f.start_ns, [this] { store_down_ = true; });
            at(f.end_ns, [this] {
                store_down_ = false;
                // A new leader extends every lease by a full TTL (etcd's
                // lessor Promote), and the watches resynchronise.
                for (auto &[id, lease] : leases_) {
                    lease.expiry_ns =
                        std::max(lease.expiry_ns, now_ns_ + config_.timing.lease_ttl_ns);
                    watch_expiry(id);
                }
                view_ = nullptr;
                for (auto &h : hosts_) send_fresh_view(*h);
            });
            break;
        }
    }
    while (!queue_.empty() && queue_.top().time_ns <= config_.end_ns) {
        Event e = queue_.top();
        queue_.pop();
        now_ns_ = e.time_ns;
        e.fn();
    }
    result_.store = state_;
    return std::move(result_);
}

} // namespace

SimResult simulate_cluster(const SimConfig &config, const AgentFactory &factory) {
    return Sim(config, factory).run();
}

SimConfig random_faults(uint64_t seed, size_t hosts, uint64_t duration_ns) {
    std::mt19937_64 rng(seed);
    auto pick = [&](uint64_t lo, uint64_t hi) {
        return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
    };
    constexpr uint64_t ms = 1'000'000, s = 1'000'000'000;
    SimConfig c;
    c.seed = seed;
    c.end_ns = duration_ns;
    c.budget_bps = 1'000'000'000;
    // Safety must not rest on fast messages: some runs have etcd round
    // trips longer than the margin.
    c.max_delay_ns = pick(2 * ms, 800 * ms);
    c.min_delay_ns = pick(0, c.max_delay_ns);
    for (size_t i = 0; i < hosts; ++i) {
        SimHost h;
        h.name = "h" + std::to_string(i);
        h.member.floor_bps = pick(0, c.budget_bps / (2 * hosts));
        h.member.weight = uint32_t(pick(1, 4));
        h.member.classid = 0x10001;
        // Clocks run off real time by up to the drift the protocol assumes.
        double drift = c.timing.clock_drift * (double(pick(0, 2000)) / 1000.0 - 1.0);
        h.clock_rate = 1.0 + drift;
        h.clock_offset_ns = pick(0, 1000 * s);
        c.hosts.push_back(h);
    }
    // One host joins late, one (another) leaves.
    c.hosts[pick(0, hosts - 1)].join_ns = pick(0, duration_ns / 2);
    if (hosts > 2 && pick(0, 1))
        c.hosts[pick(0, hosts - 1)].leave_ns = pick(duration_ns / 2, duration_ns - 1);
    for (size_t i = 0; i < hosts; ++i) {
        for (uint64_t t = 0; t < duration_ns; t += pick(200 * ms, 3 * s)) {
            uint64_t kind = pick(0, 3);
            uint64_t demand = kind == 0   ? 0
                              : kind == 1 ? pick(0, c.budget_bps / hosts)
                              : kind == 2 ? pick(0, c.budget_bps)
                                          : 2 * c.budget_bps;
            c.demands.push_back({i, t, demand});
        }
    }
    for (uint64_t n = pick(2, 8); n > 0; --n) {
        SimFault f;
        f.kind = SimFault::Kind(pick(0, 2));
        f.host = pick(0, hosts - 1);
        f.start_ns = pick(0, duration_ns);
        // Short cuts (within the margin), ones past the TTL, and long ones.
        uint64_t len = pick(0, 2) == 0 ? pick(10 * ms, 800 * ms) : pick(1 * s, 10 * s);
        f.end_ns = f.start_ns + len;
        c.faults.push_back(f);
    }
    return c;
}

} // namespace pspxdp::cluster
