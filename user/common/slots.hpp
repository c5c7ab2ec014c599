// Slots (shared.h): each class gets a stable slot when it is
// created, the index of pacer_stats and of the daemon's class table. The
// control plane picks it, under its lock: the lowest slot in
// 1..PSPXDP_MAX_CLASSES-1 that no class_config entry uses and whose
// pacer_stats state is FREE. The second condition keeps a deleted class's
// slot out of reach while the daemon still drains its queue (DRAINING), or
// while a dead daemon's class still holds it (SERVED): the daemon sets FREE
// only when nothing of the old class is left.
#pragma once

#include "core/result.hpp"

#include <cstdint>
#include <vector>

namespace pspxdp::common {

class SlotAllocator {
  public:
    // Reads the slots class_config uses (one batched pass); pacer_stats is
    // then asked slot by slot, from the lowest candidate up.
    static Result<SlotAllocator> open(int class_config_fd, int pacer_stats_fd);
    // The next slot, marked used for further allocate() calls.
    Result<uint32_t> allocate();

  private:
    SlotAllocator() = default;
    int pacer_stats_fd_ = -1;
    std::vector<bool> used_; // by class_config, index slot
    uint32_t next_ = 1;      // every slot below is known to be taken
};

} // namespace pspxdp::common
