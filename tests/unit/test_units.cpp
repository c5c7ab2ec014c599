// Rates and class ids, tc(8) style.
#include "core/units.hpp"

#include <catch2/catch.hpp>

#include <limits>
#include <random>

using namespace pspxdp;

namespace {

// A parser's value for text, which must parse, or its error, which must be one.
template <class Parse> uint64_t value_of(Parse parse, std::string_view text) {
    auto r = parse(text);
    INFO(text << ": " << r.error());
    REQUIRE(r.ok());
    return *r;
}

template <class Parse> std::string error_of(Parse parse, std::string_view text) {
    auto r = parse(text);
    INFO(text);
    REQUIRE_FALSE(r.ok());
    return r.error();
}

uint64_t rate(std::string_view text) { return value_of(parse_rate_bps, text); }
std::string rate_error(std::string_view text) { return error_of(parse_rate_bps, text); }

} // namespace

TEST_CASE("parse_rate_bps: tc units", "[units]") {
    CHECK(rate("500mbit") == 500'000'000);
    CHECK(rate("8kbit") == 8'000);
    CHECK(rate("1gbit") == 1'000'000'000);
    CHECK(rate("2tbit") == 2'000'000'000'000);
    CHECK(rate("1500bit") == 1500);
    CHECK(rate_error("1500") == "rate \"1500\": no unit (expected e.g. \"500mbit\")");
    CHECK(rate("1kibit") == 1024);
    CHECK(rate("1mibit") == 1024 * 1024);
    CHECK(rate("1gibit") == 1024ull * 1024 * 1024);
    CHECK(rate("1tibit") == 1024ull * 1024 * 1024 * 1024);
    // tc: "bps" is BYTES per second.
    CHECK(rate("1bps") == 8);
    CHECK(rate("1kbps") == 8'000);
    CHECK(rate("10mbps") == 80'000'000);
    CHECK(rate("1gbps") == 8'000'000'000);
    CHECK(rate("1tbps") == 8'000'000'000'000);
    CHECK(rate("1kibps") == 8 * 1024);
    CHECK(rate("1mibps") == 8ull * 1024 * 1024);
    CHECK(rate("1gibps") == 8ull * 1024 * 1024 * 1024);
    CHECK(rate("1tibps") == 8ull * 1024 * 1024 * 1024 * 1024);
}

TEST_CASE("parse_rate_bps: case and decimals", "[units]") {
    CHECK(rate("500Mbit") == 500'000'000);
    CHECK(rate("500MBIT") == 500'000'000);
    CHECK(rate("1MBps") == 8'000'000);
    CHECK(rate("1KiBps") == 8192);
    CHECK(rate("1.5mbit") == 1'500'000);
    CHECK(rate("0.5kbit") == 500);
    CHECK(rate(".5kbit") == 500);
    CHECK(rate("2.bit") == 2);
    CHECK(rate("1.000000000000000000000000000000gbit") == 1'000'000'000);
    CHECK(rate("0.125bps") == 1); // an eighth of a byte is one bit
    CHECK(rate("0.5kibit") == 512);
    // 1 bit/s in tibit: 2^-40 written out exactly (40 decimals).
    CHECK(rate("0.0000000000009094947017729282379150390625tibit") == 1);
    CHECK(rate("18446744073709551615bit") == std::numeric_limits<uint64_t>::max());
    CHECK(rate("18446744073709.551615mbit") == std::numeric_limits<uint64_t>::max());
    CHECK(rate("000500mbit") == 500'000'000);
}

TEST_CASE("parse_rate_bps: a likely slip gets a \"did you mean\"", "[units]") {
    CHECK(rate_error("500mbits") ==
          "rate \"500mbits\": unknown unit \"mbits\": did you mean \"500mbit\"?");
    CHECK(rate_error("500Mbit/s") == "rate \"500Mbit/s\": unexpected \"Mbit/s\" after the number: "
                                     "did you mean \"500mbit\"?");
    CHECK(rate_error("500M") == "rate \"500M\": unknown unit \"M\": did you mean \"500mbit\" "
                                "(bit/s), or \"500mbps\" (bytes/s)?");
    CHECK(rate_error("1.5gb") == "rate \"1.5gb\": unknown unit \"gb\": did you mean \"1.5gbit\" "
                                 "(bit/s), or \"1.5gbps\" (bytes/s)?");
    CHECK(rate_error("2kib") == "rate \"2kib\": unknown unit \"kib\": did you mean \"2kibit\" "
                                "(bit/s), or \"2kibps\" (bytes/s)?");
    // Each suggestion parses.
    for (const char *s : {"500mbit", "500mbps", "1.5gbit", "2kibit", "2kibps"}) CHECK(rate(s) > 0);
    // No likely reading: no guess.
    CHECK(rate_error("5xbit") == "rate \"5xbit\": unknown unit \"xbit\"");
}

TEST_CASE("parse_rate_bps: every error names the input", "[units]") {
    CHECK(rate_error("5xbit") == "rate \"5xbit\": unknown unit \"xbit\"");
    CHECK(rate_error("") == "rate \"\": empty (expected e.g. \"500mbit\")");
    CHECK(rate_error("-5mbit") == "rate \"-5mbit\": negative rate");
    CHECK(rate_error("0") == "rate \"0\": no unit (expected e.g. \"500mbit\")");
    CHECK(rate_error("0bit") == "rate \"0bit\": zero rate");
    CHECK(rate_error("0mbit") == "rate \"0mbit\": zero rate");
    CHECK(rate_error("0.000kbit") == "rate \"0.000kbit\": zero rate");
    CHECK(rate_error("0.5bit") == "rate \"0.5bit\": not a whole number of bit/s");
    CHECK(rate_error("1.0001kbit") == "rate \"1.0001kbit\": not a whole number of bit/s");
    CHECK(rate_error("0.1bps") == "rate \"0.1bps\": not a whole number of bit/s");
    CHECK(rate_error("1.00000000000000000000000000000000000000000001gbit") ==
          "rate \"1.00000000000000000000000000000000000000000001gbit\": not a whole number "
          "of bit/s");
    CHECK(rate_error("18446744073709551616bit") ==
          "rate \"18446744073709551616bit\": too large (over 64 bits of bit/s)");
    CHECK(rate_error("18446745tbit") == "rate \"18446745tbit\": too large (over 64 bits of bit/s)");
    CHECK(rate_error("99999999999999999999999999999gbit") ==
          "rate \"99999999999999999999999999999gbit\": too large (over 64 bits of bit/s)");
    CHECK(rate_error("mbit") == "rate \"mbit\": not a number (expected e.g. \"500mbit\")");
    CHECK(rate_error(".") == "rate \".\": not a number (expected e.g. \"500mbit\")");
    CHECK(rate_error("abc") == "rate \"abc\": not a number (expected e.g. \"500mbit\")");
    CHECK(rate_error("1.2.3mbit") == "rate \"1.2.3mbit\": unexpected \".3mbit\" after the number");
    CHECK(rate_error("5 mbit") == "rate \"5 mbit\": unexpected \" mbit\" after the number");
    CHECK(rate_error("5mbit ") == "rate \"5mbit \": unexpected \"mbit \" after the number");
    CHECK(rate_error("1e6") == "rate \"1e6\": unexpected \"e6\" after the number");
    CHECK(rate_error("5mbits") ==
          "rate \"5mbits\": unknown unit \"mbits\": did you mean \"5mbit\"?");
    CHECK(rate_error("5b") == "rate \"5b\": unknown unit \"b\"");
}

TEST_CASE("format_rate: tc style", "[units]") {
    CHECK(format_rate(500'000'000) == "500Mbit");
    CHECK(format_rate(8'000) == "8Kbit");
    CHECK(format_rate(1'000'000'000) == "1Gbit");
    CHECK(format_rate(1500) == "1500bit");
    CHECK(format_rate(1'500'000) == "1500Kbit");
    CHECK(format_rate(1234567) == "1234567bit");
    CHECK(format_rate(3'000'000'000'000) == "3Tbit");
    CHECK(format_rate(3'000'000'000'000'000) == "3000Tbit");
    CHECK(format_rate(1) == "1bit");
    CHECK(format_rate(std::numeric_limits<uint64_t>::max()) == "18446744073709551615bit");
}

TEST_CASE("format_rate round-trips exactly", "[units]") {
    auto round_trip = [](uint64_t x) {
        auto back = parse_rate_bps(format_rate(x));
        INFO(x << " -> " << format_rate(x) << ": " << back.error());
        REQUIRE(back.ok());
        REQUIRE(*back == x);
    };
    std::mt19937_64 rng(20051111);
    for (int i = 0; i < 20000; ++i) {
        uint64_t x = rng();
        // Also values with many trailing zeros, where the unit choice matters.
        int zeros = int(rng() % 19);
        uint64_t p = 1;
        for (int z = 0; z < zeros; ++z) p *= 10;
        uint64_t y = (x % (std::numeric_limits<uint64_t>::max() / p)) * p;
        if (x) round_trip(x);
        if (y) round_trip(y);
    }
    for (uint64_t x : {uint64_t(1), uint64_t(999), uint64_t(1000), uint64_t(1001),
                       std::numeric_limits<uint64_t>::max(), uint64_t(18'000'000'000'000'000'000u)})
        round_trip(x);
}

TEST_CASE("parse_classid / format_classid", "[units]") {
    auto id = [](std::string_view t) {
        auto r = parse_classid(t);
        INFO(t << ": " << r.error());
        REQUIRE(r.ok());
        return *r;
    };
    CHECK(id("1:1") == ClassId{1, 1});
    CHECK(id("1:a") == ClassId{1, 0xa});
    CHECK(id("A:FF") == ClassId{0xa, 0xff});
    CHECK(id("ffff:ffff") == ClassId{0xffff, 0xffff});
    CHECK(id("0:0") == ClassId{0, 0});
    CHECK(id("0001:0010") == ClassId{1, 0x10});
    CHECK(id("1:a").raw() == 0x0001000au);
    CHECK(ClassId::from_raw(0xabcd0012u) == ClassId{0xabcd, 0x12});

    CHECK(format_classid({1, 0xa}) == "1:a");
    CHECK(format_classid({0xffff, 0}) == "ffff:0");
    for (uint32_t raw : {0u, 0x10001u, 0xabcd1234u, 0xffffffffu}) {
        auto back = parse_classid(format_classid(ClassId::from_raw(raw)));
        REQUIRE(back.ok());
        CHECK(back->raw() == raw);
    }

    auto bad = [](std::string_view t) {
        auto r = parse_classid(t);
        INFO(t);
        REQUIRE_FALSE(r.ok());
        // One line that names the input.
        CHECK(r.error().find("\"" + std::string(t) + "\"") != std::string::npos);
        CHECK(r.error().find('\n') == std::string::npos);
        return r.error();
    };
    CHECK(bad("1").find("no ':'") != std::string::npos);
    CHECK(bad("1:").find("missing minor") != std::string::npos);
    CHECK(bad(":1").find("missing major") != std::string::npos);
    CHECK(bad("10000:1").find("major is not a 16-bit hex number") != std::string::npos);
    CHECK(bad("1:10000").find("minor is not a 16-bit hex number") != std::string::npos);
    CHECK(bad("g:1").find("major") != std::string::npos);
    CHECK(bad("1:1:1").find("more than one ':'") != std::string::npos);
    CHECK(bad("").find("empty") != std::string::npos);
    bad("-1:1");
    bad(" 1:1");
    bad("0x1:1");
}

TEST_CASE("parse_duration_ns: tc time units, exact, unit required", "[units]") {
    // Without a bare unit (the default): a unit is required.
    auto parse = [](std::string_view text) { return parse_duration_ns(text); };
    auto ns = [&](std::string_view text) { return value_of(parse, text); };
    auto error = [&](std::string_view text) { return error_of(parse, text); };
    CHECK(ns("200us") == 200'000);
    CHECK(ns("200usec") == 200'000);
    CHECK(ns("1ms") == 1'000'000);
    CHECK(ns("1.5ms") == 1'500'000);
    CHECK(ns("0.25s") == 250'000'000);
    CHECK(ns("2SEC") == 2'000'000'000);
    CHECK(ns("80ns") == 80);
    CHECK(ns("0us") == 0); // a horizon of zero is meaningful
    CHECK(ns("18446744073709551615ns") == std::numeric_limits<uint64_t>::max());
    CHECK(error("200") == "time \"200\": no unit (expected e.g. \"10ms\")");
    CHECK(error("1.5ns") == "time \"1.5ns\": not a whole number of nanoseconds");
    CHECK(error("-1ms") == "time \"-1ms\": negative time");
    CHECK(error("5min") == "time \"5min\": unknown unit \"min\"");
    CHECK(error("") == "time \"\": empty (expected e.g. \"10ms\")");
    CHECK(error("inf") == "time \"inf\": not a number (expected e.g. \"10ms\")");
    CHECK(error("18446744073709551616ns") ==
          "time \"18446744073709551616ns\": too large (over 64 bits of nanoseconds)");
}

TEST_CASE("byte times: ns_for_bytes_floor/_ceil and bytes_in_ns_floor round as named", "[units]") {
    // 1 Gbit/s: a byte is exactly 8 ns, so both roundings agree.
    CHECK(ns_for_bytes_floor(1, 1'000'000'000) == 8);
    CHECK(ns_for_bytes_ceil(1, 1'000'000'000) == 8);
    CHECK(ns_for_bytes_floor(0, 1'000'000'000) == 0);
    CHECK(ns_for_bytes_ceil(0, 1'000'000'000) == 0);
    // 3 Gbit/s: a byte is 8/3 ns. 3 bytes are exactly 8 ns; one byte either
    // side is a remainder, rounded down by floor and up by ceil.
    const uint64_t r3 = 3'000'000'000;
    CHECK(ns_for_bytes_floor(3, r3) == 8);
    CHECK(ns_for_bytes_ceil(3, r3) == 8);
    CHECK(ns_for_bytes_floor(2, r3) == 5); // 5.33
    CHECK(ns_for_bytes_ceil(2, r3) == 6);
    CHECK(ns_for_bytes_floor(4, r3) == 10); // 10.67
    CHECK(ns_for_bytes_ceil(4, r3) == 11);
    CHECK(bytes_in_ns_floor(8, r3) == 3);
    CHECK(bytes_in_ns_floor(7, r3) == 2); // 2.625
    CHECK(bytes_in_ns_floor(0, r3) == 0);
    // The two are each other's bounds: ceil(bytes) ns cover the bytes, one ns
    // less does not; floor(bytes) ns never cover more than the bytes.
    for (uint64_t rate :
         {1ull, 7ull, 999'999'937ull, 3'000'000'000ull, 100'000'000'000ull, 400'000'000'000ull})
        for (uint64_t bytes : {1ull, 2ull, 63ull, 64ull, 1518ull, 1'000'003ull, 2'305'843'009ull}) {
            const uint64_t up = ns_for_bytes_ceil(bytes, rate),
                           down = ns_for_bytes_floor(bytes, rate);
            INFO("rate " << rate << " bytes " << bytes);
            CHECK(up - down <= 1);
            CHECK(bytes_in_ns_floor(up, rate) >= bytes);
            CHECK(bytes_in_ns_floor(up - 1, rate) < bytes);
            CHECK(bytes_in_ns_floor(down, rate) <= bytes);
        }
    // Past 64 bits of product (bytes * 8e9 overflows at 2.3e9 bytes): exact
    // in 128 bits. 2^62 bytes at 8 Gbit/s: 2^62 ns; the remainder case rounds.
    const uint64_t big = 1ull << 62;
    CHECK(ns_for_bytes_floor(big, 8'000'000'000) == big);
    CHECK(ns_for_bytes_ceil(big, 8'000'000'000) == big);
    CHECK(ns_for_bytes_floor(big + 1, 3 * 8'000'000'000ull) == (big + 1) / 3);
    CHECK(ns_for_bytes_ceil(big + 1, 3 * 8'000'000'000ull) == (big + 1) / 3 + 1);
    CHECK(bytes_in_ns_floor(big, 8'000'000'000) == big);
    // A result past 64 bits saturates.
    CHECK(ns_for_bytes_floor(UINT64_MAX, 1) == UINT64_MAX);
    CHECK(ns_for_bytes_ceil(UINT64_MAX, 1) == UINT64_MAX);
    CHECK(bytes_in_ns_floor(UINT64_MAX, UINT64_MAX) == UINT64_MAX);
}

TEST_CASE("parse_burst: bytes as tc's sizes, or largest frames", "[units]") {
    auto b = parse_burst("4500");
    REQUIRE(b);
    CHECK(b->bytes == 4500);
    CHECK(b->mtus == 0);
    CHECK(parse_burst("4.5kb")->bytes == 4608); // tc: k = 1024
    CHECK(parse_burst("3mtu")->mtus == 3);
    CHECK(parse_burst("3MTU")->mtus == 3);
    CHECK(parse_burst("3mtu")->resolve(1518) == 4554);
    CHECK(parse_burst("4500b")->resolve(1518) == 4500);
    CHECK(!parse_burst("0")->set());
    CHECK(parse_burst("2.5mtu").error() ==
          "burst \"2.5mtu\": not a whole number of largest frames");
    CHECK(parse_burst("3 mtu").error() == "burst \"3 mtu\": unexpected \" mtu\" after the number");
    CHECK(parse_burst("mtu").error() == "burst \"mtu\": not a number (expected e.g. \"3mtu\")");
    CHECK(parse_burst("3parsecs").error() == "burst \"3parsecs\": unknown unit \"parsecs\"");
    for (const char *w : {"3mtu", "4500b", "64kb", "1mb"})
        CHECK(format_burst(*parse_burst(w)) == w);
}
