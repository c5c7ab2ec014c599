// pspxdp simulate: the paper's experiments on a simulated 1 Gbit/s wire.
#include "cli/command.hpp"
#include "cli/table.hpp"
#include "core/units.hpp"
#include "sim/paper.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace pspxdp::cli {

namespace {

int run(const Args &args) {
    double scale = 1.0;
    if (args.has("scale")) {
        char *end = nullptr;
        std::string s = args.get("scale");
        scale = std::strtod(s.c_str(), &end);
        if (s.empty() || *end || !(scale > 0) || scale > 100)
            return fail("simulate: --scale \"" + s + "\": expected a number in (0, 100]");
    }
    bool json = args.has("json");
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
    std::string only = args.get("scenario");
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
    if (!any) return fail("simulate: no scenario matches \"" + only + "\"");
    if (!json)
        std::printf("pspxdp engine on a simulated 1 Gbit/s Ethernet wire (24 B framing overhead),\n"
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
    "mean rate, rate per packet and max burstiness, next to the paper's figures.",
    {{"scenario", 's', "NAME", "only scenarios whose name contains NAME"},
     {"scale", 0, "X", "multiply every scenario's frame count by X (default 1)"},
     {"json", 'j', nullptr, "print JSON"}},
    0,
    0,
    run,
};

} // namespace pspxdp::cli
