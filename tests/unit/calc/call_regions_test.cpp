// A loop with calls estimated together with the leaves it calls
// (call_regions.h, issue 36). The hand-made procedures are shaped as
// bench/accuracy/calls.c's: a loop calling square and clamp directly and one
// of square, twice and clamp through a table, with the cycles of each
// iteration landing partly in the callees (a call's wait on the callee's
// first instruction) and partly after the calls in the loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/call_regions.h"
#include "ecpi/analyze/symbols/symbolizer.h"

using namespace ecpi::analyze;

namespace {

constexpr double kPeriodCycles = 1000;  // cycles a sample stands for
constexpr double kIterations = 1e6;     // the loop's true count
constexpr CallCosts kCalls{4.1, 5.5};   // the model's call_return_cycles, indirect_call_return_cycles

constexpr std::uint64_t kSquare = 0x11c0, kTwice = 0x11d0, kClamp = 0x11e0, kCaller = 0x1240, kMain = 0x1300;
constexpr std::uint64_t kHeader = 0x1260;

// A leaf with `cycles_per_call` of the region's cycles landing on it, called
// `calls_per_iteration` times an iteration, timed `best` cycles a call.
CalcProcedure leaf(std::uint64_t start, double cycles_per_call, double calls_per_iteration, double best) {
    CalcProcedure p;
    p.start = start;
    p.end = start + 0x10;
    p.samples = static_cast<std::uint64_t>(std::lround(cycles_per_call * calls_per_iteration * kIterations / kPeriodCycles));
    p.best_cycles_per_call = best;
    p.invocations = p.samples * kPeriodCycles / best;  // alone: its samples over its own best case
    return p;
}

// The loop with its three calls (the third indirect) keeping `own_cycles`
// of each iteration's cycles on its own instructions.
CalcProcedure caller(double own_cycles) {
    CalcProcedure p;
    p.start = kCaller;
    p.end = kCaller + 0x70;
    CalcLoop loop;
    loop.header = kHeader;
    loop.straight = true;
    loop.best_cycles = 2.8;
    loop.samples = static_cast<std::uint64_t>(std::lround(own_cycles * kIterations / kPeriodCycles));
    loop.calls = {{0x1263, kSquare}, {0x126e, kClamp}, {0x1290, 0}};
    p.loops.push_back(loop);
    p.samples = loop.samples;
    for (const auto& [site, target] : loop.calls) p.call_sites.push_back({site, target, 0, false});
    return p;
}

CalcProcedure main_calling(std::uint64_t target) {
    CalcProcedure p;
    p.start = kMain;
    p.end = kMain + 0x40;
    p.call_sites.push_back({kMain + 0x10, target, 0, false});
    return p;
}

struct Program {
    std::vector<CalcProcedure> procs;
    std::vector<RegionProcedure> view() const {
        std::vector<RegionProcedure> v;
        for (const auto& p : procs) v.push_back({0, &p});
        return v;
    }
};

// calls.c's shape: 13.7 cycles an iteration (the model's bound for two
// direct calls and an indirect one), of which the loop keeps 5.37 and the
// callees hold the rest, twice 5 cycles a call against its 0.5-cycle body.
Program calls_program() {
    Program prog;
    prog.procs.push_back(main_calling(kCaller));
    prog.procs.push_back(caller(5.37));
    prog.procs.push_back(leaf(kSquare, 2.0, 4.0 / 3, 0.5));
    prog.procs.push_back(leaf(kTwice, 5.0, 1.0 / 3, 0.5));
    prog.procs.push_back(leaf(kClamp, 3.0, 4.0 / 3, 1.0));
    return prog;
}

double count_at(const ProcedureRegion& r, std::uint64_t address) {
    for (const auto& [a, executions] : r.counts)
        if (a == address) return executions;
    return -1;
}

}  // namespace

TEST_CASE("a loop and the leaves it calls are one region: cycles that moved between them cancel") {
    const Program prog = calls_program();
    // Each procedure alone (its samples over its own best case) is off both ways.
    CHECK(prog.procs[3].invocations > 9 * kIterations / 3);   // twice: 10x
    CHECK(prog.procs[4].invocations > 2 * 4 * kIterations / 3);  // clamp: 3x
    const auto regions = call_region_counts(prog.view(), kCalls, kPeriodCycles);
    REQUIRE(regions.size() == 1);  // the caller; not main, and no leaf (below)
    CHECK(!regions.contains(0));
    const ProcedureRegion& loop = regions.at(1);
    CHECK(loop.loop);
    CHECK(count_at(loop, kHeader) == doctest::Approx(kIterations).epsilon(0.01));
    CHECK(loop.best_cycles.at(kHeader) == doctest::Approx(2 * kCalls.direct + kCalls.indirect));
    // The table's call may reach any of the three leaves, and nothing says
    // how often each: every one of them keeps its own count (an equal share
    // would be exact here only because calls.c calls them in turn).
    CHECK(!regions.contains(2));
    CHECK(!regions.contains(3));
    CHECK(!regions.contains(4));
    // Where the samples sit does not matter: the loop keeping twice as much
    // of the same total gives the same counts.
    Program moved = calls_program();
    moved.procs[1] = caller(5.37 + 2.0);
    moved.procs[4] = leaf(kClamp, 1.5, 4.0 / 3, 1.0);
    const auto again = call_region_counts(moved.view(), kCalls, kPeriodCycles);
    CHECK(count_at(again.at(1), kHeader) == doctest::Approx(kIterations).epsilon(0.01));
}

TEST_CASE("a region's best case an iteration is its instructions' where they exceed the calls' bound") {
    RegionLoop loop;
    loop.samples = 1000;
    loop.best_cycles = 20;
    loop.direct = {0x10};
    const RegionCallee callee{0x10, 1000, 10};
    const auto r = region_counts(loop, std::span(&callee, 1), {}, kCalls);
    REQUIRE(r.has_value());
    CHECK(r->best_cycles == doctest::Approx(30));  // not the call's 4.1
    CHECK(r->iterations == doctest::Approx(2000.0 / 30));
    CHECK(r->entries.front().second == doctest::Approx(2000.0 / 30));
    // A direct target the region does not know: no count.
    loop.direct = {0x20};
    CHECK(!region_counts(loop, std::span(&callee, 1), {}, kCalls).has_value());
}

TEST_CASE("no region where a callee has callers outside the loop, or the image has other indirect calls") {
    SUBCASE("square also called from main") {
        Program prog = calls_program();
        prog.procs[0].call_sites.push_back({kMain + 0x20, kSquare, 0, false});
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("another indirect call in the image") {
        Program prog = calls_program();
        prog.procs[0].call_sites.push_back({kMain + 0x20, 0, 0, false});
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("a callee that calls") {
        Program prog = calls_program();
        prog.procs[2].call_sites.push_back({kSquare + 4, kMain, 0, false});
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("a callee with a loop: its cost a call is what its trips take") {
        Program prog = calls_program();
        prog.procs[4].loops.push_back(CalcLoop{});
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("a callee that jumps to other code (a tail call)") {
        Program prog = calls_program();
        prog.procs[2].tail_jumps = true;
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("a loop whose blocks do not all run once an iteration") {
        Program prog = calls_program();
        prog.procs[1].loops.front().straight = false;
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("a loop register progress measured keeps its count") {
        Program prog = calls_program();
        prog.procs[1].loops.front().anchored = true;
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
    SUBCASE("a leaf two loops call") {
        Program prog = calls_program();
        CalcProcedure other = caller(4.0);
        other.start = 0x1400;
        other.loops.front().header = 0x1410;
        other.loops.front().calls = {{0x1413, kClamp}};
        other.call_sites = {{0x1413, kClamp, 0, false}};
        prog.procs.push_back(other);
        // clamp's calls come from both loops: neither loop's samples and
        // cycles account for it alone.
        CHECK(call_region_counts(prog.view(), kCalls, kPeriodCycles).empty());
    }
}

namespace {

// data/cfgtest.c's mixed(): a loop calling halve() directly and halve() or
// negate() through a table, analyzed as run_calc does: each procedure
// alone, then again with what its region gives it.
struct Mixed {
    SymbolTable table;
    ImageBytes image;
    MachineModel model;

    static Mixed open() {
        auto table = SymbolTable::from_elf(ECPI_CFGTEST_GCC);
        REQUIRE(table.ok());
        auto image = ImageBytes::open(ECPI_CFGTEST_GCC);
        REQUIRE(image.ok());
        auto model = MachineModel::load("x86_64-zen5");
        REQUIRE(model.ok());
        return {std::move(*table), std::move(*image), std::move(*model)};
    }

    const Symbol& symbol(const std::string& name) const {
        for (const auto& s : table.symbols())
            if (s.name == name) return s;
        FAIL("no symbol " << name);
        throw std::logic_error("unreachable");
    }

    ProcedureInput input(const std::string& name, std::map<std::uint64_t, std::uint64_t> samples) const {
        const Symbol& s = symbol(name);
        ProcedureInput in;
        in.name = name;
        in.start = s.start;
        in.end = table.end_of(s);
        in.image = &image;
        in.samples = std::move(samples);
        return in;
    }
};

const CalcBlock* block_at(const CalcProcedure& p, std::uint64_t address) {
    for (const auto& b : p.blocks)
        if (b.address == address) return &b;
    return nullptr;
}

}  // namespace

TEST_CASE("a region from real code: the loop and its leaves analyzed again at the region's counts") {
    const Mixed m = Mixed::open();
    const std::uint64_t halve = m.symbol("halve").start, negate = m.symbol("negate").start;
    // Most of the loop's samples sit on its first instruction after a call;
    // the leaves' on their first instruction (a call's wait lands there).
    auto first = analyze_procedure(m.input("mixed", {{m.symbol("mixed").start, 1}}), m.model,
                                   kPeriodCycles);  // loops are found in sampled procedures
    REQUIRE(first.ok());
    REQUIRE(first->loops.size() == 1);
    const CalcLoop& loop = first->loops.front();
    REQUIRE(loop.calls.size() == 2);
    std::uint64_t after_call = 0;
    for (const auto& i : first->instructions)
        if (i.address > loop.calls.front().first && after_call == 0) after_call = i.address;
    std::vector<ProcedureInput> inputs = {m.input("mixed", {{after_call, 3000}, {loop.header, 200}}),
                                          m.input("halve", {{halve, 2000}}), m.input("negate", {{negate, 1600}})};
    std::vector<CalcProcedure> alone;
    for (const auto& in : inputs) {
        auto p = analyze_procedure(in, m.model, kPeriodCycles);
        REQUIRE(p.ok());
        alone.push_back(std::move(*p));
    }
    const CalcLoop& l = alone[0].loops.front();
    CHECK(l.straight);
    CHECK(l.best_cycles > 0);
    CHECK(std::count_if(l.calls.begin(), l.calls.end(), [](const auto& c) { return c.second == 0; }) == 1);
    std::vector<RegionProcedure> view;
    for (const auto& p : alone) view.push_back({0, &p});
    const auto regions = call_region_counts(
        view, {m.model.call_return_cycles(), m.model.indirect_call_return_cycles()}, kPeriodCycles);
    // The loop only: both leaves are the table's possible targets.
    REQUIRE(regions.size() == 1);
    const double iterations = count_at(regions.at(0), l.header);
    const double best = regions.at(0).best_cycles.at(l.header);
    CHECK(best >= m.model.call_return_cycles() + m.model.indirect_call_return_cycles());
    CHECK(iterations == doctest::Approx((3200.0 + 2000 + 1600) * kPeriodCycles / best));
    // (Alone, the loop came out at 333,333 iterations against the region's
    // 708,333.) Analyzed again: the loop's block takes the region's count,
    // rated low, and its range still holds it.
    for (std::size_t k = 0; k < regions.size(); ++k) {
        ProcedureInput in = inputs[k];
        in.region = regions.at(k).counts;
        in.region_loop = regions.at(k).loop;
        auto again = analyze_procedure(in, m.model, kPeriodCycles);
        REQUIRE(again.ok());
        const auto& [address, executions] = in.region.front();
        const CalcBlock* b = block_at(*again, address);
        REQUIRE(b != nullptr);
        CAPTURE(k);
        CHECK(b->source == EstimateSource::kCallRegion);
        CHECK(b->confidence == Confidence::kLow);
        CHECK(b->executions == doctest::Approx(executions).epsilon(0.01));
        CHECK(b->executions_min <= b->executions);
        CHECK(b->executions_max >= b->executions);
        CHECK(!again->entry_from_region);
        if (k == 0) CHECK(again->loops.front().from_region);
    }
}

TEST_CASE("no region where the split of the indirect calls over their targets decides its best case") {
    // A loop of 2 cycles with one call through a table whose targets take
    // 1 and 40 cycles a call: the region's best case an iteration is 8.5 or
    // 42 by where the calls go, and nothing in the code says.
    RegionLoop loop;
    loop.samples = 100;
    loop.best_cycles = 2;
    loop.indirect = 1;
    const std::vector<RegionCallee> callees = {{0x10, 500, 1}, {0x20, 500, 40}};
    const std::vector<std::uint64_t> targets = {0x10, 0x20};
    CHECK(!region_counts(loop, callees, targets, kCalls).has_value());
    // Targets alike, within the calls' bound: the loop's count, no target's.
    const std::vector<RegionCallee> alike = {{0x10, 500, 1}, {0x20, 500, 1.5}};
    const auto r = region_counts(loop, alike, targets, kCalls);
    REQUIRE(r.has_value());
    CHECK(r->best_cycles == doctest::Approx(kCalls.indirect));
    CHECK(r->iterations == doctest::Approx(1100 / kCalls.indirect));
    CHECK(r->entries.empty());
}

namespace {

// The table call's site in calls_program() with snapshots per target.
void snapshots_decide(Program& prog, std::vector<std::pair<std::uint64_t, std::uint32_t>> targets, bool decided) {
    for (CalcCallSite& site : prog.procs[1].call_sites)
        if (site.target == 0) {
            site.targets_seen = std::move(targets);
            site.decided = decided;
        }
}

}  // namespace

TEST_CASE("where snapshots decide a table call's targets, every leaf's entries are its calls': direct and its share") {
    SUBCASE("the table's calls split as its snapshots saw them (here not equally)") {
        Program prog = calls_program();
        snapshots_decide(prog, {{kSquare, 600}, {kTwice, 300}, {kClamp, 1500}}, true);
        const auto regions = call_region_counts(prog.view(), kCalls, kPeriodCycles);
        REQUIRE(regions.size() == 4);  // the caller and its three leaves
        const double iterations = count_at(regions.at(1), kHeader);
        CHECK(iterations == doctest::Approx(kIterations).epsilon(0.01));
        CHECK(!regions.at(2).loop);
        CHECK(count_at(regions.at(2), kSquare) == doctest::Approx(1.25 * iterations));
        CHECK(count_at(regions.at(3), kTwice) == doctest::Approx(0.125 * iterations));
        CHECK(count_at(regions.at(4), kClamp) == doctest::Approx(1.625 * iterations));
        // The calls into the leaves add up to the loop's calls: flow is conserved across them.
        CHECK(count_at(regions.at(2), kSquare) + count_at(regions.at(3), kTwice) + count_at(regions.at(4), kClamp) ==
              doctest::Approx(3 * iterations));
    }
    SUBCASE("a target no snapshot saw is not a target: it keeps its own count") {
        Program prog = calls_program();
        snapshots_decide(prog, {{kSquare, 1000}, {kClamp, 1000}}, true);
        const auto regions = call_region_counts(prog.view(), kCalls, kPeriodCycles);
        CHECK(!regions.contains(3));
        CHECK(count_at(regions.at(2), kSquare) == doctest::Approx(1.5 * count_at(regions.at(1), kHeader)));
    }
    SUBCASE("too few snapshots, or a target with a caller outside the loop: the leaves keep their own counts") {
        Program few = calls_program();
        snapshots_decide(few, {{kSquare, 100}, {kTwice, 100}, {kClamp, 100}}, false);
        const auto undecided = call_region_counts(few.view(), kCalls, kPeriodCycles);
        CHECK(undecided.size() == 1);
        CHECK(!undecided.contains(3));
        Program called = calls_program();
        snapshots_decide(called, {{kSquare, 1000}, {kTwice, 1000}, {kClamp, 1000}}, true);
        called.procs[0].call_sites.push_back({kMain + 0x20, kTwice, 0, false});
        const auto elsewhere = call_region_counts(called.view(), kCalls, kPeriodCycles);
        CHECK(!elsewhere.contains(3));
        CHECK(!elsewhere.contains(2));
    }
}
