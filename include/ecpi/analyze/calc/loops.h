// Natural loops and their induction variables, from a procedure's CFG.
//
// `ecpi calc` anchors execution counts on register progress (docs/ACCURACY.md):
// where a loop steps a register by a constant once per iteration, two
// register snapshots of one thread inside one invocation of the loop say how
// many iterations ran between them. This file finds the loops and the
// registers that qualify; register_progress.h turns snapshots into rates.
//
// Loops are the natural loops of back edges t -> h where h dominates t
// (dominators over the CFG rooted at kEntryBlock, virtual entries included).
// Loops that share a header are one loop.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"

namespace ecpi::analyze {

inline constexpr std::uint32_t kNoLoop = 0xffffffffu;

struct Loop {
    std::uint32_t header = 0;
    std::vector<std::uint32_t> blocks;    // sorted; the header and nested loops' blocks included
    std::vector<std::uint32_t> latches;   // sources of the back edges into the header, sorted
    std::uint32_t parent = kNoLoop;       // the innermost loop enclosing this one
    std::uint32_t depth = 1;              // 1 for an outermost loop
    bool has_call = false;                // a call in the loop's blocks (callee time is not in them)
    // Registers (bit n: hardware number n) the loop's callees may change by
    // the time they return (the caller-saved ones their code writes; all
    // caller-saved ones for a call whose code is not known), and those any
    // instruction of its callees writes (kAllGp then: a snapshot inside a
    // call sees them changed). 0 without calls.
    std::uint16_t call_clobbers = 0;
    std::uint16_t callee_writes = 0;
    bool contains(std::uint32_t block) const;
};

// A register stepped by a constant once per iteration of its loop: exactly
// one instruction in the loop writes it (add/sub/inc/dec with an immediate,
// or lea r, [r + disp]), that instruction's block is in no nested loop and
// dominates every latch, so each iteration runs it exactly once. Or several
// instructions write it, all adding the same constant, none in a nested
// loop, and every path from the header to a latch passes exactly one
// of them (`i++` in each arm); nested loops that do not write it are allowed;
// `instruction` is then the first of them and
// `block` the header, which runs once per iteration.
struct InductionVariable {
    std::uint32_t loop = 0;               // index into LoopInfo::loops
    int gp = -1;                          // hardware register number (store::GpRegister)
    std::int64_t step = 0;                // added per iteration (negative: counts down)
    std::uint8_t width = 8;               // bytes the step works on (4: a 32-bit register, zero-extended)
    std::uint32_t instruction = 0;        // CFG index of the stepping instruction
    std::uint32_t block = 0;              // its block: it runs once per iteration
};

// Issue 36: a register that one block of a loop steps by a constant and
// nothing else in the loop changes (`words++` where a word ends, a match
// counter): over a trip it counts that block's executions, as an induction
// register counts iterations, though the block runs on some iterations only.
// A caller-saved counter its block stores to the frame before a call and
// loads back after it counts on; between the call and the load a snapshot
// holds what the callee left (`clobbered`: offsets after the call up to and
// with the load, whose snapshots say nothing of it).
struct BlockCounter {
    InductionVariable counter;            // its loop, register, step, instruction and block
    std::vector<std::pair<std::uint64_t, std::uint64_t>> clobbered;  // [after the call, the load]
};

struct LoopInfo {
    std::vector<std::uint32_t> idom;      // per block: immediate dominator (kEntryBlock for roots; unreachable: kNoLoop)
    std::vector<Loop> loops;              // outer loops before the loops they contain
    std::vector<std::uint32_t> innermost; // per block: innermost loop holding it, or kNoLoop
    std::vector<InductionVariable> induction;  // by loop, then register
    // Per loop: the general-purpose registers (hardware numbers) the loop
    // reads and never writes; equal in two snapshots of one invocation.
    std::vector<std::vector<int>> invariant;
    // Per loop: every general-purpose register but rsp that neither the
    // loop's instructions nor any instruction of its callees writes, read
    // or not: equal in two snapshots of one trip, in the loop or in its
    // calls (an outer loop's counter tells trips apart).
    std::vector<std::vector<int>> steady;
    std::vector<BlockCounter> counters;   // by loop, then register
};

// The registers (bit n: hardware number n) the code a direct call to
// `target` runs may write (callee_code.h); all 16 when not known.
using CallWrites = std::function<std::uint16_t(std::uint64_t target)>;

// Whether block a dominates block b (every path from the entry to b passes a).
bool dominates(const LoopInfo& info, std::uint32_t a, std::uint32_t b);

// The targets an indirect call (by its address) was seen to reach where
// its register snapshots decide them (call_odds.h); empty: not known.
using IndirectTargets = std::function<std::vector<std::uint64_t>(std::uint64_t call)>;

// call_writes unset: every call may change every caller-saved register.
// An indirect call writes what its known targets may (`indirect`), else all.
LoopInfo find_loops(const Cfg& cfg, const CallWrites& call_writes = {}, const IndirectTargets& indirect = {});

}  // namespace ecpi::analyze
