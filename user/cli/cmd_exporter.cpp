// pspxdp exporter DEV --listen ADDR:PORT: serves DEV's counters over HTTP
// for Prometheus, /metrics in the text exposition format: the same text as
// `stats --format prometheus` (format_prometheus), read from the pins at
// every scrape as stats reads them.
//
// A process of its own, not an endpoint in the daemon (docs/design.md,
// Metrics): a scrape of 100,000 classes takes tens of milliseconds of reading
// and formatting, which the daemon's loop must not spend (it paces to the
// microsecond); the exporter needs only read access to the pins (no
// capabilities); and it keeps answering when the daemon is dead, which is
// exactly when pspxdp_pacer_alive 0 must reach the alert.
//
// HTTP is cpp-httplib's (Debian's libcpp-httplib-dev). Connections are
// served concurrently, each on a thread of a bounded pool (design §1.11):
// a client that sends nothing, half a request, a byte at a time, or holds a
// keep-alive connection open costs one thread for at most kRequestTimeoutMs
// per request, never another client's scrape. Reading and formatting the
// pins is one scrape at a time (a mutex), so concurrent scrapers still cost
// one core at most; only the slow network parts run side by side.
#include "cli/command.hpp"
#include "cli/show.hpp"
#include "common/clock.hpp"
#include "common/text.hpp"
#include "control/control.hpp"

#include <httplib.h>

#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <set>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace pspxdp::cli {

namespace {

constexpr const char *kContentType = "text/plain; version=0.0.4; charset=utf-8";

// Connections served at once; one more is answered 503 and closed at once.
constexpr size_t kMaxConnections = 32;
// A request must arrive whole within this of the connection's start or of
// the previous answer (the keep-alive idle time): well under any scrape
// interval, far above what a GET of a few hundred bytes needs.
constexpr uint64_t kRequestTimeoutMs = 3000;
// An answer whose reader takes nothing for this long is cut.
constexpr uint64_t kWriteStallMs = 5000;
constexpr size_t kMaxRequestsPerConnection = 100;

// Set on the accept thread while it closes a connection over the cap.
thread_local bool over_cap = false;

// A pool of up to `max` threads, made as needed and kept: every connection
// has a thread of its own at once (never a queue behind a slow one); one
// beyond the cap runs on the accept thread with over_cap set, which only
// closes it.
class ConnectionPool : public httplib::TaskQueue {
  public:
    explicit ConnectionPool(size_t max) : max_(max) {}
    ConnectionPool(const ConnectionPool &) = delete;
    ConnectionPool &operator=(const ConnectionPool &) = delete;

    void enqueue(std::function<void()> fn) override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (busy_ < max_) {
                ++busy_; // queued or running; never more than the threads
                jobs_.push_back(std::move(fn));
                if (threads_.size() < busy_) threads_.emplace_back([this] { work(); });
                wake_.notify_one();
                return;
            }
        }
        over_cap = true;
        fn();
        over_cap = false;
    }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto &t : threads_) t.join();
    }

  private:
    void work() {
        for (;;) {
            std::function<void()> fn;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
                if (jobs_.empty()) return; // stopping, nothing left
                fn = std::move(jobs_.front());
                jobs_.pop_front();
            }
            fn();
            std::lock_guard<std::mutex> lock(mutex_);
            --busy_;
        }
    }

    const size_t max_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    size_t busy_ = 0;
    bool stopping_ = false;
};

// "ADDR" and port of a socket's end (getpeername or getsockname).
void endpoint(int fd, bool peer, std::string &ip, int &port) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    auto *sa = reinterpret_cast<sockaddr *>(&a);
    if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        ip = host;
        port = std::atoi(serv);
    }
}

// A connection's stream for one request: reads wait no later than the
// request's deadline, writes no longer than kWriteStallMs without progress.
class DeadlineStream : public httplib::Stream {
  public:
    DeadlineStream(int fd, uint64_t deadline_ns) : fd_(fd), deadline_ns_(deadline_ns) {}

    bool is_readable() const override { return wait(POLLIN, deadline_ns_); }
    bool is_writable() const override {
        return wait(POLLOUT, common::mono_ns() + kWriteStallMs * common::kNsPerMs);
    }
    ssize_t read(char *ptr, size_t size) override {
        if (pos_ == end_) {
            if (!is_readable()) return -1;
            const ssize_t n = recv(fd_, buf_, sizeof buf_, MSG_DONTWAIT);
            if (n <= 0) return n;
            pos_ = 0;
            end_ = size_t(n);
        }
        const size_t n = std::min(size, end_ - pos_);
        std::memcpy(ptr, buf_ + pos_, n);
        pos_ += n;
        return ssize_t(n);
    }
    ssize_t write(const char *ptr, size_t size) override {
        if (!is_writable()) return -1;
        return send(fd_, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    void get_remote_ip_and_port(std::string &ip, int &port) const override {
        endpoint(fd_, true, ip, port);
    }
    void get_local_ip_and_port(std::string &ip, int &port) const override {
        endpoint(fd_, false, ip, port);
    }
    socket_t socket() const override { return fd_; }

  private:
    // fd ready for `events` (or closed, or in error) before deadline_ns.
    bool wait(short events, uint64_t deadline_ns) const {
        for (;;) {
            const uint64_t now = common::mono_ns();
            if (now >= deadline_ns) return false;
            pollfd p{fd_, events, 0};
            const int ms = int((deadline_ns - now + common::kNsPerMs - 1) / common::kNsPerMs);
            const int rc = poll(&p, 1, ms);
            if (rc > 0) return true;
            if (rc < 0 && errno != EINTR) return false;
        }
    }

    int fd_;
    uint64_t deadline_ns_;
    char buf_[4096];
    size_t pos_ = 0, end_ = 0;
};

// cpp-httplib's server with each connection under the deadlines above
// (its own loop would wait for a client's next byte for the read timeout
// after every byte) and the open ones known, so a stop ends them at once.
class Server : public httplib::Server {
  public:
    // The accept queue's length: cpp-httplib listens with 5, and connections
    // beyond those wait for a SYN-ACK retransmission (a second) before the
    // accept loop sees them. listen() again on the bound socket resizes it.
    bool set_backlog(int n) { return ::listen(svr_sock_, n) == 0; }

    // Shuts down every open connection: their threads end now, not at
    // their deadlines. After stop().
    void end_connections() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }

  private:
    bool process_and_close_socket(socket_t fd) override {
        if (over_cap) {
            static const char kBusy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                                        "Content-Length: 22\r\n\r\ntoo many connections\r\n";
            (void)!send(fd, kBusy, sizeof kBusy - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else if (track(fd, true)) {
            uint64_t deadline = common::mono_ns() + kRequestTimeoutMs * common::kNsPerMs;
            for (size_t n = 1; n <= kMaxRequestsPerConnection && svr_sock_ != INVALID_SOCKET; ++n) {
                DeadlineStream strm(fd, deadline);
                bool closed = false;
                if (!process_request(strm, n == kMaxRequestsPerConnection, closed, nullptr) ||
                    closed || common::mono_ns() >= deadline) // answered 400 for want of time
                    break;
                deadline = common::mono_ns() + kRequestTimeoutMs * common::kNsPerMs;
            }
            track(fd, false);
        }
        ::shutdown(fd, SHUT_RDWR);
        ::close(fd);
        return true;
    }

    // Adds (false once stopping) or removes fd from the open connections.
    bool track(int fd, bool add) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!add) return open_.erase(fd) > 0;
        if (svr_sock_ == INVALID_SOCKET) return false;
        open_.insert(fd);
        return true;
    }

    std::mutex mutex_;
    std::set<int> open_;
};

struct Listen {
    std::string host;
    int port = 0;
};

// "ADDR:PORT" or "[IPv6]:PORT"; ADDR a name that resolves or an address.
Result<Listen> parse_listen(const std::string &text) {
    const auto bad = [&](const std::string &why) {
        return refuse("--listen " + common::quote(text) + ": " + why +
                      " (ADDR:PORT, [ADDR6]:PORT)");
    };
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) return bad("no address and port");
    Listen l;
    l.host = text.substr(0, colon);
    if (l.host.front() == '[') {
        if (l.host.size() < 3 || l.host.back() != ']') return bad("unbalanced brackets");
        l.host = l.host.substr(1, l.host.size() - 2);
    }
    const std::string port = text.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos)
        return bad("the port is not a number");
    l.port = std::stoi(port);
    if (l.port < 1 || l.port > 65535) return bad("the port is not within 1..65535");
    // As the server will look it up (any family, TCP).
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    if (int rc = getaddrinfo(l.host.c_str(), port.c_str(), &hints, &found); rc != 0)
        return refuse("--listen " + common::quote(text) + ": the address " + common::quote(l.host) +
                      " does not resolve (" + gai_strerror(rc) + ")");
    freeaddrinfo(found);
    return l;
}

int run(const Args &args) {
    const std::string dev = args.positional[0];
    auto listen = parse_listen(args.text("listen"));
    if (!listen) return fail("exporter: " + listen.error(), listen.exit_code());
    const PromOptions prom = prom_options(args);
    // Refused at once when DEV is not attached (or its pins are not
    // readable): a mistyped DEV is not a server of 503s.
    if (auto d = control::open_device(&dev, control::Access::Read); !d) return fail(d);

    Server svr;
    svr.new_task_queue = [] { return new ConnectionPool(kMaxConnections); };
    // Not cpp-httplib's default SO_REUSEPORT, with which a second exporter
    // on the same port binds too and the kernel splits the scrapes between
    // them: SO_REUSEADDR only (a restart binds despite TIME_WAIT), so a
    // taken port is refused.
    svr.set_socket_options([](socket_t fd) {
        const int yes = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    std::mutex scrape; // one scrape reads and formats at a time
    svr.Get("/metrics", [&](const httplib::Request &, httplib::Response &res) {
        std::lock_guard<std::mutex> one(scrape);
        // Opened per scrape: a re-attach between scrapes makes new pins.
        auto d = control::open_device(&dev, control::Access::Read);
        auto s = d ? take(*d) : Result<Snapshot>(d.failure());
        if (!s) {
            // Prometheus marks the target down (up 0) and keeps this text.
            res.status = 503;
            res.set_content(s.error() + "\n", "text/plain; charset=utf-8");
            return;
        }
        res.set_content(format_prometheus(d->name(), *s, prom), kContentType);
    });
    svr.Get("/", [&](const httplib::Request &, httplib::Response &res) {
        res.set_content("pspxdp exporter for " + dev + ": /metrics\n", "text/plain");
    });
    if (!svr.bind_to_port(listen->host.c_str(), listen->port)) {
        const int e = errno;
        const std::string where = "exporter: cannot listen on " + args.text("listen") + ": ";
        if (e == EADDRINUSE)
            return fail(where + "port " + std::to_string(listen->port) +
                        " is in use (another exporter? one port per device: --listen)");
        return fail(where + common::errno_text(e));
    }
    if (!svr.set_backlog(int(2 * kMaxConnections)))
        return fail("exporter: listen on " + args.text("listen") + ": " +
                    common::errno_text(errno));

    // SIGINT/SIGTERM stop it cleanly: blocked here (the server's threads
    // inherit the mask) and taken by sigwait, outside any signal handler.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    std::thread server([&] { svr.listen_after_bind(); });
    std::printf("pspxdp: serving %s's metrics on http://%s/metrics\n", dev.c_str(),
                args.text("listen").c_str());
    std::fflush(stdout);
    int sig = 0;
    sigwait(&stop, &sig);
    svr.stop();
    svr.end_connections();
    server.join();
    return 0;
}

} // namespace

const Command kExporter = {
    "exporter",
    "DEV",
    "serve DEV's counters to Prometheus over HTTP (/metrics)",
    "Serves http://ADDR:PORT/metrics in the Prometheus text exposition format:\n"
    "the names of stats --format prometheus (one code path), read from the pins at\n"
    "every scrape. Loopback only unless --listen names another address. Per-class\n"
    "series for at most --max-classes classes (or those of --class); device-wide\n"
    "sums always. Needs read permission on the pins only; runs until SIGINT or\n"
    "SIGTERM. A scrape while DEV is not attached answers 503 with the reason.\n"
    "Connections are served side by side (up to 32; one more is answered 503); a\n"
    "request must arrive whole within 3 s of the connection or of the previous\n"
    "answer, or the connection is closed: a slow or idle client never delays\n"
    "another's scrape.\n"
    "Several devices: one exporter per device, each on a port of its own (e.g.\n"
    "eth0 on 127.0.0.1:9469, eth1 on 127.0.0.1:9470; every series carries its\n"
    "dev label). A port in use is refused (exit 1), never shared.",
    {
        opt(OptType::String, "listen", 'l', "ADDR:PORT", "where to serve /metrics")
            .by_default(std::string("127.0.0.1:9469")),
        max_classes_option(),
        prom_class_option(),
    },
    1,
    1,
    run,
};

} // namespace pspxdp::cli
