// The command table behind `pspxdp`: every subcommand declares its options
// once, with their type, default and help, and parsing, --help, the man page
// and usage errors all come from that declaration (xdp-tools' params.h idea).
// A value that does not parse as its type is an error naming the option and
// the word (exit 2), never silently the default.
#pragma once

#include "core/result.hpp"
#include "core/units.hpp"

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pspxdp::cli {

enum class OptType {
    Auto,     // old declarations: Flag without a metavar, String with one
    Flag,     // no value
    String,   // any word
    Rate,     // tc rate, bit/s ("500mbit")
    Bytes,    // tc size, bytes ("64kb")
    Duration, // tc time, nanoseconds ("10ms"; a bare number in bare_unit_ns)
    Integer,  // a decimal integer
    ClassId,  // tc major:minor
};

using OptValue = std::variant<std::monostate, bool, std::string, uint64_t, ClassId>;

struct Option {
    const char *name;             // long name, without "--"
    char short_name = 0;          // 0 for none
    const char *metavar = nullptr; // nullptr: a flag that takes no value
    const char *help = "";
    OptType type = OptType::Auto;
    OptValue fallback{};          // the default; --help prints it from this value
    uint64_t lo = 0, hi = UINT64_MAX; // accepted range of a number
    uint64_t bare_unit_ns = 1000; // Duration: a bare number is in these (tc: us)
    const char *fallback_note = nullptr; // a default decided at run time ("DEV's speed")
    bool repeatable = false;      // may be given more than once (Args::all)

    // Modifiers, for one-expression declarations:
    //   opt(OptType::Bytes, "window", 'w', "BYTES", "...").by_default(65536).within(1514, 64 << 20)
    Option by_default(uint64_t v) const;
    Option by_default(ClassId v) const;
    Option by_default(std::string v) const;
    Option within(uint64_t low, uint64_t high) const;
    Option default_is(const char *note) const;
    Option bare_unit(uint64_t ns) const;
    Option repeat() const;

    OptType kind() const {
        if (type != OptType::Auto) return type;
        return metavar ? OptType::String : OptType::Flag;
    }
    bool takes_value() const { return kind() != OptType::Flag; }
};

Option opt(OptType type, const char *name, char short_name, const char *metavar,
           const char *help);
Option flag(const char *name, char short_name, const char *help);

struct Command;

// The clock options of attach and daemon (issue 10), declared once:
// --gap-horizon TIME, --clock auto|byte|none, --clockless. Their values go
// to daemon::set_clock_options.
Option gap_horizon_option();
Option clock_option();
Option clockless_option();

struct Args {
    const Command *cmd = nullptr;
    std::vector<std::string> positional;
    std::map<std::string, std::string, std::less<>> values; // option name -> raw text ("" for flags)
    // Every raw value of every option, in command-line order: for options
    // that may be repeated (--flow A=... --flow B=...). `values` keeps the last.
    std::map<std::string, std::vector<std::string>, std::less<>> all_values;
    std::map<std::string, OptValue, std::less<>> parsed; // typed, the options given

    // Given on the command line.
    bool has(std::string_view name) const { return values.find(name) != values.end(); }
    std::string get(std::string_view name, std::string_view fallback = "") const {
        auto it = values.find(name);
        return it == values.end() ? std::string(fallback) : it->second;
    }
    std::vector<std::string> all(std::string_view name) const {
        auto it = all_values.find(name);
        return it == all_values.end() ? std::vector<std::string>{} : it->second;
    }

    // Typed: the value given, else the declared default. Asking for an
    // option that is not declared with that type, or has neither a value nor
    // a default, is a programming error (std::logic_error).
    uint64_t number(std::string_view name) const; // Rate bit/s, Bytes, Duration ns, Integer
    std::optional<uint64_t> maybe_number(std::string_view name) const;
    ClassId classid(std::string_view name) const;
    bool flag(std::string_view name) const;
    std::string text(std::string_view name) const;

  private:
    const OptValue &value_of(std::string_view name, OptType type) const;
};

struct Command {
    const char *name;
    const char *usage;    // positional part, e.g. "DEV"
    const char *summary;  // one line
    const char *details;  // paragraph for --help, may be nullptr
    std::vector<Option> options;
    size_t min_positional;
    size_t max_positional;
    int (*run)(const Args &args);
};

// Parses argv (after the subcommand name) against cmd's table. Errors name
// the option and the word; they are usage errors (exit 2).
Result<Args> parse_args(const Command &cmd, int argc, char **argv);
void print_command_help(const Command &cmd, FILE *out);
// The default of an option as --help prints it ("64kb", "1:ffff"), or "".
std::string format_default(const Option &o);
// A value of o's type from text: what parse_args does with each option.
Result<OptValue> parse_option_value(const Option &o, std::string_view text);

// Error reporting: "pspxdp: <what>" on stderr; returns the exit code (1, or
// the error's own: 2 for refused input).
int fail(const std::string &message, int exit_code = 1);
int fail(const Error &e);
template <class T> int fail(const Result<T> &r) { return fail(r.failure()); }
// Bad input (a word the user typed): the same line, exit code 2.
int fail_input(const std::string &message);
// "pspxdp: warning: <what>" on stderr.
void warn(const std::string &message);

// Every subcommand, defined in its cmd_*.cpp, in the order of `pspxdp --help`.
extern const Command kSimulate;
extern const Command kAnalyze;
extern const Command kAttach;
extern const Command kDetach;
extern const Command kDaemon;
extern const Command kClass;
extern const Command kDefault;
extern const Command kFilter;
extern const Command kShow;
extern const Command kStats;
extern const Command kStatus;
extern const Command kSave;
extern const Command kApply;
extern const Command kChange;
// The table main() dispatches on; --help and the man page list it.
const std::vector<const Command *> &commands();

// The man page pspxdp(8), in troff, from the command table.
void print_man_page(FILE *out);
std::string version_string(); // "pspxdp 0.1.0"

} // namespace pspxdp::cli
