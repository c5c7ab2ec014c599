#include "control/filter.hpp"

#include "common/cgroup.hpp"
#include "common/config_map.hpp"
#include "common/text.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace pspxdp::control {

namespace {

Error sys_error(const std::string &what, int e = errno) {
    return err(what + ": " + common::errno_text(e));
}

// Every (key, value) of a hash map, by batches.
template <class K, class V> Result<std::vector<std::pair<K, V>>> dump(int fd, const char *name) {
    std::vector<std::pair<K, V>> out;
    uint32_t chunk = 4096, token = 0;
    bool first = true;
    std::vector<K> keys;
    std::vector<V> values;
    for (;;) {
        keys.resize(chunk);
        values.resize(chunk);
        uint32_t count = chunk, next = 0;
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        int rc = bpf_map_lookup_batch(fd, first ? nullptr : &token, &next, keys.data(),
                                      values.data(), &count, &opts);
        const int e = rc ? errno : 0;
        for (uint32_t i = 0; i < count; ++i) out.emplace_back(keys[i], values[i]);
        if (rc && e == ENOENT) return out;     // the last batch
        if (rc && e == ENOSPC && count == 0) { // one bucket holds more than chunk
            chunk *= 2;
            continue;
        }
        if (rc) return sys_error(std::string("read ") + name, e);
        token = next;
        first = false;
    }
}

Result<EntryMap> read_entries(int fd) {
    auto d = dump<pspxdp_filter_key, pspxdp_filter_entry>(fd, "filter_entries");
    if (!d) return d.failure();
    EntryMap out;
    out.reserve(d->size());
    for (const auto &[k, v] : *d) out.emplace(key_bytes(k), v);
    return out;
}

Result<pspxdp_filter_state> read_state(int fd) {
    uint32_t key = 0;
    pspxdp_filter_state st{};
    if (bpf_map_lookup_elem(fd, &key, &st) != 0) return sys_error("read filter_state");
    return st;
}

Result<void> write_state(int fd, const pspxdp_filter_state &st) {
    uint32_t key = 0;
    if (bpf_map_update_elem(fd, &key, &st, BPF_ANY) != 0) return sys_error("write filter_state");
    return {};
}

// Returns once every classifier run that started before has ended:
// membarrier(MEMBARRIER_CMD_GLOBAL) is synchronize_rcu(), and TC programs run
// inside RCU read-side sections. Where it is refused (nohz_full), a run
// takes microseconds, so 10 ms is a wide margin.
void wait_for_readers() {
    if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0) usleep(10000);
}

// The live shape set, as the classifier walks it (up to its end slot).
Result<std::vector<pspxdp_filter_shape_slot>> read_live_table(int fd,
                                                              const pspxdp_filter_state &st) {
    std::vector<pspxdp_filter_shape_slot> out;
    const uint32_t base = st.active_set ? PSPXDP_FILTER_SET_SLOTS : 0;
    for (uint32_t i = 0; i < PSPXDP_FILTER_SET_SLOTS; ++i) {
        uint32_t key = base + i;
        pspxdp_filter_shape_slot slot{};
        if (bpf_map_lookup_elem(fd, &key, &slot) != 0) return sys_error("read filter_shapes");
        if (!slot.mask.shape.fields) break;
        out.push_back(slot);
    }
    return out;
}

bool same_table(const std::vector<pspxdp_filter_shape_slot> &a,
                const std::vector<pspxdp_filter_shape_slot> &b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
}

// Writes table into the idle set, flips to it, waits for the old set's readers.
Result<void> publish(const FilterMaps &m, pspxdp_filter_state &st,
                     const std::vector<pspxdp_filter_shape_slot> &table) {
    const uint32_t set = st.active_set ? 0 : 1;
    std::vector<uint32_t> keys;
    std::vector<pspxdp_filter_shape_slot> slots = table;
    slots.push_back(pspxdp_filter_shape_slot{}); // the end
    for (uint32_t i = 0; i < slots.size(); ++i) keys.push_back(set * PSPXDP_FILTER_SET_SLOTS + i);
    uint32_t count = uint32_t(slots.size());
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (bpf_map_update_batch(m.shapes, keys.data(), slots.data(), &count, &opts) != 0)
        return sys_error("write filter_shapes");
    st.active_set = set;
    if (auto r = write_state(m.state, st); !r) return r;
    wait_for_readers();
    return {};
}

Result<void> upsert(int fd, const EntryMap &from, const EntryMap &to) {
    std::vector<pspxdp_filter_key> keys;
    std::vector<pspxdp_filter_entry> values;
    for (const auto &[kb, v] : to) {
        auto it = from.find(kb);
        if (it != from.end() && std::memcmp(&it->second, &v, sizeof(v)) == 0) continue;
        keys.push_back(key_of(kb));
        values.push_back(v);
    }
    constexpr size_t kChunk = 8192;
    for (size_t i = 0; i < keys.size(); i += kChunk) {
        uint32_t count = uint32_t(std::min(kChunk, keys.size() - i));
        LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
        if (bpf_map_update_batch(fd, &keys[i], &values[i], &count, &opts) != 0)
            return errno == E2BIG || errno == ENOMEM
                       ? err("filter_entries is full (" +
                             std::to_string(PSPXDP_MAX_FILTER_ENTRIES) + " entries)")
                       : sys_error("write filter_entries");
    }
    return {};
}

Result<void> remove_stale(int fd, const EntryMap &from, const EntryMap &to) {
    std::vector<pspxdp_filter_key> keys;
    for (const auto &[kb, v] : from)
        if (!to.count(kb)) keys.push_back(key_of(kb));
    constexpr size_t kChunk = 8192;
    for (size_t i = 0; i < keys.size(); i += kChunk) {
        uint32_t count = uint32_t(std::min(kChunk, keys.size() - i));
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        if (bpf_map_delete_batch(fd, &keys[i], &count, &opts) != 0)
            return sys_error("delete from filter_entries");
    }
    return {};
}

// Brings filter_entries from `current` (what it holds) to `target`, and the
// live shape set to target's, keeping every shape's best order a lower bound
// of its entries at every step.
Result<void> sync_entries(const FilterMaps &m, pspxdp_filter_state &st, const EntryMap &current,
                          const EntryMap &target) {
    const auto target_table = shape_table(target);
    auto live = read_live_table(m.shapes, st);
    if (!live) return live.failure();

    EntryMap both = current; // every entry present at some point of the change
    for (const auto &[kb, v] : target) {
        auto [it, inserted] = both.try_emplace(kb, v);
        if (!inserted && v.order < it->second.order) it->second = v;
    }
    const auto both_table = shape_table(both);
    if (both.size() <= PSPXDP_MAX_FILTER_ENTRIES && both_table.size() <= PSPXDP_MAX_FILTER_SHAPES) {
        if (!same_table(*live, both_table))
            if (auto r = publish(m, st, both_table); !r) return r;
        if (auto r = upsert(m.entries, current, target); !r) return r;
        if (auto r = remove_stale(m.entries, current, target); !r) return r;
        if (!same_table(both_table, target_table))
            if (auto r = publish(m, st, target_table); !r) return r;
        return {};
    }
    // Old and new together do not fit: make room first. Removed filters stop
    // matching a moment before the new ones start.
    if (auto r = remove_stale(m.entries, current, target); !r) return r;
    if (auto r = publish(m, st, target_table); !r) return r;
    return upsert(m.entries, current, target);
}

Error capacity_error(const std::string &what, size_t need, size_t max) {
    return refuse("the filters would need " + std::to_string(need) + " " + what + ", at most " +
                  std::to_string(max) + " fit");
}

Result<void> check_classes(const FilterMaps &m, std::span<const StoredFilter> filters) {
    if (m.class_config < 0) return {};
    std::set<uint32_t> checked;
    std::optional<std::set<uint32_t>> inner; // classes with children (class trees)
    for (const StoredFilter &f : filters) {
        uint32_t raw = f.spec.classid.raw();
        if (!checked.insert(raw).second) continue;
        pspxdp_class_config cfg{};
        if (bpf_map_lookup_elem(m.class_config, &raw, &cfg) == 0) {
            if (!inner) {
                auto all = common::read_class_configs(m.class_config);
                if (!all) return err(all.error());
                inner.emplace();
                for (const auto &e : *all)
                    if (pspxdp_classid_raw(e.config.parent))
                        inner->insert(pspxdp_classid_raw(e.config.parent));
            }
            if (inner->count(raw))
                return refuse("classid " + format_classid(f.spec.classid) +
                              ": the class has children and holds no frames (filter \"" +
                              format_filter(f.spec) + "\"): name one of its leaves");
            continue;
        }
        if (errno != ENOENT) return sys_error("read class_config");
        const std::string id = format_classid(f.spec.classid);
        return refuse("classid " + id + ": no such class (filter \"" + format_filter(f.spec) +
                      "\"; create it with: pspxdp class add DEV " + id + " RATE)");
    }
    return {};
}

// Writes `after` over `before`: specs, counters of new ids, entries, shapes.
// On a map error puts `before` back as far as the maps let it.
Result<void> commit(const FilterMaps &m, const std::vector<StoredFilter> &before,
                    const std::vector<StoredFilter> &after, uint64_t next_seq) {
    const EntryMap target = build_entries(after);
    if (after.size() > PSPXDP_MAX_FILTERS)
        return capacity_error("filters", after.size(), PSPXDP_MAX_FILTERS);
    if (target.size() > PSPXDP_MAX_FILTER_ENTRIES)
        return capacity_error("entries (port ranges expand into aligned blocks)", target.size(),
                              PSPXDP_MAX_FILTER_ENTRIES);
    if (const size_t shapes = shape_table(target).size(); shapes > PSPXDP_MAX_FILTER_SHAPES)
        return capacity_error("shapes (distinct field sets, prefix lengths and port blocks)",
                              shapes, PSPXDP_MAX_FILTER_SHAPES);
    if (auto r = check_classes(m, after); !r) return r;

    auto current = read_entries(m.entries);
    if (!current) return current.failure();
    auto read = read_state(m.state);
    if (!read) return read.failure();
    pspxdp_filter_state st = *read;
    st.next_seq = std::max<uint64_t>(st.next_seq, next_seq);

    std::map<uint32_t, const StoredFilter *> old_by_id;
    for (const StoredFilter &f : before) old_by_id[f.id] = &f;
    const int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) return sys_error("number of CPUs", ncpu);
    const std::vector<pspxdp_filter_stats> zero(size_t(ncpu), pspxdp_filter_stats{});

    auto write_specs = [&]() -> Result<void> {
        for (const StoredFilter &f : after) {
            const pspxdp_filter v = to_map_value(f);
            auto old = old_by_id.find(f.id);
            const bool had_id = old != old_by_id.end();
            if (had_id) {
                const pspxdp_filter was = to_map_value(*old->second);
                if (std::memcmp(&was, &v, sizeof(v)) == 0) continue;
            }
            // A new filter's counters start at zero, also on an id a deleted one had.
            if ((!had_id || !same_identity(old->second->spec, f.spec)) &&
                bpf_map_update_elem(m.stats, &f.id, zero.data(), BPF_ANY) != 0)
                return sys_error("reset filter_stats");
            if (bpf_map_update_elem(m.filters, &f.id, &v, BPF_ANY) != 0)
                return errno == E2BIG || errno == ENOMEM ? err("filters map is full")
                                                         : sys_error("write filters");
        }
        return {};
    };
    auto r = write_specs();
    if (r) r = sync_entries(m, st, *current, target);
    if (!r) {
        // Roll back: the entries and shapes of `before`, then its specs.
        if (auto now = read_entries(m.entries); now) {
            if (auto again = read_state(m.state); again) {
                pspxdp_filter_state now_st = *again;
                (void)sync_entries(m, now_st, *now, build_entries(before));
            }
        }
        for (const StoredFilter &f : before) {
            const pspxdp_filter v = to_map_value(f);
            (void)bpf_map_update_elem(m.filters, &f.id, &v, BPF_ANY);
        }
        for (const StoredFilter &f : after)
            if (!old_by_id.count(f.id)) (void)bpf_map_delete_elem(m.filters, &f.id);
        return r;
    }
    std::set<uint32_t> kept;
    for (const StoredFilter &f : after) kept.insert(f.id);
    for (const StoredFilter &f : before)
        if (!kept.count(f.id) && bpf_map_delete_elem(m.filters, &f.id) != 0 && errno != ENOENT)
            return sys_error("delete from filters");
    // next_seq moved (an add) but no flip wrote it: write it now.
    if (st.next_seq != read->next_seq) return write_state(m.state, st);
    return {};
}

bool by_order(const StoredFilter &a, const StoredFilter &b) { return a.order() < b.order(); }

uint64_t next_seq_after(const std::vector<StoredFilter> &filters, uint64_t stored) {
    uint64_t next = std::max<uint64_t>(stored, 1);
    for (const StoredFilter &f : filters) next = std::max(next, f.seq + 1);
    return next;
}

// The lowest id not in `taken`, or none.
std::optional<uint32_t> free_id(const std::set<uint32_t> &taken) {
    uint32_t id = 0;
    for (uint32_t t : taken) { // ascending
        if (t != id) break;
        ++id;
    }
    if (id >= PSPXDP_MAX_FILTERS) return std::nullopt;
    return id;
}

} // namespace

void canonical_cgroup_path(FilterSpec &spec) {
    if (!spec.cgroup || spec.cgroup->id) return;
    auto m = common::cgroup2_mount();
    if (!m) return;
    if (auto rel = common::cgroup_rel_path(*m, spec.cgroup->path)) spec.cgroup->path = *rel;
}

Result<void> resolve_filter_cgroup(FilterSpec &spec) {
    if (!spec.cgroup || spec.cgroup->id) return {};
    auto dir = common::resolve_cgroup(spec.cgroup->path);
    if (!dir) return dir.failure();
    spec.cgroup->path = dir->path;
    spec.cgroup->id = dir->id;
    spec.cgroup->level = dir->level;
    return {};
}

Result<std::vector<StoredFilter>> read_filters(const FilterMaps &m) {
    auto d = dump<uint32_t, pspxdp_filter>(m.filters, "filters");
    if (!d) return d.failure();
    std::vector<StoredFilter> out;
    for (const auto &[id, v] : *d) {
        auto f = from_map_value(id, v);
        if (!f) return f.failure();
        out.push_back(*f);
    }
    std::sort(out.begin(), out.end(), by_order);
    return out;
}

Result<std::vector<FilterInfo>> read_filter_infos(const FilterMaps &m, bool with_stats) {
    auto filters = read_filters(m);
    if (!filters) return filters.failure();
    std::vector<FilterInfo> out;
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<pspxdp_filter_stats> per_cpu(size_t(std::max(ncpu, 1)));
    std::optional<common::Cgroup2Mount> mount;
    for (const StoredFilter &f : *filters) {
        FilterInfo info{f, {}};
        if (f.spec.cgroup) {
            if (!mount)
                if (auto mt = common::cgroup2_mount()) mount = *mt;
            info.cgroup_gone =
                !mount || common::cgroup_id_now(*mount, f.spec.cgroup->path) != f.spec.cgroup->id;
        }
        if (with_stats) {
            if (bpf_map_lookup_elem(m.stats, &f.id, per_cpu.data()) != 0)
                return sys_error("read filter_stats");
            for (const auto &s : per_cpu) {
#define PSPXDP_SUM(name, help) info.stats.name += s.name;
                PSPXDP_FILTER_COUNTERS(PSPXDP_SUM)
#undef PSPXDP_SUM
            }
        }
        out.push_back(info);
    }
    return out;
}

Result<void> add_filter(const FilterMaps &m, const FilterSpec &words) {
    FilterSpec spec = words;
    if (auto r = resolve_filter_cgroup(spec); !r) return r;
    auto before = read_filters(m);
    if (!before) return before.failure();
    for (const StoredFilter &f : *before)
        if (same_identity(f.spec, spec))
            return refuse("filter \"" + format_filter(spec) + "\": duplicate of \"" +
                          format_filter(f.spec) + "\" (same fields and pref)");
    auto st = read_state(m.state);
    if (!st) return st.failure();
    std::set<uint32_t> taken;
    for (const StoredFilter &f : *before) taken.insert(f.id);
    auto id = free_id(taken);
    if (!id) return capacity_error("filters", before->size() + 1, PSPXDP_MAX_FILTERS);
    const uint64_t seq = next_seq_after(*before, st->next_seq);
    std::vector<StoredFilter> after = *before;
    after.push_back(StoredFilter{*id, seq, spec});
    return commit(m, *before, after, seq + 1);
}

Result<std::vector<FilterSpec>> delete_filters(const FilterMaps &m, const FilterSelect &words) {
    FilterSelect sel = words;
    canonical_cgroup_path(sel.spec);
    auto before = read_filters(m);
    if (!before) return before.failure();
    std::vector<StoredFilter> after;
    std::vector<FilterSpec> gone;
    for (const StoredFilter &f : *before) {
        if (sel.selects(f.spec))
            gone.push_back(f.spec);
        else
            after.push_back(f);
    }
    if (gone.empty()) return refuse("no filter matches \"" + sel.text() + "\"");
    if (sel.has_fields && !sel.has_pref && gone.size() > 1) {
        std::string prefs;
        for (const FilterSpec &s : gone)
            prefs += (prefs.empty() ? "" : ", ") + std::to_string(s.pref);
        return refuse("\"" + sel.text() + "\" names " + std::to_string(gone.size()) +
                      " filters (pref " + prefs + "): add pref N");
    }
    auto st = read_state(m.state);
    if (!st) return st.failure();
    if (auto r = commit(m, *before, after, st->next_seq); !r) return r.failure();
    return gone;
}

Result<void> replace_filters(const FilterMaps &m, std::span<const FilterSpec> given) {
    std::vector<FilterSpec> specs(given.begin(), given.end());
    for (FilterSpec &s : specs) canonical_cgroup_path(s);
    // Duplicates within the list, named by position (the caller knows the lines).
    std::map<std::string, size_t> identity; // pref + fields -> first position
    for (size_t i = 0; i < specs.size(); ++i) {
        if (!specs[i].fields())
            return refuse("filter " + std::to_string(i + 1) + " matches no field");
        FilterSpec key = specs[i];
        key.classid = ClassId{};
        auto [it, fresh] = identity.try_emplace(format_filter(key), i);
        if (!fresh)
            return refuse("filter " + std::to_string(i + 1) + " \"" + format_filter(specs[i]) +
                          "\": duplicate of filter " + std::to_string(it->second + 1) +
                          " (same fields and pref)");
    }
    auto before = read_filters(m);
    if (!before) return before.failure();
    auto st = read_state(m.state);
    if (!st) return st.failure();

    std::map<std::string, const StoredFilter *> existing;
    std::set<uint32_t> taken;
    for (const StoredFilter &f : *before) {
        FilterSpec key = f.spec;
        key.classid = ClassId{};
        existing[format_filter(key)] = &f;
        taken.insert(f.id);
    }
    for (FilterSpec &s : specs) {
        if (!s.cgroup || s.cgroup->id) continue;
        FilterSpec key = s;
        key.classid = ClassId{};
        auto r = resolve_filter_cgroup(s);
        auto it = existing.find(format_filter(key));
        if (!r && it != existing.end() && it->second->spec.cgroup)
            s.cgroup = it->second->spec.cgroup; // gone since: the filter stays as it is
        else if (!r)
            return r;
    }
    uint64_t next_seq = next_seq_after(*before, st->next_seq);
    // Equal prefs keep the list's order. A filter that stays keeps its
    // sequence number while that order allows (then apply(save) writes
    // nothing); the others get new ones, which come after all earlier ones.
    std::map<uint32_t, uint64_t> last_seq; // pref -> last seq given in that pref
    std::vector<StoredFilter> after;
    std::vector<bool> is_new;
    std::set<uint32_t> kept; // ids of filters that stay
    for (size_t i = 0; i < specs.size(); ++i) {
        FilterSpec key = specs[i];
        key.classid = ClassId{};
        auto it = existing.find(format_filter(key));
        const StoredFilter *old = it == existing.end() ? nullptr : it->second;
        uint64_t &last = last_seq[specs[i].pref];
        StoredFilter f{0, 0, specs[i]};
        f.seq = old && old->seq > last ? old->seq : next_seq++;
        last = f.seq;
        if (old) kept.insert(f.id = old->id);
        is_new.push_back(!old);
        after.push_back(f);
    }
    // New filters take ids no filter had before first, so a deleted filter's
    // counters are not handed on while its entries may still match; then the
    // ids of deleted filters.
    std::vector<uint32_t> removed;
    for (const StoredFilter &f : *before)
        if (!kept.count(f.id)) removed.push_back(f.id);
    std::sort(removed.begin(), removed.end());
    uint32_t cursor = 0;
    size_t next_removed = 0;
    for (size_t i = 0; i < after.size(); ++i) {
        if (!is_new[i]) continue;
        while (cursor < PSPXDP_MAX_FILTERS && taken.count(cursor)) ++cursor;
        if (cursor < PSPXDP_MAX_FILTERS)
            after[i].id = cursor++;
        else if (next_removed < removed.size())
            after[i].id = removed[next_removed++];
        else
            return capacity_error("filters", specs.size(), PSPXDP_MAX_FILTERS);
    }
    std::sort(after.begin(), after.end(), by_order);
    return commit(m, *before, after, next_seq);
}

} // namespace pspxdp::control
