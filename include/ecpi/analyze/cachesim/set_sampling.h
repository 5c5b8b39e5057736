// Combined sampling (MemSpy 7.3): time sampling decides the levels a window
// warms; set sampling decides the others, from every reference to a random
// subset of sets (in a window or not), so those sets are never cold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/result.h"

namespace ecpi::analyze {

// A window warms a level when it makes at least this many references per
// line of the level (MemSpy 6.3: windows must be long against the cache;
// the L1d's 768 lines meet it at the 10k default, a 1 MiB L2's 16,384 do not,
// and the L2 sees only the L1's misses of a window).
inline constexpr std::uint64_t kWarmReferencesPerLine = 8;
// Default set sampling: 1/16 of the sets, sparser only never; fewer when a
// set-sampled level would keep under kMinSampledSets sets, or the smallest
// level has fewer sets (the chosen bits must index every level's sets).
inline constexpr std::uint32_t kDefaultSetSample = 16;
inline constexpr std::uint64_t kMinSampledSets = 64;
// --set-turns: "off" (a fixed choice of groups, the default) or "N:W": the
// set-sampled levels' groups rotate every N windows, the next turn's groups
// warmed in the last W (SimulatorOptions::set_rotate_windows and
// set_warm_windows; MemSpy 7.3's non-representative sets). Not the default:
// a group's sets hold what its last turn left, and SQLite's L2 needs
// millions of references to forget it (16:2 left SQLite's L2 local rate
// +4.5 to +5.0 points off, 32:24 +0.6 to +1.0, 64:48 +0.03 to +0.24 with
// tree and hashtable back at 0.39), and 32:24 cost transpose's exact L2
// and the time target (docs/CACHESIM.md, "Why the set-sampled L2 missed,
// and rotating groups").
struct SetTurns {
    std::uint32_t windows = 0;  // 0: off
    std::uint32_t warm = 0;
};
Result<SetTurns> parse_set_turns(std::string_view text);

struct SetSamplingPlan {
    std::uint32_t set_sample = 1;  // 1/K of the sets: the set-sampled levels' (combined) or every level's (within windows)
    std::vector<bool> set_levels;  // per level: estimated by set sampling (combined sampling)
    std::vector<std::string> reasons;  // per level: why this method (for the report's notes)
    bool combined() const;
};

// `sets`: K of --sets 1/K, 0 for the default. `levels_option`: "auto" (by
// geometry, kWarmReferencesPerLine), "none" (time sampling everywhere; an
// explicit --sets then samples sets within windows, as before), "all", or
// level names separated by commas. `sample`: N of --sample 1/N (1: no time
// sampling, so "auto" sets none).
Result<SetSamplingPlan> plan_set_sampling(const std::vector<CacheGeometry>& levels, std::uint64_t window, std::uint64_t sample,
                                          std::uint32_t sets, std::string_view levels_option);

}  // namespace ecpi::analyze
