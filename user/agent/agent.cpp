// docs/design.md §11.5: `group join`'s process: the one agent per class
// (its lock), the watchdog forked, then the runner.
#include "agent/agent.hpp"

#include "agent/registry.hpp"
#include "agent/runner.hpp"
#include "agent/watchdog.hpp"
#include "common/paths.hpp"
#include "control/filter_spec.hpp"
#include "core/units.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <curl/curl.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pspxdp::agent {

namespace {

const uint8_t *addr_bytes(const sockaddr_storage &s) {
    return s.ss_family == AF_INET ? reinterpret_cast<const uint8_t *>(
                                        &reinterpret_cast<const sockaddr_in &>(s).sin_addr)
                                  : reinterpret_cast<const uint8_t *>(
                                        &reinterpret_cast<const sockaddr_in6 &>(s).sin6_addr);
}

// The interface the kernel sends to `to` by: the one holding the source
// address a connected UDP socket gets (no packet is sent).
std::string egress_dev(const sockaddr_storage &to, socklen_t len, sockaddr_storage &src) {
    int fd = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    socklen_t slen = sizeof src;
    bool ok = connect(fd, reinterpret_cast<const sockaddr *>(&to), len) == 0 &&
              getsockname(fd, reinterpret_cast<sockaddr *>(&src), &slen) == 0;
    close(fd);
    if (!ok) return "";
    std::string dev;
    ifaddrs *all = nullptr;
    if (getifaddrs(&all) != 0) return "";
    size_t n = src.ss_family == AF_INET ? 4 : 16;
    for (ifaddrs *i = all; i && dev.empty(); i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == src.ss_family &&
            std::memcmp(addr_bytes(reinterpret_cast<const sockaddr_storage &>(*i->ifa_addr)),
                        addr_bytes(src), n) == 0)
            dev = i->ifa_name;
    freeifaddrs(all);
    return dev;
}

} // namespace

Result<void> check_etcd_path(const control::Device &d, const AgentConfig &cfg) {
    auto filters = d.filters();
    if (!filters) return filters.failure();
    auto state = d.state();
    if (!state) return state.failure();
    uint32_t default_classid = pspxdp_classid_raw(state->default_classid);
    const std::string cls = format_classid(ClassId::from_raw(cfg.classid));
    // Of a tree, the group holds the whole subtree (§11.10): a filter to
    // any class below it goes through it too.
    auto specs = d.config();
    if (!specs) return specs.failure();
    const auto held = control::subtree_ids(specs->classes, cfg.classid);
    for (const std::string &url : cfg.endpoints) {
        CURLU *u = curl_url();
        char *host = nullptr, *port = nullptr;
        curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
        curl_url_get(u, CURLUPART_HOST, &host, 0);
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
        std::string h = host ? host : "", p = port ? port : "";
        curl_free(host);
        curl_free(port);
        curl_url_cleanup(u);
        if (h.size() > 2 && h.front() == '[') h = h.substr(1, h.size() - 2); // IPv6 literal
        addrinfo hints{}, *res = nullptr;
        hints.ai_socktype = SOCK_STREAM;
        if (h.empty() || getaddrinfo(h.c_str(), p.c_str(), &hints, &res) != 0) continue;
        sockaddr_storage to{}, src{};
        std::memcpy(&to, res->ai_addr, res->ai_addrlen);
        socklen_t len = res->ai_addrlen;
        freeaddrinfo(res);
        if (egress_dev(to, len, src) != cfg.dev) continue;
        int family = to.ss_family == AF_INET ? 4 : 6;
        uint16_t dport = uint16_t(std::stoul(p));
        uint32_t via = control::class_for_tcp(*filters, default_classid, family, addr_bytes(src),
                                              addr_bytes(to), dport);
        if (std::find(held.begin(), held.end(), via) != held.end())
            return refuse("etcd at " + url + " is reached through " + cfg.dev + "'s class " +
                          format_classid(ClassId::from_raw(via)) +
                          (via == cfg.classid ? "" : ", in the subtree of " + cls) +
                          ", the class the group holds at 0 while it joins: send its port to an "
                          "unpaced class first (pspxdp class set " +
                          cfg.dev + " 1:ffff normal; pspxdp filter add " + cfg.dev +
                          " proto tcp dport " + p + " classid 1:ffff)");
    }
    return {};
}

Result<void> check_subtree_free(const std::vector<control::ClassSpec> &all,
                                const AgentConfig &cfg) {
    const std::string cls = format_classid(ClassId::from_raw(cfg.classid));
    auto who = [&](uint32_t id) {
        std::string s;
        for (const auto &j : running_agents(cfg.dev))
            if (j.value("classid", "") == format_classid(ClassId::from_raw(id)))
                s = " (group " + j.value("group", "?") + ", pid " +
                    std::to_string(j.value("pid", 0)) + ")";
        return s;
    };
    std::map<uint32_t, uint32_t> parent_of;
    for (const auto &c : all) parent_of[c.classid] = c.parent;
    // Its parents, up to the wire (bounded: a cycle in a hand-written map).
    uint32_t a = parent_of.count(cfg.classid) ? parent_of[cfg.classid] : 0;
    for (size_t n = 0; a && n < parent_of.size(); ++n, a = parent_of.count(a) ? parent_of[a] : 0)
        if (class_held(cfg.dev, a))
            return refuse("class " + cls + " of " + cfg.dev + " is inside class " +
                          format_classid(ClassId::from_raw(a)) + ", which a group holds" + who(a) +
                          ": one group per subtree (leave that group first)");
    for (uint32_t id : control::subtree_ids(parent_of, cfg.classid))
        if (id != cfg.classid && class_held(cfg.dev, id))
            return refuse("class " + cls + " of " + cfg.dev + " has class " +
                          format_classid(ClassId::from_raw(id)) + " below it, which a group holds" +
                          who(id) + ": one group per subtree (leave that group first)");
    return {};
}

int run(const AgentConfig &given) {
    AgentConfig cfg = given;
    if (cfg.log_path.empty()) cfg.log_path = default_log_path(cfg.dev, cfg.classid);
    if (auto r = common::mkdir_p(common::kRunDir, 0755); !r) {
        std::fprintf(stderr, "pspxdp group join: %s\n", r.error().c_str());
        return 1;
    }
    // One agent per class of DEV, for its life: the lock is the proof.
    const std::string lock_file = lock_path(cfg.dev, cfg.classid);
    int lock_fd = -1;
    for (int tries = 0; tries < 3; ++tries) {
        lock_fd = open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) break;
        // The agent that held it may have removed the file between our open
        // and our flock (it does, when it leaves): a lock on a file no
        // longer at the path proves nothing, so open the path again.
        struct stat held {
        }, at_path{};
        if (fstat(lock_fd, &held) == 0 && stat(lock_file.c_str(), &at_path) == 0 &&
            held.st_ino == at_path.st_ino && held.st_dev == at_path.st_dev)
            break;
        close(lock_fd);
        lock_fd = -1;
    }
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        std::string who;
        for (const auto &j : running_agents(cfg.dev))
            if (j.value("classid", "") == format_classid(ClassId::from_raw(cfg.classid)))
                who = " (group " + j.value("group", "?") + ", pid " +
                      std::to_string(j.value("pid", 0)) + ")";
        std::fprintf(
            stderr, "pspxdp group join: class %s of %s is already in a group%s: leave it first\n",
            format_classid(ClassId::from_raw(cfg.classid)).c_str(), cfg.dev.c_str(), who.c_str());
        return 2;
    }
    // What the agent made of itself goes with it, whichever way run()
    // returns: the lock, removed while still held (a joiner that opened it
    // meanwhile sees it is no longer at the path). The state file goes in
    // Runner::run; the rate log stays: it is the record `group check` replays.
    struct LockFile {
        std::string path;
        int fd;
        ~LockFile() {
            unlink(path.c_str());
            close(fd);
        }
    } held_lock{lock_file, lock_fd};
    // One group per subtree, checked with our lock held (§11.10).
    {
        auto d = control::Device::open(cfg.dev, control::Access::Read);
        auto c = d ? d->config() : Result<control::Config>(d.failure());
        auto free = c ? check_subtree_free(c->classes, cfg) : Result<void>(c.failure());
        if (!free) {
            std::fprintf(stderr, "pspxdp group join: %s\n", free.error().c_str());
            return free.exit_code();
        }
    }
    // A state file left by a killed agent of this class (the lock is ours,
    // so it is dead): the class's own rate it recorded.
    for (const auto &j : agent_states(cfg.dev))
        if (j.value("classid", "") == format_classid(ClassId::from_raw(cfg.classid)) &&
            !j.value("alive", true)) {
            cfg.inherited_own_rate_bps = j.value("own_rate_bps", uint64_t(0));
            cfg.inherited_own = own_from_json(j.value("own_classes", nlohmann::json()));
        }
    struct stat log_before {};
    const bool log_existed = stat(cfg.log_path.c_str(), &log_before) == 0;
    int log_fd = open(cfg.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        std::fprintf(stderr, "pspxdp group join: %s: %s\n", cfg.log_path.c_str(),
                     std::strerror(errno));
        return 1;
    }
    RateLog log{log_fd};

    void *page =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        std::fprintf(stderr, "pspxdp group join: mmap: %s\n", std::strerror(errno));
        return 1;
    }
    auto *sh = new (page) Shared;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "pspxdp group join: pipe: %s\n", std::strerror(errno));
        return 1;
    }
    // Forked before any thread or curl handle exists.
    pid_t agent_pid = getpid();
    pid_t child = fork();
    if (child < 0) {
        std::fprintf(stderr, "pspxdp group join: fork: %s\n", std::strerror(errno));
        return 1;
    }
    if (child == 0) {
        close(pipefd[1]);
        close(lock_fd); // the agent's: it must go when the agent goes
        watchdog(cfg.dev, cfg.classid, sh, pipefd[0], log, agent_pid, cfg.endpoints);
    }
    close(pipefd[0]);
    int code = run_group_member(cfg, sh, log, child);
    close(pipefd[1]); // the watchdog's cue
    waitpid(child, nullptr, 0);
    if (code != 2)
        log_line("left group " + cfg.group + ": " + std::to_string(sh->rate_changes.load()) +
                 " rate changes, " + std::to_string(sh->watchdog_lowerings.load()) +
                 " by the watchdog");
    close(log_fd);
    // Refused: the rate log this run created (empty: nothing was applied)
    // goes too, so a refused join leaves nothing behind.
    struct stat log_after {};
    if (code == 2 && !log_existed && stat(cfg.log_path.c_str(), &log_after) == 0 &&
        log_after.st_size == 0)
        unlink(cfg.log_path.c_str());
    return code;
}

} // namespace pspxdp::agent
