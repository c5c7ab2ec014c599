// An aligned text table whose rows are also its JSON form: one call per cell
// yields the text shown and the JSON value (a number, or a string), built
// through the same nlohmann-json path as every other output (output.hpp).
#pragma once

#include "cli/output.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace pspxdp::cli {

class Table {
  public:
    struct Column {
        std::string title; // text header
        std::string key;   // JSON key
        bool right = true; // numbers align right
    };

    explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

    void row() { rows_.emplace_back(); }
    void text(std::string value) { cell(value, value); }
    // A real number: NaN and infinities are null in JSON.
    void number(std::string display, double json_value);
    void integer(uint64_t value) { cell(std::to_string(value), value); }

    // Text: aligned columns with a header. JSON: an array of objects.
    void print(FILE *out, bool json) const;
    nlohmann::ordered_json json() const;

  private:
    struct Cell {
        std::string text;
        nlohmann::ordered_json json;
    };
    void cell(std::string text, nlohmann::ordered_json json) {
        rows_.back().push_back(Cell{std::move(text), std::move(json)});
    }
    std::vector<Column> columns_;
    std::vector<std::vector<Cell>> rows_;
};

// A number for JSON: null when not finite (JSON has no NaN).
nlohmann::ordered_json json_real(double v);

} // namespace pspxdp::cli
