// Frequency estimation (DCPI 6.1.3 - 6.1.5): factor each instruction's
// sample count S_i ~ F_i * C_i into a frequency F_i and a CPI C_i.
//
// Units: F is executions per sampling period P (in cycles), so an estimated
// execution count is F * P and C_i = S_i / F_i cycles.
//
//  1. Per frequency-equivalence class, the issue points (M_i > 0 with M_i
//     known) give ratios S_i / M_i, taken over a small window around i
//     (samples on x86 land within an instruction or so of the stall) and
//     over the span since the instruction producing i's critical operand;
//     clusters of similar small
//     ratios (max <= 1.5 * min) are candidates, lowest first; a cluster is
//     discarded when it holds too few of the class's issue points or too few
//     samples, or when its estimate would imply an unreasonable stall for
//     another instruction. Classes with few samples use sum S / sum M.
//  2. A block and its only predecessor (or successor) whose estimates
//     contradict the flow between them are estimated together.
//  3. Local propagation over the flow constraints of the split CFG (every
//     node: inflow == outflow), an estimate being shared by its whole class
//     at once, never negative; confident estimates first, then the rest.
//  4. A confidence (low/medium/high) for each estimate from the number of
//     issue points used, the spread of their ratios, the samples behind it
//     and whether it came from propagation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/cycle_equivalence.h"
#include "ecpi/analyze/calc/machine_model.h"

namespace ecpi::analyze {

// kMeasured: the count rests on an anchor (register progress, loops.h and
// register_progress.h), or was propagated from anchors alone.
enum class Confidence : std::uint8_t { kLow, kMedium, kHigh, kMeasured };
const char* confidence_name(Confidence c);

enum class EstimateSource : std::uint8_t {
    kIssuePoints,  // a cluster of issue-point ratios (DCPI 6.1.3)
    kSampleTotal,  // sum S / sum M over the class (few samples, or no acceptable cluster)
    kInstructionCounts,  // samples of an event counting retired instructions
    kPropagated,   // flow constraints (DCPI 6.1.4)
    kPooled,       // with a neighbouring block whose estimate contradicted the flow between them
    kRegisterProgress,  // an anchor: a loop's iteration rate from register snapshots times its time
    kCallRegion,   // a loop with the leaves it calls as one region, or such a leaf's calls (call_regions.h)
    kLoadChain,    // a pointer chase's samples over its measured chase latency (load_chain.h)
    kNone,         // nothing to go on: taken as 0
};
const char* estimate_source_name(EstimateSource s);

struct ClassEstimate {
    double frequency = 0;              // F, executions per sampling period
    bool known = false;
    Confidence confidence = Confidence::kLow;
    EstimateSource source = EstimateSource::kNone;
    std::uint32_t issue_points = 0;    // in the class
    std::uint32_t issue_points_used = 0;
    double spread = 0;                 // max/min ratio of the cluster used (1 = tight)
    std::uint64_t samples = 0;         // samples of the class's instructions
};

// A count measured independently of the samples' placement: a loop's
// iterations from register progress (register_progress.h). It holds for the
// class of `block`, overriding the class's own estimate, and propagates.
// A branch's edges get anchors too: its block's measured count split by the
// share of snapshots that went each way (branch_odds.h).
struct Anchor {
    std::uint32_t index = 0;           // a block, or with `edge` a CFG edge
    double frequency = 0;              // F, executions per sampling period
    bool edge = false;
};

struct EstimatorOptions {
    double cluster_width = 1.5;        // a cluster's max ratio <= width * its min ratio (DCPI 6.1.3)
    double min_cluster_fraction = 0.25;// of the class's issue points
    std::uint64_t min_cluster_samples = 8;
    std::uint64_t few_samples = 40;    // below this, a class uses sum S / sum M
    double max_stall_cycles = 4000;    // an estimate implying a longer stall per execution is anomalous
    // A class with at least this share of its samples on instructions the
    // model cannot time after a call in their block is estimated from its
    // blocks' cycles, calls included (BlockTiming::call_cycles).
    double after_call_share = 0.75;
    // A block with one predecessor runs no more often than it (and a block
    // with one successor no more often than that): where the two classes'
    // estimates break that by more than this factor, both take the two
    // blocks' samples over their cycles together (0: off).
    double pool_contradiction = 1.5;
    std::uint32_t attribution_radius = 1;  // window (instructions each side) of an issue point's ratio
    std::uint32_t whole_block_below = 0;   // blocks of at most this many instructions may use the whole block as the window (0: off)
    // Such a block is taken whole only where an issue point's own window holds
    // less than smear_low_fraction of what the block's ratio predicts (and that
    // prediction is at least smear_min_samples). In a whole-block window, an
    // instruction whose samples stand for more than max(blocks x the block's
    // best-case cycles, cycles) per execution at the rest's ratio is a dynamic
    // stall and left out of the window (judged against the rest's ratio at
    // its upper bound, and only while the rest holds smear_min_samples).
    double smear_low_fraction = 0.5;
    double smear_min_samples = 20;
    double smear_limit_blocks = 4;
    double smear_limit_cycles = 16;
    // Samples of an event that counts retired instructions (per instruction,
    // same layout as the cycle samples) and its period in instructions;
    // empty: none. Used where they give more samples than the cycle ratios.
    std::vector<std::uint64_t> instruction_samples;
    double instruction_period = 0;
    double cycle_period = 0;           // P in cycles (needed with instruction_samples)
    std::vector<Anchor> anchors;       // measured counts (override estimates, rated kMeasured)
    // Blocks' counts from a call region (call_regions.h): they replace the
    // class's own estimate, rated low (anchors override them).
    std::vector<Anchor> regions;
    // Loops bound by a chain of loads that miss (load_chain.h): their
    // samples' time over the measured chase latency, rated low (call
    // regions and anchors override them).
    std::vector<Anchor> load_chains;
};

struct FrequencyEstimate {
    std::vector<ClassEstimate> classes;                 // by class id
    std::vector<double> block_frequency;                // F per block
    std::vector<Confidence> block_confidence;
    std::vector<EstimateSource> block_source;
    std::vector<double> edge_frequency;                 // F per CFG edge
    double invocations = 0;                             // F of the procedure's entry (exit -> start class)
    bool propagated = false;                            // local propagation ran (no missing edges)
};

// `samples` holds S_i per instruction of the CFG.
FrequencyEstimate estimate_frequencies(const Cfg& cfg, const FrequencyClasses& classes,
                                       const std::vector<BlockTiming>& timing, std::span<const std::uint64_t> samples,
                                       const EstimatorOptions& options = {});

}  // namespace ecpi::analyze
