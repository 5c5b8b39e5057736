// Text rendering of `ecpi probe` / `ecpi paths` results (iPath Figure 2:
// per function, its call paths with calls, % of calls, and per timer the
// total, mean and % of the function's time), and the ranking of paths.
#pragma once

#include <string>

#include "ecpi/store/probe_results.h"

namespace ecpi::cli {

enum class PathRank {
    kTime,       // first timer's total, then calls (calls when untimed)
    kCalls,
    kVariation,  // net variation = total − count × minimum (variational path profiling 5.1)
};

[[nodiscard]] Result<PathRank> parse_path_rank(const std::string& name);

// Sorts each function's paths by `rank` (kVariation keeps only paths with
// two or more timed calls) and functions by their total.
void rank_paths(store::ProbeReport& report, PathRank rank, const std::string& timer = "wall");

// `limit` paths per function (0: all).
std::string render_probe_text(const store::ProbeReport& report, PathRank rank, std::size_t limit,
                              const std::string& timer = "wall");

// "1.23 ms", "45.6 us", "789 ns".
std::string format_ns(double ns);

}  // namespace ecpi::cli
