// pspxdp filter add|del|show: conjunctive filters (control/filter*.hpp).
#include "cli/command.hpp"
#include "control/config.hpp"
#include "control/control.hpp"
#include "core/quote.hpp"
#include "core/units.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace pspxdp::cli {

namespace {

nlohmann::json to_json(const control::FilterInfo &info, bool with_stats) {
    const control::FilterSpec &s = info.filter.spec;
    nlohmann::json j;
    j["id"] = info.filter.id;
    j["pref"] = s.pref;
    if (s.src) j["src"] = control::format_prefix(*s.src);
    if (s.dst) j["dst"] = control::format_prefix(*s.dst);
    if (s.proto) j["proto"] = *s.proto;
    if (s.sport) j["sport_min"] = s.sport->min, j["sport_max"] = s.sport->max;
    if (s.dport) j["dport_min"] = s.dport->min, j["dport_max"] = s.dport->max;
    if (s.vlan) j["vlan"] = *s.vlan;
    if (s.dscp) j["dscp"] = *s.dscp;
    if (s.mark) j["mark"] = s.mark->value, j["mark_mask"] = s.mark->mask;
    if (s.cgroup) {
        j["cgroup"] = s.cgroup->path;
        j["cgroup_id"] = s.cgroup->id;
        j["cgroup_level"] = s.cgroup->level;
        j["cgroup_gone"] = info.cgroup_gone;
    }
    j["classid"] = format_classid(s.classid);
    j["filter"] = control::format_filter(s);
    if (with_stats) {
#define PSPXDP_JSON(name, help) j[#name] = info.stats.name;
        PSPXDP_FILTER_COUNTERS(PSPXDP_JSON)
#undef PSPXDP_JSON
    }
    return j;
}

int show(const control::Device &dev, bool with_stats, bool json) {
    auto infos = dev.filter_infos(with_stats);
    if (!infos) return fail(infos);
    if (json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto &info : *infos) out.push_back(to_json(info, with_stats));
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    for (const auto &info : *infos) {
        // A comment, so the line stays what filter add and a configuration file read.
        std::printf("%s%s\n", control::format_filter(info.filter.spec).c_str(),
                    info.cgroup_gone ? "  # the cgroup no longer exists: matches nothing" : "");
        if (with_stats) {
            std::string line;
#define PSPXDP_TEXT(name, help) line += " " #name " " + std::to_string(info.stats.name);
            PSPXDP_FILTER_COUNTERS(PSPXDP_TEXT)
#undef PSPXDP_TEXT
            std::printf(" %s\n", line.c_str());
        }
    }
    return 0;
}

int run(const Args &args) {
    const auto &p = args.positional;
    const std::string verb = p[0];
    if (verb != "add" && verb != "del" && verb != "delete" && verb != "show" && verb != "list") {
        return fail("filter: unknown action " + quote(verb) + " (add, del, show)", 2);
    }
    std::vector<std::string> words(p.begin() + 1, p.end());
    // DEV is the first word unless that word already starts the filter; it
    // may be left out when exactly one device is attached.
    const bool has_dev = !words.empty() && !control::is_filter_word(words[0]);
    const bool read_only = verb == "show" || verb == "list";
    auto dev = control::open_device(has_dev ? &words[0] : nullptr,
                                    read_only ? control::Access::Read : control::Access::Change);
    if (!dev) return fail(dev);
    if (has_dev) words.erase(words.begin());
    const std::span<const std::string> rest(words);

    if (verb == "show" || verb == "list") {
        if (!words.empty()) {
            return fail("filter show: unexpected " + quote(words[0]), 2);
        }
        return show(*dev, args.flag("stats"), args.flag("json"));
    }
    if (verb == "add" && args.has("file")) {
        // Many filters as one change: checked whole, then the classifier
        // flips to the old filters plus these at once (replace_filters).
        if (!words.empty()) return fail("filter add: --file and a filter on the command line", 2);
        auto text = control::read_text(args.text("file"));
        if (!text) return fail(text);
        auto current = dev.value().filter_infos(false);
        if (!current) return fail(current);
        std::vector<control::FilterSpec> all;
        for (const auto &i : *current) all.push_back(i.filter.spec);
        // Duplicates are named here, by what the user can find: the file's
        // line, and an existing filter's id as filter show -j prints it.
        std::vector<std::pair<size_t, control::FilterSpec>> added; // line, filter
        auto read = control::for_each_statement(
            *text, [&](size_t line, std::span<const std::string> lw) -> Result<void> {
                auto spec = control::parse_filter(lw);
                if (!spec) return refuse(spec.error());
                for (const auto &i : *current)
                    if (control::same_identity(i.filter.spec, *spec))
                        return refuse("filter \"" + control::format_filter(*spec) +
                                      "\": duplicate of the existing filter id " +
                                      std::to_string(i.filter.id) + " \"" +
                                      control::format_filter(i.filter.spec) +
                                      "\" (same fields and pref)");
                for (const auto &[l, f] : added)
                    if (control::same_identity(f, *spec))
                        return refuse("filter \"" + control::format_filter(*spec) +
                                      "\": duplicate of line " + std::to_string(l) +
                                      " (same fields and pref)");
                added.emplace_back(line, *spec);
                all.push_back(*spec);
                return {};
            });
        if (!read) return fail(args.text("file") + ": " + read.error(), 2);
        if (auto r = dev.value().replace_filters(all); !r) return fail(r);
        return 0;
    }
    if (verb == "add") {
        auto spec = control::parse_filter(rest);
        if (!spec) return fail(spec);
        if (auto r = dev.value().filter_add(*spec); !r) return fail(r);
        return 0;
    }
    auto sel = control::parse_filter_select(rest);
    if (!sel) return fail(sel);
    if (auto r = dev.value().filter_del(*sel); !r) return fail(r);
    return 0;
}

} // namespace

const Command kFilter = {
    "filter",
    "add [DEV] [pref N] FIELD... classid X:Y | del [DEV] (FIELD... | pref N) | show [DEV] [-s] "
    "[-j]",
    "steer traffic of an attached device into classes",
    "FIELDs (any combination, at least one; src and dst of one family):\n"
    "  src PREFIX | dst PREFIX      IPv4 or IPv6, e.g. 10.1.2.0/24, 2001:db8::/32\n"
    "  proto NAME|NUMBER            tcp udp icmp icmpv6 sctp udplite gre esp ah igmp, 0..255\n"
    "  sport PORT[-PORT]            ranges inclusive; TCP, UDP, SCTP, UDP-Lite only\n"
    "  dport PORT[-PORT]\n"
    "  vlan ID                      the outer tag, 0..4095 (also on non-IP frames)\n"
    "  dscp N                       0..63 (IPv4 TOS, IPv6 traffic class, upper 6 bits)\n"
    "  mark VALUE[/MASK]            skb->mark & MASK == VALUE (tc's fw; nftables meta mark\n"
    "                               set, SO_MARK); decimal or 0x hex, MASK 0xffffffff\n"
    "  cgroup PATH                  what sockets in the cgroup v2 PATH or below it send;\n"
    "                               PATH under the cgroup2 mount (/system.slice/x.service)\n"
    "                               or the whole path; it must exist\n"
    "Among the filters that match a packet the lowest pref wins; equal prefs: the\n"
    "filter added first wins. pref defaults to 49152. Unmatched traffic goes to the\n"
    "default class. Non-first IP fragments match only filters without ports.\n"
    "Before any filter, a packet whose skb->priority (SO_PRIORITY) is major:minor\n"
    "of an existing class, major the default class's, goes to that class (htb's\n"
    "rule; pspxdp change DEV prio-direct off turns it off). A cgroup removed after\n"
    "its filter was added: the filter matches nothing and show says so (a cgroup\n"
    "made again at the path is a new one: add the filter again).\n"
    "show prints every filter in the words filter add takes, in the order they are\n"
    "tried; del takes those words (pref and classid optional) or pref N alone (every\n"
    "filter of that pref). The class must exist. DEV may be left out when exactly\n"
    "one device is attached. Refused input: one line on stderr, exit code 2.",
    {flag("json", 'j', "show: print JSON"),
     flag("stats", 's', "show: counters of each filter (packets and bytes it classified)"),
     opt(OptType::String, "file", 'f', "FILE",
         "add: every filter of FILE (\"-\": standard input), one a line in the words above, as "
         "one change")},
    1,
    24,
    run,
};

} // namespace pspxdp::cli
