// Flow inference (flow_inference.h) on hand-made CFGs: counts that conserve
// flow, sampled blocks as soft constraints, unsampled blocks filled where
// the flow must pass them.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/flow_inference.h"
#include "ecpi/analyze/layout/layout.h"

using namespace ecpi::analyze;

namespace {

// In every block, what enters equals the block's count equals what leaves.
void check_conserved(const FlowProblem& p, const FlowSolution& s) {
    REQUIRE(s.blocks.size() == p.blocks.size());
    REQUIRE(s.edges.size() == p.edges.size());
    std::vector<double> in(p.blocks.size(), 0), out(p.blocks.size(), 0);
    for (std::size_t k = 0; k < p.edges.size(); ++k) {
        CHECK(s.edges[k] >= 0);
        if (p.edges[k].to != kFlowSink) in[p.edges[k].to] += s.edges[k];
        if (p.edges[k].from != kFlowSource) out[p.edges[k].from] += s.edges[k];
    }
    for (std::size_t b = 0; b < p.blocks.size(); ++b) {
        CAPTURE(b);
        CHECK(in[b] == doctest::Approx(s.blocks[b]));
        CHECK(out[b] == doctest::Approx(s.blocks[b]));
    }
}

// Samples per execution of a block of `cycles` best-case cycles, at one
// sample per `period` cycles.
SoftCount unseen(double cycles, double period) { return unseen_count(cycles / period); }

}  // namespace

TEST_CASE("the Poisson soft count is cheapest at its estimate and convex around it") {
    const SoftCount c = poisson_count(1000, 10);
    CHECK(c.estimate == 1000);
    REQUIRE(c.up.size() == 3);
    REQUIRE(c.down.size() == 4);
    for (std::size_t k = 1; k < c.up.size(); ++k) CHECK(c.up[k].cost > c.up[k - 1].cost);
    for (std::size_t k = 1; k < c.down.size(); ++k) CHECK(c.down[k].cost > c.down[k - 1].cost);
    CHECK(std::isinf(c.up.back().length));
    double down = 0;
    for (const auto& s : c.down) down += s.length;
    CHECK(down == doctest::Approx(1000));  // lowering stops at 0
    // More samples, the same estimate: dearer to move.
    CHECK(poisson_count(1000, 40).up[0].cost == doctest::Approx(4 * c.up[0].cost));
    // A range is free inside.
    const SoftCount r = poisson_range(200, 5000, 10);
    CHECK(r.estimate == 200);
    CHECK(r.up[0].length == doctest::Approx(4800));
    CHECK(r.up[0].cost == 0);
}

TEST_CASE("a chain with a gap: the unsampled blocks between two sampled ones carry their count") {
    // A -> B -> C -> D; B and C never sampled.
    FlowProblem p;
    p.blocks = {poisson_count(1000, 10), unseen(4, 1e5), unseen(4, 1e5), poisson_count(1000, 10)};
    p.edges = {{kFlowSource, 0, free_count()}, {0, 1, free_count()}, {1, 2, free_count()},
               {2, 3, free_count()},           {3, kFlowSink, free_count()}};
    const FlowSolution s = solve_flow(p);
    check_conserved(p, s);
    CHECK(s.blocks[1] == doctest::Approx(1000));
    CHECK(s.blocks[2] == doctest::Approx(1000));
    CHECK(s.blocks[0] == doctest::Approx(1000));
}

namespace {

// A -> B | C -> D, A and D sampled 10 times at 1000 executions.
FlowProblem diamond(SoftCount b, SoftCount c) {
    FlowProblem p;
    p.blocks = {poisson_count(1000, 10), std::move(b), std::move(c), poisson_count(1000, 10)};
    p.edges = {{kFlowSource, 0, free_count()}, {0, 1, free_count()}, {0, 2, free_count()},
               {1, 3, free_count()},           {2, 3, free_count()}, {3, kFlowSink, free_count()}};
    return p;
}

}  // namespace

TEST_CASE("a diamond with one side unsampled: it gets the flow only where the samples leave some for it") {
    // B sampled, C unsampled.
    // B's samples say 900 of the 1000: C would have to run 100 times
    // unseen at 20 cycles a time (0.02 expected samples each); raising B
    // by a ninth is likelier.
    FlowProblem tight = diamond(poisson_count(900, 9), unseen(20, 1000));
    FlowSolution s = solve_flow(tight);
    check_conserved(tight, s);
    CHECK(s.blocks[2] == doctest::Approx(0));
    CHECK(s.blocks[1] == doctest::Approx(1000));
    // B's samples say 300 and C is one cycle at one sample per 10,000
    // cycles: C could well have run 700 times unseen, and does.
    FlowProblem loose = diamond(poisson_count(300, 3), unseen(1, 10000));
    s = solve_flow(loose);
    check_conserved(loose, s);
    CHECK(s.blocks[1] == doctest::Approx(300));
    CHECK(s.blocks[2] == doctest::Approx(700));
}

TEST_CASE("a loop: its unsampled header carries the entries and every iteration") {
    // E -> H; H -> L (body, sampled) -> H; H -> X -> exit.
    FlowProblem p;
    p.blocks = {poisson_count(100, 5), unseen(2, 1e5), poisson_count(10000, 50), poisson_count(100, 5)};
    p.edges = {{kFlowSource, 0, free_count()}, {0, 1, free_count()}, {1, 2, free_count()},
               {2, 1, free_count()},           {1, 3, free_count()}, {3, kFlowSink, free_count()}};
    const FlowSolution s = solve_flow(p);
    check_conserved(p, s);
    CHECK(s.blocks[1] == doctest::Approx(10100));
    CHECK(s.edges[3] == doctest::Approx(10000));  // the back edge
    CHECK(s.edges[4] == doctest::Approx(100));
}

TEST_CASE("inconsistent samples: the count with more samples behind it moves least") {
    // A -> B -> exit: A's 10 samples say 1000, B's 3 say 3000; flow says equal.
    FlowProblem p;
    p.blocks = {poisson_count(1000, 10), poisson_count(3000, 3)};
    p.edges = {{kFlowSource, 0, free_count()}, {0, 1, free_count()}, {1, kFlowSink, free_count()}};
    FlowSolution s = solve_flow(p);
    check_conserved(p, s);
    CHECK(s.blocks[0] == doctest::Approx(1000));
    CHECK(s.blocks[1] == doctest::Approx(1000));
    CHECK(s.cost > 0);
    // With the samples the other way round, B wins.
    p.blocks = {poisson_count(1000, 3), poisson_count(3000, 30)};
    s = solve_flow(p);
    check_conserved(p, s);
    CHECK(s.blocks[0] == doctest::Approx(3000));
}

TEST_CASE("consistent samples are kept as they are, at no cost") {
    const FlowProblem p = diamond(poisson_count(600, 6), poisson_count(400, 4));
    const FlowSolution s = solve_flow(p);
    check_conserved(p, s);
    CHECK(s.blocks == std::vector<double>{1000, 600, 400, 1000});
    CHECK(s.cost == doctest::Approx(0));
}

namespace {

// Block 0 (sampled, 4e6 executions, its jcc at 0x10) branches to 2 and
// falls through to 1; both join at 3 (sampled), which returns.
CalcProcedure calc_diamond(std::uint64_t fall_samples, std::uint64_t taken_samples) {
    CalcProcedure p;
    p.blocks.resize(4);
    p.instructions.resize(4);
    for (std::uint32_t b = 0; b < 4; ++b) {
        p.blocks[b].first = b;
        p.blocks[b].count = 1;
        p.blocks[b].best_cycles = 2;
        p.instructions[b].address = 0x10 * (b + 1);
    }
    p.blocks[0].samples = p.blocks[3].samples = 8;
    p.blocks[0].executions = p.blocks[3].executions = 4e6;
    p.blocks[1].samples = fall_samples;
    p.blocks[1].executions = fall_samples > 0 ? 4e6 * fall_samples / 8 : 0;
    p.blocks[2].samples = taken_samples;
    p.blocks[2].executions = taken_samples > 0 ? 4e6 * taken_samples / 8 : 0;
    p.edges = {{kEntryBlock, 0, EdgeKind::kEntry, 0, 0}, {0, 2, EdgeKind::kBranch, 0, 0},
               {0, 1, EdgeKind::kFallThrough, 0, 0}, {1, 3, EdgeKind::kFallThrough, 0, 0},
               {2, 3, EdgeKind::kJump, 0, 0},         {3, kExitBlock, EdgeKind::kReturn, 0, 0}};
    return p;
}

}  // namespace

TEST_CASE("layout's flow counts: no sample on either side keeps the fall-through; snapshots and samples decide") {
    const double period = 1e6;
    // Neither side sampled, the same size: the compiler's fall-through
    // takes it all. (8 expected samples at 4e6 runs of a 2-cycle block, and
    // none seen: the flow lowers the sampled counts around it to 2e6, where
    // lowering them further costs more than the unseen runs.)
    LayoutCounts c = layout_counts(calc_diamond(0, 0), period, LayoutCountSource::kFlow);
    CHECK(c.edges[1] == doctest::Approx(0));  // taken
    CHECK(c.edges[2] == doctest::Approx(c.blocks[0]));
    CHECK(c.blocks[1] == doctest::Approx(c.blocks[0]));
    CHECK(c.blocks[0] == doctest::Approx(2e6));
    // The rules split it 3:1 for the fall-through.
    const LayoutCounts rules = layout_counts(calc_diamond(0, 0), period, LayoutCountSource::kRules);
    CHECK(rules.edges[2] == doctest::Approx(3 * rules.edges[1]));
    // A sampled taken side takes the flow.
    c = layout_counts(calc_diamond(0, 8), period, LayoutCountSource::kFlow);
    CHECK(c.edges[1] == doctest::Approx(4e6));
    CHECK(c.blocks[1] == doctest::Approx(0));
    // Register snapshots of the jump, 3 of 3 taken: the taken side, though
    // neither side has a sample. The fall-through no snapshot chose claims
    // no share (issue 36): the samples set the level, as with no snapshots.
    CalcProcedure odds = calc_diamond(0, 0);
    odds.branches = {{0x10, 3, 3, false}};
    c = layout_counts(odds, period, LayoutCountSource::kFlow);
    CHECK(c.edges[1] == doctest::Approx(c.blocks[0]));
    CHECK(c.edges[2] == doctest::Approx(0));
    CHECK(c.blocks[0] == doctest::Approx(2e6));
}

// A compare with memory's flags: 30 of 100 snapshots chose the unsampled
// taken side (shares of time, calc's timed_branches). Its count is held at
// a floor, a quarter of the lower end of that share, and no higher.
TEST_CASE("layout's flow counts: a timed branch floors the side its snapshots chose, and splits nothing") {
    const double period = 1e6;
    CalcProcedure p = calc_diamond(8, 0);
    const LayoutCounts before = layout_counts(p, period, LayoutCountSource::kFlow);
    CHECK(before.edges[1] == doctest::Approx(0));
    CalcBranch timed;
    timed.jump = p.instructions[0].address;
    timed.taken = 30;
    timed.snapshots = 100;
    p.timed_branches.push_back(timed);
    const LayoutCounts c = layout_counts(p, period, LayoutCountSource::kFlow);
    const double floor = timed_share_floor(30, 100) * p.blocks[0].executions;
    CHECK(timed_share_floor(30, 100) == doctest::Approx(share_interval(30, 100).first / 4));
    CHECK(c.edges[1] == doctest::Approx(floor).epsilon(0.02));
    CHECK(c.edges[1] + c.edges[2] == doctest::Approx(c.blocks[0]));
}

// Issue 17, the handlers workload: GCC lays a rare path that misses the
// cache out as the fall-through; its samples are stall (its count a wide
// range), the common path is a few instructions no sample hit, and the
// entry block's own count is a range too (it may stall).
TEST_CASE("layout's flow counts: a stalling rare side does not take an unsampled common side's flow") {
    const double period = 524000;
    CalcProcedure p = calc_diamond(8, 0);
    p.blocks[0].samples = 11;
    p.blocks[0].best_cycles = 1;
    p.blocks[0].executions = 4e6;
    p.blocks[0].ranged = true;
    p.blocks[0].executions_min = 600;
    p.blocks[0].executions_max = 9e6;
    p.blocks[1].best_cycles = 6;  // the rare side, sampled
    p.blocks[1].executions = 7e5;
    p.blocks[1].ranged = true;
    p.blocks[1].executions_min = 170;
    p.blocks[1].executions_max = 1.2e6;
    p.blocks[2].best_cycles = 1;  // the common side, never sampled
    const LayoutCounts c = layout_counts(p, period, LayoutCountSource::kFlow);
    CHECK(c.edges[1] > 100 * c.edges[2]);  // taken (common) against fall-through (rare)
    CHECK(c.edges[1] > 1e6);               // the entry keeps most of its estimate
    CHECK(c.blocks[3] == doctest::Approx(c.blocks[0]));
    // Free within its whole range, the rare side would take it all: the
    // entry's range lets it fall to what the rare side needs.
    FlowProblem free_range = layout_flow_problem(p, period);
    free_range.blocks[1] = poisson_range(170, 1.2e6, 8);
    free_range.blocks[0] = poisson_range(600, 9e6, 11);
    const FlowSolution s = solve_flow(free_range);
    CHECK(s.edges[2] >= s.edges[1]);
}

namespace {

// jsonq's arena_alloc, shaped: block 0 (sampled, 4e6 executions) jumps to
// its common path 3 and falls through to a rare growth path, 1 (`call
// malloc; test; je` to the out-of-memory exit 4) then 2 (two stores), which
// rejoins 3. The growth path's one sample lies on `sampled` (an instruction
// index: 3 is 1's je, two after the call; 5 is 2's second store, four after
// it), its count that sample over the block's best case.
CalcProcedure growth_path(std::uint32_t sampled, bool with_call) {
    const double period = 415284;
    CalcProcedure p;
    p.blocks.resize(5);
    const std::uint32_t first[] = {0, 1, 4, 6, 8}, count[] = {1, 3, 2, 2, 1};
    for (std::uint32_t b = 0; b < 5; ++b) {
        p.blocks[b].index = b;
        p.blocks[b].first = first[b];
        p.blocks[b].count = count[b];
        p.blocks[b].best_cycles = 2;
    }
    const char* text[] = {"jbe 0x70",  with_call ? "call 0x1110" : "mov rdi, r15", "test rax, rax", "je 0x80",
                          "mov qword ptr [r13], rax", "lea rax, [rbx + 1]", "mov qword ptr [r12], rax", "ret",
                          "call 0x1120"};
    p.instructions.resize(9);
    for (std::uint32_t i = 0; i < 9; ++i) {
        p.instructions[i].address = 0x10 * (i + 1);
        p.instructions[i].text = text[i];
    }
    p.blocks[0].samples = p.blocks[3].samples = p.instructions[0].samples = p.instructions[6].samples = 8;
    p.blocks[0].executions = p.blocks[3].executions = p.invocations = 4e6;
    p.instructions[sampled].samples = 1;
    CalcBlock& rare = p.blocks[sampled < 4 ? 1 : 2];
    rare.samples = 1;
    rare.executions = period / 8;  // 51,910
    p.edges = {{kEntryBlock, 0, EdgeKind::kEntry, 0, 0}, {0, 3, EdgeKind::kBranch, 0, 0},
               {0, 1, EdgeKind::kFallThrough, 0, 0},  {1, 4, EdgeKind::kBranch, 0, 0},
               {1, 2, EdgeKind::kFallThrough, 0, 0},  {2, 3, EdgeKind::kFallThrough, 0, 0},
               {3, kExitBlock, EdgeKind::kReturn, 0, 0}, {4, kExitBlock, EdgeKind::kNoReturn, 0, 0}};
    return p;
}

}  // namespace

TEST_CASE("layout's flow counts: one sample just after a rare path's call does not set its count") {
    const double period = 415284;
    // The sample four instructions after malloc's call: the path ran
    // 274 times in jsonq, and the flow kept 25,955 of its point.
    LayoutCounts c = layout_counts(growth_path(5, true), period, LayoutCountSource::kFlow);
    CHECK(c.blocks[2] < 100);
    CHECK(c.blocks[1] == doctest::Approx(c.blocks[2]));
    CHECK(c.blocks[0] == doctest::Approx(4e6));
    // The same sample with no call before it is the block's own: it keeps
    // a count of the order of its point.
    c = layout_counts(growth_path(5, false), period, LayoutCountSource::kFlow);
    CHECK(c.blocks[2] > period / 8 / 4);
    // Nor is a path that runs as often as its procedure is called a rare
    // one (SQLite's closeCursorsInFrame, one sample after a call, 280 k
    // executions in 163 k calls of sqlite3VdbeHalt).
    CalcProcedure level = growth_path(5, true);
    level.invocations = period / 8;
    c = layout_counts(level, period, LayoutCountSource::kFlow);
    CHECK(c.blocks[2] > period / 8 / 4);
    // On the malloc check's jump, two after the call, with a register
    // snapshot that saw it fall through: the odds split the block's range,
    // not its point (the snapshot restated 59,849 executions in jsonq's r10).
    CalcProcedure odds = growth_path(3, true);
    odds.branches = {{0x40, 0, 1, false}};
    c = layout_counts(odds, period, LayoutCountSource::kFlow);
    CHECK(c.blocks[1] < 100);
    CHECK(c.edges[4] < 100);
    odds = growth_path(3, false);
    odds.branches = {{0x40, 0, 1, false}};
    c = layout_counts(odds, period, LayoutCountSource::kFlow);
    CHECK(c.blocks[1] > period / 8 / 4);
}
