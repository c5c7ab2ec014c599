// pspxdp status DEV: is the pacer alive, with what line rate, which classes,
// which counters.
#include "cli/command.hpp"
#include "control/control.hpp"
#include "core/units.hpp"
#include "common/clock.hpp"
#include "common/pins.hpp"
#include "setup/attach.hpp"
#include "setup/process.hpp"

#include <nlohmann/json.hpp>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace pspxdp::cli {

namespace dp = pspxdp::setup;

static std::string read_file(const std::string &path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
        s.pop_back();
    return s;
}

// Sum of a per-CPU __u64 array map entry.
static uint64_t percpu_u64(int fd, uint32_t key) {
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return 0;
    std::vector<uint64_t> v(size_t(ncpu), 0);
    if (bpf_map_lookup_elem(fd, &key, v.data())) return 0;
    uint64_t sum = 0;
    for (auto x : v)
        sum += x;
    return sum;
}

// The daemon's stats file is flat JSON written by us: pick numbers by key.
static uint64_t json_u64(const std::string &json, const std::string &section,
                         const std::string &key) {
    size_t from = section.empty() ? 0 : json.find("\"" + section + "\":{");
    if (from == std::string::npos) return 0;
    size_t at = json.find("\"" + key + "\":", from);
    if (at == std::string::npos) return 0;
    return std::strtoull(json.c_str() + at + key.size() + 3, nullptr, 10);
}

static void summarize(const std::string &js) {
    auto u = [](uint64_t v) { return (unsigned long long)v; };
    std::printf("wire: %llu frames, %llu gap frames (%llu B), %llu kicks; underruns %llu (%llu B), "
                "idle resyncs %llu\n",
                u(json_u64(js, "tx", "frames")), u(json_u64(js, "tx", "gaps")),
                u(json_u64(js, "tx", "gap_bytes")), u(json_u64(js, "tx", "kicks")),
                u(json_u64(js, "engine", "underrun_resyncs")),
                u(json_u64(js, "engine", "underrun_bytes")),
                u(json_u64(js, "engine", "idle_resyncs")));
    std::printf("drops: kernel rx %llu, no class %llu, at shutdown %llu; tx invalid %llu, kick "
                "errors %llu\n",
                u(json_u64(js, "rx", "kernel_lost")), u(json_u64(js, "rx", "unassigned_drops")),
                u(json_u64(js, "loop", "shutdown_drops")),
                u(json_u64(js, "tx", "tx_invalid_descs")), u(json_u64(js, "tx", "kick_errors")));
    bool balanced = js.find("\"balanced\":true") != std::string::npos;
    std::printf("umem: %llu frames: free %llu, fill %llu, queued %llu, tx %llu - %s\n",
                u(json_u64(js, "umem", "frames")), u(json_u64(js, "umem", "free")),
                u(json_u64(js, "umem", "fill")), u(json_u64(js, "umem", "queued")),
                u(json_u64(js, "umem", "tx")),
                balanced ? "balanced" : "NOT BALANCED (see the log)");
}

static int run(const Args &args) {
    const std::string dev = args.positional[0];
    const bool json = args.has("json");
    auto checked = common::paths_for(dev);
    if (!checked) return fail_input("status: " + checked.error());
    const auto &paths = *checked;
    // The attach library's answer, the same one attach and detach act on.
    auto pr = dp::probe(paths);
    using K = dp::Probe::Kind;
    if (pr.kind == K::NotAttached) return fail("status: " + dev + " is not attached");
    if (pr.kind == K::Elsewhere || pr.kind == K::Broken) return fail("status: " + pr.why);
    const auto st = pr.state;
    pid_t pid = pr.daemon;
    auto d = control::Device::open(dev, common::Access::Read);
    if (!d) return fail("status: " + d.error());
    auto ps = d->state();
    if (!ps) return fail("status: " + ps.error());
    auto classes = d->classes();
    if (!classes) return fail("status: " + classes.error());
    uint64_t now = common::mono_ns();
    bool beating = pspxdp_pacer_alive(&*ps, now);
    double age_ms = ps->heartbeat_ns ? double(int64_t(now - ps->heartbeat_ns)) / 1e6 : -1;
    std::string stats = pid ? read_file(paths.stats) : "";
    uint64_t xdp_redirected = 0, xdp_no_socket = 0;
    using common::Access;
    using common::open_pinned_map;
    if (auto fd = open_pinned_map<uint32_t, uint64_t>(paths, "xdp_stats", Access::Read)) {
        xdp_redirected = percpu_u64(fd->get(), PSPXDP_XDP_REDIRECTED);
        xdp_no_socket = percpu_u64(fd->get(), PSPXDP_XDP_NO_SOCKET);
    }
    uint64_t tc_dead = 0, tc_no_slot = 0, tc_redirect_err = 0;
    if (auto fd = open_pinned_map<uint32_t, uint64_t>(paths, "tc_stats", Access::Read)) {
        tc_dead = percpu_u64(fd->get(), PSPXDP_TC_PACER_DEAD);
        tc_no_slot = percpu_u64(fd->get(), PSPXDP_TC_NO_SLOT);
        tc_redirect_err = percpu_u64(fd->get(), PSPXDP_TC_REDIRECT_ERR);
    }
    auto u = [](uint64_t v) { return (unsigned long long)v; };

    if (json) {
        std::printf("{\"attachment\":%s,\"why\":%s,", nlohmann::json(dp::kind_name(pr.kind)).dump().c_str(),
                    nlohmann::json(pr.why).dump().c_str());
        std::printf(
            "\"dev\":%s,\"pacer\":[\"%s\",\"%s\"],\"queues\":%u,\"line_rate_bps\":%llu,"
            "\"window_bytes\":%llu,\"clsact_created\":%s,\"daemon_pid\":%d,\"alive\":%s,"
            "\"heartbeat_age_ms\":%.3f,\"default_class\":\"%s\",",
            nlohmann::json(dev).dump().c_str(), st->pacer_a.c_str(), st->pacer_b.c_str(), st->queues, u(st->line_rate_bps),
            u(st->window_bytes), st->clsact_created ? "true" : "false", int(pid),
            (pid && beating) ? "true" : "false", age_ms,
            format_classid(ClassId::from_raw(pspxdp_classid_raw(ps->default_classid))).c_str());
        std::printf(
            "\"xdp\":{\"redirected\":%llu,\"no_socket\":%llu},"
            "\"tc\":{\"pacer_dead\":%llu,\"no_slot\":%llu,\"redirect_errors\":%llu},\"classes\":[",
            u(xdp_redirected), u(xdp_no_socket), u(tc_dead), u(tc_no_slot), u(tc_redirect_err));
        bool first = true;
        for (const auto &c : *classes) {
            std::printf("%s{\"class\":\"%s\",\"configured\":%s,\"kind\":\"%s\",\"rate_bps\":%llu,"
                        "\"queue\":%u,\"tc_packets\":%llu,\"tc_bytes\":%llu,\"tc_passed\":%llu,"
                        "\"tx_frames\":%llu,\"tx_bytes\":%llu,\"rx_frames\":%llu,\"drops\":%llu,"
                        "\"backlog\":%llu}",
                        first ? "" : ",", format_classid(ClassId::from_raw(c.classid)).c_str(),
                        c.configured ? "true" : "false",
                        c.config.kind == PSPXDP_CLASS_PACED ? "paced" : "normal",
                        u(c.config.rate_bps), c.queue, u(c.tc.tc_packets), u(c.tc.tc_skb_bytes),
                        u(c.tc.tc_passed), u(c.pacer.tx_frames), u(c.pacer.tx_bytes),
                        u(c.pacer.rx_frames), u(c.pacer.drops), u(c.pacer.backlog));
            first = false;
        }
        std::printf("],\"daemon\":%s}\n", stats.empty() ? "null" : stats.c_str());
        return 0;
    }

    if (pr.kind == K::DevGone || (pr.kind == K::Dead && !st->stopped.empty()))
        std::printf("%s: DEAD: %s\n", dev.c_str(), pr.why.c_str());
    std::printf("%s: attached, pacer %s -> %s (%u queues), line rate %s, window %llu B%s\n",
                dev.c_str(), st->pacer_a.c_str(), st->pacer_b.c_str(), st->queues,
                format_rate(st->line_rate_bps).c_str(), u(st->window_bytes),
                st->clsact_created ? "" : ", clsact qdisc not ours");
    if (!pid)
        std::printf("daemon: not running (TC passes everything unpaced)\n");
    else if (beating)
        std::printf("daemon: pid %d, alive, heartbeat %.1f ms ago\n", int(pid), age_ms);
    else
        std::printf("daemon: pid %d, NOT beating (heartbeat %s) - TC passes unpaced\n", int(pid),
                    ps->heartbeat_ns ? (std::to_string(int64_t(age_ms)) + " ms ago").c_str()
                                     : "never");
    std::printf(
        "default class %s; xdp redirected %llu, no socket %llu; tc passed (pacer dead) %llu, "
        "(no slot) %llu, redirect errors %llu\n",
        format_classid(ClassId::from_raw(pspxdp_classid_raw(ps->default_classid))).c_str(), u(xdp_redirected),
        u(xdp_no_socket), u(tc_dead), u(tc_no_slot), u(tc_redirect_err));
    std::printf("%-9s %-6s %10s %5s %10s %10s %12s %8s %7s\n", "class", "kind", "rate", "queue",
                "tc_pkts", "tx_frames", "tx_bytes", "drops", "backlog");
    for (const auto &c : *classes) {
        std::string rate =
            c.config.kind == PSPXDP_CLASS_PACED ? format_rate(c.config.rate_bps) : "-";
        std::printf("%-9s %-6s %10s %5u %10llu %10llu %12llu %8llu %7llu%s\n",
                    format_classid(ClassId::from_raw(c.classid)).c_str(),
                    c.config.kind == PSPXDP_CLASS_PACED ? "paced" : "normal", rate.c_str(), c.queue,
                    u(c.tc.tc_packets), u(c.pacer.tx_frames), u(c.pacer.tx_bytes), u(c.pacer.drops),
                    u(c.pacer.backlog), c.configured ? "" : "  (not configured)");
    }
    if (!stats.empty()) summarize(stats);
    return 0;
}

const Command kStatus = {
    "status",
    "DEV",
    "show whether DEV is paced: daemon, line rate, classes, counters",
    nullptr,
    {{"json", 'j', nullptr, "print JSON"}},
    1,
    1,
    run,
};

} // namespace pspxdp::cli
