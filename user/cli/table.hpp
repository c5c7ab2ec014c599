// One call per cell yields both the aligned text table and the JSON form
// (iproute2's print_* idea): a cell carries its display text and its JSON
// value (a number, or a string that is quoted on output).
#pragma once

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
    void text(std::string value) { cell(value, quote(value)); }
    void number(std::string display, double json_value);
    void integer(uint64_t value) { cell(std::to_string(value), std::to_string(value)); }

    // Text: aligned columns with a header. JSON: an array of objects.
    void print(FILE *out, bool json) const;
    std::string json() const;

    static std::string quote(const std::string &s);

  private:
    struct Cell {
        std::string text;
        std::string json;
    };
    void cell(std::string text, std::string json) {
        rows_.back().push_back(Cell{std::move(text), std::move(json)});
    }
    std::vector<Column> columns_;
    std::vector<std::vector<Cell>> rows_;
};

// A measured rate in tc's units with `digits` decimals: "499.998Mbit". Exact
// (configured) rates use format_rate; a measurement is a real number.
std::string measured_rate(double bps, int digits = 3);
// value with `digits` decimals.
std::string fixed(double value, int digits);

} // namespace pspxdp::cli
