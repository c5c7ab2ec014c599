// The `classes` map (shared.h): one entry per configured class with every
// counter a user reads, for `bpftool map dump` and `bpftool map lookup` by
// class id. The daemon is its only writer: it knows which classes exist
// (configured, or deleted and still draining) and holds half of their
// counters. publish() rewrites the entries in one batch (TC's class_stats
// read in one batch too) and deletes those of classes gone since the last
// one: a few syscalls whatever the number of classes. The loop calls it once
// a second, after every configuration change, and when it stops.
//
// Why the daemon and a period rather than the CLI or every frame: bpftool
// is read by someone who has no pspxdp process running, so the map must be
// kept without one; the pacer_stats counters change per frame, and a
// syscall per frame would cost more than the frame. A second old at most is
// what `bpftool map dump` needs; `pspxdp stats` reads the live counters.
#pragma once

#include "common/fd.hpp"
#include "common/paths.hpp"
#include "core/result.hpp"
#include "daemon/class_table.hpp"
#include "daemon/pacer_maps.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <vector>

namespace pspxdp::daemon {

class ClassEntries {
  public:
    // Opens `classes` (write) and class_stats (read, optional) and empties
    // `classes` of what an earlier daemon left.
    static Result<ClassEntries> open(const common::Paths &paths);
    // Writes every class of the table, deletes the entries of classes gone.
    // A failure is logged once per kind, not returned: the pacer goes on.
    void publish(const ClassTable &table, PacerMaps &maps, uint64_t now_ns);

  private:
    ClassEntries(common::Fd classes, common::Fd class_stats)
        : classes_(std::move(classes)), class_stats_(std::move(class_stats)) {}
    common::Fd classes_, class_stats_;
    std::vector<uint32_t> written_; // class ids in the map, sorted
    bool failed_logged_ = false;
};

} // namespace pspxdp::daemon
