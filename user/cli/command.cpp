#include "cli/command.hpp"

#include <cctype>
#include <charconv>
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
    return changed(*this, [&](Option &o) { o.fallback = v; });
}
Option Option::by_default(ClassId v) const {
    return changed(*this, [&](Option &o) { o.fallback = v; });
}
Option Option::by_default(std::string v) const {
    return changed(*this, [&](Option &o) { o.fallback = std::move(v); });
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

Option opt(OptType type, const char *name, char short_name, const char *metavar,
           const char *help) {
    Option o{name};
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
           t == OptType::Integer;
}

// A number of o's type as the user would write it.
std::string format_number(const Option &o, uint64_t v) {
    switch (o.kind()) {
    case OptType::Rate: return format_rate(v);
    case OptType::Bytes: return format_bytes(v);
    case OptType::Duration: return format_duration(v);
    default: return std::to_string(v);
    }
}

bool full_range(const Option &o) { return o.lo == 0 && o.hi == UINT64_MAX; }

std::string range_text(const Option &o) {
    return format_number(o, o.lo) + ".." + format_number(o, o.hi);
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
    const std::string word = "\"" + std::string(text) + "\"";
    const OptType t = o.kind();
    uint64_t v = 0;
    switch (t) {
    case OptType::Auto:
    case OptType::Flag: return OptValue{true};
    case OptType::String: return OptValue{std::string(text)};
    case OptType::ClassId: {
        auto c = parse_classid(text);
        if (!c) return refuse(c.error());
        return OptValue{*c};
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
    case OptType::Duration: {
        auto r = parse_duration_ns(text, o.bare_unit_ns);
        if (!r) return refuse(r.error());
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
            if constexpr (std::is_same_v<V, uint64_t>) return format_number(o, v);
            else if constexpr (std::is_same_v<V, ClassId>) return format_classid(v);
            else if constexpr (std::is_same_v<V, std::string>) return v;
            else return "";
        },
        o.fallback);
}

const OptValue &Args::value_of(std::string_view name, OptType type) const {
    const Option *o = cmd ? find_long(*cmd, name) : nullptr;
    if (!o || (o->kind() != type && !(is_number_type(type) && is_number_type(o->kind()))))
        throw std::logic_error("option --" + std::string(name) + " is not declared as asked");
    if (auto it = parsed.find(name); it != parsed.end()) return it->second;
    return o->fallback;
}

std::optional<uint64_t> Args::maybe_number(std::string_view name) const {
    const OptValue &v = value_of(name, OptType::Integer);
    if (auto *n = std::get_if<uint64_t>(&v)) return *n;
    return std::nullopt;
}

uint64_t Args::number(std::string_view name) const {
    auto n = maybe_number(name);
    if (!n) throw std::logic_error("option --" + std::string(name) + " has no value and no default");
    return *n;
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

Result<Args> parse_args(const Command &cmd, int argc, char **argv) {
    Args args;
    args.cmd = &cmd;
    bool only_positional = false;
    auto take = [&](const Option &o, const std::string &value) -> Result<void> {
        const std::string opt_name = "option --" + std::string(o.name);
        // Typed options are given once; old untyped ones keep "the last wins".
        if (o.type != OptType::Auto && !o.repeatable && o.takes_value() && args.has(o.name))
            return refuse(opt_name + " given twice (\"" + args.get(o.name) + "\", \"" + value +
                          "\")");
        auto v = parse_option_value(o, value);
        if (!v) return refuse(opt_name + ": " + v.error());
        args.values[o.name] = value;
        args.all_values[o.name].push_back(value);
        args.parsed[o.name] = *v;
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
            continue;
        }
        if (a == "-h" || a == "--help") {
            args.values["help"] = "";
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
                    return refuse("option --" + std::string(o->name) + " needs " + o->metavar);
                value = argv[++i];
            }
        } else if (inline_value) {
            return refuse("option --" + std::string(o->name) + " takes no value");
        }
        if (auto r = take(*o, value); !r) return r.failure();
    }
    if (args.has("help")) return args;
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
    if (o.takes_value()) left += std::string(" ") + (o.metavar ? o.metavar : "VALUE");
    return left;
}

std::string option_right(const Option &o) {
    std::string right = o.help;
    std::string extra;
    if (std::string d = format_default(o); !d.empty()) extra = "default " + d;
    if (is_number_type(o.kind()) && !full_range(o))
        extra += (extra.empty() ? "" : "; ") + range_text(o);
    if (o.repeatable) extra += (extra.empty() ? "" : "; ") + std::string("may be repeated");
    if (!extra.empty()) right += " (" + extra + ")";
    return right;
}

} // namespace

void print_command_help(const Command &cmd, FILE *out) {
    std::fprintf(out, "Usage: pspxdp %s %s\n\n%s\n", cmd.name, cmd.usage, cmd.summary);
    if (cmd.details) std::fprintf(out, "\n%s\n", cmd.details);
    std::fprintf(out, "\nOptions:\n");
    for (const auto &o : cmd.options)
        std::fprintf(out, "  %-28s %s\n", option_left(o).c_str(), option_right(o).c_str());
    std::fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

int fail(const std::string &message, int exit_code) {
    std::fprintf(stderr, "pspxdp: %s\n", message.c_str());
    return exit_code;
}

int fail(const Error &e) { return fail(e.message, e.exit_code); }

const std::vector<const Command *> &commands() {
    static const std::vector<const Command *> kAll = {
        &kAttach, &kDetach, &kClass,  &kDefault,  &kFilter,   &kShow,  &kStats,
        &kStatus, &kSave,   &kApply,  &kChange,   &kAnalyze,  &kSimulate, &kDaemon,
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
        if (c == '\\') out += "\\e";
        else if (c == '-') out += "\\-";
        else out += c;
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
    std::fprintf(
        out, "%s",
        ".SH FILES\n"
        ".TP\n.I /sys/fs/bpf/pspxdp/DEV/\n"
        "the pinned maps of an attached DEV: the control plane and every counter "
        "(bpftool map dump pinned ...).\n"
        ".TP\n.I /run/pspxdp/DEV.{state,pid,log,lock}\n"
        "what attach created, the daemon's pid and log, the device lock.\n"
        ".TP\n.I /etc/pspxdp/DEV.conf\n"
        "the configuration pspxdp@DEV.service attaches with (written by pspxdp save).\n"
        ".SH EXIT STATUS\n"
        "0 on success; 2 when the input was refused (a bad word, an unknown class, a rate "
        "that does not fit: the configuration is unchanged); 1 when the system failed.\n"
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
