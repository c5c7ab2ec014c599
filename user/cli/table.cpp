#include "cli/table.hpp"

#include <algorithm>
#include <cmath>

namespace pspxdp::cli {

std::string Table::quote(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

void Table::number(std::string display, double json_value) {
    char buf[64];
    if (!std::isfinite(json_value))
        std::snprintf(buf, sizeof buf, "null");
    else if (json_value == std::floor(json_value) && std::fabs(json_value) < 1e15)
        std::snprintf(buf, sizeof buf, "%.0f", json_value);
    else
        std::snprintf(buf, sizeof buf, "%.9g", json_value);
    cell(std::move(display), buf);
}

std::string Table::json() const {
    std::string out = "[";
    for (size_t r = 0; r < rows_.size(); ++r) {
        out += r ? ",{" : "{";
        for (size_t c = 0; c < rows_[r].size() && c < columns_.size(); ++c) {
            if (c) out += ',';
            out += quote(columns_[c].key) + ":" + rows_[r][c].json;
        }
        out += "}";
    }
    return out + "]";
}

void Table::print(FILE *out, bool as_json) const {
    if (as_json) {
        std::fprintf(out, "%s\n", json().c_str());
        return;
    }
    std::vector<size_t> width(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) width[c] = columns_[c].title.size();
    for (const auto &row : rows_)
        for (size_t c = 0; c < row.size() && c < columns_.size(); ++c)
            width[c] = std::max(width[c], row[c].text.size());
    auto line = [&](auto get) {
        std::string s;
        for (size_t c = 0; c < columns_.size(); ++c) {
            std::string v = get(c);
            std::string pad(width[c] - std::min(width[c], v.size()), ' ');
            s += c ? "  " : "";
            s += columns_[c].right ? pad + v : v + pad;
        }
        while (!s.empty() && s.back() == ' ') s.pop_back();
        std::fprintf(out, "%s\n", s.c_str());
    };
    line([&](size_t c) { return columns_[c].title; });
    for (const auto &row : rows_)
        line([&](size_t c) { return c < row.size() ? row[c].text : std::string(); });
}

std::string measured_rate(double bps, int digits) {
    static constexpr struct {
        double scale;
        const char *unit;
    } kUnits[] = {{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "Kbit"}, {1, "bit"}};
    char buf[48];
    for (const auto &u : kUnits) {
        if (bps >= u.scale || u.scale == 1) {
            std::snprintf(buf, sizeof buf, "%.*f%s", digits, bps / u.scale, u.unit);
            break;
        }
    }
    return buf;
}

std::string fixed(double value, int digits) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*f", digits, value);
    return buf;
}

} // namespace pspxdp::cli
