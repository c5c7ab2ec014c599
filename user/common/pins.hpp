// The one opener of pspxdp's pinned maps (daemon, CLI, control plane).
//
// Every map is checked against the layout this binary was built with (key
// and value sizes from shared.h), so a pin left by another pspxdp version is
// reported instead of misread. Read-only users open with BPF_F_RDONLY: then
// read permission on the pin is enough (status, show for a non-root user the
// administrator allowed to read the pins).
#pragma once

#include "common/fd.hpp"
#include "common/paths.hpp"
#include "core/result.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace pspxdp::common {

enum class Access { Read, Write };
enum class Need { Required, Optional };

// Opens pin_dir/map. Errors: "DEV is not attached (no PATH)" when missing and
// required (an Optional missing map gives an invalid Fd), a permission
// message naming what is needed, or the size mismatch.
Result<Fd> open_pinned_map(const Paths &p, std::string_view map, uint32_t key_size,
                           uint32_t value_size, Access access, Need need = Need::Required);

template <class Key, class Value>
Result<Fd> open_pinned_map(const Paths &p, std::string_view map, Access access,
                           Need need = Need::Required) {
    return open_pinned_map(p, map, sizeof(Key), sizeof(Value), access, need);
}

// What a pinned object is, for removing only our own (detach).
struct PinnedMapInfo {
    bool is_map = false;
    uint32_t type = 0, key_size = 0, value_size = 0, max_entries = 0, map_flags = 0;
    std::string name; // the kernel's map name (at most 15 characters)
};
// bpf_obj_get + BPF_OBJ_GET_INFO_BY_FD on any path; is_map false for a pinned
// program or link. Errors only when the path cannot be opened at all.
Result<PinnedMapInfo> pinned_map_info(const std::string &path);

// A shared mapping of the first `bytes` of an mmapable ARRAY map
// (pacer_state, pacer_stats, daemon_stats): the daemon writes its counters in
// place and the CLI reads them with plain loads, no syscall per field. An
// ARRAY's values lie at value_size rounded up to 8, so a struct whose size is
// a multiple of 8 indexes as a C array. Refused (not mapped) when the map is
// not mmapable or smaller than `bytes`. Unmapped when it goes out of scope.
class MapView {
  public:
    static Result<MapView> of(int fd, size_t bytes, bool writable);
    MapView(MapView &&o) noexcept : p_(o.p_), len_(o.len_) { o.p_ = nullptr; }
    MapView &operator=(MapView &&) = delete;
    MapView(const MapView &) = delete;
    ~MapView();
    template <class T> T *as() const { return static_cast<T *>(p_); }

  private:
    MapView(void *p, size_t len) : p_(p), len_(len) {}
    void *p_;
    size_t len_;
};

// Adds to `out` the sum over CPUs of a per-CPU value made only of __u64
// counters (class_stats, tc_stats, xdp_stats). False when the lookup fails.
template <class T> bool percpu_sum(int fd, const void *key, T &out) {
    static_assert(sizeof(T) % sizeof(uint64_t) == 0, "a struct of __u64 counters");
    const int ncpu = libbpf_num_possible_cpus();
    if (fd < 0 || ncpu <= 0) return false;
    std::vector<T> v(static_cast<size_t>(ncpu));
    if (bpf_map_lookup_elem(fd, key, v.data()) != 0) return false;
    auto *sum = reinterpret_cast<uint64_t *>(&out);
    for (const T &x : v) {
        auto *p = reinterpret_cast<const uint64_t *>(&x);
        for (size_t i = 0; i < sizeof(T) / sizeof(uint64_t); ++i) sum[i] += p[i];
    }
    return true;
}

} // namespace pspxdp::common
