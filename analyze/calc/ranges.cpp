// Honest ranges where the samples cannot decide. See ranges.h.
#include "ecpi/analyze/calc/ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <capstone/capstone.h>

namespace ecpi::analyze {

namespace {

bool stack_access(const DecodedInstruction& d) {
    switch (d.id) {
        case X86_INS_PUSH: case X86_INS_POP: case X86_INS_CALL: case X86_INS_RET: return true;
        default: return d.memory.base == kStackPointer;
    }
}

// The longest stall per execution the model allows instruction d: a load
// or a store that misses every cache and the TLB (a store waits for its
// line once the store buffer is full: loops.c's initialisation loop, three
// arrays written, ran 8% over its best case with no load and a loop branch
// its snapshots saw taken every time); a return, call or indirect jump that
// mispredicts every time; a conditional jump that mispredicts at most
// `mispredict_rate` of its executions (mispredict_rates).
double worst_stall(const DecodedInstruction& d, const MachineModel& model, double mispredict_rate) {
    double stall = 0;
    if ((d.loads || d.stores) && !stack_access(d)) stall += model.memory_latency() + model.page_walk_latency();
    switch (d.flow) {
        case FlowKind::kCondJump:
            stall += mispredict_rate * model.mispredict_penalty();
            break;
        case FlowKind::kIndirectJump: case FlowKind::kReturn: case FlowKind::kIndirectCall: case FlowKind::kCall:
            stall += model.mispredict_penalty();
            break;
        default: break;
    }
    return stall;
}

// The largest share min(s, 1 - s) can take over the snapshots' interval of
// the taken share s: the rarer way's share at most.
double rarer_share_high(const BranchOdds& o) {
    if (o.share_low <= 0.5 && o.share_high >= 0.5) return 0.5;
    return o.share_high < 0.5 ? o.share_high : 1 - o.share_low;
}

// Per instruction, the share of its executions that can mispredict: a
// conditional jump whose register snapshots bound its rarer way mispredicts
// at most about twice per execution of that way (a predictor learns a
// branch that goes one way; culprits.cpp bounds its candidates the same
// way), else every time. The bound a misprediction on every execution gave
// a tight loop left its count 10x open below (the demo's share_sixty: 8,486
// of 8,486 snapshots taken, its count ranged from 0.1x to 1.0x, and 0-90%
// of its cycles offered to I-cache misses).
std::vector<double> mispredict_rates(const RangeInput& in) {
    std::vector<double> rate(in.cfg->instructions.size(), 1.0);
    for (const BranchOdds& o : in.odds) {
        if (o.total == 0 || o.block >= in.cfg->blocks.size()) continue;
        const BasicBlock& blk = in.cfg->blocks[o.block];
        if (blk.count == 0) continue;
        rate[blk.first + blk.count - 1] = std::min(1.0, 2 * rarer_share_high(o));
    }
    return rate;
}

struct ClassTotals {
    double samples = 0;
    double best_cycles = 0;   // per execution, over the class's blocks
    double landing_cycles = 0;// of those, what lands on the class's own instructions (skid)
    double landing_average = 0;// the same at the retirement width's average (retirement_floor)
    double worst_stall = 0;   // per execution, that can land on the class's instructions
    std::uint32_t loop = kNoLoop;  // the innermost loop of all its blocks, if they share one
    bool one_loop = true;
    std::uint32_t instructions = 0;
};

// A sample lands `skid` instructions after the one that waited (x86: one):
// a block's last `skid` instructions leave their cycles to whichever block
// runs next, and its first instructions hold those of the block that ran
// before it (issue 36: the interpreter's case blocks hold the cost of the
// mispredicted jump through the table, which no model of their own
// instructions explains; their ranges excluded the truth 2-3x off).
struct Landing {
    double own_best = 0;      // best-case cycles of the instructions whose samples stay in the block
    double own_average = 0;   // the same, outside a steady state at the retirement width's average
    double tail_worst = 0;    // best case + worst stall of its last `skid` instructions, but for
    double tail_jump = 0;     // a conditional jump's misprediction there, which depends on the way taken
};

// What must land on a block outside a loop's steady state is its
// retirement, not the model's schedule: out of order, its instructions can
// execute under the stall of the code before it (a cache miss, a call's
// return) and then only retire, up to the widest retirement of a core the
// model stands for. The model's schedule of such a block times it alone or
// after one predecessor, on the model's ports: glibc's function entries
// (pushes and stores, 10-12 cycles at the generic model's one store a
// cycle) ran at 5.5-6 on an Emerald Rapids VM, and a 5-instruction block
// whose model waits all sat in its last instruction fell back to its whole
// best case; their ranges' tops excluded the truth, and the flow carried
// those tops to every block on their paths (sed's __mbrtowc: all 3,262
// samples on ranges that missed 1.2-1.5x). A loop's steady state repeats
// its recurrences and resources every iteration: there the model's own
// cycles stand.
double retirement_floor(const RangeInput& in, std::uint32_t own_instructions) {
    return static_cast<double>(own_instructions) / std::max(in.model->widest_retire(), 1);
}

// What retirement must leave on a block's own instructions: not their share
// of the retirement width (retirement_floor, an average), since a cycle's
// retired group can hold the end of the block before and the start of the
// one after. n own instructions retire in at least ceil(n / width) cycles,
// and only between those cycles is the oldest unretired instruction one of
// them: at least ceil(n / width) - 1 cycles an execution, none for a block
// of at most `width` own instructions. interp.c's `DEC` arm (a mispredicted
// `jmp rax`'s target, 4 instructions) kept 51 samples of its own for 120 M
// executions (0.08 cycles each, 3/8 by the average); its top, at 3/8 a
// cycle, excluded the truth for all 202 of its samples, and the `XOR` arm's
// (10 instructions, 9/8) for its 657.
double retired_inside(const RangeInput& in, std::uint32_t own_instructions) {
    const auto width = static_cast<std::uint32_t>(std::max(in.model->widest_retire(), 1));
    if (own_instructions <= width) return 0;
    return static_cast<double>((own_instructions + width - 1) / width - 1);
}

// A loop of one block whose trips may fit in the reorder window: its
// recurrence is then no floor on what lands on it: a whole trip can
// execute under an older instruction's stall and only retire after it, and
// a sample names the oldest unretired instruction. jsonq's key hash
// (FNV-1a, `xor; imul` carried: 4 cycles an iteration at the model's steady
// state; about 4 bytes a key) kept 4,527 samples for 485 M iterations, 2.2
// cycles each, on a Zen 3 VM, and 4,807 at 1.6 cycles each on a Zen 5 VM;
// its range's top at 4 cycles excluded the truth for all of them. The
// floor stands only where the odds of its closing jump say the trips are
// too long to fit: the back edge's share at the bottom of its interval
// makes a trip's mean T iterations, and T times its instructions overflow
// the model's ROB. On the Zen 5 VM the hash's snapshots disagreed by
// position (taken 51% to 100%): the top of that interval (every trip
// endless) had kept the floor. A loop without odds keeps it.
bool trips_fit_window(const RangeInput& in, std::uint32_t b) {
    const double window = in.model->rob_size();
    for (const BranchOdds& o : in.odds) {
        if (o.block != b || o.total == 0) continue;
        const CfgEdge& taken = in.cfg->edges[o.taken_edge];
        const CfgEdge& fall = in.cfg->edges[o.fall_edge];
        const double stay = taken.to == b ? o.share_low : fall.to == b ? 1 - o.share_high : 1;
        return stay < 1 && in.cfg->blocks[b].count / (1 - stay) <= window;
    }
    return false;
}

Landing landing(const RangeInput& in, std::uint32_t b) {
    const BasicBlock& blk = in.cfg->blocks[b];
    const BlockTiming& timing = (*in.timing)[b];
    const bool steady_state = timing.steady_state && !trips_fit_window(in, b);
    const auto skid = static_cast<std::uint32_t>(std::max(in.model->sample_skid(), 0));
    Landing l;
    std::uint32_t own = 0;
    for (std::uint32_t i = 0; i < blk.count; ++i) {
        const double wait = i < timing.wait.size() ? timing.wait[i] : 0;
        const DecodedInstruction& d = in.cfg->instructions[blk.first + i];
        if (i + skid < blk.count) {
            l.own_best += wait;
            ++own;
        } else if (d.flow == FlowKind::kCondJump) {
            l.tail_worst += wait + worst_stall(d, *in.model, 0);
            l.tail_jump = in.model->mispredict_penalty();
        } else {
            l.tail_worst += wait + worst_stall(d, *in.model, 1);
        }
    }
    l.own_average = steady_state ? l.own_best : retirement_floor(in, own);
    if (!steady_state) l.own_best = retired_inside(in, own);
    return l;
}

// Per edge, the share of its executions that can follow a misprediction of
// the conditional jump it leaves: a predictor mispredicts into the way a
// branch takes at most every time it goes that way, and at most about
// twice per execution of the other way, so into the common way rarely and
// into the rare way possibly every time (branchy's classify: the `medium`
// arm, 20% of its `ja`, holds a misprediction on most of its executions;
// bounded by twice the rarer way's share of the jump's executions, its
// range excluded the truth for 1,566 samples).
std::vector<double> edge_mispredict_rates(const RangeInput& in) {
    std::vector<double> rate(in.cfg->edges.size(), 1.0);
    const auto set = [&](std::uint32_t e, double low) {
        if (e < rate.size() && low > 0) rate[e] = std::min(1.0, 2 * (1 - low) / low);
    };
    for (const BranchOdds& o : in.odds) {
        if (o.total == 0) continue;
        set(o.taken_edge, o.share_low);
        set(o.fall_edge, 1 - o.share_high);
    }
    return rate;
}

// The most a predecessor's last instructions can leave on block b.
double inherited_worst(const RangeInput& in, const std::vector<Landing>& landings, std::span<const double> edge_rates,
                       std::uint32_t b) {
    double most = 0;
    for (std::uint32_t e : in.cfg->blocks[b].in_edges) {
        const std::uint32_t from = in.cfg->edges[e].from;
        if (from < landings.size())
            most = std::max(most, landings[from].tail_worst + landings[from].tail_jump * edge_rates[e]);
    }
    return most;
}

// Every block's landing. A block no longer than the skid passes on what it
// inherits: a mispredicted jump's refetch lands its wait on the first
// instructions at its target and the sample `skid` after those, so through
// a one-instruction target block it lands in the next. branchy's machine
// (`state = 0` is one `mov` before the loop's latch block): the latch's
// samples hold the state branches' mispredictions; while every conditional
// jump was allowed a misprediction on each execution the latch's own exit
// test covered them, and once its snapshots bounded that test (taken 0.04%)
// the latch's range excluded the truth for 1,645 of its samples.
std::vector<Landing> block_landings(const RangeInput& in, std::span<const double> edge_rates) {
    const Cfg& cfg = *in.cfg;
    std::vector<Landing> landings;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) landings.push_back(landing(in, b));
    const auto skid = static_cast<std::uint32_t>(std::max(in.model->sample_skid(), 0));
    std::vector<double> passed(cfg.blocks.size(), 0);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b)
        if (cfg.blocks[b].count <= skid) passed[b] = inherited_worst(in, landings, edge_rates, b);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) landings[b].tail_worst += passed[b];
    return landings;
}

// The procedure's entry is reached by a call in another procedure, whose
// wait lands on the entry's first instruction (call_regions.h): a call
// through a table mispredicts there (calls.c's `twice`, reached only by
// `table[i % 3](i)`, held about 6 cycles a call; its range's floor, at its
// own instructions' worst, excluded its callers' measured count). Only the
// entry block itself: it runs once per call.
double entry_wait(const RangeInput& in, std::uint32_t b) {
    for (std::uint32_t e : in.cfg->blocks[b].in_edges)
        if (in.cfg->edges[e].kind == EdgeKind::kEntry) return in.model->mispredict_penalty();
    return 0;
}

std::vector<ClassTotals> class_totals(const RangeInput& in) {
    const Cfg& cfg = *in.cfg;
    std::vector<ClassTotals> totals(in.classes->count);
    std::vector<bool> seen(in.classes->count, false);
    const std::vector<double> rates = mispredict_rates(in);
    const std::vector<double> edge_rates = edge_mispredict_rates(in);
    const std::vector<Landing> landings = block_landings(in, edge_rates);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        auto& t = totals[in.classes->block_class[b]];
        const auto& blk = cfg.blocks[b];
        const auto& timing = (*in.timing)[b];
        t.best_cycles += std::max(timing.cycles, timing.call_cycles);
        // A call's cycles are no floor on what lands here: the call's own
        // wait lands on the callee's first instruction (skid), a return's on
        // the instruction after the call. calls.c's caller (three calls an
        // iteration, 4.1 cycles each by the model) kept 4.7 cycles of its
        // ~14 an iteration; its top, at 12.3, excluded the truth for all
        // 7,825 of its samples.
        t.landing_cycles += landings[b].own_best;
        t.landing_average += landings[b].own_average;
        t.instructions += blk.count;
        for (std::uint32_t i = 0; i < blk.count; ++i) {
            t.samples += static_cast<double>(in.samples[blk.first + i]);
            t.worst_stall += worst_stall(cfg.instructions[blk.first + i], *in.model, rates[blk.first + i]);
        }
        t.worst_stall += std::max(inherited_worst(in, landings, edge_rates, b), entry_wait(in, b));
        const std::uint32_t loop = in.loops->innermost[b];
        const std::uint32_t c = in.classes->block_class[b];
        if (!seen[c]) t.loop = loop;
        else if (t.loop != loop) t.one_loop = false;
        seen[c] = true;
    }
    return totals;
}

// The most a class inside anchored loop l can run: once per iteration, plus
// the loop's entries (the last test of each invocation).
double loop_bound(const RangeInput& in, std::uint32_t l) {
    const Cfg& cfg = *in.cfg;
    const Loop& loop = in.loops->loops[l];
    double entries = 0;
    for (auto e : cfg.blocks[loop.header].in_edges)
        if (!loop.contains(cfg.edges[e].from)) entries += in.estimate->edge_frequency[e];
    return in.loop_anchor[l] + entries;
}

FrequencyEstimate with_class_frequencies(const FrequencyEstimate& base, const Cfg& cfg, const FrequencyClasses& fc,
                                         const std::vector<double>& f) {
    FrequencyEstimate out = base;
    for (std::uint32_t c = 0; c < fc.count; ++c) out.classes[c].frequency = f[c];
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) out.block_frequency[b] = f[fc.block_class[b]];
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e) out.edge_frequency[e] = f[fc.edge_class[e]];
    out.invocations = f[fc.invocation_class];
    return out;
}

// A class nothing must land on (retired_inside: a short block that can
// retire with its neighbours) has no top of its own: it runs as often as
// the flow lets it. Its top stands in as the largest any class can run (a
// finite count for the solver): another's top, or any short class's samples
// over the retirement width's average (its own instructions retired at full
// width, alone: the tops before). conserve_flow then narrows it to what the
// flow through its bounded neighbours allows (interp.c's arms: the
// dispatch's count). The stand-in is not itself a bound: a procedure whose
// every block is that short and every path free of bounds (calls.c's
// leaves) keeps it.
void unbounded_tops(std::span<const double> average_tops, std::vector<ClassRange>& ranges) {
    double most = 0;
    for (std::uint32_t c = 0; c < ranges.size(); ++c) {
        if (!ranges[c].ranged) continue;
        most = std::max(most, std::isfinite(ranges[c].max) ? ranges[c].max : average_tops[c]);
    }
    for (ClassRange& r : ranges) {
        if (!r.ranged || std::isfinite(r.max)) continue;
        r.max = std::max(most, r.min);
        r.point = RangePoint::kNone;
    }
}

}  // namespace

const char* range_point_reason(RangePoint point) {
    switch (point) {
        case RangePoint::kLoopBound:
            return "its samples ask for more than its measured loop ran: capped at the loop's count";
        case RangePoint::kNone: break;
    }
    return "";
}

std::vector<ClassRange> class_ranges(const RangeInput& in) {
    const auto& fc = *in.classes;
    std::vector<ClassRange> ranges(fc.count);
    std::vector<double> average_tops(fc.count, 0);
    const std::vector<ClassTotals> totals = class_totals(in);
    for (std::uint32_t c = 0; c < fc.count; ++c) {
        const ClassEstimate& e = in.estimate->classes[c];
        ClassTotals t = totals[c];
        if (e.confidence == Confidence::kMeasured || t.samples < static_cast<double>(in.min_samples)) continue;
        if (t.best_cycles <= 0) {
            // The model issues the whole class under its predecessor's
            // cycles (a load and a jump after a compare-and-branch), yet
            // its samples say it ran: its instructions must still retire.
            // interp's `JNZ` arm (a load and a jmp, 0 cycles by the model)
            // kept 2,019 samples and was given no count and no range.
            t.best_cycles = retirement_floor(in, t.instructions);
        }
        if (t.best_cycles <= 0) continue;
        // The samples are themselves a count with sampling error (DCPI 6.2:
        // about sqrt(S) for S samples): the bounds use S +- 2 sqrt(S), so a
        // class of 25 samples is allowed 15 to 35 samples' worth of cycles.
        const double spread = 2 * std::sqrt(t.samples);
        // At most: its samples over the cycles that must land on it; at
        // least: over everything that can (its own and a predecessor's
        // last instructions at their worst).
        // Nothing that must land on it: no top but the flow's (unbounded_tops).
        double high = t.landing_cycles > 0 ? (t.samples + spread) / t.landing_cycles
                                           : std::numeric_limits<double>::infinity();
        average_tops[c] = (t.samples + spread) / (t.landing_average > 0 ? t.landing_average : t.best_cycles);
        double low = std::max(t.samples - spread, 0.0) / (t.best_cycles + t.worst_stall);
        bool over_bound = false;
        if (t.one_loop && t.loop != kNoLoop && in.loop_anchor[t.loop] > 0) {
            const double bound = loop_bound(in, t.loop);
            over_bound = e.frequency > 1.1 * bound;
            high = std::min(high, bound);
            low = std::min(low, high);
        } else {
            // The model's best case is no hard bound: the core can beat it
            // (Zen 5 ran a bit-count loop 1.7-2x under it), and a block's
            // cycles can land in another block's samples (a caller's after
            // its calls: 2.3x). Clamping the estimator's point into the
            // range moved right answers away from the truth (calls: within
            // 15% for 37% of samples, then 0%); the range spans both.
            if (e.source != EstimateSource::kNone) {
                low = std::min(low, e.frequency);
                high = std::max(high, e.frequency);
            }
        }
        if (e.confidence != Confidence::kLow && !over_bound) continue;
        ranges[c] = {true, low, high, low >= high ? RangePoint::kLoopBound : RangePoint::kNone};
    }
    unbounded_tops(average_tops, ranges);
    return ranges;
}

FrequencyEstimate estimate_at(const FrequencyEstimate& estimate, const Cfg& cfg, const FrequencyClasses& fc,
                              std::span<const ClassRange> ranges, double position) {
    position = std::clamp(position, 0.0, 1.0);
    auto along = [&](const ClassRange& r) {
        if (r.min <= 0 || r.max <= r.min) return r.min + position * (r.max - r.min);
        return r.min * std::pow(r.max / r.min, position);
    };
    std::vector<double> f(fc.count);
    for (std::uint32_t c = 0; c < fc.count; ++c)
        f[c] = ranges[c].ranged ? along(ranges[c]) : estimate.classes[c].frequency;
    return with_class_frequencies(estimate, cfg, fc, f);
}

void widen_by_clock_margin(std::vector<ClassRange>& ranges, const FrequencyEstimate& estimate, double margin) {
    if (!(margin > 1)) return;
    for (std::size_t c = 0; c < ranges.size(); ++c) {
        ClassRange& r = ranges[c];
        const bool measured = c < estimate.classes.size() && estimate.classes[c].confidence == Confidence::kMeasured;
        if (!r.ranged || measured || r.point == RangePoint::kLoopBound) continue;
        r.min /= margin;
        if (std::isfinite(r.max)) r.max *= margin;
    }
}

void clamp_to_ranges(FrequencyEstimate& estimate, const Cfg& cfg, const FrequencyClasses& fc,
                     std::span<const ClassRange> ranges) {
    std::vector<double> f(fc.count);
    for (std::uint32_t c = 0; c < fc.count; ++c) {
        f[c] = estimate.classes[c].frequency;
        if (!ranges[c].ranged) continue;
        // A class its samples gave no point (class_ranges: no best-case
        // cycles) starts in the middle of what they allow; the flow moves it.
        if (estimate.classes[c].source == EstimateSource::kNone && ranges[c].min > 0)
            f[c] = std::sqrt(ranges[c].min * ranges[c].max);
        f[c] = std::clamp(f[c], ranges[c].min, ranges[c].max);
    }
    estimate = with_class_frequencies(estimate, cfg, fc, f);
}

}  // namespace ecpi::analyze
