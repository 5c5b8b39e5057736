// Profile-guided code layout: BOLT branch records and lld orders from calc's
// execution estimates. See layout.h.
#include "ecpi/analyze/layout/layout.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/flow_inference.h"

namespace ecpi::analyze {

namespace {

// The image's functions as BOLT and lld name them, from calc's procedures.
struct Functions {
    std::vector<LayoutFunction> list;
    std::map<std::uint64_t, std::uint32_t> by_start;

    std::optional<std::uint32_t> at(std::uint64_t address) const {
        auto it = by_start.upper_bound(address);
        if (it == by_start.begin()) return std::nullopt;
        --it;
        const auto& f = list[it->second];
        if (address < f.start || address >= f.start + std::max<std::uint64_t>(f.size, 1)) return std::nullopt;
        return it->second;
    }
};

std::uint32_t add_function(Functions& fs, const CalcProcedure& p, const Symbol* sym) {
    LayoutFunction f;
    f.display = p.name;
    f.name = sym != nullptr && !sym->linkage_name.empty() ? sym->linkage_name : p.name;
    f.bolt_name = f.name;
    if (sym != nullptr && sym->local) f.bolt_name += "/?";  // numbered by number_local_functions
    f.start = p.start;
    f.size = p.end > p.start ? p.end - p.start : 0;
    f.samples = p.samples;
    f.invocations = p.invocations;
    const auto index = static_cast<std::uint32_t>(fs.list.size());
    fs.list.push_back(std::move(f));
    fs.by_start[p.start] = index;
    return index;
}

// BOLT tells same-named local symbols apart as "name/1", "name/2", ... in
// address order; ecpi's fdata must use the same names.
void number_local_functions(Functions& fs, const SymbolTable* table) {
    std::map<std::string, std::vector<std::uint64_t>> starts;
    if (table != nullptr)
        for (const Symbol& sym : table->symbols())
            if (sym.local && !sym.linkage_name.empty()) starts[sym.linkage_name].push_back(sym.start);
    for (auto& [name, v] : starts) std::sort(v.begin(), v.end());
    for (LayoutFunction& f : fs.list) {
        if (!f.bolt_name.ends_with("/?")) continue;
        const auto& v = starts[f.name];
        const auto at = std::lower_bound(v.begin(), v.end(), f.start);
        f.bolt_name = f.name + "/" + std::to_string(at - v.begin() + 1);
    }
}


// calc estimates each frequency class apart, and a class without samples
// (a loop's entry, its back edge) comes out 0 even where its block's count
// says the flow went somewhere: a sampled loop block with both of its edges
// at 0. Each block's missing outflow goes to its zero-count out-edges, split
// by how much of its target's count the target's other in-edges leave.
std::vector<double> repaired_edges(const CalcProcedure& p) {
    std::vector<double> count(p.edges.size());
    for (std::size_t e = 0; e < p.edges.size(); ++e) count[e] = std::max(p.edges[e].executions, 0.0);
    const auto real = [&](std::uint32_t b) { return b < p.blocks.size(); };
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
        double out = 0;
        std::vector<std::size_t> zero;
        for (std::size_t e = 0; e < p.edges.size(); ++e) {
            if (p.edges[e].from != b) continue;
            out += count[e];
            if (count[e] == 0 && real(p.edges[e].to)) zero.push_back(e);
        }
        const double missing = p.blocks[b].executions - out;
        if (missing < 0.5 || zero.empty()) continue;
        std::vector<double> room(zero.size(), 0);
        double total_room = 0;
        for (std::size_t k = 0; k < zero.size(); ++k) {
            const std::uint32_t to = p.edges[zero[k]].to;
            double in = 0;
            for (std::size_t e = 0; e < p.edges.size(); ++e)
                if (p.edges[e].to == to) in += count[e];
            room[k] = std::max(p.blocks[to].executions - in, 0.0);
            total_room += room[k];
        }
        if (total_room <= 0) continue;
        for (std::size_t k = 0; k < zero.size(); ++k)
            count[zero[k]] = missing * room[k] / total_room;
    }
    return count;
}

// Jumps: a taken record from the jump to its target, and for a conditional
// jump a record from it to the next block (BOLT's fall-through). Blocks that
// end without a jump fall through implicitly; BOLT infers those.
// A conditional jump whose condition calc evaluated on register snapshots
// taken before it (branch_odds.h): its block's count is split between its
// two edges by the share of snapshots that went each way. calc itself does
// so only where the block's count is measured; for layout the direction is
// what matters, and the snapshots' share is an observable where the
// estimator's split rests on sample placement, which a stalling rare path
// inflates (DCPI 6.1). One snapshot decides the direction: on SQLite
// (docs/LAYOUT.md) the majority of 1-7 snapshots put the hot side where
// exact counts do for 90% of those branches' weight, the estimator's split
// of the same blocks (1-3 samples each) for 52%.
constexpr std::uint32_t kMinOddsSnapshots = 1;

// Where the samples cannot decide (a successor's count is a range), a
// conditional block's count is split by what each successor's samples
// guarantee at least (the low end of its range: its samples over its best
// case plus the longest stall it can take). A rare path that misses the
// cache holds many samples, which the estimator's point reads as many
// executions (DCPI 6.1); its guaranteed count stays small.
// The taken and fall-through edges of block b when it ends in a
// conditional jump between two blocks of the procedure.
struct ConditionalEdges {
    std::size_t taken = 0, fall = 0;
};
std::optional<ConditionalEdges> conditional_edges(const CalcProcedure& p, std::uint32_t b) {
    std::optional<std::size_t> taken, fall;
    for (std::size_t e = 0; e < p.edges.size(); ++e) {
        if (p.edges[e].from != b || p.edges[e].to >= p.blocks.size()) continue;
        if (p.edges[e].kind == EdgeKind::kBranch) taken = e;
        if (p.edges[e].kind == EdgeKind::kFallThrough) fall = e;
    }
    if (!taken || !fall) return std::nullopt;
    return ConditionalEdges{*taken, *fall};
}

void split_by_guaranteed(const CalcProcedure& p, std::vector<double>& counts) {
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
        const auto edges = conditional_edges(p, b);
        if (!edges) continue;
        const std::size_t taken = edges->taken;
        const std::size_t fall = edges->fall;
        const CalcBlock& t = p.blocks[p.edges[taken].to];
        const CalcBlock& f = p.blocks[p.edges[fall].to];
        if ((!t.ranged && !f.ranged) || t.executions_min + f.executions_min <= 0) continue;
        const double share = t.executions_min / (t.executions_min + f.executions_min);
        counts[taken] = share * p.blocks[b].executions;
        counts[fall] = (1 - share) * p.blocks[b].executions;
    }
}

void split_by_odds(const CalcProcedure& p, std::vector<double>& counts) {
    for (const CalcBranch& br : p.branches) {
        if (br.snapshots < kMinOddsSnapshots) continue;
        for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
            const CalcBlock& blk = p.blocks[b];
            if (blk.count == 0 || p.instructions[blk.first + blk.count - 1].address != br.jump) continue;
            // Laplace's rule of succession: (k + 1) / (n + 2). One snapshot
            // decides the direction, but is stated as 2:1, not 1:0: an
            // edge is not stated more strongly than its samples allow.
            const double share =
                (static_cast<double>(br.taken) + 1) / (static_cast<double>(br.snapshots) + 2);
            for (std::size_t e = 0; e < p.edges.size(); ++e) {
                if (p.edges[e].from != b) continue;
                if (p.edges[e].kind == EdgeKind::kBranch) counts[e] = share * blk.executions;
                if (p.edges[e].kind == EdgeKind::kFallThrough) counts[e] = (1 - share) * blk.executions;
            }
        }
    }
}

// The most executions a block's samples allow: each execution takes at
// least its best-case cycles, and S samples stand for at most about
// S + 2*sqrt(S) + 3 periods (3 is the Poisson 95% upper bound for none seen).
// A block with no samples that calc's flow gave millions of executions (the
// rest of its predecessor's count) would have been sampled.
double most_executions(const CalcBlock& b, double period_cycles) {
    if (period_cycles <= 0 || b.best_cycles <= 0) return std::numeric_limits<double>::infinity();
    const auto s = static_cast<double>(b.samples);
    return (s + 2 * std::sqrt(s) + 3) * period_cycles / b.best_cycles;
}

}  // namespace

std::optional<std::uint64_t> direct_call_target(const std::string& text) {
    if (text.rfind("call ", 0) != 0) return std::nullopt;
    const std::string operand = text.substr(5);
    if (operand.rfind("0x", 0) != 0) return std::nullopt;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(operand.c_str() + 2, &end, 16);
    if (end == operand.c_str() + 2 || *end != '\0') return std::nullopt;
    return v;
}

// A conditional block's two edges, capped by what their targets' samples
// allow;
// where neither target has a sample, split by those caps: two unsampled
// successors say only how long each could have run unseen, and the
// shorter one could have run more often. A weak split, but it keeps a
// sampled procedure's branches in BOLT's profile (a procedure without
// records is laid out as unprofiled, cold).

void cap_edges_by_samples(const CalcProcedure& p, double period_cycles, std::vector<double>& counts) {
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
        const auto edges = conditional_edges(p, b);
        if (!edges) continue;
        const std::size_t taken = edges->taken;
        const std::size_t fall = edges->fall;
        const CalcBlock& t = p.blocks[p.edges[taken].to];
        const CalcBlock& f = p.blocks[p.edges[fall].to];
        const double cap_t = most_executions(t, period_cycles), cap_f = most_executions(f, period_cycles);
        const double total = counts[taken] + counts[fall];
        const double flow = std::max(total, p.blocks[b].executions);
        if (t.samples == 0 && f.samples == 0 && std::isfinite(cap_t) && std::isfinite(cap_f) && flow > 0) {
            counts[taken] = flow * cap_t / (cap_t + cap_f);
            counts[fall] = flow * cap_f / (cap_t + cap_f);
            continue;
        }
        // The excess is not moved to the other edge: it comes from the
        // block's own count, which is as uncertain (an inflated entry count
        // would push a rare path past a common one).
        counts[taken] = std::min(counts[taken], cap_t);
        counts[fall] = std::min(counts[fall], cap_f);
    }
}

namespace {

// Where the steps above leave a conditional block's two edges equal (both
// successors unsampled with the same caps, an even split of a missing
// outflow), the samples say nothing of the direction, and an even split
// leaves BOLT's ext-tsp to choose at random. The compiler's layout is the
// better guess: GCC lays out the successor it predicts as the fall-through
// (on SQLite right for 70% of such branches' weight). Stated weakly, 3 to 1.
void keep_fall_through_on_ties(const CalcProcedure& p, std::vector<double>& counts) {
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
        const auto edges = conditional_edges(p, b);
        if (!edges) continue;
        const double total = counts[edges->taken] + counts[edges->fall];
        if (total < 2 || std::abs(counts[edges->taken] - counts[edges->fall]) > 1e-9 * total) continue;
        counts[edges->taken] = total / 4;
        counts[edges->fall] = total - total / 4;
    }
}

}  // namespace

std::vector<double> layout_edge_counts(const CalcProcedure& p, double period_cycles) {
    std::vector<double> counts = repaired_edges(p);
    split_by_guaranteed(p, counts);
    cap_edges_by_samples(p, period_cycles, counts);
    split_by_odds(p, counts);
    keep_fall_through_on_ties(p, counts);
    return counts;
}

namespace {

// Whether edge k gets a branch record: a jump (taken, unconditional or a
// switch's) or a conditional jump's fall-through, with a count. Blocks that
// end without a jump fall through implicitly; BOLT infers those.
bool recorded_edge(const CalcProcedure& p, const std::vector<double>& counts, std::size_t k) {
    const CalcEdge& e = p.edges[k];
    if (e.from >= p.blocks.size() || e.to >= p.blocks.size() || p.blocks[e.from].count == 0) return false;
    const bool conditional = std::any_of(p.edges.begin(), p.edges.end(), [&](const CalcEdge& o) {
        return o.from == e.from && o.kind == EdgeKind::kBranch;
    });
    const bool record = e.kind == EdgeKind::kBranch || e.kind == EdgeKind::kJump || e.kind == EdgeKind::kSwitch ||
                        (e.kind == EdgeKind::kFallThrough && conditional);
    return record && counts[k] >= 0.5;
}

}  // namespace

std::vector<double> layout_block_counts(const CalcProcedure& p, const std::vector<double>& edge_counts) {
    std::vector<double> in(p.blocks.size(), 0);
    std::vector<bool> entered(p.blocks.size(), false);
    for (std::size_t k = 0; k < p.edges.size(); ++k) {
        if (!recorded_edge(p, edge_counts, k)) continue;
        in[p.edges[k].to] += edge_counts[k];
        entered[p.edges[k].to] = true;
    }
    for (std::size_t b = 0; b < p.blocks.size(); ++b)
        if (!entered[b]) in[b] = std::max(p.blocks[b].executions, 0.0);
    return in;
}

namespace {

// Where no sample tells a conditional jump's direction, the compiler's
// fall-through (GCC lays out the successor it predicts in line): a forward
// taken edge costs a hundredth of a cycle per execution more, which decides
// only between paths that are otherwise equally likely. Backward taken
// edges (loops) cost nothing. (Two cycles where neither side was sampled
// cost SQLite 1-3 points of exact's gain on three recordings.)
constexpr double kTakenCycles = 0.01;

// How far after a call a sample may hold the call's return: the return's
// misprediction and the callee's last waits retire over the next few
// instructions (jsonq's arena_alloc: samples 2 and 4 instructions after
// malloc's call, on a path that ran 274 times in 16 M calls).
constexpr std::uint32_t kAfterCallInstructions = 4;
constexpr double kRareShare = 0.1;

// Whether instruction i (of block b) lies within kAfterCallInstructions
// after a call: in its block, or in the block that falls through to it.
bool shortly_after_call(const CalcProcedure& p, std::uint32_t b, std::uint32_t i) {
    std::uint32_t block = b;
    for (std::uint32_t back = 1; back <= kAfterCallInstructions && i >= back; ++back) {
        const std::uint32_t k = i - back;
        if (k < p.blocks[block].first) {
            const auto falls_into = [&](const CalcEdge& e) {
                return e.to == block && e.kind == EdgeKind::kFallThrough && e.from < p.blocks.size() &&
                       p.blocks[e.from].count > 0 && p.blocks[e.from].first + p.blocks[e.from].count - 1 == k;
            };
            const auto e = std::find_if(p.edges.begin(), p.edges.end(), falls_into);
            if (e == p.edges.end()) return false;
            block = e->from;
        }
        if (p.instructions[k].text.rfind("call", 0) == 0) return true;
    }
    return false;
}

// Whether every sample of block b lies shortly after a call, and the
// procedure's level rests on other samples (at least 8 elsewhere, as
// class_ranges asks of a class): where the block holds all its procedure
// has, a range down to 0 would let the flow drop a procedure that ran
// (SQLite's sqlite3Malloc, 1 sample, 64 k calls: 0).
bool samples_after_call(const CalcProcedure& p, std::uint32_t b) {
    const CalcBlock& blk = p.blocks[b];
    if (blk.samples == 0 || blk.first + blk.count > p.instructions.size()) return false;
    std::uint64_t elsewhere = 0;
    for (const CalcBlock& other : p.blocks) elsewhere += other.samples;
    if (elsewhere - blk.samples < 8) return false;
    // Only a rare path: a point of at most a tenth of the procedure's calls
    // (jsonq's growth path: 51,910 of 7.5 M). SQLite's after-call blocks
    // with one sample ran as often as their procedure (closeCursorsInFrame
    // in sqlite3VdbeHalt: 171 k by calc, 280 k by callgrind, of 163 k
    // calls); ranged to 0, their counts fell to half or none.
    if (!(blk.executions <= kRareShare * p.invocations)) return false;
    for (std::uint32_t i = blk.first; i < blk.first + blk.count; ++i)
        if (p.instructions[i].samples > 0 && !shortly_after_call(p, b, i)) return false;
    return true;
}

BlockEvidence block_evidence_of(const CalcProcedure& p, std::uint32_t block, bool alternative) {
    const CalcBlock& b = p.blocks[block];
    BlockEvidence e;
    e.samples = static_cast<double>(b.samples);
    e.executions = b.executions;
    e.ranged = b.ranged;
    e.executions_min = b.executions_min;
    e.executions_max = b.executions_max;
    e.best_cycles = b.best_cycles;
    e.alternative = alternative;
    e.after_call = alternative && b.samples < 3 && samples_after_call(p, block);
    return e;
}

// Whether block b, with a count, closes with the jump at `jump`.
bool closes(const CalcProcedure& p, std::uint32_t b, std::uint64_t jump) {
    const CalcBlock& blk = p.blocks[b];
    return blk.count > 0 && blk.executions > 0 && blk.first + blk.count <= p.instructions.size() &&
           p.instructions[blk.first + blk.count - 1].address == jump;
}

// Snapshot shares of time (a compare with memory's flags, a jump table's
// index loaded just before it): a floor under each way they chose at calc's
// count of the block (timed_share_floor), as calc's own flow holds them.
// Without them the export kept SQLite's cell-header loop in
// sqlite3BtreeTableMoveto at 45,848 executions (callgrind: 3.48 M) where
// calc's flow now had 1.30 M; with them 1.32 M.
void add_timed_floors(const CalcProcedure& p, FlowProblem& problem) {
    const auto floor_edge = [&](std::size_t e, double floor) {
        if (e < problem.edges.size()) problem.edges[e].count = with_floor(problem.edges[e].count, floor);
    };
    for (const CalcBranch& br : p.timed_branches)
        for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
            if (!closes(p, b, br.jump)) continue;
            const auto edges = conditional_edges(p, b);
            if (!edges) continue;
            const double count = p.blocks[b].executions;
            floor_edge(edges->taken, timed_share_floor(br.taken, br.snapshots) * count);
            floor_edge(edges->fall, timed_share_floor(br.snapshots - br.taken, br.snapshots) * count);
        }
    for (const CalcSwitch& w : p.switches) {
        if (w.undecided.empty()) continue;
        for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
            if (!closes(p, b, w.jump)) continue;
            for (const auto& c : w.cases)
                for (std::size_t e = 0; e < p.edges.size(); ++e)
                    if (p.edges[e].from == b && p.edges[e].to < p.blocks.size() && p.blocks[p.edges[e].to].address == c.target)
                        floor_edge(e, timed_share_floor(c.snapshots, w.snapshots) * p.blocks[b].executions);
        }
    }
}

}  // namespace

FlowProblem layout_flow_problem(const CalcProcedure& p, double period_cycles) {
    FlowProblem problem;
    // The two sides of each conditional jump.
    std::vector<bool> alternative(p.blocks.size(), false);
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b)
        if (const auto edges = conditional_edges(p, b)) {
            alternative[p.edges[edges->taken].to] = true;
            alternative[p.edges[edges->fall].to] = true;
        }
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b)
        problem.blocks.push_back(block_evidence(block_evidence_of(p, b, alternative[b]), period_cycles));
    const auto per_execution = [&](double cycles) {
        return period_cycles > 0 ? cycles / period_cycles : 1e-9 * cycles;
    };
    for (const CalcEdge& e : p.edges) problem.edges.push_back({e.from, e.to, free_count()});
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
        const auto edges = conditional_edges(p, b);
        if (!edges) continue;
        if (p.blocks[p.edges[edges->taken].to].address <= p.blocks[b].address) continue;
        problem.edges[edges->taken].count = unseen_count(per_execution(kTakenCycles));
    }
    // A conditional jump whose condition calc evaluated on register
    // snapshots: each edge a soft count at its share of the block's
    // estimate (Laplace's rule, as split_by_odds), as if the snapshots
    // that went its way were samples of it. An edge no snapshot chose is
    // evidence only that it ran less often (calc's flow, add_odds: each
    // execution costs n / executions, the odds' likelihood of n snapshots
    // that all missed it; DCPI 6.2, an unsampled path carries no more
    // than its evidence allows). A pseudo-snapshot there claimed 1/(n+2)
    // of the block's count: jsonq's arena_alloc (19 snapshots, none on
    // the guard's rare side) put E/4 on its unsampled arena slow path,
    // 37,080 executions of the out-of-memory exit that never ran (issue 36).
    for (const CalcBranch& br : p.branches) {
        if (br.snapshots < kMinOddsSnapshots) continue;
        for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
            const CalcBlock& blk = p.blocks[b];
            if (!closes(p, b, br.jump)) continue;
            const auto edges = conditional_edges(p, b);
            if (!edges) continue;
            const auto n = static_cast<double>(br.snapshots);
            const auto chose_taken = static_cast<double>(br.taken);
            const double chose[] = {chose_taken, n - chose_taken};
            const std::size_t sides[] = {edges->taken, edges->fall};
            const double seen = (chose[0] > 0 ? 1 : 0) + (chose[1] > 0 ? 1 : 0);
            // A block whose own count is a range for its few samples: the
            // odds split that range, not its point (jsonq's arena_alloc: the
            // one snapshot on the growth path's malloc check restated the
            // 59,849 of its one sample, a path that ran 274 times).
            const EvidenceRange few = few_samples_range(block_evidence_of(p, b, alternative[b]));
            for (int k = 0; k < 2; ++k) {
                const double share = (chose[k] + 1) / (n + seen);
                problem.edges[sides[k]].count =
                    chose[k] <= 0 ? unseen_count(n / blk.executions)
                    : few.ranged  ? poisson_range(share * few.low, share * few.high, chose[k] + 1)
                                  : poisson_count(share * blk.executions, chose[k] + 1);
            }
        }
    }
    add_timed_floors(p, problem);
    return problem;
}

LayoutCounts layout_counts(const CalcProcedure& p, double period_cycles, LayoutCountSource source) {
    LayoutCounts out;
    if (source == LayoutCountSource::kRules) {
        out.edges = layout_edge_counts(p, period_cycles);
        out.blocks = layout_block_counts(p, out.edges);
        return out;
    }
    FlowSolution flow = solve_flow(layout_flow_problem(p, period_cycles));
    out.blocks = std::move(flow.blocks);
    out.edges = std::move(flow.edges);
    return out;
}

namespace {

LayoutCounts add_jumps(LayoutReport& r, std::uint32_t fn, const CalcProcedure& p, double period_cycles,
                       LayoutCountSource source) {
    LayoutCounts both = layout_counts(p, period_cycles, source);
    const std::vector<double>& counts = both.edges;
    for (std::size_t k = 0; k < p.edges.size(); ++k) {
        if (!recorded_edge(p, counts, k)) continue;
        const CalcEdge& e = p.edges[k];
        const CalcBlock& from = p.blocks[e.from];
        const CalcBlock& to = p.blocks[e.to];
        const CalcInstruction& jump = p.instructions[from.first + from.count - 1];
        r.branches.push_back({fn, jump.address - p.start, fn, to.address - p.start, counts[k], false,
                              from.ranged || to.ranged});
    }
    const std::vector<double>& blocks = both.blocks;
    for (std::size_t b = 0; b < p.blocks.size(); ++b)
        if (blocks[b] >= 0.5 && p.blocks[b].count > 0) r.blocks.push_back({fn, p.blocks[b].address - p.start, blocks[b]});
    return both;
}

// Direct calls to functions of the same image, counted by calc's estimate
// of the call instruction's executions, or with flow counts by its block's
// (`block_counts`: a call in a block the flow filled is a call too).
void add_calls(LayoutReport& r, const Functions& fs, std::uint32_t fn, const CalcProcedure& p,
               const std::vector<double>* block_counts) {
    for (const CalcBlock& b : p.blocks) {
        for (std::uint32_t k = b.first; k < b.first + b.count && k < p.instructions.size(); ++k) {
            const CalcInstruction& insn = p.instructions[k];
            const auto target = direct_call_target(insn.text);
            const double executions =
                block_counts != nullptr && b.index < block_counts->size() ? (*block_counts)[b.index] : insn.executions;
            if (!target || executions < 0.5) continue;
            const auto callee = fs.at(*target);
            // PLT stubs are not functions BOLT or lld can place.
            if (!callee || fs.list[*callee].start != *target || fs.list[*callee].name.find('@') != std::string::npos)
                continue;
            r.branches.push_back({fn, insn.address - p.start, *callee, 0, executions, true, b.ranged});
        }
    }
}

// Call graph weights from -g stacks: each adjacent (caller, callee) pair of
// frames in the image, counted once per stack sample; and the call sites
// those frames return to, for BOLT's call records.
bool calls_from_stacks(LayoutReport& r, const Functions& fs, const store::EpochContents& contents,
                       const std::map<std::uint64_t, std::uint64_t>& call_at_return) {
    const store::StackProfile* stacks = nullptr;
    for (const auto& s : contents.stacks)
        if (s.event == r.event) stacks = &s;
    if (stacks == nullptr) return false;
    std::map<std::pair<std::uint32_t, std::uint32_t>, double> weights;
    std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint32_t>, double> sites;
    for (const auto& sample : stacks->stacks) {
        for (std::size_t i = 0; i + 1 < sample.frames.size(); ++i) {
            const auto& callee_frame = sample.frames[i];
            const auto& caller_frame = sample.frames[i + 1];
            if (callee_frame.image >= stacks->images.size() || caller_frame.image >= stacks->images.size()) continue;
            if (stacks->images[callee_frame.image].path != r.image || stacks->images[caller_frame.image].path != r.image)
                continue;
            const auto callee = fs.at(callee_frame.offset);
            // A return address may sit one past its caller's last byte.
            const auto caller = fs.at(caller_frame.offset - 1);
            if (!callee || !caller || *callee == *caller) continue;
            const auto count = static_cast<double>(sample.count);
            weights[{*caller, *callee}] += count;
            const auto call = call_at_return.find(caller_frame.offset);
            if (call != call_at_return.end() && fs.at(call->second) == caller)
                sites[{*caller, call->second - fs.list[*caller].start, *callee}] += count;
        }
    }
    if (weights.empty()) return false;
    for (const auto& [key, w] : weights) r.calls.push_back({key.first, key.second, w});
    std::vector<StackCallSite> site_list;
    for (const auto& [key, w] : sites) site_list.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), w});
    for (LayoutBranch& b : stack_call_records(fs.list, r.branches, site_list)) r.branches.push_back(b);
    r.call_source = "stacks";
    return true;
}

void calls_from_call_sites(LayoutReport& r) {
    std::map<std::pair<std::uint32_t, std::uint32_t>, double> weights;
    for (const auto& b : r.branches)
        if (b.call && b.from != b.to) weights[{b.from, b.to}] += b.count;
    for (const auto& [key, w] : weights) r.calls.push_back({key.first, key.second, w});
    r.call_source = "call sites";
}

double density(std::uint64_t samples, std::uint64_t bytes) {
    return static_cast<double>(samples) / static_cast<double>(std::max<std::uint64_t>(bytes, 1));
}

}  // namespace

std::map<std::uint64_t, std::uint64_t> calls_by_return_address(const CalcReport& calc, const std::string& image) {
    std::map<std::uint64_t, std::uint64_t> out;
    for (const CalcProcedure& p : calc.procedures) {
        if (p.image != image) continue;
        std::vector<const CalcInstruction*> insns;
        insns.reserve(p.instructions.size());
        for (const CalcInstruction& insn : p.instructions) insns.push_back(&insn);
        std::sort(insns.begin(), insns.end(), [](auto* a, auto* b) { return a->address < b->address; });
        for (std::size_t k = 0; k + 1 < insns.size(); ++k)
            if (insns[k]->text.rfind("call", 0) == 0) out[insns[k + 1]->address] = insns[k]->address;
    }
    return out;
}

Result<LayoutReport> build_layout(const store::EpochContents& contents, const LayoutOptions& options,
                                  Symbolizer& symbolizer) {
    if (options.image.empty()) return Error("ecpi layout needs --image BINARY: the executable or library to lay out");
    CalcOptions co;
    co.all = true;
    co.image = options.image;
    co.event = options.event;
    co.cpu_mhz = options.cpu_mhz;
    co.machine = options.machine;
    co.lines = false;
    co.clock_margin_in_ranges = false;  // counts alone (calc.h)
    ECPI_ASSIGN_OR_RETURN(CalcReport calc, run_calc(contents, co, symbolizer));
    if (calc.procedures.empty()) {
        // A moved image's procedures cannot be named: say so, not "no samples".
        if (auto gone = missing_images_note(contents, calc.event, symbolizer); !gone.empty())
            return Error("no procedures of " + options.image + " in the images that could be read: " + gone);
        return Error("no " + (calc.event.empty() ? std::string("") : calc.event + " ") + "samples in procedures of " +
                     options.image + " in epoch " + contents.epoch +
                     " (check --image against `ecpi prof --by image`)");
    }

    LayoutReport r;
    r.epoch = contents.epoch;
    r.event = calc.event;
    r.image = calc.procedures.front().image;
    r.build_id = calc.procedures.front().build_id;
    r.warnings = calc.warnings;
    const store::ImageId id{r.image, r.build_id};

    Functions fs;
    std::vector<std::pair<std::uint32_t, const CalcProcedure*>> laid;
    for (const CalcProcedure& p : calc.procedures) {
        // PLT stubs are the linker's, not functions BOLT or lld can place.
        if (p.image != r.image || p.name.find("@plt") != std::string::npos) continue;
        const std::uint32_t fn = add_function(fs, p, symbolizer.lookup(id, p.start));
        if (p.samples >= options.min_samples) laid.push_back({fn, &p});
    }
    const auto& table = symbolizer.table(id);
    number_local_functions(fs, table.ok() ? &table.value() : nullptr);
    std::vector<LayoutCounts> counts;
    for (const auto& [fn, p] : laid) counts.push_back(add_jumps(r, fn, *p, calc.period_cycles, options.counts));
    for (std::size_t k = 0; k < laid.size(); ++k)
        add_calls(r, fs, laid[k].first, *laid[k].second,
                  options.counts == LayoutCountSource::kFlow ? &counts[k].blocks : nullptr);
    r.functions = fs.list;
    if (!calls_from_stacks(r, fs, contents, calls_by_return_address(calc, r.image))) calls_from_call_sites(r);
    r.order = options.order == FunctionOrder::kC3 ? c3_order(r.functions, r.calls, options.cluster_bytes)
                                                  : pettis_hansen_order(r.functions, r.calls);
    return r;
}

std::vector<LayoutBranch> stack_call_records(const std::vector<LayoutFunction>& functions,
                                             const std::vector<LayoutBranch>& branches,
                                             const std::vector<StackCallSite>& sites) {
    // What direct call records already give each callee, and at which sites.
    std::map<std::uint32_t, double> direct_calls;
    std::set<std::pair<std::uint32_t, std::uint64_t>> direct_sites;
    for (const LayoutBranch& b : branches) {
        if (!b.call) continue;
        direct_calls[b.to] += b.count;
        direct_sites.insert({b.from, b.from_offset});
    }
    std::map<std::uint32_t, double> samples_into;
    for (const StackCallSite& s : sites)
        if (!direct_sites.contains({s.caller, s.call_offset})) samples_into[s.callee] += s.samples;
    std::vector<LayoutBranch> out;
    for (const StackCallSite& s : sites) {
        if (direct_sites.contains({s.caller, s.call_offset}) || s.callee >= functions.size()) continue;
        const double rest = std::max(0.0, functions[s.callee].invocations - direct_calls[s.callee]);
        const double count = std::max(s.samples, rest * s.samples / samples_into[s.callee]);
        out.push_back({s.caller, s.call_offset, s.callee, 0, count, true, false});
    }
    return out;
}

std::vector<std::uint32_t> c3_order(const std::vector<LayoutFunction>& functions, const std::vector<CallEdge>& calls,
                                    std::uint64_t cluster_bytes) {
    // Density degradation HFSort/C3 tolerate when merging into a caller's cluster.
    constexpr double kMaxDensityDrop = 8;
    const auto n = static_cast<std::uint32_t>(functions.size());
    std::vector<std::uint32_t> hottest(n);
    std::iota(hottest.begin(), hottest.end(), 0u);
    std::stable_sort(hottest.begin(), hottest.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return functions[a].samples > functions[b].samples; });
    // The hottest caller of each function.
    std::vector<std::optional<CallEdge>> top_caller(n);
    for (const auto& e : calls) {
        if (e.callee >= n || e.caller >= n || e.caller == e.callee) continue;
        auto& t = top_caller[e.callee];
        if (!t || e.weight > t->weight) t = e;
    }
    std::vector<std::uint32_t> cluster_of(n);
    std::iota(cluster_of.begin(), cluster_of.end(), 0u);
    std::vector<std::vector<std::uint32_t>> members(n);
    std::vector<std::uint64_t> bytes(n), samples(n);
    for (std::uint32_t f = 0; f < n; ++f) {
        members[f] = {f};
        bytes[f] = functions[f].size;
        samples[f] = functions[f].samples;
    }
    for (std::uint32_t f : hottest) {
        if (!top_caller[f] || functions[f].samples == 0) continue;
        const std::uint32_t into = cluster_of[top_caller[f]->caller], from = cluster_of[f];
        if (into == from) continue;
        const std::uint64_t merged_bytes = bytes[into] + bytes[from];
        if (merged_bytes > cluster_bytes) continue;
        if (density(samples[into] + samples[from], merged_bytes) * kMaxDensityDrop < density(samples[into], bytes[into]))
            continue;
        for (auto m : members[from]) {
            members[into].push_back(m);
            cluster_of[m] = into;
        }
        members[from].clear();
        bytes[into] = merged_bytes;
        samples[into] += samples[from];
    }
    std::vector<std::uint32_t> clusters;
    for (std::uint32_t c = 0; c < n; ++c)
        if (!members[c].empty() && samples[c] > 0) clusters.push_back(c);
    std::stable_sort(clusters.begin(), clusters.end(), [&](std::uint32_t a, std::uint32_t b) {
        return density(samples[a], bytes[a]) > density(samples[b], bytes[b]);
    });
    std::vector<std::uint32_t> order;
    for (auto c : clusters) order.insert(order.end(), members[c].begin(), members[c].end());
    return order;
}

std::vector<std::uint32_t> pettis_hansen_order(const std::vector<LayoutFunction>& functions,
                                               const std::vector<CallEdge>& calls) {
    const auto n = static_cast<std::uint32_t>(functions.size());
    // Undirected weights, heaviest first.
    std::map<std::pair<std::uint32_t, std::uint32_t>, double> undirected;
    for (const auto& e : calls) {
        if (e.caller >= n || e.callee >= n || e.caller == e.callee) continue;
        undirected[{std::min(e.caller, e.callee), std::max(e.caller, e.callee)}] += e.weight;
    }
    std::vector<std::pair<double, std::pair<std::uint32_t, std::uint32_t>>> edges;
    for (const auto& [k, w] : undirected) edges.push_back({w, k});
    std::stable_sort(edges.begin(), edges.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::uint32_t> chain_of(n);
    std::iota(chain_of.begin(), chain_of.end(), 0u);
    std::vector<std::vector<std::uint32_t>> chains(n);
    for (std::uint32_t f = 0; f < n; ++f) chains[f] = {f};
    auto position = [](const std::vector<std::uint32_t>& c, std::uint32_t f) {
        return static_cast<std::size_t>(std::find(c.begin(), c.end(), f) - c.begin());
    };
    for (const auto& [w, ends] : edges) {
        const std::uint32_t a = chain_of[ends.first], b = chain_of[ends.second];
        if (a == b) continue;
        auto& ca = chains[a];
        auto& cb = chains[b];
        // Put ends.first at the tail of A and ends.second at the head of B
        // when that brings them closer: reverse either chain as needed.
        if (position(ca, ends.first) < ca.size() / 2) std::reverse(ca.begin(), ca.end());
        if (position(cb, ends.second) >= (cb.size() + 1) / 2) std::reverse(cb.begin(), cb.end());
        for (auto f : cb) chain_of[f] = a;
        ca.insert(ca.end(), cb.begin(), cb.end());
        cb.clear();
    }
    std::vector<std::pair<std::uint64_t, std::uint32_t>> by_samples;
    for (std::uint32_t c = 0; c < n; ++c) {
        if (chains[c].empty()) continue;
        std::uint64_t s = 0;
        for (auto f : chains[c]) s += functions[f].samples;
        if (s > 0) by_samples.push_back({s, c});
    }
    std::stable_sort(by_samples.begin(), by_samples.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::vector<std::uint32_t> order;
    for (const auto& [s, c] : by_samples) order.insert(order.end(), chains[c].begin(), chains[c].end());
    return order;
}

namespace {
const std::string& bolt_name_of(const LayoutFunction& f) { return f.bolt_name.empty() ? f.name : f.bolt_name; }
}  // namespace

std::string render_bolt_fdata(const LayoutReport& r) {
    std::vector<std::string> lines;
    char buf[64];
    for (const auto& b : r.branches) {
        const auto count = static_cast<unsigned long long>(std::llround(b.count));
        if (count == 0) continue;
        std::string line = "1 " + bolt_name_of(r.functions[b.from]);
        std::snprintf(buf, sizeof buf, " %" PRIx64 " 1 ", b.from_offset);
        line += buf;
        line += bolt_name_of(r.functions[b.to]);
        std::snprintf(buf, sizeof buf, " %" PRIx64 " 0 %llu\n", b.to_offset, count);
        line += buf;
        lines.push_back(std::move(line));
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& l : lines) out += l;
    return out;
}

std::string render_bolt_block_counts(const LayoutReport& r) {
    std::vector<std::string> lines;
    char buf[64];
    for (const auto& b : r.blocks) {
        const auto count = static_cast<unsigned long long>(std::llround(b.count));
        if (count == 0) continue;
        std::snprintf(buf, sizeof buf, " %" PRIx64 " %llu\n", b.offset, count);
        lines.push_back("1 " + bolt_name_of(r.functions[b.function]) + buf);
    }
    std::sort(lines.begin(), lines.end());
    std::string out = "no_lbr " + (r.event.empty() ? std::string("cpu-clock") : r.event) + ":\n";
    for (const auto& l : lines) out += l;
    return out;
}

std::string render_lld_order(const LayoutReport& r) {
    std::string out;
    for (auto f : r.order) out += r.functions[f].name + "\n";
    return out;
}

std::string render_lld_call_graph(const LayoutReport& r) {
    std::string out;
    for (const auto& e : r.calls) {
        const auto weight = static_cast<unsigned long long>(std::max<long long>(1, std::llround(e.weight)));
        out += r.functions[e.caller].name + " " + r.functions[e.callee].name + " " + std::to_string(weight) + "\n";
    }
    return out;
}

nlohmann::json render_layout_json(const LayoutReport& r) {
    using nlohmann::json;
    json functions = json::array();
    for (const auto& f : r.functions)
        functions.push_back({{"name", f.name}, {"display", f.display}, {"start", f.start}, {"size", f.size},
                             {"samples", f.samples}, {"invocations", f.invocations}});
    json branches = json::array();
    for (const auto& b : r.branches)
        branches.push_back({{"from", b.from}, {"from_offset", b.from_offset}, {"to", b.to}, {"to_offset", b.to_offset},
                            {"count", b.count}, {"call", b.call}, {"ranged", b.ranged}});
    json calls = json::array();
    for (const auto& e : r.calls) calls.push_back({{"caller", e.caller}, {"callee", e.callee}, {"weight", e.weight}});
    return {{"schema", "ecpi.layout"}, {"version", 1},         {"image", r.image},
            {"build_id", r.build_id}, {"epoch", r.epoch},      {"event", r.event},
            {"functions", functions}, {"branches", branches},  {"calls", calls},
            {"call_source", r.call_source}, {"order", r.order}, {"warnings", r.warnings}};
}

}  // namespace ecpi::analyze
