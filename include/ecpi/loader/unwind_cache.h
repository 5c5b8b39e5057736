// Unwind tables cached on disk by build id (issue 29), beside the database's
// image cache: DB/unwind/<build id[0:2]>/<build id[2:]>, so that a restarted
// recorder or daemon loads them instead of building them again. The files
// are untrusted on read: size, magic, version, build id, checksum and row
// order are checked, and a file that fails is refused with one line and
// rebuilt. The directory is bounded (max_bytes): past it, tables are not
// cached (counted by the caller).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "ecpi/loader/unwind_table.h"
#include "ecpi/result.h"

namespace ecpi::loader {

// Bumped whenever the builder's rows for the same image change.
inline constexpr std::uint32_t kUnwindCacheVersion = 2;

class UnwindCache {
public:
    UnwindCache(std::filesystem::path dir, std::uint64_t max_bytes = 256ull << 20);

    // The cached table of `build_id`: nullopt when none; an Error (one line,
    // naming the file) when the file is there but damaged.
    [[nodiscard]] Result<std::optional<UnwindTable>> load(const std::string& build_id) const;
    // Writes the table (temp file + rename). False when the directory is at
    // its bound; an Error when writing failed.
    [[nodiscard]] Result<bool> store(const std::string& build_id, const UnwindTable& table);

    std::filesystem::path file(const std::string& build_id) const;

private:
    std::filesystem::path dir_;
    std::uint64_t max_bytes_;
    std::optional<std::uint64_t> used_bytes_;  // measured at the first store
};

// The bytes of a cache file, and their check (exposed for tests).
std::string encode_unwind_cache(const std::string& build_id, const UnwindTable& table);
[[nodiscard]] Result<UnwindTable> decode_unwind_cache(const std::string& build_id, std::string_view bytes);

}  // namespace ecpi::loader
