// Wake-up lateness of this machine's timers: how late a thread that asks to
// run at time T actually runs, for the ways the daemon can wait.
//   clock_nanosleep  TIMER_ABSTIME on CLOCK_MONOTONIC (timer slack 1 ns, as
//                    the daemon sets it)
//   epoll_pwait2     an epoll set with no ready fd and a timeout (the
//                    daemon's wait for RX or a timer)
//   spin             reading CLOCK_MONOTONIC until T: the floor (preemption,
//                    steal time), what a spinning loop sees
// Each sample sleeps a length drawn uniformly from [--min-us, --max-us]
// (the horizon's waits are that varied) and records now - T.
//
//   bench_timers [--samples N] [--min-us A] [--max-us B] [--slack-ns S]
//                [--cpu N] [--json] [--only NAME]
// --json prints the quantile tables in the form `pspxdp simulate
// --lateness FILE` reads (user/sim/lateness.hpp); the table compiled into
// the simulator came from this program.
#include "pin_cpu.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace {

uint64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

timespec to_ts(uint64_t ns) {
    return timespec{time_t(ns / 1'000'000'000ull), long(ns % 1'000'000'000ull)};
}

// The quantiles stored: dense in the tail, where H is chosen.
constexpr double kQuantiles[] = {0,    0.1,   0.25,  0.5,    0.75,   0.9, 0.95,
                                 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0};

struct Method {
    const char *name;
    const char *what;
    // Waits until deadline (absolute CLOCK_MONOTONIC ns); false on error.
    bool (*wait)(uint64_t deadline, int epfd);
};

bool wait_nanosleep(uint64_t deadline, int) {
    timespec ts = to_ts(deadline);
    int rc;
    while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr)) == EINTR) {
    }
    return rc == 0;
}

bool wait_epoll(uint64_t deadline, int epfd) {
    epoll_event ev;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) return true;
        timespec ts = to_ts(deadline - now); // relative: epoll_pwait2 has no absolute form
        int rc = epoll_pwait2(epfd, &ev, 1, &ts, nullptr);
        if (rc < 0 && errno != EINTR) return false;
    }
}

bool wait_spin(uint64_t deadline, int) {
    while (now_ns() < deadline) {
    }
    return true;
}

const Method kMethods[] = {
    {"clock_nanosleep", "clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)", wait_nanosleep},
    {"epoll_pwait2", "epoll_pwait2 on an idle epoll set, relative timeout", wait_epoll},
    {"spin", "busy read of CLOCK_MONOTONIC until the deadline", wait_spin},
};

uint64_t quantile(const std::vector<uint64_t> &sorted, double q) {
    if (sorted.empty()) return 0;
    size_t i = size_t(q * double(sorted.size() - 1) + 0.5);
    return sorted[std::min(i, sorted.size() - 1)];
}

} // namespace

int main(int argc, char **argv) {
    size_t samples = 20'000;
    uint64_t min_us = 10, max_us = 1000;
    long slack_ns = 1;
    int cpu = -1;
    bool json = false;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        auto val = [&](const char *opt) -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_timers: %s needs a value\n", opt);
                std::exit(2);
            }
            return argv[++i];
        };
        if (!std::strcmp(argv[i], "--samples")) {
            samples = std::strtoull(val("--samples"), nullptr, 10);
        } else if (!std::strcmp(argv[i], "--min-us")) {
            min_us = std::strtoull(val("--min-us"), nullptr, 10);
        } else if (!std::strcmp(argv[i], "--max-us")) {
            max_us = std::strtoull(val("--max-us"), nullptr, 10);
        } else if (!std::strcmp(argv[i], "--slack-ns")) {
            slack_ns = std::strtol(val("--slack-ns"), nullptr, 10);
        } else if (!std::strcmp(argv[i], "--cpu")) {
            cpu = std::atoi(val("--cpu"));
        } else if (!std::strcmp(argv[i], "--only")) {
            only = val("--only");
        } else if (!std::strcmp(argv[i], "--json") || !std::strcmp(argv[i], "-j")) {
            json = true;
        } else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf(
                "usage: bench_timers [--samples N] [--min-us A] [--max-us B] [--slack-ns S]\n"
                "                    [--cpu N] [--only clock_nanosleep|epoll_pwait2|spin] "
                "[--json]\n");
            return 0;
        } else {
            std::fprintf(stderr, "bench_timers: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    if (samples == 0 || min_us > max_us || slack_ns < 1) {
        std::fprintf(stderr,
                     "bench_timers: need --samples > 0, --min-us <= --max-us, --slack-ns >= 1\n");
        return 2;
    }
    pin_cpu(cpu, "bench_timers");
    // The daemon's setting: without it a sleep may end up to 50 us late by design.
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)slack_ns) != 0)
        std::perror("bench_timers: PR_SET_TIMERSLACK");
    int epfd = epoll_create1(0);
    if (epfd < 0) {
        std::perror("bench_timers: epoll_create1");
        return 1;
    }
    double load = 0;
    if (FILE *f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &load) != 1) load = 0;
        std::fclose(f);
    }

    std::mt19937_64 rng(20051111);
    std::string out = "[";
    if (!json)
        std::printf("wake-up lateness (ns), %zu samples each, sleeps of %llu..%llu us, timer slack "
                    "%ld ns, load %.2f\n%-16s %8s %8s %8s %8s %9s %9s %9s\n",
                    samples, (unsigned long long)min_us, (unsigned long long)max_us, slack_ns, load,
                    "method", "p50", "p90", "p99", "p99.9", "p99.99", "max", "mean");
    for (const Method &m : kMethods) {
        if (!only.empty() && only != m.name) continue;
        std::vector<uint64_t> late;
        late.reserve(samples);
        std::uniform_int_distribution<uint64_t> len(min_us * 1000, max_us * 1000);
        long double sum = 0;
        for (size_t i = 0; i < samples; ++i) {
            uint64_t deadline = now_ns() + len(rng);
            if (!m.wait(deadline, epfd)) {
                std::fprintf(stderr, "bench_timers: %s: %s\n", m.name, std::strerror(errno));
                return 1;
            }
            uint64_t t = now_ns();
            late.push_back(t > deadline ? t - deadline : 0);
            sum += late.back();
        }
        std::sort(late.begin(), late.end());
        if (json) {
            char buf[512];
            std::snprintf(
                buf, sizeof buf,
                "%s\n {\"name\":\"%s\",\"what\":\"%s\",\"samples\":%zu,\"sleep_us\":[%llu,%llu],"
                "\"slack_ns\":%ld,\"load\":%.2f,\"quantiles\":[",
                out.size() > 1 ? "," : "", m.name, m.what, samples, (unsigned long long)min_us,
                (unsigned long long)max_us, slack_ns, load);
            out += buf;
            bool first = true;
            for (double q : kQuantiles) {
                std::snprintf(buf, sizeof buf, "%s[%g,%llu]", first ? "" : ",", q,
                              (unsigned long long)quantile(late, q));
                out += buf;
                first = false;
            }
            out += "]}";
        } else {
            std::printf(
                "%-16s %8llu %8llu %8llu %8llu %9llu %9llu %9.0f\n", m.name,
                (unsigned long long)quantile(late, 0.5), (unsigned long long)quantile(late, 0.9),
                (unsigned long long)quantile(late, 0.99), (unsigned long long)quantile(late, 0.999),
                (unsigned long long)quantile(late, 0.9999), (unsigned long long)late.back(),
                double(sum / samples));
            std::fflush(stdout);
        }
    }
    if (json) std::printf("%s\n]\n", out.c_str());
    close(epfd);
    return 0;
}
