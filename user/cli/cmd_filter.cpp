// pspxdp filter add|del|show: the rules_* maps of an attached device.
#include "cli/command.hpp"
#include "control/control.hpp"
#include "core/units.hpp"

#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace pspxdp::cli {

static bool is_selector_word(const std::string &w) {
    return w == "dst" || w == "src" || w == "proto" || w == "dport" || w == "sport" ||
           w == "classid" || w == "flowid";
}

static int show(const control::Device &dev, bool json) {
    auto filters = dev.filters();
    if (!filters) return fail(filters);
    if (json) std::printf("[");
    bool first = true;
    for (const auto &f : *filters) {
        const std::string sel = control::format_selector(f.selector);
        const std::string cls = format_classid(ClassId::from_raw(f.classid));
        if (json)
            std::printf("%s{\"selector\":\"%s\",\"map\":\"%s\",\"classid\":\"%s\"}",
                        first ? "" : ",", sel.c_str(), f.selector.map_name(), cls.c_str());
        else
            std::printf("%s classid %s\n", sel.c_str(), cls.c_str());
        first = false;
    }
    if (json) std::printf("]\n");
    return 0;
}

static int run(const Args &args) {
    const auto &p = args.positional;
    const std::string verb = p[0];
    if (verb != "add" && verb != "del" && verb != "delete" && verb != "show" && verb != "list")
        return fail("filter: unknown action \"" + verb + "\" (add, del, show)");
    std::vector<std::string> words(p.begin() + 1, p.end());
    // DEV is the first word unless that word already starts the selector;
    // it may be left out when exactly one device is attached.
    const bool has_dev = !words.empty() && !is_selector_word(words[0]);
    const bool read_only = verb == "show" || verb == "list";
    auto dev = control::open_device(has_dev ? &words[0] : nullptr,
                                    read_only ? control::Access::Read : control::Access::Change);
    if (!dev) return fail(dev);
    if (has_dev) words.erase(words.begin());

    if (verb == "show" || verb == "list") {
        if (!words.empty()) return fail("filter show: unexpected \"" + words[0] + "\"");
        return show(*dev, args.has("json"));
    }

    if (verb == "add") {
        // "classid X" (tc's "flowid X" too) ends the selector.
        if (words.size() < 2 || (words[words.size() - 2] != "classid" &&
                                 words[words.size() - 2] != "flowid"))
            return fail("filter add: usage: pspxdp filter add [DEV] SELECTOR classid CLASSID");
        auto id = parse_classid(words.back());
        if (!id) return fail(id.error(), 2);
        words.resize(words.size() - 2);
        auto sel = control::parse_selector(std::span<const std::string>(words));
        if (!sel) return fail(sel.error(), 2);
        if (auto r = dev.value().filter_add(*sel, id->raw()); !r) return fail(r);
        return 0;
    }
    // del: "classid X" is accepted and ignored, so an add line can be reused.
    if (words.size() >= 2 &&
        (words[words.size() - 2] == "classid" || words[words.size() - 2] == "flowid"))
        words.resize(words.size() - 2);
    auto sel = control::parse_selector(std::span<const std::string>(words));
    if (!sel) return fail(sel.error(), 2);
    if (auto r = dev.value().filter_del(*sel); !r) return fail(r);
    return 0;
}

const Command kFilter = {
    "filter",
    "add [DEV] SELECTOR classid CLASSID | del [DEV] SELECTOR | show [DEV] [-j]",
    "steer traffic of an attached device into classes",
    "SELECTOR is one of:\n"
    "  dst PREFIX | src PREFIX          IPv4 or IPv6, e.g. 192.168.2.0/24, 2001:db8::/32\n"
    "  proto tcp|udp dport|sport PORT   e.g. proto udp dport 5001\n"
    "The classifier tries port rules (dport, then sport), then the longest dst\n"
    "prefix, then the longest src prefix, then the default class. Non-first IP\n"
    "fragments match prefixes only. The class must exist (pspxdp class set).\n"
    "DEV may be left out when exactly one device is attached.",
    {{"json", 'j', nullptr, "show: print JSON"}},
    1,
    16,
    run,
};

} // namespace pspxdp::cli
