// One procedure through calc's pipeline (DCPI 6.1, 6.3): CFG, frequency
// classes, machine-model timing, loops and register-progress anchors,
// frequency estimates, ranges where the samples cannot decide, culprits.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/call_odds.h"
#include "ecpi/analyze/calc/later_odds.h"
#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/entry_arguments.h"
#include "ecpi/analyze/calc/bisection_trips.h"
#include "ecpi/analyze/calc/entry_trips.h"
#include "ecpi/analyze/calc/flow_counts.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/analyze/calc/load_chain.h"
#include "ecpi/analyze/calc/register_progress.h"
#include "ecpi/analyze/calc/ranges.h"
#include "ecpi/analyze/calc/switch_odds.h"
#include "ecpi/analyze/calc/trip_exit.h"

namespace ecpi::analyze {

namespace {

// A count for a sentence: 4 significant digits.
std::string fmt_count(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

const char* register_name(int gp, std::uint8_t width) {
    static const char* const k64[] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                      "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
    static const char* const k32[] = {"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi",
                                      "r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"};
    if (gp < 0 || gp >= 16) return "?";
    return width == 4 ? k32[gp] : k64[gp];
}

// Everything the steps share.
// Per frequency class: the least and most frequency its evidence allows.
using ClassBounds = std::map<std::uint32_t, std::pair<double, double>>;

struct Analysis {
    Cfg cfg;
    FrequencyClasses classes;
    std::vector<BlockTiming> timing;
    std::vector<std::uint64_t> samples;       // per instruction
    LoopInfo loops;
    std::vector<CalcLoop> loop_reports;       // per loop
    std::vector<double> loop_anchor;          // per loop: anchored F (0: none)
    std::vector<double> loop_entries_seen;    // per loop: entries its snapshots saw (loop_entries_seen)
    std::vector<TripLength> trips;            // per loop: its trip length from its exit's bound (trip_length)
    std::vector<const InductionVariable*> trip_induction;  // per loop: the register that trip length is of
    std::vector<TripShare> trip_shares;       // the trips known, for the flow
    // A bisection's branch between its halves, with the moves its bounds
    // spell (bisection_trips.h, low_moves): the odds evaluate_branches uses.
    struct HalfMoves {
        std::uint32_t block = 0, low_edge = 0;
        std::uint64_t low = 0, high = 0;
    };
    std::vector<HalfMoves> half_moves;
    // Per loop with a trip length from its trips' starts (entry_trips.h):
    // its site and length.
    std::vector<std::pair<EntryTripSite, EntryTrips>> entry_trips;
    std::vector<CalcBranch> branch_reports, timed_branch_reports;
    std::vector<CalcSwitch> switch_reports;
    std::vector<BranchOdds> odds;             // conditional jumps evaluated on register snapshots
    std::vector<BranchOdds> timed_odds;       // those only a compare with memory's flags decided (BranchOdds::timed)
    std::vector<bool> odds_anchored;          // per odds: its edges are anchors
    std::vector<SwitchOdds> switches;         // jump tables' cases from their index on register snapshots
    std::vector<SwitchOdds> switch_evidence;  // of them, those that decide (switch_undecided): what the flow uses
    std::vector<SwitchOdds> switch_timed;     // the others: floors for the cases their snapshots chose
    std::vector<CallOdds> calls;              // indirect calls' targets from their index on register snapshots
    // Per call through a table whose snapshots decide its targets, each
    // of them known code (decided_table_targets): call address -> targets.
    std::map<std::uint64_t, std::vector<std::uint64_t>> table_targets;
    std::vector<bool> switch_anchored;        // per switch: its edges are anchors
    // Per frequency class a branch's odds anchored: the frequencies its
    // share interval allows (its range; the anchor is its point).
    ClassBounds anchor_bounds;
    // Per frequency class a pointer chase's count came from (load_chain.h):
    // the counts its measured chase latency allows.
    ClassBounds chain_bounds;
    // The entry block's edge the callers' constants rule out (entry_arguments.h).
    std::optional<std::uint32_t> ruled_out;
    std::string entry_guard, entry_conflict;  // rule_out_entry_way's sentences
    // What bound_by_best_case scaled every count by (0: it did not), and
    // the cycles the counts asked of the samples before, over the samples.
    double best_case_scale = 0, best_case_excess = 0;
    EstimatorOptions options;
    FrequencyEstimate estimate;
    std::vector<ClassRange> ranges;
    CulpritAnalysis culprits;
};

Result<Cfg> procedure_cfg(const ProcedureInput& input) {
    if (!input.image) return Error(input.name + ": no image bytes");
    if (input.end <= input.start) return Error(input.name + ": empty address range");
    auto bytes = input.image->read(input.start, input.end - input.start);
    if (bytes.empty())
        return Error(input.name + ": code at " + hex(input.start) + "-" + hex(input.end) + " is not in " +
                     input.image->path().string());
    ECPI_ASSIGN_OR_RETURN(auto insns, decode_x86_64(input.start, bytes));
    CfgContext ctx;
    ctx.image = input.image;
    ctx.name_at = input.name_at;
    return build_cfg(input.start, input.end, std::move(insns), ctx);
}

// Samples per instruction (a sample inside an instruction counts for it).
std::vector<std::uint64_t> per_instruction(const Cfg& cfg, const std::map<std::uint64_t, std::uint64_t>& by_address) {
    const auto& in = cfg.instructions;
    std::vector<std::uint64_t> v(in.size(), 0);
    for (auto [addr, count] : by_address) {
        auto it = std::upper_bound(in.begin(), in.end(), addr,
                                   [](std::uint64_t a, const DecodedInstruction& d) { return a < d.address; });
        if (it == in.begin()) continue;
        --it;
        if (addr < it->address + it->size) v[static_cast<std::size_t>(it - in.begin())] += count;
    }
    return v;
}

EstimatorOptions estimator_options(const ProcedureInput& input, const Analysis& a, const MachineModel& model,
                                   double period_cycles, const EstimatorOptions& base) {
    EstimatorOptions o = base;
    o.whole_block_below = std::max(o.whole_block_below, model.whole_block_below());
    for (const auto& [address, executions] : input.region)
        for (std::uint32_t b = 0; b < a.cfg.blocks.size(); ++b)
            if (a.cfg.instructions[a.cfg.blocks[b].first].address == address && period_cycles > 0)
                o.regions.push_back({b, executions / period_cycles, false});
    if (!input.instruction_samples.empty() && input.instruction_period > 0) {
        o.instruction_samples = per_instruction(a.cfg, input.instruction_samples);
        o.instruction_period = input.instruction_period;
        o.cycle_period = period_cycles;
    }
    return o;
}

// A loop's blocks as address ranges, for "is this pc in the loop".
std::vector<std::pair<std::uint64_t, std::uint64_t>> loop_ranges(const Cfg& cfg, const Loop& loop) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> r;
    for (auto b : loop.blocks) {
        const auto& blk = cfg.blocks[b];
        const auto& last = cfg.instructions[blk.first + blk.count - 1];
        r.emplace_back(cfg.instructions[blk.first].address, last.address + last.size);
    }
    std::sort(r.begin(), r.end());
    return r;
}

// "Is this pc in the loop" (any of its blocks).
std::function<bool(std::uint64_t)> loop_pcs(const Cfg& cfg, const Loop& loop) {
    return [ranges = loop_ranges(cfg, loop)](std::uint64_t pc) {
        auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(pc, UINT64_MAX));
        return it != ranges.begin() && pc < std::prev(it)->second;
    };
}

// The code a direct call to `target` runs, when known and not the
// procedure itself (a recursive call's snapshots are the procedure's own).
const CalleeCode* known_callee(const ProcedureInput& input, std::uint64_t target) {
    const CalleeCode* c = input.callee_code ? input.callee_code(target) : nullptr;
    if (!c || !c->known) return nullptr;
    for (const auto& [s, e] : c->ranges)
        if (s < input.end && input.start < e) return nullptr;
    return c;
}

// A loop's calls, when every one of them runs known code (callee_code.h):
// that code's extents.
struct LoopCalls {
    bool covered = false;
    std::vector<const CalleeCode*> callees;
    bool contains(std::uint64_t pc) const {
        return std::any_of(callees.begin(), callees.end(), [pc](const CalleeCode* c) { return in_callee(*c, pc); });
    }
};

LoopCalls loop_calls(const Analysis& a, const ProcedureInput& input, const Loop& loop) {
    LoopCalls out;
    if (!loop.has_call) return out;
    for (auto b : loop.blocks)
        for (std::uint32_t i = 0; i < a.cfg.blocks[b].count; ++i) {
            const DecodedInstruction& d = a.cfg.instructions[a.cfg.blocks[b].first + i];
            if (!is_call(d.flow)) continue;
            std::vector<const CalleeCode*> code;
            if (d.flow == FlowKind::kCall) {
                code.push_back(known_callee(input, d.target));
            } else if (auto it = a.table_targets.find(d.address); it != a.table_targets.end()) {
                for (std::uint64_t t : it->second) code.push_back(known_callee(input, t));
            }
            if (code.empty()) return {};
            for (const CalleeCode* c : code) {
                if (!c) return {};
                if (std::find(out.callees.begin(), out.callees.end(), c) == out.callees.end()) out.callees.push_back(c);
            }
        }
    out.covered = true;
    return out;
}

// Issue 36: a call through a table (`table[i % 3](i)`) whose register
// snapshots decide its targets (call_odds.h, at least kMinCallSnapshots of
// them), every target known code, writes what those targets write and
// runs their code: the loop around it is then measured as one with direct
// calls (its snapshots in the targets count with its own). A target no
// deciding snapshot chose runs below about 1% of the calls; its snapshots
// are outside the loop's code and break the pairs around them, which
// costs pairs, not a wrong rate. The shares are plain (no loop yet): only
// the set of targets is used here.
void decided_table_targets(Analysis& a, const ProcedureInput& input) {
    if (!input.image || !input.registers || input.registers->stream.empty()) return;
    const auto& r = *input.registers;
    const PointerAt pointer_at = [image = input.image](std::uint64_t address) { return image->pointer_at(address); };
    for (const CallOdds& o : indirect_call_odds(a.cfg, pointer_at, r.stream, r.image, r.candidates, nullptr)) {
        if (!call_odds_decide(o) || o.targets.empty()) continue;
        std::vector<std::uint64_t> targets;
        for (const auto& [target, snapshots] : o.targets)
            if (snapshots > 0) targets.push_back(target);
        const bool all_known = std::all_of(targets.begin(), targets.end(),
                                           [&](std::uint64_t t) { return known_callee(input, t) != nullptr; });
        if (all_known && !targets.empty()) a.table_targets[o.call] = std::move(targets);
    }
}

// The pairs' query for loop l with one induction register. A loop whose
// calls all run known code that writes neither the register nor the
// loop's invariants counts the snapshots taken in that code with the
// loop's (ProgressQuery::in_callees); any other loop with calls pairs its
// own snapshots through them.
ProgressQuery loop_query(const Analysis& a, const ProcedureInput& input, std::uint32_t l,
                         const std::function<bool(std::uint64_t)>& in_loop, const InductionVariable& iv,
                         const LoopCalls& calls) {
    ProgressQuery q;
    q.stream = input.registers->stream;
    q.image = input.registers->image;
    q.in_loop = in_loop;
    q.candidates = input.registers->candidates;
    q.gp = iv.gp;
    q.step = iv.step;
    q.width = iv.width;
    q.invariant = a.loops.invariant[l];
    q.max_gap_ns = input.registers->max_gap_ns;
    const Loop& loop = a.loops.loops[l];
    q.through_calls = loop.has_call;
    const auto untouched = [&](int r) { return ((loop.callee_writes >> r) & 1u) == 0; };
    if (!calls.covered || !untouched(iv.gp)) return q;
    for (int r : a.loops.invariant[l])
        if (untouched(r)) q.signature.push_back(r);
    if (q.signature.empty()) return q;
    q.invariant = a.loops.steady[l];
    q.through_calls = false;
    q.in_callees = [&calls](std::uint64_t pc) { return calls.contains(pc); };
    return q;
}

// Why a loop's rate cannot be used ("" when it can).
std::string rate_refusal(const LoopRate& best, const CalcLoop& r) {
    const auto& c = best.pairs;
    if (best.interrupted && best.hops > 0)
        return std::to_string(best.gap_hops) + " of " + std::to_string(best.hops) +
               " hops between register snapshots of the loop's thread within its trips had samples without "
               "registers between them (the thread in the kernel, e.g. page faults, or off the CPU): the loop's "
               "time is not all in its samples";
    if (best.interrupted)
        return std::to_string(c.gap) + " of " + std::to_string(c.used + c.outlier + c.gap) +
               " pairs of register snapshots in the loop had samples without registers between them (the "
               "thread in the kernel, e.g. page faults, or off the CPU): the loop's time is not all in its "
               "samples";
    if (best.few_usable)
        return "only " + std::to_string(c.used) + " of " +
               std::to_string(c.used + c.outlier + c.other_thread + c.left_loop + c.invariant_changed +
                              c.wrong_direction + c.too_far + c.gap) +
               " pairs of register snapshots stayed in one trip of the loop (trips are short, or the thread "
               "is often in the kernel or off the CPU)";
    if (best.short_trips)
        return "its trips are too short for the time between snapshots (" + r.induction + " spans " +
               fmt_count(best.span_iterations) + " iterations, a pair moved " + fmt_count(best.median_iterations) +
               ", the longest " + fmt_count(best.most_iterations) + "): a pair may cross the loop's ends";
    if (!best.known)
        return "too few usable pairs of register snapshots (" + std::to_string(c.used) + ", need " +
               std::to_string(kMinPairs) + ")";
    return "";
}

// A loop that calls other code is measured only when its induction
// register survives the calls (callee-saved, or one its callees' code never
// writes: loops.cpp drops the others) and snapshots fell in it; "" when it
// may be measured. Its pairs run through the calls (or through the calls'
// snapshots taken for its own), and its time is its own samples' and the
// calls' within its trips (register_progress.h, CalleeShare).
std::string call_refusal(const CalleeShare& share) {
    if (share.in_loop == 0) return "the loop calls other code and no register snapshot fell in it";
    if (1 + share.high <= kMaxCalleeSpread * (1 + share.low)) return "";
    return "the loop calls other code, and its trips are too short for the snapshots to tell which of the " +
           std::to_string(share.away + share.crossing) + " in calls were its own: the calls took " +
           fmt_count(100 * share.low) + "% to " + fmt_count(100 * share.high) + "% of the loop's own time";
}

// Per loop without calls, the entries its threads' snapshots saw
// (register_progress.h): a floor under the flow's entries into it.
void count_loop_entries(Analysis& a, const ProcedureInput& input) {
    a.loop_entries_seen.assign(a.loops.loops.size(), 0);
    if (!input.registers || input.registers->stream.empty()) return;
    for (std::uint32_t l = 0; l < a.loops.loops.size(); ++l) {
        if (a.loops.loops[l].has_call) continue;
        ProgressQuery q;
        q.stream = input.registers->stream;
        q.image = input.registers->image;
        q.candidates = input.registers->candidates;
        q.in_loop = loop_pcs(a.cfg, a.loops.loops[l]);
        a.loop_entries_seen[l] = loop_entries_seen(q);
    }
}

// Register progress per loop (register_progress.h): the loop's rate from
// pairs of snapshots, times the time its samples stand for, is the count of
// its stepping block. The loop's anchor is its induction register with the
// most usable pairs.
void measure_loops(Analysis& a, const ProcedureInput& input, double period_cycles) {
    const auto& loops = a.loops.loops;
    a.loop_reports.assign(loops.size(), {});
    a.loop_anchor.assign(loops.size(), 0);
    for (std::uint32_t l = 0; l < loops.size(); ++l) {
        const Loop& loop = loops[l];
        CalcLoop& r = a.loop_reports[l];
        r.header = a.cfg.instructions[a.cfg.blocks[loop.header].first].address;
        r.depth = loop.depth;
        r.blocks = static_cast<std::uint32_t>(loop.blocks.size());
        for (auto b : loop.blocks)
            for (std::uint32_t i = 0; i < a.cfg.blocks[b].count; ++i) r.samples += a.samples[a.cfg.blocks[b].first + i];
        std::vector<const InductionVariable*> ivs;
        for (const auto& iv : a.loops.induction)
            if (iv.loop == l) ivs.push_back(&iv);
        if (ivs.empty()) {
            r.why_not = loop.has_call ? "the loop calls other code and no register its calls leave alone (callee-"
                                        "saved, or never written by the callee's code) is stepped by a constant "
                                        "once per iteration"
                                      : "no register is stepped by a constant once per iteration";
            continue;
        }
        r.induction = register_name(ivs.front()->gp, ivs.front()->width);
        r.step = ivs.front()->step;
        r.step_address = a.cfg.instructions[ivs.front()->instruction].address;
        if (!input.registers || input.registers->stream.empty()) {
            r.why_not = loop.has_call ? "the loop calls other code, and without register snapshots (ecpi record "
                                        "--registers) the calls' share of its time is unknown"
                                      : "no register snapshots recorded (ecpi record --registers)";
            continue;
        }
        const std::function<bool(std::uint64_t)> in_loop = loop_pcs(a.cfg, loop);
        LoopRate best;
        const InductionVariable* best_iv = nullptr;
        const LoopCalls calls_run = loop_calls(a, input, loop);
        for (const auto* iv : ivs) {
            LoopRate rate = loop_rate(loop_query(a, input, l, in_loop, *iv, calls_run));
            if (!best_iv || rate.pairs.used > best.pairs.used) {
                best = rate;
                best_iv = iv;
            }
        }
        r.induction = register_name(best_iv->gp, best_iv->width);
        r.step = best_iv->step;
        r.step_address = a.cfg.instructions[best_iv->instruction].address;
        r.pairs = best.pairs;
        CalleeShare calls;
        if (loop.has_call) {
            calls = callee_share(loop_query(a, input, l, in_loop, *best_iv, calls_run));
            r.why_not = call_refusal(calls);
            if (!r.why_not.empty()) continue;
        }
        r.why_not = rate_refusal(best, r);
        if (!r.why_not.empty()) continue;
        // The loop's time: its own samples', and the calls' within its trips.
        const double loop_ns = static_cast<double>(r.samples) * input.registers->period_ns;
        r.anchored = true;
        r.iterations_per_second = best.iterations_per_ns * 1e9;
        r.iterations = best.iterations_per_ns * loop_ns * (1 + calls.share);
        r.iterations_min = best.low * loop_ns * (1 + calls.low);
        r.iterations_max = best.high * loop_ns * (1 + calls.high);
        a.loop_anchor[l] = r.iterations / period_cycles;
        a.options.anchors.push_back({best_iv->block, a.loop_anchor[l], false});
    }
}

// Loops bound by a chain of loads that miss (load_chain.h) and not
// measured by register progress: their samples' time over k steps of the
// machine's measured chase at their snapshots' working set, for the class
// of their header (the blocks that run once an iteration).
void estimate_load_chains(Analysis& a, const ProcedureInput& input, double period_cycles) {
    if (input.chase_latency.empty() || !input.registers || period_cycles <= 0) return;
    const double ns_per_cycle = input.registers->period_ns / period_cycles;
    for (std::uint32_t l = 0; l < a.loops.loops.size(); ++l) {
        const Loop& loop = a.loops.loops[l];
        if (a.loop_anchor[l] > 0) continue;
        const std::uint32_t cls = a.classes.block_class[loop.header];
        std::vector<std::uint32_t> once;
        double body_cycles = 0;
        for (auto b : loop.blocks)
            if (a.classes.block_class[b] == cls) {
                once.push_back(b);
                body_cycles += a.timing[b].cycles;
            }
        const LoadChain chain = find_load_chain(a.cfg, loop, once);
        if (!chain.found) continue;
        const ChainSpan span = chain_span(input.registers->stream, input.registers->candidates,
                                          input.registers->image, loop_pcs(a.cfg, loop), chain.gp);
        const ChainIteration it = chain_iteration(chain, span, input.chase_latency, body_cycles * ns_per_cycle);
        CalcLoop& r = a.loop_reports[l];
        if (!it.known) {
            r.load_chain = "not used: " + it.why_not;
            continue;
        }
        const double loop_ns = static_cast<double>(r.samples) * input.registers->period_ns;
        const double f = loop_ns / it.ns / period_cycles;
        a.options.load_chains.push_back({loop.header, f, false});
        a.chain_bounds[cls] = {loop_ns / it.ns_high / period_cycles, loop_ns / it.ns_low / period_cycles};
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s chased %u time(s) an iteration over %.3g MiB: %.0f ns an iteration [%.0f, %.0f]",
                      register_name(chain.gp, 8), chain.loads, it.span_bytes / (1 << 20), it.ns, it.ns_low, it.ns_high);
        r.load_chain = buf;
    }
}

// A pointer chase's count ranges over what its chase latency allows,
// within what its samples allow (where the two disagree, the samples' stands).
void range_load_chains(Analysis& a) {
    for (const auto& [cls, bounds] : a.chain_bounds) {
        if (cls >= a.ranges.size() || a.estimate.classes[cls].source != EstimateSource::kLoadChain) continue;
        ClassRange& r = a.ranges[cls];
        if (!r.ranged || bounds.first > r.max || bounds.second < r.min) continue;
        r.min = std::max(r.min, bounds.first);
        r.max = std::min(r.max, bounds.second);
    }
}

// Per loop register progress could not measure, its trip length from its
// exit's bound (register_progress.h, trip_length).
void measure_trips(Analysis& a, const ProcedureInput& input) {
    a.trips.assign(a.loops.loops.size(), {});
    a.trip_induction.assign(a.loops.loops.size(), nullptr);
    if (!input.registers || input.registers->stream.empty()) return;
    for (std::uint32_t l = 0; l < a.loops.loops.size(); ++l) {
        if (a.loop_anchor[l] > 0) continue;
        const auto exit = trip_exit(a.cfg, a.loops, l);
        if (!exit) continue;
        const ProgressQuery q = loop_query(a, input, l, loop_pcs(a.cfg, a.loops.loops[l]), *exit->second, LoopCalls{});
        a.trips[l] = trip_length(q, exit->first);
        a.trip_induction[l] = exit->second;
        const TripLength& trip = a.trips[l];
        if (!trip.known) continue;
        // Each iteration passes one latch, and the last leaves: every latch
        // leaves in 1 / length of its passes, whichever the trip ends at.
        for (auto latch : a.loops.loops[l].latches) {
            TripShare share;
            share.block = latch;
            share.length = trip.length;
            share.weight = trip.in_groups;
            for (auto e : a.cfg.blocks[latch].out_edges)
                (a.loops.loops[l].contains(a.cfg.edges[e].to) ? share.stay_edge : share.exit_edge) = e;
            a.trip_shares.push_back(share);
        }
        a.loop_reports[l].trip_length = trip.length;
    }
}

// Issue 36: per loop neither register progress nor its exit's bound
// measured, its trip length from the snapshots taken in its trips' first
// iterations (entry_trips.h): wordfreq's hash probe, whose exit compares a
// loaded key. Its back edge then runs length - 1 times per entry.
void measure_entry_trips(Analysis& a, const ProcedureInput& input) {
    if (!input.registers || input.registers->stream.empty()) return;
    for (std::uint32_t l = 0; l < a.loops.loops.size(); ++l) {
        if (a.loop_anchor[l] > 0 || a.trips[l].known) continue;
        const auto site = entry_trip_site(a.cfg, a.loops, l);
        if (!site) continue;
        const EntryTrips trips = entry_trips(a.cfg, a.loops, *site, input.registers->stream, input.registers->image,
                                             input.registers->candidates);
        if (!trips.known) continue;
        CalcLoop& r = a.loop_reports[l];
        if (trips.disagree) {
            // Neither reference is the truth; the range holds both.
            r.trip_starts = "its trips run " + fmt_count(trips.low) + " to " + fmt_count(trips.high) +
                            " iterations: of " + std::to_string(trips.snapshots) +
                            " register snapshots in its header, " + std::to_string(trips.first) +
                            " are in a trip's first iteration (" + fmt_count(trips.length) + " a trip) and " +
                            std::to_string(trips.second) + " in its second (" + fmt_count(trips.later_length) +
                            "): a first iteration takes longer than the rest, so neither sets its count";
            a.entry_trips.emplace_back(*site, trips);
            continue;
        }
        TripShare share;
        share.block = site->preheader;
        share.stay_edge = site->back_edge;
        share.exit_edge = site->entry_edge;
        share.length = trips.length;
        share.weight = trips.snapshots;
        share.from_entry = true;
        a.trip_shares.push_back(share);
        a.entry_trips.emplace_back(*site, trips);
        r.trip_length = trips.length;
        r.trip_starts = "its trips run " + fmt_count(trips.length) + " iterations (" + fmt_count(trips.low) + "-" +
                        fmt_count(trips.high) + "): " + std::to_string(trips.first) + " of " +
                        std::to_string(trips.snapshots) + " register snapshots in its header hold " +
                        register_name(site->gp, 8) + " at the start its preheader computes: its count is its " +
                        "entries times that";
    }
}

// Why a bisection's snapshots gave no length (BisectionTrips::uneven).
std::string uneven_bisection(const BisectionTrips& t, const std::string& bounds) {
    const std::string head = "a bisection of " + bounds + " whose " + std::to_string(t.snapshots) +
                             " register snapshots ";
    if (t.uneven_level == 0)
        return head + "are too few to tell whether they spread evenly over its levels (" + fmt_count(t.per_level) +
               " a level), so no length is read";
    const std::uint32_t k = t.uneven_level;
    return head + "do not spread evenly over its levels: " + std::to_string(t.levels[k]) + " at " +
           std::to_string(k) + (k == 1 ? " iteration" : " iterations") + " from its end against " +
           fmt_count(t.per_level) + " a level (its trips end early, as a search that finds its key does, or a " +
           "first iteration takes longer), so no length is read";
}

// Why a bisection's snapshots gave no length though they spread evenly:
// too many hold bounds that are not the iteration's own.
std::string crossed_bisection(const BisectionTrips& t, const std::string& bounds) {
    return "a bisection of " + bounds + " whose " + std::to_string(t.unknown) + " of " +
           std::to_string(t.snapshots + t.unknown) + " register snapshots hold bounds crossed by more than one " +
           "(not the iteration's own: the loop may write them elsewhere), so no length is read";
}

// How a bisection of equal trips gave its length (BisectionTrips::equal_trips).
std::string equal_bisection(const BisectionTrips& t, const std::string& bounds, bool inclusive) {
    const std::uint32_t k = t.uneven_level;
    return "a bisection: its trips run " + fmt_count(t.length) + " iterations (" + fmt_count(t.low) + "-" +
           fmt_count(t.high) + "): " + std::to_string(t.start_snapshots) + " of " + std::to_string(t.top_snapshots) +
           " register snapshots at its top level hold " + std::to_string(t.start_width + (inclusive ? 0 : 1)) +
           " candidates between " + bounds + ", so every trip starts there and runs to its last level; its levels " +
           "hold unequal shares (" + std::to_string(t.levels[k]) + " at " + std::to_string(k) +
           " iterations from its end against " + fmt_count(t.per_level) + " a level: its iterations take unequal " +
           "times), so the length is the levels', not its snapshots' mean: its count is its entries times that";
}

// At least this many moves make a bisection's half odds.
constexpr std::uint64_t kMinHalfMoves = 100;

// The first of the two bounds block b writes (-1: neither).
int first_bound_write(const Cfg& cfg, std::uint32_t b, int low, int high) {
    const auto& blk = cfg.blocks[b];
    for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k)
        for (auto w : cfg.instructions[k].writes) {
            const int r = gp_register_number(w);
            if (r == low || r == high) return r;
        }
    return -1;
}

// The branch of a bisection's loop that chooses its half: a block whose one
// way goes straight to a write of the low bound and whose other way stays
// in the loop without one.
std::optional<Analysis::HalfMoves> half_branch(const Analysis& a, const BisectionSite& site) {
    const Loop& loop = a.loops.loops[site.loop];
    for (auto b : loop.blocks) {
        const auto& out = a.cfg.blocks[b].out_edges;
        if (out.size() != 2) continue;
        std::uint32_t to_low = 0, ways_low = 0, ways_other = 0;
        for (auto e : out) {
            const std::uint32_t to = a.cfg.edges[e].to;
            if (to >= a.cfg.blocks.size() || !loop.contains(to)) break;
            if (first_bound_write(a.cfg, to, site.low, site.high) == site.low) {
                to_low = e;
                ++ways_low;
            } else {
                ++ways_other;
            }
        }
        if (ways_low == 1 && ways_other == 1) return Analysis::HalfMoves{b, to_low, 0, 0};
    }
    return std::nullopt;
}

// Issue 36: per loop no other way measured, a bisection's trip length from
// its bounds at its snapshots (bisection_trips.h): branchy's `search`. Its
// header then runs length times per entry.
void measure_bisection_trips(Analysis& a, const ProcedureInput& input) {
    if (!input.registers || input.registers->stream.empty()) return;
    for (std::uint32_t l = 0; l < a.loops.loops.size(); ++l) {
        if (a.loop_anchor[l] > 0 || a.trips[l].known) continue;
        const bool by_entries = std::any_of(a.entry_trips.begin(), a.entry_trips.end(),
                                            [l](const auto& t) { return t.first.loop == l; });
        if (by_entries) continue;
        const auto site = bisection_site(a.cfg, a.loops, l);
        if (!site) continue;
        const BisectionTrips trips =
            bisection_trips(*site, input.registers->stream, input.registers->image, input.registers->candidates);
        CalcLoop& r = a.loop_reports[l];
        const std::string bounds = std::string(register_name(site->low, site->width)) + ".." + register_name(site->high, site->width);
        if (trips.uneven && !trips.equal_trips && trips.snapshots >= kMinBisectionSnapshots) {
            r.trip_starts = uneven_bisection(trips, bounds);
            continue;
        }
        if (trips.snapshots >= kMinBisectionSnapshots && !trips.known) {
            r.trip_starts = crossed_bisection(trips, bounds);
            continue;
        }
        if (!trips.known) continue;
        TripShare share;
        share.block = site->preheader;
        share.exit_edge = site->entry_edge;
        share.header = a.loops.loops[l].header;
        share.exit_tests = site->exit_tests;
        share.length = trips.length;
        share.weight = trips.snapshots;
        share.from_entry = true;
        a.trip_shares.push_back(share);
        r.trip_length = trips.length;
        if (trips.equal_trips && trips.low_moves + trips.high_moves >= kMinHalfMoves) {
            if (auto half = half_branch(a, *site)) {
                half->low = trips.low_moves;
                half->high = trips.high_moves;
                a.half_moves.push_back(*half);
            }
        }
        if (trips.equal_trips) {
            r.trip_starts = equal_bisection(trips, bounds, site->inclusive);
            continue;
        }
        r.trip_starts = "a bisection: its trips run " + fmt_count(trips.length) + " iterations (" +
                        fmt_count(trips.low) + "-" + fmt_count(trips.high) + ", longer trips weighing more): " +
                        std::to_string(trips.snapshots) + " register snapshots where " + bounds +
                        " are the iteration's own leave log2(candidates + 1) iterations, on average half a " +
                        "trip: its count is its entries times that";
    }
}

// The most entries loop l can have: its procedure's invocations (their
// range where ranged, the callers' measured count within its tolerance),
// or for a nested loop its parent's header count.
double most_entries(const Analysis& a, const ProcedureInput& input, std::uint32_t l, double period_cycles) {
    const Loop& loop = a.loops.loops[l];
    if (loop.parent != kNoLoop) {
        const std::uint32_t cls = a.classes.block_class[a.loops.loops[loop.parent].header];
        if (cls < a.ranges.size() && a.ranges[cls].ranged) return a.ranges[cls].max;
        return a.estimate.block_frequency[a.loops.loops[loop.parent].header];
    }
    const std::uint32_t cls = a.classes.invocation_class;
    double most = a.estimate.invocations;
    if (cls < a.ranges.size() && a.ranges[cls].ranged) most = std::max(most, a.ranges[cls].max);
    if (input.entry && !input.entry->lower_bound) most = std::max(most, 1.1 * input.entry->executions / period_cycles);
    if (input.entry && input.entry->lower_bound) return INFINITY;
    return most;
}

// Issue 36: a loop with a trip length (measure_trips) runs between the
// fewest iterations its groups' entries seen give (TripLength::fewest) and
// the most entries it can have (most_entries) times its longest group's
// length: its header's class's range keeps within that (the header runs
// once an iteration; a loop of several latches runs each only in some). Where nothing
// decides how often the loop is entered (a guard no snapshot evaluated),
// that is as narrow as it gets.
void range_trip_loops(Analysis& a, const ProcedureInput& input, double period_cycles) {
    for (std::uint32_t l = 0; l < a.trips.size(); ++l) {
        const TripLength& trip = a.trips[l];
        if (!trip.known || a.loop_anchor[l] > 0) continue;
        const std::uint32_t cls = a.classes.block_class[a.loops.loops[l].header];
        if (cls >= a.ranges.size() || !a.ranges[cls].ranged) continue;
        const double fewest = trip.fewest / period_cycles;
        const double most = most_entries(a, input, l, period_cycles) * trip.high;
        ClassRange& r = a.ranges[cls];
        if (fewest > r.max || most < r.min) continue;  // they disagree: the samples' range stands
        r.min = std::max(r.min, fewest);
        r.max = std::min(r.max, most);
    }
}

// What a call region needs of each loop (call_regions.h, run_calc):
// whether its blocks all run once an iteration, its own best case an
// iteration, and its calls; and whether run_calc gave it a region's count.
void describe_loop_calls(Analysis& a, const ProcedureInput& input) {
    for (std::uint32_t l = 0; l < a.loops.loops.size() && l < a.loop_reports.size(); ++l) {
        const Loop& loop = a.loops.loops[l];
        CalcLoop& r = a.loop_reports[l];
        const std::uint32_t cls = a.classes.block_class[loop.header];
        r.straight = true;
        for (auto b : loop.blocks) {
            r.straight = r.straight && a.classes.block_class[b] == cls;
            r.best_cycles += a.timing[b].cycles;
            const auto& blk = a.cfg.blocks[b];
            for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
                const DecodedInstruction& d = a.cfg.instructions[k];
                if (is_call(d.flow)) r.calls.emplace_back(d.address, d.flow == FlowKind::kCall ? d.target : 0);
            }
        }
        std::sort(r.calls.begin(), r.calls.end());
        if (!input.region_loop) continue;
        for (const auto& [address, executions] : input.region)
            if (address == r.header) r.from_region = true;
    }
}

// Whether register gp is written in outer loop `outer` only by inner
// loop `inner`'s own instructions (there, by its stepping ones alone:
// InductionVariable), and no call in the outer loop may change it.
bool only_inner_writes(const Analysis& a, const Loop& outer, const Loop& inner, int gp) {
    if ((outer.call_clobbers >> gp) & 1u) return false;
    for (auto b : outer.blocks) {
        if (inner.contains(b)) continue;
        const auto& blk = a.cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k)
            for (auto r : a.cfg.instructions[k].writes)
                if (gp_register_number(r) == gp) return false;
    }
    return true;
}

// The least and most F block b's class may have: its range where ranged,
// else its point.
std::pair<double, double> class_bounds(const Analysis& a, std::uint32_t b) {
    const std::uint32_t cls = a.classes.block_class[b];
    if (cls < a.ranges.size() && a.ranges[cls].ranged) return {a.ranges[cls].min, a.ranges[cls].max};
    return {a.estimate.block_frequency[b], a.estimate.block_frequency[b]};
}

// Issue 36: a loop with a trip length from its trips' starts
// (measure_entry_trips) runs its header between its preheader's least
// count times the shortest length the snapshots allow and its most count
// times the longest, and its back edge's class length - 1 times that: its
// classes' ranges keep within those where they overlap (else the samples'
// ranges stand).
void range_entry_trip_loops(Analysis& a) {
    for (const auto& [site, trips] : a.entry_trips) {
        const std::uint32_t entry_class = a.classes.block_class[site.preheader];
        if (entry_class >= a.ranges.size() || !a.ranges[entry_class].ranged) continue;
        const auto [low, high] = class_bounds(a, site.preheader);
        const Loop& loop = a.loops.loops[site.loop];
        const std::pair<std::uint32_t, double> bounds[] = {{loop.header, 0}, {loop.latches.front(), 1}};
        for (const auto& [block, less] : bounds) {
            if (a.classes.block_class[block] == a.classes.block_class[site.preheader]) continue;
            if (block == loop.latches.front() && a.cfg.blocks[block].out_edges.size() != 1) continue;
            const std::uint32_t cls = a.classes.block_class[block];
            if (cls < a.ranges.size()) (void)narrow_by_entry_trips(a.ranges[cls], trips, low, high, less);
        }
    }
}

// Issue 36: an inner loop the pairs could not measure (trips too short
// for the time between snapshots) whose induction register its outer loop
// leaves alone counts its iterations over the outer trip: its count is the
// outer loop's (the outer stepping block's, measured or estimated) times
// the inner iterations per outer iteration (register_progress.h,
// nested_ratio). bits' popcount: `total++` (ecx) against the word pointer
// (rdi). The count is rated measured and ranges over the ratio's spread
// times the outer count's bounds (its range where the outer loop's count is
// the samples'). Whether any was anchored.
bool anchor_nested_loops(Analysis& a, const ProcedureInput& input, double period_cycles) {
    if (!input.registers || input.registers->stream.empty()) return false;
    bool added = false;
    const auto& loops = a.loops.loops;
    for (std::uint32_t l = 0; l < loops.size(); ++l) {
        const std::uint32_t parent = loops[l].parent;
        if (a.loop_anchor[l] > 0 || parent == kNoLoop || loops[parent].has_call) continue;
        const std::function<bool(std::uint64_t)> in_outer = loop_pcs(a.cfg, loops[parent]);
        for (const auto& iv : a.loops.induction) {
            if (iv.loop != l || !only_inner_writes(a, loops[parent], loops[l], iv.gp)) continue;
            for (const auto& outer_iv : a.loops.induction) {
                if (outer_iv.loop != parent) continue;
                ProgressQuery q = loop_query(a, input, parent, in_outer, outer_iv, LoopCalls{});
                const NestedRatio ratio = nested_ratio(q, iv.gp, iv.step, iv.width);
                if (!ratio.known) continue;
                const double outer_f = a.estimate.block_frequency[outer_iv.block];
                const auto [outer_low, outer_high] = class_bounds(a, outer_iv.block);
                const double f = ratio.per_outer * outer_f;
                if (!(f > 0)) continue;
                a.options.anchors.push_back({iv.block, f, false});
                a.anchor_bounds[a.classes.block_class[iv.block]] = {ratio.low * outer_low, ratio.high * outer_high};
                a.loop_anchor[l] = f;
                CalcLoop& r = a.loop_reports[l];
                r.anchored = true;
                r.why_not.clear();
                r.induction = register_name(iv.gp, iv.width);
                r.step = iv.step;
                r.step_address = a.cfg.instructions[iv.instruction].address;
                r.per_outer_iteration = ratio.per_outer;
                r.iterations = f * period_cycles;
                r.iterations_min = ratio.low * outer_low * period_cycles;
                r.iterations_max = ratio.high * outer_high * period_cycles;
                added = true;
                break;
            }
            if (a.loop_anchor[l] > 0) break;
        }
    }
    return added;
}

// Issue 36: a block of a loop that steps a register nothing else in the
// loop changes (loops.h, BlockCounter: `words++` where a word ends) runs the
// slope of that register on the loop's induction register, over the loop's
// snapshots (nested_ratio), times the loop's count: the slope is read from
// register values alone, so neither the clock nor where the samples land
// enters it, where the snapshots' odds at the branch before it are
// time-weighted. The count is rated measured: a point like the loop's where
// register progress measured the loop (the loop's line gives the slope's
// spread times the loop's bounds), else ranged over the slope's spread times
// the loop's range, as anchor_nested_loops does. Snapshots after a call that
// the block keeps the register across, up to its reload, are left out.
// Whether any was anchored.
bool anchor_block_counters(Analysis& a, const ProcedureInput& input, double period_cycles) {
    if (!input.registers || input.registers->stream.empty()) return false;
    bool added = false;
    for (const BlockCounter& c : a.loops.counters) {
        const InductionVariable& counter = c.counter;
        const std::uint32_t l = counter.loop, cls = a.classes.block_class[counter.block];
        const bool anchored = std::any_of(a.options.anchors.begin(), a.options.anchors.end(), [&](const Anchor& an) {
            return !an.edge && a.classes.block_class[an.index] == cls;
        });
        if (anchored || a.anchor_bounds.contains(cls)) continue;
        const std::function<bool(std::uint64_t)> in_loop = loop_pcs(a.cfg, a.loops.loops[l]);
        const auto counted = [&](std::uint64_t pc) {
            return in_loop(pc) && std::none_of(c.clobbered.begin(), c.clobbered.end(),
                                               [pc](const auto& span) { return pc >= span.first && pc <= span.second; });
        };
        for (const auto& iv : a.loops.induction) {
            if (iv.loop != l) continue;
            const NestedRatio ratio = nested_ratio(loop_query(a, input, l, counted, iv, LoopCalls{}), counter.gp,
                                                   counter.step, counter.width);
            const double loop_f = a.estimate.block_frequency[iv.block];
            const double f = ratio.per_outer * loop_f;
            if (!ratio.known || !(f > 0)) continue;
            // The loop's own bounds: its rate's spread where register
            // progress measured it, else its class's.
            auto [loop_low, loop_high] = class_bounds(a, iv.block);
            const bool measured_loop = a.loop_anchor[l] > 0;
            if (const CalcLoop& r = a.loop_reports[l]; measured_loop && r.iterations_max > 0 && period_cycles > 0) {
                loop_low = std::min(loop_low, r.iterations_min / period_cycles);
                loop_high = std::max(loop_high, r.iterations_max / period_cycles);
            }
            // Under a measured loop a point, as every measured count (its
            // bounds go to the loop's line); under a loop the samples count
            // (classify's, its trips times its entries), the slope's spread
            // times the loop's range.
            a.options.anchors.push_back({counter.block, f, false});
            if (!measured_loop) a.anchor_bounds[cls] = {ratio.low * loop_low, ratio.high * loop_high};
            a.loop_reports[l].counters.push_back({a.cfg.instructions[a.cfg.blocks[counter.block].first].address,
                                                  register_name(counter.gp, counter.width), counter.step,
                                                  a.cfg.instructions[counter.instruction].address, ratio.per_outer,
                                                  f * period_cycles, ratio.low * loop_low * period_cycles,
                                                  ratio.high * loop_high * period_cycles});
            added = true;
            break;
        }
    }
    return added;
}

// A recounted loop's two counts, in words (CalcLoop::recounted).
std::string recount_sentence(const TripLength& trip, const InductionVariable& iv, double entries,
                             const std::string& before) {
    return "its entries (" + fmt_count(entries) + ", measured) times its trips' " + fmt_count(trip.length) +
           " iterations to the bound its exit compares " + register_name(iv.gp, iv.width) + " with; " + before;
}

// Issue 36: a loop whose trips all run one length to the bound its exit
// compares (trip_length: every group alike) and whose entries are measured
// has a count that needs no time base: entries times that length. It
// replaces (1) register progress's count where that count's bounds leave
// the product out: register progress times the loop's samples plus its
// calls' estimated share of them (callee_share), and branchy's main read its
// loop around `search` at 0.74x on one recording (bounds 0.73-0.76x) against
// its measured entries (1.015x) times 2,048 keys; (2) the flow's count of a
// loop's header more than 10% off it: the trip's shares (TripShare) state
// the exit at the latch's own count, which the samples set where the
// procedure's entry does not reach the loop's measured entries (loops.c's
// main on the Intel VM: its inner loop of 1,024 at 0.55x under a measured
// outer loop). The anchor is the product, a point like every measured
// count. Whether any moved.
bool recount_loops_by_trips(Analysis& a, const ProcedureInput& input, double period_cycles) {
    if (!input.registers || input.registers->stream.empty() || !(period_cycles > 0)) return false;
    bool moved = false;
    for (std::uint32_t l = 0; l < a.loops.loops.size(); ++l) {
        const Loop& loop = a.loops.loops[l];
        CalcLoop& r = a.loop_reports[l];
        const bool progress = a.loop_anchor[l] > 0 && r.anchored && r.per_outer_iteration == 0;
        if (!progress && !(a.loop_anchor[l] == 0 && a.trips[l].known)) continue;
        const std::optional<double> entries = measured_loop_entries(a.cfg, loop, a.estimate);
        if (!entries) continue;
        // A loop register progress measured has no trip yet (measure_trips
        // skips it); the others' came from the same exit (a.trip_induction).
        const auto exit = progress ? trip_exit(a.cfg, a.loops, l) : std::nullopt;
        if (progress && !exit) continue;
        const InductionVariable* iv = progress ? exit->second : a.trip_induction[l];
        if (!iv) continue;
        const TripLength trip =
            progress ? trip_length(loop_query(a, input, l, loop_pcs(a.cfg, loop), *iv, LoopCalls{}), exit->first)
                     : a.trips[l];
        const double flow = a.estimate.block_frequency[loop.header];
        const std::optional<double> f =
            progress ? trip_recount(trip, entries, r.iterations_min / period_cycles, r.iterations_max / period_cycles)
                     : trip_recount(trip, entries, 0.9 * flow, 1.1 * flow);
        if (!f) continue;
        std::string before;
        if (progress) {
            for (auto& anchor : a.options.anchors)
                if (!anchor.edge && anchor.frequency == a.loop_anchor[l] && loop.contains(anchor.index))
                    anchor.frequency = *f;
            before = "register progress gave " + fmt_count(r.iterations) + " (" + fmt_count(r.iterations_min) + "-" +
                     fmt_count(r.iterations_max) + "), which leaves that count out";
        } else {
            a.options.anchors.push_back({loop.header, *f, false});
            before = "the flow gave its header " + fmt_count(flow * period_cycles) + " from its samples, more than 10% off it";
            r.why_not.clear();
        }
        a.loop_anchor[l] = *f;
        r.anchored = true;
        r.recounted = recount_sentence(trip, *iv, *entries * period_cycles, before);
        r.iterations = r.iterations_min = r.iterations_max = *f * period_cycles;
        r.trip_length = trip.length;
        moved = true;
    }
    return moved;
}

// Each cause's range widened by the analysis at another count the samples
// allow: stall cycles fall as counts rise, but a cause's share can peak
// inside a range (at the low end the stall may outrun what one cause
// explains, leaving the rest unexplained).
void widen_culprits(CulpritAnalysis& point, const CulpritAnalysis& at) {
    // Static stall is reported at the point estimate, a single figure that
    // adds up with execution to the best case (Figure 4's tally).
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        if (!is_dynamic(static_cast<StallCause>(c))) continue;
        point.summary.min[c] = std::min(point.summary.min[c], at.summary.min[c]);
        point.summary.max[c] = std::max(point.summary.max[c], at.summary.max[c]);
    }
    for (std::size_t k = 0; k < point.instructions.size(); ++k) {
        auto& mine = point.instructions[k].culprits;
        const auto& other = at.instructions[k].culprits;
        for (const auto& o : other) {
            auto it = std::find_if(mine.begin(), mine.end(), [&](const Culprit& m) {
                return m.cause == o.cause && m.instruction == o.instruction;
            });
            if (it == mine.end()) mine.push_back({o.cause, 0, o.cycles_max, o.instruction});
            else it->cycles_max = std::max(it->cycles_max, o.cycles_max);
        }
        for (auto& m : mine) {
            auto it = std::find_if(other.begin(), other.end(), [&](const Culprit& o) {
                return m.cause == o.cause && m.instruction == o.instruction;
            });
            m.cycles_min = it == other.end() ? 0 : std::min(m.cycles_min, it->cycles_min);
        }
    }
}

CulpritAnalysis culprits_at(const Analysis& a, const ProcedureInput& input, const MachineModel& model,
                            double period_cycles, const FrequencyEstimate& estimate) {
    CulpritInput in;
    in.cfg = &a.cfg;
    in.timing = &a.timing;
    in.estimate = &estimate;
    in.samples = a.samples;
    in.period_cycles = period_cycles;
    in.model = &model;
    in.kernel_sampled = input.kernel_sampled;
    in.leaf_callee = input.leaf_callee;
    auto bounding = [&](const char* event, EventSamples& out) {
        auto it = input.bounding_events.find(event);
        if (it == input.bounding_events.end() || it->second.period <= 0) return;
        out.per_instruction = per_instruction(a.cfg, it->second.samples);
        out.period = it->second.period;
    };
    bounding("branch-misses", in.branch_misses);
    bounding("cache-misses", in.cache_misses);
    return find_culprits(in);
}

FlowCountsInput flow_input(const Analysis& a, const ProcedureInput& input, double period_cycles) {
    FlowCountsInput in;
    if (input.entry) {
        in.entry_executions = input.entry->executions;
        in.entry_lower_bound = input.entry->lower_bound;
    }
    in.cfg = &a.cfg;
    in.classes = &a.classes;
    in.timing = &a.timing;
    in.samples = a.samples;
    in.odds = a.odds;
    in.switches = a.switch_evidence;
    in.timed_switches = a.switch_timed;
    in.timed_odds = a.timed_odds;
    in.period_cycles = period_cycles;
    in.loops = &a.loops;
    in.loop_entries_seen = a.loop_entries_seen;
    in.trips = a.trip_shares;
    if (a.ruled_out) in.ruled_out = std::span<const std::uint32_t>(&*a.ruled_out, 1);
    return in;
}

// A measured count's bounds through one side of block b: the sum over its
// in- (or out-) edges of each edge's anchor bounds, or its measured point;
// none where an edge's count is not measured.
std::optional<std::pair<double, double>> side_bounds(const Analysis& a, const ClassBounds& bounds,
                                                     std::span<const std::uint32_t> edges) {
    std::pair<double, double> sum{0, 0};
    for (auto e : edges) {
        const std::uint32_t cls = a.classes.edge_class[e];
        if (const auto it = bounds.find(cls); it != bounds.end()) {
            sum.first += it->second.first;
            sum.second += it->second.second;
        } else if (a.estimate.classes[cls].confidence == Confidence::kMeasured) {
            sum.first += a.estimate.edge_frequency[e];
            sum.second += a.estimate.edge_frequency[e];
        } else {
            return std::nullopt;
        }
    }
    if (edges.empty()) return std::nullopt;
    return sum;
}

// The anchors' bounds carried to the counts the flow derived from them (a
// block between two anchored edges: wordfreq's letter path), blocks only;
// counts register progress measured keep their own point.
ClassBounds derived_bounds(const Analysis& a) {
    auto bounds = a.anchor_bounds;
    for (std::size_t pass = 0; pass < a.cfg.blocks.size() && pass < 8; ++pass) {
        bool added = false;
        for (std::uint32_t b = 0; b < a.cfg.blocks.size(); ++b) {
            const std::uint32_t cls = a.classes.block_class[b];
            const ClassEstimate& e = a.estimate.classes[cls];
            if (bounds.contains(cls) || e.confidence != Confidence::kMeasured ||
                e.source == EstimateSource::kRegisterProgress)
                continue;
            auto side = side_bounds(a, bounds, a.cfg.blocks[b].in_edges);
            if (!side) side = side_bounds(a, bounds, a.cfg.blocks[b].out_edges);
            if (!side || !(side->second > side->first)) continue;
            bounds[cls] = *side;
            added = true;
        }
        if (!added) break;
    }
    return bounds;
}

// A count a branch's odds anchored (or the flow derived from such) ranges
// over the counts its share interval allows; its point stays the share of
// all its snapshots. A branch's odds are time-weighted shares, and where
// the time before the jump depends on the way it goes they are biased:
// a point there would be a confident wrong answer.
void range_anchored_classes(Analysis& a) {
    for (const auto& [cls, bounds] : derived_bounds(a)) {
        if (cls >= a.ranges.size() || a.estimate.classes[cls].confidence != Confidence::kMeasured) continue;
        const double f = a.estimate.classes[cls].frequency;
        const double low = std::min(bounds.first, f), high = std::max(bounds.second, f);
        if (high > low) a.ranges[cls] = {true, low, high, RangePoint::kNone};
    }
}

// Issue 36: counts the samples cannot pay for. A block's best-case cycles
// (the machine model's, DCPI 6.1.2) times its count is time the procedure
// spent at least, and the samples measured that time: at calc's counts the
// procedure's best-case CPI may not exceed its actual CPI. Where it does by
// more than the samples' Poisson error (two standard deviations) times
// kClockMargin, and no block's count is measured, every count of the flow's
// solution is scaled down to what the samples pay for: a solution scaled as
// a whole still conserves flow, and each count is then an upper end (no
// stall at all). The margin: samples become cycles through a clock rate a
// one-shot recording measures once; without it jsonq's next_token (1.2x
// over) was scaled against functions that were not, and the PGO export's
// shape error rose in 6 of 9 recordings (docs/ACCURACY.md). jsonq's
// arena_alloc: its entry test's odds (590 snapshots, stated at the block's
// own point) held the flow at the pooled point of its first two blocks,
// their samples over their best case, which leaves out the recurrence
// through a->used from call to call: 467.9 M calls against callgrind's
// 199.0 M, actual CPI 0.14 against a best case of 0.28; scaled, 1.38x. A
// procedure with a measured block keeps its counts (they are exact;
// scaling the rest would break the flow at their edges). Only with a model
// measured on its CPU (any but the generic default, bound_applies): the
// generic model's best case is no floor for a given core (an Emerald Rapids
// VM ran glibc's function entries 1.7x under it), and on this Zen 3 VM it
// scaled arena_alloc, which it had within 10%, to 0.82x (docs/ACCURACY.md).

bool bound_applies(const MachineModel& model) { return model.name() != MachineModel::kDefault; }

bool bound_by_best_case(Analysis& a, double clock_margin) {
    double samples = 0, cycles = 0;
    for (std::uint32_t b = 0; b < a.cfg.blocks.size(); ++b) {
        if (a.estimate.block_confidence[b] == Confidence::kMeasured) return false;
        for (std::uint32_t i = 0; i < a.cfg.blocks[b].count; ++i)
            samples += static_cast<double>(a.samples[a.cfg.blocks[b].first + i]);
        cycles += a.estimate.block_frequency[b] * a.timing[b].cycles;
    }
    const double paid = (samples + 2 * std::sqrt(samples)) * clock_margin;
    if (!(samples > 0) || !(cycles > paid)) return false;
    const double k = paid / cycles;
    FrequencyEstimate& e = a.estimate;
    for (double& f : e.block_frequency) f *= k;
    for (double& f : e.edge_frequency) f *= k;
    for (ClassEstimate& c : e.classes) c.frequency *= k;
    e.invocations *= k;
    // A range holds the count calc reports (conserve_flow's rule).
    for (std::uint32_t c = 0; c < a.ranges.size() && c < e.classes.size(); ++c)
        if (a.ranges[c].ranged) a.ranges[c].min = std::min(a.ranges[c].min, e.classes[c].frequency);
    a.best_case_scale = k;
    a.best_case_excess = cycles / samples;
    return true;
}

// The culprits at the counts and, where counts are ranged, across their ranges.
void find_culprits(Analysis& a, const ProcedureInput& input, const MachineModel& model, double period_cycles) {
    a.culprits = culprits_at(a, input, model, period_cycles, a.estimate);
    if (std::none_of(a.ranges.begin(), a.ranges.end(), [](const ClassRange& r) { return r.ranged; })) return;
    // Both ends and points between, a factor of (max/min)^(1/8) apart.
    constexpr int kSteps = 8;
    for (int step = 0; step <= kSteps; ++step) {
        const FrequencyEstimate at = estimate_at(a.estimate, a.cfg, a.classes, a.ranges, double(step) / kSteps);
        widen_culprits(a.culprits, culprits_at(a, input, model, period_cycles, at));
    }
}

void estimate_with_ranges(Analysis& a, const ProcedureInput& input, const MachineModel& model, double period_cycles,
                          bool sampled) {
    a.estimate = estimate_frequencies(a.cfg, a.classes, a.timing, a.samples, a.options);
    if (!sampled) {
        a.ranges.assign(a.classes.count, {});
        a.culprits = culprits_at(a, input, model, period_cycles, a.estimate);
        return;
    }
    RangeInput ri;
    ri.cfg = &a.cfg;
    ri.classes = &a.classes;
    ri.timing = &a.timing;
    ri.estimate = &a.estimate;
    ri.loops = &a.loops;
    ri.model = &model;
    ri.samples = a.samples;
    ri.loop_anchor = a.loop_anchor;
    ri.odds = a.odds;
    a.ranges = class_ranges(ri);
    range_trip_loops(a, input, period_cycles);
    range_load_chains(a);
    range_entry_trip_loops(a);
    range_anchored_classes(a);
    clamp_to_ranges(a.estimate, a.cfg, a.classes, a.ranges);
    conserve_flow(a.estimate, a.ranges, flow_input(a, input, period_cycles));
    find_culprits(a, input, model, period_cycles);
}

// A branch's share of snapshots going each way splits its block's measured
// count between its edges, when the share is known well enough: the rarer
// way seen at least kMinRarer times (its count then within about 10%), or
// never in kMinNever snapshots (the rarer way below about 1% of the block).
constexpr std::uint32_t kMinRarer = 100, kMinNever = 400;

// A bisection's half branch takes the odds its bounds spell
// (Analysis::half_moves), not its compare's snapshots'.
void use_half_moves(Analysis& a) {
    for (const Analysis::HalfMoves& h : a.half_moves) {
        auto it = std::find_if(a.odds.begin(), a.odds.end(), [&](const BranchOdds& o) { return o.block == h.block; });
        if (it == a.odds.end()) {
            BranchOdds o;
            o.block = h.block;
            for (auto e : a.cfg.blocks[h.block].out_edges)
                (a.cfg.edges[e].kind == EdgeKind::kBranch ? o.taken_edge : o.fall_edge) = e;
            a.odds.push_back(o);
            it = a.odds.end() - 1;
        }
        const std::uint64_t scale = std::max<std::uint64_t>(1, (h.low + h.high) / 1'000'000'000 + 1);
        const auto low = static_cast<std::uint32_t>(h.low / scale), high = static_cast<std::uint32_t>(h.high / scale);
        it->total = low + high;
        it->taken = it->taken_edge == h.low_edge ? low : high;
        std::tie(it->share_low, it->share_high) = share_interval(it->taken, it->total);
        it->positions_disagree = false;
        it->median_of_positions = false;
    }
}

void evaluate_branches(Analysis& a, const ProcedureInput& input) {
    if (!input.registers || input.registers->stream.empty()) return;
    const auto& r = *input.registers;
    const LaterOdds later = later_odds(a.cfg, r.stream, r.image, r.candidates);
    std::vector<BranchOdds> own = branch_odds(a.cfg, r.stream, r.image, r.candidates);
    std::vector<BranchOdds> timed;
    std::erase_if(own, [&](const BranchOdds& o) { return o.timed && (timed.push_back(o), true); });
    a.odds = prefer_later(std::move(own), later.branches);
    for (const BranchOdds& o : timed)
        if (std::none_of(a.odds.begin(), a.odds.end(), [&](const BranchOdds& d) { return d.block == o.block; }))
            a.timed_odds.push_back(o);
    use_half_moves(a);
    a.odds_anchored.assign(a.odds.size(), false);
    a.switches = prefer_later(switch_odds(a.cfg, r.stream, r.image, r.candidates), later.switches);
    a.switch_anchored.assign(a.switches.size(), false);
    for (const SwitchOdds& o : a.switches)
        (switch_undecided(o) ? a.switch_timed : a.switch_evidence).push_back(o);
    if (input.image) {
        const PointerAt pointer_at = [image = input.image](std::uint64_t address) { return image->pointer_at(address); };
        a.calls = indirect_call_odds(a.cfg, pointer_at, r.stream, r.image, r.candidates, &a.loops);
    }
}

// An edge's share of its measured block as an anchor, unless register
// progress measured the edge's class already (a nested loop's exit is its
// outer loop's count: the odds' "never left in 740 snapshots" put it at 0,
// and branchy's outer loop fell from 15,976 to 0 with it).
bool anchor_edge(Analysis& a, std::uint32_t edge, double frequency) {
    const std::uint32_t cls = a.classes.edge_class[edge];
    if (cls < a.estimate.classes.size() && a.estimate.classes[cls].source == EstimateSource::kRegisterProgress &&
        a.estimate.classes[cls].confidence == Confidence::kMeasured)
        return false;
    a.options.anchors.push_back({edge, frequency, true});
    return true;
}

// The frequencies block b's count may have: its bounds where branches'
// anchors gave them (derived_bounds), else its measured point.
std::pair<double, double> anchored_bounds(const Analysis& a, const ClassBounds& bounds, std::uint32_t b) {
    const auto it = bounds.find(a.classes.block_class[b]);
    if (it != bounds.end()) return it->second;
    return {a.estimate.block_frequency[b], a.estimate.block_frequency[b]};
}

// Each edge's anchor at the share of all its snapshots, and its bounds at
// the ends of the share's interval times the block's own bounds (a chain
// of anchored branches widens down the chain).
bool anchor_branch(Analysis& a, const ClassBounds& bounds, const BranchOdds& o) {
    const std::uint32_t rarer = std::min(o.taken, o.total - o.taken);
    if (a.estimate.block_confidence[o.block] != Confidence::kMeasured ||
        !(rarer >= kMinRarer || (rarer == 0 && o.total >= kMinNever)))
        return false;
    const double f = a.estimate.block_frequency[o.block];
    const auto [f_low, f_high] = anchored_bounds(a, bounds, o.block);
    const double p = static_cast<double>(o.taken) / static_cast<double>(o.total);
    if (anchor_edge(a, o.taken_edge, p * f))
        a.anchor_bounds[a.classes.edge_class[o.taken_edge]] = {o.share_low * f_low, o.share_high * f_high};
    if (anchor_edge(a, o.fall_edge, (1 - p) * f))
        a.anchor_bounds[a.classes.edge_class[o.fall_edge]] = {(1 - o.share_high) * f_low, (1 - o.share_low) * f_high};
    return true;
}

// A switch's cases split its measured block by their snapshots' shares
// once kMinNever snapshots decided it (each case's share then within a few
// points; a case none of them chose ran below about 1% of the block).
bool anchor_switch(Analysis& a, const SwitchOdds& o) {
    if (a.estimate.block_confidence[o.block] != Confidence::kMeasured || o.total < kMinNever) return false;
    const double f = a.estimate.block_frequency[o.block];
    for (std::size_t j = 0; j < o.edges.size(); ++j)
        anchor_edge(a, o.edges[j], f * static_cast<double>(o.counts[j]) / static_cast<double>(o.total));
    return true;
}

// Anchors the branches and switches whose block is now measured (a branch
// anchored in one round can make the block below it measured for the
// next: chain's else-if under its if). Whether any was added.
bool anchor_branches(Analysis& a) {
    bool added = false;
    const auto bounds = derived_bounds(a);
    for (std::size_t i = 0; i < a.odds.size(); ++i)
        if (!a.odds_anchored[i] && anchor_branch(a, bounds, a.odds[i])) added = a.odds_anchored[i] = true;
    for (std::size_t i = 0; i < a.switches.size(); ++i)
        if (!a.switch_anchored[i] && !switch_undecided(a.switches[i]) && anchor_switch(a, a.switches[i]))
            added = a.switch_anchored[i] = true;
    return added;
}

// A conditional jump's report (its block's last instruction).
CalcBranch branch_report(const Analysis& a, const BranchOdds& o) {
    CalcBranch r;
    r.jump = a.cfg.instructions[a.cfg.blocks[o.block].first + a.cfg.blocks[o.block].count - 1].address;
    r.taken = o.taken;
    r.snapshots = o.total;
    r.median_of_positions = o.median_of_positions;
    return r;
}

void report_branches(Analysis& a) {
    for (std::size_t i = 0; i < a.odds.size(); ++i) {
        CalcBranch r = branch_report(a, a.odds[i]);
        r.anchored = a.odds_anchored[i];
        a.branch_reports.push_back(r);
    }
    for (const BranchOdds& o : a.timed_odds) a.timed_branch_reports.push_back(branch_report(a, o));
    for (std::size_t i = 0; i < a.switches.size(); ++i) {
        const auto& o = a.switches[i];
        CalcSwitch r;
        r.jump = a.cfg.instructions[a.cfg.blocks[o.block].first + a.cfg.blocks[o.block].count - 1].address;
        for (std::size_t j = 0; j < o.edges.size(); ++j) {
            const auto& to = a.cfg.blocks[a.cfg.edges[o.edges[j]].to];
            r.cases.push_back({a.cfg.instructions[to.first].address, o.counts[j]});
        }
        r.snapshots = o.total;
        r.anchored = a.switch_anchored[i];
        if (const char* why = switch_undecided(o)) r.undecided = why;
        a.switch_reports.push_back(r);
    }
}

CalcBlock block_report(const Analysis& a, std::uint32_t b, double period_cycles) {
    const auto& blk = a.cfg.blocks[b];
    const std::uint32_t cls = a.classes.block_class[b];
    CalcBlock cb;
    cb.index = b;
    cb.address = a.cfg.instructions[blk.first].address;
    cb.first = blk.first;
    cb.count = blk.count;
    cb.frequency_class = cls;
    cb.confidence = a.estimate.block_confidence[b];
    cb.source = a.estimate.block_source[b];
    cb.steady_state = a.timing[b].steady_state;
    cb.executions = a.estimate.block_frequency[b] * period_cycles;
    cb.ranged = a.ranges[cls].ranged;
    cb.executions_min = cb.ranged ? a.ranges[cls].min * period_cycles : cb.executions;
    cb.executions_max = cb.ranged ? a.ranges[cls].max * period_cycles : cb.executions;
    if (cb.ranged) cb.point_reason = range_point_reason(a.ranges[cls].point);
    cb.best_cycles = a.timing[b].cycles;
    cb.best_cpi = a.timing[b].cycles / blk.count;
    for (std::uint32_t i = 0; i < blk.count; ++i) cb.samples += a.samples[blk.first + i];
    const double f = a.estimate.block_frequency[b];
    if (f > 0) cb.actual_cpi = static_cast<double>(cb.samples) / f / blk.count;
    return cb;
}

CalcInstruction instruction_report(const Analysis& a, const CalcBlock& cb, std::uint32_t i) {
    const std::uint32_t k = cb.first + i;
    const auto& d = a.cfg.instructions[k];
    const double f = a.estimate.block_frequency[cb.index];
    CalcInstruction ci;
    ci.address = d.address;
    ci.text = d.text();
    ci.samples = a.samples[k];
    ci.best_cycles = a.timing[cb.index].m[i];
    ci.best_known = a.timing[cb.index].known[i];
    ci.executions = cb.executions;
    ci.executions_min = cb.executions_min;
    ci.executions_max = cb.executions_max;
    if (f > 0) ci.cpi = static_cast<double>(a.samples[k]) / f;
    ci.confidence = cb.confidence;
    const auto& st = a.culprits.instructions[k];
    ci.static_cycles = st.static_cycles;
    ci.dynamic_cycles = st.dynamic_cycles;
    for (const auto& c : st.culprits) {
        CalcCulprit cc{c.cause, c.cycles_min, c.cycles_max, std::nullopt};
        if (c.instruction != kNoInstruction) cc.instruction = a.cfg.instructions[c.instruction].address;
        ci.culprits.push_back(cc);
    }
    return ci;
}

// "esi = 0x2000, edi = 0x10": the constants a guard was evaluated at.
std::string arguments_text(std::span<const ArgumentValue> arguments) {
    std::string out;
    for (const ArgumentValue& v : arguments)
        out += (out.empty() ? "" : ", ") + std::string(register_name(v.gp, 8)) + " = " + hex(v.value);
    return out;
}

// Issue 36: the entry branch's way its callers' constants rule out
// (entry_arguments.h), unless samples fell on it: then the evidence
// conflicts (code entered some other way, or a constant this cannot see
// change), the samples stand and the procedure says so.
void rule_out_entry_way(Analysis& a, const ProcedureInput& input) {
    if (!input.entry || input.entry->lower_bound) return;
    const auto edge = ruled_out_entry_edge(a.cfg, input.entry->arguments);
    if (!edge) return;
    const std::uint32_t to = a.cfg.edges[*edge].to;
    const std::uint64_t at = to < a.cfg.blocks.size() ? a.cfg.instructions[a.cfg.blocks[to].first].address : 0;
    std::uint64_t seen = 0;
    if (to < a.cfg.blocks.size())
        for (std::uint32_t i = 0; i < a.cfg.blocks[to].count; ++i) seen += a.samples[a.cfg.blocks[to].first + i];
    const std::string why = "every caller passes " + arguments_text(input.entry->arguments) +
                            ": its entry branch never goes to " + hex(at);
    if (seen > 0) {
        a.entry_conflict = input.name + ": " + why + ", yet " + std::to_string(seen) +
                           " samples fell there: the samples stand";
        return;
    }
    a.ruled_out = edge;
    a.entry_guard = why;
}

// Whether indirect call d goes through a slot the loader fills with
// another image's symbol (`call qword ptr [rip + got]`).
bool imported_call(const ProcedureInput& input, const DecodedInstruction& d) {
    return input.image && d.loads && d.memory.index == 0 && d.memory.disp > 0 &&
           d.operands.find("rip") != std::string::npos &&
           input.image->imported_slot(static_cast<std::uint64_t>(d.memory.disp));
}

// Its calls at their blocks' counts: what its callees' entries take from it.
std::vector<CalcCallSite> call_sites(const Analysis& a, const ProcedureInput& input, double period_cycles) {
    const std::vector<bool> trip_measured =
        trip_measured_blocks(a.cfg, a.loops, a.trips, a.loop_anchor, a.classes, a.estimate);
    std::vector<CalcCallSite> out;
    for (std::uint32_t b = 0; b < a.cfg.blocks.size(); ++b)
        for (std::uint32_t k = a.cfg.blocks[b].first; k < a.cfg.blocks[b].first + a.cfg.blocks[b].count; ++k) {
            const DecodedInstruction& d = a.cfg.instructions[k];
            if (!is_call(d.flow)) continue;
            out.push_back({d.address, d.flow == FlowKind::kCall ? d.target : 0,
                           a.estimate.block_frequency[b] * period_cycles,
                           a.estimate.block_confidence[b] == Confidence::kMeasured || trip_measured[b], {}, false});
            if (d.flow == FlowKind::kCall) out.back().arguments = call_arguments(a.cfg, k);
            else out.back().imported = imported_call(input, d);
            for (const CallOdds& o : a.calls)
                if (o.call == d.address) {
                    out.back().targets_seen = o.targets;
                    out.back().decided = call_odds_decide(o);
                }
        }
    return out;
}

CalcProcedure procedure_report(const Analysis& a, const ProcedureInput& input, double period_cycles) {
    CalcProcedure proc;
    proc.call_sites = call_sites(a, input, period_cycles);
    proc.entry_from_callers = input.entry.has_value();
    proc.entry_guard = a.entry_guard;
    if (a.best_case_scale > 0) {
        proc.best_case_scale = a.best_case_scale;
        proc.best_case_excess = a.best_case_excess;
    }
    proc.entry_conflict = a.entry_conflict;
    proc.name = input.name;
    proc.start = input.start;
    proc.end = input.end;
    proc.frequency_classes = a.classes.count;
    proc.missing_edges = a.cfg.missing_edges;
    proc.tail_jumps = std::any_of(a.cfg.edges.begin(), a.cfg.edges.end(),
                                  [](const CfgEdge& e) { return e.kind == EdgeKind::kTailJump; });
    proc.unresolved_jumps = a.cfg.unresolved_jumps;
    proc.jump_tables = static_cast<std::uint32_t>(a.cfg.jump_tables.size());
    proc.invocations = a.estimate.invocations * period_cycles;
    proc.stalls = a.culprits.summary;
    proc.loops = a.loop_reports;
    proc.branches = a.branch_reports;
    proc.timed_branches = a.timed_branch_reports;
    proc.switches = a.switch_reports;
    double weighted_best = 0, weighted_insns = 0, weighted_samples = 0;
    for (std::uint32_t b = 0; b < a.cfg.blocks.size(); ++b) {
        CalcBlock cb = block_report(a, b, period_cycles);
        const double f = a.estimate.block_frequency[b];
        weighted_best += f * a.timing[b].cycles;
        weighted_insns += f * cb.count;
        weighted_samples += static_cast<double>(cb.samples);
        proc.samples += cb.samples;
        if (cb.ranged) proc.ranged_samples += cb.samples;
        if (cb.confidence == Confidence::kMeasured) proc.anchored_samples += cb.samples;
        if (!input.details) continue;
        for (std::uint32_t i = 0; i < cb.count; ++i) proc.instructions.push_back(instruction_report(a, cb, i));
        proc.blocks.push_back(cb);
    }
    if (a.estimate.invocations > 0) proc.best_cycles_per_call = weighted_best / a.estimate.invocations;
    proc.entry_from_region = !input.region.empty() && !input.region_loop;
    if (weighted_insns > 0) {
        proc.best_cpi = weighted_best / weighted_insns;
        proc.actual_cpi = weighted_samples / weighted_insns;
    }
    for (std::uint32_t e = 0; input.details && e < a.cfg.edges.size(); ++e)
        proc.edges.push_back({a.cfg.edges[e].from, a.cfg.edges[e].to, a.cfg.edges[e].kind, a.classes.edge_class[e],
                              a.estimate.edge_frequency[e] * period_cycles});
    return proc;
}

}  // namespace

Result<CalcProcedure> analyze_procedure(const ProcedureInput& input, const MachineModel& model, double period_cycles,
                                        const EstimatorOptions& options) {
    Analysis a;
    ECPI_ASSIGN_OR_RETURN(a.cfg, procedure_cfg(input));
    a.classes = frequency_classes(a.cfg);
    a.timing = model.time_blocks(a.cfg);
    a.samples = per_instruction(a.cfg, input.samples);
    a.options = estimator_options(input, a, model, period_cycles, options);
    rule_out_entry_way(a, input);
    // Loops, anchors and ranges only matter where there are samples (most
    // procedures of `calc --all --unsampled` have none).
    const bool sampled = std::any_of(a.samples.begin(), a.samples.end(), [](std::uint64_t s) { return s > 0; });
    if (sampled) {
        decided_table_targets(a, input);
        a.loops = find_loops(
            a.cfg,
            [&input](std::uint64_t target) {
                const CalleeCode* c = known_callee(input, target);
                return c ? c->writes : kAllGp;
            },
            [&a](std::uint64_t call) {
                auto it = a.table_targets.find(call);
                return it == a.table_targets.end() ? std::vector<std::uint64_t>{} : it->second;
            });
        measure_loops(a, input, period_cycles);
        estimate_load_chains(a, input, period_cycles);
        describe_loop_calls(a, input);
        count_loop_entries(a, input);
        measure_trips(a, input);
        measure_entry_trips(a, input);
        measure_bisection_trips(a, input);
        evaluate_branches(a, input);
    }
    estimate_with_ranges(a, input, model, period_cycles, sampled);
    if (sampled && recount_loops_by_trips(a, input, period_cycles))
        estimate_with_ranges(a, input, model, period_cycles, sampled);
    if (sampled && anchor_nested_loops(a, input, period_cycles))
        estimate_with_ranges(a, input, model, period_cycles, sampled);
    if (sampled && anchor_block_counters(a, input, period_cycles))
        estimate_with_ranges(a, input, model, period_cycles, sampled);
    constexpr int kAnchorRounds = 4;
    for (int round = 0; sampled && round < kAnchorRounds && anchor_branches(a); ++round)
        estimate_with_ranges(a, input, model, period_cycles, sampled);
    // Last: the anchors above read the flow's counts as they came.
    if (sampled && bound_applies(model) && bound_by_best_case(a, input.clock_margin))
        find_culprits(a, input, model, period_cycles);
    if (input.widen_ranges_by_clock) widen_by_clock_margin(a.ranges, a.estimate, input.clock_margin);
    report_branches(a);
    return procedure_report(a, input, period_cycles);
}

}  // namespace ecpi::analyze
