// pspxdp run [DEV] --class X [--rate R] -- COMMAND...: COMMAND in a cgroup
// of its own whose traffic goes to class X (docs/design.md §1.3.1), as
// trickle or systemd-run -p do; everything it made goes when COMMAND exits.
#include "cli/command.hpp"
#include "common/cgroup.hpp"
#include "control/control.hpp"
#include "core/quote.hpp"
#include "core/units.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pspxdp::cli {

namespace {

volatile sig_atomic_t g_child = 0;

void forward(int sig) {
    if (g_child > 0) kill(pid_t(g_child), sig);
}

// Removes what a run made: its filter, the class it created, its cgroup
// and record. Under DEV's lock (dev open for changes), or without a device
// when DEV was detached meanwhile (detach removed the rest).
Result<void> undo_run(control::Device *dev, const common::Cgroup2Mount &m, const std::string &name,
                      const common::RunRecord &r) {
    std::string notes;
    if (dev) {
        control::FilterSelect sel;
        sel.spec.cgroup = control::CgroupMatch{r.cgroup, 0, 0};
        sel.spec.pref = r.pref;
        sel.has_fields = sel.has_pref = true;
        if (auto d = dev->filter_del(sel); !d && d.exit_code() != 2) notes += d.error();
        // The class it created, if still there (a class other filters took
        // up meanwhile stays, named in the warning).
        auto classes = dev->classes();
        bool there = false;
        if (classes)
            for (const auto &c : *classes) there |= c.configured && c.classid == r.class_created;
        if (there)
            if (auto c = dev->class_del(r.class_created); !c)
                notes += (notes.empty() ? "" : "; ") + c.error();
    }
    if (auto e = common::remove_run(m, name, r); !e)
        notes += (notes.empty() ? "" : "; ") + e.error();
    if (!notes.empty()) return err(notes);
    return {};
}

// Stale runs of DEV (their pspxdp run is gone: killed -9), swept.
void sweep(control::Device &dev, const common::Cgroup2Mount &m) {
    for (const auto &r : common::list_runs(m, dev.name()))
        if (!r.owner_alive())
            if (auto e = undo_run(&dev, m, dev.name(), r); !e)
                warn("sweeping the stale run " + r.name + ": " + e.error());
}

int run(const Args &args) {
    if (!args.dashdash)
        return fail_input("run: give the command after \"--\": pspxdp run [DEV] --class X -- "
                          "COMMAND...");
    const size_t ndev = *args.dashdash;
    if (ndev > 1) return fail_input("run: unexpected " + quote(args.positional[1]) + " before --");
    const std::vector<std::string> command(args.positional.begin() + long(ndev),
                                           args.positional.end());
    if (command.empty()) return fail_input("run: no command after \"--\"");
    if (!args.has("class"))
        return fail_input("run: --class X is needed (the class COMMAND's traffic goes to)");
    const ClassId cls = args.classid("class");
    if (cls.minor == 0) return fail_input("run: --class: minor 0 is not a class");
    auto mount = common::cgroup2_mount();
    if (!mount) return fail(mount.failure().message, mount.exit_code());

    common::RunRecord rec;
    std::string dev_name;
    {
        auto dev =
            control::open_device(ndev ? &args.positional[0] : nullptr, control::Access::Change);
        if (!dev) return fail(dev);
        dev_name = dev->name();
        sweep(dev.value(), *mount);
        auto classes = dev->classes();
        if (!classes) return fail(classes);
        const control::ClassInfo *have = nullptr;
        for (const auto &c : *classes)
            if (c.configured && c.classid == cls.raw()) have = &c;
        if (have && args.has("rate"))
            return fail_input("run: class " + format_classid(cls) + " exists (" +
                              (have->config.kind == PSPXDP_CLASS_PACED
                                   ? format_rate(have->config.rate_bps)
                                   : std::string("normal")) +
                              "): leave out --rate, or name a new class");
        if (!have && !args.has("rate"))
            return fail_input("run: no class " + format_classid(cls) + " on " + dev_name +
                              ": create it (pspxdp class add " + dev_name + " " +
                              format_classid(cls) + " RATE) or give --rate RATE");
        control::ClassSpec spec;
        if (!have) {
            spec.classid = cls.raw();
            spec.kind = PSPXDP_CLASS_PACED;
            spec.rate_bps = args.number("rate");
        }
        const uint32_t pref = uint32_t(args.number("pref"));
        auto r = common::create_run(*mount, dev_name, pref, have ? 0 : cls.raw());
        if (!r) return fail("run: " + r.error());
        rec = *r;
        auto undo = [&](const Error &e) {
            (void)undo_run(&dev.value(), *mount, dev_name, rec);
            return fail("run: " + e.message, e.exit_code);
        };
        if (!have)
            if (auto c = dev.value().class_put(control::Device::Put::Add, spec); !c)
                return undo(c.failure());
        control::FilterSpec f;
        f.pref = pref;
        f.cgroup = control::CgroupMatch{rec.cgroup, 0, 0};
        f.classid = cls;
        if (auto a = dev.value().filter_add(f); !a) return undo(a.failure());
    } // DEV's lock goes: COMMAND may run for long

    // SIGINT, SIGTERM, SIGHUP, SIGQUIT go to COMMAND; we wait for it.
    sigset_t block, old;
    sigemptyset(&block);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&block, s);
    sigprocmask(SIG_BLOCK, &block, &old);
    const std::string procs = mount->dir + rec.cgroup + "/cgroup.procs";
    std::fflush(nullptr);
    const pid_t child = fork();
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, nullptr);
        const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) {
            std::fprintf(stderr, "pspxdp: run: joining the cgroup %s: %s\n", procs.c_str(),
                         std::strerror(errno));
            _exit(126);
        }
        close(fd);
        std::vector<char *> argv;
        for (const auto &w : command) argv.push_back(const_cast<char *>(w.c_str()));
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        const int e = errno;
        std::fprintf(stderr, "pspxdp: run: %s: %s\n", command[0].c_str(), std::strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    int status = 0;
    if (child < 0) {
        status = -1;
    } else {
        g_child = child;
        struct sigaction sa {};
        sa.sa_handler = forward;
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaction(s, &sa, nullptr);
        sigprocmask(SIG_SETMASK, &old, nullptr);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
    }
    const int fork_errno = errno;

    {
        // DEV detached meanwhile: detach removed the filter, class and cgroup.
        auto dev = control::Device::open(dev_name, control::Access::Change);
        if (auto u = undo_run(dev ? &dev.value() : nullptr, *mount, dev_name, rec); !u)
            warn("run: cleaning up: " + u.error());
    }
    if (child < 0) return fail("run: fork: " + std::string(std::strerror(fork_errno)));
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

} // namespace

const Command kRun = {
    "run",
    "[DEV] --class X [--rate RATE] -- COMMAND [ARG...]",
    "run COMMAND with its traffic paced in class X (a cgroup of its own)",
    "Makes a cgroup v2 for COMMAND (<cgroup2 mount>/pspxdp/DEV/run-PID-START, the\n"
    "mount found in /proc/self/mountinfo), adds the filter \"pref N cgroup PATH\n"
    "classid X\", runs COMMAND in that cgroup and, when it exits, removes the filter\n"
    "and the cgroup; the exit status is COMMAND's (128+N when signal N killed it;\n"
    "127: COMMAND not found). What COMMAND and its children send goes to class X\n"
    "(a filter with a lower pref, or SO_PRIORITY naming a class, still wins). X must\n"
    "exist, or --rate creates it as a paced class and it goes with the run.\n"
    "SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed to COMMAND. A run killed -9\n"
    "leaves its cgroup, filter and class: the next pspxdp run on DEV removes those\n"
    "of runs whose process is gone (records under /run/pspxdp/DEV.runs/ name\n"
    "them), and detach removes every run's (processes still in a run's cgroup go\n"
    "back to the cgroup pspxdp run was in). The cgroupfs is used also where systemd\n"
    "runs (no transient scope). Refused: no cgroup2 mounted, DEV not attached, no\n"
    "command. Needs the rights of filter add and of writing the cgroup2 file system.",
    {
        opt(OptType::ClassId, "class", 'c', "CLASSID", "the class COMMAND's traffic goes to"),
        opt(OptType::Rate, "rate", 'r', "RATE",
            "create class X paced at RATE for the run (removed after it)"),
        opt(OptType::Integer, "pref", 'p', "N", "the pref of the run's filter")
            .by_default(1)
            .within(PSPXDP_FILTER_PREF_MIN, PSPXDP_FILTER_PREF_MAX),
    },
    0,
    4096,
    run,
};

} // namespace pspxdp::cli
