#include "cli/table.hpp"

#include <algorithm>
#include <cmath>

namespace pspxdp::cli {

nlohmann::ordered_json json_real(double v) {
    if (!std::isfinite(v)) return nullptr;
    if (v == std::floor(v) && std::fabs(v) < 1e15) return int64_t(v);
    return v;
}

void Table::number(std::string display, double json_value) {
    cell(std::move(display), json_real(json_value));
}

nlohmann::ordered_json Table::json() const {
    auto out = nlohmann::ordered_json::array();
    for (const auto &row : rows_) {
        nlohmann::ordered_json o = nlohmann::ordered_json::object();
        for (size_t c = 0; c < row.size() && c < columns_.size(); ++c)
            o[columns_[c].key] = row[c].json;
        out.push_back(std::move(o));
    }
    return out;
}

void Table::print(FILE *out, bool as_json) const {
    if (as_json) {
        std::fprintf(
            out, "%s\n",
            json().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
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

} // namespace pspxdp::cli
