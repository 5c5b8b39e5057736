// calc's counts as one flow over the CFG. See flow_counts.h.
#include "ecpi/analyze/calc/flow_counts.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ecpi::analyze {

namespace {

bool measured(const FrequencyEstimate& estimate, std::uint32_t cls) {
    return cls < estimate.classes.size() && estimate.classes[cls].source == EstimateSource::kRegisterProgress;
}

bool ruled_out(const FlowCountsInput& in, std::uint32_t e) {
    return std::find(in.ruled_out.begin(), in.ruled_out.end(), e) != in.ruled_out.end();
}

// What a ranged block's samples weigh in the flow. Its point estimate
// explains its S samples only at a CPI the samples could not decide (the
// range spans the counts they allow), so S/E is no count's precision: taken
// as exact, a block whose samples hold another's stall (the interpreter's
// dispatch, 47% of its samples, holding the mispredicted jump through the
// table) held its point and pushed its surplus onto the cheapest neighbours,
// two case blocks 4-6x over the truth (bpf.calc_accuracy's interp: within 3x
// 91.6% -> 79.5% on one profile). The point is read as a log-normal
// estimate whose range is its 95% interval (sigma = ln(max/min) / 4) on top
// of the samples' own Poisson error (1/S): a Poisson cost with S' = 1 /
// (1/S + sigma^2) samples, as steep at the point as that log-likelihood. A
// narrow range keeps nearly all of its samples' weight; a range over orders
// of magnitude keeps almost none, and the flow's other evidence decides.
double range_weight(const BlockEvidence& e) {
    if (!e.ranged || !(e.executions_min > 0) || !(e.executions_max > e.executions_min) || !(e.samples > 0))
        return e.samples;
    const double sigma = std::log(e.executions_max / e.executions_min) / 4;
    return 1 / (1 / e.samples + sigma * sigma);
}

SoftCount block_count(const FlowCountsInput& in, const FrequencyEstimate& estimate,
                      std::span<const ClassRange> ranges, std::uint32_t b) {
    const std::uint32_t cls = in.classes->block_class[b];
    const double p = in.period_cycles;
    const double executions = estimate.block_frequency[b] * p;
    if (measured(estimate, cls)) return measured_count(executions);
    const BasicBlock& blk = in.cfg->blocks[b];
    BlockEvidence e;
    for (std::uint32_t i = 0; i < blk.count; ++i) e.samples += static_cast<double>(in.samples[blk.first + i]);
    e.executions = executions;
    e.ranged = cls < ranges.size() && ranges[cls].ranged;
    e.executions_min = e.ranged ? ranges[cls].min * p : executions;
    e.executions_max = e.ranged ? ranges[cls].max * p : executions;
    e.best_cycles = (*in.timing)[b].cycles;
    e.samples = range_weight(e);
    // Not priced as an alternative (layout's rule for a branch's sides,
    // block_evidence): that lets a ranged block fall to the bottom of its
    // range for free, and a ranged loop body at its worst stall is off by
    // its range's width (bpf.calc_accuracy: mulchain and poly 100% -> 0%
    // within 25%). calc's count stays at its point unless the flow moves it.
    e.alternative = false;
    // Issue 36: a ranged block's floor is what its samples need at its
    // worst stalls (class_ranges), a hard constraint: priced as evidence
    // of width ln(max/min) it weighed nearly nothing, and two unsampled
    // one-cycle blocks on its path (cycles an out-of-order core retires in
    // its neighbours' samples) pulled it to 0 (SQLite's B-tree search: a
    // cell's first byte, 688 samples of a load that misses, 519 executions
    // against callgrind's 3.48 M).
    return e.ranged ? floored(block_evidence(e, p), e.executions_min) : block_evidence(e, p);
}

// A bisection's exit tests (TripShare::exit_tests) with their odds scaled
// to its length: each test leaves in its odds' share times k, one k for
// all, so that at `executions` (per block) the exits add up to the
// entries (the preheader's count). The odds are time-weighted, and the
// last iteration holds more than its share of the snapshots at the
// compares (branchy's `search`: 9.2% of 4,916 left at one, a trip of 10.8
// against the length's 13.1 and callgrind's 13.0); their ratio stands.
struct ScaledExit {
    std::uint32_t block = 0, exit_edge = 0, stay_edge = 0;
    double exit_share = 0;
    double exit_snapshots = 0, stay_snapshots = 0;
};

std::vector<ScaledExit> scaled_exits(const FlowCountsInput& in, const TripShare& t, std::span<const double> executions) {
    std::vector<ScaledExit> out;
    if (!in.loops || t.block >= executions.size()) return out;
    const Cfg& cfg = *in.cfg;
    const Loop* loop = nullptr;
    for (const Loop& l : in.loops->loops)
        if (l.header == t.header) loop = &l;
    if (!loop) return out;
    double exits = 0;
    for (auto b : t.exit_tests) {
        const auto o = std::find_if(in.odds.begin(), in.odds.end(), [b](const BranchOdds& x) { return x.block == b; });
        if (o == in.odds.end() || o->total == 0 || b >= executions.size()) continue;
        const bool taken_leaves = o->taken_edge < cfg.edges.size() &&
                                  (cfg.edges[o->taken_edge].to >= cfg.blocks.size() ||
                                   !loop->contains(cfg.edges[o->taken_edge].to));
        ScaledExit x;
        x.block = b;
        x.exit_edge = taken_leaves ? o->taken_edge : o->fall_edge;
        x.stay_edge = taken_leaves ? o->fall_edge : o->taken_edge;
        x.exit_snapshots = taken_leaves ? o->taken : o->total - o->taken;
        x.stay_snapshots = static_cast<double>(o->total) - x.exit_snapshots;
        x.exit_share = (x.exit_snapshots + 1) / (static_cast<double>(o->total) + 2);
        exits += x.exit_share * executions[b];
        out.push_back(x);
    }
    const double entries = executions[t.block];
    if (!(exits > 0) || !(entries > 0)) return {};
    for (auto& x : out) x.exit_share = std::min(1.0, x.exit_share * entries / exits);
    return out;
}

// A branch's snapshots as samples of its edges, at their shares of
// `executions` (per block: the count the odds split): Laplace's rule of
// succession among the edges some snapshot chose (as layout: one snapshot
// states its direction 2:1). An edge none chose is evidence only that it
// ran less than the others: each execution of it costs what it costs the
// odds' likelihood, n / executions (n the snapshots), as an unsampled
// block's does. A pseudo-count there (one of n + 2) claimed a share no
// snapshot saw: a loop's exit whose path ran unsampled could not take it,
// and restated at the flow's count each round the loop kept the back edge's
// n+1 / n+2 of its count (the demo's share_sixty: 35 of 35 snapshots taken,
// 0.80x its count after 8 rounds, CPI 0.82 -> 1.02).
void add_odds(const FlowCountsInput& in, const FrequencyEstimate& estimate, std::span<const double> executions,
              FlowProblem& problem) {
    const auto soft = [&](std::uint32_t e, const SoftCount& count) {
        if (e < problem.edges.size() && !measured(estimate, in.classes->edge_class[e]) && !ruled_out(in, e))
            problem.edges[e].count = count;
    };
    // One block's edges, by the snapshots that chose each.
    const auto split = [&](std::uint32_t block, std::span<const std::uint32_t> edges,
                           std::span<const double> chose) {
        double total = 0, seen = 0;
        for (double c : chose) {
            total += c;
            seen += c > 0 ? 1 : 0;
        }
        const double count = executions[block];
        for (std::size_t j = 0; j < edges.size(); ++j)
            soft(edges[j], chose[j] > 0 ? poisson_count((chose[j] + 1) / (total + seen) * count, chose[j] + 1)
                                        : unseen_count(total / count));
    };
    for (const BranchOdds& o : in.odds) {
        if (o.total == 0 || o.block >= executions.size() || !(executions[o.block] > 0)) continue;
        const std::uint32_t edges[] = {o.taken_edge, o.fall_edge};
        const double chose[] = {static_cast<double>(o.taken), static_cast<double>(o.total - o.taken)};
        split(o.block, edges, chose);
    }
    for (const SwitchOdds& o : in.switches) {
        if (o.total == 0 || o.block >= executions.size() || !(executions[o.block] > 0)) continue;
        std::vector<double> chose(o.counts.begin(), o.counts.end());
        split(o.block, o.edges, chose);
    }
    // A trip length states the loop's exit at its latch's count over the
    // length as a measured count: register values fix the ratio (to a few
    // in a thousand), where a block's samples over the model's cycles are
    // off by its overlap with the next (bits' outer loop: its samples said
    // 0.2x). The level is the latch's count, which the entries decide
    // where the callers give them (propagated_counts), else the samples.
    for (const TripShare& t : in.trips) {
        if (t.block >= executions.size() || !(executions[t.block] > 0) || !(t.length >= 1)) continue;
        const double count = executions[t.block];
        if (t.from_entry && t.header < problem.blocks.size()) {
            // A bisection: the header's count, whichever back edge it takes,
            // and its exit tests' odds scaled to its length (scaled_exits).
            if (!measured(estimate, in.classes->block_class[t.header]))
                problem.blocks[t.header] = measured_count(count * t.length);
            for (const ScaledExit& x : scaled_exits(in, t, executions)) {
                soft(x.exit_edge, poisson_count(x.exit_share * executions[x.block], x.exit_snapshots + 1));
                soft(x.stay_edge, poisson_count((1 - x.exit_share) * executions[x.block], x.stay_snapshots + 1));
            }
            continue;
        }
        if (t.from_entry) {
            // The entries are the preheader's count: the back edge follows.
            soft(t.stay_edge, measured_count(count * (t.length - 1)));
            continue;
        }
        soft(t.exit_edge, measured_count(count / t.length));
        soft(t.stay_edge, measured_count(count * (1 - 1 / t.length)));
    }
}

// The timed odds' floors (timed_share_floor) at `executions` (per block):
// the flow's counts, never the estimator's points, which a stalled block's
// samples put far above its count (SQLite's hash chain in pcache1Fetch, 179
// samples on its key compare, at a best case of 4 cycles: a floor at a
// quarter of that point held the procedure at 4.3x callgrind's count).
void add_timed_floors(const FlowCountsInput& in, const FrequencyEstimate& estimate, std::span<const double> executions,
                      FlowProblem& problem) {
    const auto floor_edge = [&](std::uint32_t block, std::uint32_t e, std::uint32_t chose, std::uint32_t total) {
        const double floor = timed_share_floor(chose, total) * executions[block];
        if (e < problem.edges.size() && floor > 0 && !measured(estimate, in.classes->edge_class[e]) && !ruled_out(in, e))
            problem.edges[e].count = with_floor(problem.edges[e].count, floor);
    };
    for (const SwitchOdds& o : in.timed_switches) {
        if (o.total == 0 || o.block >= executions.size() || !(executions[o.block] > 0)) continue;
        for (std::size_t j = 0; j < o.edges.size() && j < o.counts.size(); ++j) floor_edge(o.block, o.edges[j], o.counts[j], o.total);
    }
    for (const BranchOdds& o : in.timed_odds) {
        if (o.total == 0 || o.block >= executions.size() || !(executions[o.block] > 0)) continue;
        floor_edge(o.block, o.taken_edge, o.taken, o.total);
        floor_edge(o.block, o.fall_edge, o.total - o.taken, o.total);
    }
}

std::vector<double> estimated_executions(const FrequencyEstimate& estimate, double p) {
    std::vector<double> v(estimate.block_frequency.size());
    for (std::size_t b = 0; b < v.size(); ++b) v[b] = estimate.block_frequency[b] * p;
    return v;
}

// A branch decides the share the entry's count propagates through it once
// its rarer way was chosen by this many snapshots. Through a loop the chain
// gives entries x n / r (r the exits seen in n snapshots), as uncertain as r
// itself (relative standard error 1 / sqrt(r)), and the common way's n
// snapshots then restated that count with n's weight, outvoting the samples.
// mulchain in bench/accuracy/loops.c (4,096 trips a call, 0.4 exits expected
// in its ~1,700 snapshots, the entry count exact from its caller) saw r = 1
// or 2 in half of the recordings on Zen 5 and came out at about n / 2 trips,
// 4-5x low, against its samples' 0.9-1.0x (bpf.calc_accuracy failed in CI).
// From 5 on the share is within a factor of two at two standard errors; a
// loop left by two branches counts each (TwoPathSearch's second, 6 of 71).
constexpr double kMinRarerToPropagate = 5;

// Per edge, the share of its block's count it takes: the odds' (Laplace's
// rule among the edges some snapshot chose, as add_odds) where snapshots
// evaluated the block's branch and decided it (kMinRarerToPropagate, or its
// rarer way never chosen), else the flow's.
std::vector<double> edge_shares(const FlowCountsInput& in, const FlowSolution& flow) {
    const Cfg& cfg = *in.cfg;
    std::vector<double> share(cfg.edges.size(), 0);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        const auto& out = cfg.blocks[b].out_edges;
        double total = 0;
        for (auto e : out) total += flow.edges[e];
        for (auto e : out) share[e] = total > 0 ? flow.edges[e] / total : 1.0 / static_cast<double>(out.size());
    }
    const auto split = [&](std::span<const std::uint32_t> edges, std::span<const double> chose) {
        double total = 0, seen = 0;
        for (double c : chose) {
            total += c;
            seen += c > 0 ? 1 : 0;
        }
        for (std::size_t j = 0; j < edges.size(); ++j)
            if (edges[j] < share.size()) share[edges[j]] = chose[j] > 0 ? (chose[j] + 1) / (total + seen) : 0;
    };
    for (const BranchOdds& o : in.odds) {
        if (o.total == 0) continue;
        const double rarer = static_cast<double>(std::min(o.taken, o.total - o.taken));
        if (rarer > 0 && rarer < kMinRarerToPropagate) continue;
        const std::uint32_t edges[] = {o.taken_edge, o.fall_edge};
        const double chose[] = {static_cast<double>(o.taken), static_cast<double>(o.total - o.taken)};
        split(edges, chose);
    }
    for (const SwitchOdds& o : in.switches) {
        if (o.total == 0) continue;
        std::vector<double> chose(o.counts.begin(), o.counts.end());
        split(o.edges, chose);
    }
    for (const TripShare& t : in.trips) {
        // A bisection's exit tests: their odds scaled to its length.
        for (const ScaledExit& x : scaled_exits(in, t, flow.blocks)) {
            share[x.exit_edge] = x.exit_share;
            share[x.stay_edge] = 1 - x.exit_share;
        }
        // From the entries: the loop's exits' shares are the flow's, which
        // the back edge's count (add_odds) holds at the length.
        if (t.from_entry || !(t.length >= 1) || t.exit_edge >= share.size() || t.stay_edge >= share.size()) continue;
        share[t.exit_edge] = 1 / t.length;
        share[t.stay_edge] = 1 - 1 / t.length;
    }
    // A way the callers' constants rule out: its block's count takes the others.
    for (auto e : in.ruled_out) {
        if (e >= share.size() || cfg.edges[e].from >= cfg.blocks.size()) continue;
        const auto& out = cfg.blocks[cfg.edges[e].from].out_edges;
        const double others = static_cast<double>(out.size()) - 1;
        for (auto o : out) share[o] = o == e ? 0 : (others > 0 ? 1 / others : 0);
    }
    return share;
}

// The blocks a chain fed at `entries` reaches through edges with a share.
std::vector<bool> reached(const Cfg& cfg, std::span<const double> share, std::span<const double> entries) {
    std::vector<bool> seen(cfg.blocks.size(), false);
    std::vector<std::uint32_t> work;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b)
        if (entries[b] > 0) {
            seen[b] = true;
            work.push_back(b);
        }
    while (!work.empty()) {
        const std::uint32_t b = work.back();
        work.pop_back();
        for (auto e : cfg.blocks[b].out_edges) {
            const std::uint32_t to = cfg.edges[e].to;
            if (to < seen.size() && share[e] > 0 && !seen[to]) {
                seen[to] = true;
                work.push_back(to);
            }
        }
    }
    return seen;
}

// The visits x of a Markov chain fed `entries` (per block): x = entries +
// S x, S[b][u] the share of u's count that edge u -> b takes, over the
// blocks the chain reaches (the others 0), by Gaussian elimination with
// partial pivoting. Empty where the chain does not end (a loop no share
// leaves: I - S singular, or a count below 0 or beyond `ceiling`).
std::vector<double> chain_visits(const Cfg& cfg, std::span<const double> share, std::span<const double> entries,
                                 double ceiling) {
    const std::vector<bool> in = reached(cfg, share, entries);
    std::vector<std::uint32_t> index(cfg.blocks.size(), std::numeric_limits<std::uint32_t>::max()), blocks;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b)
        if (in[b]) {
            index[b] = static_cast<std::uint32_t>(blocks.size());
            blocks.push_back(b);
        }
    const std::size_t n = blocks.size();
    std::vector<double> m(n * (n + 1), 0);  // rows of [I - S | entries]
    const auto at = [&](std::size_t r, std::size_t c) -> double& { return m[r * (n + 1) + c]; };
    for (std::size_t r = 0; r < n; ++r) {
        const std::uint32_t b = blocks[r];
        at(r, r) += 1;
        at(r, n) = entries[b];
        for (auto e : cfg.blocks[b].in_edges) {
            const std::uint32_t from = cfg.edges[e].from;
            if (from < cfg.blocks.size() && in[from]) at(r, index[from]) -= share[e];
        }
    }
    for (std::size_t c = 0; c < n; ++c) {
        std::size_t pivot = c;
        for (std::size_t r = c + 1; r < n; ++r)
            if (std::abs(at(r, c)) > std::abs(at(pivot, c))) pivot = r;
        if (!(std::abs(at(pivot, c)) > 1e-12)) return {};
        if (pivot != c)
            for (std::size_t k = c; k <= n; ++k) std::swap(at(c, k), at(pivot, k));
        for (std::size_t r = 0; r < n; ++r) {
            if (r == c || at(r, c) == 0) continue;
            const double f = at(r, c) / at(c, c);
            for (std::size_t k = c; k <= n; ++k) at(r, k) -= f * at(c, k);
        }
    }
    std::vector<double> x(cfg.blocks.size(), 0);
    const double tolerance = 1e-12 * ceiling;  // rounding, against the largest count
    for (std::size_t r = 0; r < n; ++r) {
        const double v = at(r, n) / at(r, r);
        if (!(v > -tolerance) || !(v < ceiling)) return {};
        x[blocks[r]] = std::max(v, 0.0);
    }
    return x;
}

// The block counts the flow's entries give when every block passes its
// count on at its edges' shares (edge_shares): a Markov chain's visits.
// A loop's count is then its entries over its exits' odds, where the
// flow's own rounds close that gap by the exit's share each (a loop left
// 8% of the time keeps 92% of its gap: branchy's `search` stayed 1.6x over
// after 64 rounds). Solved directly up to kMaxDirectBlocks blocks: sweeps
// (Gauss-Seidel) close a loop's gap by its exit's share each, and a trip
// of 1,024 iterations (TripShare) took more than the sweeps allowed. Larger
// procedures sweep. The flow's counts where the chain does not end (a loop
// whose exits no snapshot took never ends).
constexpr std::size_t kMaxDirectBlocks = 400;

// Whether edge e is the entry and the callers give its count exactly.
bool entry_from_callers(const FlowCountsInput& in, std::uint32_t e) {
    return in.entry_executions > 0 && !in.entry_lower_bound && in.cfg->edges[e].kind == EdgeKind::kEntry;
}

std::vector<double> propagated_counts(const FlowCountsInput& in, const FlowSolution& flow) {
    constexpr int kMaxSweeps = 20000;
    constexpr double kSettled = 1e-9;
    const Cfg& cfg = *in.cfg;
    const std::vector<double> share = edge_shares(in, flow);
    double entries = 0;
    std::vector<double> fed(cfg.blocks.size(), 0);
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e)
        if (cfg.edges[e].from == kEntryBlock) {
            // The callers' count, not the flow's: a loop's trip share stated
            // at the estimator's count of its latch (add_odds' first round)
            // outweighs the entry by the trip's length, and the flow's
            // entries then restate that count round after round (branchy's
            // classify kept 11,325 of 15,991 entries, its loop 29% low).
            const double count = entry_from_callers(in, e) ? in.entry_executions : flow.edges[e];
            entries += count;
            if (cfg.edges[e].to < fed.size()) fed[cfg.edges[e].to] += count;
        }
    if (!(entries > 0)) return flow.blocks;
    // Far beyond any count the flow holds: the chain does not end.
    const double ceiling = 1e6 * std::max(entries, *std::max_element(flow.blocks.begin(), flow.blocks.end()));
    if (cfg.blocks.size() <= kMaxDirectBlocks) {
        std::vector<double> x = chain_visits(cfg, share, fed, ceiling);
        return x.empty() ? flow.blocks : x;
    }
    std::vector<double> x(cfg.blocks.size(), 0);
    const int sweeps = static_cast<int>(std::min<std::size_t>(kMaxSweeps, 20'000'000 / (cfg.edges.size() + 1)));
    for (int sweep = 0; sweep < sweeps; ++sweep) {
        double change = 0;
        for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
            double v = 0;
            for (auto e : cfg.blocks[b].in_edges) {
                const std::uint32_t from = cfg.edges[e].from;
                v += from == kEntryBlock ? flow.edges[e] : x[from] * share[e];
            }
            change = std::max(change, std::abs(v - x[b]) / std::max(v, 1.0));
            x[b] = v;
            if (!(v < ceiling)) return flow.blocks;
        }
        if (change <= kSettled) return x;
    }
    return flow.blocks;
}

constexpr double kOutside = 1e6;   // per execution outside a hard bound: far above the objective's 1

// Whether edge e enters loop `loop`: into its header from outside it (the
// procedure's entry included). A natural loop's header dominates its
// blocks, so these are all the ways in, and no edge enters two loops.
bool enters(const Cfg& cfg, const Loop& loop, std::uint32_t e) {
    const CfgEdge& edge = cfg.edges[e];
    return edge.to == loop.header && (edge.from == kEntryBlock || !loop.contains(edge.from));
}

double entries_into(const Cfg& cfg, const Loop& loop, const FlowSolution& flow) {
    double sum = 0;
    for (auto e : cfg.blocks[loop.header].in_edges)
        if (enters(cfg, loop, e)) sum += flow.edges[e];
    return sum;
}

// `problem` with each loop whose floor is above 0 entered through a
// virtual block that runs at least `floor[l]` times (kOutside per
// execution below): its entry edges lead to that block, one free edge
// from it to the header. The virtual blocks and edges follow the CFG's.
FlowProblem with_entry_floors(const FlowCountsInput& in, FlowProblem problem, std::span<const double> floor) {
    const auto& loops = in.loops->loops;
    for (std::uint32_t l = 0; l < loops.size(); ++l) {
        if (!(floor[l] > 0)) continue;
        const auto v = static_cast<std::uint32_t>(problem.blocks.size());
        SoftCount at_least;
        at_least.estimate = floor[l];
        at_least.down = {FlowSegment{floor[l], kOutside}};
        problem.blocks.push_back(at_least);
        for (auto e : in.cfg->blocks[loops[l].header].in_edges)
            if (enters(*in.cfg, loops[l], e) && e < problem.edges.size()) problem.edges[e].to = v;
        problem.edges.push_back({v, loops[l].header, free_count()});
    }
    return problem;
}

// The flow of `problem` in which every loop with a count is entered
// (FlowCountsInput::loops): solved with the floors the snapshots give,
// then again with a floor of one execution on each loop the solution ran
// with no entry (mulchain in bench/accuracy/loops.c: its guard's jump to
// the return, unsampled, cost less than the unsampled way into its loop
// and out, and the flow gave the loop's 74 M executions no entry in 1 of
// 8 recordings). Each loop takes that floor at most once.
FlowSolution solve_entered(const FlowCountsInput& in, const FlowProblem& problem) {
    if (!in.loops || in.loops->loops.empty()) return solve_flow(problem);
    const auto& loops = in.loops->loops;
    std::vector<double> floor(loops.size(), 0);
    for (std::size_t l = 0; l < loops.size() && l < in.loop_entries_seen.size(); ++l)
        floor[l] = std::max(in.loop_entries_seen[l], 0.0);
    for (;;) {
        FlowSolution flow = solve_flow(with_entry_floors(in, problem, floor));
        flow.blocks.resize(problem.blocks.size());
        flow.edges.resize(problem.edges.size());
        bool raised = false;
        for (std::uint32_t l = 0; l < loops.size(); ++l) {
            const bool runs = loops[l].header < flow.blocks.size() && flow.blocks[loops[l].header] >= 1;
            if (runs && floor[l] < 1 && entries_into(*in.cfg, loops[l], flow) < 1) {
                floor[l] = 1;
                raised = true;
            }
        }
        if (!raised) return flow;
    }
}

// The odds restated at the flow's counts until the blocks they split
// settle (within 0.1%) or kOddsRounds pass: a branch under a block the
// estimator got wrong takes its shares of what the flow gives that block.
// Each round closes a loop's gap to the count its entry and exit odds
// imply by the exit's share only, so where the callers give the entry
// count exactly (the evidence that then decides the loop) the odds are
// restated at the counts that entry propagates through them
// (propagated_counts), and the rounds go on to kEntryOddsRounds.
FlowSolution solve_with_odds(const FlowCountsInput& in, const FrequencyEstimate& estimate, FlowProblem problem) {
    constexpr int kEntryOddsRounds = 64;
    const bool entry_known = in.entry_executions > 0 && !in.entry_lower_bound;
    const int kOddsRounds = entry_known ? kEntryOddsRounds : 8;
    FlowSolution flow = solve_entered(in, problem);
    if (in.odds.empty() && in.switches.empty() && in.trips.empty() && in.timed_switches.empty() && in.timed_odds.empty())
        return flow;
    // Each round states the odds and the floors anew on the first
    // problem's edges (a floor stated on last round's floor would keep it).
    const auto first_edges = problem.edges;
    for (int round = 0; round < kOddsRounds; ++round) {
        const std::vector<double> before = flow.blocks;
        const std::vector<double> counts = entry_known ? propagated_counts(in, flow) : flow.blocks;
        problem.edges = first_edges;
        add_odds(in, estimate, counts, problem);
        add_timed_floors(in, estimate, counts, problem);
        flow = solve_entered(in, problem);
        bool settled = true;
        for (std::size_t b = 0; b < before.size() && settled; ++b)
            settled = std::abs(flow.blocks[b] - before[b]) <= 1e-3 * std::max(before[b], 1.0);
        if (settled) break;
    }
    return flow;
}

// Item 2 of issue 36: a ranged class's range narrowed to the counts a
// flow can give it while every hard constraint holds: measured counts
// (within 10%: docs/ACCURACY.md's measured counts are all within it) and
// every ranged class within its own range; other counts are free.
struct HardBound {
    bool hard = false;
    double low = 0, high = 0;   // executions
};

constexpr double kMeasuredTolerance = 0.1;

// The entry edge, when the callers' measured call sites give its count
// and the procedure's own evidence does not measure it.
bool entry_from_callers(const FlowCountsInput& in, const FrequencyEstimate& estimate, std::uint32_t e) {
    return in.entry_executions > 0 && in.cfg->edges[e].kind == EdgeKind::kEntry &&
           !measured(estimate, in.classes->edge_class[e]);
}

// The callers' count as a bound: within the measured tolerance, or from
// it up where other callers are unknown.
HardBound entry_bound(const FlowCountsInput& in) {
    if (in.entry_lower_bound) return {true, in.entry_executions, std::numeric_limits<double>::infinity()};
    return {true, in.entry_executions * (1 - kMeasuredTolerance), in.entry_executions * (1 + kMeasuredTolerance)};
}

// The callers' count in the flow: measured, or a floor (free above it).
SoftCount entry_count(const FlowCountsInput& in) {
    if (!in.entry_lower_bound) return measured_count(in.entry_executions);
    SoftCount c;
    c.estimate = in.entry_executions;
    c.up = {FlowSegment{std::numeric_limits<double>::infinity(), 0}};
    c.down = {FlowSegment{in.entry_executions, kOutside}};
    return c;
}

HardBound hard_bound(const FrequencyEstimate& estimate, std::span<const ClassRange> ranges, std::uint32_t cls,
                     double frequency, double p) {
    // (A measured class with a range is a branch's anchor: its odds' interval.)
    if (cls < ranges.size() && ranges[cls].ranged) return {true, ranges[cls].min * p, ranges[cls].max * p};
    if (measured(estimate, cls))
        return {true, frequency * p * (1 - kMeasuredTolerance), frequency * p * (1 + kMeasuredTolerance)};
    return {};
}

// Within [low, high] at `inside` per execution from `from` (low or high),
// kOutside beyond.
SoftCount within(const HardBound& b, bool from_high, double inside) {
    if (!b.hard) return free_count();
    const double width = std::max(b.high - b.low, 0.0);
    SoftCount c;
    c.up.clear();
    if (from_high) {
        c.estimate = b.high;
        c.up = {FlowSegment{std::numeric_limits<double>::infinity(), kOutside}};
        c.down = {FlowSegment{width, inside}, FlowSegment{b.low, kOutside}};
    } else {
        c.estimate = b.low;
        c.up = {FlowSegment{width, inside}};
        if (std::isfinite(width)) c.up.push_back(FlowSegment{std::numeric_limits<double>::infinity(), kOutside});
        c.down = {FlowSegment{b.low, kOutside}};
    }
    return c;
}

struct Bounds {
    std::vector<HardBound> blocks, edges;
};

Bounds hard_bounds(const FlowCountsInput& in, const FrequencyEstimate& estimate, std::span<const ClassRange> ranges) {
    Bounds out;
    const double p = in.period_cycles;
    for (std::uint32_t b = 0; b < in.cfg->blocks.size(); ++b)
        out.blocks.push_back(hard_bound(estimate, ranges, in.classes->block_class[b], estimate.block_frequency[b], p));
    for (std::uint32_t e = 0; e < in.cfg->edges.size(); ++e) {
        const std::uint32_t cls = in.classes->edge_class[e];
        out.edges.push_back(ruled_out(in, e)                   ? HardBound{true, 0, 0}
                            : entry_from_callers(in, estimate, e) ? entry_bound(in)
                            : measured(estimate, cls)       ? hard_bound(estimate, ranges, cls, estimate.edge_frequency[e], p)
                                                            : HardBound{});
    }
    return out;
}

// The least (or most) count block `target` can have in a flow that keeps
// every hard bound (where they contradict each other, the flow breaks the
// fewest executions' worth).
double extreme_count(const Cfg& cfg, const Bounds& bounds, std::uint32_t target, bool most) {
    FlowProblem problem;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b)
        problem.blocks.push_back(b == target ? within(bounds.blocks[b], most, 1) : within(bounds.blocks[b], false, 0));
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e)
        problem.edges.push_back({cfg.edges[e].from, cfg.edges[e].to, within(bounds.edges[e], false, 0)});
    return solve_flow(problem).blocks[target];
}

void narrow_to_flows(std::vector<ClassRange>& ranges, const Bounds& bounds, const FlowCountsInput& in) {
    const Cfg& cfg = *in.cfg;
    std::vector<bool> done(ranges.size(), false);
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        const std::uint32_t c = in.classes->block_class[b];
        if (c >= ranges.size() || done[c] || !ranges[c].ranged) continue;
        done[c] = true;  // cycle-equivalent blocks carry the same flow: one block stands for its class
        const double low = extreme_count(cfg, bounds, b, false) / in.period_cycles;
        const double high = extreme_count(cfg, bounds, b, true) / in.period_cycles;
        const double narrowed_low = std::max(ranges[c].min, low), narrowed_high = std::min(ranges[c].max, high);
        if (narrowed_low <= narrowed_high) ranges[c] = {true, narrowed_low, narrowed_high, ranges[c].point};
    }
}

}  // namespace

FlowProblem calc_flow_problem(const FlowCountsInput& in, const FrequencyEstimate& estimate,
                              std::span<const ClassRange> ranges) {
    const Cfg& cfg = *in.cfg;
    FlowProblem problem;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) problem.blocks.push_back(block_count(in, estimate, ranges, b));
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e) {
        const bool pinned = measured(estimate, in.classes->edge_class[e]);
        problem.edges.push_back({cfg.edges[e].from, cfg.edges[e].to,
                                 ruled_out(in, e)                      ? measured_count(0)
                                 : entry_from_callers(in, estimate, e) ? entry_count(in)
                                 : pinned ? measured_count(estimate.edge_frequency[e] * in.period_cycles)
                                          : free_count()});
    }
    add_odds(in, estimate, estimated_executions(estimate, in.period_cycles), problem);
    return problem;
}

void conserve_flow(FrequencyEstimate& estimate, std::vector<ClassRange>& ranges, const FlowCountsInput& in) {
    const Cfg& cfg = *in.cfg;
    const FrequencyClasses& fc = *in.classes;
    if (!(in.period_cycles > 0) || cfg.blocks.empty()) return;
    const FlowSolution flow = solve_with_odds(in, estimate, calc_flow_problem(in, estimate, ranges));
    const Bounds bounds = hard_bounds(in, estimate, ranges);
    const double p = in.period_cycles;
    // Cycle-equivalent members carry the same flow: each class takes its
    // members' count (the last one written; they agree).
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        estimate.block_frequency[b] = flow.blocks[b] / p;
        estimate.classes[fc.block_class[b]].frequency = flow.blocks[b] / p;
    }
    double entries = 0;
    for (std::uint32_t e = 0; e < cfg.edges.size(); ++e) {
        estimate.edge_frequency[e] = flow.edges[e] / p;
        estimate.classes[fc.edge_class[e]].frequency = flow.edges[e] / p;
        if (cfg.edges[e].from == kEntryBlock) entries += flow.edges[e];
    }
    estimate.invocations = entries / p;
    if (fc.invocation_class < estimate.classes.size()) estimate.classes[fc.invocation_class].frequency = entries / p;
    narrow_to_flows(ranges, bounds, in);
    // Issue 36: a range must hold the count calc reports. Where the flow
    // moved a ranged class outside its range (its neighbours' evidence
    // outweighed its own), the range is widened to include the flow's count.
    for (std::uint32_t c = 0; c < ranges.size() && c < estimate.classes.size(); ++c) {
        if (!ranges[c].ranged) continue;
        ranges[c].min = std::min(ranges[c].min, estimate.classes[c].frequency);
        ranges[c].max = std::max(ranges[c].max, estimate.classes[c].frequency);
        // A range keeps its reason only while it is still a point.
        if (ranges[c].max > ranges[c].min * (1 + 1e-3)) ranges[c].point = RangePoint::kNone;
    }
}

}  // namespace ecpi::analyze
