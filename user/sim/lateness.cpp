#include "sim/lateness.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace pspxdp::sim {

uint64_t LatenessTable::at(double q) const {
    if (quantiles.empty()) return 0;
    if (q <= quantiles.front().first) return quantiles.front().second;
    for (size_t i = 1; i < quantiles.size(); ++i) {
        const auto &[q1, v1] = quantiles[i];
        if (q > q1) continue;
        const auto &[q0, v0] = quantiles[i - 1];
        const double f = q1 > q0 ? (q - q0) / (q1 - q0) : 1.0;
        return v0 + uint64_t(std::llround(f * double(v1 - v0)));
    }
    return quantiles.back().second;
}

uint64_t LatenessTable::sample(std::mt19937_64 &rng) const {
    return at(std::uniform_real_distribution<double>(0.0, 1.0)(rng));
}

// bench_timers --samples 40000 --json (sleeps of 10 .. 1000 us drawn
// uniformly, timer slack 1 ns as the daemon sets it), 2026-11, on this
// project's 2-vCPU Firecracker VM while other builds and tests ran (load
// average 0.3 .. 10): the tails (p99.9 and beyond) are preemption and steal
// time, the conditions a pacer on a shared host meets.
const LatenessTable &measured_sleep() {
    static const LatenessTable t{"clock_nanosleep",
                                 "clock_nanosleep(TIMER_ABSTIME) lateness, this VM, busy",
                                 {{0, 4057},
                                  {0.1, 12014},
                                  {0.25, 13257},
                                  {0.5, 15104},
                                  {0.75, 20810},
                                  {0.9, 31451},
                                  {0.95, 36232},
                                  {0.99, 65823},
                                  {0.995, 89727},
                                  {0.999, 447019},
                                  {0.9995, 639439},
                                  {0.9999, 1710513},
                                  {1, 3704188}}};
    return t;
}

const LatenessTable &measured_spin() {
    static const LatenessTable t{"spin",
                                 "busy read of CLOCK_MONOTONIC until the deadline, this VM, busy",
                                 {{0, 40},
                                  {0.1, 52},
                                  {0.25, 59},
                                  {0.5, 68},
                                  {0.75, 78},
                                  {0.9, 89},
                                  {0.95, 97},
                                  {0.99, 5320},
                                  {0.995, 9534},
                                  {0.999, 310235},
                                  {0.9995, 991612},
                                  {0.9999, 3914249},
                                  {1, 14254788}}};
    return t;
}

Result<std::vector<LatenessTable>> parse_lateness_json(std::string_view text) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_array())
        return err("lateness table: expected a JSON list of {\"name\", \"quantiles\"} "
                   "(bench_timers --json)");
    std::vector<LatenessTable> out;
    for (const auto &e : j) {
        if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
            !e.contains("quantiles") || !e["quantiles"].is_array())
            return err("lateness table: every entry needs \"name\" and \"quantiles\"");
        LatenessTable t;
        t.name = e["name"].get<std::string>();
        if (e.contains("what") && e["what"].is_string()) t.note = e["what"].get<std::string>();
        for (const auto &p : e["quantiles"]) {
            if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number_unsigned())
                return err("lateness table " + t.name + ": quantiles must be [q, ns] pairs");
            t.quantiles.emplace_back(p[0].get<double>(), p[1].get<uint64_t>());
        }
        const auto &q = t.quantiles;
        bool ok = q.size() >= 2 && q.front().first == 0 && q.back().first == 1;
        for (size_t i = 1; ok && i < q.size(); ++i)
            ok = q[i].first > q[i - 1].first && q[i].second >= q[i - 1].second;
        if (!ok)
            return err("lateness table " + t.name +
                       ": quantiles must ascend from 0 to 1 with lateness that never decreases");
        out.push_back(std::move(t));
    }
    if (out.empty()) return err("lateness table: empty list");
    return out;
}

} // namespace pspxdp::sim
