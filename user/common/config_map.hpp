// class_config and pacer_state as the daemon and the control plane both read
// them: every class in one pass (BPF_MAP_LOOKUP_BATCH: a few syscalls for
// 100,000 classes instead of two per class), and the configuration
// generation that tells the daemon to read them again.
#pragma once

#include "common/pins.hpp"
#include "core/result.hpp"
#include "pspxdp/shared.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pspxdp::common {

struct ClassConfigEntry {
    uint32_t classid = 0;
    pspxdp_class_config config{};
};

// Every entry of class_config (a HASH keyed by classid), in map order.
Result<std::vector<ClassConfigEntry>> read_class_configs(int class_config_fd);

// Every entry of a HASH keyed by a __u32 in batches (BPF_MAP_LOOKUP_BATCH):
// keys and values (value_bytes each: a per-CPU map's is one value per
// possible CPU) of each batch go to `take`. Errors name `map`.
Result<void> lookup_all_batched(
    int fd, size_t value_bytes, const char *map,
    const std::function<void(const uint32_t *keys, const uint8_t *values, uint32_t n)> &take);

// Every entry of a per-CPU HASH keyed by a __u32 whose value is made of
// __u64 counters (class_stats), summed over CPUs, in map order.
template <class T>
Result<std::vector<std::pair<uint32_t, T>>> read_percpu_sums(int fd, const char *map) {
    static_assert(sizeof(T) % sizeof(uint64_t) == 0, "a struct of __u64 counters");
    std::vector<std::pair<uint32_t, T>> out;
    const int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return err(std::string("reading ") + map + ": cannot count the CPUs");
    const size_t words = sizeof(T) / sizeof(uint64_t);
    auto r = lookup_all_batched(
        fd, sizeof(T) * size_t(ncpu), map,
        [&](const uint32_t *keys, const uint8_t *values, uint32_t n) {
            for (uint32_t i = 0; i < n; ++i) {
                T sum{};
                auto *to = reinterpret_cast<uint64_t *>(&sum);
                for (int cpu = 0; cpu < ncpu; ++cpu) {
                    const uint8_t *v =
                        values + (size_t(i) * size_t(ncpu) + size_t(cpu)) * sizeof(T);
                    for (size_t w = 0; w < words; ++w) {
                        uint64_t x;
                        std::memcpy(&x, v + w * sizeof(uint64_t), sizeof(x));
                        to[w] += x;
                    }
                }
                out.emplace_back(keys[i], sum);
            }
        });
    if (!r) return r.failure();
    return out;
}

// pacer_stats[0..slots) (at most PSPXDP_MAX_CLASSES): the map's own memory
// when the fd may write, else a copy in a few batched reads. The kernel maps
// a BPF map only shared-writable-capable, which a read-only fd (BPF_F_RDONLY:
// show and stats for any user who may read the pins) never is.
class PacerStatsView {
  public:
    static Result<PacerStatsView> of(int pacer_stats_fd, uint32_t slots);
    // Slots 0..slots - 1 only (slots as given to of()).
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
