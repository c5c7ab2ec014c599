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
// HTTP is cpp-httplib's (Debian's libcpp-httplib-dev). One worker thread:
// scrapes are served one at a time, so two Prometheus servers cost one
// core at most, never two.
#include "cli/command.hpp"
#include "cli/show.hpp"
#include "common/text.hpp"
#include "control/control.hpp"

#include <httplib.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <thread>

namespace pspxdp::cli {

namespace {

constexpr const char *kContentType = "text/plain; version=0.0.4; charset=utf-8";

struct Listen {
    std::string host;
    int port = 0;
};

// "ADDR:PORT" or "[IPv6]:PORT".
Result<Listen> parse_listen(const std::string &text) {
    const auto bad = [&](const char *why) {
        return err("--listen " + common::quote(text) + ": " + why + " (ADDR:PORT, [ADDR6]:PORT)");
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
    return l;
}

int run(const Args &args) {
    const std::string dev = args.positional[0];
    auto listen = parse_listen(args.text("listen"));
    if (!listen) return fail_input("exporter: " + listen.error());
    const PromOptions prom = prom_options(args);
    // Refused at once when DEV is not attached (or its pins are not
    // readable): a mistyped DEV is not a server of 503s.
    if (auto d = control::open_device(&dev, control::Access::Read); !d) return fail(d);

    httplib::Server svr;
    svr.new_task_queue = [] { return new httplib::ThreadPool(1); };
    svr.Get("/metrics", [&](const httplib::Request &, httplib::Response &res) {
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
    if (!svr.bind_to_port(listen->host.c_str(), listen->port))
        return fail("exporter: cannot listen on " + args.text("listen") + ": " +
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
    "SIGTERM. A scrape while DEV is not attached answers 503 with the reason.",
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
