// Filters as words and as map entries: pure functions, no syscalls (the
// unit tests check every accepted and refused form without BPF).
//
//   pref 10 dst 10.1.2.0/24 proto udp dport 5000-5099 classid 1:1
//
// parse_filter(words) -> FilterSpec -> format_filter(spec) gives back the
// canonical words (fields in a fixed order, pref always written), and
// parse_filter(format_filter(s)) == s. expand() turns a filter into the
// exact-match entries of the tuple space classifier (shared.h "Filters"):
// port ranges become the minimal set of aligned power-of-two blocks.
#pragma once

#include "core/result.hpp"
#include "core/units.hpp"
#include "pspxdp/shared.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pspxdp::control {

struct Prefix {
    int family = 4;                 // 4 or 6
    std::array<uint8_t, 16> addr{}; // network order, bits beyond len are zero
    uint8_t len = 0;
    friend bool operator==(const Prefix &, const Prefix &) = default;
};

struct PortRange {
    uint16_t min = 0, max = 0; // inclusive
    friend bool operator==(const PortRange &, const PortRange &) = default;
};

// mark VALUE[/MASK]: skb->mark & mask == value (tc's fw).
struct MarkMatch {
    uint32_t value = 0, mask = 0xffffffff;
    friend bool operator==(const MarkMatch &, const MarkMatch &) = default;
};

// cgroup PATH: the sending socket's cgroup v2 is PATH or below it. The
// words give the path; id and level come from the cgroup file system when
// the filter is added (resolve_filter_cgroup), 0 until then.
struct CgroupMatch {
    std::string path; // "/a/b" under the cgroup2 mount once resolved; as typed before
    uint64_t id = 0;
    uint8_t level = 0;
    friend bool operator==(const CgroupMatch &, const CgroupMatch &) = default;
};

struct FilterSpec {
    uint32_t pref = PSPXDP_FILTER_PREF_DEFAULT;
    std::optional<Prefix> src, dst;
    std::optional<uint8_t> proto;
    std::optional<PortRange> sport, dport;
    std::optional<uint16_t> vlan; // outer tag's VLAN id
    std::optional<uint8_t> dscp;
    std::optional<MarkMatch> mark;
    std::optional<CgroupMatch> cgroup;
    ClassId classid;

    // 4 or 6 with an address field, 0 (both families and non-IP) without.
    int family() const { return src ? src->family : dst ? dst->family : 0; }
    // enum pspxdp_filter_field bits of the fields present.
    uint16_t fields() const;
    friend bool operator==(const FilterSpec &, const FilterSpec &) = default;
};

// The identity of a filter: its fields and pref (not its class). Two filters
// with the same identity are duplicates.
bool same_identity(const FilterSpec &a, const FilterSpec &b);

// A line's words, split at runs of blanks (a config file's filter line).
std::vector<std::string> split_words(std::string_view line);

// The words of `filter add` after DEV: [pref N] FIELD VALUE... classid X:Y
// (tc's "flowid" and "prio"/"priority"/"preference" are accepted). Errors are
// one line naming the offending word, with exit code 2.
Result<FilterSpec> parse_filter(std::span<const std::string> words);
// Is word one of the words above (so it cannot be the device name)?
bool is_filter_word(std::string_view word);
// The words of a filter (canonical forms: pref, the fields, classid), and the
// protocol names proto takes: what filter add parses, and what bash completion offers.
std::span<const std::string_view> filter_words();
std::vector<std::string_view> proto_names();
std::string format_filter(const FilterSpec &spec);

// The words of `filter del` after DEV: either the words of a filter (pref and
// classid optional: without pref, the fields must name one filter) or
// `pref N` alone (every filter of that pref, as tc deletes a whole prio).
struct FilterSelect {
    FilterSpec spec;
    bool has_fields = false, has_pref = false, has_classid = false;
    bool selects(const FilterSpec &f) const;
    std::string text() const; // what was asked, for messages
};
Result<FilterSelect> parse_filter_select(std::span<const std::string> words);

// "10.1.2.0/24": the length is always written.
std::string format_prefix(const Prefix &p);
// "0x10", "0x10/0xff" (the mask left out when all bits count).
std::string format_mark(const MarkMatch &m);

// Protocol names accepted and printed (others are numbers).
std::optional<uint8_t> proto_number(std::string_view name);
std::string proto_name(uint8_t proto); // "udp" or "47"

// The minimal set of aligned blocks covering [r.min, r.max]: each block is
// value .. value + 2^(16 - plen) - 1 with value's low 16 - plen bits zero.
struct PortBlock {
    uint16_t value = 0;
    uint8_t plen = 16;
    friend bool operator==(const PortBlock &, const PortBlock &) = default;
};
std::vector<PortBlock> port_blocks(PortRange r);

// A filter as stored: its id (key of `filters`, index of `filter_stats`) and
// sequence number (ties between equal prefs: the lower seq, added first, wins).
struct StoredFilter {
    uint32_t id = 0;
    uint64_t seq = 0;
    FilterSpec spec;
    uint64_t order() const { return PSPXDP_FILTER_ORDER(spec.pref, seq); }
};
pspxdp_filter to_map_value(const StoredFilter &f);
// Refuses values no pspxdp wrote (e.g. a corrupted or foreign pin).
Result<StoredFilter> from_map_value(uint32_t id, const pspxdp_filter &v);

// Entries keyed by the raw key bytes.
using KeyBytes = std::array<uint8_t, sizeof(pspxdp_filter_key)>;
struct KeyBytesHash {
    size_t operator()(const KeyBytes &k) const noexcept;
};
KeyBytes key_bytes(const pspxdp_filter_key &k);
pspxdp_filter_key key_of(const KeyBytes &b);
using EntryMap = std::unordered_map<KeyBytes, pspxdp_filter_entry, KeyBytesHash>;

// One filter's entries (one per combination of port blocks).
std::vector<std::pair<pspxdp_filter_key, pspxdp_filter_entry>> expand(const StoredFilter &f);
// All filters' entries; where two filters give one key, the lower order wins.
EntryMap build_entries(std::span<const StoredFilter> filters);
// The shape table the classifier walks: one slot per shape, sorted by best
// order (no end slot). Derived from the entries alone.
std::vector<pspxdp_filter_shape_slot> shape_table(const EntryMap &entries);
// The masks of a shape (mask.shape = the shape).
pspxdp_filter_key shape_mask(const pspxdp_filter_shape &shape);
// The number of entries and shapes a filter needs alone.
size_t entry_count(const FilterSpec &spec);

// Does prefix p hold the address (family 4 or 6, network order)?
bool prefix_has(const Prefix &p, int family, const uint8_t *addr);

// The class a TCP connection from src to dst:dport goes through (addresses
// in network order, family 4 or 6): the first of the filters (evaluation
// order) that can match it, else default_classid. Its source port is the
// kernel's choice, so a filter on sport, a VLAN or a DSCP other than 0 is
// taken not to match.
uint32_t class_for_tcp(std::span<const FilterSpec> filters, uint32_t default_classid, int family,
                       const uint8_t *src, const uint8_t *dst, uint16_t dport);

} // namespace pspxdp::control
