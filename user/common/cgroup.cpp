#include "common/cgroup.hpp"

#include "common/paths.hpp"
#include "common/text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

namespace pspxdp::common {

namespace {

// mountinfo escapes blanks and backslashes as \ooo.
std::string unescape(const std::string &s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            out += char(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8));
            i += 3;
        } else {
            out += s[i];
        }
    }
    return out;
}

std::vector<std::string> components(std::string_view path) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < path.size()) {
        size_t end = path.find('/', pos);
        if (end == std::string_view::npos) end = path.size();
        if (end > pos) out.emplace_back(path.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

std::string join(const std::vector<std::string> &parts) {
    std::string out;
    for (const auto &p : parts) out += "/" + p;
    return out.empty() ? "/" : out;
}

std::string full_path(const Cgroup2Mount &m, const std::string &rel) {
    return rel == "/" ? m.dir : m.dir + rel;
}

// The cgroup id of a cgroup2 directory: its file handle (libbpf's
// get_cgroup_id does the same); the inode number where handles are refused.
uint64_t id_of(const std::string &full) {
    alignas(
        struct file_handle) unsigned char buf[sizeof(struct file_handle) + sizeof(uint64_t)] = {};
    auto *fh = reinterpret_cast<struct file_handle *>(buf);
    fh->handle_bytes = sizeof(uint64_t);
    int mount_id = 0;
    if (name_to_handle_at(AT_FDCWD, full.c_str(), fh, &mount_id, 0) == 0 &&
        fh->handle_bytes == sizeof(uint64_t)) {
        uint64_t id = 0;
        std::memcpy(&id, buf + sizeof(struct file_handle), sizeof(id));
        return id;
    }
    struct stat st {};
    return stat(full.c_str(), &st) == 0 ? uint64_t(st.st_ino) : 0;
}

bool is_cgroup2_dir(const std::string &full) {
    struct statfs fs {};
    struct stat st {};
    return statfs(full.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC &&
           stat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

Result<Cgroup2Mount> cgroup2_mount() {
    const char *env = std::getenv("PSPXDP_TEST_MOUNTINFO");
    const std::string file = env && *env ? env : "/proc/self/mountinfo";
    std::ifstream f(file);
    if (!f) return err("reading " + file + ": " + errno_text(errno));
    std::string line;
    while (std::getline(f, line)) {
        // id parent maj:min root mountpoint options [optional...] - fstype source super
        std::istringstream in(line);
        std::vector<std::string> w{std::istream_iterator<std::string>(in), {}};
        size_t dash = 0;
        while (dash < w.size() && w[dash] != "-") ++dash;
        if (dash < 5 || dash + 1 >= w.size() || w[dash + 1] != "cgroup2") continue;
        Cgroup2Mount m;
        m.dir = unescape(w[4]);
        m.root_level = int(components(unescape(w[3])).size());
        return m;
    }
    return refuse("no cgroup2 file system is mounted (" + file +
                  " lists none; cgroup v1 only?): cgroup filters and pspxdp run need cgroup v2");
}

Result<std::string> cgroup_rel_path(const Cgroup2Mount &m, std::string_view path) {
    const std::string what = "cgroup " + quote(path);
    if (path.empty()) return refuse(what + ": empty path");
    std::string_view rest = path;
    const std::string_view dir = m.dir;
    if (rest.substr(0, dir.size()) == dir &&
        (rest.size() == dir.size() || rest[dir.size()] == '/' || dir == "/"))
        rest = rest.substr(dir == "/" ? 0 : dir.size());
    const auto parts = components(rest);
    for (const auto &p : parts)
        if (p == "." || p == "..")
            return refuse(what + ": '.' and '..' are not allowed (give the path under " + m.dir +
                          ")");
    std::string rel = join(parts);
    if (rel.size() >= 512) return refuse(what + ": longer than 511 bytes");
    return rel;
}

uint64_t cgroup_id_now(const Cgroup2Mount &m, const std::string &rel) {
    const std::string full = full_path(m, rel);
    return is_cgroup2_dir(full) ? id_of(full) : 0;
}

Result<CgroupDir> resolve_cgroup(std::string_view path) {
    auto m = cgroup2_mount();
    if (!m) return m.failure();
    auto rel = cgroup_rel_path(*m, path);
    if (!rel) return rel.failure();
    const std::string full = full_path(*m, *rel);
    if (!is_cgroup2_dir(full))
        return refuse("cgroup " + quote(path) + ": " + full + " is not a cgroup (" +
                      (access(full.c_str(), F_OK) == 0 ? "not a directory of the cgroup2 file "
                                                         "system"
                                                       : "no such directory") +
                      " mounted at " + m->dir + ")");
    const int level = m->root_level + int(components(*rel).size());
    if (level > 255) return refuse("cgroup " + quote(path) + ": deeper than 255 levels");
    CgroupDir out;
    out.path = *rel;
    out.id = id_of(full);
    out.level = uint8_t(level);
    if (!out.id) return err("cgroup " + quote(path) + ": reading its id: " + errno_text(errno));
    return out;
}

uint64_t process_start_time(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string all((std::istreambuf_iterator<char>(f)), {});
    const size_t close = all.rfind(')');
    if (close == std::string::npos || close + 2 > all.size()) return 0;
    std::istringstream rest(all.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i)
        if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
    return 0;
}

} // namespace pspxdp::common

namespace pspxdp::common {

namespace {

std::string runs_dir(const std::string &dev) { return std::string(kRunDir) + "/" + dev + ".runs"; }
std::string dev_cgroup(const std::string &dev) { return "/pspxdp/" + dev; }

std::string read_file(const std::string &path) {
    std::ifstream f(path);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}

// "run-PID-START" -> pid, start; false if the name is not one.
bool parse_run_name(const std::string &name, pid_t &pid, uint64_t &start) {
    unsigned long long p = 0, s = 0;
    char tail = 0;
    if (std::sscanf(name.c_str(), "run-%llu-%llu%c", &p, &s, &tail) != 2 || !p) return false;
    pid = pid_t(p);
    start = s;
    return true;
}

std::vector<std::string> subdirs(const std::string &full) {
    std::vector<std::string> out;
    DIR *d = opendir(full.c_str());
    if (!d) return out;
    while (dirent *e = readdir(d))
        if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
            out.emplace_back(e->d_name);
    closedir(d);
    return out;
}

// Moves every process of full (and of the cgroups below it) to `to`, then
// removes the cgroups, deepest first.
Result<void> empty_and_remove(const std::string &full, const std::string &to) {
    for (const auto &sub : subdirs(full))
        if (auto r = empty_and_remove(full + "/" + sub, to); !r) return r;
    // A process may fork while we move: read again until none is left.
    for (int round = 0; round < 100; ++round) {
        std::istringstream procs(read_file(full + "/cgroup.procs"));
        std::string pid;
        bool any = false;
        while (procs >> pid) {
            any = true;
            std::ofstream dst(to + "/cgroup.procs");
            dst << pid << std::flush; // a process that exited meanwhile: ESRCH, fine
        }
        if (!any) break;
    }
    if (rmdir(full.c_str()) != 0 && errno != ENOENT)
        return err("removing cgroup " + full + ": " + errno_text(errno));
    return {};
}

} // namespace

bool RunRecord::owner_alive() const { return pid && process_start_time(pid) == start; }

std::string own_cgroup() {
    std::istringstream in(read_file("/proc/self/cgroup"));
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3).empty() ? "/" : line.substr(3);
    return "/";
}

Result<RunRecord> create_run(const Cgroup2Mount &m, const std::string &dev, uint32_t pref,
                             uint32_t class_created) {
    RunRecord r;
    r.pid = getpid();
    r.start = process_start_time(r.pid);
    r.name = "run-" + std::to_string(r.pid) + "-" + std::to_string(r.start);
    r.cgroup = dev_cgroup(dev) + "/" + r.name;
    r.origin = own_cgroup();
    r.pref = pref;
    r.class_created = class_created;
    if (auto d = mkdir_p(runs_dir(dev), 0755); !d) return d.failure();
    {
        const std::string rec = runs_dir(dev) + "/" + r.name;
        std::ofstream f(rec);
        f << "cgroup " << r.cgroup << "\norigin " << r.origin << "\npref " << r.pref << "\nclass "
          << r.class_created << "\n";
        if (!f.flush()) return err("writing " + rec + ": " + errno_text(errno));
    }
    if (auto d = mkdir_p(full_path(m, r.cgroup), 0755); !d) {
        unlink((runs_dir(dev) + "/" + r.name).c_str());
        return err("creating the cgroup: " + d.error());
    }
    return r;
}

std::vector<RunRecord> list_runs(const Cgroup2Mount &m, const std::string &dev) {
    std::vector<RunRecord> out;
    std::set<std::string> seen;
    DIR *d = opendir(runs_dir(dev).c_str());
    while (d) {
        dirent *e = readdir(d);
        if (!e) break;
        RunRecord r;
        r.name = e->d_name;
        if (!parse_run_name(r.name, r.pid, r.start)) continue;
        std::istringstream in(read_file(runs_dir(dev) + "/" + r.name));
        std::string key, value;
        while (in >> key >> value) {
            if (key == "cgroup") r.cgroup = value;
            if (key == "origin") r.origin = value;
            if (key == "pref") r.pref = uint32_t(std::strtoul(value.c_str(), nullptr, 10));
            if (key == "class")
                r.class_created = uint32_t(std::strtoul(value.c_str(), nullptr, 10));
        }
        if (r.cgroup.empty()) r.cgroup = dev_cgroup(dev) + "/" + r.name;
        seen.insert(r.name);
        out.push_back(r);
    }
    if (d) closedir(d);
    for (const auto &name : subdirs(full_path(m, dev_cgroup(dev)))) {
        RunRecord r;
        r.name = name;
        if (seen.count(name) || !parse_run_name(name, r.pid, r.start)) continue;
        r.cgroup = dev_cgroup(dev) + "/" + name;
        out.push_back(r);
    }
    return out;
}

Result<void> remove_run(const Cgroup2Mount &m, const std::string &dev, const RunRecord &r) {
    std::string to = full_path(m, r.origin.empty() ? "/" : r.origin);
    if (access((to + "/cgroup.procs").c_str(), W_OK) != 0) to = m.dir;
    if (auto e = empty_and_remove(full_path(m, r.cgroup), to); !e) return e;
    unlink((runs_dir(dev) + "/" + r.name).c_str());
    rmdir(runs_dir(dev).c_str());                 // only when empty
    rmdir(full_path(m, dev_cgroup(dev)).c_str()); // only when empty
    rmdir(full_path(m, "/pspxdp").c_str());       // only when empty
    return {};
}

void remove_all_runs(const std::string &dev, std::vector<std::string> &notes) {
    auto m = cgroup2_mount();
    if (!m) return; // no cgroup2: no run could have made anything
    for (const RunRecord &r : list_runs(*m, dev))
        if (auto e = remove_run(*m, dev, r); !e) notes.push_back("pspxdp run: " + e.error());
    rmdir(runs_dir(dev).c_str());
    rmdir(full_path(*m, dev_cgroup(dev)).c_str());
    rmdir(full_path(*m, "/pspxdp").c_str());
}

} // namespace pspxdp::common
