#include "setup/state.hpp"

#include "common/caps.hpp"
#include "common/text.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace pspxdp::setup {

std::map<std::string, std::string> AttachState::to_kv() const {
    auto b = [](bool v) { return std::string(v ? "1" : "0"); };
    std::string why = stopped;
    for (char &c : why)
        if (c == '\n' || c == '\r') c = ' '; // one line per key
    return {{"dev", dev},
            {"dev_ifindex", std::to_string(dev_ifindex)},
            {"netns", std::to_string(netns)},
            {"netns_cookie", std::to_string(netns_cookie)},
            {"pacer_a", pacer_a},
            {"pacer_b", pacer_b},
            {"pacer_a_ifindex", std::to_string(pacer_a_ifindex)},
            {"pacer_b_ifindex", std::to_string(pacer_b_ifindex)},
            {"queues", std::to_string(queues)},
            {"line_rate_bps", std::to_string(line_rate_bps)},
            {"window_bytes", std::to_string(window_bytes)},
            {"veth_created", b(veth_created)},
            {"clsact_created", b(clsact_created)},
            {"tc_attached", b(tc_attached)},
            {"xdp_attached", b(xdp_attached)},
            {"pins_created", b(pins_created)},
            {"stopped", why}};
}

Result<AttachState> AttachState::from_kv(const std::map<std::string, std::string> &kv) {
    AttachState s;
    auto str = [&](const char *k) {
        auto it = kv.find(k);
        return it == kv.end() ? std::string() : it->second;
    };
    auto num = [&](const char *k) -> uint64_t {
        auto v = str(k);
        return v.empty() ? 0 : std::strtoull(v.c_str(), nullptr, 10);
    };
    s.dev = str("dev");
    if (s.dev.empty()) return err("state file has no dev");
    s.dev_ifindex = uint32_t(num("dev_ifindex"));
    s.netns = num("netns");
    s.netns_cookie = num("netns_cookie");
    s.pacer_a = str("pacer_a");
    s.pacer_b = str("pacer_b");
    s.pacer_a_ifindex = uint32_t(num("pacer_a_ifindex"));
    s.pacer_b_ifindex = uint32_t(num("pacer_b_ifindex"));
    s.queues = uint32_t(num("queues"));
    s.line_rate_bps = num("line_rate_bps");
    s.window_bytes = num("window_bytes");
    s.veth_created = num("veth_created");
    s.clsact_created = num("clsact_created");
    s.tc_attached = num("tc_attached");
    s.xdp_attached = num("xdp_attached");
    s.pins_created = num("pins_created");
    s.stopped = str("stopped");
    return s;
}

Result<void> write_state(const Paths &p, const AttachState &s) {
    const std::string tmp = p.state + ".tmp";
    std::string text;
    for (auto &[k, v] : s.to_kv()) text += k + "=" + v + "\n";
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return err(common::path_error("writing the state of " + p.dev, tmp, errno));
    fchmod(fd, 0644); // whatever the umask: status reads it unprivileged
    ssize_t n = write(fd, text.data(), text.size());
    int e = errno;
    close(fd);
    if (n != ssize_t(text.size())) {
        unlink(tmp.c_str());
        return err("writing " + tmp + ": " + common::errno_text(n < 0 ? e : ENOSPC));
    }
    // rename: a reader never sees half a state file.
    if (rename(tmp.c_str(), p.state.c_str()) < 0)
        return err("renaming " + tmp + ": " + common::errno_text(errno));
    return {};
}

bool state_exists(const Paths &p) { return access(p.state.c_str(), F_OK) == 0; }

Result<AttachState> read_state(const Paths &p) {
    std::ifstream f(p.state);
    if (!f) {
        if (errno == ENOENT) return err(p.dev + " is not attached (no " + p.state + ")");
        return err(common::path_error("reading the state of " + p.dev, p.state, errno));
    }
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(f, line)) {
        auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    auto s = AttachState::from_kv(kv);
    if (!s) return err(p.state + ": " + s.error());
    if (s->dev != p.dev)
        return err(p.state + ": records device " + common::quote(s->dev) + ", not " + p.dev);
    return s;
}

} // namespace pspxdp::setup
