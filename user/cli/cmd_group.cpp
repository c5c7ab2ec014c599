// pspxdp group join|leave|show|check: cluster mode (docs/design.md §11).
#include "agent/agent.hpp"
#include "agent/codec.hpp"
#include "agent/watchdog.hpp"
#include "cli/command.hpp"
#include "cli/group.hpp"
#include "cli/table.hpp"
#include "cluster/allocator.hpp"
#include "cluster/checker.hpp"
#include "control/control.hpp"
#include "control/group_share.hpp"
#include "core/units.hpp"
#include "etcd/etcd.hpp"

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace pspxdp::cli {

namespace {

int run_join(const Args &args) {
    if (args.positional.size() != 2)
        return fail_input("group join: give DEV (group join DEV --etcd ...)");
    for (const char *needed : {"etcd", "group", "budget", "class"})
        if (!args.has(needed))
            return fail_input(std::string("group join: --") + needed + " is needed");
    agent::AgentConfig cfg;
    cfg.dev = args.positional[1];
    auto endpoints = etcd::parse_endpoints(args.text("etcd"));
    if (!endpoints) return fail(endpoints);
    cfg.endpoints = *endpoints;
    cfg.group = args.text("group");
    if (auto r = agent::check_name("--group", cfg.group); !r) return fail(r);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    cfg.host = args.has("name") ? args.text("name") : std::string(host);
    if (auto r = agent::check_name("--name", cfg.host); !r) return fail(r);
    cfg.budget_bps = args.number("budget");
    cfg.classid = args.classid("class").raw();
    cfg.weight = uint32_t(args.number("weight"));
    cfg.floor_bps = args.has("floor") ? args.number("floor") : 0;
    cfg.log_path = args.has("log") ? args.text("log") : "";
    cfg.timing.lease_ttl_ns = args.number("ttl");
    // etcd's leases are in whole seconds, and the deadline must be computed
    // from the TTL etcd grants (never above what was asked).
    if (cfg.timing.lease_ttl_ns % 1'000'000'000 != 0)
        return fail_input("--ttl " + format_duration(cfg.timing.lease_ttl_ns) +
                          ": etcd leases are whole seconds");
    cfg.keepalive_every_ns = cfg.timing.lease_ttl_ns / 3;
    cfg.timing.orphan_after_ns = args.has("orphan-after") ? args.number("orphan-after") : 0;
    if (cfg.floor_bps > cfg.budget_bps)
        return fail_input("--floor " + format_rate(cfg.floor_bps) + " does not fit in --budget " +
                          format_rate(cfg.budget_bps));
    // The class must be a paced one of DEV: the group sets its rate, or of
    // a class with children, its subtree's ceil, the floor keeping the
    // children's rates (docs/design.md §11.10).
    auto d = control::Device::open(cfg.dev, control::Access::Read);
    if (!d) return fail(d);
    auto config = d->config();
    if (!config) return fail(config);
    if (auto r = control::check_group_class(config->classes, cfg.classid, cfg.floor_bps, cfg.dev);
        !r)
        return fail(r);
    cfg.classes_below = uint32_t(control::subtree_ids(config->classes, cfg.classid).size() - 1);
    // The agent's own etcd requests must not go through the class it
    // holds at 0 while it joins (every request would time out).
    if (auto r = agent::check_etcd_path(d.value(), cfg); !r) return fail(r);
    return agent::run(cfg);
}

int run_leave(const Args &args) {
    if (args.positional.size() != 2 || !args.has("group"))
        return fail_input("group leave: give DEV and --group NAME");
    const std::string dev = args.positional[1], group = args.text("group");
    int stopped = 0;
    for (const auto &j : agent::running_agents(dev)) {
        if (j.value("group", "") != group) continue;
        pid_t pid = j.value("pid", 0);
        if (kill(pid, SIGTERM) != 0) continue;
        // The agent lowers to 0, leaves the roster and revokes its lease.
        for (int i = 0; i < 100 && kill(pid, 0) == 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (kill(pid, 0) == 0)
            return fail("group leave: the agent (pid " + std::to_string(pid) +
                        ") did not stop within 5 s");
        ++stopped;
    }
    if (!stopped) return fail_input(dev + " is in no group " + group + " (no agent running)");
    return 0;
}

int run_show(const Args &args) {
    if (args.positional.size() != 2 || !args.has("etcd"))
        return fail_input("group show: give NAME and --etcd URL[,URL...]");
    const std::string group = args.positional[1];
    if (auto r = agent::check_name("group", group); !r) return fail(r);
    auto endpoints = etcd::parse_endpoints(args.text("etcd"));
    if (!endpoints) return fail(endpoints);
    etcd::Client c(*endpoints, 2000);
    agent::GroupKeys keys(group);
    auto range = c.range_prefix(keys.prefix);
    if (!range) return fail(range);
    auto view = agent::view_from_range(keys, *range);
    if (!view) return fail(view);
    if (!view->roster) return fail_input("group " + group + " does not exist (no roster in etcd)");
    const auto &roster = *view->roster;
    uint64_t epoch = view->alloc ? view->alloc->epoch : 0;
    bool all_acked = cluster::all_acknowledged(*view);
    Table t({{"host", "host", false},
             {"class", "classid", false},
             {"below", "classes_below"},
             {"floor", "floor_bps"},
             {"weight", "weight"},
             {"live", "live", false},
             {"demand", "demand_bps"},
             {"allocation", "allocation_bps"},
             {"applied", "applied_bps"},
             {"acked", "ack_epoch"}});
    uint64_t sum = 0;
    for (const auto &[host, m] : roster.members) {
        auto live = view->live.find(host);
        bool is_live = live != view->live.end();
        uint64_t a = view->alloc ? view->alloc->of(host) : 0;
        t.row();
        t.text(host);
        t.text(format_classid(ClassId::from_raw(m.classid)));
        // An inner class (§11.10): the share is its subtree's ceil.
        t.integer(m.classes_below);
        t.number(format_rate(m.floor_bps), double(m.floor_bps));
        t.integer(m.weight);
        t.text(is_live ? "yes" : "no");
        if (is_live)
            t.number(format_rate(live->second.demand_bps), double(live->second.demand_bps));
        else
            t.text("-");
        t.number(format_rate(a), double(a));
        // The applied rate as the protocol makes it: once every live member
        // acknowledged the epoch, each applies its share (R3); before, at
        // most its share (R1, R2). A host without a live record holds at
        // most its floor.
        if (is_live && all_acked)
            t.number(format_rate(a), double(a));
        else if (!is_live)
            t.text("<=" + format_rate(m.floor_bps));
        else
            t.text("<=" + format_rate(a));
        t.integer(is_live ? live->second.ack_epoch : 0);
        sum += a;
    }
    if (args.flag("json")) {
        nlohmann::ordered_json j;
        j["group"] = group;
        j["budget_bps"] = roster.budget_bps;
        j["epoch"] = epoch;
        j["settled"] = all_acked;
        j["allocated_bps"] = sum;
        j["revision"] = view->revision;
        j["members"] = t.json();
        std::printf("%s\n", j.dump().c_str());
        return 0;
    }
    std::printf("group %s: budget %s, epoch %llu%s, allocated %s, %zu members, %zu live\n",
                group.c_str(), format_rate(roster.budget_bps).c_str(), (unsigned long long)epoch,
                all_acked ? " (acknowledged by all)" : " (settling)", format_rate(sum).c_str(),
                roster.members.size(), view->live.size());
    t.print(stdout, false);
    return 0;
}

// A live group's budget changed: the roster's, by compare-and-swap. The
// proposer's next epoch divides the new budget; every member lowers to it
// at once and raises only once all have acknowledged it (R1-R3), so the sum
// stays within the old budget until the change is through, and within the
// new one after (docs/design.md §11.4.4).
int run_budget(const Args &args) {
    if (args.positional.size() != 3 || !args.has("etcd"))
        return fail_input("group budget: give NAME RATE and --etcd URL[,URL...]");
    const std::string group = args.positional[1];
    if (auto r = agent::check_name("group", group); !r) return fail(r);
    auto budget = parse_rate_bps(args.positional[2]);
    if (!budget) return fail_input("group budget: " + budget.error());
    auto endpoints = etcd::parse_endpoints(args.text("etcd"));
    if (!endpoints) return fail(endpoints);
    etcd::Client c(*endpoints, 2000);
    agent::GroupKeys keys(group);
    for (int attempt = 0; attempt < 5; ++attempt) {
        auto range = c.range_prefix(keys.prefix);
        if (!range) return fail(range);
        auto view = agent::view_from_range(keys, *range);
        if (!view) return fail(view);
        if (!view->roster)
            return fail_input("group " + group + " does not exist (no roster in etcd)");
        cluster::Roster next = *view->roster;
        const uint64_t was = next.budget_bps;
        if (was == *budget) {
            std::printf("group %s: budget is %s already\n", group.c_str(),
                        format_rate(was).c_str());
            return 0;
        }
        unsigned __int128 floors = 0;
        for (const auto &[h, m] : next.members) floors += m.floor_bps;
        if (floors > *budget)
            return fail_input("group budget: the members' floors sum to " +
                              format_rate(uint64_t(floors)) + ", above " + format_rate(*budget) +
                              " (budget unchanged)");
        next.budget_bps = *budget;
        auto ok = c.cas(keys.roster(), agent::roster_json(next), view->roster_rev);
        if (!ok) return fail(ok);
        if (*ok) {
            std::printf("group %s: budget %s -> %s (the members follow epoch by epoch: the sum "
                        "stays within %s until all have, then within %s)\n",
                        group.c_str(), format_rate(was).c_str(), format_rate(*budget).c_str(),
                        format_rate(std::max(was, *budget)).c_str(), format_rate(*budget).c_str());
            return 0;
        }
        // The roster changed meanwhile (a join, a leave): read it again.
    }
    return fail("group budget: the roster kept changing; nothing changed, try again");
}

// The checker over agents' rate logs (one clock: one machine's CLOCK_REALTIME).
int run_check(const Args &args) {
    if (args.positional.size() < 2 || !args.has("budget"))
        return fail_input("group check: give --budget RATE and one rate log per host");
    std::vector<std::vector<cluster::RateChange>> logs;
    for (size_t i = 1; i < args.positional.size(); ++i) {
        std::ifstream f(args.positional[i]);
        if (!f) return fail_input(args.positional[i] + ": cannot be read");
        std::stringstream ss;
        ss << f.rdbuf();
        auto log = agent::parse_rate_log(ss.str());
        if (!log) return fail_input(args.positional[i] + ": " + log.error());
        logs.push_back(std::move(log.value()));
    }
    uint64_t budget = args.number("budget");
    auto report = cluster::check_budget(budget, logs);
    for (const auto &v : report.violations)
        std::printf("violation: %llu..%llu ns, sum %s above the budget %s\n",
                    (unsigned long long)v.start_ns, (unsigned long long)v.end_ns,
                    format_rate(v.sum_bps).c_str(), format_rate(budget).c_str());
    std::printf("%zu logs, %llu rate changes, peak sum %s of budget %s: %zu violations\n",
                logs.size(), (unsigned long long)report.changes,
                format_rate(report.max_sum_bps).c_str(), format_rate(budget).c_str(),
                report.violations.size());
    return report.violations.empty() ? 0 : 1;
}

int run_group(const Args &args) {
    const std::string &verb = args.positional[0];
    if (verb == "join") return run_join(args);
    if (verb == "leave") return run_leave(args);
    if (verb == "show") return run_show(args);
    if (verb == "check") return run_check(args);
    if (verb == "budget") return run_budget(args);
    return fail_input("group: unknown action \"" + verb + "\" (join, leave, show, budget, check)");
}

} // namespace

void print_groups(Printer &p, const std::string &dev) {
    // What status knows first-hand: the class's rate as DEV paces it now,
    // and how old the agent's own account is. The agent's account (phase,
    // epoch, etcd) is shown as what it last said, with its age.
    // Of a class with children, the group holds its subtree's ceil
    // (docs/design.md §11.10): shown with how many classes are below it.
    std::map<std::string, uint64_t> class_rate, class_ceil, below;
    if (auto d = control::Device::open(dev, control::Access::Read); d)
        if (auto cfg = d->config(); cfg)
            for (const auto &c : cfg->classes) {
                const std::string id = format_classid(ClassId::from_raw(c.classid));
                class_rate[id] = c.rate_bps;
                class_ceil[id] = c.ceil_bps;
                below[id] = control::subtree_ids(cfg->classes, c.classid).size() - 1;
            }
    const uint64_t now_ns = agent::real_ns();
    p.open_array("groups");
    for (const auto &j : agent::agent_states(dev)) {
        p.open_object();
        const bool alive = j.value("alive", false);
        const uint64_t updated = j.value("updated_ns", uint64_t(0));
        const uint64_t age_ns = now_ns > updated ? now_ns - updated : 0;
        // The agent writes its state every 250 ms: a second without one is
        // an agent that does not run (stopped, hung).
        const bool answering = alive && age_ns < 1'000'000'000;
        const std::string cls = j.value("classid", "");
        p.string("group", j.value("group", ""), "group %s: ");
        p.string("classid", cls, "class %s ");
        p.string("host", j.value("host", ""), "as %s: ");
        if (auto it = class_rate.find(cls); it != class_rate.end()) {
            p.rate("class_rate", it->second, "paced at %s");
            p.rate("class_ceil", class_ceil[cls], class_ceil[cls] ? " ceil %s" : "");
            p.u64("classes_below", below[cls],
                  below[cls] ? " (an inner class: %s classes below it)" : "");
            p.text(" now; ");
        } else
            p.null("class_rate_bps");
        p.u64("pid", j.value("pid", uint64_t(0)), "agent pid %s ");
        p.boolean("agent_alive", alive, alive ? "" : "GONE (killed?): ");
        p.boolean("agent_answering", answering,
                  !alive      ? ""
                  : answering ? "running; "
                              : "NOT ANSWERING (stopped or hung): ");
        p.value("state_age_ns", age_ns, fixed(double(age_ns) / 1e9, 1) + " s",
                answering ? "" : "its last state is %s old, when it said: ");
        p.newline();
        bool reachable = j.value("etcd_reachable", false);
        p.string("phase", j.value("phase", ""), "  %s, ");
        p.u64("epoch", j.value("epoch", uint64_t(0)), "epoch %s, ");
        p.rate("applied", j.value("applied_bps", uint64_t(0)), "applied %s, ");
        p.rate("demand", j.value("demand_bps", uint64_t(0)), "demand %s ");
        p.rate("offered", j.value("offered_bps", uint64_t(0)), "(offered %s), ");
        p.boolean("etcd_reachable", reachable,
                  reachable ? "etcd reachable, " : "etcd UNREACHABLE, ");
        const uint64_t renewed = j.value("renewed_ago_ns", uint64_t(0));
        p.value("renewed_ago_ns", renewed, fixed(double(renewed) / 1e9, 1) + " s",
                "lease renewed %s before that");
        p.boolean("lease_safe", j.value("lease_safe", false), "");
        p.rate("safe_allocation", j.value("safe_allocation_bps", uint64_t(0)), "");
        bool holding = j.value("holding_safe_allocation", false);
        p.boolean("holding_safe_allocation", holding,
                  holding ? "; holds a safe allocation (at most its floor, reserved for it)" : "");
        p.rate("own_rate", j.value("own_rate_bps", uint64_t(0)), "");
        p.u64("rate_changes", j.value("rate_changes", uint64_t(0)), "; %s rate changes");
        p.u64("updated_ns", updated, ""); // CLOCK_REALTIME
        if (!alive) {
            p.newline();
            p.text("  its watchdog lowered the class to its fallback; the group keeps its "
                   "reservation until `pspxdp group join` and `group leave` run again");
        }
        p.close_object();
        p.newline();
    }
    p.close_array();
}

const Command kGroup = {
    "group",
    "join DEV | leave DEV | show NAME | budget NAME RATE | check LOG...",
    "share a budget among hosts through etcd (cluster mode)",
    "join DEV --etcd URL[,URL...] --group NAME --budget RATE --class CLASSID\n"
    "  [--weight W] [--floor RATE] [--name HOST] [--log FILE] [--ttl TIME]\n"
    "  [--orphan-after TIME]\n"
    "  runs in the foreground until SIGTERM/SIGINT, then leaves the group (exit 0).\n"
    "  The paced class CLASSID of DEV gets a share of the group's budget,\n"
    "  weighted max-min fair over the members' measured demands, never below its\n"
    "  floor; the sum of the rates applied on all hosts never exceeds the budget.\n"
    "  Of a class tree, CLASSID may be an inner class: the share is then its\n"
    "  subtree's ceil (its children borrow inside it), and --floor must cover the\n"
    "  children's rates; a class inside a subtree another group holds, or above\n"
    "  one, is refused (one group per subtree).\n"
    "  The floors must fit in the budget (refused otherwise). Every applied rate\n"
    "  is logged to FILE as \"REALTIME_NS RATE_BPS\" (default\n"
    "  /run/pspxdp/DEV.group-MAJ-MIN.rates). One group per class of DEV, one\n"
    "  member per --name: a join under a name a live member holds is refused.\n"
    "  A refused join (exit 2) changes nothing: the class is held at 0 only once\n"
    "  the group accepts it.\n"
    "leave DEV --group NAME: stops that agent; it leaves the group and the class\n"
    "  gets its own rate back (or the agent says in one line what it leaves).\n"
    "show NAME --etcd URLS [-j]: members, demand, allocation, applied rate, epoch;\n"
    "  below: how many classes are below a member's class (an inner class: the\n"
    "  share is its subtree's ceil, design §11.10).\n"
    "budget NAME RATE --etcd URLS: changes a live group's budget (the floors must\n"
    "  fit); the members follow epoch by epoch, the sum never above the old budget\n"
    "  or, once all follow, the new one. Members joining later give the new one.\n"
    "check --budget RATE LOG...: replays rate logs (one per host, one clock)\n"
    "  against the budget; exit 1 on any violation.",
    {opt(OptType::String, "etcd", 'e', "URLS", "etcd client URLs, comma-separated"),
     opt(OptType::String, "group", 'g', "NAME", "the group"),
     opt(OptType::Rate, "budget", 'b', "RATE", "the group's budget (the bottleneck's rate)"),
     opt(OptType::ClassId, "class", 'c', "CLASSID",
         "join: the paced class the group drives (an inner class: its subtree)"),
     opt(OptType::Integer, "weight", 'w', "W", "join: this host's weight")
         .by_default(1)
         .within(1, 1000000),
     opt(OptType::Rate, "floor", 'f', "RATE", "join: the rate this host always keeps")
         .default_is("none (0)"),
     opt(OptType::String, "name", 'n', "HOST", "join: this host's name in the group")
         .default_is("the host name"),
     opt(OptType::String, "log", 'l', "FILE", "join: the applied-rate log")
         .default_is("/run/pspxdp/DEV.group-MAJ-MIN.rates"),
     opt(OptType::Duration, "ttl", 't', "TIME", "join: the etcd lease TTL (whole seconds)")
         .by_default(3'000'000'000)
         .within(2'000'000'000, 60'000'000'000)
         .bare_unit(1'000'000'000),
     opt(OptType::Duration, "orphan-after", 'o', "TIME",
         "join: a dead member's floor is released this long after its lease (the group's)")
         .default_is("never (0)")
         .within(1'000'000'000, 3600'000'000'000)
         .bare_unit(1'000'000'000),
     flag("json", 'j', "show: print JSON")},
    1,
    64,
    run_group,
};

} // namespace pspxdp::cli
