// Debug files fetched by build id from the debuginfod servers named in
// DEBUGINFOD_URLS (elfutils' libdebuginfod, with its cache:
// DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client or
// ~/.cache/debuginfod_client). A server is untrusted: each fetch is bounded in
// time and size, and a file is used only when it is an ELF file with the
// build id that was asked for. Nothing is fetched unless the caller enables
// it and DEBUGINFOD_URLS is set.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "ecpi/result.h"

namespace ecpi::analyze {

struct DebuginfodOptions {
    // Off unless the caller turns it on (the CLI: unless --no-debuginfod).
    bool enabled = false;
    // The most one image's fetch may take, connecting included.
    std::chrono::milliseconds time_limit{30'000};
    // The largest debug file accepted (the server is told, and a transfer
    // that grows past it is cut off).
    std::uint64_t max_bytes = std::uint64_t{1} << 30;
    // After this long, a fetch says on `report` what it is doing, then again
    // every `progress_every`.
    std::chrono::milliseconds progress_after{2'000};
    std::chrono::milliseconds progress_every{5'000};
    // One line per call: the progress of long fetches, and (from the
    // Symbolizer) each image's failure, once. Unset: silent.
    std::function<void(const std::string&)> report;
    // The library loaded at the first fetch (not at start-up:
    // include/ecpi/shared_library.h); tests name one that is not there.
    std::string library = "libdebuginfod.so.1";
};

// The servers the environment names (DEBUGINFOD_URLS), "" when unset.
std::string debuginfod_urls();

// Whether `options` allow fetching now: enabled and DEBUGINFOD_URLS set.
bool debuginfod_active(const DebuginfodOptions& options);

// The separate debug file of build id `build_id` (lowercase hex), fetched or
// found in the cache; `label` names the image in messages. The error is one
// line naming the image, the build id, the server and why (no file there,
// unreachable, too slow, too big, wrong build id), for the caller to show
// once per image. When `options.library` cannot be loaded the error, errno
// ELIBACC, names it and the package to install; it is the same for every
// image, so a caller says it once and stops asking.
[[nodiscard]] Result<std::filesystem::path> fetch_debuginfo(const DebuginfodOptions& options,
                                                           const std::string& build_id, const std::string& label);

}  // namespace ecpi::analyze
