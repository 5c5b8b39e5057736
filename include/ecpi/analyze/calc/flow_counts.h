// calc's counts as one flow over the procedure's CFG (issue 36).
//
// The estimator (frequency.h) estimates each frequency class apart and
// propagates between them; ranges (ranges.h) move a class within what its
// samples allow. Neither makes the counts conserve flow: the arms of a
// branch inside a measured loop each came out at the loop's count. Here the
// counts become one minimum-cost flow (flow_inference.h), the solver layout
// uses:
//  - anchored classes (a loop's iterations from register progress, a
//    branch's edges from its snapshots' odds) are measured counts, moved
//    only where two measurements contradict each other;
//  - every other block's samples are soft evidence at calc's estimate
//    (block_evidence: Poisson-shaped costs; unsampled blocks cost what it
//    would take to run them unseen);
//  - a conditional jump whose condition was evaluated on register snapshots
//    (branch_odds.h), or a jump table whose index was (switch_odds.h),
//    states each edge at its share of the block's count, as if the
//    snapshots that went its way were samples of it. The shares are odds,
//    not counts: conserve_flow restates them at the flow's count of the
//    block and solves again, until the block's count settles.
//  - a loop that carries flow is entered: a circulation may keep a cycle
//    running that no edge feeds (a loop whose way in costs more, unsampled,
//    than the way around it), which no execution can do. Each loop's
//    entries pass one virtual block held at a floor: the entries its
//    snapshots saw, and one where the loop's header has a count.
// Cycle-equivalent blocks and edges carry equal flow in every circulation,
// so the solution is again one count per frequency class.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/cycle_equivalence.h"
#include "ecpi/analyze/calc/flow_inference.h"
#include "ecpi/analyze/calc/frequency.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/analyze/calc/machine_model.h"
#include "ecpi/analyze/calc/ranges.h"
#include "ecpi/analyze/calc/switch_odds.h"

namespace ecpi::analyze {

// A loop whose trip length register snapshots read off its exit's bound
// (register_progress.h, trip_length): its latch's branch leaves it once in
// `length` executions. Odds the snapshots cannot give (a trip of 1,024
// iterations is left about once in 1,024 snapshots: none seen).
struct TripShare {
    std::uint32_t block = 0;                     // the latch, ending in the loop's one exit
    std::uint32_t stay_edge = 0, exit_edge = 0;  // CFG edge indices
    double length = 0;                           // iterations a trip
    double weight = 0;                           // the snapshots it rests on
    // From its trips' first iterations (entry_trips.h): `block` is the
    // preheader, whose one edge `exit_edge` enters the loop, and
    // `stay_edge` the back edge, which runs length - 1 times per entry.
    bool from_entry = false;
    // A bisection's (bisection_trips.h): with from_entry, its header (it
    // may have several back edges) runs length times the preheader's count,
    // and the odds of the branches of `exit_tests` (their compares of the
    // bounds) are scaled by one factor so that their exits add up to its
    // entries (flow_counts.cpp, scaled_exits).
    std::uint32_t header = 0xffffffffu;
    std::vector<std::uint32_t> exit_tests;
};

struct FlowCountsInput {
    const Cfg* cfg = nullptr;
    const FrequencyClasses* classes = nullptr;
    const std::vector<BlockTiming>* timing = nullptr;
    std::span<const std::uint64_t> samples;      // per instruction
    std::span<const BranchOdds> odds;            // snapshot odds (may be empty)
    std::span<const SwitchOdds> switches;        // jump tables' snapshot odds (may be empty)
    // Jump tables whose snapshots' shares are of time (switch_undecided):
    // each case a snapshot chose gets a floor (timed_case_floor).
    std::span<const SwitchOdds> timed_switches;
    // Conditional jumps only a compare with memory's flags decided
    // (BranchOdds::timed): each way a snapshot chose gets the same floor.
    std::span<const BranchOdds> timed_odds;
    double period_cycles = 0;                    // F * period_cycles = executions
    // The procedure's entry count from its callers' measured call sites
    // (0: unknown): a measured count on the entry edge (hard within the
    // measured tolerance), or with `entry_lower_bound` a hard floor.
    double entry_executions = 0;
    bool entry_lower_bound = false;
    // The procedure's loops (null: none known). A loop is entered through
    // the edges into its header from outside it: where the flow gives a
    // loop a count, those carry at least one execution, and at least the
    // entries its threads' snapshots saw (`loop_entries_seen`, per loop,
    // loop_entries_seen() of register_progress.h; empty: none seen).
    const LoopInfo* loops = nullptr;
    std::span<const double> loop_entries_seen;
    // Loops with a trip length: their exit's share is 1 / length, stated
    // like a branch's odds (as decided as odds whose rarer way was seen),
    // and in place of the latch branch's own odds.
    std::span<const TripShare> trips;
    // Edges that never run: the entry block's way its callers' constant
    // arguments do not take (entry_arguments.h). Measured at 0.
    std::span<const std::uint32_t> ruled_out;
};

// The flow problem in executions: one soft count per block and edge, from
// `estimate` (F per period) and `ranges` (per class).
FlowProblem calc_flow_problem(const FlowCountsInput& in, const FrequencyEstimate& estimate,
                              std::span<const ClassRange> ranges);

// Solves it and makes `estimate` that flow (classes, blocks, edges,
// invocations). A ranged block's samples weigh by its range (S' = 1 / (1/S +
// (ln(max/min)/4)^2): its point is no better known than its range allows).
// Each ranged class's range narrows to the least and most count a flow can
// give it while the hard constraints hold: measured counts within 10%, every
// ranged class within its own range (two min-cost flows per ranged class).
// A ranged class whose flow count falls outside its range gets its range
// widened to hold it: a range must hold the count calc reports.
void conserve_flow(FrequencyEstimate& estimate, std::vector<ClassRange>& ranges, const FlowCountsInput& in);

}  // namespace ecpi::analyze
