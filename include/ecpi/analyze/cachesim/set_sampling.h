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

// A set-sampled level below a time-sampled one: its references over all
// sets (the level above's misses) are estimated twice, by the windows over
// every set and by the sampled groups of sets, which see them exactly for
// their own sets only. The sampled groups' ratio of misses to references
// carries their share of the accesses: where a group's accesses vary and
// its misses do not (tree's L2: groups with more L1 misses hit more in the
// L2), a choice that took more of the accesses reads a lower rate (MemSpy
// 7.3's non-representative sets). A regression estimator takes the
// accesses' total from the windows and only the misses' dependence on the
// accesses (slope b) from the groups: misses = K sum(m) + b (A - K sum(n)).
struct AccessesAbove {
    double references = 0;      // the level's references over all sets, time-sampled (the levels above's misses)
    double relative_error = 0;  // their 95% sampling error, relative (the level above's sampling_error / rate)
    double unknown_share = 1;   // share of the level above's estimated misses that estimate unknown references
};
// The windows' count is used only where the level above's misses are
// mostly simulated, not estimated: 96% of SQLite's L1d misses in windows
// were the estimate for unknown references, which put its L2's accesses
// 12-15% above full simulation's, where 16 times its sampled groups' own
// were within 0.8% (docs/CACHESIM.md, "Which estimator").
inline constexpr double kMaxUnknownShareAbove = 0.5;

struct SetEstimate {
    MissRateEstimate estimate;
    bool regression = false;  // false: the groups' ratio sum(m) / sum(n) (estimate_miss_rate's)
    double slope = 0;         // b, in [0, the groups' ratio]; the ratio when !regression
};
// estimate_miss_rate(sets, level, e), corrected as above under a fixed
// choice of groups when `above` can be trusted (three groups or more that
// reached the level); the spread then is the regression's over the groups,
// plus what the windows' error on A adds.
SetEstimate set_regression_estimate(const CacheSimulator& sets, std::size_t level, UnknownEstimate e, const AccessesAbove& above);

}  // namespace ecpi::analyze
