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
// Under combined sampling the sampled groups rotate every this many windows
// (SimulatorOptions::set_rotate_windows): over a run every group takes its
// turn, so the estimate no longer rests on one choice of groups (MemSpy
// 7.3's non-representative sets; docs/CACHESIM.md, "Rotating groups").
// The next turn's groups are warmed in the last kSetWarmWindows windows of
// a turn (SimulatorOptions::set_warm_windows): a group's sets hold what its
// last turn left, and SQLite's L2 needs millions of references to forget
// it (turns of 16 with 2 warming windows: SQLite's L2 local rate +4.8
// points; 32 with 24: +0.59 to +0.98; 64 with 48: +0.03 to +0.24, but tree's
// and hashtable's errors back at 0.39 with fewer turns).
inline constexpr std::uint32_t kSetRotateWindows = 32;
inline constexpr std::uint32_t kSetWarmWindows = 24;

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
