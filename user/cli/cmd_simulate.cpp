// pspxdp simulate: the paper's experiments on a simulated 1 Gbit/s wire.
#include "cli/command.hpp"
#include "cli/table.hpp"
#include "core/units.hpp"
#include "sim/horizon.hpp"
#include "sim/paper.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace pspxdp::cli {

namespace {

// The horizons --horizon compares unless --gap-horizon says.
constexpr uint64_t kDefaultHorizonsNs[] = {kTimeInf, 50'000, 200'000, 1'000'000};
static_assert(kTimeInf == kGapHorizonInf, "--gap-horizon inf is the engine's paper rule");

// The horizon table (docs/design.md §4.5): every scenario under every mode.
int run_horizon_table(const Args &args, bool json) {
    const double seconds = double(args.number("seconds")) / 1e9;
    std::vector<uint64_t> horizons = args.numbers("gap-horizon");
    if (horizons.empty())
        horizons.assign(std::begin(kDefaultHorizonsNs), std::end(kDefaultHorizonsNs));

    // Lateness: this machine's table compiled in, another bench_timers
    // --json output, or none.
    sim::WakeModel wake;
    std::vector<sim::LatenessTable> loaded;
    std::string timers = "measured on this project's VM (bench_timers), compiled in";
    const std::string lateness = args.text("lateness");
    if (args.flag("perfect-timers")) {
        timers = "perfect (no wake-up lateness)";
    } else if (args.has("lateness")) {
        std::ifstream f(lateness);
        std::stringstream text;
        text << f.rdbuf();
        if (!f) return fail_input("simulate: --lateness " + lateness + ": cannot read it");
        auto t = sim::parse_lateness_json(text.str());
        if (!t) return fail_input("simulate: --lateness " + lateness + ": " + t.error());
        loaded = std::move(*t);
        const std::string sleep_name = args.text("sleep-timer");
        for (const auto &e : loaded) {
            if (e.name == sleep_name) wake.sleep = &e;
            if (e.name == "spin") wake.spin = &e;
        }
        if (!wake.sleep)
            return fail_input("simulate: --lateness " + lateness + ": no table named \"" +
                              sleep_name + "\"");
        timers = lateness + " (" + sleep_name + ", spin)";
    } else {
        wake.sleep = &sim::measured_sleep();
        wake.spin = &sim::measured_spin();
    }
    if (!args.flag("perfect-timers") && !args.has("lateness") && args.has("sleep-timer"))
        return fail_input("simulate: --sleep-timer needs --lateness FILE");

    const BurstSize burst = args.burst("burst");
    Framing framing;
    const uint64_t burst_bytes = burst.resolve(framing.mtu_unit_bytes());
    if (burst_bytes < framing.mtu_unit_bytes())
        return fail_input("simulate: --burst " + format_burst(burst) +
                          " is below one largest frame (" +
                          std::to_string(framing.mtu_unit_bytes()) + " bytes)");

    Table t({{"scenario", "scenario", false},
             {"mode", "mode", false},
             {"PAUSE % time", "gap_time_share"},
             {"PAUSE % bytes", "gap_byte_share"},
             {"frames+gaps/s", "emitted_per_s"},
             {"wakeups/s", "wakeups_per_s"},
             {"spin % core", "spin_share"},
             {"rate error", "worst_rate_error_pct"},
             {"burst @rate", "worst_burst_mtu"},
             {"late wakeups/s", "late_wakeups_per_s"},
             {"late max us", "late_max_us"},
             {"normal got", "normal_bps"}});
    const std::string only = args.text("scenario");
    bool any = false;
    for (const auto &scenario : sim::horizon_scenarios(seconds)) {
        if (!only.empty() && scenario.name.find(only) == std::string::npos) continue;
        any = true;
        for (auto mode : sim::horizon_modes(horizons)) {
            mode.burst_bytes = burst_bytes;
            if (!json)
                std::fprintf(stderr, "simulating %s, %s ...\n", scenario.name.c_str(),
                             mode.name.c_str());
            sim::HorizonRow r = sim::run_horizon(scenario, mode, wake);
            const double line = double(scenario.config.engine.line_rate_bps);
            t.row();
            t.text(r.scenario);
            t.text(r.mode);
            t.number(fixed(r.gap_time_share * 100, 2), r.gap_time_share);
            t.number(fixed(r.gap_byte_share * 100, 2), r.gap_byte_share);
            t.number(fixed(r.emitted_per_s, 0), r.emitted_per_s);
            t.number(fixed(r.wakeups_per_s, 0), r.wakeups_per_s);
            t.number(fixed(r.spin_share * 100, 1), r.spin_share);
            t.number(fixed(r.worst_rate_error_pct, 4) + "%", r.worst_rate_error_pct);
            t.number(fixed(r.worst_burst_mtu, 2) + " MTU", r.worst_burst_mtu);
            const double late_wakeups_per_s =
                r.seconds > 0 ? double(r.counters.late_wakeups) / r.seconds : 0;
            const double late_max_us = double(r.counters.late_max_bytes) * 8e6 / line;
            t.number(fixed(late_wakeups_per_s, 1), late_wakeups_per_s);
            t.number(fixed(late_max_us, 0), late_max_us);
            if (r.normal_bps > 0)
                t.number(measured_rate(r.normal_bps, 1), r.normal_bps);
            else
                t.text("-");
        }
    }
    if (!any) return fail_input("simulate: no scenario matches \"" + only + "\"");
    if (!json)
        std::printf(
            "Gap horizon H and clockless mode against the paper's rule, %s s of simulated wire\n"
            "each, wake-up lateness %s. PAUSE %% time: gap frames' share of the wire's time\n"
            "(idle included); burst @rate: max burstiness of the worst paced class at its own\n"
            "rate (hybrid clock on the model NIC's start times; clockless: real time, frames\n"
            "leave when decided, burst bound %s); late: wake-ups past a paced frame's due\n"
            "time (beyond H; clockless: past its slack), caught up within the bound.\n\n",
            fixed(seconds, 1).c_str(), timers.c_str(), format_burst(burst).c_str());
    t.print(stdout, json);
    return 0;
}

int run(const Args &args) {
    const bool json = args.flag("json");
    if (args.flag("horizon")) return run_horizon_table(args, json);
    for (const char *opt :
         {"gap-horizon", "seconds", "lateness", "sleep-timer", "perfect-timers", "burst"})
        if (args.has(opt))
            return fail_input(std::string("simulate: --") + opt + " needs --horizon");
    const double scale = args.factor("scale");
    Table t({{"scenario", "scenario", false},
             {"class", "class", false},
             {"target", "target_bps"},
             {"frames", "frames"},
             {"measured", "mean_bps"},
             {"error", "error_pct"},
             {"rate/pkt min", "rate_min_bps"},
             {"rate/pkt max", "rate_max_bps"},
             {"max burst", "max_burst_mtu"},
             {"gap share", "gap_share"},
             {"paper", "paper_mean", false},
             {"paper burst", "paper_burst", false}});
    const std::string only = args.text("scenario");
    bool any = false;
    for (const auto &scenario : sim::paper_scenarios(scale)) {
        if (!only.empty() && scenario.name.find(only) == std::string::npos) continue;
        any = true;
        if (!json) std::fprintf(stderr, "simulating %s ...\n", scenario.name.c_str());
        sim::ScenarioResult res = sim::run_scenario(scenario);
        for (const auto &r : res.rows) {
            t.row();
            t.text(r.scenario);
            t.text(r.flow);
            if (r.target_bps)
                t.number(format_rate(r.target_bps), double(r.target_bps));
            else
                t.text("normal");
            t.integer(r.frames);
            t.number(measured_rate(r.mean_bps, 4), r.mean_bps);
            if (r.target_bps)
                t.number(fixed(r.error_pct, 4) + "%", r.error_pct);
            else
                t.text("-");
            t.number(measured_rate(r.rate_min_bps, 4), r.rate_min_bps);
            t.number(measured_rate(r.rate_max_bps, 4), r.rate_max_bps);
            t.number(fixed(r.max_burst_mtu, 2) + " MTU", r.max_burst_mtu);
            t.number(fixed(res.gap_share * 100, 2) + "%", res.gap_share);
            t.text(r.paper_mean);
            t.text(r.paper_burst);
        }
    }
    if (!any) return fail_input("simulate: no scenario matches \"" + only + "\"");
    if (!json)
        std::printf(
            "pspxdp engine on a simulated 1 Gbit/s Ethernet wire (24 B framing overhead),\n"
            "judged on the byte clock; max burst in MTU = 1518 B (L2 size of a full frame).\n\n");
    t.print(stdout, json);
    return 0;
}

} // namespace

const Command kSimulate = {
    "simulate",
    "[OPTIONS]",
    "replay the paper's pacing experiments through the engine, print the table",
    "Runs the PSPacer paper's scenarios (one class at 8kbit ... 930mbit, 96 classes,\n"
    "5 classes with a greedy normal class, 99 % of the wire) through the scheduling\n"
    "engine on a simulated 1 Gbit/s wire and judges each class on the byte clock:\n"
    "mean rate, rate per packet and max burstiness, next to the paper's figures.\n"
    "--horizon instead compares the paper's gap rule with gap horizons (--gap-horizon)\n"
    "and the clockless mode, on one class at 1 ... 500 Mbit/s and the 5-class mix,\n"
    "with a model daemon that wakes as late as this machine's timers (bench_timers).",
    {
        opt(OptType::String, "scenario", 's', "NAME", "only scenarios whose name contains NAME"),
        opt(OptType::Factor, "scale", 0, "X", "multiply every scenario's frame count by X")
            .by_default(1)
            .within(0, 100),
        flag("horizon", 0, "print the gap-horizon / clockless table instead"),
        opt(OptType::TimeOrInf, "gap-horizon", 0, "TIME|inf", "a horizon to compare")
            .bare_unit(0)
            .within(0, 3600'000'000'000)
            .default_is("inf, 50us, 200us and 1ms")
            .repeat(),
        opt(OptType::Duration, "seconds", 0, "SECONDS", "simulated wire time per row of --horizon")
            .by_default(4'000'000'000)
            .bare_unit(1'000'000'000)
            .within(1'000'000, 3600'000'000'000),
        opt(OptType::String, "lateness", 0, "FILE",
            "wake-up lateness tables from bench_timers --json"),
        opt(OptType::String, "sleep-timer", 0, "NAME", "which table of FILE a sleep follows")
            .by_default(std::string("clock_nanosleep")),
        flag("perfect-timers", 0, "no wake-up lateness at all"),
        opt(OptType::Burst, "burst", 0, "SIZE", "the clockless rows' burst bound")
            .by_default(BurstSize{0, kDefaultBurstMtus}),
        flag("json", 'j', "print JSON"),
    },
    0,
    0,
    run,
};

} // namespace pspxdp::cli
