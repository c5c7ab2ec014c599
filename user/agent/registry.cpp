// docs/design.md §11.5: the agents' files under /run/pspxdp.
#include "agent/registry.hpp"

#include "common/cgroup.hpp"
#include "common/paths.hpp"

#include <csignal>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

namespace pspxdp::agent {

namespace {

std::string base_path(const std::string &dev, uint32_t classid) {
    char word[32];
    std::snprintf(word, sizeof word, "%x-%x", classid >> 16, classid & 0xffff);
    return std::string(common::kRunDir) + "/" + dev + ".group-" + word;
}

} // namespace

std::string state_path(const std::string &dev, uint32_t classid) {
    return base_path(dev, classid) + ".json";
}

std::string lock_path(const std::string &dev, uint32_t classid) {
    return base_path(dev, classid) + ".lock";
}

std::string default_log_path(const std::string &dev, uint32_t classid) {
    return base_path(dev, classid) + ".rates";
}

nlohmann::json own_json(const std::vector<control::OwnRate> &own) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto &o : own)
        a.push_back({{"classid", o.classid}, {"rate_bps", o.rate_bps}, {"ceil_bps", o.ceil_bps}});
    return a;
}

std::vector<control::OwnRate> own_from_json(const nlohmann::json &j) {
    std::vector<control::OwnRate> own;
    if (!j.is_array()) return own;
    for (const auto &o : j)
        if (o.is_object())
            own.push_back({o.value("classid", uint32_t(0)), o.value("rate_bps", uint64_t(0)),
                           o.value("ceil_bps", uint64_t(0))});
    return own;
}

bool class_held(const std::string &dev, uint32_t classid) {
    // No file: no agent (a leaving one removes it while still holding it).
    int fd = open(lock_path(dev, classid).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0;
    close(fd);
    return held;
}

std::vector<nlohmann::json> agent_states(const std::string &dev) {
    std::vector<nlohmann::json> out;
    DIR *d = opendir(common::kRunDir);
    if (!d) return out;
    std::string prefix = dev + ".group-";
    while (dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (!name.starts_with(prefix) || !name.ends_with(".json")) continue;
        std::ifstream f(std::string(common::kRunDir) + "/" + name);
        auto j = nlohmann::json::parse(f, nullptr, false);
        if (j.is_discarded() || !j.contains("pid") || !j.contains("start_time")) continue;
        pid_t pid = j["pid"].get<pid_t>();
        j["alive"] =
            kill(pid, 0) == 0 && common::process_start_time(pid) == j["start_time"].get<uint64_t>();
        out.push_back(std::move(j));
    }
    closedir(d);
    return out;
}

std::vector<nlohmann::json> running_agents(const std::string &dev) {
    std::vector<nlohmann::json> out;
    for (auto &j : agent_states(dev))
        if (j.value("alive", false)) out.push_back(std::move(j));
    return out;
}

void write_state_file(const std::string &dev, uint32_t classid, const nlohmann::json &state) {
    std::string path = state_path(dev, classid), tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << state.dump() << "\n";
    }
    std::rename(tmp.c_str(), path.c_str());
}

std::string node_name() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return host;
}

std::string boot_id() {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(f, id);
    return id;
}

} // namespace pspxdp::agent
