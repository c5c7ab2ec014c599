// pspxdp class set|del|show: the class_config map of an attached device.
#include "cli/command.hpp"
#include "common/clock.hpp"
#include "control/control.hpp"
#include "core/quote.hpp"
#include "core/units.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <ctime>
#include <string>

namespace pspxdp::cli {

using control::ClassInfo;

static const char *kind_name(const ClassInfo &c) {
    if (!c.configured) return "unconfigured";
    return c.config.kind == PSPXDP_CLASS_PACED ? "paced" : "normal";
}

static int show(const control::Device &dev, bool json) {
    auto st = dev.state();
    if (!st) return fail(st.error());
    auto classes = dev.classes();
    if (!classes) return fail(classes.error());
    const uint64_t now = common::mono_ns();
    const bool alive = pspxdp_pacer_alive(&*st, now);
    uint64_t paced_sum = 0;
    for (const auto &c : *classes)
        if (c.configured && c.config.kind == PSPXDP_CLASS_PACED) paced_sum += c.config.rate_bps;
    const std::string def = format_classid(ClassId::from_raw(pspxdp_classid_raw(st->default_classid)));

    if (json) {
        std::printf("{\"dev\":\"%s\",\"line_rate_bps\":%llu,\"paced_sum_bps\":%llu,"
                    "\"default_class\":\"%s\",\"pacer_alive\":%s,\"classes\":[",
                    dev.name().c_str(), (unsigned long long)st->line_rate_bps,
                    (unsigned long long)paced_sum, def.c_str(), alive ? "true" : "false");
        bool first = true;
        for (const auto &c : *classes) {
            std::printf("%s{\"class\":\"%s\",\"kind\":\"%s\",\"rate_bps\":%llu,\"slot\":%u,"
                        "\"packets\":%llu,\"bytes\":%llu,\"pass_packets\":%llu,"
                        "\"redirect_errors\":%llu",
                        first ? "" : ",", format_classid(ClassId::from_raw(c.classid)).c_str(),
                        kind_name(c), (unsigned long long)c.config.rate_bps, c.config.slot,
                        (unsigned long long)c.tc.tc_packets, (unsigned long long)c.tc.tc_skb_bytes,
                        (unsigned long long)c.tc.tc_passed,
                        (unsigned long long)c.tc.tc_errors);
            if (c.has_pacer)
                std::printf(",\"tx_frames\":%llu,\"tx_bytes\":%llu,\"rx_frames\":%llu,"
                            "\"drops\":%llu,\"backlog\":%llu",
                            (unsigned long long)c.pacer.tx_frames,
                            (unsigned long long)c.pacer.tx_bytes,
                            (unsigned long long)c.pacer.rx_frames,
                            (unsigned long long)control::total_drops(c.pacer),
                            (unsigned long long)c.pacer.backlog_frames);
            std::printf("}");
            first = false;
        }
        std::printf("]}\n");
        return 0;
    }

    std::printf("%s: line rate %s, paced %s, default class %s, pacer %s\n", dev.name().c_str(),
                st->line_rate_bps ? format_rate(st->line_rate_bps).c_str() : "unknown",
                format_rate(paced_sum).c_str(), def.c_str(), alive ? "alive" : "NOT RUNNING");
    std::printf("%-11s %-12s %-10s %5s %12s %14s %10s %12s %14s %10s %8s\n", "class", "kind",
                "rate", "slot", "packets", "bytes", "passed", "tx_frames", "tx_bytes", "drops",
                "backlog");
    for (const auto &c : *classes) {
        const std::string rate = c.configured && c.config.kind == PSPXDP_CLASS_PACED
                                     ? format_rate(c.config.rate_bps)
                                     : std::string("-");
        std::printf("%-11s %-12s %-10s %5u %12llu %14llu %10llu %12llu %14llu %10llu %8llu\n",
                    format_classid(ClassId::from_raw(c.classid)).c_str(), kind_name(c),
                    rate.c_str(), c.config.slot, (unsigned long long)c.tc.tc_packets,
                    (unsigned long long)c.tc.tc_skb_bytes, (unsigned long long)c.tc.tc_passed,
                    (unsigned long long)c.pacer.tx_frames, (unsigned long long)c.pacer.tx_bytes,
                    (unsigned long long)control::total_drops(c.pacer),
                            (unsigned long long)c.pacer.backlog_frames);
    }
    return 0;
}

// The class and its rate (or "normal") of one "CLASSID RATE|normal" pair.
static Result<control::Device::ClassSpec> class_spec(const std::string &id_word,
                                                     const std::string &rate_word) {
    auto id = parse_classid(id_word);
    if (!id) return Error{id.error()};
    if (rate_word == "normal") return control::Device::ClassSpec{id->raw(), PSPXDP_CLASS_NORMAL, 0};
    auto r = parse_rate_bps(rate_word);
    if (!r) return Error{r.error()};
    return control::Device::ClassSpec{id->raw(), PSPXDP_CLASS_PACED, *r};
}

// class set DEV --file FILE: one "CLASSID RATE|normal" per line ('#' starts a
// comment), all set at once; nothing is set when a line is wrong.
static int set_from_file(control::Device &dev, const std::string &path) {
    std::ifstream in(path);
    if (!in) return fail("class set: --file \"" + path + "\": cannot open it");
    std::vector<control::Device::ClassSpec> specs;
    std::string line;
    for (size_t no = 1; std::getline(in, line); ++no) {
        line = line.substr(0, line.find('#'));
        std::istringstream words(line);
        std::string id, rate, extra;
        if (!(words >> id)) continue;
        if (!(words >> rate) || (words >> extra))
            return fail("class set: " + path + ":" + std::to_string(no) +
                        ": expected \"CLASSID RATE|normal\"");
        auto spec = class_spec(id, rate);
        if (!spec) return fail("class set: " + path + ":" + std::to_string(no) + ": " + spec.error());
        specs.push_back(*spec);
    }
    if (auto r = dev.class_set_many(std::move(specs)); !r) return fail(r.error());
    return 0;
}

static int run(const Args &args) {
    const auto &p = args.positional;
    const std::string verb = p[0];
    // Without DEV the word count is one less; DEV may be left out when
    // exactly one device is attached.
    size_t want = 0;
    const bool from_file = verb == "set" && args.has("file");
    if (verb == "set") want = from_file ? 1 : 3;
    else if (verb == "del" || verb == "delete") want = 2;
    else if (verb == "show" || verb == "list") want = 1;
    else return fail("class: unknown action \"" + verb + "\" (set, del, show)");
    const size_t n = p.size() - 1;
    if (n != want && n + 1 != want)
        return fail("class " + verb + ": usage: pspxdp class " + verb +
                    (verb == "set" ? " [DEV] CLASSID RATE|normal"
                     : verb == "show" || verb == "list" ? " [DEV] [-j]"
                                                        : " [DEV] CLASSID"));
    const bool has_dev = n == want;
    // "class set DEV 1:1": DEV is no class id but 1:1 is - the rate is missing.
    if (verb == "set" && !has_dev && !parse_classid(p[1]) && parse_classid(p[2]))
        return fail_input("class set: no RATE after " + quote(p[2]) +
                          " (pspxdp class set [DEV] CLASSID RATE|normal)");
    const bool read_only = verb == "show" || verb == "list";
    auto dev = control::open_device(has_dev ? &p[1] : nullptr,
                                    read_only ? common::Access::Read : common::Access::Write);
    if (!dev) return fail(dev.error());
    const size_t at = has_dev ? 2 : 1;

    if (verb == "show" || verb == "list") return show(*dev, args.has("json"));
    if (from_file) return set_from_file(dev.value(), args.get("file"));

    if (verb == "set") {
        auto spec = class_spec(p[at], p[at + 1]);
        if (!spec) return fail(spec.error());
        if (auto r = dev.value().class_set(spec->classid, spec->kind, spec->rate_bps); !r)
            return fail(r.error());
        return 0;
    }
    auto id = parse_classid(p[at]);
    if (!id) return fail(id.error());
    if (auto r = dev.value().class_del(id->raw()); !r) return fail(r.error());
    return 0;
}

const Command kClass = {
    "class",
    "set [DEV] CLASSID RATE|normal | set [DEV] --file FILE | del [DEV] CLASSID | show [DEV] [-j]",
    "configure the classes of an attached device",
    "CLASSID is tc's major:minor in hex (1:1, 1:a). RATE uses tc units: 500mbit,\n"
    "8kbit, 1gbit; \"bps\" suffixes are BYTES per second as in tc (10mbps = 80mbit).\n"
    "\"normal\" makes an unpaced class that fills the gaps between paced frames.\n"
    "A paced class is refused if the paced rates would sum above the line rate.\n"
    "A class still used by a filter, or the default class, cannot be deleted.\n"
    "DEV may be left out when exactly one device is attached.\n"
    "Per-CPU counters are summed; bpftool map dump pinned\n"
    "/sys/fs/bpf/pspxdp/DEV/class_stats shows them raw.",
    {{"json", 'j', nullptr, "show: print JSON"},
     {"file", 'f', "FILE",
      "set: the classes of FILE, one \"CLASSID RATE|normal\" a line, all at once"}},
    1,
    4,
    run,
};

} // namespace pspxdp::cli
