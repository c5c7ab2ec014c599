#include "common/config_map.hpp"

#include "common/text.hpp"

#include <algorithm>
#include <bpf/bpf.h>
#include <cerrno>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace pspxdp::common {

Result<void>
lookup_all_batched(int fd, size_t value_bytes, const char *map,
                   const std::function<void(const uint32_t *, const uint8_t *, uint32_t)> &take) {
    // A hash map's batch walks whole buckets: a chunk smaller than a bucket
    // gets ENOSPC, then the chunk grows.
    uint32_t chunk = 4096;
    std::vector<uint32_t> keys;
    std::vector<uint8_t> vals;
    uint32_t token = 0;
    bool first = true;
    for (;;) {
        keys.resize(chunk);
        vals.resize(size_t(chunk) * value_bytes);
        uint32_t n = chunk;
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        int rc = bpf_map_lookup_batch(fd, first ? nullptr : &token, &token, keys.data(),
                                      vals.data(), &n, &opts);
        int e = rc ? errno : 0;
        if (rc && e == ENOSPC && n == 0 && chunk < (1u << 20)) {
            chunk *= 2;
            continue;
        }
        if (rc && e != ENOENT) return err(std::string("reading ") + map + ": " + errno_text(e));
        take(keys.data(), vals.data(), n);
        if (rc) break; // ENOENT: that was the last batch
        first = false;
    }
    return {};
}

Result<std::vector<ClassConfigEntry>> read_class_configs(int fd) {
    std::vector<ClassConfigEntry> out;
    auto r = lookup_all_batched(fd, sizeof(pspxdp_class_config), "class_config",
                                [&](const uint32_t *keys, const uint8_t *values, uint32_t n) {
                                    for (uint32_t i = 0; i < n; ++i) {
                                        ClassConfigEntry e{keys[i], {}};
                                        std::memcpy(&e.config, values + i * sizeof(e.config),
                                                    sizeof(e.config));
                                        out.push_back(e);
                                    }
                                });
    if (!r) return r.failure();
    return out;
}

Result<PacerStatsView> PacerStatsView::of(int fd, uint32_t slots) {
    slots = std::clamp<uint32_t>(slots, 1, PSPXDP_MAX_CLASSES);
    PacerStatsView v;
    // Only the slots asked for: the kernel maps every page of a BPF array
    // at mmap() time, so all 131,072 slots (24 MB) took 1.5 ms to map and
    // 0.9 ms to unmap, in system calls the kernel does not preempt (a
    // woken pacer on that CPU waited for them: design §4.4).
    if (auto m = MapView::of(fd, sizeof(pspxdp_class_counters) * slots, false)) {
        v.view_.emplace(std::move(m.value()));
        return v;
    }
    v.copy_.resize(slots);
    constexpr uint32_t kChunk = 16384;
    std::vector<uint32_t> keys(kChunk);
    std::vector<pspxdp_class_counters> vals(kChunk);
    uint32_t token = 0;
    for (bool first = true;; first = false) {
        uint32_t n = std::min(kChunk, slots);
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        int rc = bpf_map_lookup_batch(fd, first ? nullptr : &token, &token, keys.data(),
                                      vals.data(), &n, &opts);
        const int e = rc ? errno : 0;
        if (rc && e != ENOENT) return err("reading pacer_stats: " + errno_text(e));
        bool done = false; // an array's keys come in order: the last one asked for
        for (uint32_t i = 0; i < n; ++i) {
            if (keys[i] < slots) v.copy_[keys[i]] = vals[i];
            done = done || keys[i] + 1 >= slots;
        }
        if (rc || done) break; // ENOENT: that was the last batch
    }
    return v;
}

Result<void> bump_config_gen(int pacer_state_fd) {
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(nullptr, size_t(page), PROT_READ | PROT_WRITE, MAP_SHARED, pacer_state_fd, 0);
    if (m == MAP_FAILED)
        return err("mapping pacer_state: " + errno_text(errno) +
                   " (pins from another pspxdp version? detach and attach again)");
    auto *st = static_cast<pspxdp_pacer_state *>(m);
    __atomic_fetch_add(&st->config_gen, 1, __ATOMIC_RELEASE);
    munmap(m, size_t(page));
    return {};
}

} // namespace pspxdp::common
