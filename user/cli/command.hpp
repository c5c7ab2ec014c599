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

namespace pspxdp::daemon {
struct DaemonConfig;
}

namespace pspxdp::cli {

enum class OptType {
    Flag,      // no value
    String,    // any word
    Rate,      // tc rate, bit/s ("500mbit")
    Bytes,     // tc size, bytes ("64kb")
    Duration,  // tc time, nanoseconds ("10ms"; a bare number in bare_unit_ns, 0: a unit is needed)
    TimeOrInf, // a Duration, or "inf" (kTimeInf): no limit
    Integer,   // a decimal integer
    Factor,    // a decimal number above 0 ("0.5", "2"): a multiplier
    ClassId,   // tc major:minor
    Choice,    // one of the words of Option::choices
    Burst,     // a burst size (core/units.hpp BurstSize): bytes ("4500", "4.5kb") or largest
               // frames ("3mtu"); zero refused
};

using OptValue =
    std::variant<std::monostate, bool, std::string, uint64_t, ClassId, double, BurstSize>;

// What a TimeOrInf option holds for "inf".
inline constexpr uint64_t kTimeInf = UINT64_MAX;

struct Option {
    const char *name = "";         // long name, without "--"
    char short_name = 0;           // 0 for none
    const char *metavar = nullptr; // nullptr: a flag, or a Choice (its words are shown)
    const char *help = "";
    OptType type = OptType::Flag;
    OptValue fallback{}; // the default; --help prints it from this value
    // Accepted range of a number, both ends included; a Factor's low end is
    // excluded (it is above 0); a TimeOrInf's "inf" is always in range.
    uint64_t lo = 0, hi = UINT64_MAX;
    // Duration, TimeOrInf: a bare number is in these; 0: refused, a unit is
    // needed. Every time option of a command that takes a bare number takes
    // it in the same unit (tests/unit/test_cli.cpp holds the table to it).
    uint64_t bare_unit_ns = 0;
    const char *fallback_note = nullptr; // a default decided at run time ("DEV's speed")
    bool repeatable = false;             // may be given more than once (Args::numbers, Args::texts)
    std::vector<const char *> choices;   // Choice: the words, numbered by Args::choice

    // Modifiers, for one-expression declarations:
    //   opt(OptType::Bytes, "window", 'w', "BYTES", "...").by_default(65536).within(1514, 64 << 20)
    Option by_default(uint64_t v) const; // a Factor's is v as a decimal
    Option by_default(ClassId v) const;
    Option by_default(std::string v) const;
    Option by_default(BurstSize v) const;
    Option within(uint64_t low, uint64_t high) const;
    Option default_is(const char *note) const;
    Option bare_unit(uint64_t ns) const;
    Option repeat() const;
    Option one_of(std::vector<const char *> words) const;

    bool takes_value() const { return type != OptType::Flag; }
};

Option opt(OptType type, const char *name, char short_name, const char *metavar, const char *help);
Option flag(const char *name, char short_name, const char *help);

struct Command;

// The clock options of attach and daemon (docs/design.md §4.5), declared once:
// --gap-horizon TIME|inf, --clock auto|byte|none, --clockless. Their values
// go to daemon::set_clock_options.
Option gap_horizon_option();
Option clock_option();
Option clockless_option();
Option burst_option(); // --burst SIZE: the attachment's default burst bound
struct Args;
// Their values into cfg (daemon::set_clock_options); an error is the user's.
Result<void> clock_options(daemon::DaemonConfig &cfg, const Args &args);
// --sched normal|fifo|deadline of attach and daemon, and with --cpu N into
// cfg (daemon::set_sched_options); an error is the user's.
Option sched_option();
Option reclaim_option(); // --reclaim: the deadline daemon may use idle CPU time
Result<void> sched_options(daemon::DaemonConfig &cfg, const Args &args);

struct Args {
    const Command *cmd = nullptr;
    std::vector<std::string> positional;
    // Where "--" stood: the positional words before it (a command to run follows).
    std::optional<size_t> dashdash;
    bool help = false; // -h, --help
    // The typed values of the options given, in command-line order: more
    // than one only for a repeatable option.
    std::map<std::string, std::vector<OptValue>, std::less<>> given;

    // Given on the command line.
    bool has(std::string_view name) const { return given.find(name) != given.end(); }

    // Typed: the value given, else the declared default. Asking for an
    // option that is not declared with that type, or has neither a value nor
    // a default, is a programming error (std::logic_error).
    uint64_t
    number(std::string_view name) const; // Rate bit/s, Bytes, Duration/TimeOrInf ns, Integer
    std::optional<uint64_t> maybe_number(std::string_view name) const;
    double factor(std::string_view name) const;
    ClassId classid(std::string_view name) const;
    bool flag(std::string_view name) const;
    std::string text(std::string_view name) const;
    size_t choice(std::string_view name) const; // the index of the word in Option::choices
    BurstSize burst(std::string_view name) const;
    // Every value given of a repeatable option, in order (none given: empty).
    std::vector<uint64_t> numbers(std::string_view name) const;
    std::vector<std::string> texts(std::string_view name) const;

  private:
    const Option &declared(std::string_view name, OptType type) const;
    const OptValue &value_of(std::string_view name, OptType type) const;
    const std::vector<OptValue> &all_of(std::string_view name, OptType type) const;
};

struct Command {
    const char *name;
    const char *usage;   // positional part, e.g. "DEV"
    const char *summary; // one line
    const char *details; // paragraph for --help, may be nullptr
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
extern const Command kRun;
extern const Command kGroup;
extern const Command kExporter;
// The table main() dispatches on; --help and the man page list it.
const std::vector<const Command *> &commands();

// The man page pspxdp(8), in troff, from the command table.
void print_man_page(FILE *out);
std::string version_string(); // "pspxdp 0.1.0"

} // namespace pspxdp::cli
