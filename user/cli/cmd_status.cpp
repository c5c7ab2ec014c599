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
#include <unistd.h>

namespace pspxdp::cli {

namespace dp = pspxdp::setup;

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

// The pacer's device-wide counters (daemon_stats), continued across daemon
// restarts; zeros when the map cannot be read.
static pspxdp_daemon_stats read_daemon_stats(const dp::Paths &paths) {
    pspxdp_daemon_stats ds{};
    if (auto fd = dp::open_pinned_map(paths, "daemon_stats")) {
        uint32_t key = 0;
        if (bpf_map_lookup_elem(*fd, &key, &ds) != 0) ds = pspxdp_daemon_stats{};
        close(*fd);
    }
    return ds;
}

// The class's TC and pacer counters, as JSON members.
static std::string class_counters_json(const control::ClassInfo &c) {
    std::string out;
#define PSPXDP_JSON(name, help) out += ",\"" #name "\":" + std::to_string(c.tc.name);
    PSPXDP_TC_CLASS_COUNTERS(PSPXDP_JSON)
#undef PSPXDP_JSON
#define PSPXDP_JSON(name, help) out += ",\"" #name "\":" + std::to_string(c.pacer.name);
    PSPXDP_CLASS_COUNTERS(PSPXDP_JSON)
#undef PSPXDP_JSON
    return out;
}

static std::string daemon_counters_json(const pspxdp_daemon_stats &d) {
    std::string out;
#define PSPXDP_JSON(name, help) out += (out.empty() ? "\"" : ",\"") + std::string(#name) + "\":" + std::to_string(d.name);
    PSPXDP_DAEMON_COUNTERS(PSPXDP_JSON)
#undef PSPXDP_JSON
    return out;
}

static void summarize(const pspxdp_daemon_stats &d) {
    auto u = [](uint64_t v) { return (unsigned long long)v; };
    std::printf("wire: %llu frames, %llu gap frames (%llu B), %llu kicks; underruns %llu (%llu B), "
                "idle resyncs %llu\n",
                u(d.wire_frames), u(d.gap_frames), u(d.gap_bytes), u(d.kicks), u(d.underruns),
                u(d.underrun_bytes), u(d.idle_resyncs));
    std::printf("pacer sockets: took %llu frames; kernel drops: ring full %llu, fill empty %llu; "
                "unknown tag %llu; lost with a killed daemon %llu\n",
                u(d.rx_frames), u(d.socket_ring_full), u(d.socket_fill_empty), u(d.unknown_class),
                u(d.died_in_rings));
    std::printf("daemon: restarts %llu, config reloads %llu, refused %llu, kick errors %llu, "
                "UMEM accounting %s\n",
                u(d.restarts), u(d.config_reloads), u(d.config_refused), u(d.kick_errors),
                d.accounting_failures ? "NOT BALANCED (see the log)" : "balanced");
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
    const pspxdp_daemon_stats ds = read_daemon_stats(paths);
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
            // "drops" (all drop_* causes), "backlog" (frames) and "tc_bytes"
            // for readers of the first format; every counter is there by its
            // own name too.
            std::printf("%s{\"class\":\"%s\",\"configured\":%s,\"kind\":\"%s\",\"rate_bps\":%llu,"
                        "\"slot\":%u,\"served\":%s,\"tc_bytes\":%llu,\"drops\":%llu,"
                        "\"backlog\":%llu%s}",
                        first ? "" : ",", format_classid(ClassId::from_raw(c.classid)).c_str(),
                        c.configured ? "true" : "false",
                        c.config.kind == PSPXDP_CLASS_PACED ? "paced" : "normal",
                        u(c.config.rate_bps), c.config.slot,
                        c.has_pacer && c.pacer.state == PSPXDP_SLOT_SERVED ? "true" : "false",
                        u(c.tc.tc_skb_bytes), u(control::total_drops(c.pacer)),
                        u(c.pacer.backlog_frames), class_counters_json(c).c_str());
            first = false;
        }
        // daemon.rx.kernel_lost: the first format's name for the kernel's drops.
        std::printf("],\"daemon\":{%s,\"rx\":{\"kernel_lost\":%llu}}}\n",
                    daemon_counters_json(ds).c_str(),
                    u(ds.socket_ring_full + ds.socket_fill_empty));
        return 0;
    }

    if (pr.kind == K::DevGone || (pr.kind == K::Dead && !st->stopped.empty()))
        std::printf("%s: DEAD: %s\n", dev.c_str(), pr.why.c_str());
    std::printf("%s: attached, pacer %s -> %s (%u sockets), line rate %s, window %llu B%s\n",
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
    std::printf("%-9s %-6s %10s %6s %10s %10s %12s %8s %7s %8s\n", "class", "kind", "rate", "slot",
                "tc_pkts", "tx_frames", "tx_bytes", "drops", "backlog", "ce");
    for (const auto &c : *classes) {
        std::string rate =
            c.config.kind == PSPXDP_CLASS_PACED ? format_rate(c.config.rate_bps) : "-";
        const char *note = !c.configured ? "  (not configured)"
                           : !c.has_pacer ? "  (not served)"
                           : c.pacer.state == PSPXDP_SLOT_DRAINING ? "  (deleted, draining)"
                                                                     : "";
        std::printf("%-9s %-6s %10s %6u %10llu %10llu %12llu %8llu %7llu %8llu%s\n",
                    format_classid(ClassId::from_raw(c.classid)).c_str(),
                    c.config.kind == PSPXDP_CLASS_PACED ? "paced" : "normal", rate.c_str(),
                    c.config.slot, u(c.tc.tc_packets), u(c.pacer.tx_frames), u(c.pacer.tx_bytes),
                    u(control::total_drops(c.pacer)), u(c.pacer.backlog_frames),
                    u(c.pacer.ce_marked), note);
    }
    summarize(ds);
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
