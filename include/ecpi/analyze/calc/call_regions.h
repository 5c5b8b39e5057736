// A loop with calls estimated together with the leaves it calls (issue 36).
//
// Samples land one instruction after the one that kept retirement waiting:
// a call's wait lands on the callee's first instruction, the return's on
// the instruction after the call. Cycles move between a loop and the small
// functions it calls (calls.c's caller kept about 4.7 of the ~14 cycles an
// iteration takes; `twice` held ~6 cycles a call, 2.2x its count), so each
// procedure estimated alone from its own samples over its own best case is
// wrong in both directions. Together they add up: where every function a
// loop calls is a leaf without loops that nothing else calls, the loop's count is the
// region's samples (the loop's and the callees') over the region's best-case
// cycles an iteration, and each callee's entry count follows from the call
// sites that reach it (DCPI's flow, across the call graph).
//
// The region's best case an iteration is the larger of its instructions'
// (the loop's own and each callee's per call, times its calls an
// iteration) and its calls' bound (each call the model's call_return_cycles,
// an indirect one its indirect_call_return_cycles):
// a call and its return are mostly a throughput bound the code around
// overlaps with (docs/MACHINE_MODEL.md, bench/accuracy/call_return.c).
//
// An indirect call's targets are not in the code: where the loop's indirect
// calls are the only ones among the image's analyzed procedures, they may
// reach the loop's direct callees and the image's sampled leaves that no
// direct call reaches, and nothing here says how often each. The loop's
// count is the region's only where every split gives nearly the same best
// case an iteration (within kMaxSplitSpread: the calls' bound covers the
// targets' differences, as for calls.c's three one-line leaves), and a
// target the indirect calls may reach keeps its own count and range (an
// equal share was tried: it made stackvm's seven handlers equally common in
// the AFDO profile, against the -g stacks' op_push first).
//
// Where the register snapshots taken before each indirect call decide
// which entry of its table it calls (call_odds.h, at least
// kMinCallSnapshots of them), the targets are those they saw, the region's
// best case adds each target's at its share of the calls, and every
// callee's entries are its direct calls plus its share of the indirect
// ones, times the loop's count: the calls conserve flow across the call
// graph (each target's entries are what the sites that reach it called).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/calc.h"

namespace ecpi::analyze {

// A loop whose blocks all run once an iteration (one frequency class).
struct RegionLoop {
    double samples = 0;                 // its blocks' samples
    double best_cycles = 0;             // its own instructions' best case an iteration (calls' cost not included)
    std::vector<std::uint64_t> direct;  // one target per direct call site (each runs once an iteration)
    std::uint32_t indirect = 0;         // indirect call sites
    // Where the register snapshots decided every indirect call's targets
    // (call_odds.h): per target, its calls an iteration (the sites' shares
    // added up); empty where they did not.
    std::vector<std::pair<std::uint64_t, double>> indirect_shares;
};

// A leaf the loop calls (directly, or through its indirect calls).
struct RegionCallee {
    std::uint64_t start = 0;
    double samples = 0;
    double best_cycles = 0;             // best case a call, at its own estimate's shares of its blocks
};

struct RegionCounts {
    double iterations = 0;              // F of the loop: executions per sampling period
    double best_cycles = 0;             // the region's best case an iteration
    // F of each callee no indirect call may reach, and of every callee
    // where the snapshots decided the indirect calls' targets
    std::vector<std::pair<std::uint64_t, double>> entries;
};

// The most the region's best case an iteration may differ between the
// cheapest and the dearest split of its indirect calls over their targets.
inline constexpr double kMaxSplitSpread = 1.1;

// The loop's and its callees' counts as one region. `callees` holds every
// direct target and every possible indirect target once; `indirect_targets`
// the starts of the latter (empty where the loop has no indirect call).
// None where a direct target is missing from `callees`, an indirect call
// has no target, or the region has no samples or no cycles.
struct CallCosts {
    double direct = 0;                  // MachineModel::call_return_cycles
    double indirect = 0;                // MachineModel::indirect_call_return_cycles
};
std::optional<RegionCounts> region_counts(const RegionLoop& loop, std::span<const RegionCallee> callees,
                                          std::span<const std::uint64_t> indirect_targets, CallCosts calls);

// An analyzed procedure as the regions see it: its image (procedures of
// one image call each other by address) and its first analysis.
struct RegionProcedure {
    std::size_t image = 0;
    const CalcProcedure* proc = nullptr;
};

// What a region gives one procedure: block address -> executions, whether
// a loop of its own is the region's (else it is a callee), and per such
// loop's header the region's best case an iteration.
struct ProcedureRegion {
    std::vector<std::pair<std::uint64_t, double>> counts;
    bool loop = false;
    std::map<std::uint64_t, double> best_cycles;
};

// Every region among `procs` (keyed by position in `procs`). A loop makes
// one where it is not measured (CalcLoop::anchored), its blocks run once
// an iteration (CalcLoop::straight), and every call in it reaches a leaf
// of the same image (no call sites, no loops, no jumps out) that no call outside the loop reaches
// directly; its indirect calls, if any, are the image's only ones, and
// their targets are its direct callees and the sampled leaves of the image
// no direct call reaches. A callee two regions claim is left to its own
// samples, and so are both loops.
std::map<std::size_t, ProcedureRegion> call_region_counts(std::span<const RegionProcedure> procs,
                                                          CallCosts calls, double period_cycles);

}  // namespace ecpi::analyze
