// Files the loader reads back from disk (unwind tables' cache, the overhead
// budget's calibration history) are untrusted: regular files only, bounded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

#include "ecpi/result.h"

namespace ecpi::loader {

// A regular file of at most `max` bytes, read whole; nothing where it does
// not exist; an error where it is not a regular file, is larger or cannot be
// read whole.
[[nodiscard]] Result<std::optional<std::string>> read_bounded_file(const std::filesystem::path& path, std::uint64_t max);

// Writes `bytes` to a new temporary file beside `path` (mode `mode`) and
// renames it over `path`: a reader sees the old file or the new one, whole.
[[nodiscard]] Result<void> replace_file(const std::filesystem::path& path, std::string_view bytes, mode_t mode);

}  // namespace ecpi::loader
