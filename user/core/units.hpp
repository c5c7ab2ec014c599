// Rates, sizes, times and class ids, parsed and printed the way tc does it.
//
// Rates are bit/s in 64 bits. Suffixes follow tc(8): bit kbit mbit gbit tbit
// (SI, x1000), kibit mibit gibit tibit (IEC, x1024), and bps kbps mbps gbps
// tbps (plus kibps ... tibps) which in tc mean BYTES per second. A bare number
// is bit/s. Suffixes are case-insensitive, as in tc.
#pragma once

#include "core/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace pspxdp {

// "500mbit" -> 500000000. Errors: empty, negative, zero, fraction that is not
// a whole number of bit/s, overflow of 64 bits, unknown unit.
Result<uint64_t> parse_rate_bps(std::string_view text);

// 500000000 -> "500Mbit". Always exact: parse_rate_bps(format_rate(x)) == x.
std::string format_rate(uint64_t rate_bps);

// Sizes in bytes, tc's get_size: a bare number or b is bytes; k/kb/kib,
// m/mb/mib, g/gb/gib are powers of 1024. Exact, as rates; zero allowed.
Result<uint64_t> parse_bytes(std::string_view text);
// 65536 -> "64kb", 1500 -> "1500b": parses back to the same number.
std::string format_bytes(uint64_t bytes);

// Times in nanoseconds: ns/nsec, us/usec, ms/msec, s/sec (tc's get_time,
// plus ns). A bare number is in units of bare_unit_ns: tc reads it as
// microseconds; an option like "--watch SECONDS" as seconds; 0 (the
// default): a unit is required, none is guessed. Zero allowed. Errors name
// the input, as parse_rate_bps's.
Result<uint64_t> parse_duration_ns(std::string_view text, uint64_t bare_unit_ns = 0);
// 2000000 -> "2ms", 1500000 -> "1500us": parses back to the same number.
std::string format_duration(uint64_t ns);

// tc class id "major:minor", both hexadecimal, 16 bits each ("1:1", "1:a",
// "ffff:ffff"). The raw form is major << 16 | minor, as TC_H_MAKE.
struct ClassId {
    uint16_t major = 0;
    uint16_t minor = 0;

    constexpr uint32_t raw() const { return uint32_t(major) << 16 | minor; }
    static constexpr ClassId from_raw(uint32_t raw) {
        return ClassId{uint16_t(raw >> 16), uint16_t(raw & 0xffff)};
    }
    friend constexpr bool operator==(ClassId, ClassId) = default;
};

Result<ClassId> parse_classid(std::string_view text);
std::string format_classid(ClassId id); // "1:a"

} // namespace pspxdp
