// How a loop's trip ends (trip_exit.h).
#include "ecpi/analyze/calc/trip_exit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <capstone/capstone.h>

namespace ecpi::analyze {

namespace {

// The jump taken exactly when `jcc` is not (0: none known).
unsigned opposite_jump(unsigned jcc) {
    switch (jcc) {
        case X86_INS_JE: return X86_INS_JNE;
        case X86_INS_JNE: return X86_INS_JE;
        case X86_INS_JL: return X86_INS_JGE;
        case X86_INS_JGE: return X86_INS_JL;
        case X86_INS_JLE: return X86_INS_JG;
        case X86_INS_JG: return X86_INS_JLE;
        case X86_INS_JB: return X86_INS_JAE;
        case X86_INS_JAE: return X86_INS_JB;
        case X86_INS_JBE: return X86_INS_JA;
        case X86_INS_JA: return X86_INS_JBE;
        case X86_INS_JS: return X86_INS_JNS;
        case X86_INS_JNS: return X86_INS_JS;
        default: return 0;
    }
}

// Whether two latches' compares leave the loop on the same register values
// (`cmp rdi, rcx; je out` and `cmp rdi, rcx; jne top`).
bool same_exit(const TripExit& x, const TripExit& y) {
    const BranchCondition& c = x.condition;
    const BranchCondition& d = y.condition;
    if (c.is_test != d.is_test || c.width != d.width || x.induction_first != y.induction_first || c.a != d.a ||
        c.b != d.b || (c.b < 0 && c.immediate != d.immediate))
        return false;
    return x.stay_when_taken == y.stay_when_taken ? c.jcc == d.jcc : opposite_jump(c.jcc) == d.jcc;
}

// Latch `latch` of loop l, when it steps `iv` and then compares it with a
// register the loop leaves alone (or a constant): a rotated `for` loop's
// `add rdi, 8; cmp rdi, rsi; jne`. Every iteration passing it steps once
// and compares once (register_progress.h, TripExit).
std::optional<TripExit> latch_exit(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l, std::uint32_t latch,
                                   const InductionVariable& iv) {
    const Loop& loop = loops.loops[l];
    const auto condition = branch_condition(cfg, latch);
    if (!condition || iv.width != condition->width) return std::nullopt;
    // The step in the latch before the compare: iv's own instruction, or
    // for a register stepped on every path (stepped_on_every_path: one step
    // between the header and each latch) the latch's write of it.
    const BasicBlock& blk = cfg.blocks[latch];
    std::optional<std::uint32_t> step;
    for (std::uint32_t k = blk.first; k < condition->setter; ++k)
        if (gp_register_number(cfg.instructions[k].first_register) == iv.gp &&
            (k == iv.instruction || iv.block == loop.header))
            step = k;
    if (!step || (iv.block != latch && iv.block != loop.header)) return std::nullopt;
    // A register the loop's calls may change is no bound (nor a step).
    const auto clobbered = [&](int r) { return r >= 0 && ((loop.call_clobbers >> r) & 1u) != 0; };
    if (clobbered(iv.gp)) return std::nullopt;
    const auto& invariant = loops.invariant[l];
    const auto is_invariant = [&](int r) {
        return r < 0 || (std::find(invariant.begin(), invariant.end(), r) != invariant.end() && !clobbered(r));
    };
    TripExit exit;
    exit.condition = *condition;
    if (condition->a == iv.gp && (condition->is_test ? condition->b == iv.gp : is_invariant(condition->b))) {
        exit.induction_first = true;
    } else if (!condition->is_test && condition->b == iv.gp && is_invariant(condition->a)) {
        exit.induction_first = false;
    } else {
        return std::nullopt;
    }
    std::uint32_t taken = kNoLoop;
    for (auto e : blk.out_edges)
        if (cfg.edges[e].kind == EdgeKind::kBranch) taken = cfg.edges[e].to;
    exit.stay_when_taken = taken != kNoLoop && loop.contains(taken);
    const DecodedInstruction& stepper = cfg.instructions[*step];
    const std::uint64_t past_step = stepper.address + stepper.size;
    const auto& last = cfg.instructions[blk.first + blk.count - 1];
    const std::uint64_t latch_end = last.address + last.size;
    exit.after_step = [past_step, latch_end](std::uint64_t pc) { return pc >= past_step && pc < latch_end; };
    return exit;
}

}  // namespace

std::optional<std::pair<TripExit, const InductionVariable*>> trip_exit(const Cfg& cfg, const LoopInfo& loops,
                                                                    std::uint32_t l) {
    const Loop& loop = loops.loops[l];
    if (loop.latches.empty()) return std::nullopt;
    const auto is_latch = [&](std::uint32_t b) {
        return std::find(loop.latches.begin(), loop.latches.end(), b) != loop.latches.end();
    };
    for (auto b : loop.blocks)
        for (auto e : cfg.blocks[b].out_edges)
            if (!loop.contains(cfg.edges[e].to) && !is_latch(b)) return std::nullopt;
    for (const auto& iv : loops.induction) {
        if (iv.loop != l) continue;
        std::vector<TripExit> exits;
        for (auto latch : loop.latches) {
            auto exit = latch_exit(cfg, loops, l, latch, iv);
            if (!exit || (!exits.empty() && !same_exit(exits.front(), *exit))) break;
            exits.push_back(std::move(*exit));
        }
        if (exits.size() != loop.latches.size()) continue;
        TripExit exit = exits.front();
        std::vector<std::function<bool(std::uint64_t)>> after;
        for (auto& x : exits) after.push_back(std::move(x.after_step));
        exit.after_step = [after = std::move(after)](std::uint64_t pc) {
            return std::any_of(after.begin(), after.end(), [pc](const auto& f) { return f(pc); });
        };
        return std::pair{exit, &iv};
    }
    return std::nullopt;
}

std::optional<double> measured_loop_entries(const Cfg& cfg, const Loop& loop, const FrequencyEstimate& estimate) {
    double entries = 0;
    for (auto e : cfg.blocks[loop.header].in_edges) {
        const std::uint32_t from = cfg.edges[e].from;
        if (from < cfg.blocks.size() && loop.contains(from)) continue;
        if (from >= cfg.blocks.size() || estimate.block_confidence[from] != Confidence::kMeasured) return std::nullopt;
        entries += estimate.edge_frequency[e];
    }
    if (!(entries > 0)) return std::nullopt;
    return entries;
}

std::optional<double> trip_recount(const TripLength& trip, std::optional<double> entries, double low, double high) {
    constexpr double kOneLength = 0.01;
    if (!entries || !trip.known || trip.high - trip.low > kOneLength * trip.length) return std::nullopt;
    const double product = *entries * trip.length;
    if (!(product > 0) || (product >= low && product <= high)) return std::nullopt;
    return product;
}

std::vector<bool> trip_measured_blocks(const Cfg& cfg, const LoopInfo& loops, std::span<const TripLength> trips,
                                       std::span<const double> loop_anchor, const FrequencyClasses& classes,
                                       const FrequencyEstimate& estimate) {
    std::vector<bool> out(cfg.blocks.size(), false);
    for (std::uint32_t l = 0; l < trips.size() && l < loops.loops.size(); ++l) {
        if (!trips[l].known || (l < loop_anchor.size() && loop_anchor[l] > 0)) continue;
        const Loop& loop = loops.loops[l];
        const std::optional<double> entries = measured_loop_entries(cfg, loop, estimate);
        if (!entries) continue;
        const double expected = *entries * trips[l].length;
        const double header = estimate.block_frequency[loop.header];
        if (std::abs(header - expected) > 0.1 * expected) continue;
        const std::uint32_t cls = classes.block_class[loop.header];
        for (auto b : loop.blocks) out[b] = out[b] || classes.block_class[b] == cls;
    }
    return out;
}

}  // namespace ecpi::analyze
