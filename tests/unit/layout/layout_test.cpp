// ecpi layout's orders and writers on synthetic call graphs and reports.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "ecpi/analyze/layout/layout.h"

using namespace ecpi::analyze;

namespace {

LayoutFunction fn(const char* name, std::uint64_t size, std::uint64_t samples) {
    LayoutFunction f;
    f.name = name;
    f.display = name;
    f.size = size;
    f.samples = samples;
    return f;
}

std::vector<std::string> names(const std::vector<LayoutFunction>& fs, const std::vector<std::uint32_t>& order) {
    std::vector<std::string> out;
    for (auto i : order) out.push_back(fs[i].name);
    return out;
}

}  // namespace

TEST_CASE("C3: a function joins its hottest caller's cluster, clusters densest first, unsampled ones left out") {
    // main calls parse (hot) and report (cold); parse calls lex; util is hot
    // but called by nobody sampled; idle has no samples.
    std::vector<LayoutFunction> fs = {fn("main", 200, 10), fn("parse", 300, 500), fn("lex", 100, 400),
                                      fn("report", 400, 5), fn("util", 100, 900), fn("idle", 100, 0)};
    std::vector<CallEdge> calls = {{0, 1, 1000}, {1, 2, 5000}, {0, 3, 10}, {0, 5, 1}};
    auto order = names(fs, c3_order(fs, calls, 4096));
    // util alone is the densest (9/byte); main+parse+lex+report follow.
    CHECK(order == std::vector<std::string>{"util", "main", "parse", "lex", "report"});
}

TEST_CASE("C3: a merge that would pass the page budget or dilute the caller's cluster is refused") {
    std::vector<LayoutFunction> fs = {fn("a", 3000, 100), fn("b", 2000, 90), fn("c", 10, 50)};
    std::vector<CallEdge> calls = {{0, 1, 100}, {0, 2, 100}};
    auto order = names(fs, c3_order(fs, calls, 4096));
    // b (2000 bytes) does not fit beside a (3000); c does, and a+c (150
    // samples in 3010 bytes) is denser than b (90 in 2000).
    CHECK(order == std::vector<std::string>{"a", "c", "b"});
    // Density: a tiny hot caller does not take a huge lukewarm callee.
    std::vector<LayoutFunction> gs = {fn("hot", 16, 1000), fn("big", 3000, 10)};
    auto g = names(gs, c3_order(gs, {{0, 1, 5}}, 1 << 20));
    CHECK(g == std::vector<std::string>{"hot", "big"});
}

TEST_CASE("Pettis-Hansen: the heaviest edge's ends end up adjacent") {
    std::vector<LayoutFunction> fs = {fn("a", 100, 10), fn("b", 100, 10), fn("c", 100, 10), fn("d", 100, 1)};
    std::vector<CallEdge> calls = {{0, 1, 50}, {1, 2, 40}, {3, 0, 30}};
    auto order = names(fs, pettis_hansen_order(fs, calls));
    REQUIRE(order.size() == 4);
    auto at = [&](const char* n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
    CHECK(std::abs(at("a") - at("b")) == 1);
    CHECK(std::abs(at("b") - at("c")) == 1);
    CHECK(std::abs(at("d") - at("a")) == 1);
}

TEST_CASE("BOLT fdata: offsets in hex within functions, counts rounded, zero counts left out, sorted") {
    LayoutReport r;
    r.functions = {fn("main", 0x200, 10), fn("_ZN3foo3barEv", 0x40, 5)};
    r.branches = {{0, 0x1f, 0, 0x2a, 99.6, false, false},
                  {0, 0x30, 1, 0, 1234.0, true, false},
                  {1, 0x10, 1, 0x4, 0.3, false, true}};
    CHECK(render_bolt_fdata(r) == "1 main 1f 1 main 2a 0 100\n1 main 30 1 _ZN3foo3barEv 0 0 1234\n");
    r.calls = {{0, 1, 1234.4}};
    r.order = {1, 0};
    CHECK(render_lld_call_graph(r) == "main _ZN3foo3barEv 1234\n");
    CHECK(render_lld_order(r) == "_ZN3foo3barEv\nmain\n");
    auto j = render_layout_json(r);
    CHECK(j["schema"] == "ecpi.layout");
    CHECK(j["version"] == 1);
    CHECK(j["branches"].size() == 3);
}

namespace {

// entry block 0 ends in a conditional jump: its taken edge to block 2, its
// fall-through to block 1 (the layout GCC gives a rare path).
CalcProcedure diamond(std::uint64_t fall_samples, double fall_best, std::uint64_t taken_samples, double taken_best) {
    CalcProcedure p;
    p.blocks.resize(3);
    p.blocks[0].samples = 10;
    p.blocks[0].best_cycles = 1;
    p.blocks[0].executions = 4e6;
    p.blocks[1].samples = fall_samples;
    p.blocks[1].best_cycles = fall_best;
    p.blocks[2].samples = taken_samples;
    p.blocks[2].best_cycles = taken_best;
    p.edges = {{0, 2, EdgeKind::kBranch, 0, 0}, {0, 1, EdgeKind::kFallThrough, 0, 0}};
    return p;
}

}  // namespace

// Issue 17: calc's flow can give a block without samples the rest of its
// predecessor's count (millions of executions no sample saw); a layout that
// believes it lays the rare path out as the common one.
TEST_CASE("edge counts are capped by what the target's samples allow") {
    const double period = 500000;  // cycles per sample
    CalcProcedure p = diamond(0, 6, 1, 0.5);
    std::vector<double> counts = {0.5e6, 3.5e6};  // taken (sampled once), fall (never sampled)
    cap_edges_by_samples(p, period, counts);
    CHECK(counts[1] == doctest::Approx(3 * period / 6));  // 0 samples: at most 3 periods of 6-cycle runs
    CHECK(counts[0] == doctest::Approx(0.5e6));           // within its cap (6 periods of 0.5 cycles)
    CHECK(counts[0] > counts[1]);

    // Counts within their caps are left alone.
    CalcProcedure q = diamond(200, 6, 50, 0.5);
    std::vector<double> within = {3e6, 1e6};
    cap_edges_by_samples(q, period, within);
    CHECK(within == std::vector<double>{3e6, 1e6});
}

TEST_CASE("a branch whose targets were never sampled is split by how often each could have run unseen") {
    CalcProcedure p = diamond(0, 6, 0, 0.5);
    std::vector<double> counts = {0, 0};
    cap_edges_by_samples(p, 500000, counts);
    // 0.5 against 6 cycles: the short block could have run 12 times as often.
    CHECK(counts[0] == doctest::Approx(4e6 * 12 / 13));
    CHECK(counts[1] == doctest::Approx(4e6 / 13));
    // Without a period nothing is capped or split.
    std::vector<double> none = {0, 0};
    cap_edges_by_samples(p, 0, none);
    CHECK(none == std::vector<double>{0, 0});
}

TEST_CASE("BOLT fdata names a local (static) function as BOLT does, name/N") {
    LayoutReport r;
    r.functions = {fn("main", 64, 10), fn("lookup", 64, 10)};
    r.functions[1].bolt_name = "lookup/2";
    r.branches = {{0, 0x10, 1, 0, 100, true, false}, {1, 0x4, 1, 0x20, 50, false, false}};
    const std::string fdata = render_bolt_fdata(r);
    CHECK(fdata == "1 lookup/2 4 1 lookup/2 20 0 50\n1 main 10 1 lookup/2 0 0 100\n");
}

namespace {

// diamond() with its entry block's conditional jump at 0x10.
CalcProcedure diamond_with_jump(std::vector<CalcBranch> branches) {
    CalcProcedure p = diamond(0, 6, 0, 6);
    p.instructions.resize(1);
    p.instructions[0].address = 0x10;
    p.blocks[0].first = 0;
    p.blocks[0].count = 1;
    p.branches = std::move(branches);
    return p;
}

}  // namespace

// Issue 17, SQLite: with a few thousand samples most blocks hold 0-3 and
// the estimator's split of a branch is a coin toss (an even one where both
// successors went unsampled); BOLT then lays hot paths out of line.
TEST_CASE("an even split keeps the compiler's fall-through, one register snapshot decides the direction") {
    const double period = 500000;
    // Both successors unsampled, the same size: the caps split 4e6 evenly,
    // which says nothing of the direction. The fall-through keeps 3/4.
    std::vector<double> even = layout_edge_counts(diamond_with_jump({}), period);
    CHECK(even[1] == doctest::Approx(3e6));  // fall-through
    CHECK(even[0] == doctest::Approx(1e6));  // taken
    // One snapshot of the jump's condition, taken: it decides the
    // direction, stated no more strongly than one observation allows
    // (Laplace: 2 to 1).
    std::vector<double> one = layout_edge_counts(diamond_with_jump({{0x10, 1, 1, false}}), period);
    CHECK(one[0] == doctest::Approx(4e6 * 2 / 3));
    CHECK(one[1] == doctest::Approx(4e6 / 3));
    // Many snapshots: close to their share.
    std::vector<double> many = layout_edge_counts(diamond_with_jump({{0x10, 98, 100, false}}), period);
    CHECK(many[0] == doctest::Approx(4e6 * 99 / 102));
    // Snapshots split evenly are no evidence either: the fall-through again.
    std::vector<double> split = layout_edge_counts(diamond_with_jump({{0x10, 1, 2, false}}), period);
    CHECK(split[1] > split[0]);
    // A block that never ran gives nothing to either edge.
    CalcProcedure idle = diamond_with_jump({});
    idle.blocks[0].executions = 0;
    CHECK(layout_edge_counts(idle, period) == std::vector<double>{0, 0});
}

// Issue 17, SQLite: BOLT lays out a large function better from consistent
// block counts (it infers the edges) than from edge counts that do not
// conserve flow; the block counts carry the edge rules' decisions.
TEST_CASE("block counts for BOLT's no-LBR profile come from the branch records into each block") {
    CalcProcedure p = diamond_with_jump({});  // both successors unsampled: 1 to 3 for the fall-through
    p.blocks[0].count = 1;
    p.blocks[1].count = p.blocks[2].count = 1;
    p.blocks[1].executions = 0.5e6;  // calc's own estimates, overruled by the records
    p.blocks[2].executions = 2.5e6;
    const std::vector<double> edges = layout_edge_counts(p, 500000);
    const std::vector<double> blocks = layout_block_counts(p, edges);
    CHECK(blocks[0] == doctest::Approx(4e6));  // no record enters the entry: calc's estimate
    CHECK(blocks[1] == doctest::Approx(3e6));  // the fall-through's record
    CHECK(blocks[2] == doctest::Approx(1e6));  // the taken edge's record
    // A block no record enters keeps calc's estimate.
    std::vector<double> none(edges.size(), 0);
    CHECK(layout_block_counts(p, none) == std::vector<double>{4e6, 0.5e6, 2.5e6});

    LayoutReport r;
    r.event = "cpu-clock";
    r.functions = {fn("main", 64, 10), fn("lookup", 64, 10)};
    r.functions[1].bolt_name = "lookup/2";
    r.blocks = {{1, 0x1a, 99.6}, {0, 0, 4000}, {0, 0x10, 0.2}};
    CHECK(render_bolt_block_counts(r) == "no_lbr cpu-clock:\n1 lookup/2 1a 100\n1 main 0 4000\n");
}

// Issue 17: calls seen only on -g stacks (an indirect call through a handler
// table) become BOLT call records at the caller's call instruction; each
// callee's estimated entries, less what direct call records give it, are
// split over its stack-only sites by their samples.
TEST_CASE("call records from -g stacks: indirect sites share the callee's entries left by direct calls") {
    std::vector<LayoutFunction> fs = {fn("dispatch", 0x100, 50), fn("handler_a", 0x40, 30), fn("handler_b", 0x40, 2)};
    fs[1].invocations = 1000;
    fs[2].invocations = 0;  // calc saw no entry: the stacks still say it was called
    const std::vector<LayoutBranch> direct = {{0, 0x10, 1, 0, 400, true, false}, {0, 0x08, 0, 0x20, 77, false, false}};
    const std::vector<StackCallSite> sites = {
        {0, 0x10, 1, 5},   // the direct site: already recorded, left alone
        {0, 0x30, 1, 9},   // two indirect sites into handler_a: 600 entries left, split 9:3
        {0, 0x50, 1, 3},
        {0, 0x30, 2, 4},   // handler_b: at least one call per sample
    };
    const auto out = stack_call_records(fs, direct, sites);
    REQUIRE(out.size() == 3);
    CHECK(out[0].from == 0);
    CHECK(out[0].from_offset == 0x30);
    CHECK(out[0].to == 1);
    CHECK(out[0].to_offset == 0);
    CHECK(out[0].call);
    CHECK(out[0].count == doctest::Approx(450));
    CHECK(out[1].from_offset == 0x50);
    CHECK(out[1].count == doctest::Approx(150));
    CHECK(out[2].to == 2);
    CHECK(out[2].count == doctest::Approx(4));
}
