// Hints for images without symbols (contract in include/ecpi/analyze/reports/symbol_hints.h).
#include "ecpi/analyze/reports/symbol_hints.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace ecpi::analyze {

void UnnamedSamples::add(const store::ImageId& image, const Symbol* sym, std::uint64_t count) {
    if (image.path.empty() || image.path.front() == '[') return;
    Counts& c = images_[image];
    c.total += count;
    if (sym == nullptr) c.unnamed += count;
    else if (sym->from_frame_info) c.frame += count;
}

std::vector<std::string> UnnamedSamples::hints() const {
    std::vector<std::pair<std::uint64_t, std::string>> lines;
    for (const auto& [image, c] : images_) {
        const std::uint64_t without = c.unnamed + c.frame;
        if (without == 0 || c.total == 0) continue;
        const std::string name = std::filesystem::path(image.path).filename().string();
        char share[32];
        std::snprintf(share, sizeof share, "%.1f%%", 100.0 * static_cast<double>(without) / static_cast<double>(c.total));
        std::string where;
        if (c.frame > 0) where = name + "+0xSTART from .eh_frame";
        if (c.unnamed > 0) where += std::string(where.empty() ? "" : ", or ") + unsymbolized_name(image);
        std::string line = name + (image.build_id.empty() ? "" : " (build id " + image.build_id + ")") + ": " + share +
                           " of its samples are in functions without a name (" + where +
                           "); install its debug symbols, or set DEBUGINFOD_URLS";
        lines.emplace_back(without, std::move(line));
    }
    std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> out;
    out.reserve(lines.size());
    for (auto& [n, line] : lines) out.push_back(std::move(line));
    return out;
}

}  // namespace ecpi::analyze
