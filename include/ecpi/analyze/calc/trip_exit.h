// The way out of a loop whose trip length its exit's bound gives
// (register_progress.h, trip_length): every exit a latch closing on the same
// compare of an induction register, stepped in that latch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/frequency.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/analyze/calc/register_progress.h"

namespace ecpi::analyze {

// Loop l's exit and the register it compares: one latch (a rotated `for`
// loop's `add rdi, 8; cmp rdi, rsi; jne`), or several that each step the
// same register and compare it with the same bound (gcc gives branchy's
// state machine two: `add rdi, 4; cmp rdi, rcx` closing each arm). Every
// iteration passes one latch, steps once and compares once; a snapshot in a
// latch past its step holds the value the compare reads. A loop that calls
// qualifies where its calls change neither register (Loop::call_clobbers:
// branchy's main steps r9 over 2,048 words around each call of `search`,
// which leaves r9 and the bound alone). None when the loop leaves
// elsewhere, or its latches disagree.
[[nodiscard]] std::optional<std::pair<TripExit, const InductionVariable*>> trip_exit(const Cfg& cfg,
                                                                                   const LoopInfo& loops,
                                                                                   std::uint32_t l);

// Loop l's entries (the flow's count on its header's edges from outside the
// loop) where every one of them comes from a block `estimate` rates
// measured; none otherwise, or where they sum to nothing.
[[nodiscard]] std::optional<double> measured_loop_entries(const Cfg& cfg, const Loop& loop,
                                                          const FrequencyEstimate& estimate);

// Issue 36: a second count for a loop register progress measured at
// [low, high] (the same unit as `entries`): its measured entries times a
// trip length every group of its snapshots agrees on (within 1%), where that
// product falls outside [low, high]; none where it falls inside, where the
// entries are not measured, or where the groups' lengths differ. Register
// progress times a loop's time by its samples and its calls' estimated
// share; the product needs neither.
[[nodiscard]] std::optional<double> trip_recount(const TripLength& trip, std::optional<double> entries, double low,
                                                 double high);

// Per block, whether its count is as good as measured though no register
// progress measured it: the blocks of a loop header's class whose trip
// length is known (trip_length on trip_exit's compare) and whose entries all
// come from measured blocks, where `estimate` (the flow's) gave the header
// their count times the length within the measured tolerance (10%).
// branchy's main calls `search` from such a loop, 2,048 keys a trip, its
// entries the repetition loop's measured count: the call site passes that
// count on as the callee's entries (calc.cpp, entries_from_callers).
// `loop_anchor` per loop: > 0 where register progress measured it.
[[nodiscard]] std::vector<bool> trip_measured_blocks(const Cfg& cfg, const LoopInfo& loops,
                                                     std::span<const TripLength> trips,
                                                     std::span<const double> loop_anchor,
                                                     const FrequencyClasses& classes,
                                                     const FrequencyEstimate& estimate);

}  // namespace ecpi::analyze
