#include "common/pins.hpp"

#include "common/text.hpp"

#include <bpf/bpf.h>
#include <cerrno>
#include <fstream>
#include <sys/mman.h>
#include <unistd.h>

namespace pspxdp::common {

namespace {
int obj_get(const std::string &path, Access access) {
    LIBBPF_OPTS(bpf_obj_get_opts, opts,
                .file_flags = access == Access::Read ? uint32_t(BPF_F_RDONLY) : 0u);
    int fd = bpf_obj_get_opts(path.c_str(), &opts);
    return fd < 0 ? -errno : fd;
}
} // namespace

Result<Fd> open_pinned_map(const Paths &p, std::string_view map, uint32_t key_size,
                           uint32_t value_size, Access access, Need need) {
    const std::string path = p.pin(map);
    int fd = obj_get(path, access);
    if (fd == -ENOENT || fd == -ENOTDIR) {
        if (need == Need::Optional) return Fd();
        return refuse(p.dev + " is not attached (no " + path + ")");
    }
    if (fd == -EACCES || fd == -EPERM) {
        if (access == Access::Read)
            return err("permission denied: reading " + p.dev + "'s pins (" + path +
                       "): run as root (group " + kReadGroup + " can read)");
        return err("changing " + p.dev + "'s configuration: permission denied on " + path +
                   " (the pins are root's: run as root, or with CAP_DAC_OVERRIDE)");
    }
    if (fd < 0) return err("opening pinned map " + path + ": " + errno_text(fd));
    Fd owned(fd);
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
        return err("pinned map " + path + ": " + errno_text(errno));
    if (info.key_size != key_size || info.value_size != value_size)
        return err("pinned map " + path + ": key/value size " + std::to_string(info.key_size) +
                   "/" + std::to_string(info.value_size) + ", this pspxdp expects " +
                   std::to_string(key_size) + "/" + std::to_string(value_size) +
                   " (left by another pspxdp version? detach and attach again)");
    return owned;
}

Result<MapView> MapView::of(int fd, size_t bytes, bool writable) {
    // What the map is, before mapping it: an ARRAY created without
    // BPF_F_MMAPABLE, or with fewer entries than this pspxdp indexes (pins of
    // another version), is reported as such instead of failing in mmap.
    bpf_map_info info{};
    uint32_t info_len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &info_len) != 0)
        return err("pinned map: " + errno_text(errno));
    if (!(info.map_flags & BPF_F_MMAPABLE))
        return err(std::string("map ") + info.name +
                   " is not mmapable (pins from another pspxdp "
                   "version? detach and attach again)");
    const size_t stride = (size_t(info.value_size) + 7) & ~size_t(7);
    if (size_t(info.max_entries) * stride < bytes)
        return err(std::string("map ") + info.name + " holds " + std::to_string(info.max_entries) +
                   " entries, fewer than this pspxdp uses (pins from another pspxdp version? "
                   "detach and attach again)");
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t len = (bytes + page - 1) / page * page;
    void *p = mmap(nullptr, len, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return err("mapping a pinned map (mmapable?): " + errno_text(errno));
    return MapView(p, len);
}

MapView::~MapView() {
    if (p_) munmap(p_, len_);
}

Result<PinnedMapInfo> pinned_map_info(const std::string &path) {
    int fd = obj_get(path, Access::Read);
    if (fd < 0) return err(path + ": " + errno_text(fd));
    Fd owned(fd);
    PinnedMapInfo out;
    // A pinned program or link would answer BPF_OBJ_GET_INFO_BY_FD with its
    // own info layout: ask fdinfo what the object is first.
    std::ifstream fdinfo("/proc/self/fdinfo/" + std::to_string(fd));
    std::string line;
    bool map = false;
    while (std::getline(fdinfo, line))
        if (line.starts_with("map_type:")) map = true;
    if (!map) return out;
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return err(path + ": " + errno_text(errno));
    out.is_map = true;
    out.type = info.type;
    out.key_size = info.key_size;
    out.value_size = info.value_size;
    out.max_entries = info.max_entries;
    out.map_flags = info.map_flags;
    out.name = info.name;
    return out;
}

} // namespace pspxdp::common
