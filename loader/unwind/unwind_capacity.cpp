#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

#include "ecpi/loader/unwinder.h"

namespace ecpi::loader {

namespace {

// Bytes of executable file mappings in one maps file not yet in `seen`
// ("dev inode offset": a file's text counted once however many map it).
std::uint64_t new_text_bytes(const std::filesystem::path& maps_file, std::set<std::string>& seen) {
    std::ifstream maps(maps_file);
    std::string line;
    std::uint64_t bytes = 0;
    while (std::getline(maps, line)) {
        unsigned long long start = 0, end = 0, offset = 0, inode = 0;
        char perms[8] = {}, dev[32] = {};
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %31s %llu", &start, &end, perms, &offset, dev, &inode) < 6)
            continue;
        if (inode == 0 || !std::strchr(perms, 'x') || end <= start) continue;
        if (seen.insert(std::string(dev) + " " + std::to_string(inode) + " " + std::to_string(offset)).second)
            bytes += end - start;
    }
    return bytes;
}

}  // namespace

std::uint32_t unwind_rows_for_system(const std::filesystem::path& proc_root, std::uint32_t floor) {
    std::set<std::string> seen;
    std::uint64_t text = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
        text += new_text_bytes(entry.path() / "maps", seen);
    }
    const std::uint64_t wanted = 2 * (text / kUnwindTextBytesPerRow);
    return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(wanted, std::min(floor, kUnwindMaxRows), kUnwindMaxRows));
}

}  // namespace ecpi::loader
