// class_config and pacer_state as the daemon and the control plane both read
// them: every class in one pass (BPF_MAP_LOOKUP_BATCH: a few syscalls for
// 100,000 classes instead of two per class), and the configuration
// generation that tells the daemon to read them again.
#pragma once

#include "common/pins.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace pspxdp::common {

struct ClassConfigEntry {
    uint32_t classid = 0;
    pspxdp_class_config config{};
};

// Every entry of class_config (a HASH keyed by classid), in map order.
Result<std::vector<ClassConfigEntry>> read_class_configs(int class_config_fd);

// pacer_stats whole (PSPXDP_MAX_CLASSES slots): the map's own memory when
// the fd may write, else a copy in a few batched reads. The kernel maps a
// BPF map only shared-writable-capable, which a read-only fd (BPF_F_RDONLY:
// show and stats for any user who may read the pins) never is.
class PacerStatsView {
  public:
    static Result<PacerStatsView> of(int pacer_stats_fd);
    const pspxdp_class_counters *all() const {
        return view_ ? view_->as<pspxdp_class_counters>() : copy_.data();
    }

  private:
    std::optional<MapView> view_;
    std::vector<pspxdp_class_counters> copy_;
};

// pacer_state.config_gen += 1, atomically on the map's memory (pacer_state
// is mmapable), so the daemon's heartbeat written meanwhile is not undone.
// Called by whoever changed class_config, the default class or the line
// rate, after the change.
Result<void> bump_config_gen(int pacer_state_fd);

} // namespace pspxdp::common
