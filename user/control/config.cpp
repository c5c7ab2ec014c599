#include "control/config.hpp"

#include "common/text.hpp"

#include "core/framing.hpp"
#include "core/units.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

namespace pspxdp::control {

namespace {

std::string quoted(std::string_view w) { return "\"" + std::string(w) + "\""; }

// "line 3: " for what came from a file, "" for what came from a command.
std::string at_line(size_t line) { return line ? "line " + std::to_string(line) + ": " : ""; }

// A measured-looking rate for messages about ceilings ("986.996Mbit").
std::string approx_rate(uint64_t bps) {
    char buf[48];
    if (bps >= 1'000'000'000)
        std::snprintf(buf, sizeof buf, "%.3fGbit", double(bps) / 1e9);
    else if (bps >= 1'000'000)
        std::snprintf(buf, sizeof buf, "%.3fMbit", double(bps) / 1e6);
    else
        std::snprintf(buf, sizeof buf, "%.3fKbit", double(bps) / 1e3);
    return buf;
}

bool is_time_word(std::string_view w) {
    size_t i = w.size();
    while (i > 0 && std::isalpha(static_cast<unsigned char>(w[i - 1]))) --i;
    std::string unit(w.substr(i));
    for (char &c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
    static const std::set<std::string> kTimeUnits = {"ns",   "nsec",  "us", "usec", "usecs", "ms",
                                                     "msec", "msecs", "s",  "sec",  "secs"};
    return kTimeUnits.count(unit) > 0;
}

// A time word of a class (tc: a bare number is microseconds), within bounds.
Result<uint64_t> class_time(std::string_view key, std::string_view w) {
    auto t = parse_duration_ns(w, 1000);
    if (!t) return refuse(std::string(key) + " " + quoted(w) + ": " + t.error());
    if (*t < kMinTimeNs || *t > kMaxTimeNs)
        return refuse(std::string(key) + " " + quoted(w) + ": out of range " +
                      format_duration(kMinTimeNs) + ".." + format_duration(kMaxTimeNs));
    return *t;
}

const std::string &rate_word(const ClassSpec &c, std::string &buf) {
    buf = c.rate_word.empty() ? format_rate(c.rate_bps) : c.rate_word;
    return buf;
}

} // namespace

Result<uint32_t> parse_class_id(std::string_view word) {
    auto id = parse_classid(word);
    if (!id) return refuse(id.error());
    // 0:0 is "no class" to the classifier; X:0 names a qdisc in tc, not a class.
    if (id->minor == 0)
        return refuse("class id " + quoted(word) + ": minor 0 names a qdisc, not a class");
    return id->raw();
}

pspxdp_class_config ClassSpec::to_config(uint32_t slot) const {
    pspxdp_class_config c{};
    c.kind = kind;
    c.rate_bps = paced() ? rate_bps : 0;
    c.limit_bytes = limit_bytes;
    c.limit_ns = limit_ns;
    c.ce_threshold_ns = ce_threshold_ns;
    c.burst_bytes = uint32_t(burst.bytes);
    c.burst_mtus = uint32_t(burst.mtus);
    c.flags = flows ? 0 : PSPXDP_CLASS_FLOWS_OFF;
    c.slot = slot;
    c.parent = pspxdp_classid_of(parent);
    c.ceil_bps = paced() ? ceil_bps : 0;
    c.prio = prio;
    return c;
}

ClassSpec ClassSpec::from_config(uint32_t classid, const pspxdp_class_config &c) {
    ClassSpec s;
    s.classid = classid;
    s.kind = c.kind == PSPXDP_CLASS_PACED ? PSPXDP_CLASS_PACED : PSPXDP_CLASS_NORMAL;
    s.rate_bps = s.paced() ? c.rate_bps : 0;
    s.limit_bytes = c.limit_bytes;
    s.limit_ns = c.limit_ns;
    s.ce_threshold_ns = c.ce_threshold_ns;
    s.burst = BurstSize{c.burst_bytes, c.burst_mtus};
    s.flows = !(c.flags & PSPXDP_CLASS_FLOWS_OFF);
    s.parent = pspxdp_classid_raw(c.parent);
    s.ceil_bps = s.paced() ? c.ceil_bps : 0;
    s.prio = c.prio;
    return s;
}

bool ClassSpec::same_config(const ClassSpec &o) const {
    return classid == o.classid && kind == o.kind && rate_bps == o.rate_bps &&
           limit_bytes == o.limit_bytes && limit_ns == o.limit_ns &&
           ce_threshold_ns == o.ce_threshold_ns && burst.bytes == o.burst.bytes &&
           burst.mtus == o.burst.mtus && flows == o.flows && parent == o.parent &&
           ceil_bps == o.ceil_bps && prio == o.prio;
}

const std::vector<std::string_view> &class_words() {
    static const std::vector<std::string_view> words = {"limit", "ce_threshold", "burst", "flows"};
    return words;
}

const std::vector<std::string_view> &class_tree_words() {
    static const std::vector<std::string_view> words = {"parent", "rate", "ceil", "prio"};
    return words;
}

// tc's htb words of a class tree (parent, rate, ceil, prio), anywhere after
// CLASSID: taken out of `words` (rate RATE becomes the positional RATE).
static Result<void> take_tree_words(std::vector<std::string> &words, ClassSpec &c) {
    const std::string cls = "class " + words[0];
    std::vector<std::string> rest{words[0]};
    bool have_parent = false, have_ceil = false, have_prio = false, have_rate = false;
    std::string rate;
    for (size_t i = 1; i < words.size(); ++i) {
        const std::string &key = words[i];
        if (std::find(class_tree_words().begin(), class_tree_words().end(), key) ==
            class_tree_words().end()) {
            rest.push_back(key);
            // The value of another option is not a keyword of ours.
            if (std::find(class_words().begin(), class_words().end(), key) != class_words().end())
                if (i + 1 < words.size()) rest.push_back(words[++i]);
            continue;
        }
        if (i + 1 >= words.size()) return refuse(cls + ": " + quoted(key) + " needs a value");
        const std::string &w = words[++i];
        bool &seen = key == "parent" ? have_parent
                     : key == "ceil" ? have_ceil
                     : key == "prio" ? have_prio
                                     : have_rate;
        if (seen) return refuse(cls + ": " + key + " given twice (" + quoted(w) + ")");
        seen = true;
        if (key == "parent") {
            auto p = parse_class_id(w);
            if (!p) return refuse(cls + ": parent " + p.error());
            if (*p == c.classid)
                return refuse(cls + ": parent " + quoted(w) + " is the class itself");
            c.parent = *p;
        } else if (key == "ceil") {
            auto r = parse_rate_bps(w);
            if (!r) return refuse(cls + ": ceil " + r.error());
            if (!*r) return refuse(cls + ": ceil " + quoted(w) + " must be above 0");
            c.ceil_bps = *r;
        } else if (key == "prio") {
            if (w.size() != 1 || w[0] < '0' || w[0] > '7')
                return refuse(cls + ": prio " + quoted(w) + ": expected 0..7 (as htb)");
            c.prio = uint32_t(w[0] - '0');
        } else {
            rate = w;
        }
    }
    if (have_rate) rest.insert(rest.begin() + 1, rate);
    words = std::move(rest);
    return {};
}

// A ceil below the rate (0 is the rate): the parser's refusal, and
// check_tree()'s for classes that did not come through the parser (a map,
// a group's share, a rate raised under a stored ceil).
static Result<void> check_ceil(const ClassSpec &c, const std::string &cls) {
    if (c.ceil_bps && c.ceil_bps < c.rate_bps)
        return refuse(cls + ": ceil " + format_rate(c.ceil_bps) + " is below its rate " +
                      format_rate(c.rate_bps));
    return {};
}

Result<ClassSpec> parse_class_spec(std::span<const std::string> given) {
    if (given.empty()) return refuse("missing CLASSID (e.g. 1:1)");
    ClassSpec c;
    auto id = parse_class_id(given[0]);
    if (!id) return id.failure();
    c.classid = *id;
    std::vector<std::string> words(given.begin(), given.end());
    if (auto r = take_tree_words(words, c); !r) return r.failure();
    const std::string cls = "class " + words[0];
    if (words.size() < 2) return refuse(cls + ": missing RATE or \"normal\"");
    if (words[1] == "normal") {
        c.kind = PSPXDP_CLASS_NORMAL;
    } else {
        auto r = parse_rate_bps(words[1]);
        if (!r) return refuse(cls + ": " + r.error());
        c.kind = PSPXDP_CLASS_PACED;
        c.rate_bps = *r;
        c.rate_word = words[1];
    }
    bool have_limit = false, have_ce = false, have_burst = false, have_flows = false;
    for (size_t i = 2; i < words.size(); i += 2) {
        const std::string &key = words[i];
        if (std::find(class_words().begin(), class_words().end(), key) == class_words().end())
            return refuse(cls + ": unknown word " + quoted(key) +
                          " (expected limit BYTES|TIME, ce_threshold TIME|off, burst SIZE, flows "
                          "on|off, parent CLASSID, ceil RATE or prio N)");
        if (i + 1 >= words.size()) return refuse(cls + ": " + quoted(key) + " needs a value");
        const std::string &w = words[i + 1];
        if (key == "burst") {
            if (have_burst) return refuse(cls + ": burst given twice (" + quoted(w) + ")");
            have_burst = true;
            if (!c.paced())
                return refuse(cls + ": burst " + quoted(w) +
                              ": needs a paced class (a normal class has no rate to burst above)");
            auto b = parse_burst(w);
            if (!b) return refuse(cls + ": " + b.error());
            if (b->bytes > kMaxBurstBytes || b->mtus > kMaxBurstMtus)
                return refuse(cls + ": burst " + quoted(w) + ": above " +
                              format_bytes(kMaxBurstBytes) + " or " +
                              format_burst(BurstSize{0, kMaxBurstMtus}));
            c.burst = *b;
        } else if (key == "flows") {
            if (have_flows) return refuse(cls + ": flows given twice (" + quoted(w) + ")");
            have_flows = true;
            if (w != "on" && w != "off")
                return refuse(cls + ": flows " + quoted(w) + ": expected on or off");
            c.flows = w == "on";
        } else if (key == "limit") {
            if (have_limit) return refuse(cls + ": limit given twice (" + quoted(w) + ")");
            have_limit = true;
            if (is_time_word(w)) {
                if (!c.paced())
                    return refuse(cls + ": limit " + quoted(w) +
                                  ": a time limit needs a paced class (a normal class has no "
                                  "rate to turn it into bytes); give BYTES");
                auto t = class_time("limit", w);
                if (!t) return refuse(cls + ": " + t.error());
                c.limit_ns = *t;
            } else {
                auto b = parse_bytes(w);
                if (!b) return refuse(cls + ": limit " + quoted(w) + ": " + b.error());
                if (*b < kMinLimitBytes || *b > kMaxLimitBytes)
                    return refuse(cls + ": limit " + quoted(w) + ": out of range " +
                                  format_bytes(kMinLimitBytes) + ".." +
                                  format_bytes(kMaxLimitBytes));
                c.limit_bytes = *b;
            }
        } else {
            if (have_ce) return refuse(cls + ": ce_threshold given twice (" + quoted(w) + ")");
            have_ce = true;
            if (!c.paced())
                return refuse(cls + ": ce_threshold " + quoted(w) +
                              ": needs a paced class (a normal class has no rate to time its "
                              "backlog by)");
            if (w == "off") {
                c.ce_threshold_ns = PSPXDP_CE_THRESHOLD_OFF;
            } else {
                auto t = class_time("ce_threshold", w);
                if (!t) return refuse(cls + ": " + t.error());
                c.ce_threshold_ns = *t;
            }
        }
    }
    if (!c.paced() && (c.ceil_bps || c.prio))
        return refuse(cls + ": ceil and prio need a paced class (a normal class is not in a tree)");
    if (!c.paced() && c.parent)
        return refuse(cls + ": a normal class cannot have a parent (it fills the wire's gaps; "
                            "give the class a rate to place it in a tree)");
    if (auto r = check_ceil(c, cls); !r) return r.failure();
    return c;
}

std::string format_class_spec(const ClassSpec &c) {
    std::string s = format_classid(ClassId::from_raw(c.classid)) + " ";
    if (c.parent) s += "parent " + format_classid(ClassId::from_raw(c.parent)) + " ";
    s += c.paced() ? format_rate(c.rate_bps) : "normal";
    if (c.ceil_bps && c.ceil_bps != c.rate_bps) s += " ceil " + format_rate(c.ceil_bps);
    if (c.prio) s += " prio " + std::to_string(c.prio);
    if (c.limit_bytes)
        s += " limit " + format_bytes(c.limit_bytes);
    else if (c.limit_ns)
        s += " limit " + format_duration(c.limit_ns);
    if (c.ce_threshold_ns == PSPXDP_CE_THRESHOLD_OFF)
        s += " ce_threshold off";
    else if (c.ce_threshold_ns)
        s += " ce_threshold " + format_duration(c.ce_threshold_ns);
    if (c.burst.set()) s += " burst " + format_burst(c.burst);
    if (!c.flows) s += " flows off";
    return s;
}

Result<void> for_each_statement(std::string_view text, const StatementFn &fn) {
    size_t line_no = 0;
    while (!text.empty()) {
        ++line_no;
        const size_t nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        const std::vector<std::string> words = split_words(line.substr(0, line.find('#')));
        if (words.empty()) continue;
        if (auto r = fn(line_no, words); !r)
            return Error{"line " + std::to_string(line_no) + ": " + r.error(), r.exit_code()};
    }
    return {};
}

Result<Config> parse_config(std::string_view text) {
    Config c;
    std::map<uint32_t, size_t> class_line;
    auto read = for_each_statement(
        text, [&](size_t line_no, std::span<const std::string> words) -> Result<void> {
            const std::string &key = words[0];
            std::span<const std::string> rest = words.subspan(1);
            if (key == "line-rate") {
                if (rest.size() != 1) return refuse("expected \"line-rate RATE\"");
                if (c.line_rate_bps) return refuse("line-rate given twice");
                auto r = parse_rate_bps(rest[0]);
                if (!r) return refuse("line-rate: " + r.error());
                c.line_rate_bps = *r;
            } else if (key == "class") {
                auto cs = parse_class_spec(rest);
                if (!cs) return refuse(cs.error());
                if (auto [it, fresh] = class_line.emplace(cs->classid, line_no); !fresh)
                    return refuse("class " + rest[0] + " given twice (first on line " +
                                  std::to_string(it->second) + ")");
                c.classes.push_back(*cs);
                c.classes.back().line = line_no;
            } else if (key == "default") {
                if (rest.size() != 1) return refuse("expected \"default CLASSID\"");
                if (c.default_classid) return refuse("default given twice");
                auto id = parse_class_id(rest[0]);
                if (!id) return refuse(id.error());
                c.default_classid = *id;
            } else if (key == "prio-direct") {
                if (rest.size() != 1 || (rest[0] != "on" && rest[0] != "off"))
                    return refuse("expected \"prio-direct on\" or \"prio-direct off\"");
                if (c.prio_direct) return refuse("prio-direct given twice");
                c.prio_direct = rest[0] == "on";
            } else if (key == "filter") {
                auto f = parse_filter(rest);
                if (!f) return refuse(f.error());
                c.filters.push_back(ConfigFilter{*f, line_no});
            } else {
                return refuse("unknown statement " + quoted(key) +
                              " (expected line-rate, class, default, prio-direct or filter)");
            }
            return {};
        });
    if (!read) return read.failure();
    return c;
}

Result<std::string> read_text(const std::string &path) {
    std::string text;
    if (path == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        return text;
    }
    std::ifstream f(path, std::ios::binary);
    if (!f) return refuse(path + ": " + common::errno_text(errno));
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (f.bad()) return refuse(path + ": " + common::errno_text(errno));
    return text;
}

Result<Config> load_config(const std::string &path) {
    auto text = read_text(path);
    if (!text) return text.failure();
    auto c = parse_config(*text);
    if (!c) return refuse(path + ": " + c.error());
    return c;
}

std::string format_config(const Config &c, const std::vector<std::string> &header) {
    std::string s;
    for (const auto &h : header) s += "# " + h + "\n";
    if (c.line_rate_bps) s += "line-rate " + format_rate(*c.line_rate_bps) + "\n";
    for (const auto &cs : c.classes) s += "class " + format_class_spec(cs) + "\n";
    if (c.default_classid)
        s += "default " + format_classid(ClassId::from_raw(*c.default_classid)) + "\n";
    if (c.prio_direct) s += std::string("prio-direct ") + (*c.prio_direct ? "on" : "off") + "\n";
    for (const auto &f : c.filters) s += "filter " + format_filter(f.spec) + "\n";
    return s;
}

Result<void> check_rates(const std::vector<ClassSpec> &classes, uint64_t line_rate_bps,
                         const std::string &dev, uint32_t mtu_bytes) {
    Framing framing;
    framing.mtu_bytes = mtu_bytes;
    const uint64_t ceiling = framing.class_ceiling_bps(line_rate_bps);
    const uint32_t frame = framing.max_frame_len();
    unsigned __int128 sum = 0;
    std::string w;
    for (const auto &c : classes) {
        if (!c.paced()) continue;
        const std::string cls = at_line(c.line) + "class " +
                                format_classid(ClassId::from_raw(c.classid)) + ": rate " +
                                quoted(rate_word(c, w));
        if (line_rate_bps == 0)
            return refuse(cls + ": the line rate of " + dev + " is unknown (pspxdp change " + dev +
                          " line-rate RATE)");
        if (c.rate_bps > ceiling)
            return refuse(cls + " is above what one class can reach on " + dev + "'s " +
                          format_rate(line_rate_bps) + " wire: " + approx_rate(ceiling) + " (" +
                          std::to_string(framing.l2_bytes(frame)) + "/" +
                          std::to_string(framing.wire_bytes(frame)) + " of it, " +
                          std::to_string(frame) + "-byte frames at MTU " +
                          std::to_string(mtu_bytes) + ")");
        // A bound below one largest frame would hold that frame forever.
        if (c.burst.bytes && c.burst.bytes < framing.l2_bytes(frame))
            return refuse(at_line(c.line) + "class " +
                          format_classid(ClassId::from_raw(c.classid)) + ": burst " +
                          format_burst(c.burst) + " is below one largest frame (" +
                          std::to_string(framing.l2_bytes(frame)) + " bytes at MTU " +
                          std::to_string(mtu_bytes) + " of " + dev + ")");
        if (c.ceil_bps > line_rate_bps)
            return refuse(at_line(c.line) + "class " +
                          format_classid(ClassId::from_raw(c.classid)) + ": ceil " +
                          format_rate(c.ceil_bps) + " is above the line rate " +
                          format_rate(line_rate_bps) + " of " + dev);
        if (c.parent) continue; // within its parent's rate (check_tree)
        sum += c.rate_bps;
        if (sum > line_rate_bps)
            return refuse(cls + ": paced rates would sum to " +
                          (sum > UINT64_MAX ? std::string("more than 2^64 bit/s")
                                            : format_rate(uint64_t(sum))) +
                          ", above the line rate " + format_rate(line_rate_bps) + " of " + dev);
    }
    return check_tree(classes);
}

Result<void> check_tree(const std::vector<ClassSpec> &classes) {
    std::map<uint32_t, const ClassSpec *> by_id;
    for (const auto &c : classes) by_id[c.classid] = &c;
    std::map<uint32_t, std::vector<const ClassSpec *>> children;
    auto name = [](uint32_t id) { return "class " + format_classid(ClassId::from_raw(id)); };
    for (const auto &c : classes)
        if (auto r = check_ceil(c, at_line(c.line) + name(c.classid)); !r) return r;
    for (const auto &c : classes) {
        if (!c.parent) continue;
        const std::string cls = at_line(c.line) + name(c.classid);
        auto p = by_id.find(c.parent);
        if (p == by_id.end())
            return refuse(cls + ": parent " + format_classid(ClassId::from_raw(c.parent)) +
                          " does not exist (add it first, or in the same change)");
        if (!p->second->paced())
            return refuse(cls + ": parent " + format_classid(ClassId::from_raw(c.parent)) +
                          " is a normal class (a parent needs a rate to share)");
        unsigned depth = 1;
        for (uint32_t a = c.parent; a; a = by_id.count(a) ? by_id[a]->parent : 0) {
            if (a == c.classid) return refuse(cls + ": its parents form a cycle");
            if (++depth > 8)
                return refuse(cls + ": the tree is deeper than 8 levels (htb's limit)");
        }
        const ClassSpec &pp = *p->second;
        const uint64_t ceil = c.ceil_bps ? c.ceil_bps : c.rate_bps;
        const uint64_t pceil = pp.ceil_bps ? pp.ceil_bps : pp.rate_bps;
        if (ceil > pceil)
            return refuse(cls + ": ceil " + format_rate(ceil) + " is above its parent " +
                          format_classid(ClassId::from_raw(c.parent)) + "'s ceil " +
                          format_rate(pceil));
        children[c.parent].push_back(&c);
    }
    for (const auto &[parent, kids] : children) {
        uint64_t sum = 0;
        for (const ClassSpec *k : kids) sum += k->rate_bps;
        const ClassSpec &p = *by_id[parent];
        if (sum > p.rate_bps)
            return refuse(
                at_line(kids.back()->line) + name(parent) + ": its children's rates sum to " +
                format_rate(sum) + ", above its rate " + format_rate(p.rate_bps) + " (" +
                std::to_string(kids.size()) + (kids.size() == 1 ? " child)" : " children)"));
    }
    return {};
}

std::vector<uint32_t> inner_classes(const std::vector<ClassSpec> &classes) {
    std::set<uint32_t> ids;
    for (const auto &c : classes)
        if (c.parent) ids.insert(c.parent);
    return {ids.begin(), ids.end()};
}

Result<void> check_config(const Config &c, uint64_t line_rate_bps, uint32_t default_classid,
                          const std::string &dev, uint32_t mtu_bytes) {
    // Paced rates checked in file order, so a sum error names the class
    // whose line tips it over.
    if (auto r = check_rates(c.classes, line_rate_bps, dev, mtu_bytes); !r) return r;
    std::set<uint32_t> ids;
    for (const auto &cs : c.classes) ids.insert(cs.classid);
    const std::vector<uint32_t> inner = inner_classes(c.classes);
    auto is_inner = [&](uint32_t id) { return std::binary_search(inner.begin(), inner.end(), id); };
    if (is_inner(default_classid))
        return refuse("default class " + format_classid(ClassId::from_raw(default_classid)) +
                      " has children and would hold no frames");
    for (const auto &f : c.filters)
        if (is_inner(f.spec.classid.raw()))
            return refuse(at_line(f.line) + "filter \"" + format_filter(f.spec) + "\": class " +
                          format_classid(f.spec.classid) +
                          " has children and holds no frames (name one of its leaves)");
    if (!ids.count(default_classid))
        return refuse("default class " + format_classid(ClassId::from_raw(default_classid)) +
                      " is not among the classes (add \"class " +
                      format_classid(ClassId::from_raw(default_classid)) + " normal\")");
    std::map<std::string, size_t> seen; // a filter's identity (its words without the class) -> line
    for (const auto &f : c.filters) {
        if (!ids.count(f.spec.classid.raw()))
            return refuse(at_line(f.line) + "filter \"" + format_filter(f.spec) + "\": class " +
                          format_classid(f.spec.classid) + " is not among the classes");
        FilterSpec identity = f.spec;
        identity.classid = ClassId{};
        auto [it, fresh] = seen.emplace(format_filter(identity), f.line);
        if (!fresh)
            return refuse(at_line(f.line) + "filter \"" + format_filter(f.spec) + "\" given twice" +
                          (it->second ? " (first on line " + std::to_string(it->second) + ")"
                                      : std::string()));
    }
    return {};
}

} // namespace pspxdp::control
