// Internal to analyze/: printf into std::string, and the column layout the
// text reports share (numbers right aligned, names left aligned, the last
// column never padded).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "ecpi/terminal_text.h"

namespace ecpi::analyze::detail {

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return {};
    if (static_cast<std::size_t>(n) < sizeof buf) return std::string(buf, static_cast<std::size_t>(n));
    std::string out(static_cast<std::size_t>(n) + 1, '\0');
    va_start(ap, fmt);
    std::vsnprintf(out.data(), out.size(), fmt, ap);
    va_end(ap);
    out.resize(static_cast<std::size_t>(n));
    return out;
}

inline std::string u64(std::uint64_t v) { return format("%llu", static_cast<unsigned long long>(v)); }

// Percentages and shares in JSON: 4 decimals, stable for golden comparisons.
inline double round4(double v) { return std::round(v * 1e4) / 1e4; }

// The image column shows file names; special images ("[kernel]") as they are.
inline std::string image_label(const std::string& path) {
    if (path.empty() || path.front() == '[') return path;
    std::string name = std::filesystem::path(path).filename().string();
    return name.empty() ? path : name;
}

class TextTable {
public:
    // numeric columns are right aligned; `max_width` bounds a text column
    // (longer cells overflow it rather than being cut).
    void add_column(std::string header, bool numeric, std::size_t max_width = 60) {
        columns_.push_back({std::move(header), numeric, max_width});
    }
    void add_row(std::vector<std::string> cells) {
        for (std::size_t c = 0; c < cells.size() && c < columns_.size(); ++c)
            if (!columns_[c].numeric) cells[c] = escape_for_terminal(cells[c]);  // names are untrusted
        rows_.push_back(std::move(cells));
    }

    std::string render() const {
        std::vector<std::size_t> width(columns_.size());
        for (std::size_t c = 0; c < columns_.size(); ++c) {
            width[c] = columns_[c].header.size();
            for (const auto& row : rows_)
                if (c < row.size()) width[c] = std::max(width[c], row[c].size());
            if (!columns_[c].numeric)
                width[c] = std::min(width[c], std::max(columns_[c].header.size(), columns_[c].max_width));
        }
        std::string out;
        std::size_t rule = 0;
        for (auto w : width) rule += w + 2;
        out += std::string(rule >= 2 ? rule - 2 : 0, '=') + "\n";
        auto emit = [&](const std::vector<std::string>& cells) {
            std::string line;
            for (std::size_t c = 0; c < columns_.size(); ++c) {
                const std::string& cell = c < cells.size() ? cells[c] : empty_;
                bool last = c + 1 == columns_.size();
                if (c > 0) line += "  ";
                std::size_t pad = width[c] > cell.size() ? width[c] - cell.size() : 0;
                if (columns_[c].numeric) line.append(pad, ' ');
                line += cell;
                if (!columns_[c].numeric && !last) line.append(pad, ' ');
            }
            while (!line.empty() && line.back() == ' ') line.pop_back();
            out += line;
            out += '\n';
        };
        std::vector<std::string> headers;
        for (const auto& col : columns_) headers.push_back(col.header);
        emit(headers);
        for (const auto& row : rows_) emit(row);
        return out;
    }

private:
    struct Column {
        std::string header;
        bool numeric = true;
        std::size_t max_width = 60;
    };
    std::vector<Column> columns_;
    std::vector<std::vector<std::string>> rows_;
    std::string empty_;
};

}  // namespace ecpi::analyze::detail
