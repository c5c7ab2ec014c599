// pspxdp class add|set|change|del|show and pspxdp default: the class_config
// map and the default class of an attached device, with tc's semantics.
#include "cli/command.hpp"
#include "cli/show.hpp"
#include "control/control.hpp"

#include <string>
#include <vector>

namespace pspxdp::cli {

namespace {

// DEV is optional before CLASSID: a device name never holds ':' (the kernel
// refuses it), a class id always does.
bool names_device(const std::vector<std::string> &words, size_t at) {
    return at < words.size() && words[at].find(':') == std::string::npos;
}

int run_class(const Args &args) {
    const std::vector<std::string> &p = args.positional;
    const std::string verb = p[0];
    using Put = control::Device::Put;
    Put how = Put::Set;
    if (verb == "add")
        how = Put::Add;
    else if (verb == "change")
        how = Put::Change;
    else if (verb == "set" || verb == "replace")
        how = Put::Set;
    else if (verb != "del" && verb != "delete" && verb != "show" && verb != "list")
        return fail("class: unknown action \"" + verb + "\" (add, set, change, del, show)", 2);

    const bool has_dev = names_device(p, 1);
    const std::string *dev = has_dev ? &p[1] : nullptr;
    std::vector<std::string> words(p.begin() + (has_dev ? 2 : 1), p.end());

    if (verb == "show" || verb == "list") {
        if (!words.empty()) return fail("class show: unexpected \"" + words[0] + "\"", 2);
        ShowOptions o;
        o.stats = args.flag("stats");
        o.json = args.flag("json");
        return show_device(dev, o);
    }
    if (verb == "del" || verb == "delete") {
        if (words.size() != 1)
            return fail(words.empty() ? std::string("class del: missing CLASSID")
                                      : "class del: unexpected \"" + words[1] + "\"",
                        2);
        auto id = control::parse_class_id(words[0]);
        if (!id) return fail(id);
        auto d = control::open_device(dev, control::Access::Change);
        if (!d) return fail(d);
        if (auto r = d.value().class_del(*id); !r) return fail(r);
        return 0;
    }
    std::vector<control::ClassSpec> specs;
    if (args.has("file")) {
        // Any number of classes in one change (one batch write, one
        // config_gen): checked whole first, nothing written if a line is wrong.
        if (!words.empty())
            return fail("class " + verb + ": --file and a class on the command line", 2);
        auto text = control::read_text(args.text("file"));
        if (!text) return fail(text);
        auto read = control::for_each_statement(
            *text, [&](size_t no, std::span<const std::string> lw) -> Result<void> {
                auto spec = control::parse_class_spec(lw);
                if (!spec) return refuse(spec.error());
                specs.push_back(*spec);
                specs.back().line = no;
                return {};
            });
        if (!read) return fail(args.text("file") + ": " + read.error(), 2);
    } else {
        auto spec = control::parse_class_spec(words);
        if (!spec) return fail(spec);
        specs.push_back(*spec);
    }
    auto d = control::open_device(dev, control::Access::Change);
    if (!d) return fail(d);
    if (auto r = d.value().class_put_many(how, specs); !r) return fail(r);
    return 0;
}

int run_default(const Args &args) {
    const auto &p = args.positional;
    const bool has_dev = p.size() == 2;
    auto id = control::parse_class_id(p[has_dev ? 1 : 0]);
    if (!id) return fail(id);
    auto d = control::open_device(has_dev ? &p[0] : nullptr, control::Access::Change);
    if (!d) return fail(d);
    if (auto r = d.value().set_default(*id); !r) return fail(r);
    return 0;
}

} // namespace

const Command kClass = {
    "class",
    "add|set|change|del|show [DEV] [CLASSID [parent CLASSID] ([rate] RATE [ceil RATE] [prio N] | "
    "normal) [limit BYTES|TIME] [ce_threshold TIME|off] [burst SIZE] [flows on|off]]]",
    "configure the classes of an attached device, as tc class does",
    "add fails if the class exists, change fails if it does not, set does either.\n"
    "add/change/set replace the whole class: what is not given is the default.\n"
    "CLASSID is tc's major:minor in hex (1:1, 1:a). RATE uses tc units: 500mbit,\n"
    "8kbit, 1gbit; \"bps\" suffixes are BYTES per second as in tc (10mbps = 80mbit).\n"
    "A class's rate counts L2 bytes with FCS, max(L, 60) + 4.\n"
    "\"normal\" makes an unpaced class that fills the gaps between paced frames.\n"
    "limit BYTES|TIME bounds the class's backlog in the pacer (64kb, 1mb; a TIME\n"
    "such as 10ms is the backlog at the class's rate); at the limit a frame is\n"
    "dropped and counted (drop_limit): flows on, the head of the fattest flow;\n"
    "flows off, the arriving one (a GSO packet is admitted or dropped whole).\n"
    "flows on (the default): the class keeps a queue per flow (5-tuple), serves\n"
    "them by deficit round robin with new flows first, and runs CoDel on each\n"
    "(target 5 ms or two frames at the rate, interval 100 ms): ECT frames of a\n"
    "flow whose queue stands above target get ECN CE (ce_marked), others are\n"
    "dropped (drop_aqm), even below the limit. ce_threshold TIME (paced classes,\n"
    "default 4ms): ECT frames that waited TIME in their flow get ECN CE at once\n"
    "(flows off: those joining a backlog longer than TIME at the rate); off never\n"
    "marks. flows off: one FIFO, lossless up to its limit. A bare number is bytes\n"
    "for limit, microseconds for ce_threshold (tc).\n"
    "burst SIZE (paced classes, clockless mode: veth, VM NICs): the most the class\n"
    "may send beyond its rate over any interval in real time, as tc tbf's burst:\n"
    "bytes (4500, 4.5kb) or largest frames (3mtu); a late wake-up is caught up\n"
    "within it and only the rest is given up (late_lost_ns). 0 or not given: the\n"
    "attachment's default (attach --burst: 3mtu, or 150us at the class's rate if\n"
    "more). The bound holds for the frames as the pacer releases them, early\n"
    "batches and catch-up included; a send held up on the host after that adds\n"
    "to it: at the far end of a veth on a loaded 2-core host 2.2, 4.0-4.4 and 4.9\n"
    "MTU were measured at 10, 100 and 500 Mbit/s with a bound of 3mtu (about 2\n"
    "MTU more). On a byte clock (a NIC) it changes nothing. Refused below one\n"
    "largest frame.\n"
    "Class trees, as tc's htb: parent CLASSID places the class under another, whose\n"
    "rate its children share; a class with children holds no frames (filters and\n"
    "the default class name leaves). Every class is paced at its ceil RATE (default:\n"
    "its rate) at every level; a backlogged leaf always gets its rate; what a parent\n"
    "leaves unused goes to children below their ceil, lower prio N first (0..7,\n"
    "default 0), then in proportion to rate (design §3.12). Refused: an unknown\n"
    "parent, a cycle, more than 8 levels, ceil below rate or above the parent's ceil,\n"
    "children's rates above the parent's rate, a normal class in a tree, a filter or\n"
    "the default class on a class with children, deleting a class with children.\n"
    "Refused, with the configuration unchanged: a rate above what one class can\n"
    "reach on the wire (full-size frames at DEV's MTU: 1518/1538 of the line rate\n"
    "at MTU 1500), paced rates summing above the line rate, a class in use by a\n"
    "filter or as the default class (del).\n"
    "Deleting a class stops TC from handing it new frames at once; the frames it\n"
    "has queued in the pacer are still sent at its rate, and what cannot be sent\n"
    "is dropped and counted (drop_deleted).\n"
    "DEV may be left out when exactly one device is attached.",
    {flag("stats", 's', "show: with counters (as pspxdp stats)"),
     flag("json", 'j', "show: print JSON"),
     opt(OptType::String, "file", 'f', "FILE",
         "add/set/change: every class of FILE (\"-\": standard input), one a line in the words "
         "above, as one change")},
    1,
    16,
    run_class,
};

const Command kDefault = {
    "default",
    "[DEV] CLASSID",
    "send unclassified traffic of DEV to CLASSID",
    "The class must exist (pspxdp class add DEV CLASSID normal). The default class\n"
    "cannot be deleted while it is the default.",
    {},
    1,
    2,
    run_default,
};

} // namespace pspxdp::cli
