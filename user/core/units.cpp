// Rates, sizes, times and class ids, the tc(8) way. See units.hpp.
#include "core/units.hpp"

#include "core/quote.hpp"

#include <cctype>
#include <cstdio>
#include <iterator>
#include <span>
#include <string>

namespace pspxdp {

namespace {

struct Unit {
    const char *name; // lower case; matching is case-insensitive
    uint64_t factor;  // base units (bit/s, bytes, ns) per unit
};

constexpr uint64_t kKi = 1024;
constexpr uint64_t kMi = kKi * 1024;
constexpr uint64_t kGi = kMi * 1024;
constexpr uint64_t kTi = kGi * 1024;

// tc's table (tc/tc_util.c get_rate): "bps" is BYTES per second, hence x8.
// No bare number: "300" is refused ("no unit"), as a time without a unit
// is, never read as 300 bit/s (where the user meant Mbit/s, a group's
// budget would have starved every member).
constexpr Unit kRateUnits[] = {
    {"bit", 1},
    {"kbit", 1'000},
    {"mbit", 1'000'000},
    {"gbit", 1'000'000'000},
    {"tbit", 1'000'000'000'000},
    {"kibit", kKi},
    {"mibit", kMi},
    {"gibit", kGi},
    {"tibit", kTi},
    {"bps", 8},
    {"kbps", 8 * 1'000ull},
    {"mbps", 8 * 1'000'000ull},
    {"gbps", 8 * 1'000'000'000ull},
    {"tbps", 8 * 1'000'000'000'000ull},
    {"kibps", 8 * kKi},
    {"mibps", 8 * kMi},
    {"gibps", 8 * kGi},
    {"tibps", 8 * kTi},
};

// tc's get_size: k, m, g are powers of 1024 (tc-tbf(8): "kb or k" = 1024 bytes).
constexpr Unit kSizeUnits[] = {{"", 1},      {"b", 1},    {"k", kKi},  {"kb", kKi},
                               {"kib", kKi}, {"m", kMi},  {"mb", kMi}, {"mib", kMi},
                               {"g", kGi},   {"gb", kGi}, {"gib", kGi}};

std::string lower(std::string_view s) {
    std::string out(s);
    for (char &c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Multiplies a decimal digit string (most significant first) by a small
// factor in place. Arbitrary precision so that "1.000...0001kbit" with any
// number of digits is judged exactly instead of through a double.
void multiply_decimal(std::string &digits, uint64_t factor) {
    unsigned __int128 carry = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        unsigned __int128 v = (unsigned __int128)(*it - '0') * factor + carry;
        *it = char('0' + int(v % 10));
        carry = v / 10;
    }
    while (carry) {
        digits.insert(digits.begin(), char('0' + int(carry % 10)));
        carry /= 10;
    }
}

// What a quantity is called in its error messages.
struct Quantity {
    const char *noun;    // "rate"
    const char *example; // "500mbit"
    const char *base;    // "bit/s": the value must be a whole number of these
};

// A decimal number and a unit from `units`, exactly: number * factor must be
// a whole number of base units that fits 64 bits. Zero is the caller's call.
Result<uint64_t> parse_scaled(std::string_view text, std::span<const Unit> units,
                              const Quantity &q) {
    auto bad = [&](const std::string &what) {
        return err(std::string(q.noun) + " " + quote(text) + ": " + what);
    };
    const std::string expected = std::string("(expected e.g. \"") + q.example + "\")";
    if (text.empty()) return bad("empty " + expected);
    size_t pos = 0;
    if (text[0] == '-') return bad(std::string("negative ") + q.noun);
    if (text[0] == '+') pos = 1; // strtod (and so tc) accepts a plus sign

    std::string int_digits, frac_digits;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
        int_digits += text[pos++];
    bool has_point = pos < text.size() && text[pos] == '.';
    if (has_point) {
        ++pos;
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
            frac_digits += text[pos++];
    }
    if (int_digits.empty() && frac_digits.empty()) return bad("not a number " + expected);

    std::string_view unit_text = text.substr(pos);
    for (char c : unit_text)
        if (!std::isalpha(static_cast<unsigned char>(c)))
            return bad("unexpected " + quote(unit_text) + " after the number");
    const Unit *unit = nullptr;
    std::string unit_lower = lower(unit_text);
    for (const auto &u : units)
        if (unit_lower == u.name) unit = &u;
    if (!unit && unit_text.empty()) return bad("no unit " + expected);
    if (!unit) return bad("unknown unit " + quote(unit_text));

    // value = (int_digits.frac_digits) * unit: multiply the digit string
    // without the point, then the last frac_digits.size() digits must be zero.
    std::string digits = int_digits + frac_digits;
    multiply_decimal(digits, unit->factor);
    size_t frac_len = frac_digits.size();
    for (size_t i = digits.size() - frac_len; i < digits.size(); ++i)
        if (digits[i] != '0') return bad(std::string("not a whole number of ") + q.base);
    digits.resize(digits.size() - frac_len);

    size_t first = digits.find_first_not_of('0');
    if (first == std::string::npos) return uint64_t(0);
    digits.erase(0, first);
    static constexpr std::string_view kMax = "18446744073709551615";
    if (digits.size() > kMax.size() || (digits.size() == kMax.size() && digits > kMax))
        return bad(std::string("too large (over 64 bits of ") + q.base + ")");
    uint64_t value = 0;
    for (char c : digits) value = value * 10 + uint64_t(c - '0');
    return value;
}

struct Name {
    const char *name;
    uint64_t factor;
};

// value in the largest of `names` (smallest first) that divides it exactly,
// so the text parses back to the same number (1500000 -> "1500Kbit").
std::string format_scaled(uint64_t value, std::span<const Name> names) {
    size_t best = 0;
    for (size_t i = 0; i < names.size(); ++i)
        if (value != 0 && value % names[i].factor == 0) best = i;
    return std::to_string(value / names[best].factor) + names[best].name;
}

} // namespace

// What a refused rate was likely meant as: "500mbits" and "500mbit/s" are
// 500mbit; "500M" and "500mb" are 500mbit or (tc's bytes) 500mbps. "" when
// there is no likely reading.
static std::string rate_suggestion(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) ||
                                 text[pos] == '.' || text[pos] == '+'))
        ++pos;
    if (pos == 0 || pos == text.size()) return "";
    const std::string number(text.substr(0, pos));
    std::string unit = lower(text.substr(pos));
    auto known = [](std::string_view u) {
        for (const auto &k : kRateUnits)
            if (*k.name && u == k.name) return true;
        return false;
    };
    for (std::string_view tail : {"/s", "ps", "s"}) {
        if (unit.size() > tail.size() && unit.ends_with(tail)) {
            std::string stem = unit.substr(0, unit.size() - tail.size());
            if (known(stem)) return quote(number + stem);
        }
    }
    if (unit.size() <= 3 && std::string_view("kmgt").find(unit[0]) != std::string_view::npos &&
        (unit.size() == 1 || unit.substr(1) == "b" || unit.substr(1) == "i" ||
         unit.substr(1) == "ib")) {
        const std::string prefix = unit.substr(0, unit.find('b'));
        return quote(number + prefix + "bit") + " (bit/s), or " + quote(number + prefix + "bps") +
               " (bytes/s)";
    }
    return "";
}

Result<uint64_t> parse_rate_bps(std::string_view text) {
    static constexpr Quantity kRate{"rate", "500mbit", "bit/s"};
    auto r = parse_scaled(text, kRateUnits, kRate);
    if (r && *r == 0) return err("rate " + quote(text) + ": zero rate");
    if (!r) {
        if (std::string guess = rate_suggestion(text); !guess.empty())
            return err(r.error() + ": did you mean " + guess + "?");
    }
    return r;
}

Result<uint64_t> parse_bytes(std::string_view text) {
    static constexpr Quantity kSize{"size", "64kb", "bytes"};
    return parse_scaled(text, kSizeUnits, kSize);
}

Result<BurstSize> parse_burst(std::string_view text) {
    static constexpr Unit kMtuUnit[] = {{"mtu", 1}};
    static constexpr Quantity kMtus{"burst", "3mtu", "largest frames"};
    static constexpr Quantity kBytes{"burst", "3mtu or 4500b", "bytes"};
    if (lower(text).ends_with("mtu")) {
        auto n = parse_scaled(text, kMtuUnit, kMtus);
        if (!n) return n.failure();
        return BurstSize{0, *n};
    }
    auto n = parse_scaled(text, kSizeUnits, kBytes);
    if (!n) return n.failure();
    return BurstSize{*n, 0};
}

std::string format_burst(BurstSize b) {
    return b.mtus ? std::to_string(b.mtus) + "mtu" : format_bytes(b.bytes);
}

Result<uint64_t> parse_duration_ns(std::string_view text, uint64_t bare_unit_ns) {
    const Unit units[] = {
        {"", bare_unit_ns},
        {"ns", 1},
        {"nsec", 1},
        {"us", 1'000},
        {"usec", 1'000},
        {"usecs", 1'000},
        {"ms", 1'000'000},
        {"msec", 1'000'000},
        {"msecs", 1'000'000},
        {"s", 1'000'000'000},
        {"sec", 1'000'000'000},
        {"secs", 1'000'000'000},
    };
    static constexpr Quantity kTime{"time", "10ms", "nanoseconds"};
    // Without a bare unit the "" entry is left out: "no unit", never a guess.
    return parse_scaled(text, std::span<const Unit>(units).subspan(bare_unit_ns ? 0 : 1), kTime);
}

std::string format_bytes(uint64_t bytes) {
    static constexpr Name kNames[] = {{"b", 1}, {"kb", kKi}, {"mb", kMi}, {"gb", kGi}};
    return format_scaled(bytes, kNames);
}

std::string format_duration(uint64_t ns) {
    static constexpr Name kNames[] = {
        {"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}};
    return format_scaled(ns, kNames);
}

std::string format_rate(uint64_t rate_bps) {
    // As tc prints: the largest SI unit that divides the rate exactly.
    static constexpr Name kNames[] = {{"bit", 1},
                                      {"Kbit", 1'000},
                                      {"Mbit", 1'000'000},
                                      {"Gbit", 1'000'000'000},
                                      {"Tbit", 1'000'000'000'000}};
    return format_scaled(rate_bps, kNames);
}
namespace {

// One side of "major:minor": 1+ hex digits whose value fits 16 bits.
bool parse_hex16(std::string_view s, uint16_t &out) {
    if (s.empty()) return false;
    uint32_t v = 0;
    for (char c : s) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
        int d = std::isdigit(static_cast<unsigned char>(c))
                    ? c - '0'
                    : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
        v = v * 16 + uint32_t(d);
        if (v > 0xffff) return false;
    }
    out = uint16_t(v);
    return true;
}

} // namespace

Result<ClassId> parse_classid(std::string_view text) {
    auto bad = [&](const char *why) {
        return err("class id " + quote(text) + ": " + why +
                   " (expected major:minor in hex, e.g. \"1:a\")");
    };
    if (text.empty()) return bad("empty");
    size_t colon = text.find(':');
    if (colon == std::string_view::npos) return bad("no ':'");
    if (text.find(':', colon + 1) != std::string_view::npos) return bad("more than one ':'");
    ClassId id;
    std::string_view major = text.substr(0, colon), minor = text.substr(colon + 1);
    if (major.empty()) return bad("missing major");
    if (minor.empty()) return bad("missing minor");
    if (!parse_hex16(major, id.major)) return bad("major is not a 16-bit hex number");
    if (!parse_hex16(minor, id.minor)) return bad("minor is not a 16-bit hex number");
    return id;
}

std::string format_classid(ClassId id) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%x:%x", unsigned(id.major), unsigned(id.minor));
    return buf;
}

} // namespace pspxdp
