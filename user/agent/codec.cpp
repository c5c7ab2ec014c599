// docs/design.md §11.1.
#include "agent/codec.hpp"

#include <charconv>

namespace pspxdp::agent {

using etcd::Json;

GroupKeys::GroupKeys(std::string_view group)
    : prefix("/pspxdp/group/" + std::string(group) + "/") {}

Result<void> check_name(std::string_view what, std::string_view name) {
    if (name.empty() || name.size() > 64)
        return refuse(std::string(what) + " \"" + std::string(name) + "\": 1 to 64 characters");
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
            return refuse(std::string(what) + " \"" + std::string(name) +
                          "\": only letters, digits, '.', '_' and '-'");
    return {};
}

std::string roster_json(const cluster::Roster &r) {
    Json members = Json::object();
    for (const auto &[host, m] : r.members) {
        members[host] = {{"floor_bps", m.floor_bps}, {"weight", m.weight}, {"classid", m.classid}};
        // Left out when 0 (a class without children): the rosters written before.
        if (m.classes_below) members[host]["classes_below"] = m.classes_below;
    }
    Json j{{"budget_bps", r.budget_bps}, {"members", members}};
    // Left out when 0 (floors never released): the rosters written before.
    if (r.orphan_after_ns) j["orphan_after_ns"] = r.orphan_after_ns;
    return j.dump();
}

std::string alloc_json(const cluster::Allocation &a) {
    Json j{{"epoch", a.epoch}, {"rate_bps", a.rate_bps}};
    // Left out when empty: every member acknowledges the epoch itself.
    if (!a.ack_from.empty()) j["ack_from"] = a.ack_from;
    return j.dump();
}

std::string live_json(const cluster::Live &l) {
    Json j{{"lease", l.lease}, {"ack_epoch", l.ack_epoch}, {"demand_bps", l.demand_bps}};
    if (!l.node.empty()) j["node"] = l.node;
    if (!l.instance.empty()) j["instance"] = l.instance;
    return j.dump();
}

namespace {

// nlohmann's exceptions (a missing field, a wrong type) as one line.
template <class T, class F>
Result<T> parse_json(std::string_view what, std::string_view text, F fn) {
    try {
        return fn(Json::parse(text));
    } catch (const Json::exception &e) {
        return err(std::string(what) + ": " + e.what());
    }
}

} // namespace

Result<cluster::Roster> parse_roster(std::string_view text) {
    return parse_json<cluster::Roster>("roster", text, [](const Json &j) {
        cluster::Roster r;
        r.budget_bps = j.at("budget_bps").get<uint64_t>();
        r.orphan_after_ns = j.value("orphan_after_ns", uint64_t(0));
        for (const auto &[host, m] : j.at("members").items())
            r.members[host] =
                cluster::Member{m.at("floor_bps").get<uint64_t>(), m.at("weight").get<uint32_t>(),
                                m.at("classid").get<uint32_t>(), m.value("classes_below", 0u)};
        return r;
    });
}

Result<cluster::Allocation> parse_alloc(std::string_view text) {
    return parse_json<cluster::Allocation>("alloc", text, [](const Json &j) {
        cluster::Allocation a;
        a.epoch = j.at("epoch").get<uint64_t>();
        a.rate_bps = j.at("rate_bps").get<std::map<std::string, uint64_t>>();
        if (j.contains("ack_from"))
            a.ack_from = j.at("ack_from").get<std::map<std::string, uint64_t>>();
        return a;
    });
}

Result<cluster::Live> parse_live(std::string_view text) {
    return parse_json<cluster::Live>("live", text, [](const Json &j) {
        return cluster::Live{j.at("lease").get<uint64_t>(), j.at("ack_epoch").get<uint64_t>(),
                             j.at("demand_bps").get<uint64_t>(), j.value("node", ""),
                             j.value("instance", "")};
    });
}

// The roster and the allocation are one record each, kept with the
// revision that wrote it (0 and none once deleted).
template <class T>
static Result<void> take_record(std::optional<T> &record, int64_t &rev, const etcd::KeyValue &kv,
                                bool deleted, Result<T> (*parse)(std::string_view)) {
    if (deleted) {
        record.reset();
        rev = 0;
        return {};
    }
    auto r = parse(kv.value);
    if (!r) return r.failure();
    record = *r;
    rev = kv.mod_revision;
    return {};
}

Result<void> apply_kv(cluster::View &view, const GroupKeys &keys, const etcd::KeyValue &kv,
                      bool deleted) {
    if (kv.key == keys.roster())
        return take_record(view.roster, view.roster_rev, kv, deleted, parse_roster);
    if (kv.key == keys.alloc())
        return take_record(view.alloc, view.alloc_rev, kv, deleted, parse_alloc);
    if (std::string live = keys.live(""); kv.key.starts_with(live)) {
        std::string host = kv.key.substr(live.size());
        if (deleted) {
            view.live.erase(host);
            return {};
        }
        auto l = parse_live(kv.value);
        if (!l) return l.failure();
        view.live[host] = *l;
    }
    return {};
}

Result<cluster::View> view_from_range(const GroupKeys &keys, const etcd::RangeAnswer &range) {
    cluster::View v;
    v.revision = range.revision;
    for (const auto &kv : range.kvs)
        if (auto r = apply_kv(v, keys, kv, false); !r) return r.failure();
    return v;
}

std::string rate_log_line(uint64_t time_ns, uint64_t rate_bps) {
    return std::to_string(time_ns) + " " + std::to_string(rate_bps) + "\n";
}

Result<std::vector<cluster::RateChange>> parse_rate_log(std::string_view text) {
    std::vector<cluster::RateChange> out;
    size_t line_no = 0;
    while (!text.empty()) {
        ++line_no;
        size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        if (line.empty() || line[0] == '#') continue;
        cluster::RateChange c;
        const char *end = line.data() + line.size();
        auto a = std::from_chars(line.data(), end, c.time_ns);
        auto b = a.ec == std::errc() && a.ptr < end && *a.ptr == ' '
                     ? std::from_chars(a.ptr + 1, end, c.rate_bps)
                     : std::from_chars_result{a.ptr, std::errc::invalid_argument};
        if (b.ec != std::errc() || b.ptr != end)
            return refuse("line " + std::to_string(line_no) + ": \"" + std::string(line) +
                          "\" is not \"TIME_NS RATE_BPS\"");
        if (!out.empty() && c.time_ns < out.back().time_ns)
            return refuse("line " + std::to_string(line_no) + ": time goes back");
        out.push_back(c);
    }
    return out;
}

} // namespace pspxdp::agent
