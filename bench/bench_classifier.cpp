// The TC classifier's cost per packet against the number of filters:
// BPF_PROG_TEST_RUN with repeat on representative packets, with 0, 1, 100,
// 1,000 and 10,000 filters of mixed shapes. Tuple-space search costs one
// lookup per shape at most, so the rows with the same shapes should read the
// same whatever the number of filters. Also times writing the filters.
//
//   sudo build/bench/bench_classifier [--repeat N] [--rounds N] [--senders]
//
// --senders: one filter in five matches who sends instead (docs/design.md
// §1.3.1): skb->mark, or the socket's cgroup (at four levels: four more
// shapes) with a UDP port; the benchmark runs from the deepest of those
// cgroups (BPF_PROG_TEST_RUN's socket is the caller's), so every cgroup
// shape costs its bpf_skb_ancestor_cgroup_id and lookup, and two more probes
// hit a mark and a cgroup filter.
//
// The pacer is left dead (no heartbeat): each run parses, classifies, counts
// and passes the packet, without the hand-over (that is the data path's
// benchmark). Figures are medians of --rounds runs of --repeat packets each.
#include "classifier.skel.h"
#include "common/cgroup.hpp"
#include "common/paths.hpp"
#include "control/filter.hpp"
#include "pspxdp/shared.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace pspxdp::control;

namespace {

using Bytes = std::vector<uint8_t>;

void put16(Bytes &b, uint16_t v) {
    b.push_back(uint8_t(v >> 8));
    b.push_back(uint8_t(v));
}

// Ethernet + IPv4 or IPv6 + UDP or TCP, 64 bytes of payload.
Bytes packet(int family, const char *src, const char *dst, uint8_t proto, uint16_t sport,
             uint16_t dport) {
    Bytes l4;
    put16(l4, sport);
    put16(l4, dport);
    if (proto == IPPROTO_TCP) {
        l4.resize(12, 0);
        l4.push_back(5 << 4);
        l4.push_back(0x10);
        l4.resize(20, 0);
    } else {
        put16(l4, 8 + 64);
        put16(l4, 0);
    }
    l4.resize(l4.size() + 64, 0xab);
    Bytes b = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
    put16(b, family == 4 ? ETH_P_IP : ETH_P_IPV6);
    uint8_t s[16] = {}, d[16] = {};
    inet_pton(family == 4 ? AF_INET : AF_INET6, src, s);
    inet_pton(family == 4 ? AF_INET : AF_INET6, dst, d);
    if (family == 4) {
        b.push_back(0x45);
        b.push_back(0);
        put16(b, uint16_t(20 + l4.size()));
        put16(b, 0);
        put16(b, 0);
        b.push_back(64);
        b.push_back(proto);
        put16(b, 0);
        b.insert(b.end(), s, s + 4);
        b.insert(b.end(), d, d + 4);
    } else {
        b.push_back(0x60);
        b.resize(b.size() + 3, 0);
        put16(b, uint16_t(l4.size()));
        b.push_back(proto);
        b.push_back(64);
        b.insert(b.end(), s, s + 16);
        b.insert(b.end(), d, d + 16);
    }
    b.insert(b.end(), l4.begin(), l4.end());
    return b;
}

// Filter i of a mixed set: eight kinds in turn, values distinct per i.
std::string filter_line(unsigned i) {
    const unsigned k = i / 8, a = (k >> 8) & 0xff, b = k & 0xff;
    const std::string pref = "pref " + std::to_string(10 + i % 64) + " ";
    const std::string cls = " classid 1:" + std::to_string(1 + i % 16);
    char buf[160];
    switch (i % 8) {
    case 0: std::snprintf(buf, sizeof buf, "dst 10.%u.%u.0/24", a, b); break;
    case 1:
        std::snprintf(buf, sizeof buf, "src 10.%u.%u.7/32 proto tcp dport %u", a, b, 1 + k % 60000);
        break;
    case 2:
        std::snprintf(buf, sizeof buf, "dst 172.16.%u.%u/32 proto udp dport 5000-5099", a, b);
        break;
    case 3: std::snprintf(buf, sizeof buf, "dst 2001:db8:%x:%x::/64", a, b); break;
    case 4:
        std::snprintf(buf, sizeof buf, "src 2001:db8:%x%02x::/48 proto udp sport %u", a, b,
                      1 + k % 60000);
        break;
    case 5: std::snprintf(buf, sizeof buf, "vlan %u dscp %u", k % 4096, k / 4096 % 64); break;
    case 6: std::snprintf(buf, sizeof buf, "dst 192.168.%u.%u/32 proto udp dport 53", a, b); break;
    default: std::snprintf(buf, sizeof buf, "proto tcp sport %u", 1 + k % 65535); break;
    }
    return pref + buf + cls;
}

// Sender filter s of --senders: a mark, or a cgroup (one of four levels) with a UDP port.
std::string sender_line(unsigned s, const std::vector<std::string> &cgroups) {
    const std::string pref = "pref " + std::to_string(10 + s % 64) + " ";
    const std::string cls = " classid 1:" + std::to_string(1 + s % 16);
    if (s % 2 == 0) return pref + "mark " + std::to_string(1000 + s / 2) + cls;
    return pref + "cgroup " + cgroups[(s / 2) % cgroups.size()] + " proto udp dport " +
           std::to_string(20000 + s / 2) + cls;
}

struct Probe {
    const char *name;
    Bytes pkt;
    uint32_t mark = 0;
};

// Moves this process into the cgroup at full (cgroup.procs).
bool join_cgroup(const std::string &full) {
    std::ofstream f(full + "/cgroup.procs");
    f << getpid() << std::flush;
    return f.good();
}

uint32_t median_ns(int prog_fd, const Bytes &pkt, uint32_t mark, int repeat, int rounds) {
    std::vector<uint32_t> d;
    for (int r = 0; r < rounds; ++r) {
        __sk_buff ctx{};
        ctx.mark = mark;
        LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt.data(),
                    .data_size_in = uint32_t(pkt.size()), .ctx_in = &ctx,
                    .ctx_size_in = sizeof(ctx), .repeat = repeat);
        if (bpf_prog_test_run_opts(prog_fd, &opts) != 0) {
            std::perror("bpf_prog_test_run");
            std::exit(1);
        }
        d.push_back(opts.duration);
    }
    std::sort(d.begin(), d.end());
    return d[d.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char **argv) {
    int repeat = 200000, rounds = 5;
    bool senders = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--senders"))
            senders = true;
        else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = std::atoi(argv[++i]);
    }
    if (geteuid() != 0) {
        std::fprintf(stderr, "bench_classifier: needs root (BPF)\n");
        return 77;
    }
    classifier_bpf *skel = classifier_bpf::open_and_load();
    if (!skel) {
        std::fprintf(stderr, "bench_classifier: loading the classifier failed\n");
        return 1;
    }
    FilterMaps maps;
    maps.filters = bpf_map__fd(skel->maps.filters);
    maps.entries = bpf_map__fd(skel->maps.filter_entries);
    maps.shapes = bpf_map__fd(skel->maps.filter_shapes);
    maps.state = bpf_map__fd(skel->maps.filter_state);
    maps.stats = bpf_map__fd(skel->maps.filter_stats);
    const int prog = bpf_program__fd(skel->progs.pspxdp_classify);

    // --senders: four nested cgroups, the benchmark in the deepest.
    std::vector<std::string> cgroups;
    std::string cg_base, cg_back;
    std::optional<pspxdp::common::Cgroup2Mount> mount;
    if (senders) {
        auto m = pspxdp::common::cgroup2_mount();
        if (!m) {
            std::fprintf(stderr, "bench_classifier: --senders: %s\n", m.error().c_str());
            return 1;
        }
        mount = *m;
        cg_base = "/pspxdp-bench-" + std::to_string(getpid());
        std::string p = cg_base;
        for (const char *d : {"/a", "/b", "/c", "/d"}) cgroups.push_back(p += d);
        cg_back = pspxdp::common::own_cgroup();
        if (!pspxdp::common::mkdir_p(mount->dir + cgroups.back(), 0755) ||
            !join_cgroup(mount->dir + cgroups.back())) {
            std::fprintf(stderr, "bench_classifier: cannot make or join %s\n",
                         (mount->dir + cgroups.back()).c_str());
            return 1;
        }
    }
    // Each probe's target filter exists from 100 filters on (its index < 100).
    std::vector<Probe> probes = {
        {"v4 udp dst+dport range (#2)", packet(4, "9.9.9.9", "172.16.0.0", IPPROTO_UDP, 1, 5050)},
        {"v4 tcp src+dport (#9)", packet(4, "10.0.1.7", "9.9.9.9", IPPROTO_TCP, 40000, 2)},
        {"v6 udp src+sport (#12)", packet(6, "2001:db8:1::1", "2001:db9::1", IPPROTO_UDP, 2, 9)},
        {"v4 unmatched", packet(4, "9.9.9.9", "8.8.8.8", IPPROTO_UDP, 1, 2)},
        {"v6 unmatched", packet(6, "2001:db9::1", "2001:dba::1", IPPROTO_TCP, 40000, 2)},
    };
    if (senders) {
        probes.push_back(
            {"mark (sender #0)", packet(4, "9.9.9.9", "8.8.8.8", IPPROTO_UDP, 1, 2), 1000});
        probes.push_back(
            {"cgroup /a + udp dport (#1)", packet(4, "9.9.9.9", "8.8.8.8", IPPROTO_UDP, 1, 20000)});
    }

    std::printf("ns per packet (BPF_PROG_TEST_RUN, repeat %d, median of %d)%s\n", repeat, rounds,
                senders ? ", one filter in five a mark or a cgroup (--senders)" : "");
    std::printf("%8s %7s %8s %10s", "filters", "shapes", "entries", "write_s");
    for (const Probe &p : probes) std::printf(" | %-28s", p.name);
    std::printf("\n");
    for (unsigned n : {0u, 1u, 10u, 100u, 1000u, 10000u}) {
        std::vector<FilterSpec> specs;
        const unsigned nsend = senders ? n / 5 : 0;
        for (unsigned i = 0; i < n; ++i) {
            const std::string line = i < nsend ? sender_line(i, cgroups) : filter_line(i - nsend);
            auto s = parse_filter(split_words(line));
            if (!s) {
                std::fprintf(stderr, "bench_classifier: %s: %s\n", line.c_str(), s.error().c_str());
                return 1;
            }
            specs.push_back(*s);
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (auto r = replace_filters(maps, specs); !r) {
            std::fprintf(stderr, "bench_classifier: %s\n", r.error().c_str());
            return 1;
        }
        const double write_s = seconds_since(t0);
        auto stored = read_filters(maps);
        const EntryMap entries = build_entries(*stored);
        std::printf("%8u %7zu %8zu %10.3f", n, shape_table(entries).size(), entries.size(),
                    write_s);
        for (const Probe &p : probes)
            std::printf(" | %28u", median_ns(prog, p.pkt, p.mark, repeat, rounds));
        std::printf("\n");
        std::fflush(stdout);
    }

    // The control plane at 10,000 filters.
    std::vector<FilterSpec> specs;
    auto stored = read_filters(maps);
    for (const auto &f : *stored) specs.push_back(f.spec);
    auto t0 = std::chrono::steady_clock::now();
    if (auto r = replace_filters(maps, specs); !r) return 1;
    std::printf("\nreplace 10000 filters by themselves (apply of save): %.3f s\n",
                seconds_since(t0));
    auto one = parse_filter(std::vector<std::string>{"dst", "203.0.113.0/24", "classid", "1:1"});
    t0 = std::chrono::steady_clock::now();
    if (auto r = add_filter(maps, *one); !r) return 1;
    std::printf("add one filter to 10000: %.3f s\n", seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    if (auto r = replace_filters(maps, {}); !r) return 1;
    std::printf("delete all 10001 filters (apply of nothing): %.3f s\n", seconds_since(t0));
    classifier_bpf::destroy(skel);
    if (mount) {
        join_cgroup(cg_back == "/" ? mount->dir : mount->dir + cg_back);
        for (auto it = cgroups.rbegin(); it != cgroups.rend(); ++it)
            rmdir((mount->dir + *it).c_str());
        rmdir((mount->dir + cg_base).c_str());
    }
    return 0;
}
