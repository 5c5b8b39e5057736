// An indirect call's targets from register snapshots (issue 36: evidence
// that decides where a table's calls go).
//
// A call through a table, `call [base + index*8 + disp]`, goes where the
// table's entry says. The entry's address is known for a snapshot taken in
// the call's block before the call: the block's remaining instructions are
// replayed on the snapshot's registers (switch_odds.h's replay, with cdqe)
// up to the call and the index read there; the base is the address a
// rip-relative `lea` put in the register on every path to the call (the
// snapshot's own value is a run-time address). The entry read from the
// image (its relocation applied in a position-independent one) is the
// target that execution called. Over the block's snapshots, each target's
// share estimates its share of the call's executions, as switch_odds does
// for a table jump; the samples alone cannot split them, since a call's
// wait lands on the callee's first instruction (DCPI 6.1: samples count
// time, not executions).
//
// Time-weighted like the switch's: unbiased where the time spent before
// the call does not depend on the target. Where the index is loaded from
// memory just before the call (an interpreter's next opcode), the
// snapshots that decide it wait after the previous call's target: they are
// reported, not used (CallOdds::index_from_memory). Snapshots are not
// replayed across another call (it may change any register the ABI lets it).
//
// Where the index is a function of the call's loop's induction variable
// (loops.h) and of registers the loop never writes, a snapshot stands for
// the iterations around the one it was taken in, not for that one alone:
// its targets are those the index selects at the induction's values
// kWindow/2 steps either side (within the values the call's snapshots saw).
// Each iteration of a trip runs once, so these are the call's executions
// near the snapshot whatever each waited; the snapshot's own iteration is
// picked by time, and the time before a call can depend on its target's
// phase (calls.c's `table[i % 3]`: the plain shares came out 0.40 / 0.30 /
// 0.31 of the calls against 1/3 each, beyond a sampling error of 0.01).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// Snapshots needed before a call's shares are used: a target none of them
// chose then runs below about 1% of the call's executions (calc_procedure's
// kMinNever for branches and switches).
inline constexpr std::uint32_t kMinCallSnapshots = 400;
// Iterations a snapshot stands for where the index follows the induction variable.
inline constexpr std::uint32_t kWindow = 64;

struct CallOdds {
    std::uint64_t call = 0;                                     // the call instruction's address
    // target address -> snapshots, by address; where the induction's
    // window decided them, kWindow per snapshot, split over its targets
    std::vector<std::pair<std::uint64_t, std::uint32_t>> targets;
    std::uint32_t total = 0;                                    // snapshots that decided the target
    bool by_induction = false;                                  // every snapshot counted through the window
    bool index_from_memory = false;                             // see above: reported, not used
};

// Whether odds `o` decide the call's split over its targets.
bool call_odds_decide(const CallOdds& o);

// The 8-byte pointer an image holds at an address (ImageBytes::pointer_at).
using PointerAt = std::function<std::optional<std::uint64_t>(std::uint64_t)>;

// Per indirect call through a table with at least one deciding snapshot.
// `stream`, `image` and `candidates` as branch_odds().
// `loops` (may be null): the procedure's loops, for the induction's window.
std::vector<CallOdds> indirect_call_odds(const Cfg& cfg, const PointerAt& pointer_at,
                                         std::span<const store::RegisterSample> stream, std::uint32_t image,
                                         std::span<const std::uint32_t> candidates, const LoopInfo* loops = nullptr);

}  // namespace ecpi::analyze
