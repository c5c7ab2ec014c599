// pspxdp stats --format prometheus and pspxdp exporter: one snapshot
// (show.hpp's take) in the Prometheus text exposition format, the one code
// path for node_exporter's textfile collector and for scrapes.
// Every metric name and HELP comes from the X-macro lists of shared.h: a
// counter named there is pspxdp_<group>_<name>[_total] here, with _ns
// counters in seconds (Prometheus' base unit).
//
// Not the Printer (output.hpp): text and JSON walk the device class by
// class, while the exposition format wants every sample of one metric
// together under its HELP and TYPE, so this walks metric by metric.
#include "cli/show.hpp"
#include "common/lateness.hpp"
#include "core/units.hpp"
#include "daemon/wire_clock.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>

namespace pspxdp::cli {

namespace {

constexpr std::string_view kNs = "_ns";

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// HELP text escapes backslash and newline; label values also the quote.
std::string escaped(std::string_view s, bool label) {
    std::string out;
    for (char c : s) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (label && c == '"')
            out += "\\\"";
        else
            out += c;
    }
    return out;
}

// Counters of shared.h that are not counts but states of now: gauges.
bool is_gauge(std::string_view name) {
    return name.substr(0, 8) == "backlog_" || name == "late_max_ns" || name == "clockless" ||
           name == "clock_forced" || name == "gap_horizon_ns" || name == "lost_wire_ppm" ||
           name == "active_flows" || name == "sparse_flows" || name == "bulk_flows";
}

// A value in the metric's base unit: ns counters become seconds, and
// 2^64-1 (gap_horizon_ns inf) +Inf.
std::string sample(std::string_view name, uint64_t v) {
    if (!ends_with(name, kNs)) return std::to_string(v);
    if (v == UINT64_MAX) return "+Inf";
    char b[40];
    std::snprintf(b, sizeof b, "%.9f", double(v) / 1e9);
    return b;
}

struct Family {
    std::string metric; // with pspxdp_ and the unit/_total suffix
    bool gauge;
};

Family family(std::string_view group, std::string_view counter, bool gauge) {
    std::string n = "pspxdp_" + std::string(group) + "_";
    if (ends_with(counter, kNs))
        n += std::string(counter.substr(0, counter.size() - kNs.size())) + "_seconds";
    else
        n += counter;
    if (!gauge) n += "_total";
    return {n, gauge};
}

void head(std::string &out, const Family &f, std::string_view help,
          std::string_view unit_note = {}) {
    out += "# HELP " + f.metric + " " + escaped(help, false) + std::string(unit_note) + "\n";
    out += "# TYPE " + f.metric + (f.gauge ? " gauge\n" : " counter\n");
}

void line(std::string &out, const std::string &name, const std::string &labels,
          const std::string &v) {
    out += name + "{" + labels + "} " + v + "\n";
}

// The daemon's release-lateness histogram (common/lateness.hpp) as a
// Prometheus histogram: cumulative buckets with le in seconds, _sum, _count;
// and its max as a gauge.
void lateness_histogram(std::string &out, const std::string &dl, const pspxdp_lateness &h) {
    const Family f{"pspxdp_release_lateness_seconds", true};
    out += "# HELP " + f.metric +
           " how late the daemon resumed from a wait for a paced frame: against the frame's "
           "due time clockless, against the planned wake-up on the byte clock\n";
    out += "# TYPE " + f.metric + " histogram\n";
    uint64_t cumulative = 0;
    for (unsigned i = 0; i < PSPXDP_LATENESS_BUCKETS; ++i) {
        cumulative += h.bucket[i];
        std::string le = "+Inf";
        if (i + 1 < PSPXDP_LATENESS_BUCKETS) {
            char b[32];
            std::snprintf(b, sizeof b, "%g", double(common::lateness_bound_ns(i)) / 1e9);
            le = b;
        }
        line(out, f.metric + "_bucket", dl + ",le=\"" + le + "\"", std::to_string(cumulative));
    }
    line(out, f.metric + "_sum", dl, sample(kNs, h.sum_ns));
    line(out, f.metric + "_count", dl, std::to_string(cumulative));
    const Family m{"pspxdp_release_lateness_max_seconds", true};
    head(out, m, "the longest of those lateness samples");
    line(out, m.metric, dl, sample(kNs, h.max_ns));
}

} // namespace

Option max_classes_option() {
    return opt(OptType::Integer, "max-classes", 0, "N",
               "Prometheus: per-class series for at most N classes, the first ones or those of "
               "--class (device-wide sums cover all; pspxdp_classes_omitted counts the rest)")
        .by_default(1000)
        .within(0, PSPXDP_MAX_CLASSES);
}

Option prom_class_option() {
    return opt(OptType::ClassId, "class", 0, "CLASSID",
               "Prometheus: per-class series for this class (repeatable; within --max-classes); "
               "default: the first classes")
        .repeat();
}

PromOptions prom_options(const Args &args) {
    PromOptions o;
    o.max_classes = args.number("max-classes");
    if (auto it = args.given.find("class"); it != args.given.end())
        for (const OptValue &v : it->second) o.classes.push_back(std::get<ClassId>(v).raw());
    return o;
}

std::string format_prometheus(const std::string &dev, const Snapshot &s, const PromOptions &o) {
    std::string out;
    const std::string dl = "dev=\"" + escaped(dev, true) + "\"";
    // The classes with per-class series: the first max_classes, or those of
    // o.classes (the same order: s.classes is sorted by class id).
    std::vector<const control::ClassInfo *> picked;
    const std::unordered_set<uint32_t> wanted(o.classes.begin(), o.classes.end());
    for (const auto &c : s.classes) {
        if (picked.size() >= o.max_classes) break;
        if (wanted.empty() || wanted.count(c.classid)) picked.push_back(&c);
    }
    const size_t shown = picked.size();
    std::vector<std::string> class_labels;
    for (const auto *c : picked) {
        // Class trees (design §3.12): a class under another carries its
        // parent, as tc_exporter's habit is; a top-level class has none.
        const uint32_t parent = pspxdp_classid_raw(c->config.parent);
        class_labels.push_back(
            dl + ",class=\"" + format_classid(ClassId::from_raw(c->classid)) + "\"" +
            (parent ? ",parent=\"" + format_classid(ClassId::from_raw(parent)) + "\"" : ""));
    }
    const char *in_s = "; exposed in seconds";

    // Per class, one family per counter; and, device-wide whatever
    // --max-classes left out, the same counters summed over the classes.
    // The sums are gauges: a deleted class takes its share out of them, which
    // rate() would read as a counter reset.
    auto per_class = [&](std::string_view counter, std::string_view help, auto get) {
        const bool gauge = is_gauge(counter);
        const Family f = family("class", counter, gauge);
        head(out, f, help, ends_with(counter, kNs) ? in_s : "");
        for (size_t i = 0; i < shown; ++i)
            line(out, f.metric, class_labels[i], sample(counter, get(*picked[i])));
        const Family sum = family("classes", counter, true);
        head(out, sum, std::string(help) + "; summed over all classes now");
        uint64_t total = 0;
        for (const auto &c : s.classes) total += get(c);
        line(out, sum.metric, dl, sample(counter, total));
    };
#define PSPXDP_PROM(name, help)                                                                    \
    per_class(#name, help, [](const control::ClassInfo &c) { return uint64_t(c.pacer.name); });
    PSPXDP_CLASS_COUNTERS(PSPXDP_PROM)
#undef PSPXDP_PROM
#define PSPXDP_PROM(name, help)                                                                    \
    per_class(#name, help, [](const control::ClassInfo &c) { return uint64_t(c.tc.name); });
    PSPXDP_TC_CLASS_COUNTERS(PSPXDP_PROM)
#undef PSPXDP_PROM

    // Rates as bytes per second (Prometheus' base unit for data is the
    // byte): directly comparable to rate(pspxdp_class_tx_bytes_total[..]),
    // which counts the same L2 bytes with FCS.
    {
        const Family f{"pspxdp_class_rate_bytes_per_second", true};
        head(out, f, "the class's configured rate (L2 bytes with FCS); 0: a normal class");
        for (size_t i = 0; i < shown; ++i) {
            const auto &c = *picked[i];
            const bool paced = c.configured && c.config.kind == PSPXDP_CLASS_PACED;
            line(out, f.metric, class_labels[i], sample("", paced ? c.config.rate_bps / 8 : 0));
        }
        const Family ceil{"pspxdp_class_ceil_bytes_per_second", true};
        head(out, ceil,
             "what the class may send borrowing from its parent (class trees; its rate when no "
             "ceil is set); 0: a normal class");
        for (size_t i = 0; i < shown; ++i) {
            const auto &c = *picked[i];
            const bool paced = c.configured && c.config.kind == PSPXDP_CLASS_PACED;
            const uint64_t ceil_bps = c.config.ceil_bps ? c.config.ceil_bps : c.config.rate_bps;
            line(out, ceil.metric, class_labels[i], sample("", paced ? ceil_bps / 8 : 0));
        }
        const Family l{"pspxdp_line_rate_bytes_per_second", true};
        head(out, l, "the wire's rate M (L2 bytes with FCS)");
        line(out, l.metric, dl, sample("", s.st.line_rate_bps / 8));
    }
    {
        const Family n{"pspxdp_classes", true};
        head(out, n, "classes on the device (configured or seen by TC)");
        line(out, n.metric, dl, std::to_string(s.classes.size()));
        const Family om{"pspxdp_classes_omitted", true};
        head(out, om,
             "classes without per-class series here (--max-classes, --class); in the sums all "
             "the same");
        line(out, om.metric, dl, std::to_string(s.classes.size() - shown));
        if (shown < s.classes.size())
            out += "# " + std::to_string(s.classes.size() - shown) + " classes left out (" +
                   (wanted.empty() ? "" : "--class, ") + "--max-classes " +
                   std::to_string(o.max_classes) + ")\n";
    }
    {
        const bool alive = pacer_alive(s); // status's verdict, word for word
        const Family a{"pspxdp_pacer_alive", true};
        head(out, a, "1: the daemon runs and its heartbeat is fresh; 0: TC passes traffic unpaced");
        line(out, a.metric, dl, alive ? "1" : "0");
        const Family pd{"pspxdp_prio_direct", true};
        head(out, pd,
             "1: skb->priority (SO_PRIORITY) naming a class picks it before the filters "
             "(pspxdp change DEV prio-direct); 0: off");
        line(out, pd.metric, dl, s.st.flags & PSPXDP_STATE_F_PRIO_DIRECT_OFF ? "0" : "1");
        const Family h{"pspxdp_heartbeat_age_seconds", true};
        head(out, h, "since the daemon's last heartbeat; NaN: it never beat");
        const uint64_t hb = s.st.heartbeat_ns;
        line(out, h.metric, dl, hb == 0 ? "NaN" : sample(kNs, s.t_ns > hb ? s.t_ns - hb : 0));
    }

    const auto &k = s.counters;
    if (k.have_daemon) {
        const Family f{"pspxdp_clock_info", true};
        head(out, f,
             "what paces the wire (byte: gap frames; clockless), whether forced, and the gap "
             "horizon in seconds");
        line(out, f.metric,
             dl + ",clock=\"" + (k.daemon.clockless ? "clockless" : "byte") + "\",clock_forced=\"" +
                 (k.daemon.clock_forced ? "true" : "false") + "\",gap_horizon_seconds=\"" +
                 sample(kNs, k.daemon.gap_horizon_ns) + "\"",
             "1");
#define PSPXDP_PROM(name, help)                                                                    \
    {                                                                                              \
        const Family d = family("daemon", #name, is_gauge(#name));                                 \
        head(out, d, help, ends_with(#name, kNs) ? in_s : "");                                     \
        line(out, d.metric, dl, sample(#name, k.daemon.name));                                     \
    }
        PSPXDP_DAEMON_COUNTERS(PSPXDP_PROM)
#undef PSPXDP_PROM
    } else {
        out += "# no daemon counters: the daemon is not running\n";
    }
    if (k.have_lateness) lateness_histogram(out, dl, k.lateness);
#define PSPXDP_PROM(group, up, name, help)                                                         \
    {                                                                                              \
        const Family d = family(#group, #name, false);                                             \
        head(out, d, help);                                                                        \
        line(out, d.metric, dl, sample(#name, k.group.name));                                      \
    }
#define PSPXDP_PROM_TC(up, name, help) PSPXDP_PROM(tc, up, name, help)
#define PSPXDP_PROM_XDP(up, name, help) PSPXDP_PROM(xdp, up, name, help)
    PSPXDP_TC_COUNTERS(PSPXDP_PROM_TC)
    PSPXDP_XDP_COUNTERS(PSPXDP_PROM_XDP)
#undef PSPXDP_PROM_TC
#undef PSPXDP_PROM_XDP
#undef PSPXDP_PROM
    return out;
}

} // namespace pspxdp::cli
