// pspxdp save / apply / change: a device's whole configuration as a file,
// applied atomically, and the line rate changed without a detach.
#include "cli/command.hpp"
#include "control/control.hpp"
#include "core/units.hpp"

#include <cstdio>

namespace pspxdp::cli {

namespace {

int run_save(const Args &args) {
    const auto &p = args.positional;
    auto d = control::open_device(p.empty() ? nullptr : &p[0], control::Access::Read);
    if (!d) return fail(d);
    auto c = d->config();
    if (!c) return fail(c);
    const std::string text = control::format_config(
        *c, {"pspxdp configuration of " + d->name() + " (" + version_string() + ")",
             "pspxdp apply " + d->name() + " FILE makes the device match this file;",
             "pspxdp attach " + d->name() + " --config FILE attaches with it."});
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

int run_apply(const Args &args) {
    const auto &p = args.positional;
    const bool has_dev = p.size() == 2;
    // The file first: a bad line refuses the whole file before DEV is touched.
    auto c = control::load_config(p.back());
    if (!c) return fail(c);
    auto d = control::open_device(has_dev ? &p[0] : nullptr, control::Access::Change);
    if (!d) return fail(d);
    if (args.flag("check")) {
        auto st = d->state();
        if (!st) return fail(st);
        auto mtu = d->mtu();
        if (!mtu) return fail(mtu);
        auto r = control::check_config(
            *c, c->line_rate_bps.value_or(st->line_rate_bps),
            c->default_classid.value_or(pspxdp_classid_raw(st->default_classid)), d->name(), *mtu);
        if (!r) return fail(r.failure());
        std::printf("pspxdp: %s: %s is valid\n", d->name().c_str(), p.back().c_str());
        return 0;
    }
    auto s = d.value().apply(*c);
    if (!s) return fail(p.back() + ": " + s.error(), s.exit_code());
    if (!args.flag("quiet")) std::printf("pspxdp: %s: %s\n", d->name().c_str(), s->text().c_str());
    return 0;
}

int run_change(const Args &args) {
    const auto &p = args.positional;
    const bool has_dev = p.size() == 3;
    const std::string &what = p[has_dev ? 1 : 0];
    // "change DEV line-rate": the rate forgotten, not an unknown parameter DEV.
    if (p.back() == "line-rate")
        return fail("change: line-rate: the RATE is missing (pspxdp change [DEV] line-rate RATE)",
                    2);
    if (what != "line-rate" && what != "prio-direct")
        return fail("change: unknown parameter \"" + what + "\" (line-rate, prio-direct)", 2);
    if (what == "prio-direct") {
        if (p.back() != "on" && p.back() != "off")
            return fail("change: prio-direct \"" + p.back() + "\": expected on or off", 2);
        auto d = control::open_device(has_dev ? &p[0] : nullptr, control::Access::Change);
        if (!d) return fail(d);
        if (auto r = d.value().set_prio_direct(p.back() == "on"); !r) return fail(r);
        return 0;
    }
    auto rate = parse_rate_bps(p.back());
    if (!rate) return fail("change: line-rate: " + rate.error(), 2);
    auto d = control::open_device(has_dev ? &p[0] : nullptr, control::Access::Change);
    if (!d) return fail(d);
    if (auto r = d.value().set_line_rate(*rate); !r) return fail(r);
    return 0;
}

} // namespace

const Command kSave = {
    "save",
    "[DEV]",
    "print DEV's configuration in the file format apply and attach --config read",
    "Prints the line rate, every class (with its limit and ce_threshold), the\n"
    "default class and every filter, one statement a line:\n"
    "  line-rate RATE\n"
    "  class CLASSID (RATE | normal) [limit BYTES|TIME] [ce_threshold TIME|off]\n"
    "  default CLASSID\n"
    "  prio-direct on|off                  (pspxdp change DEV prio-direct)\n"
    "  filter WORDS... classid CLASSID     (the words of pspxdp filter add)\n"
    "'#' starts a comment. pspxdp apply of what save printed changes nothing.\n"
    "Reading needs read permission on the pins only.",
    {},
    0,
    1,
    run_save,
};

const Command kApply = {
    "apply",
    "[DEV] FILE",
    "make DEV's configuration what FILE says, all or nothing",
    "FILE (\"-\": standard input) is what pspxdp save prints. Its classes and\n"
    "filters are the whole set: classes and filters not in it are deleted; a\n"
    "line-rate or default line changes those, their absence keeps them. The\n"
    "file is checked whole before anything is written: a bad line refuses it\n"
    "with its line number, the device unchanged. Writes go in an order whose\n"
    "every step is a valid configuration (rates lowered before others rise), and\n"
    "the pacer re-reads its configuration once, after the last one.",
    {flag("check", 'n', "only check FILE against DEV, change nothing"),
     flag("quiet", 'q', "print nothing on success")},
    1,
    2,
    run_apply,
};

const Command kChange = {
    "change",
    "[DEV] (line-rate RATE | prio-direct on|off)",
    "change DEV's line rate, or whether skb->priority picks a class, without a detach",
    "The wire's rate M (tc syntax: 1gbit, 10gbit). Refused, unchanged, if the\n"
    "paced classes would not fit it (their sum, or a class above what one class\n"
    "can reach on the wire). It is written to pacer_state (the daemon re-reads it\n"
    "with its configuration) and to the attachment's state file (a restarted daemon\n"
    "starts with it); classes, filters and counters stay.\n"
    "prio-direct: on (the default), a packet whose skb->priority (a socket's\n"
    "SO_PRIORITY, e.g. 0x10005) is major:minor of an existing class, major the\n"
    "default class's, goes to that class before any filter is tried, as tc-htb(8)\n"
    "does; a priority naming no class goes on to the filters, then the default\n"
    "class. off: skb->priority is ignored and the filters decide. Saved by save\n"
    "(\"prio-direct on|off\"), set by apply.",
    {},
    2,
    3,
    run_change,
};

} // namespace pspxdp::cli
