// The way out of a loop whose trip length its exit's bound gives
// (register_progress.h, trip_length): every exit a latch closing on the same
// compare of an induction register, stepped in that latch.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "ecpi/analyze/calc/cfg.h"
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

}  // namespace ecpi::analyze
