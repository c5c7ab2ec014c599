// pspxdp show / stats: a device's classes and counters, like `tc [-s] class
// show`, in text or JSON from the same calls (status prints them too). Counter names
// come from the X-macro lists of shared.h: one name in text, JSON and bpftool.
#include "cli/command.hpp"
#include "cli/output.hpp"
#include "cli/show.hpp"
#include "common/clock.hpp"
#include "common/paths.hpp"
#include "control/control.hpp"
#include "core/units.hpp"
#include "setup/process.hpp"

#include <csignal>
#include <thread>

namespace pspxdp::cli {

namespace {

void sleep_ns(uint64_t ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }

const char *kind_name(const control::ClassInfo &c) {
    if (!c.configured) return c.state == PSPXDP_SLOT_DRAINING ? "deleted" : "unconfigured";
    return c.config.kind == PSPXDP_CLASS_PACED ? "paced" : "normal";
}

const char *state_name(const control::ClassInfo &c) {
    switch (c.state) {
    case PSPXDP_SLOT_SERVED: return c.served ? "served" : "unserved";
    case PSPXDP_SLOT_DRAINING: return "draining";
    default: return "unserved";
    }
}

// stats' default text (tc -s style): one line per class, the counters that
// say what it did; -d (or -j) gives every counter. Names are the counters'.
void print_class_line(Printer &p, const control::ClassInfo &c, const control::ClassInfo *before,
                      uint64_t dt_ns) {
    const bool paced = c.configured && c.config.kind == PSPXDP_CLASS_PACED;
    std::string line = "class " + format_classid(ClassId::from_raw(c.classid)) + " " +
                       kind_name(c) + (paced ? " " + format_rate(c.config.rate_bps) : "");
    const auto &k = c.pacer;
    if (before && dt_ns) {
        line += " measured " +
                measured_rate(double(k.tx_bytes - before->pacer.tx_bytes) * 8e9 / double(dt_ns));
        // Why a paced class sent less than its rate over the interval
        // (design §1.12): its real time given up to wake-ups later than its
        // burst bound absorbs (the pacer's), or its queue empty (the
        // sender's).
        if (paced) {
            const auto share = [&](uint64_t now, uint64_t then) {
                return fixed(double(now - then) * 100.0 / double(dt_ns), 1) + " %";
            };
            line += " (late_lost " + share(k.late_lost_ns, before->pacer.late_lost_ns) +
                    ", empty " + share(k.empty_ns, before->pacer.empty_ns) + ")";
        }
    }
    // Every drop_ counter, whatever is added later (drop_aqm was missing).
    uint64_t drops = 0;
#define PSPXDP_DROPS(name, doc)                                                                    \
    if (std::string_view(#name).starts_with("drop_")) drops += k.name;
    PSPXDP_CLASS_COUNTERS(PSPXDP_DROPS)
#undef PSPXDP_DROPS
    line += " tx_frames " + std::to_string(k.tx_frames) + " tx_bytes " +
            std::to_string(k.tx_bytes) + " backlog_frames " + std::to_string(k.backlog_frames) +
            " drop_* " + std::to_string(drops) + " ce_marked " + std::to_string(k.ce_marked) +
            " tc_passed " + std::to_string(c.tc.tc_passed);
    if (paced)
        line += " late_lost_ns " + std::to_string(k.late_lost_ns) + " empty_ns " +
                std::to_string(k.empty_ns);
    if (std::string st = state_name(c); st != "served") line += " (" + st + ")";
    p.text(line);
    p.newline();
}

// The device-wide counters of one map in one line, only those not 0 (an
// idle device prints "daemon: all 0").
template <class F> void print_nonzero(Printer &p, const char *what, F each) {
    std::string line;
    each([&](const char *name, uint64_t v) {
        if (v) line += std::string(" ") + name + " " + std::to_string(v);
    });
    p.text(std::string(what) + (line.empty() ? ": all 0" : line));
    p.newline();
}

void print_class(Printer &p, const control::ClassInfo &c, const control::ClassInfo *before,
                 uint64_t dt_ns, bool stats, bool detail) {
    if (stats && !detail && !p.json()) return print_class_line(p, c, before, dt_ns);
    p.open_object();
    const bool paced = c.configured && c.config.kind == PSPXDP_CLASS_PACED;
    p.string("class", format_classid(ClassId::from_raw(c.classid)), "class %s ");
    p.string("kind", kind_name(c), "%s ");
    // JSON: every key always (a fixed schema; 0 = the default). Text: what is set.
    if (p.json() || paced) p.rate("rate", c.config.rate_bps);
    // Class trees (docs/design.md §3.12): text shows what is set.
    const uint32_t parent = pspxdp_classid_raw(c.config.parent);
    if (p.json())
        p.string("parent", parent ? format_classid(ClassId::from_raw(parent)) : "");
    else if (parent)
        p.text("parent " + format_classid(ClassId::from_raw(parent)) + " ");
    if (p.json() || (c.config.ceil_bps && c.config.ceil_bps != c.config.rate_bps))
        p.rate("ceil", c.config.ceil_bps ? c.config.ceil_bps : c.config.rate_bps);
    if (p.json() || c.config.prio) p.u64("prio", c.config.prio);
    if (p.json() || c.config.limit_bytes) p.bytes("limit", c.config.limit_bytes);
    if (p.json() || c.config.limit_ns) p.duration("limit", c.config.limit_ns);
    const bool ce_off = c.config.ce_threshold_ns == PSPXDP_CE_THRESHOLD_OFF;
    if (p.json()) {
        p.u64("ce_threshold_ns", ce_off ? 0 : c.config.ce_threshold_ns);
        p.boolean("ce_marking", paced && !ce_off);
    } else if (ce_off) {
        p.text("ce_threshold off ");
    } else if (c.config.ce_threshold_ns) {
        p.duration("ce_threshold", c.config.ce_threshold_ns);
    }
    if (p.json()) {
        p.u64("burst_bytes", c.config.burst_bytes);
        p.u64("burst_mtus", c.config.burst_mtus);
    } else if (c.config.burst_bytes || c.config.burst_mtus) {
        p.text("burst " + format_burst(BurstSize{c.config.burst_bytes, c.config.burst_mtus}) + " ");
    }
    const bool flows = !(c.config.flags & PSPXDP_CLASS_FLOWS_OFF);
    if (p.json())
        p.boolean("flows", flows);
    else if (!flows)
        p.text("flows off ");
    p.u64("slot", c.config.slot);
    p.string("state", state_name(c), "%s ");
    if (stats) {
        if (before && dt_ns)
            p.measured_rate("measured_rate", double(c.pacer.tx_bytes - before->pacer.tx_bytes) *
                                                 8e9 / double(dt_ns));
        else
            p.null("measured_rate_bps");
        p.newline();
        p.text(" ");
#define PSPXDP_PRINT(name, help) p.u64(#name, c.pacer.name);
        PSPXDP_CLASS_COUNTERS(PSPXDP_PRINT)
        p.newline();
        p.text(" ");
#define PSPXDP_PRINT_TC(name, help) p.u64(#name, c.tc.name);
        PSPXDP_TC_CLASS_COUNTERS(PSPXDP_PRINT_TC)
#undef PSPXDP_PRINT_TC
    }
    p.newline();
    p.close_object();
}

// Every JSON key of show/stats/status -j and what it means: `pspxdp stats
// --keys` prints this as a Markdown table, and the lab test checks that
// the JSON has exactly these keys. Counters are described once, in shared.h.
struct KeyDoc {
    const char *where, *key, *meaning;
};
std::vector<KeyDoc> key_docs() {
    std::vector<KeyDoc> k = {
        {"", "dev", "the device"},
        {"", "line_rate_bps", "the wire's rate M, bit/s"},
        {"", "paced_bps", "sum of the paced classes' rates, bit/s"},
        {"", "default_class", "class of unclassified traffic, \"major:minor\" (hex)"},
        {"", "pacer_alive",
         "the daemon runs and its heartbeat is fresh (else TC passes traffic unpaced)"},
        {"", "config_gen", "bumped by every configuration change"},
        {"", "interval_ns", "stats: what the measured rates are measured over"},
        {"", "classes", "one object per class, by class id"},
        {"classes[]", "class", "\"major:minor\" (hex)"},
        {"classes[]", "kind",
         "paced, normal; deleted (still draining) or unconfigured (seen by TC only)"},
        {"classes[]", "rate_bps", "paced: the rate, L2 bit/s with FCS; 0 for normal"},
        {"classes[]", "parent", "class trees: the parent class (\"\": top level)"},
        {"classes[]", "ceil_bps",
         "class trees: what the class may borrow up to, bit/s (the rate "
         "when not set)"},
        {"classes[]", "prio", "class trees: lower borrows first (0..7)"},
        {"classes[]", "limit_bytes", "backlog limit in L2 bytes; 0: limit_ns or the default"},
        {"classes[]", "limit_ns", "backlog limit as time at the rate; 0: not set"},
        {"classes[]", "ce_threshold_ns",
         "ECT frames get ECN CE after waiting this long (flows on: in their flow; off: the "
         "FIFO's backlog at the rate); 0: the default"},
        {"classes[]", "ce_marking", "the class marks CE (paced, ce_threshold not off)"},
        {"classes[]", "burst_bytes",
         "clockless burst bound in L2 bytes; 0: burst_mtus or the attachment's default"},
        {"classes[]", "burst_mtus",
         "clockless burst bound in largest frames; 0: burst_bytes or the attachment's default"},
        {"classes[]", "flows", "per-flow queues with CoDel (true, the default) or one FIFO"},
        {"classes[]", "slot", "the class's index in pacer_stats and the daemon (1..131071)"},
        {"classes[]", "state",
         "served (the pacer has it), draining (deleted, queue emptying), unserved"},
        {"classes[]", "measured_rate_bps",
         "stats: tx_bytes over the interval, bit/s; null without one"},
    };
#define PSPXDP_DOC(name, help) k.push_back({"classes[]", #name, help});
    PSPXDP_CLASS_COUNTERS(PSPXDP_DOC)
    PSPXDP_TC_CLASS_COUNTERS(PSPXDP_DOC)
#undef PSPXDP_DOC
    k.push_back(
        {"", "daemon", "stats: the daemon's device-wide counters; null when it is not running"});
#define PSPXDP_DOC(name, help) k.push_back({"daemon", #name, help});
    PSPXDP_DAEMON_COUNTERS(PSPXDP_DOC)
#undef PSPXDP_DOC
    k.push_back({"", "tc", "stats: the TC classifier's counters (tc_stats)"});
#define PSPXDP_DOC(up, name, help) k.push_back({"tc", #name, help});
    PSPXDP_TC_COUNTERS(PSPXDP_DOC)
#undef PSPXDP_DOC
    k.push_back({"", "xdp", "stats: the XDP redirect's counters (xdp_stats)"});
#define PSPXDP_DOC(up, name, help) k.push_back({"xdp", #name, help});
    PSPXDP_XDP_COUNTERS(PSPXDP_DOC)
#undef PSPXDP_DOC
    const KeyDoc status[] = {
        {"status", "attached", "DEV is attached (false: see error)"},
        {"status", "error", "why there is nothing to show (only then)"},
        {"status", "pacer_veth", "the pacer veth pair [TC side, XDP side]"},
        {"status", "queues", "pacer rx queues"},
        {"status", "window_bytes", "how far the schedule may run ahead of real time"},
        {"status", "clsact_created", "attach created DEV's clsact qdisc (detach removes it)"},
        {"status", "daemon_pid", "the daemon's pid; 0: not running"},
        {"status", "heartbeat_age_ns", "since the daemon's last heartbeat; null: never beat"},
        {"status", "dead",
         "why DEV is not paced (daemon stopped or killed, DEV gone) and what to do; null when "
         "alive"},
        {"status", "clock",
         "what paces the wire: byte (gap frames) or clockless; null: no daemon counters"},
        {"status", "clock_reason",
         "why: forced (--clock) or auto from DEV's driver; null with clock"},
        {"status", "pause_share",
         "PAUSE gap frames' share of the wire's time while sending: gap_bytes / "
         "(wire_frame_bytes + gap_bytes + planned_idle_bytes), 0..1; null: "
         "nothing sent"},
        {"status", "lateness_wakeups",
         "wake-ups in the release-lateness histogram (the lateness pin); null: no such pin"},
        {"status", "lateness_p50_ns",
         "their median lateness, ns, from the histogram's buckets as histogram_quantile() "
         "computes it; null: none"},
        {"status", "lateness_p99_ns", "their 99th percentile, ns; null: none"},
        {"status", "lateness_max_ns", "the longest of them, ns; null: none"},
        {"status", "groups",
         "cluster mode: an object per group agent on DEV's classes: group, classid, host, phase, "
         "epoch, applied_bps, demand_bps, etcd_reachable, lease_safe, safe_allocation_bps, "
         "holding_safe_allocation (at most its floor without etcd), rate_changes, pid, "
         "updated_ns"},
        {"status", "scheduling",
         "the daemon's scheduling as the kernel has it: policy (normal, fifo, deadline), "
         "priority, runtime_ns, period_ns, reclaim; null: no daemon"},
        {"status", "lost_wire_share",
         "share of the wire's time the daemon lost by running late in its last second "
         "(lost_wire_ppm / 10^6), 0..1; null: no daemon counters"},
    };
    k.insert(k.end(), std::begin(status), std::end(status));
    return k;
}

int print_key_docs() {
    std::printf("| object | key | meaning |\n|---|---|---|\n");
    for (const auto &d : key_docs())
        std::printf("| %s | `%s` | %s |\n", d.where[0] ? d.where : "top", d.key, d.meaning);
    return 0;
}

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

} // namespace

Result<Snapshot> take(const control::Device &d) {
    Snapshot s;
    auto st = d.state();
    if (!st) return st.failure();
    // The heartbeat's age is judged at t_ns: the time it was read, not
    // after reading 100,000 classes.
    s.t_ns = common::mono_ns();
    auto classes = d.classes();
    if (!classes) return classes.failure();
    auto counters = d.counters();
    if (!counters) return counters.failure();
    s.st = *st;
    s.classes = std::move(classes.value());
    s.counters = *counters;
    if (auto paths = common::paths_for(d.name())) s.daemon_pid = setup::running_pid(*paths);
    return s;
}

bool pacer_alive(pid_t daemon_pid, const pspxdp_pacer_state &st, uint64_t now_ns) {
    return daemon_pid && pspxdp_pacer_alive(&st, now_ns);
}

bool pacer_alive(const Snapshot &s) { return pacer_alive(s.daemon_pid, s.st, s.t_ns); }

void print_device(Printer &p, const std::string &dev, const Snapshot &s, const Snapshot *before,
                  bool stats, bool detail) {
    const uint64_t dt = before ? s.t_ns - before->t_ns : 0;
    uint64_t paced = 0;
    for (const auto &c : s.classes)
        if (c.configured && c.config.kind == PSPXDP_CLASS_PACED &&
            !pspxdp_classid_raw(c.config.parent))
            paced += c.config.rate_bps; // a tree's children share their parent's rate
    p.string("dev", dev, "dev %s ");
    p.rate("line_rate", s.st.line_rate_bps);
    p.rate("paced", paced);
    p.string("default_class",
             format_classid(ClassId::from_raw(pspxdp_classid_raw(s.st.default_classid))),
             "default %s ");
    const bool alive = pacer_alive(s);
    p.boolean("pacer_alive", alive,
              alive ? "pacer alive " : "pacer NOT running (TC passes unpaced) ");
    p.u64("config_gen", s.st.config_gen);
    if (stats && dt)
        p.value("interval_ns", dt, fixed(double(dt) / 1e6, 1) + "ms", "interval %s ");
    else if (stats)
        p.null("interval_ns");
    p.newline();
    p.open_array("classes");
    for (const auto &c : s.classes) {
        const control::ClassInfo *b = nullptr;
        if (before)
            for (const auto &x : before->classes)
                if (x.classid == c.classid) b = &x;
        print_class(p, c, b, dt, stats, detail);
    }
    p.close_array();
    if (!stats) return;
    const auto &k = s.counters;
    if (!detail && !p.json()) {
        if (k.have_daemon)
            print_nonzero(p, "daemon", [&](auto put) {
#define PSPXDP_PUT(name, help) put(#name, k.daemon.name);
                PSPXDP_DAEMON_COUNTERS(PSPXDP_PUT)
#undef PSPXDP_PUT
            });
        else
            p.text("daemon: no counters (not running)\n");
        print_nonzero(p, "tc", [&](auto put) {
#define PSPXDP_PUT(up, name, help) put(#name, k.tc.name);
            PSPXDP_TC_COUNTERS(PSPXDP_PUT)
#undef PSPXDP_PUT
        });
        print_nonzero(p, "xdp", [&](auto put) {
#define PSPXDP_PUT(up, name, help) put(#name, k.xdp.name);
            PSPXDP_XDP_COUNTERS(PSPXDP_PUT)
#undef PSPXDP_PUT
        });
        return;
    }
    if (k.have_daemon) {
        p.open_object("daemon");
        p.text("daemon ");
#define PSPXDP_PRINT_D(name, help) p.u64(#name, k.daemon.name);
        PSPXDP_DAEMON_COUNTERS(PSPXDP_PRINT_D)
#undef PSPXDP_PRINT_D
        p.newline();
        p.close_object();
    } else {
        p.text("daemon: no counters (not running)\n");
        p.null("daemon");
    }
    p.open_object("tc");
    p.text("tc ");
#define PSPXDP_PRINT_TC(up, name, help) p.u64(#name, k.tc.name);
    PSPXDP_TC_COUNTERS(PSPXDP_PRINT_TC)
    p.newline();
    p.close_object();
    p.open_object("xdp");
    p.text("xdp ");
#undef PSPXDP_PRINT_TC
#define PSPXDP_PRINT_XDP(up, name, help) p.u64(#name, k.xdp.name);
    PSPXDP_XDP_COUNTERS(PSPXDP_PRINT_XDP)
#undef PSPXDP_PRINT_XDP
    p.newline();
    p.close_object();
}

int show_device(const std::string *dev, const ShowOptions &o) {
    auto d = control::open_device(dev, control::Access::Read);
    if (!d) return fail(d);
    auto prev = take(*d);
    if (!prev) return fail(prev);
    if (o.prometheus) {
        const std::string text = format_prometheus(d->name(), *prev, o.prom);
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }
    const uint64_t first_wait = o.watch_ns ? o.watch_ns : o.interval_ns;
    if (o.watch_ns) {
        std::signal(SIGINT, on_signal);
        std::signal(SIGTERM, on_signal);
    }
    for (uint64_t n = 0;; ++n) {
        const uint64_t wait = n == 0 ? first_wait : o.watch_ns;
        std::optional<Snapshot> before;
        if (o.stats && wait) {
            sleep_ns(wait);
            if (g_stop) return 0;
            before = std::move(prev.value());
            prev = take(*d);
            if (!prev) return fail(prev);
        }
        Printer p(o.json);
        p.wrap(100, " ");
        p.open_object();
        print_device(p, d->name(), *prev, before ? &*before : nullptr, o.stats, o.detail);
        p.close_object();
        p.print(stdout);
        std::fflush(stdout);
        if (!o.watch_ns || g_stop || (o.count && n + 1 >= o.count)) return 0;
        if (!o.json) std::printf("\n");
    }
}

namespace {

ShowOptions show_options(const Args &args, bool stats) {
    ShowOptions o;
    o.stats = stats || args.flag("stats");
    o.json = args.flag("json") || args.choice("format") == 1;
    o.prometheus = args.choice("format") == 2;
    o.prom = prom_options(args);
    o.interval_ns = args.number("interval");
    if (args.has("watch")) {
        o.watch_ns = args.number("watch");
        o.stats = true;
    }
    o.count = args.number("count");
    o.detail = !stats || args.flag("detail"); // show -s: every counter, as before
    return o;
}

int run_show(const Args &args) {
    const auto &p = args.positional;
    return show_device(p.empty() ? nullptr : &p[0], show_options(args, false));
}

int run_stats(const Args &args) {
    if (args.flag("keys")) return print_key_docs();
    const auto &p = args.positional;
    return show_device(p.empty() ? nullptr : &p[0], show_options(args, true));
}

const std::vector<Option> kShowOptions = {
    flag("stats", 's', "with counters and measured rates (as tc -s)"),
    flag("json", 'j', "print JSON: raw numbers, units in the keys (pspxdp stats --keys)"),
    flag("detail", 'd',
         "stats: every counter of every class (the default text is one line per class: "
         "tx_frames, tx_bytes, backlog_frames, drop_* summed, ce_marked, tc_passed, a paced "
         "class's late_lost_ns and empty_ns with their shares of the interval (a class short "
         "of its rate: the pacer's late wake-ups or an empty queue); and the device-wide "
         "counters that are not 0); JSON always has every counter"),
    opt(OptType::Duration, "interval", 'i', "SECONDS", "measure rates over SECONDS before printing")
        .by_default(200'000'000)
        .bare_unit(1'000'000'000)
        .within(0, 60'000'000'000),
    opt(OptType::Duration, "watch", 'w', "SECONDS",
        "print again every SECONDS (rates over that interval) until interrupted")
        .bare_unit(1'000'000'000)
        .within(100'000'000, 3600'000'000'000),
    opt(OptType::Integer, "count", 'c', "N", "with --watch: stop after N prints (0: never)")
        .by_default(0),
    opt(OptType::Choice, "format", 0, nullptr,
        "text, json (-j) or prometheus: the text exposition format, one snapshot, per-class "
        "series for --max-classes classes (node_exporter's textfile collector)")
        .one_of({"text", "json", "prometheus"})
        .by_default(std::string("text")),
    max_classes_option(),
    prom_class_option(),
    flag("keys", 0, "print every JSON key with its meaning (a markdown table) and exit"),
};

const char *kShowDetails =
    "Per class: kind (paced, normal), rate, limit, ce_threshold, slot and whether\n"
    "the pacer serves it. With -s (stats): the measured rate over the interval,\n"
    "the pacer's counters (rx_*, tx_*, backlog_*, ce_marked, drop_* by cause) and\n"
    "the classifier's (tc_*); then the device-wide counters of the daemon (wire and\n"
    "gap frames and bytes, underruns, ...), of TC (tc_stats) and of XDP (xdp_stats).\n"
    "Byte counters count L2 bytes with FCS, except tc_skb_bytes (skb bytes) and\n"
    "the wire_*/gap_* bytes (wire bytes: with preamble and inter-frame gap).\n"
    "Every counter has the name bpftool prints for it (bpftool map dump pinned\n"
    "/sys/fs/bpf/pspxdp/DEV/MAP). Reading needs read permission on the pins only.\n"
    "DEV may be left out when exactly one device is attached.";

} // namespace

const Command kShow = {
    "show",
    "[DEV] [-s] [-j]",
    "show the classes of an attached device (tc class show)",
    kShowDetails,
    kShowOptions,
    0,
    1,
    run_show,
};

const Command kStats = {
    "stats",
    "[DEV] [-j] [--watch SECONDS]",
    "show the classes and counters of a device (tc -s)",
    kShowDetails,
    kShowOptions,
    0,
    1,
    run_stats,
};

} // namespace pspxdp::cli
