// Branch and switch odds from the executions after a snapshot's own
// (issue 36: unbiased odds from time-weighted snapshots).
//
// branch_odds.h and switch_odds.h evaluate a decision on the snapshots taken
// in its own block, before it: the execution the snapshot stands in. But a
// snapshot falls in an interval between two executions of a decision with a
// probability proportional to the interval's time, and that time depends on
// how both ends went (a mispredicted end stalls the code after it; the time
// before a jump can depend on its direction): the executions snapshots stand
// in are not a uniform sample of the executions. chain's first branch went
// the odd way in 56.7% of the snapshots at it, where callgrind counts 50.0%.
//
// Here each snapshot is replayed forward through the CFG from its pc
// (switch_odds.h's replay; a decision is followed when its operands are
// known; a call leaves the caller-saved registers unknown) for up to
// kLaterInstructions instructions, and every decision met is evaluated on
// the way. The first execution of each decision after the snapshot (the end
// of the interval the snapshot fell in) is skipped; the next kLaterPerDecision
// are counted. Their time does not weigh their chance of being counted, so
// they are biased only as far as they are correlated with the skipped one.
// On chain's recordings: 50.1% and 49.95% odd (16 later executions per
// snapshot), against 56.7% and 57.4% from the snapshots before the branch.
//
// The replay stops where it cannot decide a decision (a compare on memory,
// an index loaded from memory, a return): decisions whose operands come from
// memory every time are left to branch_odds.h's own-block snapshots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/switch_odds.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

inline constexpr std::uint32_t kLaterInstructions = 512;
inline constexpr std::uint32_t kLaterPerDecision = 16;

// Odds from later executions. `total` (and a switch's summed counts) is the
// number of snapshots that counted an execution of the decision, `taken`
// (a case's count) that number times the share of the counted executions
// that went that way, rounded: each snapshot weighs one, however many of
// its later executions it counted (they are not independent draws).
struct LaterOdds {
    std::vector<BranchOdds> branches;
    std::vector<SwitchOdds> switches;
};

// Arguments as branch_odds().
LaterOdds later_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                     std::span<const std::uint32_t> candidates);

// Per decision, the later odds where at least half as many snapshots
// decided them as decided the own-block odds (each snapshot counted once
// either way), else the own-block odds.
std::vector<BranchOdds> prefer_later(std::vector<BranchOdds> own, const std::vector<BranchOdds>& later);
std::vector<SwitchOdds> prefer_later(std::vector<SwitchOdds> own, const std::vector<SwitchOdds>& later);

}  // namespace ecpi::analyze
