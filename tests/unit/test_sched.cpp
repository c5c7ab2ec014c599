// The daemon on a busy host (docs/design.md §4.4): --sched and --cpu as attach and the
// daemon take them, and the wire time lost by running late as status and
// the log report it (LostWire).
#include <catch2/catch.hpp>

#include "daemon/daemon.hpp"
#include "daemon/lost_wire.hpp"

#include <algorithm>
#include <string>
#include <vector>

using namespace pspxdp::daemon;

TEST_CASE("--sched: auto (deadline first) by default, handed to the daemon; --cpu only with "
          "fifo or normal",
          "[cli][sched]") {
    DaemonConfig cfg;
    CHECK(cfg.sched == SchedPolicy::Auto);
    CHECK(kAutoSched == SchedPolicy::Deadline);
    auto args = to_args(cfg);
    auto it = std::find(args.begin(), args.end(), "--sched");
    REQUIRE(it != args.end());
    REQUIRE(it + 1 != args.end());
    CHECK(it[1] == "auto");
    CHECK(std::find(args.begin(), args.end(), "--cpu") == args.end());

    for (SchedPolicy p : {SchedPolicy::Deadline, SchedPolicy::Auto}) {
        auto r = set_sched_options(cfg, p, 1);
        REQUIRE(!r);
        CHECK(r.error().find(std::string("--cpu 1 with --sched ") + sched_policy_name(p)) == 0);
        CHECK(cfg.cpu == -1); // nothing changed
        CHECK(cfg.sched == SchedPolicy::Auto);
    }

    REQUIRE(set_sched_options(cfg, SchedPolicy::Fifo, 1));
    args = to_args(cfg);
    it = std::find(args.begin(), args.end(), "--sched");
    CHECK(it[1] == "fifo");
    it = std::find(args.begin(), args.end(), "--cpu");
    REQUIRE(it != args.end());
    CHECK(it[1] == "1");
    REQUIRE(set_sched_options(cfg, SchedPolicy::Normal, -1));
    CHECK(std::string(sched_policy_name(cfg.sched)) == "normal");
}

TEST_CASE("the scheduling in force: this process's, as the kernel has it; in words",
          "[daemon][sched]") {
    auto f = sched_in_force(0);
    REQUIRE(f);
    CHECK(f->policy != SchedPolicy::Auto);
    SchedInForce dl{SchedPolicy::Deadline, 0, 150'000, 500'000, true};
    CHECK(dl.text() ==
          "deadline (SCHED_DEADLINE): 150 us of every 500 us reserved, reclaiming idle CPU time");
    CHECK(SchedInForce{SchedPolicy::Fifo, 10, 0, 0, false}.text() ==
          "fifo (SCHED_FIFO priority 10)");
    CHECK(SchedInForce{}.text().rfind("normal (SCHED_OTHER)", 0) == 0);
    CHECK(sched_obstacle(SchedPolicy::Normal).empty()); // nothing is needed for it
    CHECK(!sched_in_force(-1));                         // no such process
}

TEST_CASE("lost wire time: the share of each second, a log line at most once a minute",
          "[daemon][sched]") {
    constexpr uint64_t s = 1'000'000'000;
    std::vector<std::string> lines;
    auto log = [&](const std::string &l) { lines.push_back(l); };
    LostWire w;
    w.start(100 * s, 5'000'000); // a restarted daemon's counter: not reported again

    CHECK(w.update(101 * s, 5'000'000, log) == 0); // idle: nothing lost, nothing logged
    CHECK(lines.empty());

    // 10 ms of a second lost: 1 %, logged at once (the first line).
    CHECK(w.update(102 * s, 15'000'000, log) == 10'000);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("10.000 ms of wire time lost in the last 2.0 s") != std::string::npos);

    // Lost again within the minute: counted, not logged.
    for (uint64_t t = 103; t < 162; ++t)
        CHECK(w.update(t * s, 15'000'000 + (t - 102) * 1000, log) == 1);
    CHECK(lines.size() == 1);
    // A minute after the last line: the loss since it, in one line.
    CHECK(w.update(162 * s, 16'000'000, log) == 941);
    REQUIRE(lines.size() == 2);
    CHECK(lines[1].find("1.000 ms of wire time lost in the last 60.0 s") != std::string::npos);
    // Nothing lost since: no line, however long.
    CHECK(w.update(300 * s, 16'000'000, log) == 0);
    CHECK(lines.size() == 2);

    // A stall longer than the interval is at most all of it.
    CHECK(w.update(301 * s, 16'000'000 + 3 * s, log) == 1'000'000);
}

TEST_CASE("--burst: not given, the default with its floor and no --burst for the daemon; "
          "given, as it is",
          "[cli][burst]") {
    DaemonConfig cfg;
    CHECK(cfg.burst_floor_ns == pspxdp::kDefaultBurstFloorNs);
    auto args = to_args(cfg);
    CHECK(std::find(args.begin(), args.end(), "--burst") == args.end());
    cfg.burst_floor_ns = 0; // --burst given
    args = to_args(cfg);
    auto it = std::find(args.begin(), args.end(), "--burst");
    REQUIRE(it != args.end());
    CHECK(it[1] == "3mtu");
}

TEST_CASE("--reclaim: only where the daemon can be a deadline task", "[cli][sched]") {
    DaemonConfig cfg;
    CHECK(!cfg.reclaim);
    REQUIRE(set_sched_options(cfg, SchedPolicy::Auto, -1, true));
    CHECK(cfg.reclaim);
    auto args = to_args(cfg);
    CHECK(std::find(args.begin(), args.end(), "--reclaim") != args.end());
    for (SchedPolicy p : {SchedPolicy::Normal, SchedPolicy::Fifo}) {
        DaemonConfig fresh;
        auto r = set_sched_options(fresh, p, -1, true);
        REQUIRE(!r);
        CHECK(r.error() == std::string("--reclaim with --sched ") + sched_policy_name(p) +
                               ": only a deadline task reclaims");
        CHECK(!fresh.reclaim);
    }
}
