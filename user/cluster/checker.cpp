// docs/design.md §11.5.
#include "cluster/checker.hpp"

#include <algorithm>

namespace pspxdp::cluster {

CheckReport check_budget(uint64_t budget_bps, std::span<const std::vector<RateChange>> logs) {
    struct Change {
        uint64_t time_ns;
        size_t host;
        uint64_t rate_bps;
    };
    std::vector<Change> changes;
    for (size_t h = 0; h < logs.size(); ++h)
        for (const RateChange &c : logs[h]) changes.push_back({c.time_ns, h, c.rate_bps});
    // Stable: one host's changes at the same instant keep their order, the
    // last one is what holds after it.
    std::stable_sort(changes.begin(), changes.end(),
                     [](const Change &a, const Change &b) { return a.time_ns < b.time_ns; });
    CheckReport report;
    report.changes = changes.size();
    std::vector<uint64_t> rate_bps(logs.size(), 0);
    unsigned __int128 sum_bps = 0;
    for (size_t i = 0; i < changes.size();) {
        uint64_t t = changes[i].time_ns;
        for (; i < changes.size() && changes[i].time_ns == t; ++i) {
            sum_bps -= rate_bps[changes[i].host];
            rate_bps[changes[i].host] = changes[i].rate_bps;
            sum_bps += changes[i].rate_bps;
        }
        uint64_t sum = sum_bps > UINT64_MAX ? UINT64_MAX : uint64_t(sum_bps);
        report.max_sum_bps = std::max(report.max_sum_bps, sum);
        bool over = sum > budget_bps;
        bool open = !report.violations.empty() && report.violations.back().end_ns == UINT64_MAX;
        if (over && !open)
            report.violations.push_back({t, UINT64_MAX, sum});
        else if (over)
            report.violations.back().sum_bps = std::max(report.violations.back().sum_bps, sum);
        else if (open)
            report.violations.back().end_ns = t;
    }
    return report;
}

} // namespace pspxdp::cluster
