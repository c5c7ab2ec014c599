// Lab traffic: a rate-limited UDP sender and a counting sink, both bounded in
// count and time. Only for the netns lab: it sends where it is told, so the
// lab scripts point it at addresses inside their own namespaces.
//
//   psp_traffic send DST PORT --rate RATE --size BYTES [--seconds S] [--count N] [--ports N]
//       --ports N: N flows, to ports PORT..PORT+N-1 in turn, RATE in all
//   psp_traffic sink PORT[,PORT...] --seconds S      prints JSON counts per port
//                                                    (also when stopped early by SIGINT/SIGTERM)
#include "core/units.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <csignal>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

static int usage() {
    std::fprintf(stderr,
                 "usage: psp_traffic send DST PORT --rate RATE --size BYTES [--seconds S] [--count N] "
                 "[--ports N]\n"
                 "       psp_traffic sink PORT[,PORT...] --seconds S\n");
    return 2;
}

static bool parse_u64(const char *s, uint64_t &out) {
    char *end = nullptr;
    errno = 0;
    out = std::strtoull(s, &end, 10);
    return *s && !*end && !errno;
}

static int do_send(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *dst = argv[0];
    uint64_t port = 0, size = 1472, count = UINT64_MAX, ports = 1;
    double seconds = 3;
    uint64_t rate_bps = 0;
    if (!parse_u64(argv[1], port) || port == 0 || port > 65535) {
        std::fprintf(stderr, "psp_traffic: bad port \"%s\"\n", argv[1]);
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string o = argv[i];
        if (o == "--rate") {
            auto r = pspxdp::parse_rate_bps(argv[i + 1]);
            if (!r) {
                std::fprintf(stderr, "psp_traffic: %s\n", r.error().c_str());
                return 2;
            }
            rate_bps = *r;
        } else if (o == "--size") {
            if (!parse_u64(argv[i + 1], size) || size < 1 || size > 1472) {
                std::fprintf(stderr, "psp_traffic: --size must be 1..1472 (one frame)\n");
                return 2;
            }
        } else if (o == "--seconds") {
            seconds = std::atof(argv[i + 1]);
            if (!(seconds > 0 && seconds <= 600)) {
                std::fprintf(stderr, "psp_traffic: --seconds must be in (0, 600]\n");
                return 2;
            }
        } else if (o == "--count") {
            if (!parse_u64(argv[i + 1], count)) return usage();
        } else if (o == "--ports") {
            if (!parse_u64(argv[i + 1], ports) || ports < 1 || ports > 65536) return usage();
        } else {
            return usage();
        }
    }
    if (!rate_bps) {
        std::fprintf(stderr, "psp_traffic: --rate is required\n");
        return 2;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(uint16_t(port));
    if (inet_pton(AF_INET, dst, &sa.sin_addr) != 1) {
        std::fprintf(stderr, "psp_traffic: bad IPv4 address \"%s\"\n", dst);
        return 2;
    }
    if (port + ports - 1 > 65535) {
        std::fprintf(stderr, "psp_traffic: ports %lu..%lu beyond 65535\n", (unsigned long)port,
                     (unsigned long)(port + ports - 1));
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    // One flow: connected. Several: sendto each port in turn (a connected
    // socket would also collect the receiver's port-unreachable errors).
    if (fd < 0 || (ports == 1 && connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) < 0)) {
        std::fprintf(stderr, "psp_traffic: socket to %s:%lu: %s\n", dst, (unsigned long)port,
                     std::strerror(errno));
        return 1;
    }
    std::vector<char> payload(size, 'p');
    // L2 bytes per datagram, FCS included, as the pacer counts them.
    const double frame_bits = double(std::max<uint64_t>(size + 42, 60) + 4) * 8;
    const double interval_ns = frame_bits * 1e9 / double(rate_bps);
    uint64_t sent = 0, errors = 0;
    auto t0 = Clock::now();
    auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (sent + errors < count) {
        auto now = Clock::now();
        if (now >= end) break;
        // Send what is due by now, in one burst per wake-up (a coarse offered
        // load: the pacer's job is to smooth it).
        double elapsed_ns = std::chrono::duration<double, std::nano>(now - t0).count();
        uint64_t due = uint64_t(elapsed_ns / interval_ns) + 1;
        while (sent + errors < due && sent + errors < count) {
            ssize_t rc;
            if (ports == 1) {
                rc = send(fd, payload.data(), payload.size(), 0);
            } else {
                sa.sin_port = htons(uint16_t(port + (sent + errors) % ports));
                rc = sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr *>(&sa),
                            sizeof sa);
            }
            if (rc < 0)
                ++errors;
            else
                ++sent;
        }
        usleep(200);
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("{\"sent\":%lu,\"errors\":%lu,\"seconds\":%.3f,\"offered_bps\":%.0f}\n",
                (unsigned long)sent, (unsigned long)errors, secs, double(sent) * frame_bits / secs);
    close(fd);
    return 0;
}

static volatile sig_atomic_t g_stop_sink = 0;
static void stop_sink(int) { g_stop_sink = 1; }

static int do_sink(int argc, char **argv) {
    if (argc < 1) return usage();
    double seconds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::string(argv[i]) != "--seconds") return usage();
        seconds = std::atof(argv[i + 1]);
        if (!(seconds > 0 && seconds <= 600)) {
            std::fprintf(stderr, "psp_traffic: --seconds must be in (0, 600]\n");
            return 2;
        }
    }
    std::vector<uint16_t> ports;
    for (char *tok = std::strtok(argv[0], ","); tok; tok = std::strtok(nullptr, ",")) {
        uint64_t p;
        if (!parse_u64(tok, p) || !p || p > 65535) {
            std::fprintf(stderr, "psp_traffic: bad port \"%s\"\n", tok);
            return 2;
        }
        ports.push_back(uint16_t(p));
    }
    std::vector<pollfd> fds;
    for (uint16_t p : ports) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        int buf = 8 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(p);
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) < 0) {
            std::fprintf(stderr, "psp_traffic: bind port %u: %s\n", p, std::strerror(errno));
            return 1;
        }
        fds.push_back(pollfd{fd, POLLIN, 0});
    }
    std::vector<uint64_t> got(ports.size()), bytes(ports.size());
    auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    char buf[65536];
    // A caller that knows the traffic is over (the soak, once the pacer has
    // drained) stops the sink early; it still reads what is queued and prints.
    struct sigaction sa {};
    sa.sa_handler = stop_sink;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    while (Clock::now() < end && !g_stop_sink) {
        if (poll(fds.data(), fds.size(), 50) <= 0) continue;
        for (size_t i = 0; i < fds.size(); ++i) {
            ssize_t n;
            while ((n = recv(fds[i].fd, buf, sizeof buf, 0)) > 0) {
                ++got[i];
                bytes[i] += uint64_t(n);
            }
        }
    }
    for (size_t i = 0; i < fds.size(); ++i) { // what arrived before the stop
        ssize_t n;
        while ((n = recv(fds[i].fd, buf, sizeof buf, 0)) > 0) {
            ++got[i];
            bytes[i] += uint64_t(n);
        }
    }
    std::printf("{");
    for (size_t i = 0; i < ports.size(); ++i)
        std::printf("%s\"%u\":{\"datagrams\":%lu,\"bytes\":%lu}", i ? "," : "", ports[i],
                    (unsigned long)got[i], (unsigned long)bytes[i]);
    std::printf("}\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    std::string mode = argv[1];
    if (mode == "send") return do_send(argc - 2, argv + 2);
    if (mode == "sink") return do_sink(argc - 2, argv + 2);
    return usage();
}
