#include "daemon/class_entries.hpp"

#include "common/config_map.hpp"
#include "common/pins.hpp"
#include "common/text.hpp"
#include "daemon/log.hpp"

#include <algorithm>
#include <bpf/bpf.h>
#include <cerrno>
#include <map>

namespace pspxdp::daemon {

Result<ClassEntries> ClassEntries::open(const common::Paths &p) {
    using common::Access;
    auto classes =
        common::open_pinned_map<uint32_t, pspxdp_class_entry>(p, "classes", Access::Write);
    if (!classes) return classes.failure();
    auto stats = common::open_pinned_map<uint32_t, pspxdp_class_tc_stats>(
        p, "class_stats", Access::Read, common::Need::Optional);
    if (!stats) return stats.failure();
    ClassEntries e(std::move(classes).value(), std::move(stats).value());
    // An earlier daemon's entries: its classes may be gone.
    std::vector<uint32_t> left;
    auto r = common::lookup_all_batched(e.classes_.get(), sizeof(pspxdp_class_entry), "classes",
                                        [&](const uint32_t *keys, const uint8_t *, uint32_t n) {
                                            left.insert(left.end(), keys, keys + n);
                                        });
    if (!r) return r.failure();
    for (uint32_t id : left) bpf_map_delete_elem(e.classes_.get(), &id);
    return e;
}

void ClassEntries::publish(const ClassTable &table, PacerMaps &maps, uint64_t now_ns) {
    std::map<uint32_t, pspxdp_class_tc_stats> tc;
    if (class_stats_.valid()) {
        auto sums =
            common::read_percpu_sums<pspxdp_class_tc_stats>(class_stats_.get(), "class_stats");
        if (sums)
            for (const auto &[id, s] : *sums) tc[id] = s;
    }
    std::vector<uint32_t> ids;
    std::vector<pspxdp_class_entry> values;
    auto add = [&](uint32_t slot) {
        const ClassState &c = table.at(slot);
        pspxdp_class_entry e{};
        e.updated_ns = now_ns;
        e.rate_bps = c.config.kind == PSPXDP_CLASS_PACED ? c.config.rate_bps : 0;
        e.kind = c.config.kind;
        e.slot = slot;
        e.prio = c.config.prio;
        e.parent = c.config.parent;
        e.ceil_bps = c.config.ceil_bps;
        // The slot's counters are the class's only while it holds the slot.
        const pspxdp_class_counters &pc = maps.slot(slot);
        if (c.life == ClassLife::Served || c.life == ClassLife::Draining) {
            e.state = pc.state;
#define PSPXDP_COPY(name, help) e.name = pc.name;
            PSPXDP_CLASS_COUNTERS(PSPXDP_COPY)
#undef PSPXDP_COPY
        } else {
            e.state = PSPXDP_SLOT_FREE;
        }
        if (auto it = tc.find(c.classid); it != tc.end()) {
#define PSPXDP_COPY(name, help) e.name = it->second.name;
            PSPXDP_TC_CLASS_COUNTERS(PSPXDP_COPY)
#undef PSPXDP_COPY
        }
        ids.push_back(c.classid);
        values.push_back(e);
    };
    for (uint32_t slot : table.configured()) add(slot);
    for (uint32_t slot : table.draining()) add(slot);

    std::string failed;
    if (!ids.empty()) {
        uint32_t count = uint32_t(ids.size());
        LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
        if (bpf_map_update_batch(classes_.get(), ids.data(), values.data(), &count, &opts) != 0) {
            // Element by element where the kernel has no batch update.
            for (size_t i = count; i < ids.size() && failed.empty(); ++i)
                if (bpf_map_update_elem(classes_.get(), &ids[i], &values[i], BPF_ANY) != 0)
                    failed = common::errno_text(errno);
        }
    }
    std::vector<uint32_t> now_written = ids;
    std::sort(now_written.begin(), now_written.end());
    for (uint32_t id : written_)
        if (!std::binary_search(now_written.begin(), now_written.end(), id))
            bpf_map_delete_elem(classes_.get(), &id);
    written_ = std::move(now_written);
    if (!failed.empty() && !failed_logged_) {
        logf("writing the classes map: %s (bpftool shows stale counters; pspxdp stats is exact)",
             failed.c_str());
        failed_logged_ = true;
    }
}

} // namespace pspxdp::daemon
