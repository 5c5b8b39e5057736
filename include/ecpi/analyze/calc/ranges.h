// Honest ranges where the samples cannot decide (calc: DCPI 6.1 warns that
// on an out-of-order core a class whose samples all land on one issue point
// cannot tell "runs often and fast" from "runs less often and stalls").
//
// A class estimated from placement alone with low confidence, and not
// anchored by register progress, gets a range of counts instead of a number
// it cannot defend:
// (its samples taken as S +- 2 sqrt(S), their own sampling error)
//  - at most its samples over its best-case cycles (no stall at all), and at
//    most what an anchored enclosing loop allows (a block outside nested
//    loops runs at most once per iteration of its loop, plus the loop's
//    entries);
//  - at least its samples over its best-case cycles plus the longest stall
//    each of its instructions can take by the machine model (a load or a
//    store: a memory access plus a page walk; a return, call or indirect jump: a
//    misprediction; a conditional jump: a misprediction at most twice per
//    execution of its rarer way, as far as its register snapshots bound that
//    way's share, else every time), plus the longest a predecessor's last instruction can
//    leave on it: a sample lands `sample_skid` instructions after the one
//    that waited, so a block's first instruction holds the wait of the jump
//    that reached it (an interpreter's case blocks hold the mispredicted
//    jump through its table);
//  - the "at most" bound counts only the cycles that stay in the class:
//    its last `sample_skid` instructions leave theirs to the next block.
// The range also spans the estimator's own point (from the ratios of samples
// at issue points), as the model's best case is no hard bound; only an
// anchored loop's bound is: there the point is moved into the range. A class
// with a confident estimate that breaks its anchored loop's bound is ranged
// too.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/cycle_equivalence.h"
#include "ecpi/analyze/calc/frequency.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/analyze/calc/machine_model.h"

namespace ecpi::analyze {

// Why a range is a point (issue 36, item 2: a block whose range collapses
// to a point says why).
enum class RangePoint : std::uint8_t {
    kNone,        // not a point
    kLoopBound,   // its samples' least count is above its measured loop's: capped at the loop's count
};

struct ClassRange {
    bool ranged = false;
    double min = 0, max = 0;              // F (executions per sampling period)
    RangePoint point = RangePoint::kNone;
};

// "" for kNone.
const char* range_point_reason(RangePoint point);

struct RangeInput {
    const Cfg* cfg = nullptr;
    const FrequencyClasses* classes = nullptr;
    const std::vector<BlockTiming>* timing = nullptr;
    const FrequencyEstimate* estimate = nullptr;
    const LoopInfo* loops = nullptr;
    const MachineModel* model = nullptr;
    std::span<const std::uint64_t> samples;      // per instruction
    std::vector<double> loop_anchor;             // per loop: its anchored F (0: none)
    std::span<const BranchOdds> odds;            // conditional jumps evaluated on register snapshots
    std::uint64_t min_samples = 8;               // classes with fewer samples are left as they are
};

// Per class.
std::vector<ClassRange> class_ranges(const RangeInput& input);

// The estimate with every ranged class's F moved to `position` along its
// range (0: the low end, 1: the high end; geometric in between, as ranges
// span orders of magnitude), blocks and edges recomputed: what the culprit
// analysis runs on to find each cause's range over the counts the samples
// allow (a cause can peak inside the range: at the low end a stall can be
// longer than any one cause explains).
FrequencyEstimate estimate_at(const FrequencyEstimate& estimate, const Cfg& cfg, const FrequencyClasses& classes,
                              std::span<const ClassRange> ranges, double position);

// Every range the samples' cycles decide, widened by `margin` each way
// (the clock rate's: calc.h, ProcedureInput::clock_margin), after the
// flow and the culprits: the rate's error is common to every count of the
// procedure, so it weighs no block's evidence against another's, but a
// range must hold every count it allows. loops' `poly` (callgrind: 327.7
// M) sat at 0.88x its samples' floor (372.0 M) at the rate
// bench/accuracy.sh measured for it, 2,957 MHz, against 2,580-2,760 MHz
// measured under sampling in ten recordings: its range excluded the
// truth. Measured classes (anchors' intervals) and points capped at a
// measured loop's count keep theirs.
void widen_by_clock_margin(std::vector<ClassRange>& ranges, const FrequencyEstimate& estimate, double margin);

// The point estimate moved into each range (in place).
void clamp_to_ranges(FrequencyEstimate& estimate, const Cfg& cfg, const FrequencyClasses& classes,
                     std::span<const ClassRange> ranges);

}  // namespace ecpi::analyze
