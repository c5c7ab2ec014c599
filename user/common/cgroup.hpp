// cgroup v2 for the cgroup filters and `pspxdp run` (docs/design.md §1.3.1):
// where the cgroup2 file system is mounted (read from /proc/self/mountinfo,
// never assumed: hybrid hosts mount it at /sys/fs/cgroup/unified), a
// cgroup's id and level, and a process's start time (to tell a reused pid).
//
// A cgroup path in pspxdp's words is the path under the cgroup2 mount's
// root, "/a/b", as /proc/PID/cgroup prints it; the user may also give the
// whole path under the mount ("/sys/fs/cgroup/unified/a/b") or leave out
// the leading '/'.
#pragma once

#include "core/result.hpp"

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pspxdp::common {

struct Cgroup2Mount {
    std::string dir;    // where it is mounted, e.g. "/sys/fs/cgroup/unified"
    int root_level = 0; // the level of the mount's root cgroup (0: the hierarchy's root)
};

// The first cgroup2 mount in /proc/self/mountinfo (the environment variable
// PSPXDP_TEST_MOUNTINFO names another file: tests simulate a host with
// cgroup v1 only). Refused (exit 2) when there is none.
Result<Cgroup2Mount> cgroup2_mount();

// PATH as the user gave it -> "/a/b" under the mount ("/": its root).
// Syntax only: '.' and '..' and an empty path are refused.
Result<std::string> cgroup_rel_path(const Cgroup2Mount &m, std::string_view path);

struct CgroupDir {
    std::string path; // "/a/b" under the mount
    uint64_t id = 0;  // the kernel's cgroup id (bpf_skb_cgroup_id's)
    uint8_t level = 0;
};
// The cgroup at PATH now; refused (exit 2) when PATH is not a directory of
// the cgroup2 file system.
Result<CgroupDir> resolve_cgroup(std::string_view path);
// The id of the cgroup at rel ("/a/b") now, 0 when there is none.
uint64_t cgroup_id_now(const Cgroup2Mount &m, const std::string &rel);

// Field 22 of /proc/PID/stat: when the process started (clock ticks since
// boot), to tell a reused pid; 0 when there is no such process.
uint64_t process_start_time(pid_t pid);

} // namespace pspxdp::common

namespace pspxdp::common {

// `pspxdp run`'s cgroups (docs/design.md §1.3.1). Each run of DEV gets
// <mount>/pspxdp/DEV/run-PID-START (PID and start time of the pspxdp run
// process) and a record /run/pspxdp/DEV.runs/run-PID-START naming the
// cgroup, the cgroup it came from (where processes still inside go when the
// run's cgroup is removed), its filter's pref and the class it created, if
// any. The record is written before the cgroup is made, so nothing of a
// run exists without one. A run whose process is gone (killed -9) is stale:
// the next `pspxdp run` on DEV sweeps it, and detach removes every run.
struct RunRecord {
    std::string name;           // "run-PID-START"
    pid_t pid = 0;              // of pspxdp run
    uint64_t start = 0;         // its start time (process_start_time)
    std::string cgroup;         // "/pspxdp/DEV/run-PID-START" under the mount
    std::string origin;         // the cgroup pspxdp run was in
    uint32_t pref = 0;          // its filter's
    uint32_t class_created = 0; // the class it created (--rate), 0: none
    bool owner_alive() const;
};

// The record and the cgroup of a new run of this process on DEV.
Result<RunRecord> create_run(const Cgroup2Mount &m, const std::string &dev, uint32_t pref,
                             uint32_t class_created);
// Every run of DEV: its records, and cgroups under <mount>/pspxdp/DEV without
// one (their owner is then taken from the name).
std::vector<RunRecord> list_runs(const Cgroup2Mount &m, const std::string &dev);
// Removes a run's cgroup (processes still in it, or in cgroups below it,
// are moved to its origin first, or to the root if that is gone), its
// record, and <mount>/pspxdp/DEV and <mount>/pspxdp when they are empty.
Result<void> remove_run(const Cgroup2Mount &m, const std::string &dev, const RunRecord &r);
// Detach: every run of DEV, removed; a note per failure.
void remove_all_runs(const std::string &dev, std::vector<std::string> &notes);
// The cgroup v2 of this process ("/a/b" under the mount), "/" if unknown.
std::string own_cgroup();

} // namespace pspxdp::common
