// Flow inference: execution counts for every block and edge of a CFG that
// conserve flow (what enters a block leaves it) and stay as close to the
// samples as conservation allows. Sampled counts are soft constraints: each
// count has a convex, piecewise-linear cost of being stated above or below
// its estimate, and the solver finds the conserving counts of least total
// cost (a minimum-cost circulation).
//
// The same idea as LLVM's profile inference ("profi", Levin et al., "Profile
// inference revisited", POPL 2022) and BOLT's stale-profile matching, with
// costs from ecpi's sampling model instead of fixed weights: a block seen in
// S samples whose estimate is E costs the negative log-likelihood of S
// Poisson samples at a rate proportional to its count (poisson_count), and a
// block no sample saw costs the likelihood of seeing none: linear in its
// count, best-case cycles per execution over the sampling period
// (unseen_count). So a block between executed blocks, on the only path
// between them, gets their count; an unsampled rare path gets none where a
// cheaper path carries the flow.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace ecpi::analyze {

// A stretch of a count's cost: `length` units of count at `cost` each.
struct FlowSegment {
    double length = std::numeric_limits<double>::infinity();
    double cost = 0;
};

// A count's soft constraint. `up` raises it above `estimate`, `down` lowers
// it, each nearest stretch first with non-decreasing costs (convex); the
// last `up` stretch is unbounded; `down` stops at 0.
struct SoftCount {
    double estimate = 0;
    std::vector<FlowSegment> up{FlowSegment{}};
    std::vector<FlowSegment> down;
};

// Where an edge starts or ends outside the graph: the procedure's entry,
// its exits (returns, tail jumps). Same values as cfg.h's kEntryBlock and
// kExitBlock.
inline constexpr std::uint32_t kFlowSource = 0xfffffffeu;
inline constexpr std::uint32_t kFlowSink = 0xffffffffu;

struct FlowArc {
    std::uint32_t from = 0, to = 0;           // block indices, or kFlowSource / kFlowSink
    SoftCount count;
};

struct FlowProblem {
    std::vector<SoftCount> blocks;
    std::vector<FlowArc> edges;
};

struct FlowSolution {
    std::vector<double> blocks;               // indexed like FlowProblem::blocks
    std::vector<double> edges;                // indexed like FlowProblem::edges
    double cost = 0;                          // of the deviations from the estimates
};

// Free to take any count (an edge the samples say nothing of).
SoftCount free_count();
// Never observed: 0, `cost` per unit above it (>= 0).
SoftCount unseen_count(double cost);
// `samples` samples at an estimated `estimate` executions: the Poisson
// negative log-likelihood S*f/E - S*ln(f), minimal at f = E, as linear
// stretches between E/16, E/4, E/2, E, 2E, 4E (beyond: its asymptotic
// slope S/E).
SoftCount poisson_count(double estimate, double samples);
// The same where the samples allow a range: free within [low, high],
// Poisson-shaped slopes beyond its ends.
SoftCount poisson_range(double low, double high, double samples);

// A count measured independently of the samples' placement (a loop's
// iterations from register progress, a branch's edges from its snapshots'
// odds; calc's anchors): a constraint, not evidence. Moving it costs far
// more per execution than any sample-based count can (their steepest
// stretch costs S/E * 31, and S/E, samples per execution, is below 1 for
// any block shorter than the sampling period).
SoftCount measured_count(double executions);

// What a count below a floor costs per execution: more than any
// sample-based stretch (at most S/E * 31, S/E below 1), less than a measured
// count (1,000), which wins where the two disagree.
inline constexpr double kBelowFloorCost = 100;
// `c` with every execution below `floor` priced at kBelowFloorCost (where
// its point is above the floor; else `c` unchanged).
SoftCount floored(SoftCount c, double floor);
// The same where `c` itself may ask for less (a free edge): its point is
// raised to the floor.
SoftCount with_floor(SoftCount c, double floor);

// Snapshot shares that are of time, not of executions: a jump table's index
// loaded just before it (switch_undecided), a compare with memory's flags
// (BranchOdds::timed). The least share of its block's count a way chosen by
// `chose` of `total` such snapshots takes (0 for none): a floor, never a
// share or a ceiling. For calc's flow (flow_counts.h) and layout's.
double timed_share_floor(std::uint32_t chose, std::uint32_t total);

// What a block's samples say of its count, for calc's flow (flow_counts.h)
// and layout's: `samples` at calc's estimate of `executions`, or a range of
// counts where calc could not decide.
struct BlockEvidence {
    double samples = 0;
    double executions = 0;
    bool ranged = false;
    double executions_min = 0, executions_max = 0;
    double best_cycles = 0;                  // per execution (0: unknown, taken as 1)
    bool alternative = false;                // one side of a conditional jump
    bool after_call = false;                 // every sample within a few instructions after a call
};

// Expected samples per execution of a block with no stall: best-case cycles
// over the sampling period. No sample in f executions has likelihood
// exp(-f * that).
double samples_per_execution(double best_cycles, double period_cycles);

// Unsampled: unseen_count at samples_per_execution. Sampled: poisson_count
// at calc's point; where the samples allow a range and the block is one side
// of a conditional jump, poisson_range, free only up to what its samples
// guarantee (above, a quarter of an unsampled block's price per execution).
// A side of a conditional jump that calc did not range, with one or two
// samples, all after a call (`after_call`), is taken as ranged from what its
// samples' own error allows (0) up to its point.
SoftCount block_evidence(const BlockEvidence& b, double period_cycles);

// That last case's range (ranged false where it does not apply): a branch
// closing such a block states its odds within it (layout_flow_problem), not
// at the block's point.
struct EvidenceRange {
    bool ranged = false;
    double low = 0, high = 0;                // executions
};
[[nodiscard]] EvidenceRange few_samples_range(const BlockEvidence& b);

// Counts are rounded to whole executions. Edges to or from a block index
// out of range (other than kFlowSource/kFlowSink) are ignored (count 0).
[[nodiscard]] FlowSolution solve_flow(const FlowProblem& problem);

}  // namespace ecpi::analyze
