// docs/design.md §11.4: the watchdog child and what it shares with the agent.
#include "agent/watchdog.hpp"

#include "agent/codec.hpp"
#include "common/clock.hpp"
#include "core/units.hpp"
#include "etcd/etcd.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace pspxdp::agent {

uint64_t real_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return uint64_t(ts.tv_sec) * common::kNsPerSec + uint64_t(ts.tv_nsec);
}

void log_line(const std::string &text) {
    std::fprintf(stderr, "%.3f %s\n", double(real_ns()) / 1e9, text.c_str());
    std::fflush(stderr);
}

Result<std::vector<control::OwnRate>>
set_group_rate(control::Device &d, uint32_t classid, uint64_t rate_bps,
               const std::function<Result<void>()> &before_write,
               const std::vector<control::OwnRate> &own) {
    auto cfg = d.config();
    if (!cfg) return cfg.failure();
    std::vector<control::OwnRate> was;
    const control::ClassSpec *now = nullptr;
    for (uint32_t id : control::subtree_ids(cfg->classes, classid))
        for (const auto &c : cfg->classes)
            if (c.classid == id) {
                if (!now) now = &c;
                was.push_back({c.classid, c.rate_bps, c.ceil_bps});
            }
    if (!now)
        return refuse("class " + format_classid(ClassId::from_raw(classid)) +
                      " does not exist on " + d.name());
    auto fit = control::fit_subtree(
        control::with_own_rates(cfg->classes, own), classid, std::max(rate_bps, kHoldRateBps),
        cfg->line_rate_bps.value_or(0), now->ceil_bps ? now->ceil_bps : now->rate_bps);
    // A flat class, only its rate changed: one lookup, one update.
    if (fit.size() == 1 && fit[0].ceil_bps == now->ceil_bps) {
        auto r = d.set_rate(classid, fit[0].rate_bps, before_write);
        if (!r) return r.failure();
        return was;
    }
    if (auto r = d.class_put_many(control::Device::Put::Change, fit, before_write); !r)
        return r.failure();
    return was;
}

Result<void> restore_own_rates(control::Device &d, const std::vector<control::OwnRate> &own) {
    auto cfg = d.config();
    if (!cfg) return cfg.failure();
    const auto all = control::with_own_rates(cfg->classes, own);
    std::vector<control::ClassSpec> back;
    for (const auto &o : own)
        for (const auto &c : all)
            if (c.classid == o.classid) back.push_back(c);
    return d.class_put_many(control::Device::Put::Change, back);
}

void RateLog::write(uint64_t rate_bps) const {
    std::string line = rate_log_line(real_ns(), rate_bps);
    if (fd >= 0 && ::write(fd, line.data(), line.size()) < 0) {
    }
}

[[noreturn]] void watchdog(const std::string &dev, uint32_t classid, Shared *sh, int pipe_rd,
                           const RateLog &log, pid_t agent,
                           const std::vector<std::string> &endpoints) {
    constexpr int kRetryMs = 250;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);
    int sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC);
    // The agent's death as a signal too (the pipe says the same unless
    // something inherited its write end); checked after, as it may have
    // died before the prctl.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    bool agent_gone = getppid() != agent, told = false;
    uint64_t retry_at = 0;
    // What the class may be at now: the floor (fallback) past the deadline,
    // 0 past the orphan time; with the agent gone, 0 at once unless floors
    // are never released (nobody will renew; R7). UINT64_MAX: no limit.
    auto limit = [sh](uint64_t t, bool ending) -> uint64_t {
        if (sh->released) return UINT64_MAX;
        uint64_t orphan = sh->orphan_at_ns.load();
        if (ending) return orphan != UINT64_MAX ? 0 : sh->fallback_bps.load();
        if (t >= orphan) return 0;
        if (t >= sh->safe_until_ns.load()) return sh->fallback_bps.load();
        return UINT64_MAX;
    };
    // The agent gone and the class at its fallback (at most its floor): no
    // rate rests on its live record any more (§11.4, Lemma 1), so its lease
    // can go now; the others take its share in one epoch, not at the
    // lease's expiry up to a TTL later. One try per endpoint, 500 ms each.
    auto exit_revoking = [&](bool at_fallback) {
        // Told to stop by the agent's death signal before its pipe showed
        // it: by then the kernel has reparented this process.
        if (getppid() != agent) agent_gone = true;
        uint64_t lease = sh->lease.load();
        if (agent_gone && at_fallback && lease != 0 && !sh->released && !endpoints.empty()) {
            etcd::Client c(endpoints, 500);
            auto r = c.revoke(int64_t(lease));
            log_line("watchdog: the agent is gone: lease " + std::to_string(lease) +
                     (r ? " revoked" : " not revoked: " + r.error()));
        } else if (agent_gone && lease != 0 && !sh->released) {
            log_line("watchdog: the agent is gone: lease " + std::to_string(lease) +
                     " left to expire (the class is not at its fallback)");
        }
        _exit(0);
    };
    for (;;) {
        uint64_t now = common::boot_ns();
        bool ending = agent_gone || told;
        uint64_t applied = sh->applied_bps.load();
        bool lower = applied > limit(now, ending);
        if (ending && !lower) exit_revoking(true);
        if (lower && now >= retry_at) {
            auto d = control::Device::open(dev, control::Access::Change);
            // Under the lock: the agent may have renewed or lowered meanwhile.
            uint64_t to = limit(common::boot_ns(), ending);
            bool at_fallback = d && sh->applied_bps.load() <= to;
            if (d && sh->applied_bps.load() > to) {
                if (auto r = set_group_rate(d.value(), classid, to); r) {
                    at_fallback = true;
                    sh->applied_bps = to;
                    sh->rate_changes++;
                    sh->watchdog_lowerings++;
                    log.write(to);
                    log_line(
                        std::string("watchdog: ") +
                        (ending ? "the agent is gone" : "lease deadline passed without the agent") +
                        ": class at " + format_rate(to));
                } else {
                    log_line("watchdog: " + r.error());
                    retry_at = common::boot_ns() + kRetryMs * 1'000'000ull;
                }
            } else if (!d) {
                log_line("watchdog: " + d.error());
                retry_at = common::boot_ns() + kRetryMs * 1'000'000ull;
            }
            // Nothing more it can do: the class is at the limit, or DEV
            // is gone (and its pacer with it).
            if (ending) exit_revoking(at_fallback);
            continue;
        }
        // Woken by the deadline, the orphan time (or the retry), else once a
        // second.
        uint64_t next = now + 1'000'000'000;
        if (lower) {
            next = retry_at;
        } else {
            if (applied > sh->fallback_bps.load()) next = std::min(next, sh->safe_until_ns.load());
            if (applied > 0) next = std::min(next, sh->orphan_at_ns.load());
        }
        int timeout_ms =
            next > now ? int(std::min<uint64_t>(1000, (next - now) / 1'000'000 + 1)) : kRetryMs;
        pollfd p[2] = {{pipe_rd, POLLIN, 0}, {sig_fd, POLLIN, 0}};
        int n = poll(p, sig_fd >= 0 ? 2 : 1, timeout_ms);
        if (n > 0 && p[0].revents) {
            char buf[64];
            if (read(pipe_rd, buf, sizeof buf) <= 0) agent_gone = true;
        }
        if (n > 0 && sig_fd >= 0 && p[1].revents) {
            // A SIGTERM "from" the agent is the kernel's parent-death
            // signal (the agent never signals its watchdog): sent when the
            // agent's thread that forked this one exits, which under kill
            // -9 may come before the pipe's end closes (with the last
            // thread) and while getppid() still names the agent (another
            // of its threads is the parent meanwhile).
            signalfd_siginfo si{};
            if (read(sig_fd, &si, sizeof si) > 0) {
                if (pid_t(si.ssi_pid) == agent)
                    agent_gone = true;
                else
                    told = true;
            }
        }
        if (getppid() != agent) agent_gone = true;
    }
}

} // namespace pspxdp::agent
