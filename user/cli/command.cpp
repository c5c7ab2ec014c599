#include "cli/command.hpp"

#include "core/quote.hpp"
#include "daemon/log.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

#ifndef PSPXDP_VERSION
#define PSPXDP_VERSION "unknown"
#endif

namespace pspxdp::cli {

namespace {
// A copy of o changed by f: the modifiers below are one expression each.
template <class F> Option changed(const Option &o, F f) {
    Option c = o;
    f(c);
    return c;
}
} // namespace

Option Option::by_default(uint64_t v) const {
    return changed(*this, [&](Option &o) {
        o.fallback = o.type == OptType::Factor ? OptValue{double(v)} : OptValue{v};
    });
}
Option Option::by_default(ClassId v) const {
    return changed(*this, [&](Option &o) { o.fallback = v; });
}
Option Option::by_default(std::string v) const {
    return changed(*this, [&](Option &o) { o.fallback = std::move(v); });
}
Option Option::by_default(BurstSize v) const {
    return changed(*this, [&](Option &o) { o.fallback = v; });
}
Option Option::within(uint64_t low, uint64_t high) const {
    return changed(*this, [&](Option &o) { o.lo = low, o.hi = high; });
}
Option Option::default_is(const char *note) const {
    return changed(*this, [&](Option &o) { o.fallback_note = note; });
}
Option Option::bare_unit(uint64_t ns) const {
    return changed(*this, [&](Option &o) { o.bare_unit_ns = ns; });
}
Option Option::repeat() const {
    return changed(*this, [](Option &o) { o.repeatable = true; });
}
Option Option::one_of(std::vector<const char *> words) const {
    return changed(*this, [&](Option &o) { o.choices = std::move(words); });
}

Option opt(OptType type, const char *name, char short_name, const char *metavar, const char *help) {
    Option o;
    o.name = name;
    o.type = type;
    o.short_name = short_name;
    o.metavar = metavar;
    o.help = help;
    return o;
}

Option flag(const char *name, char short_name, const char *help) {
    return opt(OptType::Flag, name, short_name, nullptr, help);
}

namespace {

bool is_number_type(OptType t) {
    return t == OptType::Rate || t == OptType::Bytes || t == OptType::Duration ||
           t == OptType::TimeOrInf || t == OptType::Integer;
}

bool is_time_type(OptType t) { return t == OptType::Duration || t == OptType::TimeOrInf; }

// The shortest text that reads back as the same double ("1", "0.25").
std::string format_factor(double v) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

// A number of o's type as the user would write it.
std::string format_number(const Option &o, uint64_t v) {
    switch (o.type) {
    case OptType::Rate: return format_rate(v);
    case OptType::Bytes: return format_bytes(v);
    case OptType::Duration: return format_duration(v);
    case OptType::TimeOrInf: return v == kTimeInf ? "inf" : format_duration(v);
    default: return std::to_string(v);
    }
}

bool full_range(const Option &o) { return o.lo == 0 && o.hi == UINT64_MAX; }

std::string range_text(const Option &o) {
    if (o.type == OptType::Factor)
        return "above " + std::to_string(o.lo) +
               (o.hi == UINT64_MAX ? "" : ", at most " + std::to_string(o.hi));
    return format_number(o, o.lo) + ".." + format_number(o, o.hi) +
           (o.type == OptType::TimeOrInf ? " or inf" : "");
}

// "auto, byte or none", "auto|byte|none"
std::string choice_list(const Option &o, const char *sep, const char *last_sep) {
    std::string s;
    for (size_t i = 0; i < o.choices.size(); ++i)
        s += (i == 0 ? "" : i + 1 == o.choices.size() ? last_sep : sep) + std::string(o.choices[i]);
    return s;
}

// What --help and "needs ..." show for the value: the declared metavar, a
// Choice's words.
std::string metavar_of(const Option &o) {
    if (o.metavar) return o.metavar;
    return o.type == OptType::Choice ? choice_list(o, "|", "|") : "VALUE";
}

const char *unit_name(uint64_t ns) {
    switch (ns) {
    case 1: return "ns";
    case 1'000: return "us";
    case 1'000'000: return "ms";
    case 1'000'000'000: return "s";
    default: return "?";
    }
}

const Option *find_long(const Command &cmd, std::string_view name) {
    for (const auto &o : cmd.options)
        if (name == o.name) return &o;
    return nullptr;
}

const Option *find_short(const Command &cmd, char c) {
    for (const auto &o : cmd.options)
        if (o.short_name && o.short_name == c) return &o;
    return nullptr;
}

} // namespace

Result<OptValue> parse_option_value(const Option &o, std::string_view text) {
    const std::string word = quote(text);
    uint64_t v = 0;
    switch (o.type) {
    case OptType::Flag: return OptValue{true};
    case OptType::String: return OptValue{std::string(text)};
    case OptType::ClassId: {
        auto c = parse_classid(text);
        if (!c) return refuse(c.error());
        return OptValue{*c};
    }
    case OptType::Choice:
        for (const char *c : o.choices)
            if (text == c) return OptValue{std::string(text)};
        return refuse(word + " is not one of " + choice_list(o, ", ", " or "));
    case OptType::Burst: {
        auto b = parse_burst(text);
        if (!b) return refuse(b.error());
        if (!b->set()) return refuse(word + " is zero (give a size)");
        return OptValue{*b};
    }
    case OptType::Factor: {
        double d = 0;
        auto [end, ec] =
            std::from_chars(text.data(), text.data() + text.size(), d, std::chars_format::fixed);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
            !std::isfinite(d))
            return refuse(word + " is not a decimal number (expected e.g. \"0.5\")");
        if (!(d > double(o.lo)) || d > double(o.hi))
            return refuse(word + " is out of range: " + range_text(o));
        return OptValue{d};
    }
    case OptType::Rate: {
        auto r = parse_rate_bps(text);
        if (!r) return refuse(r.error());
        v = *r;
        break;
    }
    case OptType::Bytes: {
        auto r = parse_bytes(text);
        if (!r) return refuse(r.error());
        v = *r;
        break;
    }
    case OptType::TimeOrInf:
        if (text == "inf") return OptValue{kTimeInf};
        [[fallthrough]];
    case OptType::Duration: {
        // A bare 0 is zero in any unit: it needs none even where others do.
        auto r =
            text == "0" ? Result<uint64_t>(uint64_t(0)) : parse_duration_ns(text, o.bare_unit_ns);
        if (!r) return refuse(r.error() + (o.type == OptType::TimeOrInf ? " (or inf)" : ""));
        v = *r;
        break;
    }
    case OptType::Integer: {
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size())
            return refuse(word + " is not a whole number");
        break;
    }
    }
    if (v < o.lo || v > o.hi) return refuse(word + " is out of range " + range_text(o));
    return OptValue{v};
}

std::string format_default(const Option &o) {
    if (o.fallback_note) return o.fallback_note;
    return std::visit(
        [&](const auto &v) -> std::string {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, uint64_t>)
                return format_number(o, v);
            else if constexpr (std::is_same_v<V, double>)
                return format_factor(v);
            else if constexpr (std::is_same_v<V, ClassId>)
                return format_classid(v);
            else if constexpr (std::is_same_v<V, std::string>)
                return v;
            else if constexpr (std::is_same_v<V, BurstSize>)
                return format_burst(v);
            else
                return "";
        },
        o.fallback);
}

const Option &Args::declared(std::string_view name, OptType type) const {
    const Option *o = cmd ? find_long(*cmd, name) : nullptr;
    if (!o || (o->type != type && !(is_number_type(type) && is_number_type(o->type))))
        throw std::logic_error("option --" + std::string(name) + " is not declared as asked");
    return *o;
}

const OptValue &Args::value_of(std::string_view name, OptType type) const {
    const Option &o = declared(name, type);
    if (auto it = given.find(name); it != given.end()) return it->second.back();
    return o.fallback;
}

const std::vector<OptValue> &Args::all_of(std::string_view name, OptType type) const {
    static const std::vector<OptValue> kNone;
    if (!declared(name, type).repeatable)
        throw std::logic_error("option --" + std::string(name) + " is not repeatable");
    auto it = given.find(name);
    return it == given.end() ? kNone : it->second;
}

std::optional<uint64_t> Args::maybe_number(std::string_view name) const {
    const OptValue &v = value_of(name, OptType::Integer);
    if (auto *n = std::get_if<uint64_t>(&v)) return *n;
    return std::nullopt;
}

uint64_t Args::number(std::string_view name) const {
    auto n = maybe_number(name);
    if (!n)
        throw std::logic_error("option --" + std::string(name) + " has no value and no default");
    return *n;
}

double Args::factor(std::string_view name) const {
    const OptValue &v = value_of(name, OptType::Factor);
    if (auto *d = std::get_if<double>(&v)) return *d;
    throw std::logic_error("option --" + std::string(name) + " has no value and no default");
}

ClassId Args::classid(std::string_view name) const {
    const OptValue &v = value_of(name, OptType::ClassId);
    if (auto *c = std::get_if<ClassId>(&v)) return *c;
    throw std::logic_error("option --" + std::string(name) + " has no value and no default");
}

bool Args::flag(std::string_view name) const {
    value_of(name, OptType::Flag);
    return has(name);
}

std::string Args::text(std::string_view name) const {
    const OptValue &v = value_of(name, OptType::String);
    if (auto *s = std::get_if<std::string>(&v)) return *s;
    return "";
}

size_t Args::choice(std::string_view name) const {
    const Option &o = declared(name, OptType::Choice);
    const auto *word = std::get_if<std::string>(&value_of(name, OptType::Choice));
    for (size_t i = 0; word && i < o.choices.size(); ++i)
        if (*word == o.choices[i]) return i;
    throw std::logic_error("option --" + std::string(name) + " has no value and no default");
}

BurstSize Args::burst(std::string_view name) const {
    const OptValue &v = value_of(name, OptType::Burst);
    if (auto *b = std::get_if<BurstSize>(&v)) return *b;
    throw std::logic_error("option --" + std::string(name) + " has no value and no default");
}

std::vector<uint64_t> Args::numbers(std::string_view name) const {
    std::vector<uint64_t> out;
    for (const OptValue &v : all_of(name, OptType::Integer)) out.push_back(std::get<uint64_t>(v));
    return out;
}

std::vector<std::string> Args::texts(std::string_view name) const {
    std::vector<std::string> out;
    for (const OptValue &v : all_of(name, OptType::String)) out.push_back(std::get<std::string>(v));
    return out;
}

Result<Args> parse_args(const Command &cmd, int argc, char **argv) {
    Args args;
    args.cmd = &cmd;
    bool only_positional = false;
    std::map<std::string_view, std::string> first_word; // for "given twice"
    auto take = [&](const Option &o, const std::string &value) -> Result<void> {
        const std::string opt_name = "option --" + std::string(o.name);
        if (!o.repeatable && o.takes_value() && args.has(o.name))
            return refuse(opt_name + " given twice (" + quote(first_word[o.name]) + ", " +
                          quote(value) + ")");
        auto v = parse_option_value(o, value);
        if (!v) return refuse(opt_name + ": " + v.error());
        first_word.emplace(o.name, value);
        args.given[o.name].push_back(*v);
        return {};
    };
    for (int i = 0; i < argc; ++i) {
        std::string_view a = argv[i];
        // "-5mbit" is a (bad) value, not an option: the class words refuse it.
        if (only_positional || a.size() < 2 || a[0] != '-' ||
            std::isdigit(static_cast<unsigned char>(a[1]))) {
            args.positional.emplace_back(a);
            continue;
        }
        if (a == "--") {
            only_positional = true;
            args.dashdash = args.positional.size();
            continue;
        }
        if (a == "-h" || a == "--help") {
            args.help = true;
            continue;
        }
        const Option *o = nullptr;
        std::string value;
        bool inline_value = false;
        if (a.starts_with("--")) {
            std::string_view name = a.substr(2);
            if (auto eq = name.find('='); eq != std::string_view::npos) {
                value = std::string(name.substr(eq + 1));
                name = name.substr(0, eq);
                inline_value = true;
            }
            o = find_long(cmd, name);
            if (!o) return refuse("unknown option --" + std::string(name));
        } else if (a.size() > 2) {
            // Bundled flags, as tc takes them: -sj = -s -j.
            for (char c : a.substr(1)) {
                const Option *f = find_short(cmd, c);
                if (!f || f->takes_value()) return refuse("unknown option " + std::string(a));
                if (auto r = take(*f, ""); !r) return r.failure();
            }
            continue;
        } else {
            o = find_short(cmd, a[1]);
            if (!o) return refuse("unknown option " + std::string(a));
        }
        if (o->takes_value()) {
            if (!inline_value) {
                if (i + 1 >= argc)
                    return refuse("option --" + std::string(o->name) + " needs " + metavar_of(*o));
                value = argv[++i];
            }
        } else if (inline_value) {
            return refuse("option --" + std::string(o->name) + " takes no value");
        }
        if (auto r = take(*o, value); !r) return r.failure();
    }
    if (args.help) return args;
    if (args.positional.size() < cmd.min_positional)
        return refuse(std::string("missing argument: usage: pspxdp ") + cmd.name + " " + cmd.usage);
    if (args.positional.size() > cmd.max_positional)
        return refuse("unexpected argument \"" + args.positional[cmd.max_positional] + "\"");
    return args;
}

namespace {

// "-w, --window BYTES" and "how far ... (default 64kb; 1514b..64mb)".
std::string option_left(const Option &o) {
    std::string left = o.short_name ? std::string("-") + o.short_name + ", " : "    ";
    left += "--" + std::string(o.name);
    if (o.takes_value()) left += " " + metavar_of(o);
    return left;
}

std::string option_right(const Option &o) {
    std::string right = o.help;
    std::vector<std::string> extra;
    if (std::string d = format_default(o); !d.empty()) extra.push_back("default " + d);
    if ((is_number_type(o.type) || o.type == OptType::Factor) && !full_range(o))
        extra.push_back(range_text(o));
    if (is_time_type(o.type) && o.bare_unit_ns)
        extra.push_back(std::string("a bare number is ") + unit_name(o.bare_unit_ns));
    if (o.repeatable) extra.push_back("may be repeated");
    for (size_t i = 0; i < extra.size(); ++i)
        right += (i == 0 ? " (" : "; ") + extra[i] + (i + 1 == extra.size() ? ")" : "");
    return right;
}

// The value types, for the "Values:" part of --help and the man page.
struct TypeNote {
    OptType type;
    const char *name;
    const char *text;
};
constexpr TypeNote kTypeNotes[] = {
    {OptType::Rate, "RATE",
     "bit/s as tc writes them, with a unit: 64kbit, 500mbit, 1gbit (kbps, mbps, gbps: "
     "bytes/s; a bare number is refused)"},
    {OptType::Bytes, "BYTES", "bytes: 1500, 64kb, 2mb (k, m, g: powers of 1024)"},
    {OptType::Duration, "TIME",
     "ns, us, ms or s: 250ns, 50us, 1.5ms, 2s (a bare number other than 0 only where said)"},
    {OptType::TimeOrInf, "TIME|inf", "a TIME, or inf: no limit"},
    {OptType::Integer, "N", "a whole number"},
    {OptType::Factor, "X", "a decimal number: 0.5, 2"},
    {OptType::ClassId, "CLASSID", "major:minor in hex, as tc: 1:a, 1:ffff"},
    {OptType::Burst, "SIZE", "a burst: bytes (4500, 4.5kb) or largest frames (3mtu)"},
};

// The notes of the types cmd's options use (a TimeOrInf is also a TIME); all
// of them without cmd.
std::vector<const TypeNote *> type_notes(const Command *cmd) {
    std::vector<const TypeNote *> out;
    for (const TypeNote &n : kTypeNotes) {
        bool used = !cmd;
        for (size_t i = 0; cmd && i < cmd->options.size(); ++i) {
            const OptType t = cmd->options[i].type;
            used |= t == n.type || (n.type == OptType::Duration && t == OptType::TimeOrInf);
        }
        if (used) out.push_back(&n);
    }
    return out;
}

} // namespace

void print_command_help(const Command &cmd, FILE *out) {
    std::fprintf(out, "Usage: pspxdp %s %s\n\n%s\n", cmd.name, cmd.usage, cmd.summary);
    if (cmd.details) std::fprintf(out, "\n%s\n", cmd.details);
    std::fprintf(out, "\nOptions:\n");
    for (const auto &o : cmd.options)
        std::fprintf(out, "  %-28s %s\n", option_left(o).c_str(), option_right(o).c_str());
    std::fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
    const auto notes = type_notes(&cmd);
    if (!notes.empty()) std::fprintf(out, "\nValues:\n");
    for (const TypeNote *n : notes) std::fprintf(out, "  %-10s %s\n", n->name, n->text);
}

int fail(const std::string &message, int exit_code) {
    std::fprintf(stderr, "pspxdp: %s\n", message.c_str());
    return exit_code;
}

int fail(const Error &e) { return fail(e.message, e.exit_code); }

const std::vector<const Command *> &commands() {
    static const std::vector<const Command *> kAll = {
        &kAttach, &kDetach, &kClass, &kDefault, &kFilter,  &kShow,     &kStats,  &kStatus,   &kSave,
        &kApply,  &kChange, &kRun,   &kGroup,   &kAnalyze, &kSimulate, &kDaemon, &kExporter,
    };
    return kAll;
}

std::string version_string() { return std::string("pspxdp ") + PSPXDP_VERSION; }

namespace {

// troff: backslashes doubled, '-' as \-, a leading '.' or '\'' guarded.
std::string roff(std::string_view s) {
    std::string out;
    bool line_start = true;
    for (char c : s) {
        if (line_start && (c == '.' || c == '\'')) out += "\\&";
        if (c == '\\')
            out += "\\e";
        else if (c == '-')
            out += "\\-";
        else
            out += c;
        line_start = c == '\n';
    }
    return out;
}

} // namespace

void print_man_page(FILE *out) {
    std::fprintf(out,
                 ".\\\" Generated by `pspxdp --man` from the command table: do not edit.\n"
                 ".TH PSPXDP 8 \"\" \"%s\" \"System Administration\"\n"
                 ".SH NAME\npspxdp \\- precise software pacing of egress traffic with eBPF and "
                 "AF_XDP\n"
                 ".SH SYNOPSIS\n.B pspxdp\n.I COMMAND\n[\\fIOPTIONS\\fR]\n.br\n"
                 ".B pspxdp \\-\\-version\n"
                 ".SH DESCRIPTION\n%s\n",
                 roff(version_string()).c_str(),
                 roff("pspxdp paces a Linux host's egress traffic per class, to the byte: "
                      "every idle moment of the wire between real frames is filled with an "
                      "IEEE 802.3x PAUSE frame of exactly the right length, so every real frame "
                      "leaves on time. It is configured like tc(8): classes with rates, filters "
                      "that steer traffic into them, a default class for the rest. Rates, sizes, "
                      "times and class ids use tc's syntax.")
                     .c_str());
    std::fprintf(out, ".SH COMMANDS\n");
    for (const Command *c : commands()) {
        std::fprintf(out, ".SS \"pspxdp %s %s\"\n%s\n", c->name, roff(c->usage).c_str(),
                     roff(c->summary).c_str());
        if (c->details) std::fprintf(out, ".PP\n.nf\n%s\n.fi\n", roff(c->details).c_str());
        for (const auto &o : c->options)
            std::fprintf(out, ".TP\n.B %s\n%s\n", roff(option_left(o)).c_str(),
                         roff(option_right(o)).c_str());
    }
    std::fprintf(out, ".SH VALUES\n");
    for (const TypeNote *n : type_notes(nullptr))
        std::fprintf(out, ".TP\n.B %s\n%s\n", roff(n->name).c_str(), roff(n->text).c_str());
    std::fprintf(out, "%s",
                 ".SH FILES\n"
                 ".TP\n.I /sys/fs/bpf/pspxdp/DEV/\n"
                 "the pinned maps of an attached DEV: the control plane and every counter "
                 "(bpftool map dump pinned ...).\n"
                 ".TP\n.I /run/pspxdp/DEV.{state,pid,log,lock}\n"
                 "what attach created, the daemon's pid and log, the device lock. The log is "
                 "rotated at ");
    std::fprintf(out, "%llu MiB", (unsigned long long)(daemon::kLogMaxBytes >> 20));
    std::fprintf(out, "%s",
                 " to DEV.log.1 (one old file kept); under systemd "
                 "(pspxdp@DEV.service) it goes to the journal instead: journalctl -u "
                 "pspxdp@DEV.\n"
                 ".TP\n.I /etc/pspxdp/DEV.conf\n"
                 "the configuration pspxdp@DEV.service attaches with (written by pspxdp save).\n"
                 ".SH EXIT STATUS\n"
                 "One rule for every command:\n"
                 ".TP\n.B 0\n"
                 "done, or nothing to do: attach of a DEV attached already with the same options, "
                 "detach of a DEV not attached (one line says so).\n"
                 ".TP\n.B 2\n"
                 "refused as asked, nothing changed: a usage error or a bad word, or the request "
                 "names what is not there or does not fit (a DEV that does not exist, for every "
                 "command; DEV not attached for class, filter, show, stats, save, status; an "
                 "unknown class; rates above the line rate; a class past the last slot; attach "
                 "with options other than the running attachment's).\n"
                 ".TP\n.B 1\n"
                 "pspxdp could not do it: the system failed (kernel, file, permission, a daemon "
                 "that would not start), or something on the machine is in the way (another "
                 "pspxdp at work on DEV, a broken attachment, a device attach refuses, the "
                 "exporter's port in use). status DEV also exits 1 when DEV is attached but not "
                 "paced (its daemon dead or not beating, DEV gone, half attached): the report "
                 "still prints, saying why.\n"
                 ".SH SEE ALSO\n.BR tc (8),\n.BR bpftool (8),\n.BR systemctl (1)\n");
}

int fail_input(const std::string &message) {
    fail(message);
    return 2;
}

void warn(const std::string &message) {
    std::fprintf(stderr, "pspxdp: warning: %s\n", message.c_str());
}

} // namespace pspxdp::cli
