// psp_delay: a fixed one-way delay line for the lab (this kernel has no
// netem). It forwards the L2 frames arriving on one interface out of
// another, each exactly DELAY after the kernel received it, in arrival order.
//
//   psp_delay --in IF --out IF --dst-mac MAC --delay-ms D
//             [--buffer BYTES] [--seconds S] [--rt-priority N]
//
// Frames are read with an AF_PACKET socket on IN (kernel receive timestamps,
// SO_TIMESTAMPNS), queued in one fixed buffer (lab/delay_queue.hpp) and
// written to OUT's AF_PACKET socket when due, destination MAC rewritten to
// MAC and source MAC to OUT's. A timerfd armed on CLOCK_REALTIME (the clock
// of the receive timestamps, no conversion) wakes it for the next due frame;
// timer slack is set to 1 ns, the kernel's default 50 us would be 0.25 % of a
// 20 ms delay by itself. --rt-priority N runs it SCHED_FIFO (memory locked):
// on a machine busy with other work a normal process wakes milliseconds late
// (measured: mean 2.3 ms, max 52 ms at load 6 on 2 cores), a FIFO one does
// not; it sleeps between frames, so it takes no CPU from anyone else.
//
// Bounded: memory is the buffer (default 8 MiB) plus fixed batches; time is
// --seconds (default 600, at most 3600); a SIGINT/SIGTERM stops it early.
// Every frame not forwarded is counted: buffer full, too big, send errors,
// the socket's own drops (PACKET_STATISTICS) and what was queued at exit.
// Statistics go to stdout as one JSON object when it stops.
//
// Only for the lab: run it inside a network namespace between the lab's own
// interfaces.
#include "delay_queue.hpp"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

int usage() {
    std::fprintf(stderr, "usage: psp_delay --in IF --out IF --dst-mac MAC --delay-ms D "
                         "[--buffer BYTES] [--seconds S] [--rt-priority N]\n");
    return 2;
}

bool parse_mac(const char *s, uint8_t mac[6]) {
    unsigned v[6];
    char tail;
    if (std::sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        return false;
    for (int i = 0; i < 6; ++i) {
        if (v[i] > 255) return false;
        mac[i] = uint8_t(v[i]);
    }
    return true;
}

bool parse_double(const char *s, double lo, double hi, double &out) {
    char *end = nullptr;
    out = std::strtod(s, &end);
    return *s && !*end && out >= lo && out <= hi;
}

int packet_socket(const char *ifname, int &ifindex) {
    ifindex = int(if_nametoindex(ifname));
    if (!ifindex) {
        std::fprintf(stderr, "psp_delay: no interface \"%s\"\n", ifname);
        return -1;
    }
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (fd < 0) {
        std::fprintf(stderr, "psp_delay: AF_PACKET socket: %s\n", std::strerror(errno));
        return -1;
    }
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = ifindex;
    if (bind(fd, reinterpret_cast<sockaddr *>(&sll), sizeof sll) < 0) {
        std::fprintf(stderr, "psp_delay: bind to %s: %s\n", ifname, std::strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

// Lateness histogram: 1 us buckets up to 10 ms, then one overflow bucket.
// Fixed size: memory does not grow with the run.
struct Lateness {
    static constexpr size_t kBuckets = 10'000;
    std::array<uint64_t, kBuckets + 1> hist{};
    uint64_t n = 0, max_ns = 0;
    double sum_ns = 0;
    void add(uint64_t ns) {
        ++n;
        sum_ns += double(ns);
        max_ns = std::max(max_ns, ns);
        ++hist[std::min<uint64_t>(ns / 1000, kBuckets)];
    }
    // Upper edge (us) of the bucket holding quantile q.
    double quantile_us(double q) const {
        if (!n) return 0;
        uint64_t want = uint64_t(q * double(n - 1)) + 1, seen = 0;
        for (size_t i = 0; i <= kBuckets; ++i)
            if ((seen += hist[i]) >= want) return double(i + 1);
        return double(kBuckets + 1);
    }
};

} // namespace

int main(int argc, char **argv) {
    const char *in_if = nullptr, *out_if = nullptr;
    uint8_t dst_mac[6];
    bool have_mac = false;
    double delay_ms = -1, seconds = 600, buffer = 8 << 20, rt_priority = 0;
    for (int i = 1; i < argc; ++i) {
        std::string o = argv[i];
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        if (o == "--in") {
            in_if = v;
        } else if (o == "--out") {
            out_if = v;
        } else if (o == "--dst-mac") {
            if (!parse_mac(v, dst_mac)) {
                std::fprintf(stderr, "psp_delay: --dst-mac \"%s\": expected aa:bb:cc:dd:ee:ff\n",
                             v);
                return 2;
            }
            have_mac = true;
        } else if (o == "--delay-ms") {
            if (!parse_double(v, 0, 1000, delay_ms)) {
                std::fprintf(stderr, "psp_delay: --delay-ms \"%s\": expected 0..1000\n", v);
                return 2;
            }
        } else if (o == "--buffer") {
            if (!parse_double(v, 4096, 1 << 30, buffer)) {
                std::fprintf(stderr,
                             "psp_delay: --buffer \"%s\": expected 4096..1073741824 bytes\n", v);
                return 2;
            }
        } else if (o == "--seconds") {
            if (!parse_double(v, 0.001, 3600, seconds)) {
                std::fprintf(stderr, "psp_delay: --seconds \"%s\": expected (0, 3600]\n", v);
                return 2;
            }
        } else if (o == "--rt-priority") {
            if (!parse_double(v, 0, 99, rt_priority) || rt_priority != double(int(rt_priority))) {
                std::fprintf(stderr,
                             "psp_delay: --rt-priority \"%s\": expected 0..99 (0: normal)\n", v);
                return 2;
            }
        } else {
            std::fprintf(stderr, "psp_delay: unknown option \"%s\"\n", o.c_str());
            return usage();
        }
    }
    if (!in_if || !out_if || !have_mac || delay_ms < 0) return usage();

    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (rt_priority > 0) {
        sched_param sp{};
        sp.sched_priority = int(rt_priority);
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0 || mlockall(MCL_CURRENT | MCL_FUTURE) < 0) {
            std::fprintf(stderr, "psp_delay: --rt-priority %d: %s\n", sp.sched_priority,
                         std::strerror(errno));
            return 1;
        }
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    int in_ifindex = 0, out_ifindex = 0;
    int in_fd = packet_socket(in_if, in_ifindex);
    int out_fd = packet_socket(out_if, out_ifindex);
    if (in_fd < 0 || out_fd < 0) return 1;
    // Frames this host sends on IN are not ours to forward; none are
    // expected (no address there), but a frame must never loop.
    int one = 1;
    setsockopt(in_fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    setsockopt(in_fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    int rcvbuf = 4 << 20;
    setsockopt(in_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", out_if);
    if (ioctl(out_fd, SIOCGIFHWADDR, &ifr) < 0) {
        std::fprintf(stderr, "psp_delay: MAC of %s: %s\n", out_if, std::strerror(errno));
        return 1;
    }
    uint8_t src_mac[6];
    std::memcpy(src_mac, ifr.ifr_hwaddr.sa_data, 6);
    int tfd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
    if (tfd < 0) {
        std::fprintf(stderr, "psp_delay: timerfd: %s\n", std::strerror(errno));
        return 1;
    }

    constexpr size_t kMaxFrame = 9216 + 18; // jumbo + VLAN header: anything a lab veth carries
    constexpr unsigned kBatch = 64;
    pspxdp::lab::DelayQueue q(size_t(buffer), kMaxFrame);
    static uint8_t bufs[kBatch][kMaxFrame + 1];
    static uint8_t ctrl[kBatch][CMSG_SPACE(sizeof(timespec))];
    iovec iov[kBatch];
    mmsghdr msgs[kBatch];
    std::vector<uint8_t> out(kMaxFrame);

    const uint64_t delay_ns = uint64_t(delay_ms * 1e6);
    uint64_t received = 0, forwarded = 0, drop_full = 0, drop_too_big = 0, send_errors = 0,
             no_timestamp = 0, max_frames = 0, max_bytes = 0, armed_for = 0;
    Lateness late;
    const uint64_t start = realtime_ns();
    const uint64_t end = start + uint64_t(seconds * 1e9);

    while (!g_stop) {
        uint64_t now = realtime_ns();
        if (now >= end) break;
        // Everything due goes out, oldest first.
        while (!q.empty() && q.front().due_ns <= now) {
            auto f = q.front();
            std::memcpy(out.data(), f.bytes.data(), f.bytes.size());
            if (f.bytes.size() >= 12) {
                std::memcpy(out.data(), dst_mac, 6);
                std::memcpy(out.data() + 6, src_mac, 6);
            }
            late.add(now - f.due_ns);
            if (send(out_fd, out.data(), f.bytes.size(), 0) < 0)
                ++send_errors;
            else
                ++forwarded;
            q.pop();
            now = realtime_ns();
        }
        if (!q.empty() && q.front().due_ns != armed_for) {
            armed_for = q.front().due_ns;
            itimerspec its{};
            its.it_value.tv_sec = time_t(armed_for / 1'000'000'000ull);
            its.it_value.tv_nsec = long(armed_for % 1'000'000'000ull);
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, nullptr);
        }
        pollfd pfd[2] = {{in_fd, POLLIN, 0}, {tfd, POLLIN, 0}};
        // The run's end bounds the wait; 100 ms keeps signals prompt.
        int timeout_ms = int(std::min<uint64_t>((end - now) / 1'000'000 + 1, 100));
        if (poll(pfd, 2, timeout_ms) < 0 && errno != EINTR) break;
        if (pfd[1].revents & POLLIN) {
            uint64_t expirations;
            (void)!read(tfd, &expirations, sizeof expirations);
        }
        if (!(pfd[0].revents & POLLIN)) continue;
        for (unsigned i = 0; i < kBatch; ++i) {
            iov[i] = {bufs[i], sizeof bufs[i]};
            msgs[i].msg_hdr = msghdr{};
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = ctrl[i];
            msgs[i].msg_hdr.msg_controllen = sizeof ctrl[i];
        }
        int n = recvmmsg(in_fd, msgs, kBatch, MSG_DONTWAIT | MSG_TRUNC, nullptr);
        const uint64_t fallback = realtime_ns();
        for (int i = 0; i < n; ++i) {
            ++received;
            size_t len = msgs[i].msg_len;
            if (len > kMaxFrame || (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
                ++drop_too_big;
                continue;
            }
            // The kernel's receive time: the delay counts from there, not
            // from when this loop got round to reading the frame.
            uint64_t rx = 0;
            for (cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c;
                 c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                    timespec ts;
                    std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    rx = uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
                }
            if (!rx) {
                ++no_timestamp;
                rx = fallback;
            }
            if (!q.push(rx + delay_ns, std::span<const uint8_t>(bufs[i], len))) {
                ++drop_full;
                continue;
            }
            max_frames = std::max<uint64_t>(max_frames, q.frames());
            max_bytes = std::max<uint64_t>(max_bytes, q.used_bytes());
        }
    }

    tpacket_stats ps{};
    socklen_t pl = sizeof ps;
    getsockopt(in_fd, SOL_PACKET, PACKET_STATISTICS, &ps, &pl);
    std::printf("{\"delay_ns\":%llu,\"buffer_bytes\":%zu,\"received\":%llu,\"forwarded\":%llu,"
                "\"drop_buffer_full\":%llu,\"drop_too_big\":%llu,\"send_errors\":%llu,"
                "\"drop_socket\":%u,\"queued_at_exit\":%zu,\"no_timestamp\":%llu,"
                "\"max_queue_frames\":%llu,\"max_queue_bytes\":%llu,"
                "\"late_mean_us\":%.3f,\"late_p50_us\":%.0f,\"late_p99_us\":%.0f,"
                "\"late_p999_us\":%.0f,\"late_max_us\":%.3f,\"seconds\":%.3f}\n",
                (unsigned long long)delay_ns, q.capacity_bytes(), (unsigned long long)received,
                (unsigned long long)forwarded, (unsigned long long)drop_full,
                (unsigned long long)drop_too_big, (unsigned long long)send_errors, ps.tp_drops,
                q.frames(), (unsigned long long)no_timestamp, (unsigned long long)max_frames,
                (unsigned long long)max_bytes, late.n ? late.sum_ns / double(late.n) / 1e3 : 0.0,
                late.quantile_us(0.5), late.quantile_us(0.99), late.quantile_us(0.999),
                double(late.max_ns) / 1e3, double(realtime_ns() - start) / 1e9);
    return 0;
}
