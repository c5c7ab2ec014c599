// bench_dp_txloop: the bare AF_XDP TX loop, the reference the daemon's data
// path is measured against (bench/run_dp_bench.sh runs both on the same veth
// in the same run). One TX socket on DEV queue 0 (copy mode, the only mode a
// veth has), a tight loop that fills the TX ring with PAUSE frames of one
// length, kicks with sendto() (copy mode sends <= 32 descriptors a kick, or
// --budget from Linux 6.17, as the daemon asks) and reaps completions.
// Nothing else: no RX, no engine, no bookkeeping. Every descriptor points at
// the same frame, as the daemon's gap descriptors do.
//
//   bench_dp_txloop DEV [--seconds S] [--len L] [--batch B] [--budget N] [--cpu C] [--json]
//
// Root, and DEV must be a device the caller owns (run_dp_bench.sh gives it a
// veth in its own namespace). Prints frames/s over S seconds after a 0.3 s
// warm-up, counted from completions (the frames the kernel took).
#include "core/framing.hpp"
#include "datapath/xsk.hpp"
#include "setup/netlink.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <linux/if_xdp.h>
#include <sched.h>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <xdp/xsk.h>

namespace {

uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

int usage() {
    std::fprintf(stderr, "usage: bench_dp_txloop DEV [--seconds S] [--len L] [--batch B] "
                         "[--budget N] [--cpu C] [--json]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') return usage();
    std::string dev = argv[1];
    double seconds = 3;
    uint32_t len = 1514, batch = 64, budget = pspxdp::datapath::kDefaultTxBudget;
    int cpu = -1;
    bool json = false;
    for (int i = 2; i < argc; ++i) {
        std::string o = argv[i];
        auto val = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
        const char *v = nullptr;
        if (o == "--json") {
            json = true;
        } else if (o == "--seconds" && (v = val())) {
            seconds = std::atof(v);
        } else if (o == "--len" && (v = val())) {
            len = uint32_t(std::atoi(v));
        } else if (o == "--batch" && (v = val())) {
            batch = uint32_t(std::atoi(v));
        } else if (o == "--budget" && (v = val())) {
            budget = uint32_t(std::atoi(v));
        } else if (o == "--cpu" && (v = val())) {
            cpu = std::atoi(v);
        } else {
            return usage();
        }
    }
    if (!(seconds > 0 && seconds <= 60) || len < 60 || len > 1514 || batch < 1 || batch > 1024) {
        std::fprintf(stderr, "bench_dp_txloop: --seconds 0..60, --len 60..1514, --batch 1..1024\n");
        return 2;
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof(set), &set)) {
            std::perror("sched_setaffinity");
            return 1;
        }
    }
    auto link = pspxdp::setup::get_link(dev);
    if (!link) {
        std::fprintf(stderr, "bench_dp_txloop: %s\n", link.error().c_str());
        return 1;
    }
    pspxdp::Framing framing;
    auto pause = pspxdp::build_pause_frame(link->mac, len, framing);
    if (!pause) {
        std::fprintf(stderr, "bench_dp_txloop: %s\n", pause.error().c_str());
        return 1;
    }

    // Ring sizes as the daemon's TX side: 2048 TX / completion entries.
    constexpr uint32_t kRing = 2048, kFrame = 2048, kFrames = 64;
    size_t area_bytes = size_t(kFrames) * kFrame;
    void *area = mmap(nullptr, area_bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (area == MAP_FAILED) {
        std::perror("mmap");
        return 1;
    }
    std::memcpy(area, pause->data(), pause->size());
    xsk_ring_prod fill{}, tx{};
    xsk_ring_cons comp{};
    xsk_umem *umem = nullptr;
    xsk_umem_config ucfg{};
    ucfg.fill_size = kFrames;
    ucfg.comp_size = kRing;
    ucfg.frame_size = kFrame;
    int rc = xsk_umem__create(&umem, area, area_bytes, &fill, &comp, &ucfg);
    if (rc) {
        std::fprintf(stderr, "bench_dp_txloop: xsk_umem__create: %s\n", std::strerror(-rc));
        return 1;
    }
    xsk_socket *xsk = nullptr;
    xsk_socket_config scfg{};
    scfg.rx_size = 0;
    scfg.tx_size = kRing;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    scfg.bind_flags = XDP_COPY;
    // The daemon of the round before released this queue a moment ago: the
    // kernel frees it later (retry_busy), as the daemon waits for its own.
    rc = pspxdp::datapath::retry_busy([&] {
        return xsk_socket__create_shared(&xsk, dev.c_str(), 0, umem, nullptr, &tx, &fill, &comp,
                                         &scfg);
    });
    if (rc) {
        std::fprintf(stderr, "bench_dp_txloop: AF_XDP TX socket on %s queue 0: %s\n", dev.c_str(),
                     pspxdp::datapath::busy_queue_text(rc).c_str());
        return 1;
    }
    int fd = xsk_socket__fd(xsk);
    // Descriptors one sendto() sends, asked as the daemon asks.
    using pspxdp::datapath::kDefaultTxBudget;
    if (budget != kDefaultTxBudget && pspxdp::datapath::set_tx_budget(fd, budget) != budget) {
        std::fprintf(stderr, "bench_dp_txloop: --budget %u: %s\n", budget, std::strerror(errno));
        return 1;
    }

    uint64_t submitted = 0, completed = 0, kicks = 0, transient = 0, errors = 0;
    uint64_t t0 = mono_ns();
    uint64_t warm_end = t0 + 300'000'000ull;
    uint64_t end = warm_end + uint64_t(seconds * 1e9);
    uint64_t base_completed = 0, t_start = 0;
    bool measuring = false;
    rusage ru0{};
    for (uint64_t iter = 0;; ++iter) {
        // Reap.
        uint32_t idx = 0;
        uint32_t n = xsk_ring_cons__peek(&comp, kRing, &idx);
        if (n) {
            xsk_ring_cons__release(&comp, n);
            completed += n;
        }
        // Fill: at most `batch` descriptors in flight.
        uint32_t in_flight = uint32_t(submitted - completed);
        uint32_t want = in_flight < batch ? batch - in_flight : 0;
        if (want && xsk_ring_prod__reserve(&tx, want, &idx) == want) {
            for (uint32_t i = 0; i < want; ++i) {
                xdp_desc *d = xsk_ring_prod__tx_desc(&tx, idx + i);
                d->addr = 0;
                d->len = len;
                d->options = 0;
            }
            xsk_ring_prod__submit(&tx, want);
            submitted += want;
        }
        // Kick.
        ++kicks;
        if (sendto(fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0) {
            if (errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == EINTR)
                ++transient;
            else if (++errors > 1000) {
                std::fprintf(stderr, "bench_dp_txloop: sendto: %s\n", std::strerror(errno));
                return 1;
            }
        }
        if ((iter & 63) == 0) {
            uint64_t now = mono_ns();
            if (!measuring && now >= warm_end) {
                measuring = true;
                base_completed = completed;
                t_start = now;
                getrusage(RUSAGE_SELF, &ru0);
            }
            if (now >= end) break;
        }
    }
    uint64_t t_end = mono_ns();
    rusage ru1{};
    getrusage(RUSAGE_SELF, &ru1);
    auto tv = [](const timeval &t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    double cpu_s = tv(ru1.ru_utime) - tv(ru0.ru_utime) + tv(ru1.ru_stime) - tv(ru0.ru_stime);
    double dt = double(t_end - t_start) / 1e9;
    uint64_t frames = completed - base_completed;
    double fps = double(frames) / dt;
    double gbit = fps * double(framing.wire_bytes(len)) * 8 / 1e9;
    if (json)
        std::printf(
            "{\"dev\":\"%s\",\"len\":%u,\"batch\":%u,\"budget\":%u,\"cpu\":%d,\"seconds\":%.3f,"
            "\"frames\":%llu,\"fps\":%.0f,\"wire_gbit\":%.3f,\"cpu_pct\":%.1f,"
            "\"kicks\":%llu,\"kick_transient\":%llu}\n",
            dev.c_str(), len, batch, budget, cpu, dt, (unsigned long long)frames, fps, gbit,
            cpu_s / dt * 100, (unsigned long long)kicks, (unsigned long long)transient);
    else
        std::printf("bare AF_XDP TX on %s: %u B frames, %.3f Mpps (%.2f Gbit/s of wire), "
                    "%.0f%% CPU, over %.2f s\n",
                    dev.c_str(), len, fps / 1e6, gbit, cpu_s / dt * 100, dt);
    xsk_socket__delete(xsk);
    xsk_umem__delete(umem);
    munmap(area, area_bytes);
    return 0;
}
