#include "cli/output.hpp"

#include "core/units.hpp"

#include <cmath>
#include <stdexcept>

namespace pspxdp::cli {

using ojson = nlohmann::ordered_json;

Printer::Printer(bool json) : json_(json) {}

void Printer::open(std::string_view key, ojson v) {
    if (!json_) return;
    if (stack_.empty()) {
        doc_ = std::move(v);
        stack_.push_back(&doc_);
        return;
    }
    ojson &cur = *stack_.back();
    // A child is filled while it is the innermost container, so its parent
    // never grows meanwhile and the pointer stays valid.
    if (cur.is_array()) {
        cur.push_back(std::move(v));
        stack_.push_back(&cur.back());
    } else {
        ojson &slot = cur[std::string(key)];
        slot = std::move(v);
        stack_.push_back(&slot);
    }
}

void Printer::open_object(std::string_view key) { open(key, ojson::object()); }
void Printer::open_array(std::string_view key) { open(key, ojson::array()); }

void Printer::close_object() {
    if (json_ && !stack_.empty()) stack_.pop_back();
}
void Printer::close_array() { close_object(); }

void Printer::put(std::string_view key, ojson v, const std::string &shown, const char *fmt) {
    if (json_) {
        if (stack_.empty()) throw std::logic_error("Printer: field outside any object");
        ojson &cur = *stack_.back();
        if (cur.is_array())
            cur.push_back(std::move(v));
        else
            cur[std::string(key)] = std::move(v);
        return;
    }
    std::string field;
    if (!fmt) {
        field = std::string(key) + " " + shown + " ";
    } else {
        std::string_view f = fmt;
        auto at = f.find("%s");
        field = at == std::string_view::npos
                    ? std::string(f)
                    : std::string(f.substr(0, at)) + shown + std::string(f.substr(at + 2));
    }
    if (wrap_) {
        const size_t line_start =
            text_.rfind('\n') == std::string::npos ? 0 : text_.rfind('\n') + 1;
        const size_t line_len = text_.size() - line_start;
        if (line_len > indent_.size() && line_len + field.size() > wrap_ + 1) {
            newline();
            text_ += indent_;
        }
    }
    text_ += field;
}

void Printer::u64(std::string_view key, uint64_t v, const char *fmt) {
    put(key, v, std::to_string(v), fmt);
}
void Printer::i64(std::string_view key, int64_t v, const char *fmt) {
    put(key, v, std::to_string(v), fmt);
}
void Printer::real(std::string_view key, double v, int text_digits, const char *fmt) {
    put(key, std::isfinite(v) ? ojson(v) : ojson(nullptr), fixed(v, text_digits), fmt);
}
void Printer::string(std::string_view key, std::string_view v, const char *fmt) {
    put(key, std::string(v), std::string(v), fmt);
}
void Printer::boolean(std::string_view key, bool v, const char *fmt) {
    put(key, v, v ? "yes" : "no", fmt);
}
void Printer::null(std::string_view key) {
    if (json_) put(key, nullptr, "", nullptr);
}
// Text shows the name without the unit, the value with it: "rate 300Mbit".
std::string Printer::text_format(std::string_view name, const char *fmt) {
    return fmt ? std::string(fmt) : std::string(name) + " %s ";
}
void Printer::rate(std::string_view name, uint64_t bps, const char *fmt) {
    put(std::string(name) + "_bps", bps, format_rate(bps), text_format(name, fmt).c_str());
}
void Printer::measured_rate(std::string_view name, double bps, const char *fmt) {
    put(std::string(name) + "_bps", std::isfinite(bps) ? ojson(std::llround(bps)) : ojson(nullptr),
        cli::measured_rate(bps), text_format(name, fmt).c_str());
}
void Printer::bytes(std::string_view name, uint64_t bytes, const char *fmt) {
    put(std::string(name) + "_bytes", bytes, format_bytes(bytes), text_format(name, fmt).c_str());
}
void Printer::duration(std::string_view name, uint64_t ns, const char *fmt) {
    put(std::string(name) + "_ns", ns, format_duration(ns), text_format(name, fmt).c_str());
}

void Printer::text(std::string_view s) {
    if (!json_) text_ += s;
}

void Printer::newline() {
    if (json_) return;
    while (!text_.empty() && text_.back() == ' ') text_.pop_back();
    text_ += '\n';
}

std::string Printer::str() const {
    // Invalid UTF-8 (a device name is any bytes) is replaced, not thrown on.
    if (json_)
        return doc_.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    return text_;
}

void Printer::print(FILE *out) const {
    const std::string s = str();
    std::fwrite(s.data(), 1, s.size(), out);
}

std::string measured_rate(double bps, int digits) {
    static constexpr struct {
        double scale;
        const char *unit;
    } kUnits[] = {{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "Kbit"}, {1, "bit"}};
    if (!std::isfinite(bps)) return "-";
    for (const auto &u : kUnits)
        if (bps >= u.scale || u.scale == 1) return fixed(bps / u.scale, digits) + u.unit;
    return "-";
}

std::string fixed(double value, int digits) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*f", digits, value);
    return buf;
}

} // namespace pspxdp::cli
