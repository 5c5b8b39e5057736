// calc's counts as one flow (flow_counts.h, issue 36): on hand-made CFGs
// with measured loops, and over every procedure of real compiler output
// through the whole of calc's pipeline (analyze_procedure).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/flow_counts.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "hand_cfg.h"
#include "hand_code.h"

using namespace ecpi::analyze;

namespace {

// Flow into and out of every block equals its count (F, per period).
void check_conserved(const Cfg& cfg, const FrequencyEstimate& est) {
    std::vector<double> in(cfg.blocks.size(), 0), out(cfg.blocks.size(), 0);
    for (std::size_t e = 0; e < cfg.edges.size(); ++e) {
        CHECK(est.edge_frequency[e] >= 0);
        if (cfg.edges[e].to < cfg.blocks.size()) in[cfg.edges[e].to] += est.edge_frequency[e];
        if (cfg.edges[e].from < cfg.blocks.size()) out[cfg.edges[e].from] += est.edge_frequency[e];
    }
    for (std::size_t b = 0; b < cfg.blocks.size(); ++b) {
        CAPTURE(b);
        CHECK(in[b] == doctest::Approx(est.block_frequency[b]));
        CHECK(out[b] == doctest::Approx(est.block_frequency[b]));
    }
}

// The flow's input for a hand-made CFG, a period of 1000 cycles.
// A latch that jumps back to the loop's header H, its trips `length`
// iterations long, else falls through to X: its two edges (the stay taken,
// the exit falling through) and the trip that says so.
TripShare latch_trip(test::HandCfg& fx, std::uint32_t latch, std::uint32_t h, std::uint32_t x, double length) {
    TripShare trip;
    trip.block = latch;
    trip.stay_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
    fx.edge(latch, h, EdgeKind::kBranch);
    trip.exit_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
    fx.edge(latch, x, EdgeKind::kFallThrough);
    trip.length = length;
    trip.weight = 2000;
    return trip;
}

// A self-loop L that stays `length` times a trip, then leaves to X.
TripShare self_loop_trip(test::HandCfg& fx, std::uint32_t l, std::uint32_t x, double length) {
    return latch_trip(fx, l, l, x, length);
}

FlowCountsInput hand_input(const test::HandCfg& fx, const FrequencyClasses& fc,
                           const std::vector<std::uint64_t>& samples) {
    FlowCountsInput in;
    in.cfg = &fx.cfg;
    in.classes = &fc;
    in.timing = &fx.timing;
    in.samples = samples;
    in.period_cycles = 1000;
    return in;
}

// The estimator's counts for a hand-made CFG, with some blocks' points set
// (F per period) as a test's scenario states them.
FrequencyEstimate estimate_with_points(const test::HandCfg& fx, const FrequencyClasses& fc,
                                       const std::vector<std::uint64_t>& samples,
                                       const std::vector<std::pair<std::uint32_t, double>>& points) {
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
    for (const auto& [blk, f] : points) {
        est.block_frequency[blk] = f;
        est.classes[fc.block_class[blk]].frequency = f;
    }
    return est;
}

// `est` made the flow of `in`, which it must conserve.
FrequencyEstimate conserved(FrequencyEstimate est, std::vector<ClassRange>& ranges, const FlowCountsInput& in) {
    conserve_flow(est, ranges, in);
    check_conserved(*in.cfg, est);
    return est;
}

// A conditional jump at the end of `block` (its taken edge, then its
// fall-through) and its snapshots' odds: `taken` of `total` went the taken way.
BranchOdds branch(test::HandCfg& fx, std::uint32_t block, std::uint32_t taken_to, std::uint32_t fall_to,
                  std::uint32_t taken, std::uint32_t total) {
    BranchOdds o;
    o.block = block;
    o.taken_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
    fx.edge(block, taken_to, taken_to == kExitBlock ? EdgeKind::kReturn : EdgeKind::kBranch);
    o.fall_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
    fx.edge(block, fall_to, EdgeKind::kFallThrough);
    o.taken = taken;
    o.total = total;
    return o;
}

// A loop whose latch steps an induction register (measured: F 100 per
// period, one invocation), with a diamond inside:
//   entry -> H;  H -> A (stay), H -> X (leave);  A -> B, A -> C;  B, C -> D;
//   D -> H (back);  X -> exit.
struct LoopDiamond {
    test::HandCfg fx;
    std::uint32_t h = 0, a = 0, b = 0, c = 0, d = 0, x = 0;
    std::vector<std::uint64_t> samples;

    LoopDiamond() {
        h = fx.add_block({1, 1});
        a = fx.add_block({1, 1});
        b = fx.add_block({1, 1, 1, 1});
        c = fx.add_block({1, 1, 1, 1});
        d = fx.add_block({1, 1});
        x = fx.add_block({1, 1});
        fx.edge(kEntryBlock, h, EdgeKind::kEntry);
        fx.edge(h, a, EdgeKind::kFallThrough);
        fx.edge(h, x, EdgeKind::kBranch);
        fx.edge(a, b, EdgeKind::kBranch);
        fx.edge(a, c, EdgeKind::kFallThrough);
        fx.edge(b, d, EdgeKind::kJump);
        fx.edge(c, d, EdgeKind::kFallThrough);
        fx.edge(d, h, EdgeKind::kJump);
        fx.edge(x, kExitBlock, EdgeKind::kReturn);
        samples.assign(fx.cfg.instructions.size(), 0);
        fx.sample(samples, h, 101);
        fx.sample(samples, a, 100);
        fx.sample(samples, d, 100);
        fx.sample(samples, x, 1);
    }

    // The estimator's counts with the latch anchored at 100, then the flow.
    FrequencyEstimate solve(std::vector<ClassRange>* ranges = nullptr, std::span<const BranchOdds> timed = {}) {
        const FrequencyClasses fc = frequency_classes(fx.cfg);
        EstimatorOptions options;
        options.anchors.push_back({d, 100, false});
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, options);
        std::vector<ClassRange> none(fc.count);
        std::vector<ClassRange>& r = ranges ? *ranges : none;
        r.resize(fc.count);
        FlowCountsInput in = hand_input(fx, fc, samples);
        in.timed_odds = timed;
        conserve_flow(est, r, in);
        check_conserved(fx.cfg, est);
        return est;
    }
};

}  // namespace

TEST_CASE("a diamond inside a measured loop: its arms share the loop's count by their samples") {
    LoopDiamond g;
    // The arms' samples say 90 and 30 (120 in all); the loop ran 100 times.
    g.fx.sample(g.samples, g.b, 90);
    g.fx.sample(g.samples, g.c, 30);
    const FrequencyEstimate est = g.solve();
    CHECK(est.block_frequency[g.d] == doctest::Approx(100));
    CHECK(est.block_frequency[g.b] + est.block_frequency[g.c] == doctest::Approx(100));
    // Both arms' samples per execution agree (S/E the same): the 20 too
    // many come off either, each arm within its nearest stretch (E/2 to E).
    CHECK(est.block_frequency[g.b] >= 60);
    CHECK(est.block_frequency[g.b] <= 90);
    CHECK(est.block_frequency[g.c] >= 10);
    CHECK(est.block_frequency[g.c] <= 40);
    CHECK(est.block_frequency[g.h] == doctest::Approx(101).epsilon(0.02));
    CHECK(est.invocations == doctest::Approx(1).epsilon(0.5));
}

TEST_CASE("an unsampled arm of a diamond in a measured loop runs only as often as running unseen is likely") {
    {
        // The sampled arm's samples say 70 of the loop's 100. Had the
        // unsampled arm run the other 30 per period, its 4 cycles would have
        // left about 120 samples; none is far less likely than the sampled
        // arm's 280 standing for 100: it takes the loop's count.
        LoopDiamond g;
        g.fx.sample(g.samples, g.b, 70);
        const FrequencyEstimate est = g.solve();
        CHECK(est.block_frequency[g.b] == doctest::Approx(100));
        CHECK(est.block_frequency[g.c] == doctest::Approx(0));
    }
    {
        // Its samples say more than the loop ran: the loop's count, the
        // unsampled arm none (and never below 0).
        LoopDiamond g;
        g.fx.sample(g.samples, g.b, 120);
        const FrequencyEstimate est = g.solve();
        CHECK(est.block_frequency[g.b] == doctest::Approx(100));
        CHECK(est.block_frequency[g.c] == doctest::Approx(0));
    }
}

namespace {

// The estimator's counts with the given anchors (F per period), then the flow.
FrequencyEstimate solve_anchored(test::HandCfg& fx, const std::vector<std::uint64_t>& samples,
                                 const std::vector<Anchor>& anchors) {
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    EstimatorOptions options;
    options.anchors = anchors;
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, options);
    std::vector<ClassRange> ranges(fc.count);
    FlowCountsInput in = hand_input(fx, fc, samples);
    conserve_flow(est, ranges, in);
    check_conserved(fx.cfg, est);
    return est;
}

}  // namespace

TEST_CASE("a compare with memory's flags floor each way they chose, and split nothing") {
    // The unsampled arm above, but 40 of the 100 snapshots at a's jump (a
    // compare with memory: their shares are of time) chose it. It runs at
    // least a quarter of the lower end of that share of a's count.
    LoopDiamond g;
    g.fx.sample(g.samples, g.b, 70);
    BranchOdds o;
    o.block = g.a;
    o.taken_edge = 3;  // a -> b
    o.fall_edge = 4;   // a -> c
    o.total = 100;
    o.taken = 60;
    o.timed = true;
    REQUIRE(g.fx.cfg.edges[3].to == g.b);
    REQUIRE(g.fx.cfg.edges[4].to == g.c);
    const FrequencyEstimate without = g.solve();
    const FrequencyEstimate with = g.solve(nullptr, std::span<const BranchOdds>(&o, 1));
    CHECK(without.block_frequency[g.c] == doctest::Approx(0));
    CHECK(with.block_frequency[g.c] == doctest::Approx(100 * share_interval(40, 100).first / 4).epsilon(0.05));
    CHECK(with.block_frequency[g.b] + with.block_frequency[g.c] == doctest::Approx(100));
    // Not raised toward the snapshots' 40%: a floor, no share.
    CHECK(with.block_frequency[g.c] < 10);
}

TEST_CASE("a switch inside a measured loop: its cases share the loop's count, not each the whole") {
    // entry -> H; H -> S (stay), H -> X (leave); S -> C0..C3 (a jump table);
    // every case -> L (the latch, measured at 80 per period) -> H.
    test::HandCfg fx;
    const std::uint32_t h = fx.add_block({1, 1});
    const std::uint32_t s = fx.add_block({1, 1, 1});
    std::vector<std::uint32_t> cases;
    for (int k = 0; k < 4; ++k) cases.push_back(fx.add_block({1, 1, 1, 1}));
    const std::uint32_t l = fx.add_block({1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, h, EdgeKind::kEntry);
    fx.edge(h, s, EdgeKind::kFallThrough);
    fx.edge(h, x, EdgeKind::kBranch);
    for (std::uint32_t c : cases) fx.edge(s, c, EdgeKind::kSwitch);
    for (std::uint32_t c : cases) fx.edge(c, l, EdgeKind::kJump);
    fx.edge(l, h, EdgeKind::kJump);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, h, 80);
    fx.sample(samples, s, 80);
    fx.sample(samples, l, 80);
    fx.sample(samples, x, 1);
    // The cases' samples say 40, 20, 12 and 8 (80 in all).
    const double truth[] = {40, 20, 12, 8};
    for (int k = 0; k < 4; ++k) fx.sample(samples, cases[k], truth[k]);
    const FrequencyEstimate est = solve_anchored(fx, samples, {{l, 80, false}});
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
        CAPTURE(k);
        CHECK(est.block_frequency[cases[k]] == doctest::Approx(truth[k]).epsilon(0.1));
        sum += est.block_frequency[cases[k]];
    }
    CHECK(sum == doctest::Approx(80).epsilon(0.01));
    CHECK(est.block_frequency[s] == doctest::Approx(80).epsilon(0.01));
}

namespace {

// entry -> H; H -> S (stay), H -> X (leave); S -> C0..C3 (a jump table whose
// index `chose` register snapshots read per case); every case -> L (the
// latch, measured at 80 per period) -> H. The cases' samples say `said`,
// each case's count ranged from `low` to 80.
struct LoopSwitch {
    test::HandCfg fx;
    std::uint32_t h = 0, s = 0, l = 0, x = 0;
    std::vector<std::uint32_t> cases;
    SwitchOdds odds;
    std::vector<std::uint64_t> samples;
    double low = 5;

    LoopSwitch(const std::array<std::uint32_t, 4>& chose, const std::array<double, 4>& said, double case_low) : low(case_low) {
        h = fx.add_block({1, 1});
        s = fx.add_block({1, 1, 1});
        for (int k = 0; k < 4; ++k) cases.push_back(fx.add_block({1, 1, 1, 1}));
        l = fx.add_block({1, 1});
        x = fx.add_block({1});
        fx.edge(kEntryBlock, h, EdgeKind::kEntry);
        fx.edge(h, s, EdgeKind::kFallThrough);
        fx.edge(h, x, EdgeKind::kBranch);
        odds.block = s;
        for (int k = 0; k < 4; ++k) {
            odds.edges.push_back(static_cast<std::uint32_t>(fx.cfg.edges.size()));
            odds.counts.push_back(chose[k]);
            odds.total += chose[k];
            fx.edge(s, cases[k], EdgeKind::kSwitch);
        }
        for (std::uint32_t c : cases) fx.edge(c, l, EdgeKind::kJump);
        fx.edge(l, h, EdgeKind::kJump);
        fx.edge(x, kExitBlock, EdgeKind::kReturn);
        samples.assign(fx.cfg.instructions.size(), 0);
        for (std::uint32_t b : {h, s, l}) fx.sample(samples, b, 80);
        fx.sample(samples, x, 1);
        for (int k = 0; k < 4; ++k) fx.sample(samples, cases[k], said[k]);
    }

    // The flow with the odds as deciding (`switches`) or as shares of time
    // (`timed`), or neither.
    FrequencyEstimate solve(bool decided, bool timed) {
        const FrequencyClasses fc = frequency_classes(fx.cfg);
        EstimatorOptions options;
        options.anchors.push_back({l, 80, false});
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, options);
        std::vector<ClassRange> ranges(fc.count);
        for (std::uint32_t c : cases) ranges[fc.block_class[c]] = {true, low, 80};
        FlowCountsInput in = hand_input(fx, fc, samples);
        if (decided) in.switches = std::span<const SwitchOdds>(&odds, 1);
        if (timed) in.timed_switches = std::span<const SwitchOdds>(&odds, 1);
        conserve_flow(est, ranges, in);
        check_conserved(fx.cfg, est);
        return est;
    }
};

}  // namespace

TEST_CASE("a switch's snapshot odds split its count where the cases' samples, ranged, cannot") {
    // Case 0 stalls: its samples say 50 where the cases ran 20 times each,
    // and the estimator gave every case a wide range. The index read on
    // register snapshots chose each case 100 times.
    LoopSwitch g({100, 100, 100, 100}, {50, 10, 10, 10}, 5);
    const FrequencyEstimate with = g.solve(true, false);
    for (int k = 0; k < 4; ++k) {
        CAPTURE(k);
        CHECK(with.block_frequency[g.cases[k]] == doctest::Approx(20).epsilon(0.1));
    }
    // Without the odds the stalled case keeps most of its samples' count.
    const FrequencyEstimate without = g.solve(false, false);
    CHECK(without.block_frequency[g.cases[0]] > 30);
}

TEST_CASE("a jump table whose snapshots weigh time floors each case they chose, and splits nothing") {
    // Its index loaded just before the table (jsonq's parse_value): 30 of
    // 100 snapshots chose case 3, whose samples say 1 (it retires in the
    // shadow of the case before it), 40 chose case 1, whose samples say 10.
    // Such shares are of time, not of executions.
    LoopSwitch g({10, 40, 20, 30}, {59, 10, 10, 1}, 0.5);
    g.odds.index_from_memory = true;
    REQUIRE(switch_undecided(g.odds) != nullptr);
    const FrequencyEstimate without = g.solve(false, false);
    const FrequencyEstimate with = g.solve(false, true);
    // 30 of 100: at least a quarter of Wilson's lower end (0.219), of 80.
    CHECK(without.block_frequency[g.cases[3]] < 3);
    CHECK(with.block_frequency[g.cases[3]] == doctest::Approx(80 * 0.2189 / 4).epsilon(0.05));
    // No case is raised toward its share of the snapshots: case 1 (40%)
    // keeps its samples' count, and the floor's executions come from the
    // case whose samples asked the most.
    CHECK(with.block_frequency[g.cases[1]] == doctest::Approx(without.block_frequency[g.cases[1]]).epsilon(0.05));
    CHECK(with.block_frequency[g.cases[0]] < without.block_frequency[g.cases[0]]);
    CHECK(with.block_frequency[g.s] == doctest::Approx(80).epsilon(0.01));
}

TEST_CASE("nested loops: the inner loop's measured count and the outer loop's samples agree in one flow") {
    // entry -> OH; OH -> IH (enter the inner loop), OH -> X (leave);
    // IH -> B (stay), IH -> OL (inner loop done); B -> IH (the inner latch,
    // measured at 200 per period); OL -> OH (the outer latch).
    test::HandCfg fx;
    const std::uint32_t oh = fx.add_block({1, 1});
    const std::uint32_t ih = fx.add_block({1, 1});
    const std::uint32_t b = fx.add_block({1, 1, 1, 1});
    const std::uint32_t ol = fx.add_block({1, 1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, oh, EdgeKind::kEntry);
    fx.edge(oh, ih, EdgeKind::kFallThrough);
    fx.edge(oh, x, EdgeKind::kBranch);
    fx.edge(ih, b, EdgeKind::kFallThrough);
    fx.edge(ih, ol, EdgeKind::kBranch);
    fx.edge(b, ih, EdgeKind::kJump);
    fx.edge(ol, oh, EdgeKind::kJump);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    // 20 outer iterations of 10 inner ones each, per period; the inner body
    // holds a stall its model does not know (its samples say 300, not 200).
    fx.sample(samples, oh, 20);
    fx.sample(samples, ih, 220);
    fx.sample(samples, b, 300);
    fx.sample(samples, ol, 20);
    fx.sample(samples, x, 1);
    const FrequencyEstimate est = solve_anchored(fx, samples, {{b, 200, false}});
    CHECK(est.block_frequency[b] == doctest::Approx(200).epsilon(0.01));
    CHECK(est.block_frequency[ih] == doctest::Approx(220).epsilon(0.05));
    CHECK(est.block_frequency[ol] == doctest::Approx(20).epsilon(0.25));
    CHECK(est.block_frequency[oh] == doctest::Approx(est.block_frequency[ol] + est.invocations).epsilon(0.01));
}

TEST_CASE("a block whose range spans orders of magnitude yields to narrower evidence, however many its samples") {
    // An interpreter's loop: entry -> D; D -> A, D -> B (a jump table);
    // A, B -> D; D -> X -> exit. D's samples hold another's stall (the
    // mispredicted jump through the table): its point says 100 per period,
    // but its range allows 1 to 300. A and B say 30 each, in narrow ranges.
    test::HandCfg fx;
    const std::uint32_t d = fx.add_block({1, 1, 1, 1});
    const std::uint32_t a = fx.add_block({1, 1, 1, 1});
    const std::uint32_t b = fx.add_block({1, 1, 1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, d, EdgeKind::kEntry);
    fx.edge(d, a, EdgeKind::kSwitch);
    fx.edge(d, b, EdgeKind::kSwitch);
    fx.edge(a, d, EdgeKind::kJump);
    fx.edge(b, d, EdgeKind::kJump);
    fx.edge(d, x, EdgeKind::kBranch);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, d, 250);
    fx.sample(samples, a, 30);
    fx.sample(samples, b, 30);
    fx.sample(samples, x, 1);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    FrequencyEstimate est = estimate_with_points(fx, fc, samples, {{d, 100}, {a, 30}, {b, 30}, {x, 1}});
    std::vector<ClassRange> ranges(fc.count);
    ranges[fc.block_class[d]] = {true, 1, 300};
    ranges[fc.block_class[a]] = {true, 25, 35};
    ranges[fc.block_class[b]] = {true, 25, 35};
    FlowCountsInput in = hand_input(fx, fc, samples);
    conserve_flow(est, ranges, in);
    check_conserved(fx.cfg, est);
    // Priced as exact, D's 1000 samples held it at its point, 100, the
    // surplus over A and B going round through X.
    CHECK(est.block_frequency[a] == doctest::Approx(30).epsilon(0.2));
    CHECK(est.block_frequency[b] == doctest::Approx(30).epsilon(0.2));
    CHECK(est.block_frequency[d] < 80);
}

TEST_CASE("a ranged block keeps the floor its samples need at their worst, however wide its range") {
    // SQLite's B-tree search: P's branch skips a cell's header (A, a load
    // that misses: many samples, a range over orders of magnitude) or goes
    // straight on to J; the way through A passes two unsampled one-cycle
    // blocks (U1, U2) whose cycles an out-of-order core retires in its
    // neighbours' samples.
    //   entry -> P;  P -> U1, P -> J;  U1 -> A;  A -> U2;  U2 -> J;  J -> exit.
    test::HandCfg fx;
    const std::uint32_t p = fx.add_block({1, 1, 1, 1});
    const std::uint32_t u1 = fx.add_block({1});
    const std::uint32_t a = fx.add_block({1});
    const std::uint32_t u2 = fx.add_block({1});
    const std::uint32_t j = fx.add_block({1, 1, 1, 1});
    fx.edge(kEntryBlock, p, EdgeKind::kEntry);
    fx.edge(p, u1, EdgeKind::kFallThrough);
    fx.edge(p, j, EdgeKind::kBranch);
    fx.edge(u1, a, EdgeKind::kFallThrough);
    fx.edge(a, u2, EdgeKind::kFallThrough);
    fx.edge(u2, j, EdgeKind::kFallThrough);
    fx.edge(j, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, p, 200);
    fx.sample(samples, a, 600);
    fx.sample(samples, j, 200);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    // A at its samples over the model's best case.
    FrequencyEstimate est = estimate_with_points(fx, fc, samples, {{p, 50}, {j, 50}, {u1, 0}, {u2, 0}, {a, 600}});
    std::vector<ClassRange> ranges(fc.count);
    ranges[fc.block_class[a]] = {true, 2, 600};  // at its worst stall, 2 per period
    FlowCountsInput in = hand_input(fx, fc, samples);
    conserve_flow(est, ranges, in);
    check_conserved(fx.cfg, est);
    // Priced only as evidence over a range of width ln 300 (range_weight:
    // half a sample), A's samples lost to U1's and U2's: the flow left it 0.
    CHECK(est.block_frequency[a] >= doctest::Approx(2));
    CHECK(est.block_frequency[a] < 10);
    CHECK(est.block_frequency[p] == doctest::Approx(50).epsilon(0.1));
    CHECK(est.block_frequency[j] == doctest::Approx(50).epsilon(0.1));
}

TEST_CASE("a loop branch's snapshot odds split its count and do not shrink it") {
    // The demo's share_sixty: a one-block loop whose trips are too short to
    // measure, entered through an unsampled prologue and left through an
    // unsampled epilogue; every one of 35 snapshots at its branch was taken.
    // The odds put 1/37 of the loop's count on the exit, more than running
    // the epilogue unseen allows: the flow leaves the exit low, and the
    // loop's count must stay where its samples put it.
    test::HandCfg fx;
    const std::uint32_t p = fx.add_block({1, 1});
    const std::uint32_t l = fx.add_block({1, 1, 1, 1});
    const std::uint32_t x = fx.add_block({1, 1});
    fx.edge(kEntryBlock, p, EdgeKind::kEntry);
    fx.edge(p, l, EdgeKind::kFallThrough);
    const BranchOdds odds = branch(fx, l, l, x, 35, 35);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, l, 100);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    auto solve = [&](std::span<const BranchOdds> with) {
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
        std::vector<ClassRange> ranges(fc.count);
        ranges[fc.block_class[l]] = {true, 10, 110};
        FlowCountsInput in = hand_input(fx, fc, samples);
        in.odds = with;
        conserve_flow(est, ranges, in);
        check_conserved(fx.cfg, est);
        return est;
    };
    const FrequencyEstimate without = solve({});
    REQUIRE(without.block_frequency[l] == doctest::Approx(100).epsilon(0.05));
    const FrequencyEstimate with = solve(std::span<const BranchOdds>(&odds, 1));
    CHECK(with.block_frequency[l] == doctest::Approx(without.block_frequency[l]).epsilon(0.01));
}

TEST_CASE("a range narrows to the counts a flow within the hard constraints allows") {
    // The arms' samples say 90 and 30, but each alone cannot decide: ranged
    // 10-500. The latch's measured 100 (within 10%) bounds each arm by it;
    // the other arm's range (at least 10) takes its share off too.
    LoopDiamond g;
    g.fx.sample(g.samples, g.b, 90);
    g.fx.sample(g.samples, g.c, 30);
    const FrequencyClasses fc = frequency_classes(g.fx.cfg);
    std::vector<ClassRange> ranges(fc.count);
    ranges[fc.block_class[g.b]] = {true, 10, 500};
    ranges[fc.block_class[g.c]] = {true, 10, 500};
    const FrequencyEstimate est = g.solve(&ranges);
    for (std::uint32_t arm : {g.b, g.c}) {
        CAPTURE(arm);
        const ClassRange& r = ranges[fc.block_class[arm]];
        CHECK(r.ranged);
        CHECK(r.min == doctest::Approx(10));
        CHECK(r.max <= 110 - 10 + 1);
        CHECK(r.max >= 90);
        CHECK(r.min <= est.block_frequency[arm]);
        CHECK(r.max >= est.block_frequency[arm]);
    }
}

TEST_CASE("a range the flow moves a count out of is widened to hold it") {
    LoopDiamond g;
    g.fx.sample(g.samples, g.b, 90);
    g.fx.sample(g.samples, g.c, 30);
    const FrequencyClasses fc = frequency_classes(g.fx.cfg);
    std::vector<ClassRange> ranges(fc.count);
    // A range above what the flow leaves the arm.
    ranges[fc.block_class[g.c]] = {true, 40, 45};
    const FrequencyEstimate est = g.solve(&ranges);
    const double c = est.block_frequency[g.c];
    CHECK(c > 0);
    CHECK(c < 40);
    CHECK(ranges[fc.block_class[g.c]].ranged);
    CHECK(ranges[fc.block_class[g.c]].min <= c);
    CHECK(ranges[fc.block_class[g.c]].max >= c);
}

namespace {

// branchy's `search`: a loop with no induction register, its samples
// putting it at the top of its range (the model's best case), its exit
// odds known from its snapshots (10 of 130 left), and its callers' measured
// call sites giving its entry count.
//   entry -> P;  P -> H;  H -> L (stay), H -> X (leave);  L -> H;  X -> exit.
struct SearchLoop {
    test::HandCfg fx;
    std::uint32_t p = 0, h = 0, l = 0, x = 0;
    BranchOdds odds;
    std::vector<std::uint64_t> samples;

    SearchLoop() {
        p = fx.add_block({1, 1});
        h = fx.add_block({1, 1});
        l = fx.add_block({1, 1, 1, 1});
        x = fx.add_block({1, 1});
        fx.edge(kEntryBlock, p, EdgeKind::kEntry);
        fx.edge(p, h, EdgeKind::kFallThrough);
        odds.block = h;
        odds.fall_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
        fx.edge(h, l, EdgeKind::kFallThrough);
        odds.taken_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
        fx.edge(h, x, EdgeKind::kBranch);
        fx.edge(l, h, EdgeKind::kJump);
        fx.edge(x, kExitBlock, EdgeKind::kReturn);
        odds.total = 130;
        odds.taken = 10;
        samples.assign(fx.cfg.instructions.size(), 0);
        fx.sample(samples, h, 700);
        fx.sample(samples, l, 700);
        fx.sample(samples, p, 2);
        fx.sample(samples, x, 2);
    }

    // F per period of 1000 cycles; `entry` in executions (0: unknown).
    FrequencyEstimate solve(double entry, bool lower_bound, std::vector<ClassRange>* out = nullptr) {
        const FrequencyClasses fc = frequency_classes(fx.cfg);
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
        std::vector<ClassRange> ranges(fc.count);
        ranges[fc.block_class[h]] = {true, 50, 800};
        ranges[fc.block_class[l]] = {true, 50, 800};
        FlowCountsInput in = hand_input(fx, fc, samples);
        in.odds = std::span<const BranchOdds>(&odds, 1);
        in.entry_executions = entry;
        in.entry_lower_bound = lower_bound;
        conserve_flow(est, ranges, in);
        check_conserved(fx.cfg, est);
        if (out) *out = ranges;
        return est;
    }
};

}  // namespace

TEST_CASE("a loop's entry count from its callers' measured call sites and its exit odds decide its count") {
    SearchLoop g;
    const FrequencyEstimate alone = g.solve(0, false);
    REQUIRE(alone.block_frequency[g.h] > 300);
    // Called 10 times a period (10,000 executions) by measured call sites:
    // the exit odds (11 of 132, Laplace) put the loop at about 120.
    std::vector<ClassRange> ranges;
    const FrequencyEstimate est = g.solve(10'000, false, &ranges);
    CHECK(est.invocations == doctest::Approx(10).epsilon(0.1));
    CHECK(est.block_frequency[g.h] == doctest::Approx(120).epsilon(0.15));
    CHECK(est.block_frequency[g.l] == doctest::Approx(110).epsilon(0.15));
    // The range narrows to what a flow with that entry count allows.
    const FrequencyClasses fc = frequency_classes(g.fx.cfg);
    const ClassRange& r = ranges[fc.block_class[g.h]];
    CHECK(r.min <= est.block_frequency[g.h]);
    CHECK(r.max >= est.block_frequency[g.h]);
}

namespace {

// branchy's `search` as compiled: the header's compare sends each iteration
// down one of two paths (lo = mid + 1, hi = mid - 1), each of which leaves
// the loop about 8% of the time and else jumps back; the hi path's branch
// was evaluated on few snapshots.
//   entry -> P -> H;  H -> A | B;  A -> X | H;  B -> H | X;  X -> exit.
struct TwoPathSearch {
    test::HandCfg fx;
    std::uint32_t p = 0, h = 0, a = 0, b = 0, x = 0;
    std::vector<BranchOdds> odds;
    std::vector<std::uint64_t> samples;

    TwoPathSearch() {
        p = fx.add_block({1, 1});
        h = fx.add_block({1, 1, 1});
        a = fx.add_block({1, 1});
        b = fx.add_block({1, 1, 1});
        x = fx.add_block({1});
        fx.edge(kEntryBlock, p, EdgeKind::kEntry);
        fx.edge(p, h, EdgeKind::kFallThrough);
        odds.push_back(branch(fx, h, a, b, 545, 1000));
        odds.push_back(branch(fx, a, x, h, 63, 800));
        odds.push_back(branch(fx, b, h, x, 65, 71));
        fx.edge(x, kExitBlock, EdgeKind::kReturn);
        samples.assign(fx.cfg.instructions.size(), 0);
        fx.sample(samples, h, 700);
        fx.sample(samples, a, 700);
        fx.sample(samples, b, 700);
        fx.sample(samples, p, 2);
        fx.sample(samples, x, 2);
    }

    FrequencyEstimate solve(double entry) {
        const FrequencyClasses fc = frequency_classes(fx.cfg);
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
        std::vector<ClassRange> ranges(fc.count);
        for (auto blk : {h, a, b}) ranges[fc.block_class[blk]] = {true, 20, 800};
        FlowCountsInput in = hand_input(fx, fc, samples);
        in.odds = odds;
        in.entry_executions = entry;
        return conserved(est, ranges, in);
    }
};

}  // namespace

TEST_CASE("an exact entry count and every branch's odds give a loop of two paths its counts") {
    // 10 entries a period; with the odds' shares (Laplace) the header runs
    // 10 / (0.545 * 64/802 + 0.455 * 7/73) = 115 times a period, the paths
    // 63 and 52. Restating the odds at the flow's own counts each round left
    // them 1.6x over after 64 rounds (186, 101 and 85).
    TwoPathSearch g;
    const FrequencyEstimate est = g.solve(10'000);
    const double exit_share = (546.0 / 1002) * (64.0 / 802) + (456.0 / 1002) * (7.0 / 73);
    const double header = 10 / exit_share;
    CHECK(est.invocations == doctest::Approx(10).epsilon(0.01));
    CHECK(est.block_frequency[g.h] == doctest::Approx(header).epsilon(0.05));
    CHECK(est.block_frequency[g.a] == doctest::Approx(header * 546 / 1002).epsilon(0.05));
    CHECK(est.block_frequency[g.b] == doctest::Approx(header * 456 / 1002).epsilon(0.05));
}

TEST_CASE("an entry count with other callers unknown is a floor, not a count") {
    SearchLoop g;
    const FrequencyEstimate alone = g.solve(0, false);
    // A floor below what the procedure's own evidence says changes nothing.
    const FrequencyEstimate low = g.solve(1'000, true);
    CHECK(low.block_frequency[g.h] == doctest::Approx(alone.block_frequency[g.h]).epsilon(0.01));
    // A floor above it raises the entry to it.
    const FrequencyEstimate high = g.solve(10'000, true);
    CHECK(high.invocations >= 10 * 0.999);
}

namespace {

// Every function of a compiled test program or library.
std::vector<std::string> real_binaries() {
    std::vector<std::string> files = {ECPI_CFGTEST_GCC, ECPI_CFGTEST_GCC_NOPIE};
#ifdef ECPI_CFGTEST_CLANG
    files.push_back(ECPI_CFGTEST_CLANG);
#endif
    std::stringstream list(ECPI_LOOPS_LIBS);
    for (std::string lib; std::getline(list, lib, ':');)
        if (!lib.empty()) files.push_back(lib);
    return files;
}

// Samples spread over a procedure's bytes, unevenly (as no estimator would
// guess them): 0-39 at every other byte.
std::map<std::uint64_t, std::uint64_t> spread_samples(std::uint64_t start, std::uint64_t end) {
    std::map<std::uint64_t, std::uint64_t> s;
    for (std::uint64_t a = start; a < end; a += 2) s[a] = (a * 2654435761u >> 7) % 40;
    return s;
}

// In- and out-flow of every block of calc's report, in executions.
std::size_t violations(const CalcProcedure& p) {
    std::vector<double> in(p.blocks.size(), 0), out(p.blocks.size(), 0);
    for (const CalcEdge& e : p.edges) {
        if (e.to < p.blocks.size()) in[e.to] += e.executions;
        if (e.from < p.blocks.size()) out[e.from] += e.executions;
    }
    std::size_t bad = 0;
    for (std::size_t b = 0; b < p.blocks.size(); ++b) {
        const double tolerance = 1e-6 * std::max(1.0, p.blocks[b].executions);
        if (std::abs(in[b] - p.blocks[b].executions) > tolerance ||
            std::abs(out[b] - p.blocks[b].executions) > tolerance) {
            ++bad;
        }
    }
    return bad;
}

}  // namespace

TEST_CASE("calc's counts conserve flow in every block of every procedure of real compiler output") {
    auto model = MachineModel::load(MachineModel::kDefault);
    REQUIRE(model.ok());
    std::size_t procedures = 0, blocks = 0, bad = 0;
    for (const std::string& file : real_binaries()) {
        auto table = SymbolTable::from_elf(file);
        REQUIRE_MESSAGE(table.ok(), file);
        auto image = ImageBytes::open(file);
        REQUIRE(image.ok());
        for (const Symbol& sym : table->symbols()) {
            if (sym.name.find('@') != std::string::npos) continue;
            ProcedureInput in;
            in.name = sym.name;
            in.start = sym.start;
            in.end = table->end_of(sym);
            in.image = &*image;
            in.samples = spread_samples(in.start, in.end);
            auto proc = analyze_procedure(in, *model, 1000);
            if (!proc.ok()) continue;
            ++procedures;
            blocks += proc->blocks.size();
            const std::size_t v = violations(*proc);
            if (v > 0) MESSAGE(file << ": " << sym.name << ": " << v << " of " << proc->blocks.size() << " blocks");
            bad += v;
        }
    }
    MESSAGE(procedures << " procedures, " << blocks << " blocks, " << bad << " with in- or out-flow not their count");
    CHECK(procedures > 50);
    CHECK(bad == 0);
}

TEST_CASE("a loop's exit seen once in its snapshots leaves its count to the samples, not entries x snapshots") {
    // loops.c's mulchain: entry -> P -> H (a one-block loop, 4,096 trips a
    // call) -> X -> exit, the entry count exact from the callers. 1,700
    // snapshots of H's branch expect 0.4 exits; seeing one put the loop at
    // entries x 850 (Laplace's 2 / 1,702), and the back edge's 1,699
    // snapshots restated that with their weight: 4.8x low on Zen 5, against
    // the samples' (at the model's cycles) 1.0x.
    test::HandCfg fx;
    const std::uint32_t p = fx.add_block({1, 1});
    const std::uint32_t h = fx.add_block({1, 1, 1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, p, EdgeKind::kEntry);
    fx.edge(p, h, EdgeKind::kFallThrough);
    BranchOdds o = branch(fx, h, h, x, 0, 1700);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    const double calls = 0.1, trips = 4096;  // a period
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, h, calls * trips);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    std::vector<ClassRange> ranges(fc.count);
    ranges[fc.block_class[h]] = {true, calls * trips / 10, calls * trips * 1.05};
    FlowCountsInput in = hand_input(fx, fc, samples);
    in.entry_executions = calls * in.period_cycles;
    for (std::uint32_t exits : {1u, 2u}) {
        CAPTURE(exits);
        o.taken = o.total - exits;
        const std::vector<BranchOdds> odds = {o};
        in.odds = odds;
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
        std::vector<ClassRange> r = ranges;
        conserve_flow(est, r, in);
        check_conserved(fx.cfg, est);
        CHECK(est.invocations == doctest::Approx(calls).epsilon(0.01));
        CHECK(est.block_frequency[h] == doctest::Approx(calls * trips).epsilon(0.1));
    }
}

namespace {

// loops.c's mulchain with its guard, as gcc -O2 lays it out:
//   entry -> E (test esi, esi; jle);  E -> R (n <= 0: the return), E -> P
//   (the preheader);  P -> H;  H -> H (a one-block loop, 4,096 trips a call)
//   H -> X;  X -> exit;  R -> exit.
// Only H is sampled (E's 2 cycles a call are a fifth of a sample a period);
// the entry count is exact from the callers, and 1,700 snapshots at H's
// branch all stayed in the loop. No snapshot evaluated E's guard: which way
// the entries went is the flow's to find.
struct GuardedLoop {
    test::HandCfg fx;
    std::uint32_t e = 0, r = 0, p = 0, h = 0, x = 0;
    std::vector<std::uint64_t> samples;
    BranchOdds odds;
    const double calls = 0.1, trips = 4096;  // a period

    GuardedLoop() {
        e = fx.add_block({1, 1});
        r = fx.add_block({1});
        p = fx.add_block({1, 1, 1});
        h = fx.add_block({1, 1, 1, 1});
        x = fx.add_block({1, 1, 1});
        fx.edge(kEntryBlock, e, EdgeKind::kEntry);
        fx.edge(e, r, EdgeKind::kBranch);
        fx.edge(e, p, EdgeKind::kFallThrough);
        fx.edge(p, h, EdgeKind::kFallThrough);
        odds = branch(fx, h, h, x, 1700, 1700);
        fx.edge(x, kExitBlock, EdgeKind::kReturn);
        fx.edge(r, kExitBlock, EdgeKind::kReturn);
        samples.assign(fx.cfg.instructions.size(), 0);
        fx.sample(samples, h, calls * trips);
    }

    // `entries_seen`: the loop's entries its snapshots saw (executions).
    FrequencyEstimate solve(double entries_seen) {
        const FrequencyClasses fc = frequency_classes(fx.cfg);
        const LoopInfo loops = find_loops(fx.cfg);
        REQUIRE(loops.loops.size() == 1);
        const std::vector<double> seen = {entries_seen};
        FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
        std::vector<ClassRange> ranges(fc.count);
        FlowCountsInput in = hand_input(fx, fc, samples);
        in.odds = std::span<const BranchOdds>(&odds, 1);
        in.entry_executions = calls * in.period_cycles;
        in.loops = &loops;
        in.loop_entries_seen = seen;
        return conserved(est, ranges, in);
    }
};

}  // namespace

TEST_CASE("a loop that runs is entered, even where the unsampled way around it costs less") {
    // The way into the loop and out (P, X: 6 cycles, and an exit its
    // snapshots never saw) costs more unseen than the guard's return (R, 1
    // cycle). The flow had sent every entry to R and kept the loop's count
    // as a circulation no edge feeds, which no execution can produce.
    GuardedLoop g;
    const FrequencyEstimate est = g.solve(0);
    CHECK(est.invocations == doctest::Approx(g.calls).epsilon(0.01));
    CHECK(est.block_frequency[g.h] == doctest::Approx(g.calls * g.trips).epsilon(0.1));
    CHECK(est.block_frequency[g.p] * 1000 >= 1);
    CHECK(est.block_frequency[g.x] == doctest::Approx(est.block_frequency[g.p]));
}

TEST_CASE("a loop is entered at least as often as its snapshots saw it entered") {
    GuardedLoop g;
    const FrequencyEstimate est = g.solve(30);
    CHECK(est.block_frequency[g.p] * 1000 >= doctest::Approx(30));
    CHECK(est.block_frequency[g.r] + est.block_frequency[g.p] == doctest::Approx(g.calls).epsilon(0.01));
    CHECK(est.block_frequency[g.h] == doctest::Approx(g.calls * g.trips).epsilon(0.1));
}

TEST_CASE("a loop's trip length ties its count to its entries, where its samples say a fifth of it") {
    // bits' outer loop in bench/accuracy/loops.c: a guard (`test esi, esi;
    // jle`), then a loop of 1,024 words whose exit no snapshot sees (once
    // in 1,024) but whose length register snapshots read off the bound its
    // exit compares with (TripShare). 50 entries a period from the callers'
    // measured call sites; 20 snapshots at the guard all went into the loop.
    // The loop's samples over the model's cycles say F 10,000 (its work
    // overlaps the next block's); entries x trip say 51,200.
    //   entry -> G;  G -> X (skip) | P;  P -> L;  L -> L (stay) | X;  X -> exit.
    test::HandCfg fx;
    const std::uint32_t g = fx.add_block({1, 1});
    const std::uint32_t p = fx.add_block({1, 1});
    const std::uint32_t l = fx.add_block({1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, g, EdgeKind::kEntry);
    const std::vector<BranchOdds> odds = {branch(fx, g, x, p, 0, 20)};
    fx.edge(p, l, EdgeKind::kFallThrough);
    const TripShare trip = self_loop_trip(fx, l, x, 1024);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, l, 10'000);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
    REQUIRE(est.block_frequency[l] <= 10'000);
    std::vector<ClassRange> ranges(fc.count);
    ranges[fc.block_class[l]] = {true, 1'000, 100'000};
    FlowCountsInput in = hand_input(fx, fc, samples);
    in.odds = odds;
    in.entry_executions = 50'000;
    const std::vector<TripShare> trips = {trip};
    in.trips = trips;
    const FrequencyEstimate flow = conserved(est, ranges, in);
    CHECK(flow.block_frequency[p] == doctest::Approx(50).epsilon(0.01));
    CHECK(flow.block_frequency[l] == doctest::Approx(50 * 1024).epsilon(0.01));
    CHECK(flow.edge_frequency[trip.exit_edge] == doctest::Approx(50).epsilon(0.01));
}

namespace {

// branchy's kernels' flow: 16,000 exact entries (16 at this scale), the
// loop's samples ranged 9,000-400,000, its trip stated, some edges ruled out.
FrequencyEstimate solve_at_entries(const test::HandCfg& fx, const std::vector<std::uint64_t>& samples,
                                   const TripShare& trip, std::span<const std::uint32_t> ruled_out) {
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
    std::vector<ClassRange> ranges(fc.count);
    ranges[fc.block_class[trip.block]] = {true, 9'000, 400'000};
    FlowCountsInput in = hand_input(fx, fc, samples);
    in.entry_executions = 16'000;
    const std::vector<TripShare> trips = {trip};
    in.trips = trips;
    in.ruled_out = ruled_out;
    return conserved(est, ranges, in);
}

// branchy.c's classify as gcc -O2 lays it out: a guard no snapshot
// evaluated (`test esi, esi; jle`: n <= 0 returns at once), a preheader,
// and a loop of 8,192 elements whose exit no snapshot sees but whose length
// register snapshots read off the bound its exit compares with (TripShare).
// 16 entries a period exact from the callers; the loop's samples over the
// model's cycles say F 94,000 (its mispredicted branches' stalls are not
// in the model's best case), entries x trip say 131,072.
//   entry -> G;  G -> R (n <= 0) | P;  P -> L;  L -> L (stay) | X;  X, R -> exit.
struct GuardedTrip {
    test::HandCfg fx;
    std::uint32_t g = 0, r = 0, p = 0, l = 0, x = 0;
    std::uint32_t skip_edge = 0;
    TripShare trip;
    std::vector<std::uint64_t> samples;

    GuardedTrip() {
        g = fx.add_block({1, 1});
        r = fx.add_block({0.5});
        p = fx.add_block({1, 1});
        l = fx.add_block({1, 1, 1});
        x = fx.add_block({1});
        fx.edge(kEntryBlock, g, EdgeKind::kEntry);
        skip_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
        fx.edge(g, r, EdgeKind::kBranch);
        fx.edge(g, p, EdgeKind::kFallThrough);
        fx.edge(p, l, EdgeKind::kFallThrough);
        trip = self_loop_trip(fx, l, x, 8192);
        fx.edge(x, kExitBlock, EdgeKind::kReturn);
        fx.edge(r, kExitBlock, EdgeKind::kReturn);
        samples.assign(fx.cfg.instructions.size(), 0);
        fx.sample(samples, l, 94'000);
    }

    // The flow with the guard's early return ruled out or not.
    FrequencyEstimate solve(bool rule_out_skip) {
        return solve_at_entries(fx, samples, trip,
                                rule_out_skip ? std::span<const std::uint32_t>(&skip_edge, 1) : std::span<const std::uint32_t>{});
    }
};

}  // namespace

TEST_CASE("a guard the callers' constants rule out sends every entry into the loop its trip length counts") {
    // The early return, unsampled, costs the flow a fortieth of a sample
    // per thousand executions: left to the flow, it took the entries the
    // loop's low samples did not want (branchy: 4,428 of 15,991).
    GuardedTrip t;
    const FrequencyEstimate est = t.solve(true);
    CHECK(est.edge_frequency[t.skip_edge] == 0);
    CHECK(est.invocations == doctest::Approx(16).epsilon(0.01));
    CHECK(est.block_frequency[t.p] == doctest::Approx(16).epsilon(0.01));
    CHECK(est.block_frequency[t.l] == doctest::Approx(16 * 8192).epsilon(0.01));
}

TEST_CASE("a trip length restated at an exact entry count, not at the flow's entries its first round pulled") {
    // No guard to escape by: entry -> P -> L -> X. The first round states
    // the trip at the estimator's count of L (94,000): its back edge,
    // measured, outweighs the entry by the trip's length, and the entries
    // restated from the flow's own kept the loop at the samples' count.
    test::HandCfg fx;
    const std::uint32_t p = fx.add_block({1, 1});
    const std::uint32_t l = fx.add_block({1, 1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, p, EdgeKind::kEntry);
    fx.edge(p, l, EdgeKind::kFallThrough);
    const TripShare trip = self_loop_trip(fx, l, x, 8192);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, l, 94'000);
    const FrequencyEstimate flow = solve_at_entries(fx, samples, trip, {});
    CHECK(flow.invocations == doctest::Approx(16).epsilon(0.01));
    CHECK(flow.block_frequency[l] == doctest::Approx(16 * 8192).epsilon(0.01));
}

TEST_CASE("a trip length ties a loop closed by two latches to its entries, whichever latch ends each trip") {
    // branchy.c's machine as gcc -O2 lays it out (trip_exit_test.cpp): the
    // header's state test sends each iteration through one of two arms,
    // each closed by its own `add rdi, 4; cmp rdi, rcx` latch. 16 entries a
    // period exact from the callers, trips of 8,192 words; the arms'
    // samples over the model's cycles say 0.7x of that. Each latch leaves
    // in 1 / 8,192 of its passes: the header runs entries x trip, split by
    // the header's odds (60 of 100 snapshots to B).
    //   entry -> P -> H;  H -> A | B;  A -> L1;  B -> L2;  L1, L2 -> H (stay) | X;  X -> exit.
    test::HandCfg fx;
    const std::uint32_t p = fx.add_block({1, 1});
    const std::uint32_t h = fx.add_block({1, 1, 1});
    const std::uint32_t a = fx.add_block({1});
    const std::uint32_t b = fx.add_block({1, 1});
    const std::uint32_t l1 = fx.add_block({1, 1, 1});
    const std::uint32_t l2 = fx.add_block({1, 1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, p, EdgeKind::kEntry);
    fx.edge(p, h, EdgeKind::kFallThrough);
    const std::vector<BranchOdds> odds = {branch(fx, h, a, b, 40, 100)};
    fx.edge(a, l1, EdgeKind::kFallThrough);
    fx.edge(b, l2, EdgeKind::kFallThrough);
    const std::vector<TripShare> trips = {latch_trip(fx, l1, h, x, 8192), latch_trip(fx, l2, h, x, 8192)};
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    const double iterations = 16 * 8192;
    fx.sample(samples, h, 0.7 * iterations);
    fx.sample(samples, a, 0.7 * 0.4 * iterations);
    fx.sample(samples, b, 0.7 * 0.6 * iterations);
    fx.sample(samples, l1, 0.7 * 0.4 * iterations);
    fx.sample(samples, l2, 0.7 * 0.6 * iterations);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
    std::vector<ClassRange> ranges(fc.count);
    for (auto blk : {h, a, b, l1, l2}) ranges[fc.block_class[blk]] = {true, 9'000, 400'000};
    FlowCountsInput in = hand_input(fx, fc, samples);
    in.odds = odds;
    in.entry_executions = 16'000;
    in.trips = trips;
    const FrequencyEstimate flow = conserved(est, ranges, in);
    CHECK(flow.block_frequency[p] == doctest::Approx(16).epsilon(0.01));
    CHECK(flow.block_frequency[h] == doctest::Approx(iterations).epsilon(0.02));
    CHECK(flow.block_frequency[l1] + flow.block_frequency[l2] == doctest::Approx(iterations).epsilon(0.02));
    CHECK(flow.block_frequency[x] == doctest::Approx(16).epsilon(0.01));
}

TEST_CASE("counts the samples cannot pay for at best case are scaled down to what they pay for, the flow kept") {
    // jsonq's arena_alloc in bench/accuracy.sh's recording of 2026-11-29
    // (300 rounds; 7,354 samples of 242,400 cycles, x86_64-zen4), where
    // callgrind counted 198,989,400 calls. There its entry test's odds (590
    // register snapshots, none taken), stated at block 0's own point with
    // the snapshots' weight, held the flow at the pooled point of blocks 0
    // and 1, their samples over their best case (2.0 + 1.0 cycles, which
    // leave out the recurrence through a->used from one call to the next):
    // 467.9 M calls, 2.35x, actual CPI 0.14 against a best case of 0.28.
    // Without the snapshots the flow gives 61.2 M; a floor from callers
    // (run_calc's entries_from_callers where other callers are unknown)
    // stands in for them here and asks the same 467.9 M.
    constexpr double kCalls = 198'989'400, kPeriod = 242'400;
    auto table = SymbolTable::from_elf(ECPI_JSONQ);
    REQUIRE(table.ok());
    auto image = ImageBytes::open(ECPI_JSONQ);
    REQUIRE(image.ok());
    const Symbol* sym = nullptr;
    for (const Symbol& s : table->symbols())
        if (s.name == "arena_alloc") sym = &s;
    REQUIRE(sym);
    const std::vector<std::uint8_t> recorded = test::jsonq_arena_alloc();
    const auto code = image->read(sym->start, recorded.size());
    REQUIRE_MESSAGE(std::equal(code.begin(), code.end(), recorded.begin(), recorded.end()),
                    "build/testprogs/jsonq's arena_alloc is not the code these samples were recorded on (another "
                    "compiler): record them anew with bench/accuracy.sh jsonq");
    const std::map<std::uint64_t, std::uint64_t> by_offset = {
            {0x00, 200}, {0x02, 179}, {0x04, 88},  {0x06, 124}, {0x07, 472},  {0x0b, 9},   {0x0c, 738},
            {0x10, 263}, {0x17, 95},  {0x1a, 87},  {0x1d, 145}, {0x23, 3},    {0x27, 397}, {0x2b, 127},
            {0x2f, 284}, {0x33, 44},  {0x37, 2536}, {0x3d, 401}, {0x40, 3},   {0x44, 94},  {0x47, 2},
            {0x48, 242}, {0x49, 59},  {0x4b, 429}, {0x4d, 27},  {0x4f, 155},  {0x54, 3},   {0x60, 70},
            {0x6a, 3},   {0x104, 70}, {0x108, 1},  {0x109, 2},  {0x10c, 1},   {0x110, 1}};
    ProcedureInput in;
    in.name = "arena_alloc";
    in.start = sym->start;
    in.end = table->end_of(*sym);
    in.image = &*image;
    in.name_at = [&table](std::uint64_t a) -> std::string {
        const Symbol* s = table->lookup(a);
        return s && s->start == a ? s->name : std::string();
    };
    double samples = 0;
    for (auto [offset, n] : by_offset) {
        in.samples[sym->start + offset] = n;
        samples += static_cast<double>(n);
    }
    in.entry = ProcedureInput::EntryCount{467'912'800, true, {}};  // the recording's count, as a floor
    auto model = MachineModel::load("x86_64-zen4");
    REQUIRE(model.ok());
    auto p = analyze_procedure(in, *model, kPeriod);
    REQUIRE(p.ok());
    REQUIRE(p->best_case_scale.has_value());
    CHECK(*p->best_case_scale < 1);
    CHECK(p->invocations < 1.5 * kCalls);
    CHECK(p->invocations > kCalls / 1.5);
    // Its counts at best case are what the samples (and the clock's margin) pay for.
    double cycles = 0;
    for (const CalcBlock& b : p->blocks) {
        cycles += b.executions * b.best_cycles;
        if (b.ranged) {
            CHECK(b.executions_min <= b.executions * (1 + 1e-9));
            CHECK(b.executions <= b.executions_max * (1 + 1e-9));
        }
    }
    CHECK(cycles <= (samples + 2 * std::sqrt(samples)) * 1.2 * kPeriod * (1 + 1e-9));
    CHECK(violations(*p) == 0);

    // The generic model's best case is no floor for this core: no bound.
    auto generic = MachineModel::load(MachineModel::kDefault);
    REQUIRE(generic.ok());
    auto unbound = analyze_procedure(in, *generic, kPeriod);
    REQUIRE(unbound.ok());
    CHECK_FALSE(unbound->best_case_scale.has_value());
}
