// Rates, sizes, times and class ids, parsed and printed the way tc does it.
//
// Rates are bit/s in 64 bits. Suffixes follow tc(8): bit kbit mbit gbit tbit
// (SI, x1000), kibit mibit gibit tibit (IEC, x1024), and bps kbps mbps gbps
// tbps (plus kibps ... tibps) which in tc mean BYTES per second. A bare number
// is refused ("no unit"; tc reads it as bit/s, which "--budget 300" never
// meant). Suffixes are case-insensitive, as in tc.
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

// A burst size, tc's word (tbf's burst): bytes as parse_bytes ("4500",
// "4.5kb"), or a whole number of largest frames ("3mtu"), which the user of
// it resolves at the device's MTU. 0 bytes: not set.
struct BurstSize {
    uint64_t bytes = 0;
    uint64_t mtus = 0;
    bool set() const { return bytes || mtus; }
    // In bytes, a largest frame being largest_bytes; 0 if not set.
    uint64_t resolve(uint64_t largest_bytes) const { return bytes ? bytes : mtus * largest_bytes; }
    bool operator==(const BurstSize &) const = default;
};
Result<BurstSize> parse_burst(std::string_view text);
// "3mtu", "4500b": parses back to the same size.
std::string format_burst(BurstSize b);

// Times in nanoseconds: ns/nsec, us/usec, ms/msec, s/sec (tc's get_time,
// plus ns). A bare number is in units of bare_unit_ns: tc reads it as
// microseconds; an option like "--watch SECONDS" as seconds; 0 (the
// default): a unit is required, none is guessed. Zero allowed. Errors name
// the input, as parse_rate_bps's.
Result<uint64_t> parse_duration_ns(std::string_view text, uint64_t bare_unit_ns = 0);
// 2000000 -> "2ms", 1500000 -> "1500us": parses back to the same number.
std::string format_duration(uint64_t ns);

// Byte times and nanoseconds on a wire of rate_bps (a byte time: 8 bits at
// the rate), exact, the rounding in the name: in a byte-exact pacer a floor
// where a ceiling was meant is a frame one byte time early. 64 bits while
// the product fits (2.3 s of bytes at any rate; 18 s of ns at 1 Gbit/s), 128
// beyond; a result past 64 bits saturates at UINT64_MAX. rate_bps > 0.
inline constexpr uint64_t kBitNsPerByteSec = 8ull * 1'000'000'000; // bits/byte * ns/s

// The ns the wire takes for `bytes`, rounded down: a wait for them that
// never outlasts them; a duration to print.
inline uint64_t ns_for_bytes_floor(uint64_t bytes, uint64_t rate_bps) {
    uint64_t num;
    if (!__builtin_mul_overflow(bytes, kBitNsPerByteSec, &num)) return num / rate_bps;
    const unsigned __int128 ns = (unsigned __int128)bytes * kBitNsPerByteSec / rate_bps;
    return ns > UINT64_MAX ? UINT64_MAX : uint64_t(ns);
}
// Rounded up: the first ns by which the wire has sent all `bytes`.
inline uint64_t ns_for_bytes_ceil(uint64_t bytes, uint64_t rate_bps) {
    uint64_t num;
    if (!__builtin_mul_overflow(bytes, kBitNsPerByteSec, &num))
        return num / rate_bps + (num % rate_bps != 0);
    const unsigned __int128 wide = (unsigned __int128)bytes * kBitNsPerByteSec;
    const unsigned __int128 ns = wide / rate_bps + (wide % rate_bps != 0);
    return ns > UINT64_MAX ? UINT64_MAX : uint64_t(ns);
}
// The whole byte times the wire covers in ns, rounded down.
inline uint64_t bytes_in_ns_floor(uint64_t ns, uint64_t rate_bps) {
    uint64_t num;
    if (!__builtin_mul_overflow(ns, rate_bps, &num)) return num / kBitNsPerByteSec;
    const unsigned __int128 bytes = (unsigned __int128)ns * rate_bps / kBitNsPerByteSec;
    return bytes > UINT64_MAX ? UINT64_MAX : uint64_t(bytes);
}

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
