// The command table behind `pspxdp`: every subcommand declares its options
// once, and --help, usage errors and parsing all come from that declaration
// (as xdp-tools does it).
#pragma once

#include "core/result.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pspxdp::cli {

struct Option {
    const char *name;      // long name, without "--"
    char short_name;       // 0 for none
    const char *metavar;   // nullptr: a flag that takes no value
    const char *help;
};

struct Args {
    std::vector<std::string> positional;
    std::map<std::string, std::string, std::less<>> values; // option name -> value ("" for flags)
    // Every value of every option, in command-line order: for options that
    // may be repeated (--flow A=... --flow B=...). `values` keeps the last.
    std::map<std::string, std::vector<std::string>, std::less<>> all_values;

    bool has(std::string_view name) const { return values.find(name) != values.end(); }
    std::string get(std::string_view name, std::string_view fallback = "") const {
        auto it = values.find(name);
        return it == values.end() ? std::string(fallback) : it->second;
    }
    std::vector<std::string> all(std::string_view name) const {
        auto it = all_values.find(name);
        return it == all_values.end() ? std::vector<std::string>{} : it->second;
    }
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

// Parses argv (after the subcommand name) against cmd's table.
Result<Args> parse_args(const Command &cmd, int argc, char **argv);
void print_command_help(const Command &cmd, FILE *out);

// Error reporting: "pspxdp: <what>" on stderr, returns the exit code 1.
int fail(const std::string &message);
// Bad input (a word the user typed): the same line, exit code 2.
int fail_input(const std::string &message);
// "pspxdp: warning: <what>" on stderr.
void warn(const std::string &message);

// Every subcommand, defined in its cmd_*.cpp.
extern const Command kSimulate;
extern const Command kAnalyze;
extern const Command kAttach;
extern const Command kDetach;
extern const Command kDaemon;
extern const Command kClass;
extern const Command kFilter;
extern const Command kStatus;

} // namespace pspxdp::cli
