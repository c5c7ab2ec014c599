// The CLI's pieces without a device: typed options, sizes and times, class
// words and configuration files, the printer.
#include <catch2/catch.hpp>

#include "cli/command.hpp"
#include "cli/output.hpp"
#include "control/config.hpp"
#include "core/engine.hpp"
#include "core/framing.hpp"
#include "core/units.hpp"
#include "daemon/daemon.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace pspxdp;
using namespace pspxdp::cli;
using pspxdp::control::ClassSpec;
using pspxdp::control::Config;

namespace {

int noop(const Args &) { return 0; }

const Command kTest = {
    "test",
    "[X]",
    "a command to test the option table",
    nullptr,
    {
        opt(OptType::Rate, "rate", 'r', "RATE", "a rate").by_default(500'000'000),
        opt(OptType::Bytes, "window", 'w', "BYTES", "a size")
            .by_default(65536)
            .within(1514, 64 << 20),
        opt(OptType::Duration, "watch", 0, "SECONDS", "a time in seconds")
            .bare_unit(1'000'000'000)
            .within(100'000'000, 3600'000'000'000),
        opt(OptType::Integer, "count", 'c', "N", "a count").by_default(16).within(1, 1024),
        opt(OptType::ClassId, "default-class", 'd', "CLASSID", "a class")
            .by_default(ClassId{1, 0xffff}),
        opt(OptType::String, "name", 0, "NAME", "a word"),
        opt(OptType::Rate, "line-rate", 0, "RATE", "computed at run time")
            .default_is("DEV's speed"),
        flag("json", 'j', "a flag"),
        flag("stats", 's', "another flag"),
        opt(OptType::Choice, "mode", 0, nullptr, "a choice")
            .one_of({"auto", "byte", "none"})
            .by_default(std::string("auto")),
        opt(OptType::TimeOrInf, "horizon", 0, "TIME|inf", "a time or inf")
            .by_default(50'000)
            .bare_unit(0)
            .within(0, 3600'000'000'000),
        opt(OptType::Factor, "scale", 0, "X", "a factor").by_default(1).within(0, 100),
        opt(OptType::Duration, "nap", 0, "TIME", "a time with a unit").bare_unit(0),
        opt(OptType::TimeOrInf, "each", 'e', "TIME|inf", "repeated times").bare_unit(0).repeat(),
        opt(OptType::String, "flow", 'f', "X", "repeated words").repeat(),
    },
    0,
    1,
    noop,
};

Result<Args> parse_for(const Command &c, std::vector<std::string> words) {
    std::vector<char *> argv;
    for (auto &w : words) argv.push_back(w.data());
    return parse_args(c, int(argv.size()), argv.data());
}

Result<Args> parse(std::vector<std::string> words) { return parse_for(kTest, std::move(words)); }

// The one-line refusal of c's table, exit 2.
std::string refused_by(const Command &c, std::vector<std::string> words) {
    auto a = parse_for(c, std::move(words));
    REQUIRE_FALSE(a);
    CHECK(a.exit_code() == 2);
    CHECK(a.error().find('\n') == std::string::npos);
    return a.error();
}

std::string help_text(const Command &c) {
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    print_command_help(c, f);
    std::fclose(f);
    std::string s(buf, len);
    std::free(buf);
    return s;
}

std::string refused(std::vector<std::string> words) { return refused_by(kTest, std::move(words)); }

} // namespace

TEST_CASE("typed options: values parsed into their types, defaults from the declaration", "[cli]") {
    auto a = parse({"-r", "300mbit", "--window=32kb", "--watch", "2", "-c", "4", "-d", "1:a",
                    "--name", "x y", "-sj", "dev0"});
    REQUIRE(a);
    CHECK(a->number("rate") == 300'000'000);
    CHECK(a->number("window") == 32768);
    CHECK(a->number("watch") == 2'000'000'000);
    CHECK(a->number("count") == 4);
    CHECK(a->classid("default-class") == ClassId{1, 0xa});
    CHECK(a->text("name") == "x y");
    CHECK(a->flag("json"));
    CHECK(a->flag("stats"));
    CHECK(a->positional == std::vector<std::string>{"dev0"});
    CHECK(a->has("window"));
    CHECK_FALSE(a->has("mode"));

    auto d = parse({});
    REQUIRE(d);
    CHECK(d->number("rate") == 500'000'000);
    CHECK(d->number("window") == 65536);
    CHECK(d->number("count") == 16);
    CHECK(d->classid("default-class") == ClassId{1, 0xffff});
    CHECK_FALSE(d->flag("json"));
    CHECK_FALSE(d->maybe_number("watch"));
    CHECK_FALSE(d->maybe_number("line-rate"));
    CHECK_THROWS_AS(d->number("watch"), std::logic_error); // no value, no default
    CHECK_THROWS_AS(d->number("json"), std::logic_error);  // not a number
    CHECK_THROWS_AS(d->flag("nosuch"), std::logic_error);  // not declared
}

TEST_CASE("typed options: a bad value names the option and the word, exit 2", "[cli]") {
    CHECK(refused({"--window", "abc"}) ==
          "option --window: size \"abc\": not a number (expected e.g. \"64kb\")");
    CHECK(refused({"--window", "100"}) == "option --window: \"100\" is out of range 1514b..64mb");
    CHECK(refused({"-c", "0"}) == "option --count: \"0\" is out of range 1..1024");
    CHECK(refused({"-c", "1x"}) == "option --count: \"1x\" is not a whole number");
    CHECK(refused({"-c", "-1"}) == "option --count: \"-1\" is not a whole number");
    CHECK(refused({"--rate", "5xbit"}) == "option --rate: rate \"5xbit\": unknown unit \"xbit\"");
    CHECK(refused({"--watch", "0.01"}) == "option --watch: \"0.01\" is out of range 100ms..3600s");
    CHECK(refused({"-d", "1"}) == "option --default-class: class id \"1\": no ':' (expected "
                                  "major:minor in hex, e.g. \"1:a\")");
    CHECK(refused({"--nosuch"}) == "unknown option --nosuch");
    CHECK(refused({"-x"}) == "unknown option -x");
    CHECK(refused({"-sx"}) == "unknown option -sx");
    CHECK(refused({"--json=1"}) == "option --json takes no value");
    CHECK(refused({"--rate"}) == "option --rate needs RATE");
    CHECK(refused({"-c", "2", "-c", "3"}) == "option --count given twice (\"2\", \"3\")");
    CHECK(refused({"a", "b"}) == "unexpected argument \"b\"");
}

TEST_CASE("typed options: a choice is one of its words, numbered in their order", "[cli]") {
    CHECK(parse({})->choice("mode") == 0); // the default, "auto"
    CHECK(parse({"--mode", "byte"})->choice("mode") == 1);
    CHECK(parse({"--mode=none"})->choice("mode") == 2);
    CHECK(refused({"--mode", "bytes"}) ==
          "option --mode: \"bytes\" is not one of auto, byte or none");
    CHECK(refused({"--mode", "Byte"}) ==
          "option --mode: \"Byte\" is not one of auto, byte or none");
    CHECK(refused({"--mode", ""}) == "option --mode: \"\" is not one of auto, byte or none");
    CHECK(refused({"--mode"}) == "option --mode needs auto|byte|none");
    CHECK(refused({"--mode", "byte", "--mode", "none"}) ==
          "option --mode given twice (\"byte\", \"none\")");
    CHECK_THROWS_AS(parse({})->text("mode"), std::logic_error); // a choice is not a word
}

TEST_CASE("typed options: a time or inf", "[cli]") {
    CHECK(parse({})->number("horizon") == 50'000);
    CHECK(parse({"--horizon", "inf"})->number("horizon") == kTimeInf);
    CHECK(parse({"--horizon", "1ms"})->number("horizon") == 1'000'000);
    CHECK(parse({"--horizon", "250ns"})->number("horizon") == 250);
    CHECK(parse({"--horizon", "0"})->number("horizon") == 0); // 0 needs no unit
    CHECK(parse({"--horizon", "3600s"})->number("horizon") == 3600'000'000'000);
    CHECK(refused({"--horizon", "50"}) ==
          "option --horizon: time \"50\": no unit (expected e.g. \"10ms\") (or inf)");
    CHECK(refused({"--horizon", "infinity"}) ==
          "option --horizon: time \"infinity\": not a number (expected e.g. \"10ms\") (or inf)");
    CHECK(refused({"--horizon", "-1us"}) ==
          "option --horizon: time \"-1us\": negative time (or inf)");
    CHECK(refused({"--horizon", "3601s"}) ==
          "option --horizon: \"3601s\" is out of range 0ns..3600s or inf");
    CHECK(refused({"--horizon", "2h"}) ==
          "option --horizon: time \"2h\": unknown unit \"h\" (or inf)");
    // A Duration without a bare unit takes 0, not other bare numbers.
    CHECK(parse({"--nap", "0"})->number("nap") == 0);
    CHECK(refused({"--nap", "20"}) ==
          "option --nap: time \"20\": no unit (expected e.g. \"10ms\")");
}

TEST_CASE("typed options: a factor is a decimal above 0", "[cli]") {
    CHECK(parse({})->factor("scale") == 1.0);
    CHECK(parse({"--scale", "0.25"})->factor("scale") == 0.25);
    CHECK(parse({"--scale", "100"})->factor("scale") == 100.0);
    for (const char *bad : {"0", "100.5", "-1"})
        CHECK(refused({std::string("--scale=") + bad}) ==
              "option --scale: \"" + std::string(bad) + "\" is out of range: above 0, at most 100");
    for (const char *bad : {"abc", "", "1e2", "0x1", "1.5x", "nan", "inf"})
        CHECK(refused({std::string("--scale=") + bad}) ==
              "option --scale: \"" + std::string(bad) +
                  "\" is not a decimal number (expected e.g. \"0.5\")");
    CHECK_THROWS_AS(parse({})->number("scale"), std::logic_error);
}

TEST_CASE("typed options: a repeatable option keeps every value, typed, in order", "[cli]") {
    auto a = parse({"-e", "inf", "--each", "50us", "-e", "0", "-f", "a=b", "--flow", "c d"});
    REQUIRE(a);
    CHECK(a->numbers("each") == std::vector<uint64_t>{kTimeInf, 50'000, 0});
    CHECK(a->texts("flow") == std::vector<std::string>{"a=b", "c d"});
    CHECK(parse({})->numbers("each").empty());
    CHECK(refused({"-e", "inf", "-e", "5"}) ==
          "option --each: time \"5\": no unit (expected e.g. \"10ms\") (or inf)");
    CHECK_THROWS_AS(a->numbers("count"), std::logic_error); // not repeatable
    CHECK_THROWS_AS(a->texts("each"), std::logic_error);    // not words
}

TEST_CASE("--help prints each default from the declared value", "[cli]") {
    const std::string h = help_text(kTest);
    CHECK_THAT(h, Catch::Contains("-r, --rate RATE"));
    CHECK_THAT(h, Catch::Contains("a rate (default 500Mbit)"));
    CHECK_THAT(h, Catch::Contains("a size (default 64kb; 1514b..64mb)"));
    CHECK_THAT(h, Catch::Contains("a count (default 16; 1..1024)"));
    CHECK_THAT(h, Catch::Contains("a class (default 1:ffff)"));
    CHECK_THAT(h, Catch::Contains("computed at run time (default DEV's speed)"));
    CHECK_THAT(h, Catch::Contains("a time in seconds (100ms..3600s; a bare number is s)"));
    CHECK_THAT(h, Catch::Contains("--mode auto|byte|none"));
    CHECK_THAT(h, Catch::Contains("a choice (default auto)"));
    CHECK_THAT(h, Catch::Contains("--horizon TIME|inf"));
    CHECK_THAT(h, Catch::Contains("a time or inf (default 50us; 0ns..3600s or inf)"));
    CHECK_THAT(h, Catch::Contains("a factor (default 1; above 0, at most 100)"));
    CHECK_THAT(h, Catch::Contains("repeated times (may be repeated)"));
    // The value types the options use, each explained once.
    CHECK_THAT(h, Catch::Contains("\nValues:\n"));
    for (const char *type : {"RATE", "BYTES", "TIME", "TIME|inf", "N", "X", "CLASSID"})
        CHECK_THAT(h, Catch::Contains(std::string("\n  ") + type + " "));
    const std::string daemon_help = help_text(kDaemon);
    CHECK_THAT(daemon_help, Catch::Contains("--clock auto|byte|none"));
    CHECK_THAT(daemon_help, !Catch::Contains("\n  CLASSID ")); // the daemon takes no class id
    CHECK_THAT(daemon_help, !Catch::Contains("\n  X "));
}

TEST_CASE("every command's options: defaults parse back to themselves and fit their range",
          "[cli]") {
    for (const Command *c : commands()) {
        for (const Option &o : c->options) {
            INFO("pspxdp " << c->name << " --" << o.name);
            if (o.type == OptType::Flag) {
                CHECK(o.metavar == nullptr);
                continue;
            }
            CHECK((o.metavar != nullptr || !o.choices.empty()));
            CHECK(o.choices.empty() == (o.type != OptType::Choice));
            if (std::holds_alternative<std::monostate>(o.fallback) || o.fallback_note) continue;
            const std::string shown = format_default(o);
            auto back = parse_option_value(o, shown);
            INFO("default shown as \"" << shown << "\": " << back.error());
            REQUIRE(back);
            CHECK(*back == o.fallback);
            CHECK_THAT(help_text(*c), Catch::Contains("default " + shown));
        }
        // Short names are unique within a command.
        for (size_t i = 0; i < c->options.size(); ++i)
            for (size_t j = i + 1; j < c->options.size(); ++j)
                if (c->options[i].short_name)
                    CHECK(c->options[i].short_name != c->options[j].short_name);
    }
}

TEST_CASE("attach and daemon: the clock options typed, --queues gone", "[cli][clock]") {
    using daemon::WireClock;
    for (const Command *c : {&kAttach, &kDaemon}) {
        INFO("pspxdp " << c->name);
        auto d = parse_for(*c, {"eth0"});
        REQUIRE(d);
        daemon::DaemonConfig cfg;
        cfg.gap_horizon_ns = 0;
        REQUIRE(clock_options(cfg, *d));
        CHECK(cfg.gap_horizon_ns == daemon::DaemonConfig{}.gap_horizon_ns);
        CHECK(cfg.clock == WireClock::Auto);
        for (auto [word, clock] :
             {std::pair{"auto", WireClock::Auto}, std::pair{"byte", WireClock::Byte},
              std::pair{"none", WireClock::None}}) {
            auto a = parse_for(*c, {"eth0", "--clock", word, "--gap-horizon", "inf"});
            REQUIRE(a);
            REQUIRE(clock_options(cfg, *a));
            CHECK(cfg.clock == clock);
            CHECK(cfg.gap_horizon_ns == kGapHorizonInf);
        }
        auto both = parse_for(*c, {"eth0", "--clock", "byte", "--clockless"});
        REQUIRE(both);
        CHECK(clock_options(cfg, *both).error() ==
              "--clockless and --clock byte: choose one clock");
        CHECK(refused_by(*c, {"eth0", "--clock", "bytes"}) ==
              "option --clock: \"bytes\" is not one of auto, byte or none");
        CHECK(refused_by(*c, {"eth0", "--gap-horizon", "50"}) ==
              "option --gap-horizon: time \"50\": no unit (expected e.g. \"10ms\") (or inf)");
        CHECK(refused_by(*c, {"eth0", "--gap-horizon", "2h"}) ==
              "option --gap-horizon: time \"2h\": unknown unit \"h\" (or inf)");
        CHECK(refused_by(*c, {"eth0", "--gap-horizon", "7200s"}) ==
              "option --gap-horizon: \"7200s\" is out of range 0ns..3600s or inf");
        // What the daemon logs and status prints reads back as the same horizon.
        for (uint64_t h : {uint64_t(0), uint64_t(50'000), uint64_t(1'000'000), kGapHorizonInf}) {
            auto a = parse_for(*c, {"eth0", "--gap-horizon", daemon::format_gap_horizon(h)});
            REQUIRE(a);
            CHECK(a->number("gap-horizon") == h);
        }
    }
    CHECK(refused_by(kAttach, {"eth0", "--queues", "2"}) == "unknown option --queues");
    CHECK(refused_by(kAttach, {"eth0", "-q", "2"}) == "unknown option -q");
    CHECK(parse_for(kAttach, {"eth0", "-s", "2"})->number("sockets") == 2);
}

TEST_CASE("daemon: the arguments attach gives it parse back to the same configuration",
          "[cli][clock]") {
    daemon::DaemonConfig cfg;
    cfg.sleep_min_ns = 1'500'000; // not whole microseconds of the old flag: exact now
    cfg.spin_ns = 12'345;
    cfg.gap_horizon_ns = kGapHorizonInf;
    cfg.clock = daemon::WireClock::None;
    cfg.line_rate_bps = 300'000'000;
    cfg.window_bytes = 32768;
    cfg.cpu = 1;
    cfg.sched = daemon::SchedPolicy::Fifo;
    std::vector<std::string> words = {"eth0"};
    for (const std::string &w : daemon::to_args(cfg)) words.push_back(w);
    auto a = parse_for(kDaemon, words);
    INFO(a.error());
    REQUIRE(a);
    CHECK(a->number("sleep-min") == cfg.sleep_min_ns);
    CHECK(a->number("spin-last") == cfg.spin_ns);
    CHECK(a->number("gap-horizon") == kGapHorizonInf);
    CHECK(a->choice("clock") == size_t(daemon::WireClock::None));
    CHECK(a->number("line-rate") == cfg.line_rate_bps);
    CHECK(a->number("window") == cfg.window_bytes);
    CHECK(a->number("cpu") == 1);
    CHECK(a->choice("sched") == size_t(daemon::SchedPolicy::Fifo));
    CHECK(parse_for(kDaemon, {"eth0", "--sleep-min", "0"})->number("sleep-min") == 0);
    CHECK(parse_for(kDaemon, {"eth0", "--sleep-min", "1ms"})->number("sleep-min") == 1'000'000);
    // The unit is the value's, not the name's: a bare number is refused.
    CHECK(refused_by(kDaemon, {"eth0", "--sleep-min", "50"}) ==
          "option --sleep-min: time \"50\": no unit (expected e.g. \"10ms\")");
    CHECK(refused_by(kDaemon, {"eth0", "--spin-last", "2s"}) ==
          "option --spin-last: \"2s\" is out of range 0ns..1s");
    CHECK(refused_by(kDaemon, {"eth0", "--sleep-min-us", "50"}) == "unknown option --sleep-min-us");
    CHECK(refused_by(kDaemon, {"eth0", "--spin-us", "20"}) == "unknown option --spin-us");
}

TEST_CASE("analyze: options typed, defaults the analyzer's", "[cli]") {
    auto d = parse_for(kAnalyze, {"x.pcap"});
    REQUIRE(d);
    CHECK(d->number("overhead") == kEthOverheadBytes);
    CHECK(d->number("mtu") == 1500);
    CHECK(d->number("window") == 1);
    CHECK_FALSE(d->maybe_number("line-rate"));
    CHECK_FALSE(d->maybe_number("idle-threshold"));
    auto a = parse_for(kAnalyze, {"x.pcap", "-r", "1gbit", "--overhead", "20", "--mtu", "9000",
                                  "-n", "10", "--idle-threshold", "20us", "-f", "a=dst 10.0.0.1",
                                  "--flow", "b=proto udp", "-t", "a=5mbit", "-j"});
    REQUIRE(a);
    CHECK(a->number("line-rate") == 1'000'000'000);
    CHECK(a->number("overhead") == 20);
    CHECK(a->number("mtu") == 9000);
    CHECK(a->number("window") == 10);
    CHECK(a->number("idle-threshold") == 20'000);
    CHECK(a->texts("flow") == std::vector<std::string>{"a=dst 10.0.0.1", "b=proto udp"});
    CHECK(a->texts("target") == std::vector<std::string>{"a=5mbit"});
    CHECK(a->flag("json"));
    CHECK(refused_by(kAnalyze, {"x", "--overhead", "1001"}) ==
          "option --overhead: \"1001\" is out of range 0b..1000b");
    CHECK(refused_by(kAnalyze, {"x", "--mtu", "45"}) ==
          "option --mtu: \"45\" is out of range 46b..65521b");
    CHECK(refused_by(kAnalyze, {"x", "--mtu", "1500.5"}) ==
          "option --mtu: size \"1500.5\": not a whole number of bytes");
    CHECK(refused_by(kAnalyze, {"x", "-n", "0"}) ==
          "option --window: \"0\" is out of range 1..1000000");
    CHECK(refused_by(kAnalyze, {"x", "-n", "ten"}) ==
          "option --window: \"ten\" is not a whole number");
    CHECK(refused_by(kAnalyze, {"x", "--idle-threshold", "20"}) ==
          "option --idle-threshold: time \"20\": no unit (expected e.g. \"10ms\")");
    CHECK(refused_by(kAnalyze, {"x", "-r", "fast"}) ==
          "option --line-rate: rate \"fast\": not a number (expected e.g. \"500mbit\")");
}

TEST_CASE("simulate: options typed", "[cli]") {
    auto d = parse_for(kSimulate, {});
    REQUIRE(d);
    CHECK(d->factor("scale") == 1.0);
    CHECK(d->number("seconds") == 4'000'000'000);
    CHECK(d->numbers("gap-horizon").empty()); // the run's default list
    CHECK(d->text("sleep-timer") == "clock_nanosleep");
    auto a =
        parse_for(kSimulate, {"--horizon", "--scale", "0.01", "--seconds", "0.5", "--gap-horizon",
                              "inf", "--gap-horizon", "0", "--gap-horizon", "200us"});
    REQUIRE(a);
    CHECK(a->factor("scale") == 0.01);
    CHECK(a->number("seconds") == 500'000'000);
    CHECK(a->numbers("gap-horizon") == std::vector<uint64_t>{kGapHorizonInf, 0, 200'000});
    CHECK(parse_for(kSimulate, {"--seconds", "250ms"})->number("seconds") == 250'000'000);
    CHECK(refused_by(kSimulate, {"--scale", "0"}) ==
          "option --scale: \"0\" is out of range: above 0, at most 100");
    CHECK(refused_by(kSimulate, {"--scale", "2x"}) ==
          "option --scale: \"2x\" is not a decimal number (expected e.g. \"0.5\")");
    CHECK(refused_by(kSimulate, {"--seconds", "0"}) ==
          "option --seconds: \"0\" is out of range 1ms..3600s");
    CHECK(refused_by(kSimulate, {"--seconds", "2h"}) ==
          "option --seconds: time \"2h\": unknown unit \"h\"");
    CHECK(
        refused_by(kSimulate, {"--gap-horizon", "inf,50us"}) ==
        "option --gap-horizon: time \"inf,50us\": not a number (expected e.g. \"10ms\") (or inf)");
    CHECK(refused_by(kSimulate, {"--scale", "1", "--scale", "2"}) ==
          "option --scale given twice (\"1\", \"2\")");
}

TEST_CASE("every command's time options: a bare number means one unit, or is refused", "[cli]") {
    for (const Command *c : commands()) {
        uint64_t unit = 0;
        for (const Option &o : c->options) {
            if ((o.type != OptType::Duration && o.type != OptType::TimeOrInf) || !o.bare_unit_ns)
                continue;
            INFO("pspxdp " << c->name << " --" << o.name);
            if (!unit) unit = o.bare_unit_ns;
            CHECK(o.bare_unit_ns == unit);
            // And the help says which.
            CHECK_THAT(help_text(*c), Catch::Contains("a bare number is"));
        }
    }
    const Command *stats = nullptr;
    for (const Command *c : commands())
        if (std::string_view(c->name) == "stats") stats = c;
    REQUIRE(stats);
    // stats --interval 1 is a second, as --watch 1 (it was 1 us).
    auto a = parse_for(*stats, {"--interval", "1", "--watch", "1", "dev0"});
    REQUIRE(a);
    CHECK(a->number("interval") == 1'000'000'000);
    CHECK(a->number("watch") == 1'000'000'000);
    // Where no bare unit is declared, a bare number is refused, naming the option.
    CHECK_THAT(refused({"--nap", "5"}), Catch::StartsWith("option --nap: time \"5\": no unit"));
}

TEST_CASE("sizes and times, tc style, exact", "[cli][units]") {
    CHECK(*parse_bytes("1500") == 1500);
    CHECK(*parse_bytes("1500b") == 1500);
    CHECK(*parse_bytes("64kb") == 65536);
    CHECK(*parse_bytes("64K") == 65536);
    CHECK(*parse_bytes("1.5mb") == 1572864);
    CHECK(*parse_bytes("2gib") == 2147483648ull);
    CHECK(parse_bytes("1.5b").error() == "size \"1.5b\": not a whole number of bytes");
    CHECK(parse_bytes("5kbit").error() == "size \"5kbit\": unknown unit \"kbit\"");
    CHECK(*parse_duration_ns("10ms", 1000) == 10'000'000);
    CHECK(*parse_duration_ns("1.5s", 1000) == 1'500'000'000);
    CHECK(*parse_duration_ns("250", 1000) == 250'000);              // tc: bare = us
    CHECK(*parse_duration_ns("2", 1'000'000'000) == 2'000'000'000); // --watch SECONDS
    CHECK(*parse_duration_ns("7ns", 1000) == 7);
    CHECK(parse_duration_ns("1.5ns", 1000).error() ==
          "time \"1.5ns\": not a whole number of nanoseconds");
    CHECK(parse_duration_ns("10m", 1000).error() == "time \"10m\": unknown unit \"m\"");
    CHECK(format_bytes(65536) == "64kb");
    CHECK(format_bytes(1500) == "1500b");
    CHECK(format_bytes(3 << 20) == "3mb");
    CHECK(format_duration(2'000'000) == "2ms");
    CHECK(format_duration(1'500'000) == "1500us");
    CHECK(format_duration(3'000'000'000) == "3s");
    std::mt19937_64 rng(7);
    for (int i = 0; i < 5000; ++i) {
        uint64_t v = rng() >> (rng() % 64);
        REQUIRE(*parse_bytes(format_bytes(v)) == v);
        REQUIRE(*parse_duration_ns(format_duration(v), 1000) == v);
    }
}

TEST_CASE("class words: accepted forms, printed back the same", "[cli][config]") {
    auto spec = [](std::vector<std::string> w) {
        auto s = control::parse_class_spec(w);
        INFO(s.error());
        REQUIRE(s);
        return *s;
    };
    ClassSpec a = spec({"1:1", "300mbit", "limit", "64kb", "ce_threshold", "2ms"});
    CHECK(a.classid == PSPXDP_CLASSID(1, 1));
    CHECK(a.paced());
    CHECK(a.rate_bps == 300'000'000);
    CHECK(a.limit_bytes == 65536);
    CHECK(a.ce_threshold_ns == 2'000'000);
    CHECK(control::format_class_spec(a) == "1:1 300Mbit limit 64kb ce_threshold 2ms");
    ClassSpec b = spec({"1:a", "10mbit", "limit", "10ms", "ce_threshold", "off"});
    CHECK(b.limit_ns == 10'000'000);
    CHECK(b.ce_threshold_ns == PSPXDP_CE_THRESHOLD_OFF);
    CHECK(control::format_class_spec(b) == "1:a 10Mbit limit 10ms ce_threshold off");
    ClassSpec c = spec({"ffff:ffff", "normal", "limit", "1mb"});
    CHECK_FALSE(c.paced());
    CHECK(control::format_class_spec(c) == "ffff:ffff normal limit 1mb");
    ClassSpec d = spec({"1:2", "5mbit", "ce_threshold", "500"}); // tc: bare = us
    CHECK(d.ce_threshold_ns == 500'000);
    CHECK(d.flows); // the default
    ClassSpec e = spec({"1:3", "5mbit", "flows", "off"});
    CHECK_FALSE(e.flows);
    CHECK(e.to_config(3).flags == PSPXDP_CLASS_FLOWS_OFF);
    CHECK(control::format_class_spec(e) == "1:3 5Mbit flows off");
    CHECK_FALSE(e.same_config(spec({"1:3", "5mbit"})));
    CHECK(spec({"1:3", "5mbit", "flows", "on"}).same_config(spec({"1:3", "5mbit"})));
    for (const ClassSpec &s : {a, b, c, d, e}) {
        auto words = std::vector<std::string>();
        std::string text = control::format_class_spec(s), w;
        for (char ch : text + " ") {
            if (ch == ' ') {
                if (!w.empty()) words.push_back(w);
                w.clear();
            } else {
                w += ch;
            }
        }
        CHECK(spec(words).same_config(s));
    }
}

TEST_CASE("class words: every refusal names the word", "[cli][config]") {
    auto bad = [](std::vector<std::string> w) {
        auto s = control::parse_class_spec(w);
        REQUIRE_FALSE(s);
        CHECK(s.exit_code() == 2);
        return s.error();
    };
    CHECK(bad({}) == "missing CLASSID (e.g. 1:1)");
    CHECK(bad({"1:0", "1mbit"}) == "class id \"1:0\": minor 0 names a qdisc, not a class");
    CHECK_THAT(bad({"1", "1mbit"}), Catch::StartsWith("class id \"1\": no ':'"));
    CHECK(bad({"1:1"}) == "class 1:1: missing RATE or \"normal\"");
    CHECK(bad({"1:1", "5xbit"}) == "class 1:1: rate \"5xbit\": unknown unit \"xbit\"");
    CHECK(bad({"1:1", "0bit"}) == "class 1:1: rate \"0bit\": zero rate");
    CHECK(bad({"1:1", "300"}) == "class 1:1: rate \"300\": no unit (expected e.g. \"500mbit\")");
    CHECK(bad({"1:1", "1mbit", "limit"}) == "class 1:1: \"limit\" needs a value");
    CHECK(bad({"1:1", "1mbit", "limit", "100"}) ==
          "class 1:1: limit \"100\": out of range 1518b..1gb");
    CHECK(bad({"1:1", "1mbit", "limit", "5x"}) ==
          "class 1:1: limit \"5x\": size \"5x\": unknown unit \"x\"");
    CHECK_THAT(bad({"1:1", "normal", "limit", "10ms"}),
               Catch::StartsWith("class 1:1: limit \"10ms\": a time limit needs a paced class"));
    CHECK(bad({"1:1", "1mbit", "limit", "1mb", "limit", "2mb"}) ==
          "class 1:1: limit given twice (\"2mb\")");
    CHECK(bad({"1:1", "1mbit", "ce_threshold", "0"}) ==
          "class 1:1: ce_threshold \"0\": out of range 1us..10s");
    CHECK_THAT(bad({"1:1", "normal", "ce_threshold", "1ms"}),
               Catch::StartsWith("class 1:1: ce_threshold \"1ms\": needs a paced class"));
    CHECK(bad({"1:1", "1mbit", "bucket", "1"}) ==
          "class 1:1: unknown word \"bucket\" (expected limit BYTES|TIME, ce_threshold TIME|off, "
          "burst SIZE, flows on|off, parent CLASSID, ceil RATE or prio N)");
    CHECK(bad({"1:1", "1mbit", "burst", "2.5mtu"}) ==
          "class 1:1: burst \"2.5mtu\": not a whole number of largest frames");
    CHECK(bad({"1:1", "1mbit", "burst", "3mtu", "burst", "4mtu"}) ==
          "class 1:1: burst given twice (\"4mtu\")");
    CHECK_THAT(bad({"1:1", "normal", "burst", "3mtu"}),
               Catch::StartsWith("class 1:1: burst \"3mtu\": needs a paced class"));
    CHECK(bad({"1:1", "1mbit", "burst", "2gb"}) ==
          "class 1:1: burst \"2gb\": above 1gb or 65536mtu");
    CHECK(bad({"1:1", "1mbit", "flows", "yes"}) == "class 1:1: flows \"yes\": expected on or off");
    CHECK(bad({"1:1", "1mbit", "flows", "off", "flows", "on"}) ==
          "class 1:1: flows given twice (\"on\")");
}

TEST_CASE("class words: burst in bytes or largest frames, round trip, below a frame refused",
          "[cli][config]") {
    auto s = control::parse_class_spec(std::vector<std::string>{"1:1", "100mbit", "burst", "3mtu"});
    REQUIRE(s);
    CHECK(s->burst.mtus == 3);
    CHECK(control::format_class_spec(*s) == "1:1 100Mbit burst 3mtu");
    const pspxdp_class_config c = s->to_config(7);
    CHECK(c.burst_mtus == 3);
    CHECK(c.burst_bytes == 0);
    CHECK(control::ClassSpec::from_config(s->classid, c).same_config(*s));
    auto b =
        control::parse_class_spec(std::vector<std::string>{"1:2", "100mbit", "burst", "4.5kb"});
    REQUIRE(b);
    CHECK(b->burst.bytes == 4608);
    CHECK(control::check_rates({*b}, 1'000'000'000, "eth0", 1500));
    auto small =
        control::parse_class_spec(std::vector<std::string>{"1:3", "100mbit", "burst", "1000"});
    REQUIRE(small);
    auto r = control::check_rates({*small}, 1'000'000'000, "eth0", 1500);
    REQUIRE_FALSE(r);
    CHECK(r.error() ==
          "class 1:3: burst 1000b is below one largest frame (1518 bytes at MTU 1500 of eth0)");
}

TEST_CASE("rates against the wire: framing ceiling and the line rate", "[cli][config]") {
    auto cls = [](uint32_t minor, uint64_t rate) {
        ClassSpec s;
        s.classid = PSPXDP_CLASSID(1, minor);
        s.kind = PSPXDP_CLASS_PACED;
        s.rate_bps = rate;
        return s;
    };
    const uint64_t G = 1'000'000'000;
    // 1518/1538 of 1 Gbit/s = 986996098.8 bit/s.
    CHECK(control::check_rates({cls(1, 986'996'098)}, G, "eth0", 1500));
    auto over = control::check_rates({cls(1, 986'996'099)}, G, "eth0", 1500);
    REQUIRE_FALSE(over);
    CHECK(over.exit_code() == 2);
    CHECK(over.error() == "class 1:1: rate \"986996099bit\" is above what one class can reach on "
                          "eth0's 1Gbit wire: 986.996Mbit (1518/1538 of it, 1514-byte frames at "
                          "MTU 1500)");
    // The ceiling follows the MTU: jumbo frames reach more of the wire,
    // smaller ones less (9018/9038 and 1418/1438 of 1 Gbit/s).
    CHECK(control::check_rates({cls(1, 997'787'121)}, G, "eth0", 9000));
    CHECK_FALSE(control::check_rates({cls(1, 997'787'122)}, G, "eth0", 9000));
    auto small = control::check_rates({cls(1, 986'996'098)}, G, "eth0", 1400);
    REQUIRE_FALSE(small);
    CHECK_THAT(small.error(), Catch::Contains("986.092Mbit (1418/1438 of it, 1414-byte frames at "
                                              "MTU 1400)"));
    auto sum = control::check_rates({cls(1, 600'000'000), cls(2, 500'000'000)}, G, "eth0", 1500);
    REQUIRE_FALSE(sum);
    CHECK(sum.error() == "class 1:2: rate \"500Mbit\": paced rates would sum to 1100Mbit, above "
                         "the line rate 1Gbit of eth0");
    auto unknown = control::check_rates({cls(1, 1000)}, 0, "eth0", 1500);
    REQUIRE_FALSE(unknown);
    CHECK_THAT(unknown.error(), Catch::Contains("line rate of eth0 is unknown"));
    CHECK(control::check_rates({cls(1, 500'000'000), cls(2, 500'000'000)}, G, "eth0", 1500));
}

TEST_CASE("statement files: one reader, lines counted over comments and blanks", "[cli][config]") {
    std::vector<std::pair<size_t, std::string>> seen;
    auto collect = [&](size_t line, std::span<const std::string> words) -> Result<void> {
        std::string joined;
        for (const auto &w : words) joined += (joined.empty() ? "" : "|") + w;
        if (words[0] == "stop") return err("stopped at " + joined);
        seen.emplace_back(line, joined);
        return {};
    };
    auto r = control::for_each_statement("# head\n\n  a b\t c  # tail\r\n#\nd\r\n   \ne", collect);
    REQUIRE(r);
    CHECK(seen == std::vector<std::pair<size_t, std::string>>{{3, "a|b|c"}, {5, "d"}, {7, "e"}});
    seen.clear();
    auto stopped = control::for_each_statement("x\n\nstop here\ny\n", collect);
    REQUIRE_FALSE(stopped);
    CHECK(stopped.error() == "line 3: stopped at stop|here");
    CHECK(stopped.exit_code() == 1); // fn's own exit code is kept
    CHECK(seen.size() == 1);         // nothing after the error is read
    CHECK(control::for_each_statement("", collect));
}

TEST_CASE("configuration files: round trip and refusals by line", "[cli][config]") {
    const std::string text = "# a comment\n"
                             "line-rate 1gbit\n"
                             "\n"
                             "class 1:1 300mbit limit 64kb ce_threshold 2ms   # trailing comment\n"
                             "class 1:ffff normal\n"
                             "default 1:ffff\n"
                             "filter proto udp dport 5001 classid 1:1\n"
                             "filter dst 10.0.0.0/8 classid 1:ffff\n";
    auto c = control::parse_config(text);
    INFO(c.error());
    REQUIRE(c);
    CHECK(*c->line_rate_bps == 1'000'000'000);
    REQUIRE(c->classes.size() == 2);
    CHECK(c->classes[0].line == 4);
    CHECK(*c->default_classid == PSPXDP_CLASSID(1, 0xffff));
    REQUIRE(c->filters.size() == 2);
    CHECK(control::check_config(*c, *c->line_rate_bps, *c->default_classid, "eth0", 1500));
    const std::string printed = control::format_config(*c);
    CHECK(printed == "line-rate 1Gbit\n"
                     "class 1:1 300Mbit limit 64kb ce_threshold 2ms\n"
                     "class 1:ffff normal\n"
                     "default 1:ffff\n"
                     "filter pref 49152 proto udp dport 5001 classid 1:1\n"
                     "filter pref 49152 dst 10.0.0.0/8 classid 1:ffff\n");
    auto again = control::parse_config(printed);
    REQUIRE(again);
    CHECK(control::format_config(*again) == printed);

    auto bad = [](const std::string &t) {
        auto r = control::parse_config(t);
        REQUIRE_FALSE(r);
        CHECK(r.exit_code() == 2);
        return r.error();
    };
    CHECK(bad("line-rate 1gbit\nclass 1:1 5xbit\n") ==
          "line 2: class 1:1: rate \"5xbit\": unknown unit \"xbit\"");
    CHECK(bad("qdisc add\n") == "line 1: unknown statement \"qdisc\" (expected line-rate, class, "
                                "default, prio-direct or filter)");
    CHECK(bad("prio-direct maybe\n") ==
          "line 1: expected \"prio-direct on\" or \"prio-direct off\"");
    CHECK(bad("prio-direct on\nprio-direct off\n") == "line 2: prio-direct given twice");
    auto pd =
        control::parse_config("prio-direct off\nfilter cgroup /a/b mark 0x5/0xf classid 1:1\n");
    REQUIRE(pd);
    CHECK(pd->prio_direct == std::optional<bool>(false));
    CHECK(control::format_config(*pd) ==
          "prio-direct off\nfilter pref 49152 mark 0x5/0xf cgroup /a/b classid 1:1\n");
    CHECK(bad("class 1:1 normal\nclass 1:1 1mbit\n") ==
          "line 2: class 1:1 given twice (first on line 1)");
    CHECK(bad("line-rate 1gbit\nline-rate 2gbit\n") == "line 2: line-rate given twice");
    CHECK(bad("default 1:0\n") == "line 1: class id \"1:0\": minor 0 names a qdisc, not a class");
    CHECK(bad("filter dst 10.0.0.0/8\n") ==
          "line 1: missing \"classid X:Y\": the class the filter sends to");
    CHECK(bad("line-rate\n") == "line 1: expected \"line-rate RATE\"");

    auto check = [](const std::string &t) {
        auto r = control::parse_config(t);
        REQUIRE(r);
        auto ok = control::check_config(*r, r->line_rate_bps.value_or(1'000'000'000),
                                        r->default_classid.value_or(PSPXDP_CLASSID(1, 0xffff)),
                                        "eth0", 1500);
        REQUIRE_FALSE(ok);
        return ok.error();
    };
    CHECK(check("class 1:1 600mbit\nclass 1:2 600mbit\nclass 1:ffff normal\n") ==
          "line 2: class 1:2: rate \"600mbit\": paced rates would sum to 1200Mbit, above the line "
          "rate 1Gbit of eth0");
    CHECK(check("class 1:1 normal\n") ==
          "default class 1:ffff is not among the classes (add \"class 1:ffff normal\")");
    CHECK(check("class 1:ffff normal\nfilter dst 10.0.0.0/8 classid 1:2\n") ==
          "line 2: filter \"pref 49152 dst 10.0.0.0/8 classid 1:2\": class 1:2 is not among the "
          "classes");
    CHECK(check("class 1:ffff normal\nfilter dst 10.0.0.0/8 classid 1:ffff\n"
                "filter dst 10.0.0.0/8 classid 1:ffff\n") ==
          "line 3: filter \"pref 49152 dst 10.0.0.0/8 classid 1:ffff\" given twice (first on line "
          "2)");
}

TEST_CASE("printer: one call per field gives text and JSON", "[cli][output]") {
    auto emit = [](Printer &p) {
        p.open_object();
        p.string("dev", "eth\"0\\\x01", "dev %s ");
        p.rate("rate", 300'000'000);
        p.bytes("limit", 65536);
        p.duration("ce_threshold", 2'000'000);
        p.u64("tx_frames", 12);
        p.measured_rate("measured_rate", 299'998'000.4);
        p.null("nothing");
        p.newline();
        p.open_array("classes");
        p.open_object();
        p.string("class", "1:1", "class %s ");
        p.close_object();
        p.close_array();
        p.close_object();
    };
    Printer text(false), json(true);
    emit(text);
    emit(json);
    CHECK(text.str() == "dev eth\"0\\\x01 rate 300Mbit limit 64kb ce_threshold 2ms tx_frames 12 "
                        "measured_rate 299.998Mbit\nclass 1:1 ");
    auto j = nlohmann::json::parse(json.str());
    CHECK(j["dev"] == "eth\"0\\\x01"); // escaped on the way out, intact on the way in
    CHECK(j["rate_bps"] == 300'000'000);
    CHECK(j["limit_bytes"] == 65536);
    CHECK(j["ce_threshold_ns"] == 2'000'000);
    CHECK(j["tx_frames"] == 12);
    CHECK(j["measured_rate_bps"] == 299'998'000);
    CHECK(j["nothing"].is_null());
    CHECK(j["classes"][0]["class"] == "1:1");
    // Invalid UTF-8 (a device name is bytes) is replaced, not thrown on.
    Printer bad(true);
    bad.open_object();
    bad.string("dev", "\xff\xfe");
    bad.close_object();
    CHECK(nlohmann::json::parse(bad.str())["dev"].is_string());
}

TEST_CASE("--sched of attach and daemon: auto by default; a bad value or --cpu with "
          "deadline or auto refused",
          "[cli][sched]") {
    using daemon::SchedPolicy;
    for (const Command *c : {&kAttach, &kDaemon}) {
        INFO(c->name);
        daemon::DaemonConfig cfg;
        auto a = parse_for(*c, {"eth0"});
        REQUIRE(a);
        REQUIRE(sched_options(cfg, *a));
        CHECK(cfg.sched == SchedPolicy::Auto);
        CHECK(cfg.cpu == -1);
        for (auto [word, policy] :
             {std::pair{"auto", SchedPolicy::Auto}, std::pair{"normal", SchedPolicy::Normal},
              std::pair{"fifo", SchedPolicy::Fifo}, std::pair{"deadline", SchedPolicy::Deadline}}) {
            auto b = parse_for(*c, {"eth0", "--sched", word});
            REQUIRE(b);
            REQUIRE(sched_options(cfg, *b));
            CHECK(cfg.sched == policy);
        }
        auto pinned = parse_for(*c, {"eth0", "--sched", "fifo", "--cpu", "0"});
        REQUIRE(pinned);
        REQUIRE(sched_options(cfg, *pinned));
        CHECK(cfg.cpu == 0);
        auto dl = parse_for(*c, {"eth0", "--cpu", "0"});
        REQUIRE(dl);
        daemon::DaemonConfig fresh;
        CHECK(sched_options(fresh, *dl).error() ==
              "--cpu 0 with --sched auto: the kernel runs a deadline task on any CPU of its "
              "root domain, never pinned; add --sched fifo (or normal) to pin it");
        CHECK(refused_by(*c, {"eth0", "--sched", "rt"}) ==
              "option --sched: \"rt\" is not one of auto, normal, fifo or deadline");
        CHECK(refused_by(*c, {"eth0", "--rt"}) == "unknown option --rt");
    }
}

TEST_CASE("run: the words after -- are the command, DEV before it", "[cli]") {
    auto a = parse_for(kRun, {"eth0", "--class", "1:5", "--rate", "20mbit", "--", "iperf3", "-c",
                              "x", "--", "-t"});
    REQUIRE(a);
    REQUIRE(a->dashdash);
    CHECK(*a->dashdash == 1);
    CHECK(a->positional ==
          std::vector<std::string>{"eth0", "iperf3", "-c", "x", "--", "-t"}); // a 2nd -- is a word
    CHECK(a->classid("class") == ClassId{1, 5});
    CHECK(a->number("rate") == 20'000'000);
    CHECK(a->number("pref") == 1);
    auto b = parse_for(kRun, {"--class", "1:5", "--", "true"});
    REQUIRE(b);
    CHECK(*b->dashdash == 0);
    auto c = parse_for(kRun, {"--class", "1:5"});
    REQUIRE(c);
    CHECK_FALSE(c->dashdash);
}

TEST_CASE("class trees: tc's words, printed back, and every refusal", "[cli][config][tree]") {
    auto spec = [](std::vector<std::string> w) {
        auto s = control::parse_class_spec(w);
        INFO((s ? std::string("ok") : s.error()));
        REQUIRE(s.ok());
        return *s;
    };
    auto bad = [](std::vector<std::string> w) {
        auto s = control::parse_class_spec(w);
        REQUIRE(!s.ok());
        CHECK(s.exit_code() == 2);
        return s.error();
    };
    // tc's order (parent before rate, "rate" spelt out) and pspxdp's.
    const control::ClassSpec a =
        spec({"1:10", "parent", "1:1", "rate", "300mbit", "ceil", "1gbit", "prio", "1"});
    CHECK(a.parent == 0x10001);
    CHECK(a.rate_bps == 300'000'000);
    CHECK(a.ceil_bps == 1'000'000'000);
    CHECK(a.prio == 1);
    CHECK(control::format_class_spec(a) == "1:10 parent 1:1 300Mbit ceil 1Gbit prio 1");
    const control::ClassSpec b = spec({"1:20", "100mbit", "limit", "10ms", "parent", "1:1"});
    CHECK(b.parent == 0x10001);
    CHECK(b.limit_ns == 10'000'000);
    // Printed back, parsed again: the same class.
    auto words = [](const std::string &s) {
        std::vector<std::string> w;
        size_t i = 0;
        while (i < s.size()) {
            size_t j = s.find(' ', i);
            if (j == std::string::npos) j = s.size();
            w.push_back(s.substr(i, j - i));
            i = j + 1;
        }
        return w;
    };
    CHECK(spec(words(control::format_class_spec(a))).same_config(a));
    CHECK(spec(words(control::format_class_spec(b))).same_config(b));

    CHECK(bad({"1:10", "300mbit", "ceil", "100mbit"}) ==
          "class 1:10: ceil 100Mbit is below its rate 300Mbit");
    CHECK(bad({"1:10", "300mbit", "prio", "8"}) ==
          "class 1:10: prio \"8\": expected 0..7 (as htb)");
    CHECK(bad({"1:10", "300mbit", "parent", "1:10"}) ==
          "class 1:10: parent \"1:10\" is the class itself");
    CHECK_THAT(bad({"1:10", "normal", "parent", "1:1"}),
               Catch::StartsWith("class 1:10: a normal class cannot have a parent"));
    CHECK_THAT(bad({"1:10", "normal", "ceil", "1gbit"}),
               Catch::StartsWith("class 1:10: ceil and prio need a paced class"));
    CHECK(bad({"1:10", "1mbit", "parent", "1:1", "parent", "1:2"}) ==
          "class 1:10: parent given twice (\"1:2\")");

    const uint64_t G = 1'000'000'000;
    auto tree_error = [&](std::vector<control::ClassSpec> cs) {
        auto r = control::check_rates(cs, G, "eth0", 1500);
        REQUIRE(!r.ok());
        return r.error();
    };
    const control::ClassSpec root = spec({"1:1", "900mbit"});
    // Children's rates do not count against the line rate: only the top level.
    CHECK(control::check_rates({root, a, b}, G, "eth0", 1500).ok() == false); // a's ceil > 1:1's
    const control::ClassSpec root_c = spec({"1:1", "900mbit", "ceil", "1gbit"});
    CHECK(control::check_rates({root_c, a, b}, G, "eth0", 1500).ok());
    CHECK(tree_error({root, a, b}) ==
          "class 1:10: ceil 1Gbit is above its parent 1:1's ceil 900Mbit");
    CHECK(tree_error({a}) ==
          "class 1:10: parent 1:1 does not exist (add it first, or in the same change)");
    CHECK(tree_error({spec({"1:1", "100mbit", "ceil", "1gbit"}), a}) ==
          "class 1:1: its children's rates sum to 300Mbit, above its rate 100Mbit (1 child)");
    CHECK(tree_error({spec({"1:1", "normal"}), spec({"1:10", "1mbit", "parent", "1:1"})}) ==
          "class 1:10: parent 1:1 is a normal class (a parent needs a rate to share)");
    CHECK(tree_error(
              {spec({"1:1", "1mbit", "parent", "1:2"}), spec({"1:2", "1mbit", "parent", "1:1"})}) ==
          "class 1:1: its parents form a cycle");
    std::vector<control::ClassSpec> chain{spec({"1:1", "1mbit"})};
    for (int i = 2; i <= 9; ++i) {
        char id[8], parent[8];
        std::snprintf(id, sizeof id, "1:%x", i);
        std::snprintf(parent, sizeof parent, "1:%x", i - 1);
        chain.push_back(spec({id, "1mbit", "parent", parent}));
    }
    CHECK(tree_error(chain) == "class 1:9: the tree is deeper than 8 levels (htb's limit)");
    chain.pop_back();
    CHECK(control::check_rates(chain, G, "eth0", 1500).ok());
    CHECK(tree_error({spec({"1:1", "900mbit", "ceil", "2gbit"})}) ==
          "class 1:1: ceil 2Gbit is above the line rate 1Gbit of eth0");
    // A ceil below the rate that did not come through the parser (a map, a
    // group's share, a rate raised under a stored ceil): refused by the
    // tree's check as by the parser, one line, exit 2, for a leaf and for a
    // top-level class; and by check_config (apply, attach --config) before
    // anything is written.
    control::ClassSpec low = spec({"1:1", "900mbit", "ceil", "1gbit"});
    low.ceil_bps = 100'000'000;
    CHECK(tree_error({low}) == "class 1:1: ceil 100Mbit is below its rate 900Mbit");
    control::ClassSpec low_leaf = a;
    low_leaf.rate_bps = 400'000'000;
    low_leaf.ceil_bps = 350'000'000;
    CHECK(tree_error({root_c, low_leaf}) == "class 1:10: ceil 350Mbit is below its rate 400Mbit");
    CHECK(control::check_tree({root_c, low_leaf}).exit_code() == 2);
    {
        control::Config lc;
        lc.classes = {low, spec({"1:ffff", "normal"})};
        lc.classes[0].line = 3;
        auto r = control::check_config(lc, G, 0x1ffff, "eth0", 1500);
        REQUIRE(!r.ok());
        CHECK(r.exit_code() == 2);
        CHECK(r.error() == "line 3: class 1:1: ceil 100Mbit is below its rate 900Mbit");
    }

    // A filter or the default class on a class with children.
    control::Config c;
    c.classes = {root_c, a, spec({"1:ffff", "normal"})};
    c.default_classid = 0x1ffff;
    CHECK(control::check_config(c, G, 0x1ffff, "eth0", 1500).ok());
    auto def = control::check_config(c, G, 0x10001, "eth0", 1500);
    REQUIRE(!def.ok());
    CHECK(def.error() == "default class 1:1 has children and would hold no frames");
    auto f = control::parse_filter(std::vector<std::string>{"proto", "udp", "classid", "1:1"});
    REQUIRE(f.ok());
    c.filters.push_back(control::ConfigFilter{*f, 7});
    auto fl = control::check_config(c, G, 0x1ffff, "eth0", 1500);
    REQUIRE(!fl.ok());
    CHECK_THAT(fl.error(), Catch::Contains("class 1:1 has children and holds no frames"));
}
