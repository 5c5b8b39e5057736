// Loop iteration rates from register snapshots (calc: execution counts
// anchored by register progress).
//
// Two consecutive snapshots of one thread, both inside one loop, with the
// loop's invariant registers unchanged and its induction register moved in
// the stepping direction, saw (r2 - r1) / step iterations in t2 - t1. The
// pairs' iterations over their time give the loop's rate while it runs, and
// the rate times the time the loop held (its samples times the sampling
// period) its iteration count. This is an observable independent of where in
// the loop the samples land, which is all DCPI 6.1's estimator has: a loop
// with one issue point (a pointer chase, whose every cycle lands after the
// load) cannot be told "fast and frequent" from "slow and rare" without it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// One thread's snapshots as the pairing sees them: the whole stream of the
// thread (all images), in time order, so that "consecutive" means nothing
// of the thread was sampled in between.
struct ProgressQuery {
    std::span<const store::RegisterSample> stream;  // sorted by (tid, time_ns): RegisterProfile::samples
    std::uint32_t image = 0;                         // the loop's image, as an index into the profile's images
    // Whether an offset in the image lies in the loop (any of its blocks).
    std::function<bool(std::uint64_t)> in_loop;
    // Positions in `stream` of the snapshots in the image whose offset may
    // be in the loop (a superset is fine); empty: scan the whole stream.
    std::span<const std::uint32_t> candidates;
    int gp = -1;                                     // the induction register
    std::int64_t step = 0;
    std::uint8_t width = 8;
    std::vector<int> invariant;                      // registers that must not change
    double max_gap_ns = 0;                           // pairs further apart are not used (0: no limit)
    // A loop that calls other code: a pair runs from a snapshot in the loop
    // to the thread's next one in the loop, over the snapshots in between
    // (in the calls; each hop within max_gap_ns), so that the pairs tile the
    // trip's time, calls included (see CalleeShare).
    bool through_calls = false;
    // A loop whose every call runs known code of the image that writes
    // neither the induction register nor `invariant` (callee_code.h): a
    // snapshot taken in that code (in_callees: offsets in the image) is
    // the loop's when its `signature` registers hold values seen together on
    // a snapshot in the loop itself (the callee may have other callers).
    // Pairs then join two consecutive snapshots of the loop's (through_calls
    // false), and the loop's time is its own samples' times its snapshots
    // and its calls' over its own (CalleeShare). Unset: the loop's code only.
    std::function<bool(std::uint64_t)> in_callees;
    std::vector<int> signature;
};

struct PairCounts {
    std::uint32_t used = 0;
    std::uint32_t other_thread = 0;      // the next snapshot belongs to another thread
    std::uint32_t left_loop = 0;         // the next snapshot of the thread is outside the loop
    std::uint32_t invariant_changed = 0; // another invocation of the loop (or another process)
    std::uint32_t wrong_direction = 0;   // moved against the step, or not by a multiple of it
    std::uint32_t too_far = 0;           // moved further than any loop can in a register of this width
    std::uint32_t gap = 0;               // the two snapshots are too far apart in time
    std::uint32_t outlier = 0;           // dropped by trimming the pair rates
};

struct LoopRate {
    bool known = false;
    double iterations_per_ns = 0;        // over the pairs used (their iterations over their time)
    double low = 0, high = 0;            // spread: the 10th and 90th percentile of eight interleaved groups' rates
    double iterations = 0;               // over the pairs used
    double seconds = 0;                  // over the pairs used
    PairCounts pairs;
    // The induction register's values over the loop's snapshots span this
    // many iterations; the pairs used moved a median of `median_iterations`.
    double span_iterations = 0;
    double median_iterations = 0;
    double most_iterations = 0;        // the longest move of a pair used
    // The pairs moved too far for the span: the loop's trips are too short
    // for the time between snapshots, and a pair may cross one or more ends
    // of the loop with the register back at its start (not `known`).
    bool short_trips = false;
    // Fewer than kMinUsableShare of the pairs starting in the loop were
    // usable (not `known`): the thread was seldom still in the same trip at
    // its next snapshot, and the few that were are no fair sample.
    bool few_usable = false;
    bool interrupted = false;            // see kMaxInterruptedShare
    // through_calls: the hops walked from each pair's start to its end, and
    // of them those longer than max_gap_ns (kMaxInterruptedShare of hops).
    std::uint32_t hops = 0, gap_hops = 0;
};

inline constexpr double kMinUsableShare = 0.25;

// Of the pairs that stayed in the loop, more than this share had samples
// between them that kept no registers (the thread in the kernel: page faults,
// system calls; or off the CPU). The loop's time then is not all in its
// user-mode samples, and the rate from the pairs, whose gaps hide kernel
// time too, times those samples' time would undercount it (seen: a loop
// touching fresh pages, measured 124x low). Not `known`. Pairs through
// calls (through_calls) walk many snapshots each, and one long hop drops the
// pair: their test is the share of hops that were long (the share of the
// loop's time, calls included, that its samples miss).
inline constexpr double kMaxInterruptedShare = 0.10;

// A pair that crosses an end of the loop, when the register restarts from the
// same place, moves backwards and is dropped, as long as the loop runs several
// pairs' worth of iterations per trip. A loop whose whole trip is not this
// many times what a pair moves cannot tell crossings from progress: its
// iteration counts between snapshots look random in [0, span].
inline constexpr double kMinSpanPerMove = 8;
// ... or whose longest used pair moved at most this part of it: a pair
// lands ahead of its start in a later trip only when it ran a whole trip,
// so every crossing of such pairs moved back and was refused.
inline constexpr double kMaxMoveInSpan = 2;

// At least this many pairs make a rate.
inline constexpr std::uint32_t kMinPairs = 8;

// Trips short for the pairs (kMinSpanPerMove) are still measured when pairs
// that cross a trip's end are seen to be caught: a crossing pair whose
// invariants held lands at a random place of a later trip, behind its start
// about as often as ahead. At most this share of the used pairs moving
// backwards (of at least kMinPairsToTrustCrossings used) says the
// invariants told trips apart (an outer loop's counter in a register the
// loop leaves alone) and that few forward crossings were used.
inline constexpr double kMaxBackwardShare = 0.01;
inline constexpr std::uint32_t kMinPairsToTrustCrossings = 100;

LoopRate loop_rate(const ProgressQuery& query);

// How many times the loop's threads were seen entering it: snapshots in the
// loop whose thread's previous snapshot (same process) was not, so that the
// thread came in between the two. A floor on the loop's entries, whatever
// its trips' length (calc's flow: FlowCountsInput::loop_entries_seen).
// Only for a loop without calls, whose thread is outside its code only
// after leaving it (a signal handler's snapshot could count once too
// often). Uses `stream`, `image`, `in_loop` and `candidates`.
std::uint32_t loop_entries_seen(const ProgressQuery& query);

// Issue 36: an inner loop whose trips are too short for pairs of snapshots
// (bits' popcount, ~16 iterations a word) but whose induction register
// nothing else in its outer loop writes (`total++`, kept across the outer
// loop) counts the inner iterations over the whole outer trip. On every
// snapshot in the outer loop, that register against the outer loop's own
// induction register rises by the inner iterations per outer iteration:
// the least-squares slope of one on the other, within each outer trip
// signature (`outer.invariant`'s values; positions measured from the
// group's first snapshot), is that ratio, read from register values alone
// and independent of the clock and of where the samples land.
struct NestedRatio {
    bool known = false;
    double per_outer = 0;                // inner iterations per outer iteration
    double low = 0, high = 0;            // eight interleaved groups' slopes and the pooled one +-2 standard errors
    std::uint32_t snapshots = 0;         // in the outer loop
};

// At least this many snapshots in the outer loop make a ratio; the eight
// groups' slopes may differ by at most kMaxNestedSpread (high / low), else
// the relation is not one straight line (trips that restart the register,
// or a register the outer loop resets on some paths): not `known`.
inline constexpr std::uint32_t kMinNestedSnapshots = 64;
inline constexpr double kMaxNestedSpread = 1.5;

// `outer`: the outer loop's query (its code, induction register, invariants);
// `inner_gp`, `inner_step`, `inner_width`: the inner loop's induction register.
NestedRatio nested_ratio(const ProgressQuery& outer, int inner_gp, std::int64_t inner_step, std::uint8_t inner_width);

// Issue 36: a loop whose trips are too short for pairs of snapshots (a
// call lasting a tenth of the sampling period: bits' outer loop, 1,024
// words a call) but whose one way out is a compare of its induction
// register with a register the loop leaves alone (an end pointer, a count)
// or a constant. From any snapshot in the loop, the iterations left in its
// trip follow from the two registers alone: the register steps by `step`
// until the compare goes the way out. Among the snapshots with the same
// invariant registers (one group: the same end), the one with the most
// iterations left is nearest the trip's start, so that group's trips run at
// least that many iterations, and about that many when the trips of a
// group start at the same place. That is the case this measures: the
// group's snapshots must spread over the whole trip (kMinEarlyShare of
// them in its first half), where trips starting at varying places (suffix
// walks to one end) put most of them near the end and are refused. The
// loop's count is then its entries (the flow's) times the trip length: no
// clock and no cost per iteration enter it.
struct TripExit {
    BranchCondition condition;           // the exit block's compare and jump
    bool induction_first = true;         // the induction register is the compare's first operand
    bool stay_when_taken = true;         // the jump's taken way stays in the loop
    // Whether a snapshot at this offset was taken after its iteration's
    // step (the register then holds the value the exit compares).
    std::function<bool(std::uint64_t)> after_step;
};

struct TripLength {
    bool known = false;
    double length = 0;                   // iterations per entry: the groups' lengths, weighted by entries
    double low = 0, high = 0;            // the shortest group's length; the longest's, widened for an unseen start
                                         // (a group of fewer than kMinTripSnapshots: twice its furthest snapshot)
    // The fewest iterations the loop ran: per group (of any size), its
    // entries seen (at least one) times its furthest snapshot from the end.
    double fewest = 0;
    std::uint32_t snapshots = 0;         // in the loop, with a trip end found
    std::uint32_t in_groups = 0;         // of them in groups of kMinTripSnapshots or more
    std::uint32_t groups = 0;            // such groups
    std::uint32_t unbounded = 0;         // snapshots whose register never reaches the exit within kMaxTrip
    bool late = false;                   // a group's snapshots sat near its trips' end (varying starts)
};

// A group makes a trip length from this many snapshots; the groups that do
// must hold kMinGroupedShare of the loop's snapshots (else most trips are
// seen too seldom to find their starts); at least kMinEarlyShare of each
// group's snapshots must lie in the first half of its trip (a fixed start
// spreads them evenly: about half; starts spread evenly over the trip put
// a quarter there).
inline constexpr std::uint32_t kMinTripSnapshots = 32;
inline constexpr double kMinGroupedShare = 0.9;
inline constexpr double kMinEarlyShare = 0.35;
inline constexpr std::uint64_t kMaxTrip = std::uint64_t{1} << 40;

// The iterations left in the trip of a snapshot whose induction register
// holds `at_compare` at this iteration's exit compare and whose other
// operand is `other` (this iteration included); 0 when the register never
// reaches the exit within kMaxTrip (or steps past an equality's bound).
[[nodiscard]] std::uint64_t iterations_left(const TripExit& exit, std::int64_t step, std::uint64_t at_compare,
                                             std::uint64_t other);

// Uses `stream`, `image`, `in_loop`, `candidates`, `gp`, `step`, `width`
// and `invariant` (which must hold the compare's other register).
[[nodiscard]] TripLength trip_length(const ProgressQuery& query, const TripExit& exit);

// A loop that calls other code: how much of its thread's time went to the
// calls. The calls' time is in their own samples, not in the loop's, while
// the pairs (through_calls) see the loop's iterations over its time and the
// calls' together: the loop's count is the rate times its own time times
// (in_loop + away) / in_loop. The calls' time is measured as the snapshots
// of the thread taken outside the loop between two of its snapshots in the
// same trip (invariants unchanged, the induction register moved forward),
// against the snapshots in the loop.
//
// Where the thread's next snapshot in the loop is in another trip, the
// snapshots between may be in this trip's calls, outside the loop, or in
// the next trip's calls: they bound the share from above. Those pairs are
// the ones with the most snapshots in calls (the longer the walk, the likelier
// it leaves the trip), so with short trips the share from same-trip pairs
// alone is low: calls' caller, 100,000 iterations a trip, 6 snapshots a trip,
// read 35% where its callees' samples are 69% of its own.
struct CalleeShare {
    std::uint32_t in_loop = 0;           // snapshots in the loop
    std::uint32_t away = 0;              // snapshots outside it, within one trip
    std::uint32_t same_trip = 0;         // snapshots in the loop whose next one there is in the same trip
    std::uint32_t crossing = 0;          // snapshots outside it between two in different trips
    double share = 0;                    // away / in_loop
    double low = 0, high = 0;            // bounds (Poisson, about 2 sigma; high with `crossing`)
    // in_callees: the snapshots in the calls' code taken for the loop's
    // (they are `away`; no snapshot outside the loop and its calls is in
    // one of its trips).
    std::uint32_t in_callees = 0;
};
CalleeShare callee_share(const ProgressQuery& query);

// A loop with calls is measured when the bounds of its time, (1 + low) to
// (1 + high) times its own, are within this factor of each other (the
// precision measured counts have: docs/ACCURACY.md, all within 10%).
inline constexpr double kMaxCalleeSpread = 1.1;

}  // namespace ecpi::analyze
