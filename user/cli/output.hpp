// The one output path of the CLI: a command prints each field with one call,
// and the same calls yield the text form or the JSON form (iproute2's
// print_* idea). JSON is built and escaped by nlohmann-json; keys carry their
// unit (rate_bps, limit_ns, backlog_bytes) and values are raw numbers, while
// text shows tc's units (300Mbit, 2ms, 64kb).
//
// Text: each field prints "name value " by default (or a printf format with
// one %s), so a counter has the same name in text, JSON and bpftool.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace pspxdp::cli {

class Printer {
  public:
    explicit Printer(bool json);
    bool json() const { return json_; }

    // JSON structure; nothing in text. The outermost container is the
    // document (open_object() or open_array() without a key).
    void open_object(std::string_view key = {});
    void close_object();
    void open_array(std::string_view key = {});
    void close_array();

    void u64(std::string_view key, uint64_t v, const char *fmt = nullptr);
    void i64(std::string_view key, int64_t v, const char *fmt = nullptr);
    void real(std::string_view key, double v, int text_digits, const char *fmt = nullptr);
    void string(std::string_view key, std::string_view v, const char *fmt = nullptr);
    void boolean(std::string_view key, bool v, const char *fmt = nullptr);
    // JSON null (a value not known); nothing in text.
    void null(std::string_view key);
    // With the unit in the JSON key: name_bps, name_bytes, name_ns.
    void rate(std::string_view name, uint64_t bps, const char *fmt = nullptr);
    void measured_rate(std::string_view name, double bps, const char *fmt = nullptr);
    void bytes(std::string_view name, uint64_t bytes, const char *fmt = nullptr);
    void duration(std::string_view name, uint64_t ns, const char *fmt = nullptr);
    // Any JSON value with its own text form.
    void value(std::string_view key, nlohmann::ordered_json v, const std::string &shown,
               const char *fmt = nullptr) {
        put(key, std::move(v), shown, fmt);
    }
    // Text only.
    void text(std::string_view s);
    void newline();
    // Text: a field that would take a line past `width` starts a new line
    // with `indent` (0: never wrap).
    void wrap(size_t width, std::string indent) {
        wrap_ = width;
        indent_ = std::move(indent);
    }

    // The whole output: text, or the JSON document on one line.
    std::string str() const;
    void print(FILE *out) const;

  private:
    void put(std::string_view key, nlohmann::ordered_json v, const std::string &shown,
             const char *fmt);
    void open(std::string_view key, nlohmann::ordered_json v);
    static std::string text_format(std::string_view name, const char *fmt);

    bool json_;
    nlohmann::ordered_json doc_;
    std::vector<nlohmann::ordered_json *> stack_;
    std::string text_;
    size_t wrap_ = 0;
    std::string indent_;
};

// A measured rate in tc's units with `digits` decimals: "499.998Mbit". Exact
// (configured) rates use format_rate; a measurement is a real number.
std::string measured_rate(double bps, int digits = 3);
// value with `digits` decimals.
std::string fixed(double value, int digits);

} // namespace pspxdp::cli
