// Classes, filters and whole configurations as words and files: parsing,
// printing and the checks that need no device. Pure (no syscalls), so the
// unit tests check every accepted and refused form.
//
// A class, as `pspxdp class add` and a configuration file write it:
//   CLASSID [parent CLASSID] ([rate] RATE [ceil RATE] [prio N] | normal)
//   [limit BYTES|TIME] [ce_threshold TIME|off] [burst SIZE] [flows on|off]
// (class trees, docs/design.md §3.12: parent, ceil and prio as tc's htb).
// A configuration file (what `pspxdp save` prints and `apply` reads), one
// statement a line, '#' starts a comment:
//   line-rate 1Gbit
//   class 1:1 300Mbit limit 64kb ce_threshold 2ms
//   class 1:ffff normal
//   default 1:ffff
//   prio-direct on
//   filter pref 10 proto udp dport 5001 classid 1:1
#pragma once

#include "control/filter_spec.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pspxdp::control {

// Bounds of the class words (a limit below one full frame would drop every
// frame; above a gigabyte it is surely a typo: the pacer's buffer is smaller).
inline constexpr uint64_t kMinLimitBytes = 1518;
inline constexpr uint64_t kMaxLimitBytes = 1ull << 30;
inline constexpr uint64_t kMinTimeNs = 1'000;          // 1us
inline constexpr uint64_t kMaxTimeNs = 10'000'000'000; // 10s
// A burst bound above this is surely a typo too (the pacer's buffer).
inline constexpr uint64_t kMaxBurstBytes = 1ull << 30;
inline constexpr uint64_t kMaxBurstMtus = 65'536;

struct ClassSpec {
    uint32_t classid = 0;
    pspxdp_class_kind kind = PSPXDP_CLASS_NORMAL;
    uint64_t rate_bps = 0;        // paced only
    uint64_t limit_bytes = 0;     // 0: not given (limit_ns, or the pacer's default)
    uint64_t limit_ns = 0;        // paced only; 0: not given
    uint64_t ce_threshold_ns = 0; // paced only; 0: the default; PSPXDP_CE_THRESHOLD_OFF: never
    BurstSize burst;              // paced only; not set: the attachment's default
    bool flows = true;            // per-flow queues with CoDel; false: one FIFO
    uint32_t parent = 0;          // class trees: the parent's raw class id; 0: top level
    uint64_t ceil_bps = 0;        // paced only; 0: the rate
    uint32_t prio = 0;            // paced only; lower borrows first
    std::string rate_word;        // the rate as typed, for messages ("" = format_rate)
    size_t line = 0;              // of the configuration file it came from, for messages

    bool paced() const { return kind == PSPXDP_CLASS_PACED; }
    pspxdp_class_config to_config(uint32_t slot) const;
    static ClassSpec from_config(uint32_t classid, const pspxdp_class_config &c);
    // The configuration, slot aside.
    bool same_config(const ClassSpec &o) const;
};

// words: CLASSID (RATE | normal) [limit BYTES|TIME] [ce_threshold TIME|off] [burst SIZE]
// [flows on|off].
// Errors name the offending word.
Result<ClassSpec> parse_class_spec(std::span<const std::string> words);
// The words after a class's rate (each takes a value): what parse_class_spec
// takes, and what bash completion offers.
const std::vector<std::string_view> &class_words();
// A class tree's words (tc's htb: parent, rate, ceil, prio), anywhere after CLASSID.
const std::vector<std::string_view> &class_tree_words();
std::string format_class_spec(const ClassSpec &c);
// "1:a": minor 0 names a qdisc in tc, not a class; refused.
Result<uint32_t> parse_class_id(std::string_view word);

// A filter of a configuration file: the words of `pspxdp filter add` after
// DEV (filter_spec.hpp), and the line it came from, for messages.
struct ConfigFilter {
    FilterSpec spec;
    size_t line = 0;
};

struct Config {
    std::optional<uint64_t> line_rate_bps;   // absent: the device's stays
    std::optional<uint32_t> default_classid; // absent: the device's stays
    std::optional<bool> prio_direct;         // skb->priority picks a class; absent: stays
    std::vector<ClassSpec> classes;          // the whole set (apply deletes the others)
    std::vector<ConfigFilter> filters;       // the whole set
};

// The one reader of statement files (configuration files, class and filter
// --file, analyze --flows-file): one statement a line, '#' starts a comment,
// blank lines skipped. fn gets each statement's line number (from 1) and
// words; its first error stops the reading and comes back as "line N: ...",
// exit code kept.
using StatementFn = std::function<Result<void>(size_t line, std::span<const std::string> words)>;
Result<void> for_each_statement(std::string_view text, const StatementFn &fn);

// Errors are "line N: ..." naming the word.
Result<Config> parse_config(std::string_view text);
// A file's text ("-": standard input); errors (exit 2) name the file.
Result<std::string> read_text(const std::string &path);
// Reads and parses a configuration file ("-": standard input); errors are
// "FILE: line N: ...".
Result<Config> load_config(const std::string &path);
// header: comment lines printed first (without '#').
std::string format_config(const Config &c, const std::vector<std::string> &header = {});

// The rate checks of the classes of one device: each paced rate within what
// one class can reach on the wire (the framing ceiling of full-size frames
// at the device's MTU), the paced rates together within the line rate.
// `dev` names the device in messages.
Result<void> check_rates(const std::vector<ClassSpec> &classes, uint64_t line_rate_bps,
                         const std::string &dev, uint32_t mtu_bytes);
// The tree of the classes of one device (docs/design.md §3.12): parents
// exist and are paced, no cycle, depth at most 8, ceil >= rate, a child's
// ceil at most its parent's, the children's rates at most their parent's
// rate. check_rates() runs it (the sum against the line rate counts the
// top-level classes only).
Result<void> check_tree(const std::vector<ClassSpec> &classes);
// The classes with children among `classes` (raw ids): they hold no frames,
// so no filter and not the default class may name them.
std::vector<uint32_t> inner_classes(const std::vector<ClassSpec> &classes);
// A whole configuration: the rate checks, no class twice, no filter twice,
// every filter's class and the default class among the classes.
Result<void> check_config(const Config &c, uint64_t line_rate_bps, uint32_t default_classid,
                          const std::string &dev, uint32_t mtu_bytes);

} // namespace pspxdp::control
