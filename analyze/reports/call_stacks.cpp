#include "ecpi/analyze/reports/call_stacks.h"

#include <cstdio>

namespace ecpi::analyze {
namespace {

std::uint64_t walks_of(const std::map<std::string, std::uint64_t>& ends) {
    std::uint64_t n = 0;
    for (const auto& [name, count] : ends) n += count;
    return n;
}

std::uint64_t count_of(const std::map<std::string, std::uint64_t>& ends, const std::string& name) {
    auto it = ends.find(name);
    return it == ends.end() ? 0 : it->second;
}

}  // namespace

std::string call_stacks_note(const std::map<std::string, std::uint64_t>& ends) {
    const std::uint64_t walks = walks_of(ends), root = count_of(ends, "root");
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%", walks ? 100.0 * static_cast<double>(root) / static_cast<double>(walks) : 0.0);
    std::string out = std::string("call stacks: ") + share + " reached the thread root (" + std::to_string(walks) + " walks";
    if (auto fp = count_of(ends, "frame_pointers"))
        out += "; " + std::to_string(fp) + " by frame pointers only, not checked";
    std::string cuts;
    for (const auto& [name, count] : ends) {
        if (name == "root" || name == "frame_pointers" || count == 0) continue;
        cuts += (cuts.empty() ? "" : ", ") + name + " " + std::to_string(count);
    }
    if (!cuts.empty()) out += "; cut: " + cuts;
    return out + ")";
}

nlohmann::json call_stacks_json(const std::map<std::string, std::uint64_t>& ends) {
    const std::uint64_t walks = walks_of(ends), root = count_of(ends, "root");
    return {{"walks", walks},
            {"root", root},
            {"root_share", walks ? static_cast<double>(root) / static_cast<double>(walks) : 0.0},
            {"ends", ends}};
}

}  // namespace ecpi::analyze
