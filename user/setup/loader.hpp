// Loading and attaching: the two BPF programs, their pinned maps, the pacer
// veth pair and the TC hook on DEV. Everything attach() creates is written to
// a state file first, so that detach() removes exactly that and nothing else
// (a clsact qdisc someone else made stays), even after a crash mid-attach.
//
// Files:
//   /sys/fs/bpf/pspxdp/DEV/<map>   pinned maps (the control plane)
//   /run/pspxdp/DEV.lock           flock: one attach/detach per DEV at a time
//   /run/pspxdp/DEV.state          what was created (key=value lines)
//   /run/pspxdp/DEV.pid, DEV.log   the daemon
//   /run/pspxdp/DEV.stats          the daemon's counters (JSON, rewritten ~1/s)
#pragma once

#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <map>
#include <string>

namespace pspxdp::setup {

inline constexpr const char *kRunDir = "/run/pspxdp";
// TC filter identity on DEV's clsact egress: ours, whatever else is there.
inline constexpr uint32_t kTcHandle = 0x5053; // "PS"
inline constexpr uint32_t kTcPriority = 1;

struct Paths {
    std::string dev;
    std::string pin_dir;
    std::string lock;
    std::string state;
    std::string pid;
    std::string log;
    std::string stats;
    std::string pin(const std::string &map) const { return pin_dir + "/" + map; }
};
Paths paths_for(const std::string &dev);

// What attach created and the parameters the daemon runs with.
struct AttachState {
    std::string dev;
    uint32_t dev_ifindex = 0;
    std::string pacer_a; // TC redirects into a
    std::string pacer_b; // XDP + AF_XDP RX sockets on b
    uint32_t pacer_a_ifindex = 0;
    uint32_t pacer_b_ifindex = 0;
    uint32_t queues = 0;
    uint64_t line_rate_bps = 0;
    uint64_t window_bytes = 0;
    bool veth_created = false;
    bool clsact_created = false; // only then does detach delete the qdisc
    bool tc_attached = false;
    bool xdp_attached = false;
    bool pins_created = false;

    std::map<std::string, std::string> to_kv() const;
    static Result<AttachState> from_kv(const std::map<std::string, std::string> &kv);
};

Result<void> write_state(const Paths &p, const AttachState &s);
// Error "not attached" when the state file does not exist.
Result<AttachState> read_state(const Paths &p);

// flock(LOCK_EX) on /run/pspxdp/DEV.lock, released on destruction.
class DevLock {
  public:
    static Result<DevLock> acquire(const Paths &p, bool wait);
    DevLock(DevLock &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    DevLock &operator=(DevLock &&) = delete;
    ~DevLock();

  private:
    explicit DevLock(int fd) : fd_(fd) {}
    int fd_ = -1;
};

Result<void> ensure_run_dir();
// Mounts bpffs on /sys/fs/bpf when nothing is mounted there.
Result<void> ensure_bpffs();

struct AttachRequest {
    std::string dev;
    uint32_t queues = 16;
    uint64_t line_rate_bps = 0;
    uint64_t window_bytes = 0;
    // Unclassified traffic goes here. Created as a normal (gap-filling)
    // class unless it is configured already; never left without a class, or
    // the kernel would put unclassified frames on the wire behind the
    // pacer's back and break its byte clock.
    uint32_t default_classid = PSPXDP_CLASSID(1, 0xffff);
    // The clsact qdisc on DEV, if there is one, was created by the attachment
    // this one replaces (its daemon died): it stays pspxdp's to delete.
    bool clsact_ours = false;
};

// Creates the veth pair, loads both programs, pins (or reuses) the maps,
// writes pacer_state.pacer_ifindex, attaches XDP (native) on b and TC egress
// on DEV. On failure undoes what it did. The caller holds the DevLock and has
// validated DEV.
Result<AttachState> attach(const AttachRequest &req);
// Removes what s says was created. Best effort: keeps going on errors and
// reports the first one. Removes the state file when everything went.
Result<void> detach(const Paths &p, const AttachState &s);

// Removes DEV's stats, log and lock files and /run/pspxdp when empty (after
// a detach: nothing of pspxdp stays behind).
void remove_run_files(const Paths &p);

// bpf_obj_get of a pinned map of DEV, with an error naming the pin.
Result<int> open_pinned_map(const Paths &p, const std::string &map);

} // namespace pspxdp::setup
