// Lab traffic: rate-limited UDP senders and a counting sink, both bounded in
// count and time. Only for the netns lab: it sends where it is told, so the
// lab scripts point it at addresses inside their own namespaces.
//
//   psp_traffic send DST PORT --rate RATE [--size BYTES] [--seconds S] [--count N] [--stamp]
//                    [--ports N]
//   psp_traffic send --flow DST:PORT:RATE[:START:STOP][,sizes=MIN-MAX] ... [--size BYTES]
//                    [--seconds S] [--stamp]
//   psp_traffic sink PORT[,PORT...] --seconds S [--stamped]
//
// send: one UDP socket per flow, each flow sending its rate (L2 bytes with
// FCS, as the pacer counts) from START to STOP seconds (default: the whole
// run), in one burst per 200 us wake-up: a coarse offered load, the shaper's
// job is to smooth it. A socket that would block (a shaper holding its
// buffer) is not waited for: the flow skips what it could not send and
// counts it as "blocked" (one slow flow must not stall the others).
// --stamp writes a sequence number and the send time (CLOCK_REALTIME) into
// each datagram; sink --stamped then reports one-way delay (from the
// kernel's receive timestamp), loss and reordering per port.
// DST is IPv4 or IPv6 (in --flow in brackets: [fd00::2]:5001:10mbit).
// sizes=MIN-MAX: that flow's UDP payloads uniform in MIN..MAX bytes (a fixed
// seed per flow, so a run repeats), its rate still in L2 bytes; the others
// send --size. What was sent is also reported in bits per flow.
// --ports N (the DST PORT form): N destinations PORT..PORT+N-1 in turn from
// one unconnected socket, RATE in all (10,000 classes without 10,000 fds).
// Both stop early on SIGINT/SIGTERM (a test's cleanup): send prints what it
// sent so far, sink still reads what is queued; each prints one JSON object
// (send: totals, and per flow).
#include "core/units.hpp"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <cmath>
#include <csignal>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

// Set by SIGINT/SIGTERM: send and sink stop and print what they have.
volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }
void stop_on_signals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

int usage() {
    std::fprintf(stderr,
                 "usage: psp_traffic send DST PORT --rate RATE [--size BYTES] [--seconds S] "
                 "[--count N] [--stamp] [--ports N]\n"
                 "       psp_traffic send --flow DST:PORT:RATE[:START:STOP][,sizes=MIN-MAX] ... "
                 "[--size BYTES] [--seconds S] [--stamp]\n"
                 "       psp_traffic sink PORT[,PORT...] --seconds S [--stamped]\n");
    return 2;
}

bool parse_u64(const char *s, uint64_t &out) {
    char *end = nullptr;
    errno = 0;
    out = std::strtoull(s, &end, 10);
    return *s && !*end && !errno;
}

bool parse_seconds(const std::string &s, double &out) {
    char *end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return !s.empty() && !*end && out >= 0 && out <= 600;
}

uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// What --stamp writes at the front of each datagram.
struct Stamp {
    uint64_t seq;
    uint64_t sent_ns; // CLOCK_REALTIME
};

struct Flow {
    std::string spec, dst;
    uint64_t port = 0, rate_bps = 0;
    uint64_t ports = 1; // --ports: destinations port .. port + ports - 1 in turn
    double start_s = 0, stop_s = 1e9;
    uint64_t min_size = 0, max_size = 0; // sizes=MIN-MAX; 0: --size
    int fd = -1;
    sockaddr_storage to{};
    socklen_t to_len = 0;
    bool v6 = false;
    std::mt19937_64 rng;
    uint64_t size = 0;    // the next datagram's payload
    double bits_done = 0; // schedule handled (L2 bits): sent + blocked + errors
    uint64_t sent = 0, blocked = 0, errors = 0, sent_bits = 0;
    // L2 bits of a datagram of `payload` bytes, FCS included, as the pacer
    // counts them.
    double frame_bits(uint64_t payload) const {
        return double(std::max<uint64_t>(payload + (v6 ? 62 : 42), 60) + 4) * 8;
    }
    void draw(uint64_t fixed) {
        size = max_size ? min_size + rng() % (max_size - min_size + 1) : fixed;
    }
};

void set_port(Flow &f, uint64_t port) {
    if (f.to.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6 *>(&f.to)->sin6_port = htons(uint16_t(port));
    else
        reinterpret_cast<sockaddr_in *>(&f.to)->sin_port = htons(uint16_t(port));
}

// DST (IPv4 or IPv6) and PORT into f.to. False if DST is neither.
bool resolve(Flow &f) {
    auto *a4 = reinterpret_cast<sockaddr_in *>(&f.to);
    auto *a6 = reinterpret_cast<sockaddr_in6 *>(&f.to);
    if (inet_pton(AF_INET, f.dst.c_str(), &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        f.to_len = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, f.dst.c_str(), &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        f.to_len = sizeof(sockaddr_in6);
        f.v6 = true;
    } else {
        return false;
    }
    set_port(f, f.port);
    return true;
}

bool parse_flow(const std::string &spec, Flow &f) {
    // DST:PORT:RATE[:START:STOP][,sizes=MIN-MAX], DST an IPv6 address in brackets
    std::vector<std::string> p;
    size_t at = 0;
    std::string rest = spec;
    if (size_t comma = spec.find(','); comma != std::string::npos) {
        const std::string opt = spec.substr(comma + 1);
        const size_t dash = opt.find('-');
        if (opt.rfind("sizes=", 0) != 0 || dash == std::string::npos ||
            !parse_u64(opt.substr(6, dash - 6).c_str(), f.min_size) ||
            !parse_u64(opt.substr(dash + 1).c_str(), f.max_size) || f.min_size < sizeof(Stamp) ||
            f.max_size < f.min_size)
            return false;
        rest = spec.substr(0, comma);
    }
    if (!rest.empty() && rest[0] == '[') {
        const size_t close = rest.find("]:");
        if (close == std::string::npos) return false;
        p.push_back(rest.substr(1, close - 1));
        at = close + 2;
    }
    for (;;) {
        size_t c = rest.find(':', at);
        p.push_back(rest.substr(at, c - at));
        if (c == std::string::npos) break;
        at = c + 1;
    }
    if (p.size() != 3 && p.size() != 5) return false;
    f.spec = spec;
    f.dst = p[0];
    auto r = pspxdp::parse_rate_bps(p[2]);
    if (!parse_u64(p[1].c_str(), f.port) || !f.port || f.port > 65535 || !r || !*r) return false;
    f.rate_bps = *r;
    if (p.size() == 5 && (!parse_seconds(p[3], f.start_s) || !parse_seconds(p[4], f.stop_s) ||
                          f.stop_s <= f.start_s))
        return false;
    return true;
}

int do_send(int argc, char **argv) {
    std::vector<Flow> flows;
    uint64_t size = 1472, count = UINT64_MAX;
    double seconds = 3;
    bool stamp = false;
    int i = 0;
    if (argc >= 2 && argv[0][0] != '-') { // the one-flow form: DST PORT --rate RATE
        Flow f;
        f.dst = argv[0];
        if (!parse_u64(argv[1], f.port) || f.port == 0 || f.port > 65535) {
            std::fprintf(stderr, "psp_traffic: bad port \"%s\"\n", argv[1]);
            return 2;
        }
        f.spec = f.dst + ":" + argv[1];
        flows.push_back(f);
        i = 2;
    }
    for (; i < argc; ++i) {
        std::string o = argv[i];
        if (o == "--stamp") {
            stamp = true;
            continue;
        }
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        if (o == "--rate") {
            auto r = pspxdp::parse_rate_bps(v);
            if (!r || flows.size() != 1) {
                std::fprintf(stderr, "psp_traffic: --rate \"%s\": %s\n", v,
                             r ? "only with DST PORT" : r.error().c_str());
                return 2;
            }
            flows[0].rate_bps = *r;
        } else if (o == "--flow") {
            Flow f;
            if (!parse_flow(v, f)) {
                std::fprintf(stderr,
                             "psp_traffic: --flow \"%s\": expected "
                             "DST:PORT:RATE[:START:STOP][,sizes=MIN-MAX] (MIN >= 16)\n",
                             v);
                return 2;
            }
            flows.push_back(f);
        } else if (o == "--size") {
            if (!parse_u64(v, size) || size < sizeof(Stamp) || size > 1472) {
                std::fprintf(stderr, "psp_traffic: --size \"%s\": expected 16..1472 (one frame)\n",
                             v);
                return 2;
            }
        } else if (o == "--seconds") {
            if (!parse_seconds(v, seconds) || seconds <= 0) {
                std::fprintf(stderr, "psp_traffic: --seconds \"%s\": expected (0, 600]\n", v);
                return 2;
            }
        } else if (o == "--ports") {
            if (flows.size() != 1 || !parse_u64(v, flows[0].ports) || flows[0].ports < 1 ||
                flows[0].port + flows[0].ports - 1 > 65535) {
                std::fprintf(stderr,
                             "psp_traffic: --ports \"%s\": only with DST PORT, ports up to 65535\n",
                             v);
                return 2;
            }
        } else if (o == "--count") {
            if (!parse_u64(v, count)) {
                std::fprintf(stderr, "psp_traffic: --count \"%s\": expected a whole number\n", v);
                return 2;
            }
        } else {
            std::fprintf(stderr, "psp_traffic: unknown option \"%s\"\n", o.c_str());
            return usage();
        }
    }
    if (flows.empty()) return usage();
    uint64_t seed = 0;
    for (auto &f : flows) {
        if (!f.rate_bps) {
            std::fprintf(stderr, "psp_traffic: %s: no rate (--rate RATE)\n", f.spec.c_str());
            return 2;
        }
        if (!resolve(f)) {
            std::fprintf(stderr, "psp_traffic: bad IPv4 or IPv6 address \"%s\"\n", f.dst.c_str());
            return 2;
        }
        // One frame (1514 bytes) at most: an IPv6 header is 20 bytes longer.
        const uint64_t most = f.v6 ? 1452 : 1472;
        if ((f.max_size ? f.max_size : size) > most) {
            std::fprintf(stderr, "psp_traffic: %s: payloads up to %llu bytes (one frame)\n",
                         f.spec.c_str(), (unsigned long long)most);
            return 2;
        }
        f.fd = socket(f.to.ss_family, SOCK_DGRAM, 0);
        if (f.fd < 0 ||
            (f.ports == 1 && connect(f.fd, reinterpret_cast<sockaddr *>(&f.to), f.to_len) < 0)) {
            std::fprintf(stderr, "psp_traffic: socket to %s: %s\n", f.spec.c_str(),
                         std::strerror(errno));
            return 1;
        }
        f.rng.seed(++seed);
        f.draw(size);
        f.stop_s = std::min(f.stop_s, seconds);
    }
    std::vector<char> payload(1472, 'p');
    stop_on_signals();
    uint64_t total = 0;
    auto t0 = Clock::now();
    // Where every flow's start and stop times count from, for a judge
    // reading captures (CLOCK_REALTIME, as their timestamps).
    const uint64_t start_realtime_ns = realtime_ns();
    auto end =
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (total < count && !g_stop) {
        auto now = Clock::now();
        if (now >= end) break;
        double elapsed_ns = std::chrono::duration<double, std::nano>(now - t0).count();
        for (auto &f : flows) {
            double on_ns = elapsed_ns - f.start_s * 1e9;
            if (on_ns < 0 || elapsed_ns >= f.stop_s * 1e9) continue;
            // A datagram is due at the start of its share of the schedule.
            const double due_bits = on_ns * double(f.rate_bps) / 1e9;
            while (f.bits_done <= due_bits && total < count) {
                const double bits = f.frame_bits(f.size);
                f.bits_done += bits;
                if (stamp) {
                    Stamp s{f.sent, realtime_ns()};
                    std::memcpy(payload.data(), &s, sizeof s);
                }
                ssize_t rc;
                if (f.ports == 1) {
                    rc = send(f.fd, payload.data(), f.size, MSG_DONTWAIT);
                } else {
                    set_port(f, f.port + (f.sent + f.blocked + f.errors + 1) % f.ports);
                    rc = sendto(f.fd, payload.data(), f.size, MSG_DONTWAIT,
                                reinterpret_cast<sockaddr *>(&f.to), f.to_len);
                }
                if (rc >= 0) {
                    ++f.sent;
                    f.sent_bits += uint64_t(bits);
                    ++total;
                } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    // The socket is full (a shaper holds its buffer): skip
                    // this wake-up's rest, count what was not sent.
                    ++f.blocked;
                    for (f.draw(size); f.bits_done <= due_bits; f.draw(size)) {
                        f.bits_done += f.frame_bits(f.size);
                        ++f.blocked;
                    }
                    continue;
                } else {
                    ++f.errors;
                }
                f.draw(size);
            }
        }
        usleep(200);
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t sent = 0, blocked = 0, errors = 0, sent_bits = 0;
    for (auto &f : flows) {
        sent += f.sent;
        blocked += f.blocked;
        errors += f.errors;
        sent_bits += f.sent_bits;
    }
    nlohmann::ordered_json out = {{"sent", sent},
                                  {"blocked", blocked},
                                  {"errors", errors},
                                  {"seconds", secs},
                                  {"offered_bps", std::round(double(sent_bits) / secs)},
                                  {"start_realtime_ns", start_realtime_ns},
                                  {"flows", nlohmann::ordered_json::array()}};
    for (const Flow &f : flows) {
        out["flows"].push_back({{"flow", f.spec},
                                {"sent", f.sent},
                                {"sent_bits", f.sent_bits},
                                {"blocked", f.blocked},
                                {"errors", f.errors}});
        close(f.fd);
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

// One-way delay samples of a stamped port: bounded (the first kMaxSamples).
constexpr size_t kMaxSamples = 1 << 21;

struct PortStats {
    uint16_t port = 0;
    int fd = -1;
    uint64_t datagrams = 0, bytes = 0, reordered = 0, max_seq = 0;
    bool any = false;
    std::vector<double> owd_us;
};

int do_sink(int argc, char **argv) {
    if (argc < 1) return usage();
    double seconds = 5;
    bool stamped = false;
    for (int i = 1; i < argc; ++i) {
        std::string o = argv[i];
        if (o == "--stamped") {
            stamped = true;
        } else if (o == "--seconds" && i + 1 < argc) {
            if (!parse_seconds(argv[++i], seconds) || seconds <= 0) {
                std::fprintf(stderr, "psp_traffic: --seconds \"%s\": expected (0, 600]\n", argv[i]);
                return 2;
            }
        } else {
            return usage();
        }
    }
    std::vector<PortStats> ports;
    for (char *tok = std::strtok(argv[0], ","); tok; tok = std::strtok(nullptr, ",")) {
        uint64_t p;
        if (!parse_u64(tok, p) || !p || p > 65535) {
            std::fprintf(stderr, "psp_traffic: bad port \"%s\"\n", tok);
            return 2;
        }
        PortStats ps;
        ps.port = uint16_t(p);
        ports.push_back(std::move(ps));
    }
    std::vector<pollfd> fds;
    for (auto &ps : ports) {
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        int buf = 8 << 20, one = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
        if (stamped) setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(ps.port);
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) < 0) {
            std::fprintf(stderr, "psp_traffic: bind port %u: %s\n", ps.port, std::strerror(errno));
            return 1;
        }
        ps.fd = fd;
        fds.push_back(pollfd{fd, POLLIN, 0});
    }
    auto end = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    static char buf[65536];
    char ctrl[CMSG_SPACE(sizeof(timespec))];
    // A caller that knows the traffic is over (the soak, once the pacer has
    // drained) stops the sink early; it still reads what is queued and prints.
    stop_on_signals();
    for (bool last = false;;) {
        last = last || Clock::now() >= end || g_stop;
        if (!last && poll(fds.data(), fds.size(), 50) <= 0) continue;
        for (auto &ps : ports) {
            for (;;) {
                iovec iov{buf, sizeof buf};
                msghdr mh{};
                mh.msg_iov = &iov;
                mh.msg_iovlen = 1;
                mh.msg_control = ctrl;
                mh.msg_controllen = sizeof ctrl;
                ssize_t n = recvmsg(ps.fd, &mh, 0);
                if (n <= 0) break;
                ++ps.datagrams;
                ps.bytes += uint64_t(n);
                if (!stamped || size_t(n) < sizeof(Stamp)) continue;
                Stamp s;
                std::memcpy(&s, buf, sizeof s);
                if (ps.any && s.seq < ps.max_seq) ++ps.reordered;
                ps.max_seq = ps.any ? std::max(ps.max_seq, s.seq) : s.seq;
                ps.any = true;
                for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
                        ps.owd_us.size() < kMaxSamples) {
                        timespec ts;
                        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                        uint64_t rx = uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
                        ps.owd_us.push_back((double(rx) - double(s.sent_ns)) / 1e3);
                    }
            }
        }
        if (last) break; // what arrived before the stop is read
    }
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto &ps : ports) {
        auto &o = out[std::to_string(ps.port)];
        o = {{"datagrams", ps.datagrams}, {"bytes", ps.bytes}};
        if (stamped) {
            auto &v = ps.owd_us;
            std::sort(v.begin(), v.end());
            auto q = [&](double p) {
                return v.empty() ? 0.0 : v[size_t(p * double(v.size() - 1))];
            };
            double sum = 0;
            for (double x : v) sum += x;
            // One-way delays in us, rounded to 0.1 us (the receive stamp's worth).
            auto us = [](double x) { return std::round(x * 10) / 10; };
            o["reordered"] = ps.reordered;
            o["lost"] = ps.any ? ps.max_seq + 1 - std::min(ps.max_seq + 1, ps.datagrams) : 0;
            o["owd_samples"] = v.size();
            o["owd_min_us"] = us(q(0));
            o["owd_mean_us"] = us(v.empty() ? 0.0 : sum / double(v.size()));
            o["owd_p50_us"] = us(q(0.5));
            o["owd_p99_us"] = us(q(0.99));
            o["owd_max_us"] = us(q(1));
        }
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    std::string mode = argv[1];
    if (mode == "send") return do_send(argc - 2, argv + 2);
    if (mode == "sink") return do_sink(argc - 2, argv + 2);
    return usage();
}
