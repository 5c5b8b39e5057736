// Issue 36: a bisection's trip length from its bounds at its snapshots.
//
// A binary search (`while (lo <= hi) { mid = (lo + hi) >> 1; ... lo = mid + 1
// or hi = mid - 1 }`) steps no register by a constant (register_progress.h),
// and its exit compares the two bounds with each other, so no bound reads a
// trip's length off (trip_length), and its start is no first iteration a
// snapshot can tell (entry_trips.h: `hi` is overwritten). branchy's `search`
// (13 iterations a call) came out at 10.8 from its samples, its mispredicted
// halves hiding in the model's best case. But every iteration halves the
// candidates left, w = hi - lo + 1 (hi - lo where the loop runs while lo <
// hi), so a snapshot taken where the bounds are still the iteration's own
// says how many iterations its trip has left: r = log2(w + 1). Iterations
// cost alike (the same instructions; a mispredicted half as likely in any
// of them), so the snapshots fall evenly over a trip's iterations, and r
// runs evenly from its length L down to 1: L = 2 mean(r) - 1. Trips of
// unequal lengths weigh longer ones more (the mean is E[L^2] / E[L]), so
// the length is an upper end where calls search tables of different sizes;
// its range is the mean's two standard errors only. The model holds only
// where the snapshots do spread evenly over the levels r (rounded) a trip
// passes: trips that end early (the key found before the bounds meet)
// leave the last levels short, and a first iteration that takes longer (a
// cold page) the top one long. SQLite's sqlite3BtreeTableMoveto read 8.2
// and 8.5 iterations in two recordings against callgrind's 5.77 (36% of
// its trips found their rowid; its levels from 1 up: 29, 131, 176, 166,
// 158, 142, 303). Where a level from the bottom to the top one differs from
// the levels' median by more than 40% (and three standard errors), or the
// median level holds fewer than kMinBisectionLevelSnapshots, the length is
// not known (`uneven`).
//
// The loop qualifies (bisection_site) when one of its exits compares two
// registers (the bounds), the loop halves their sum into a register (`lea m,
// [lo + hi]` or `mov m, lo; add m, hi`, then `sar`/`shr m, 1`), every write of
// a bound in it is that register plus -1, 0 or 1 (`lea lo, [m + 1]`, `mov hi,
// m`), every other write of that register adds or subtracts one (clang's `add
// ebx, -1; mov r13d, ebx` in SQLite's sqlite3BtreeTableMoveto), and no call in
// it may change them. The overflow-safe `lo + ((hi - lo) >> 1)` is not
// recognised.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

struct BisectionSite {
    std::uint32_t loop = 0;
    std::uint32_t preheader = 0;       // the block whose one edge enters the loop
    std::uint32_t entry_edge = 0;      // CFG edge index into the header
    int low = -1, high = -1;           // hardware register numbers of the bounds
    std::uint8_t width = 4;            // the compare's operand bytes
    bool inclusive = true;             // runs while low <= high (else low < high)
    // The pcs, [begin, end), where both bounds still hold the iteration's
    // own values (no write of either since the header).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> pcs;
    // The blocks whose branch compares the bounds to leave the loop.
    std::vector<std::uint32_t> exit_tests;
};

// The site of loop l, when it is a bisection.
[[nodiscard]] std::optional<BisectionSite> bisection_site(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l);

struct BisectionTrips {
    bool known = false;
    double length = 0;                 // 2 mean(r) - 1
    double low = 0, high = 0;          // the mean's two standard errors
    std::uint32_t snapshots = 0;       // at the site's pcs, with at least one candidate left
    std::uint32_t at_exit = 0;         // at the trip's last test (no candidate left: the bounds met)
    std::uint32_t unknown = 0;         // with the bounds crossed further: not the iteration's own
    // Snapshots per level (index: round(log2(candidates + 1)), 1 on), the
    // median over the levels that hold any, the top level (the highest
    // holding half that), and the level from 1 to the top that broke the
    // even spread (0: none).
    std::vector<std::uint32_t> levels;
    double per_level = 0;
    std::uint32_t top = 0, uneven_level = 0;
    bool uneven = false;               // the levels do not hold the model (or too few to tell)
    // Uneven levels between a bottom every trip reaches and a top where
    // one width holds kEqualStartShare of the snapshots: the trips are
    // equal, each starting at start_width candidates, and run log2(w + 1)
    // iterations; the levels differ in their iterations' time (branchy's
    // `search` on a Zen 5 VM: 589 snapshots at 3 iterations from its end
    // against 419 a level, every trip starting at 8,192 keys).
    bool equal_trips = false;
    std::uint64_t start_width = 0;
    std::uint32_t start_snapshots = 0, top_snapshots = 0;
    // With equal trips, the way each earlier iteration of a snapshot's
    // trip went, spelled by its bounds (the bisection replayed from the
    // top level's bounds to them): iterations that moved the low bound
    // (low = m + 1) and the high one. A share of executions, not of the
    // time at the compare (branchy's `search` on a Zen 5 VM: its compare's
    // snapshots went to the low side 61.5% of the time, its executions 50%).
    std::uint64_t low_moves = 0, high_moves = 0;
};

// At least this many snapshots make a length, and at least this many at
// the median level tell an even spread.
inline constexpr std::uint32_t kMinBisectionSnapshots = 64;
inline constexpr double kMinBisectionLevelSnapshots = 30;
inline constexpr std::uint32_t kMinBisectionStartSnapshots = 30;
inline constexpr double kEqualStartShare = 0.9;

// `stream` is the epoch's snapshots, `image` the procedure's image index in
// them, `candidates` the positions of those in the procedure (empty: all).
[[nodiscard]] BisectionTrips bisection_trips(const BisectionSite& site, std::span<const store::RegisterSample> stream,
                                             std::uint32_t image, std::span<const std::uint32_t> candidates);

}  // namespace ecpi::analyze
