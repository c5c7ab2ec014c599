// A group of hosts and one etcd, simulated (docs/design.md §11.5): a store
// with revisions, leases, watches and compare-and-swap; messages with delays;
// host clocks that drift; timers that fire late; partitions, crashes and
// restarts, etcd outages. Deterministic for a seed. Every host's applied-rate
// log comes out for the checker.
#pragma once

#include "cluster/checker.hpp"
#include "cluster/demand.hpp"
#include "cluster/protocol.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace pspxdp::cluster {

struct SimHost {
    HostId name;
    Member member;
    uint64_t join_ns = 0;    // starts (and joins) then
    uint64_t leave_ns = 0;   // 0: stays
    double clock_rate = 1.0; // local ns per real ns
    uint64_t clock_offset_ns = 0;
};

struct SimFault {
    enum class Kind { partition, crash, etcd_down };
    Kind kind = Kind::partition;
    size_t host = 0; // partition, crash: which host (a crash restarts at end_ns)
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
};

struct SimDemand {
    size_t host = 0;
    uint64_t time_ns = 0;
    uint64_t demand_bps = 0;
};

// What a host's traffic wants (bit/s), from time_ns on: with offers the
// demand is measured as an agent does, not declared (SimDemand).
struct SimOffer {
    size_t host = 0;
    uint64_t time_ns = 0;
    uint64_t want_bps = 0;
};

// A demand estimator: (local now, the window as the agent measures it) ->
// the demand to report.
using Estimator = std::function<uint64_t(uint64_t now_ns, const DemandWindow &window)>;
// One per host; the default is DemandEstimator's.
using EstimatorFactory = std::function<Estimator(uint64_t budget_bps)>;

struct SimConfig {
    uint64_t budget_bps = 1'000'000'000;
    std::vector<SimHost> hosts;
    Timing timing;
    uint64_t keepalive_every_ns = 1'000'000'000;
    // One way, host to etcd or back.
    uint64_t min_delay_ns = 1'000'000;
    uint64_t max_delay_ns = 20'000'000;
    uint64_t max_timer_late_ns = 50'000'000;
    std::vector<SimFault> faults;
    std::vector<SimDemand> demands;
    // The TCP-like model: a host's class takes min(want, applied) each
    // window and is limited (backlogged) while want > applied; in
    // quiet_percent of the windows the sender stalls (30 % of that, no
    // backlog), as a loaded machine makes it.
    std::vector<SimOffer> offers;
    uint64_t demand_window_ns = 25'000'000;
    uint32_t quiet_percent = 0;
    EstimatorFactory estimator;
    uint64_t end_ns = 60'000'000'000;
    uint64_t seed = 1;
};

struct SimLeaseExpiry {
    uint64_t time_ns;
    HostId host;
};

// What one store write was (the lab's judge counts the same kinds from
// etcd's revisions, lab/psplab/cluster_experiments.py): the roster or a
// live record created (or under a new lease), one whose demand alone
// moved, one whose demand and ack moved (a demand write carries the newest
// epoch, an ack the demand), an epoch, one whose ack alone moved, the rest
// (deletions).
enum class WriteKind : uint8_t { join, demand, demand_ack, epoch, ack, other };

struct SimResult {
    std::vector<std::vector<RateChange>> logs; // per host, real time
    std::vector<SimLeaseExpiry> expiries;
    View store; // the keys at the end
    uint64_t store_writes = 0;
    std::vector<uint64_t> write_ns;    // when each write (a new revision) was made, real time
    std::vector<WriteKind> write_kind; // what each was, as write_ns
};

using AgentFactory = std::function<std::unique_ptr<Agent>(const SimHost &, uint64_t budget_bps,
                                                          const Timing &, Effects &)>;

// HostProtocol, the real one.
std::unique_ptr<Agent> make_host_protocol(const SimHost &host, uint64_t budget_bps,
                                          const Timing &timing, Effects &effects);

SimResult simulate_cluster(const SimConfig &config,
                           const AgentFactory &factory = make_host_protocol);

// A random group of `hosts` with random floors, weights, clocks, demands and
// faults (partitions, crashes, etcd outages, a late join, a leave), for the
// fault tests: deterministic for a seed.
SimConfig random_faults(uint64_t seed, size_t hosts, uint64_t duration_ns);

} // namespace pspxdp::cluster
