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
// its range is the mean's two standard errors only. Trips that end early
// (the key found before the bounds meet) leave the last iterations' r
// unseen: where the snapshots with one or two candidates left are fewer than
// half an iteration's share, the length is not known (`ends_early`).
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
    std::uint32_t last = 0;            // of them with one or two candidates left
    std::uint32_t unknown = 0;         // with none left (the bounds crossed): not the iteration's own
    bool ends_early = false;           // `last` below half an iteration's share
};

// At least this many snapshots make a length.
inline constexpr std::uint32_t kMinBisectionSnapshots = 64;

// `stream` is the epoch's snapshots, `image` the procedure's image index in
// them, `candidates` the positions of those in the procedure (empty: all).
[[nodiscard]] BisectionTrips bisection_trips(const BisectionSite& site, std::span<const store::RegisterSample> stream,
                                             std::uint32_t image, std::span<const std::uint32_t> candidates);

}  // namespace ecpi::analyze
