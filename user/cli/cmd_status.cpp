// pspxdp status: whether DEV is paced. The attachment (what attach created,
// the daemon, its clock) and then what stats prints, in one object.
#include "cli/command.hpp"
#include "cli/group.hpp"
#include "cli/output.hpp"
#include "cli/show.hpp"
#include "common/clock.hpp"
#include "common/lateness.hpp"
#include "common/paths.hpp"
#include "control/control.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"
#include "daemon/wire_clock.hpp"
#include "setup/attach.hpp"
#include "setup/netlink.hpp"
#include "setup/process.hpp"

#include <algorithm>
#include <dirent.h>
#include <optional>
#include <vector>

namespace pspxdp::cli {

namespace {

// status: one line on the wire's clock (docs/design.md §4.5): the mode and why, the gap
// horizon, how much of the wire PAUSE frames took, late wake-ups, the share
// of the wire's time lost by running late in the last second (docs/design.md §4.4).
void print_clock(Printer &p, const std::string &dev, const Snapshot &s, bool dev_gone) {
    const auto &k = s.counters;
    if (k.have_daemon && dev_gone) {
        // The mode is the dead daemon's; no reason can come from a device
        // that is gone (its driver is unknown now): say what is known.
        const bool clockless = k.daemon.clockless;
        p.string("clock", clockless ? "clockless" : "byte", "");
        p.null("clock_reason");
        p.null("pause_share");
        p.text("clock: " + dev + " gone; last mode " + (clockless ? "clockless" : "byte clock"));
        p.newline();
        return;
    }
    if (!k.have_daemon) {
        p.null("clock");
        p.null("clock_reason");
        p.null("pause_share");
        p.null("lost_wire_share");
        return;
    }
    const auto &d = k.daemon;
    // The driver now (the daemon resolved it at its start; same device).
    auto link = setup::get_link(dev);
    daemon::ClockChoice c;
    c.clockless = d.clockless;
    c.forced = d.clock_forced;
    c.driver = link ? link->driver : "";
    // One line of text, whatever its length; the JSON fields print nothing.
    std::string line = "clock: " + c.describe();
    if (!c.clockless) line += ", gap horizon " + daemon::format_gap_horizon(d.gap_horizon_ns);
    p.string("clock", c.clockless ? "clockless" : "byte", "");
    p.string("clock_reason", c.reason(), "");
    const uint64_t wire = d.wire_frame_bytes + d.gap_bytes + d.planned_idle_bytes;
    if (wire) {
        const double share = double(d.gap_bytes) / double(wire);
        p.value("pause_share", share, "", "");
        line += ", PAUSE " + fixed(100.0 * share, 1) + " % of the wire";
    } else {
        p.value("pause_share", nullptr, "", "");
        line += ", PAUSE - (nothing sent)";
    }
    line += ", late wake-ups " + std::to_string(d.late_wakeups);
    if (d.late_wakeups)
        line += " (longest " + format_duration(d.late_max_ns / 1000 * 1000) + ", " +
                fixed(double(d.late_ns) / 1e6, 3) + " ms in all)";
    // Lost while behind real time (a busy host, a late wake-up), over the
    // daemon's last second: what tells a user the pacer cannot hold.
    p.value("lost_wire_share", double(d.lost_wire_ppm) / 1e6, "", "");
    line += ", lost " + fixed(double(d.lost_wire_ppm) / 1e4, 2) +
            " % of the wire's time in the last second";
    p.text(line); // text() never wraps
    p.newline();
}

// status: one line on the release-lateness histogram (common/lateness.hpp):
// how late the daemon resumed from its planned waits, p50/p99/max.
void print_lateness(Printer &p, const Snapshot &s) {
    const auto &k = s.counters;
    const char *keys[] = {"lateness_p50_ns", "lateness_p99_ns", "lateness_max_ns"};
    if (!k.have_lateness) { // an attachment made before the pin existed
        p.null("lateness_wakeups");
        for (const char *key : keys) p.null(key);
        return;
    }
    const uint64_t n = common::lateness_count(k.lateness);
    p.u64("lateness_wakeups", n, "release lateness: %s wake-ups");
    if (!n) {
        for (const char *key : keys) p.null(key);
        p.newline();
        return;
    }
    const uint64_t v[] = {common::lateness_quantile_ns(k.lateness, 0.5),
                          common::lateness_quantile_ns(k.lateness, 0.99), k.lateness.max_ns};
    const char *label[] = {", p50 %s", ", p99 %s", ", max %s"};
    for (int i = 0; i < 3; ++i)
        p.value(keys[i], v[i], fixed(double(v[i]) / 1e3, 1) + " us", label[i]);
    p.newline();
}

// The state of an attachment in one word, for status with DEV and without:
// the probe's, except that an attachment whose daemon runs but does not
// beat (SIGSTOPped, stuck) is "not beating", not "alive": pacer_alive()
// decides, as it does for show, stats and the exporter (design §1.9).
struct Verdict {
    std::string state;               // "alive", "not beating", "dead", "half attached", ...
    std::optional<bool> pacer_alive; // none: the heartbeat could not be read
    std::string why;                 // one line for people; empty when alive
};

Verdict verdict(const setup::Probe &pr, const Result<pspxdp_pacer_state> &st, uint64_t now_ns) {
    Verdict v{setup::kind_name(pr.kind), false, pr.why};
    if (pr.kind != setup::Probe::Kind::Alive) return v; // no daemon here: TC passes unpaced
    if (!st) {
        v.pacer_alive.reset();
        v.why = "cannot read the heartbeat: " + st.error();
        return v;
    }
    v.pacer_alive = pacer_alive(pr.daemon, *st, now_ns);
    if (*v.pacer_alive) return v;
    v.state = "not beating";
    const std::string dev = pr.state ? pr.state->dev : "the device";
    v.why = dev + "'s daemon (pid " + std::to_string(pr.daemon) + ") runs but " +
            (st->heartbeat_ns
                 ? "its heartbeat is " +
                       fixed(double(int64_t(now_ns - st->heartbeat_ns)) / 1e6, 1) + " ms old"
                 : std::string("it never beat")) +
            " (stopped or stuck): TC passes traffic unpaced";
    return v;
}

// status: the attachment (what attach created, the daemon) and then what
// stats prints, in one object. -j prints a JSON object for any DEV, with
// "attached": false and "error" when there is nothing to show.
// status without DEV: every attachment, one line each (as xdp-loader
// status), the verdict probe gives; -j an array of objects.
int run_status_all(const Args &args) {
    std::vector<std::string> devs = control::attached_devices();
    // A half-made attachment may have its state file and no pins yet.
    if (DIR *d = opendir(common::kRunDir)) {
        while (dirent *e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.size() > 6 && n.ends_with(".state")) devs.push_back(n.substr(0, n.size() - 6));
        }
        closedir(d);
    }
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    Printer p(args.flag("json"));
    p.open_array();
    if (devs.empty()) p.text("no device attached\n");
    for (const auto &dev : devs) {
        auto paths = common::paths_for(dev);
        if (!paths) continue; // not a name pspxdp made
        const setup::Probe pr = setup::probe(*paths);
        Result<pspxdp_pacer_state> st = err("not read");
        if (pr.kind == setup::Probe::Kind::Alive) {
            auto d = control::Device::open(dev, control::Access::Read);
            st = d ? d->state() : Result<pspxdp_pacer_state>(d.failure());
        }
        const Verdict v = verdict(pr, st, common::mono_ns());
        p.open_object();
        p.string("dev", dev, "%s: ");
        p.string("state", v.state, "%s");
        if (v.pacer_alive)
            p.boolean("pacer_alive", *v.pacer_alive, "");
        else
            p.null("pacer_alive");
        if (pr.daemon)
            p.i64("daemon_pid", pr.daemon, ", daemon pid %s");
        else
            p.null("daemon_pid");
        if (pr.state) {
            p.rate("line_rate", pr.state->line_rate_bps, ", line rate %s");
            p.string("pacer", pr.state->pacer_a + " -> " + pr.state->pacer_b, ", pacer %s");
        }
        p.string("why", v.why, v.why.empty() ? "" : " (%s)");
        p.newline();
        p.close_object();
    }
    p.close_array();
    p.print(stdout);
    return 0;
}

int run_status(const Args &args) {
    if (args.positional.empty()) return run_status_all(args);
    const std::string dev = args.positional[0];
    Printer p(args.flag("json"));
    p.wrap(100, " ");
    p.open_object();
    auto refused = [&](const Error &e) {
        if (p.json()) {
            p.string("dev", dev);
            p.boolean("attached", false);
            p.string("error", e.message);
            p.close_object();
            p.print(stdout);
        }
        return fail(e);
    };
    auto checked = common::paths_for(dev); // refuses a name no device can have
    if (!checked) return refused(checked.failure());
    const auto &paths = *checked;
    // The same verdict, in the same words, as attach and detach give.
    const setup::Probe probe = setup::probe(paths);
    using K = setup::Probe::Kind;
    if (probe.kind == K::NotAttached) return refused(refuse(dev + " is not attached"));
    if (probe.kind == K::Broken || probe.kind == K::Elsewhere || probe.kind == K::HalfMade ||
        !probe.state)
        return refused(err(probe.why)); // in the way, not refused input: exit 1
    const setup::AttachState *as = &*probe.state;
    auto d = control::Device::open(dev, control::Access::Read);
    if (!d) return refused(d.failure());
    auto s = take(*d);
    if (!s) return refused(s.failure());
    // One look at the daemon for the whole output (the probe's): "DEAD" and
    // "pacer alive" never side by side.
    s.value().daemon_pid = probe.daemon;
    const pid_t pid = s->daemon_pid;
    const Verdict v = verdict(probe, s->st, s->t_ns); // as status without DEV says it
    const bool beating = v.pacer_alive.value_or(false);

    p.boolean("attached", true, (dev + ": attached, ").c_str());
    p.text("pacer ");
    p.open_array("pacer_veth");
    p.string("", as->pacer_a, "%s -> ");
    p.string("", as->pacer_b, "%s ");
    p.close_array();
    p.u64("queues", as->queues, "(%s queues), ");
    p.bytes("window", as->window_bytes, "window %s");
    p.boolean("clsact_created", as->clsact_created,
              as->clsact_created ? "" : ", clsact qdisc not ours");
    p.newline();
    // The words scripts grep for: "alive, heartbeat", "daemon: not running".
    const int64_t age = s->st.heartbeat_ns ? int64_t(s->t_ns - s->st.heartbeat_ns) : 0;
    const std::string age_text = fixed(double(age) / 1e6, 1) + " ms ago";
    p.i64("daemon_pid", pid,
          !pid ? "daemon: not running (TC passes everything unpaced)" : "daemon: pid %s, ");
    if (s->st.heartbeat_ns)
        p.value("heartbeat_age_ns", age, age_text,
                !pid      ? ""
                : beating ? "alive, heartbeat %s"
                          : "NOT beating (heartbeat %s): TC passes unpaced");
    else
        p.value("heartbeat_age_ns", nullptr, "",
                pid ? "NOT beating (never beat): TC passes unpaced" : "");
    p.newline();
    // The scheduling in force, as the kernel has it (attach --sched auto
    // may have fallen back to a normal task).
    auto sched = pid ? daemon::sched_in_force(pid) : Result<daemon::SchedInForce>(err(""));
    if (sched)
        p.value("scheduling",
                {{"policy", daemon::sched_policy_name(sched->policy)},
                 {"priority", sched->priority},
                 {"runtime_ns", sched->runtime_ns},
                 {"period_ns", sched->period_ns},
                 {"reclaim", sched->reclaim}},
                sched->text(), "scheduling: %s");
    else
        p.null("scheduling");
    if (sched) p.newline();
    // Why nothing is paced (the daemon stopped itself, was killed, DEV went):
    // the one line the user needs, with what to do.
    if (probe.kind == K::Dead || probe.kind == K::DevGone) {
        p.string("dead", probe.why, "DEAD: %s");
        p.newline();
    } else {
        p.null("dead");
    }
    print_clock(p, dev, *s, probe.kind == K::DevGone);
    print_lateness(p, *s);
    print_groups(p, dev); // cluster mode: the groups DEV's classes are in
    print_device(p, dev, *s, nullptr, true);
    p.close_object();
    p.print(stdout);
    // A script's question is "is DEV paced?": attached but not paced is a
    // broken attachment (exit 1), the report above says why.
    const bool paced = beating && probe.kind != K::Dead && probe.kind != K::DevGone;
    return paced ? 0 : 1;
}

} // namespace

const Command kStatus = {
    "status",
    "[DEV] [-j]",
    "show whether DEV is paced: the attachment, the daemon, classes, counters",
    "What attach created (pacer veth pair, queues, window), the daemon's pid and\n"
    "heartbeat, then what pspxdp stats prints (without measured rates). With -j a\n"
    "JSON object for any DEV; \"attached\": false and \"error\" when not attached.\n"
    "Without DEV: every attachment, one line each (alive, not beating, dead, half\n"
    "attached...); with -j an array of objects. Both give one verdict: pacer_alive\n"
    "is true (and the state without DEV \"alive\") only while the daemon runs and\n"
    "beats; a stopped or stuck daemon is \"not beating\": TC passes traffic unpaced.\n"
    "Exit status with DEV: 0 paced (the daemon beats), 1 attached but not paced\n"
    "(daemon dead or not beating, DEV gone, half attached; the report says why),\n"
    "2 not attached or no such device.",
    {flag("json", 'j', "print JSON")},
    0,
    1,
    run_status,
};

} // namespace pspxdp::cli
