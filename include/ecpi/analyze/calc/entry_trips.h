// Issue 36: a loop's trip length from the snapshots taken in its trips'
// first iterations.
//
// A loop whose exit compares loaded data (a hash table's probe: `while
// (slots[j].count && slots[j].hash != hash) j = (j + 1) & mask`) has no
// bound to read a trip's length off (register_progress.h, trip_length), and
// trips of one or two iterations are far too short for pairs of snapshots.
// But where the register the loop steps starts each trip at a value its
// preheader computes from registers the loop leaves alone (`j = hash &
// mask`), a snapshot at the top of the header tells whether it was taken in
// its trip's first iteration: the register still holds the start the
// snapshot's own unchanged registers give, replayed through the preheader
// (switch_odds.h, replay). Every trip has exactly one first iteration, so
// of the header's executions the share that are first iterations is the
// loop's entries over its iterations: the trip length is the header's
// snapshots over those taken at a trip's start.
//
// Like branch odds (branch_odds.h) the shares are time-weighted: exact when
// an iteration's time at the pcs snapshotted does not depend on which
// iteration of its trip it is; the first iteration's load may miss where
// later probes of the same line hit. The range is the hull of the pooled
// share's binomial interval and of each pc holding kOddsPositionSnapshots
// (DCPI 6.1: samples measure time; only the pcs that agree make a point).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/analyze/calc/ranges.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// Loop `loop` (no calls, one latch with one edge back to the header,
// entered by one edge from a block whose one way out it is) and a
// register it steps: written in the loop only by adds of a nonzero
// constant to itself (add, sub, inc, dec, lea r, [r + d]), all the same
// sign, and masks by a register the loop leaves alone or a constant (`and
// r, mask`: a table's index wraps), at least one add in a block every way
// round the loop passes (in no nested loop, dominating the latch). It then
// differs from its start in every later iteration of a trip shorter than
// its wrap. Its start is computed in the preheader from registers the rest
// of the preheader and the loop leave alone.
struct EntryTripSite {
    std::uint32_t loop = 0;
    std::uint32_t preheader = 0;               // the block whose one edge enters the loop
    std::uint32_t entry_edge = 0, back_edge = 0;  // CFG edge indices into the header
    int gp = -1;                               // the stepped register (hardware number)
    // The header's pcs before its first write of the register: a snapshot
    // there holds the iteration's start value.
    std::uint64_t top_begin = 0, top_end = 0;
    // The header's pcs after that first write, where it adds a constant,
    // up to and with its next write: a snapshot there holds the start plus
    // `after_add` in a trip's first iteration. The top's pcs can hold
    // most of a trip's first iterations where samples land one instruction
    // after the one that waited: jsonq's key hash on a Zen 5 VM put 127 of
    // 127 snapshots at its top in first iterations (the load before the
    // loop waited; the loop's own back edge does not), 4 iterations a trip.
    std::uint64_t after_begin = 0, after_end = 0;
    std::int64_t after_add = 0;
    // What one iteration adds to the register where every write is an add
    // on every way round (0: not known, as where it is masked): a snapshot
    // holding start + step is in its trip's second iteration.
    std::int64_t step = 0;
};

// The site of loop l, when it has one.
[[nodiscard]] std::optional<EntryTripSite> entry_trip_site(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l);

// The register's value at the start of the trip that snapshot `s` (taken
// in the loop) is in: the preheader replayed on the snapshot's registers the
// loop leaves alone; none when the replay cannot know it (a load, or a
// register the preheader reads before it writes it that the loop changes).
[[nodiscard]] std::optional<std::uint64_t> trip_start(const Cfg& cfg, const LoopInfo& loops, const EntryTripSite& site,
                                                      const store::RegisterSample& s);

struct EntryTrips {
    bool known = false;
    double length = 0;                     // iterations a trip: top snapshots over those at a trip's start
    double low = 0, high = 0;              // the hull of the pooled share's interval and each pc's (>= 30)
    std::uint32_t snapshots = 0;           // in the header (its top, and after its first write)
    std::uint32_t first = 0;               // of them in a trip's first iteration
    std::uint32_t unknown = 0;             // whose start the replay could not know
    // The second iteration as the reference (site.step known): the trip is
    // 1 + the later iterations' snapshots over the second's. A first
    // iteration that takes longer (the previous trip's mispredicted exit,
    // its bound's load) holds more snapshots than its share of executions,
    // and the first's length reads short; the second's reads long only
    // where some trips run once. Where the two intervals are apart, the
    // range spans both and `disagree` is set.
    std::uint32_t second = 0;
    double later_length = 0;               // 0: too few in a second iteration
    bool disagree = false;
};

// At least this many snapshots at the header's top, and at least
// kMinFirstSnapshots of them at a trip's start, make a length.
inline constexpr std::uint32_t kMinEntryTripSnapshots = 64;
inline constexpr std::uint32_t kMinFirstSnapshots = 5;

// `stream` is the epoch's snapshots, `image` the procedure's image index in
// them, `candidates` the positions of those in the procedure (empty: all).
[[nodiscard]] EntryTrips entry_trips(const Cfg& cfg, const LoopInfo& loops, const EntryTripSite& site,
                                     std::span<const store::RegisterSample> stream, std::uint32_t image,
                                     std::span<const std::uint32_t> candidates);

// A ranged class of the loop's that runs `less` times fewer than its
// iterations per entry (the header: 0; a latch whose one way out is the
// back edge: 1) runs between its entries' least count times trips.low - less
// and their most times trips.high - less: its range keeps within that where
// they overlap (else the samples' range stands; returns false).
[[nodiscard]] bool narrow_by_entry_trips(ClassRange& range, const EntryTrips& trips, double entries_low, double entries_high,
                           double less);

}  // namespace ecpi::analyze
