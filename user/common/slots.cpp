#include "common/slots.hpp"

#include "common/text.hpp"

#include "common/config_map.hpp"
#include "pspxdp/shared.h"

#include <bpf/bpf.h>
#include <cerrno>
#include <cstring>
#include <string>

namespace pspxdp::common {

Result<SlotAllocator> SlotAllocator::open(int class_config_fd, int pacer_stats_fd) {
    auto all = read_class_configs(class_config_fd);
    if (!all) return all.failure();
    SlotAllocator a;
    a.pacer_stats_fd_ = pacer_stats_fd;
    a.used_.assign(PSPXDP_MAX_CLASSES, false);
    a.used_[0] = true; // slot 0 means "none" everywhere
    for (const auto &e : *all)
        if (e.config.slot < PSPXDP_MAX_CLASSES) a.used_[e.config.slot] = true;
    return a;
}

Result<uint32_t> SlotAllocator::allocate() {
    for (uint32_t s = next_; s < PSPXDP_MAX_CLASSES; ++s) {
        if (used_[s]) continue;
        pspxdp_class_counters c{};
        if (bpf_map_lookup_elem(pacer_stats_fd_, &s, &c) != 0)
            return err("reading pacer_stats: " + errno_text(errno));
        if (c.state != PSPXDP_SLOT_FREE) continue; // still draining, or a dead daemon's
        used_[s] = true;
        next_ = s + 1;
        return s;
    }
    // It does not fit: refused as asked (exit 2), like a rate above the line.
    return refuse("no free slot: " + std::to_string(PSPXDP_MAX_CLASSES - 1) +
                  " classes exist or are still draining");
}

} // namespace pspxdp::common
