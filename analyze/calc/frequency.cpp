// Frequency estimation, local propagation and confidence (DCPI 6.1.3 -
// 6.1.5). See frequency.h.
#include "ecpi/analyze/calc/frequency.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

namespace ecpi::analyze {

const char* confidence_name(Confidence c) {
    switch (c) {
        case Confidence::kLow: return "low";
        case Confidence::kMedium: return "medium";
        case Confidence::kHigh: return "high";
        case Confidence::kMeasured: return "measured";
    }
    return "?";
}

const char* estimate_source_name(EstimateSource s) {
    switch (s) {
        case EstimateSource::kIssuePoints: return "issue-points";
        case EstimateSource::kSampleTotal: return "sample-total";
        case EstimateSource::kInstructionCounts: return "instruction-counts";
        case EstimateSource::kPropagated: return "propagated";
        case EstimateSource::kPooled: return "pooled";
        case EstimateSource::kRegisterProgress: return "register-progress";
        case EstimateSource::kCallRegion: return "call-region";
        case EstimateSource::kLoadChain: return "load-chain";
        case EstimateSource::kNone: return "none";
    }
    return "?";
}

namespace {

// DCPI 6.1.5: confidence from the issue points used, their spread, and the
// samples behind the estimate.
Confidence rate(std::uint32_t used, double spread, double samples) {
    if (used >= 3 && spread <= 1.3 && samples >= 100) return Confidence::kHigh;
    if (used >= 2 && spread <= 1.35 && samples >= 400) return Confidence::kHigh;
    // A cluster whose ratios spread wider than 1.3 is not medium: on the VMs
    // such estimates were more than 15% off 97% of the time.
    if (used >= 2 && spread <= 1.3 && samples >= 30) return Confidence::kMedium;
    // One issue point cannot tell a stalled instruction from an unstalled one: low.
    (void)0;
    return Confidence::kLow;
}

// An issue point's window of +-attribution_radius instructions, extended
// back to the producer of its critical operand (DCPI's span).
std::pair<std::uint32_t, std::uint32_t> radius_window(const BlockTiming& t, std::uint32_t i, std::uint32_t n,
                                                      const EstimatorOptions& opt) {
    std::uint32_t lo = i >= opt.attribution_radius ? i - opt.attribution_radius : 0;
    return {std::min(lo, t.span_start[i]), std::min(n - 1, i + opt.attribution_radius)};
}

struct ShortBlockWindows {
    bool whole = false;          // the block spreads its samples: windows are the whole block
    std::vector<bool> stalled;   // left out of the whole-block window: a dynamic stall
};

// Some cores (Zen 5, docs/MACHINE_MODEL.md) spread a short loop's samples
// over its body regardless of where the model puts its issue points, leaving
// some issue points with no samples at all; there only the block as a whole
// adds up. Two things keep that from hiding stalls:
// - A block is taken whole only on evidence of such spreading: an issue
//   point whose +-radius window holds less than smear_low_fraction of what
//   the block's ratio predicts for it (and the prediction is at least
//   smear_min_samples). A block whose windows all agree with the stall model
//   keeps them (a store loop whose stall lands after the store, say). Half,
//   not a quarter (issue 36, 2026-11-29): on a Zen 5 VM the smallest
//   windows set interp's dispatch at 0.50x callgrind's count and jsonq's
//   tokenizer entry at 0.33x (0.98x and 0.53x at half); over the ten
//   workloads of two recordings the samples' mean |ln(calc / callgrind)|
//   fell 0.447 -> 0.324 and 0.420 -> 0.336 (docs/ACCURACY.md).
// - Spreading moves at most about the block's own best-case cycles per
//   execution, so an instruction whose samples, at the ratio of the rest of
//   the block, stand for more than smear_limit_blocks times those cycles
//   (and at least smear_limit_cycles) held a stall (a load that misses every
//   time): it is left out of the whole-block window, as DCPI leaves out an
//   issue point with a large ratio (6.1.3). Largest first, while that holds.
ShortBlockWindows short_block_windows(const BlockTiming& t, bool self_loop, std::span<const std::uint64_t> s,
                                      const EstimatorOptions& opt) {
    ShortBlockWindows out;
    const auto n = static_cast<std::uint32_t>(s.size());
    out.stalled.assign(n, false);
    double rest_s = 0, rest_m = 0;
    std::vector<std::uint32_t> order;
    for (std::uint32_t k = 0; k < n; ++k)
        if (t.known[k]) {
            rest_s += static_cast<double>(s[k]);
            rest_m += t.m[k];
            order.push_back(k);
        }
    const double block_m = rest_m;
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return s[a] > s[b]; });
    const double limit = std::max(opt.smear_limit_blocks * block_m, opt.smear_limit_cycles);
    for (std::uint32_t k : order) {
        const double sk = static_cast<double>(s[k]);
        const double others_s = rest_s - sk, others_m = rest_m - t.m[k];
        // Too few samples left on the rest to judge a stall against (chase's
        // walk_until: after the missing load, its xor with 132 samples
        // against 2 went too, and the 2 left could not give F: the class
        // fell back to its whole ratio, 32x high).
        if (others_s < opt.smear_min_samples || others_m <= 0) break;
        // At the rest's ratio, taken at its upper bound (two standard
        // deviations of a sample count): with few samples on the rest a
        // block that merely retires its iteration on one instruction looked
        // stalled (saxpy's store, 229 samples against 14 on the rest, once
        // in six test runs; its loop then came out 16x low).
        const double others_high = others_s + 2 * std::sqrt(others_s);
        if (sk / (others_high / others_m) <= limit) break;
        out.stalled[k] = true;
        rest_s = others_s;
        rest_m = others_m;
    }
    if (rest_m <= 0) return out;
    // A loop of one block in its steady state overlaps each iteration with
    // the next: its samples spread over the body on every such core,
    // evidence or not (Zen 5: poly's and sum's loops put no sample on issue
    // points the model rightly gives a cycle, and their whole-block ratio is
    // within 3% of callgrind's count). Dynamic stalls are still left out
    // above. Not a block of a longer loop: how the model splits a loop's
    // cycles between its blocks is the least certain part of its timing.
    if (t.steady_state && self_loop) {
        out.whole = true;
        return out;
    }
    const double ratio = rest_s / rest_m;
    for (std::uint32_t i = 0; i < n && !out.whole; ++i) {
        if (!t.known[i] || t.m[i] <= 0) continue;
        auto [lo, hi] = radius_window(t, i, n, opt);
        double ws = 0, wm = 0;
        for (std::uint32_t k = lo; k <= hi; ++k)
            if (t.known[k] && !out.stalled[k]) {
                ws += static_cast<double>(s[k]);
                wm += t.m[k];
            }
        const double expected = ratio * wm;
        if (expected >= opt.smear_min_samples && ws < opt.smear_low_fraction * expected) out.whole = true;
    }
    return out;
}

bool loops_on_itself(const Cfg& cfg, std::uint32_t b) {
    for (auto e : cfg.blocks[b].out_edges)
        if (cfg.edges[e].to == b) return true;
    return false;
}

// An issue point of a class: the ratio S/M over its window (DCPI 6.1.3).
struct IssuePoint {
    double value;   // window ratio
    double m;       // M_i of the issue point itself
    std::uint32_t block, lo, hi;  // window [lo, hi] in the block
};

// What estimate_class reads, with the windows of the class's short blocks,
// worked out once per block.
class ClassSamples {
public:
    ClassSamples(const Cfg& cfg, const std::vector<BlockTiming>& timing, std::span<const std::uint64_t> samples,
                 const EstimatorOptions& opt)
        : cfg(cfg), timing(timing), samples(samples), opt(opt) {}

    double at(std::uint32_t b, std::uint32_t i) const {
        return static_cast<double>(samples[cfg.blocks[b].first + i]);
    }

    // Short blocks (models with whole_block_below) use their whole body as
    // the window where they spread samples, less any dynamic stall (see
    // short_block_windows); instructions with unknown M never count.
    const ShortBlockWindows* short_block(std::uint32_t b) {
        // Longer blocks too when they are a loop of one block in its steady
        // state (short_block_windows takes those whole): main's 50-instruction
        // initialisation loop in loops.c, 10 modelled cycles, put its samples
        // on instructions the model gives no cycle to, and its +-1 windows
        // came out 12x low in one test run of six.
        if (opt.whole_block_below == 0) return nullptr;
        if (cfg.blocks[b].count > opt.whole_block_below && !(timing[b].steady_state && loops_on_itself(cfg, b)))
            return nullptr;
        auto it = short_blocks_.find(b);
        if (it == short_blocks_.end())
            it = short_blocks_
                     .emplace(b, short_block_windows(timing[b], loops_on_itself(cfg, b), samples.subspan(cfg.blocks[b].first, cfg.blocks[b].count), opt))
                     .first;
        return &it->second;
    }

    // Whether instruction k of block b counts in a window.
    bool counts(std::uint32_t b, std::uint32_t k) {
        if (!timing[b].known[k]) return false;
        const ShortBlockWindows* sb = short_block(b);
        return !sb || !sb->whole || !sb->stalled[k];
    }

    const Cfg& cfg;
    const std::vector<BlockTiming>& timing;
    const std::span<const std::uint64_t> samples;
    const EstimatorOptions& opt;

private:
    std::map<std::uint32_t, ShortBlockWindows> short_blocks_;
};

// What a class's instructions add up to, and its issue points.
struct ClassTally {
    std::vector<IssuePoint> points;
    double sum_s = 0, sum_m = 0;
    double max_s = 0;
    double after_call_s = 0;  // samples on untimed instructions after a call in their block
    double entry_s = 0;       // samples on the procedure's untimed first instruction (the call's cost)
};

// Instruction i of block b as an issue point: its window's ratio.
IssuePoint issue_point(ClassSamples& in, std::uint32_t b, std::uint32_t i) {
    const BlockTiming& t = in.timing[b];
    const std::uint32_t n = in.cfg.blocks[b].count;
    auto [lo, hi] = radius_window(t, i, n, in.opt);
    if (const ShortBlockWindows* sb = in.short_block(b); sb && sb->whole) {
        lo = 0;  // a short block that spreads its samples: they may land anywhere in it
        hi = n - 1;
    }
    double ws = 0, wm = 0;
    for (std::uint32_t k = lo; k <= hi; ++k)
        if (in.counts(b, k)) {
            ws += in.at(b, k);
            wm += t.m[k];
        }
    return {ws / wm, t.m[i], b, lo, hi};
}

// Sums the class's samples and cycles, counting its samples and issue points into `est`.
ClassTally tally_class(std::span<const std::pair<std::uint32_t, std::uint32_t>> members, ClassSamples& in,
                       std::span<const std::uint32_t> first_call, ClassEstimate& est) {
    ClassTally tally;
    for (auto [b, i] : members) {
        const BlockTiming& t = in.timing[b];
        double s = in.at(b, i);
        est.samples += in.samples[in.cfg.blocks[b].first + i];
        tally.max_s = std::max(tally.max_s, s);
        if (!t.known[i] && first_call[b] < i) tally.after_call_s += s;
        if (!t.known[i] && in.cfg.blocks[b].first + i == 0) tally.entry_s += s;
        if (!t.known[i]) continue;
        tally.sum_s += s;
        tally.sum_m += t.m[i];
        if (t.m[i] <= 0) continue;
        ++est.issue_points;
        tally.points.push_back(issue_point(in, b, i));
    }
    return tally;
}

// The class's samples over its blocks' best-case cycles, if any (each at
// least the model's cycles for its calls where most samples sit after calls).
void estimate_from_cycles(ClassEstimate& est, std::span<const std::pair<std::uint32_t, std::uint32_t>> members,
                          const std::vector<BlockTiming>& timing, bool after_calls, double entry_s) {
    double cycles = 0;
    std::int64_t last = -1;  // members come block by block
    for (auto [b, i] : members)
        if (static_cast<std::int64_t>(b) != last) {
            last = b;
            cycles += after_calls ? std::max(timing[b].cycles, timing[b].call_cycles) : timing[b].cycles;
        }
    if (cycles <= 0) return;
    // A leaf's first instruction holds the call's cost, which its
    // cycles leave out (machine_model.cpp): calls.c's square and twice,
    // with no other timed instruction, came out 4x and 12x.
    const double counted = static_cast<double>(est.samples) - (after_calls ? 0 : entry_s);
    est.frequency = counted / cycles;
    est.known = true;
    est.source = EstimateSource::kSampleTotal;
    est.confidence = Confidence::kLow;
}

// The average over the class, sum S / sum M, with low confidence.
void average_over_class(ClassEstimate& est, const ClassTally& tally) {
    est.frequency = tally.sum_s / tally.sum_m;
    est.known = true;
    est.source = EstimateSource::kSampleTotal;
    est.issue_points_used = est.issue_points;
    est.confidence = Confidence::kLow;
}

// S and M over the union of the cluster's windows (no instruction twice).
std::pair<double, double> cluster_sums(ClassSamples& in, std::span<const IssuePoint> cluster) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> window;
    for (const auto& p : cluster)
        for (std::uint32_t x = p.lo; x <= p.hi; ++x)
            if (in.counts(p.block, x)) window.push_back({p.block, x});
    std::sort(window.begin(), window.end());
    window.erase(std::unique(window.begin(), window.end()), window.end());
    double cs = 0, cm = 0;
    for (auto [blk, x] : window) {
        cs += in.at(blk, x);
        cm += in.timing[blk].m[x];
    }
    return {cs, cm};
}

// Issue points whose windows overlap share samples (a whole short block
// shares all of them): the evidence is as many windows as are pairwise
// disjoint, not as many issue points as agree.
std::uint32_t independent_windows(std::span<const IssuePoint> cluster) {
    std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>> windows;  // (block, hi, lo)
    for (const auto& p : cluster) windows.emplace_back(p.block, p.hi, p.lo);
    std::sort(windows.begin(), windows.end());
    std::uint32_t independent = 0;
    std::int64_t last_block = -1, last_hi = -1;
    for (auto [blk, hi, lo] : windows) {  // greedy by end: the most disjoint intervals
        if (static_cast<std::int64_t>(blk) == last_block && static_cast<std::int64_t>(lo) <= last_hi) continue;
        ++independent;
        last_block = blk;
        last_hi = hi;
    }
    return independent;
}

// The issue points whose M_i the core can be held to: those of blocks the
// model timed in a loop's steady state. A block inside a loop that the model
// timed back to back with itself, or after one predecessor, overlaps the
// blocks around it on an out-of-order core, so its M_i are no best case the
// core respects and an unstalled issue point's ratio can fall below F:
// bench/accuracy/branch_chain.c's loop of four blocks ran its common path in
// 2.0-2.8 cycles an iteration against the 3.0 its blocks' best cases add up
// to, and branchy's classify, the same code, came out 0.72x the truth from
// agreeing issue points rated high (issue 36). A block outside any loop
// (DCPI's setting) is timed so too, overlapped with itself, and the core
// does not hold to that either: jsonq's function entries and an epilogue,
// pushes and pops after or before a call, came out 1.20x, 1.36x and 1.46x
// the truth from agreeing issue points rated high, sed's two entries rated
// medium 0.59x and 1.04x (glibc's _int_free, rated medium on the Intel VM,
// had been within 10% for 87% of its samples). Agreement among such issue
// points is no evidence that F is right, only that they are alike: they
// rate the estimate low, which gives it a range (ranges.h).
std::vector<IssuePoint> steady_points(std::span<const IssuePoint> cluster, const std::vector<BlockTiming>& timing) {
    std::vector<IssuePoint> steady;
    for (const auto& p : cluster)
        if (timing[p.block].steady_state) steady.push_back(p);
    return steady;
}

// On an out-of-order core the model's M_i are least certain one by one. A
// cluster holding most of the class's static cycles outvotes the rest (the
// rest stalled); a minority cluster must agree with the class's whole ratio
// sum S / sum M to be trusted.
void check_agreement(ClassEstimate& est, const ClassTally& tally, double cluster_m, double total_m) {
    double agreement = est.frequency / (tally.sum_s / tally.sum_m);
    if (cluster_m < 0.5 * total_m) {
        if (agreement < 0.75 || agreement > 1.0 / 0.75) est.confidence = Confidence::kLow;
        else if (agreement < 0.9 || agreement > 1.0 / 0.9) est.confidence = std::min(est.confidence, Confidence::kMedium);
    }
}

// DCPI 6.1.3: F from the first cluster of issue points with similar ratios
// that holds enough of the class; false where no cluster is acceptable.
bool estimate_from_clusters(ClassEstimate& est, ClassTally& tally, ClassSamples& in) {
    const EstimatorOptions& opt = in.opt;
    auto& points = tally.points;
    std::sort(points.begin(), points.end(), [](const IssuePoint& a, const IssuePoint& b) { return a.value < b.value; });
    const std::size_t n = points.size();
    const std::size_t min_members =
        std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(opt.min_cluster_fraction * static_cast<double>(n))));
    double total_m = 0;
    for (const auto& p : points) total_m += p.m;
    for (std::size_t a = 0; a < n; ++a) {
        std::size_t b = a;
        while (b + 1 < n && points[b + 1].value <= opt.cluster_width * points[a].value) ++b;
        std::size_t members_in = b - a + 1;
        double cluster_m = 0;
        for (std::size_t k = a; k <= b; ++k) cluster_m += points[k].m;
        // Anomalous S_i or M_i (DCPI 6.1.3): a cluster must hold a minimum
        // fraction of the issue points, both by count and by static cycles,
        // so one issue point the model overrates cannot set F alone.
        if (members_in < min_members) continue;
        if (cluster_m < opt.min_cluster_fraction * total_m) continue;
        const std::span<const IssuePoint> cluster(points.data() + a, members_in);
        auto [cs, cm] = cluster_sums(in, cluster);
        if (cs < static_cast<double>(opt.min_cluster_samples) || cm <= 0) continue;
        double f = cs / cm;
        if (tally.max_s / f > opt.max_stall_cycles) continue;  // would imply an unreasonable stall elsewhere
        est.frequency = f;
        est.known = true;
        est.source = EstimateSource::kIssuePoints;
        est.issue_points_used = static_cast<std::uint32_t>(members_in);
        est.spread = points[a].value > 0 ? points[b].value / points[a].value : 1;
        est.confidence = rate(independent_windows(steady_points(cluster, in.timing)), est.spread, cs);
        check_agreement(est, tally, cluster_m, total_m);
        return true;
    }
    return false;
}

// DCPI 6.1.3 for one class.
//
// x86 twist: where exactly a sample lands near a stall varies by an
// instruction or so (interrupt skid, retirement in groups), so an issue
// point's ratio is taken over a window of +-attribution_radius instructions
// (known M only) in its block, extended back to the producer of its critical
// operand (DCPI's span). Misattributed cycles then stay inside the window,
// while a dynamic stall still inflates the ratios of the windows around it.
ClassEstimate estimate_class(std::span<const std::pair<std::uint32_t, std::uint32_t>> members,  // (block, index in block), by block
                             const Cfg& cfg, const std::vector<BlockTiming>& timing,
                             std::span<const std::uint64_t> samples, std::span<const std::uint32_t> first_call,
                             const EstimatorOptions& opt) {
    ClassEstimate est;
    ClassSamples in(cfg, timing, samples, opt);
    ClassTally tally = tally_class(members, in, first_call, est);
    if (est.samples == 0) return est;  // propagation decides (taken as 0 if it cannot tell)
    // Samples on instructions the model cannot time, right after a call,
    // hold the call's and return's cost where it lands in the caller (on Zen
    // 5 a loop around a call of a short leaf puts all its samples there; in
    // other code much of it lands in the callee). Where most of the class's
    // samples sit there, the timed instructions' few samples say little (a
    // loop around one call came out 1000x low from them), so the class's
    // samples go over its blocks' best-case cycles, each at least the
    // model's cycles for its calls (call_return_cycles).
    const bool after_calls = tally.after_call_s >= opt.after_call_share * static_cast<double>(est.samples);
    if (est.issue_points == 0 || tally.sum_m <= 0 || after_calls) {
        // No issue point with a known M (a short block after a call, say).
        estimate_from_cycles(est, members, timing, after_calls, tally.entry_s);
        return est;
    }
    // Few samples, or no acceptable cluster: the average over the class.
    if (est.samples < opt.few_samples || !estimate_from_clusters(est, tally, in)) average_over_class(est, tally);
    return est;
}

// A propagated estimate is less certain than what it came from, except
// where everything it came from was measured: flow equations are exact.
Confidence lower(Confidence c) {
    switch (c) {
        case Confidence::kMeasured: return Confidence::kMeasured;
        case Confidence::kHigh: return Confidence::kMedium;
        default: return Confidence::kLow;
    }
}



// Each class's instructions, (block, index in block), block by block: one
// array for all classes (a vector per class was the most frequent
// allocation of `calc --all`).
class ClassMembers {
public:
    ClassMembers(const Cfg& cfg, const FrequencyClasses& fc) : start_(fc.count + 1, 0) {
        const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
        for (std::uint32_t b = 0; b < nb; ++b) start_[fc.block_class[b] + 1] += cfg.blocks[b].count;
        for (std::uint32_t c = 0; c < fc.count; ++c) start_[c + 1] += start_[c];
        list_.resize(start_[fc.count]);
        std::vector<std::uint32_t> fill(start_.begin(), start_.end() - 1);
        for (std::uint32_t b = 0; b < nb; ++b)
            for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i) list_[fill[fc.block_class[b]]++] = {b, i};
    }
    std::span<const std::pair<std::uint32_t, std::uint32_t>> operator()(std::uint32_t c) const {
        return {list_.data() + start_[c], start_[c + 1] - start_[c]};
    }

private:
    std::vector<std::uint32_t> start_;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> list_;
};

// Each block's first call (index in the block; kNoInstruction: none).
std::vector<std::uint32_t> first_calls(const Cfg& cfg) {
    std::vector<std::uint32_t> first_call(cfg.blocks.size(), kNoInstruction);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b)
        for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i)
            if (is_call(cfg.instructions[cfg.blocks[b].first + i].flow)) {
                first_call[b] = i;
                break;
            }
    return first_call;
}

// Counted instructions: every instruction of the class retires F*P times,
// so the class's instruction samples give F directly.
void use_instruction_counts(ClassEstimate& e, std::span<const std::pair<std::uint32_t, std::uint32_t>> members,
                            const Cfg& cfg, const EstimatorOptions& opt) {
    if (opt.instruction_samples.empty() || opt.instruction_period <= 0 || opt.cycle_period <= 0) return;
    double inst = 0;
    for (auto [b, i] : members) inst += static_cast<double>(opt.instruction_samples[cfg.blocks[b].first + i]);
    const double n = static_cast<double>(members.size());
    if (inst < static_cast<double>(opt.few_samples) || (e.known && e.confidence >= Confidence::kHigh)) return;
    e.frequency = inst / n * opt.instruction_period / opt.cycle_period;
    e.known = true;
    e.source = EstimateSource::kInstructionCounts;
    e.confidence = inst >= 400 ? Confidence::kHigh : Confidence::kMedium;
}

// Samples that crossed a block boundary. A block B whose only predecessor is
// A runs no more often than A (and A no more often than its only successor).
// Where the two classes' own estimates say otherwise by more than
// pool_contradiction, samples have moved across the edge between them: on an
// out-of-order core a wait at the end of A lands on B's first instructions,
// or B's latency on A's tail (`interp`'s dispatch: 0.37x and 3.27x for two
// blocks that run equally often; the binary search's loop block 0.17x).
// Together the two blocks still add up, so both classes take sum S / sum M
// over the two blocks, rated low.
void pool_contradictions(std::vector<ClassEstimate>& classes, const Cfg& cfg, const FrequencyClasses& fc,
                         const std::vector<BlockTiming>& timing, std::span<const std::uint64_t> samples,
                         std::span<const std::uint32_t> first_call, const EstimatorOptions& opt) {
    if (opt.pool_contradiction <= 0) return;
    auto block_samples = [&](std::uint32_t b) {
        double sum = 0;
        for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i) sum += static_cast<double>(samples[cfg.blocks[b].first + i]);
        return sum;
    };
    auto estimated = [&](std::uint32_t c) { return classes[c].known && classes[c].source != EstimateSource::kNone; };
    // a runs at least as often as b
    auto pool = [&](std::uint32_t a, std::uint32_t b) {
        const auto ca = fc.block_class[a], cb = fc.block_class[b];
        // (a block with a call has cycles elsewhere: in the callee, and the
        // call's own, which its class may have been estimated with)
        if (ca == cb || !estimated(ca) || !estimated(cb) || first_call[a] != kNoInstruction ||
            first_call[b] != kNoInstruction)
            return;
        if (classes[cb].frequency <= classes[ca].frequency * opt.pool_contradiction) return;
        const double cycles = timing[a].cycles + timing[b].cycles;
        if (cycles <= 0) return;
        const double f = (block_samples(a) + block_samples(b)) / cycles;
        for (auto c : {ca, cb}) {
            classes[c].frequency = f;
            classes[c].source = EstimateSource::kPooled;
            classes[c].confidence = Confidence::kLow;
        }
    };
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        if (cfg.blocks[b].in_edges.size() == 1) {
            const auto a = cfg.edges[cfg.blocks[b].in_edges[0]].from;
            if (a != kEntryBlock && a != b) pool(a, b);
        }
        if (cfg.blocks[b].out_edges.size() == 1) {
            const auto c = cfg.edges[cfg.blocks[b].out_edges[0]].to;
            if (c != kExitBlock && c != b) pool(c, b);
        }
    }
}

// Counts that replace whatever the samples' placement suggested for their
// class: a call region's (call_regions.h: the class's samples alone hold
// cycles of its callees or callers), rated low, and then measured anchors.
void apply_counts(std::vector<ClassEstimate>& classes, const FrequencyClasses& fc, std::span<const Anchor> counts,
                  EstimateSource source, Confidence confidence) {
    for (const auto& a : counts) {
        const auto& class_of = a.edge ? fc.edge_class : fc.block_class;
        if (a.index >= class_of.size()) continue;
        auto& e = classes[class_of[a.index]];
        e.frequency = a.frequency;
        e.known = true;
        e.source = source;
        e.confidence = confidence;
    }
}

// The flow equations of the split graph (DCPI 6.1.4): at every node, the
// classes of the in-edges sum to those of the out-edges. The terms live in
// one array (equation q: terms[start[q], start[q + 1])), built in reused
// buffers: per-block vectors were a large share of the allocations of
// `calc --all`.
struct FlowEquations {
    struct Term {
        std::uint32_t cls;
        double coef;
    };
    std::vector<Term> terms;
    std::vector<std::uint32_t> start = {0};
    std::vector<std::uint32_t> by_class_start;  // equations each class appears in
    std::vector<std::uint32_t> by_class_list;

    std::uint32_t size() const { return static_cast<std::uint32_t>(start.size() - 1); }
    std::span<const Term> operator[](std::uint32_t q) const {
        return {terms.data() + start[q], start[q + 1] - start[q]};
    }
    std::span<const std::uint32_t> of_class(std::uint32_t c) const {
        return {by_class_list.data() + by_class_start[c], by_class_start[c + 1] - by_class_start[c]};
    }

    void add(std::span<const std::uint32_t> in, std::span<const std::uint32_t> out_cls) {
        // Combine the terms of each class (a class may appear on both sides).
        scratch_.clear();
        for (auto c : in) scratch_.push_back({c, 1});
        for (auto c : out_cls) scratch_.push_back({c, -1});
        std::sort(scratch_.begin(), scratch_.end(), [](const Term& x, const Term& y) { return x.cls < y.cls; });
        const std::size_t first = terms.size();
        for (const auto& t : scratch_) {
            if (terms.size() > first && terms.back().cls == t.cls) terms.back().coef += t.coef;
            else terms.push_back(t);
        }
        auto zero = std::remove_if(terms.begin() + static_cast<std::ptrdiff_t>(first), terms.end(),
                                   [](const Term& t) { return t.coef == 0; });
        terms.erase(zero, terms.end());
        if (terms.size() > first) start.push_back(static_cast<std::uint32_t>(terms.size()));
    }

    void index(std::uint32_t classes) {
        by_class_start.assign(classes + 1, 0);
        for (const auto& t : terms) ++by_class_start[t.cls + 1];
        for (std::uint32_t c = 0; c < classes; ++c) by_class_start[c + 1] += by_class_start[c];
        by_class_list.resize(terms.size());
        std::vector<std::uint32_t> fill(by_class_start.begin(), by_class_start.end() - 1);
        for (std::uint32_t q = 0; q < size(); ++q)
            for (const auto& t : (*this)[q]) by_class_list[fill[t.cls]++] = q;
    }

private:
    std::vector<Term> scratch_;
};

FlowEquations flow_equations(const Cfg& cfg, const FrequencyClasses& fc) {
    FlowEquations eqs;
    std::vector<std::uint32_t> entry_out, exit_in;
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e) {
        if (cfg.edges[e].from == kEntryBlock) entry_out.push_back(fc.edge_class[e]);
        if (cfg.edges[e].to == kExitBlock) exit_in.push_back(fc.edge_class[e]);
    }
    const std::uint32_t invocation[1] = {fc.invocation_class};
    eqs.add(invocation, entry_out);
    eqs.add(exit_in, invocation);
    std::vector<std::uint32_t> in, outs;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        in.clear();
        outs.clear();
        for (auto e : cfg.blocks[b].in_edges) in.push_back(fc.edge_class[e]);
        for (auto e : cfg.blocks[b].out_edges) outs.push_back(fc.edge_class[e]);
        const std::uint32_t self[1] = {fc.block_class[b]};
        eqs.add(in, self);
        eqs.add(self, outs);
    }
    eqs.index(fc.count);
    return eqs;
}

// Solves every equation with exactly one unknown class, repeatedly; never
// negative.
void solve_known(std::vector<ClassEstimate>& classes, std::vector<bool>& known, const FlowEquations& eqs) {
    std::vector<std::uint32_t> work(eqs.size());
    for (std::uint32_t q = 0; q < eqs.size(); ++q) work[q] = q;
    while (!work.empty()) {
        std::uint32_t q = work.back();
        work.pop_back();
        std::uint32_t unknown = 0, which = 0;
        double coef = 0, sum = 0;
        bool any_known = false;
        Confidence conf = Confidence::kMeasured;
        for (const auto& t : eqs[q]) {
            if (known[t.cls]) {
                sum += t.coef * classes[t.cls].frequency;
                conf = std::min(conf, classes[t.cls].confidence);
                any_known = true;
            } else {
                ++unknown;
                which = t.cls;
                coef = t.coef;
            }
        }
        if (unknown != 1) continue;
        auto& e = classes[which];
        e.frequency = std::max(0.0, -sum / coef);  // no negative estimates
        e.known = true;
        e.source = EstimateSource::kPropagated;
        e.confidence = any_known ? lower(conf) : Confidence::kMedium;
        known[which] = true;
        for (auto k : eqs.of_class(which)) work.push_back(k);
    }
}

// Local propagation (DCPI 6.1.4): confident estimates first; then the weak
// ones join for classes propagation could not reach.
void propagate_flow(std::vector<ClassEstimate>& classes, const Cfg& cfg, const FrequencyClasses& fc) {
    const FlowEquations eqs = flow_equations(cfg, fc);
    std::vector<bool> known(fc.count, false);
    std::vector<ClassEstimate> weak(fc.count);
    for (std::uint32_t c = 0; c < fc.count; ++c) {
        if (!classes[c].known) continue;
        if (classes[c].confidence == Confidence::kLow) {
            weak[c] = classes[c];
            classes[c].known = false;
        } else {
            known[c] = true;
        }
    }
    solve_known(classes, known, eqs);
    bool added = false;
    for (std::uint32_t c = 0; c < fc.count; ++c)
        if (!known[c] && weak[c].known) {
            classes[c] = weak[c];
            known[c] = true;
            added = true;
        }
    if (added) solve_known(classes, known, eqs);
}

FrequencyEstimate per_block_and_edge(std::vector<ClassEstimate> classes, const Cfg& cfg, const FrequencyClasses& fc) {
    FrequencyEstimate out;
    for (auto& e : classes)
        if (!e.known) {
            e.frequency = 0;
            e.known = true;
            e.source = EstimateSource::kNone;
            e.confidence = Confidence::kLow;
        }
    const auto nb = cfg.blocks.size();
    out.block_frequency.resize(nb);
    out.block_confidence.resize(nb);
    out.block_source.resize(nb);
    for (std::uint32_t b = 0; b < nb; ++b) {
        const auto& e = classes[fc.block_class[b]];
        out.block_frequency[b] = e.frequency;
        out.block_confidence[b] = e.confidence;
        out.block_source[b] = e.source;
    }
    out.edge_frequency.resize(cfg.edges.size());
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e) out.edge_frequency[e] = classes[fc.edge_class[e]].frequency;
    out.invocations = classes[fc.invocation_class].frequency;
    out.classes = std::move(classes);
    return out;
}

}  // namespace

FrequencyEstimate estimate_frequencies(const Cfg& cfg, const FrequencyClasses& fc,
                                       const std::vector<BlockTiming>& timing, std::span<const std::uint64_t> samples,
                                       const EstimatorOptions& opt) {
    const ClassMembers members(cfg, fc);
    const std::vector<std::uint32_t> first_call = first_calls(cfg);
    std::vector<ClassEstimate> classes(fc.count);
    for (std::uint32_t c = 0; c < fc.count; ++c) {
        if (members(c).empty()) continue;
        classes[c] = estimate_class(members(c), cfg, timing, samples, first_call, opt);
        use_instruction_counts(classes[c], members(c), cfg, opt);
    }
    pool_contradictions(classes, cfg, fc, timing, samples, first_call, opt);
    apply_counts(classes, fc, opt.load_chains, EstimateSource::kLoadChain, Confidence::kLow);
    apply_counts(classes, fc, opt.regions, EstimateSource::kCallRegion, Confidence::kLow);
    apply_counts(classes, fc, opt.anchors, EstimateSource::kRegisterProgress, Confidence::kMeasured);
    if (fc.from_cycle_equivalence) propagate_flow(classes, cfg, fc);
    FrequencyEstimate out = per_block_and_edge(std::move(classes), cfg, fc);
    out.propagated = fc.from_cycle_equivalence;
    return out;
}

}  // namespace ecpi::analyze
