// Branch probabilities from register snapshots (calc: execution counts
// anchored by register progress; Spike's layout needs the same edge counts).
//
// A snapshot taken in a block before its closing `cmp`/`test` + `jcc` gives
// the compare's register operands once the block's instructions from the
// snapshot's pc to the compare are replayed on its registers (switch_odds.h's
// modelled forms: moves, adds, masks, shifts, lea; a load leaves its register
// unknown, so only snapshots after the operands' last load decide): evaluating
// the jump's condition on them says which way that execution went. Over the block's snapshots, the
// share that go the taken way estimates the branch's probability directly,
// where time samples alone cannot split a branch whose one side stalls.
// A snapshot at the jump itself (or past the last instruction that writes
// the flags) that recorded the status flags decides it directly, whatever
// register arithmetic set them (FlagsJump): a decrement, an add, a compare
// of registers the block overwrote before the jump.
//
// The snapshots are time-weighted (an execution of the block contributes as
// many as the time it spends there), which does not bias the share as long
// as the time before the branch does not depend on where it goes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// The condition a `cmp a, b` / `test a, b` + `jcc` pair decides, as far as
// it can be evaluated on register values.
struct BranchCondition {
    std::uint32_t setter = 0;            // CFG index of the cmp/test
    std::uint32_t jump = 0;              // CFG index of the jcc
    bool is_test = false;                // test (a & b) rather than cmp (a - b)
    int a = -1, b = -1;                  // hardware register numbers; b = -1: the immediate
    std::int64_t immediate = 0;
    std::uint8_t width = 8;              // operand bytes
    unsigned jcc = 0;                    // Capstone instruction id of the jump
    // The flags come from a `sub a, b` (or `and a, b`: is_test) that also
    // writes a: past it, a's register holds a - b (a & b), not a.
    bool writes_a = false;
};

// The condition closing block b, when it is a register compare and jump;
// with `arithmetic`, also a `sub`/`and` of a register that sets the flags
// the jump reads (GCC's pointer compare `sub rdi, r11; jae`): only for
// callers that evaluate it where operands_at_compare does.
std::optional<BranchCondition> branch_condition(const Cfg& cfg, std::uint32_t b, bool arithmetic = false);

// Whether the jump is taken for these operand values.
bool evaluate(const BranchCondition& c, std::uint64_t a, std::uint64_t b);

// A block closing with a conditional jump on the status flags that no
// instruction of the block reading memory set: a snapshot at an instruction from `from`
// to the jump (nothing in between writes the flags) that recorded them
// (store::RegisterSample::flags) says which way that execution went.
struct FlagsJump {
    std::uint32_t from = 0;   // CFG index of the first instruction past the last flags writer
    std::uint32_t jump = 0;   // CFG index of the jcc
    unsigned jcc = 0;         // Capstone instruction id
    // The last flags writer loads (a compare with memory): its flags are
    // time-weighted where the load's stall lands, so they give a floor
    // under each way they chose (BranchOdds::timed), not a share.
    bool reads_memory = false;
};
std::optional<FlagsJump> flags_jump(const Cfg& cfg, std::uint32_t b);

// Whether the jump is taken with these status flags (EFLAGS' bits).
bool evaluate_flags(unsigned jcc, std::uint16_t flags);

struct BranchOdds {
    std::uint32_t block = 0;
    std::uint32_t taken_edge = 0, fall_edge = 0;  // CFG edge indices
    // Snapshots that decided the branch, and of them taken (or `total` at
    // the median pc's share: median_of_positions).
    std::uint32_t taken = 0, total = 0;
    // The taken share as far as the snapshots allow: the hull of the
    // binomial intervals of all of them and of each pc holding at least
    // kOddsPositionSnapshots (a pc's share is weighted by the time each way
    // spends there: wordfreq's letter test read 17.4%, 6.0%, 20.8% and 9.9%
    // non-letters at its four pcs, 12.0% in all, against 14.2%).
    double share_low = 0, share_high = 1;
    // Two pcs' intervals do not overlap: where in the block a snapshot
    // falls depends on the way the branch goes, so the pooled share is a
    // share of time, not of executions (wordfreq's letter test: 3.1% to
    // 31.8% by pc, 17.9% pooled, against 14.2%).
    bool positions_disagree = false;
    // They disagree and at least three pcs hold kOddsPositionSnapshots:
    // `taken` is the median pc's share of `total`.
    bool median_of_positions = false;
    // Every snapshot was decided by the flags of a compare with memory
    // (FlagsJump::reads_memory), and none by registers: the shares are of
    // time. The flow holds each way chosen above a floor (flow_counts.h);
    // such odds anchor nothing and bound no misprediction rate.
    bool timed = false;
};

// A pc's snapshots widen its branch's share interval from this many on.
inline constexpr std::uint32_t kOddsPositionSnapshots = 30;

// The binomial share interval (Wilson's, two standard errors) of `taken`
// of `total` observations; [0, 1] for none.
std::pair<double, double> share_interval(std::uint32_t taken, std::uint32_t total);

// Per block ending in an evaluable branch with at least one deciding
// snapshot. `stream` is the epoch's snapshots, `image` this procedure's
// image index in them, `candidates` the positions of those in the procedure.
std::vector<BranchOdds> branch_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                                    std::span<const std::uint32_t> candidates);

}  // namespace ecpi::analyze
