// AutoFDO profiles from hand-made inline stacks and block counts: counts on
// line offsets and base discriminators, the highest per location, direct
// call targets, inlined frames nested at their call sites, LLVM's text.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ecpi/analyze/layout/layout.h"
#include "ecpi/analyze/pgo/afdo.h"

using namespace ecpi::analyze;
namespace store = ecpi::store;

namespace {

// A function `name` whose first line is `decl`, executing `line`.
AfdoFrame frame(const char* name, int decl, int line, std::uint32_t discriminator = 0) {
    return {name, decl, line, discriminator};
}

AfdoInstruction at(std::vector<AfdoFrame> frames, double count, const char* call = "") {
    return {std::move(frames), count, call};
}

// LLVM's prefix encoding of a discriminator component (DILocation's
// encodeComponent): 5 bits as U << 1, 12 bits with the 0x20 continuation.
std::uint32_t encode(std::uint32_t u) { return u > 0x1f ? (((u & 0xfe0) << 1) | (u & 0x1f) | 0x20) << 1 : u << 1; }
std::uint32_t component_bits(std::uint32_t u) { return u > 0x1f ? 14 : 7; }

}  // namespace

TEST_CASE("base discriminators are decoded as clang reads them back") {
    CHECK(afdo_base_discriminator(0) == 0);
    CHECK(afdo_base_discriminator(encode(3)) == 3);
    CHECK(afdo_base_discriminator(encode(40)) == 40);
    CHECK(afdo_base_discriminator(1) == 0);  // low bit set: no base discriminator
    // Base 2 with a duplication factor of 4 (an unrolled copy): the factor is not part of the base.
    CHECK(afdo_base_discriminator(encode(2) | (encode(4) << component_bits(2))) == 2);
    CHECK(afdo_base_discriminator(encode(40) | (encode(8) << component_bits(40))) == 40);
}

TEST_CASE("counts land on line offsets and discriminators, the highest per location") {
    const std::vector<AfdoInstruction> insns = {
        at({frame("f", 10, 12)}, 100),
        at({frame("f", 10, 12)}, 40),             // another block of line 12: the line keeps 100
        at({frame("f", 10, 13, encode(3))}, 7),   // line 13, discriminator 3
        at({frame("f", 10, 13, encode(3) | (encode(2) << 7))}, 9),  // an unrolled copy of 13.3
        at({frame("f", 10, 13)}, 60),
        at({frame("f", 10, 0)}, 500),             // line 0: compiler-made code, no weight
        at({frame("f", 10, 20)}, 0.2),            // rounds to no execution: left out
    };
    const AfdoFunction f = afdo_function("f", 5, insns);
    CHECK(f.name == "f");
    CHECK(f.head == 5);
    REQUIRE(f.body.size() == 3);
    CHECK(f.body.at({2, 0}) == 100);
    CHECK(f.body.at({3, 3}) == 9);
    CHECK(f.body.at({3, 0}) == 60);
    CHECK(f.total == 169);
    CHECK(f.inlined.empty());
}

TEST_CASE("direct calls name their targets at the call's location, copies adding up") {
    const std::vector<AfdoInstruction> insns = {
        at({frame("main", 1, 4)}, 9, "work"),
        at({frame("main", 1, 4)}, 9, "work"),     // the same call, unrolled
        at({frame("main", 1, 4)}, 3, "other"),
        at({frame("main", 1, 5)}, 9),
    };
    const AfdoFunction f = afdo_function("main", 1, insns);
    CHECK(f.body.at({3, 0}) == 9);
    CHECK(f.calls.at({3, 0}).at("work") == 18);
    CHECK(f.calls.at({3, 0}).at("other") == 3);
    CHECK_FALSE(f.calls.contains({4, 0}));
}

TEST_CASE("inlined frames nest at their call sites, with totals bottom-up") {
    // f (line 10) calls g at line 15 (discriminator 2); g (line 50) calls h
    // at line 53; h (line 70) runs line 71.
    const std::vector<AfdoInstruction> insns = {
        at({frame("f", 10, 11)}, 4),
        at({frame("f", 10, 15, encode(2)), frame("g", 50, 52)}, 30),
        at({frame("f", 10, 15, encode(2)), frame("g", 50, 53), frame("h", 70, 71)}, 25),
        at({frame("f", 10, 16), frame("g", 50, 52)}, 6),  // another inlined copy of g
    };
    const AfdoFunction f = afdo_function("f", 4, insns);
    CHECK(f.body.size() == 1);
    const AfdoFunction& g = f.inlined.at({5, 2}).at("g");
    CHECK(g.name == "g");
    CHECK(g.body.at({2, 0}) == 30);
    const AfdoFunction& h = g.inlined.at({3, 0}).at("h");
    CHECK(h.body.at({1, 0}) == 25);
    CHECK(h.total == 25);
    CHECK(g.total == 55);
    CHECK(f.inlined.at({6, 0}).at("g").total == 6);
    CHECK(f.total == 4 + 55 + 6);
}

TEST_CASE("the text is LLVM's sample profile format") {
    AfdoProfile profile;
    profile.functions.push_back(afdo_function(
        "f", 4,
        {at({frame("f", 10, 11)}, 4, "work"), at({frame("f", 10, 13, encode(3))}, 7),
         at({frame("f", 10, 15, encode(2)), frame("_Z1gi", 50, 52)}, 30),
         at({frame("f", 10, 15, encode(2)), frame("_Z1gi", 50, 53), frame("h", 70, 71)}, 25)}));
    profile.functions.push_back(afdo_function("cold", 0, {at({frame("cold", 1, 2)}, 0)}));
    CHECK(render_afdo_text(profile) ==
          "f:66:4\n"
          " 1: 4 work:4\n"
          " 3.3: 7\n"
          " 5.2: _Z1gi:55\n"
          "  2: 30\n"
          "  3: h:25\n"
          "   1: 25\n");
}

TEST_CASE("static functions of different files under one name are told apart from one function's parts") {
    auto in = [](const char* file, int decl, int line) {
        AfdoFrame f = frame("helper", decl, line);
        f.decl_file = file;
        return at({f}, 10);
    };
    // One function: its instructions, inlined frames below it, and its split-off cold part all share a declaration.
    AfdoInstruction inlined = in("a.c", 3, 5);
    inlined.frames.push_back(frame("step", 20, 21));
    CHECK_FALSE(afdo_shares_name({in("a.c", 3, 4), inlined, in("a.c", 3, 9)}));
    CHECK_FALSE(afdo_shares_name({}));
    // `static int helper` in a.c and in b.c: the same name, another file (same first line) or another first line.
    CHECK(afdo_shares_name({in("a.c", 3, 4), in("b.c", 3, 4)}));
    CHECK(afdo_shares_name({in("a.c", 3, 4), in("a.c", 30, 31)}));
}

namespace {

// A stack of (image, offset) frames, leaf first.
ecpi::store::StackSample stack(std::vector<std::pair<std::uint32_t, std::uint64_t>> frames, std::uint64_t count) {
    ecpi::store::StackSample s;
    for (const auto& [image, offset] : frames) s.frames.push_back({image, offset});
    s.count = count;
    return s;
}

// A byte-code interpreter's image: run() at 0x2000 calls its handlers
// through a table (call *%rax at 0x2040, returning to 0x2043) and main() at
// 0x3000 calls run() directly (0x3010, returning to 0x3015).
std::string vm_function_at(std::uint64_t address) {
    if (address >= 0x1000 && address < 0x1100) return "op_add";
    if (address >= 0x1100 && address < 0x1200) return "op_mul";
    if (address >= 0x2000 && address < 0x2100) return "run";
    if (address >= 0x3000 && address < 0x3100) return "main";
    return "";
}

}  // namespace

TEST_CASE("calls on -g stacks: the caller's call instruction and the callee's function") {
    ecpi::store::StackProfile stacks;
    stacks.images = {{"[kernel]", ""}, {"/opt/vm", "ab"}, {"/lib/libc.so.6", "cd"}};
    const std::map<std::uint64_t, std::uint64_t> call_at_return = {{0x2043, 0x2040}, {0x3015, 0x3010}};
    stacks.stacks = {
        stack({{1, 0x1010}, {1, 0x2043}, {1, 0x3015}}, 5),              // op_add <- run <- main
        stack({{0, 0xffff}, {1, 0x1100}, {1, 0x2043}, {1, 0x3015}}, 3),  // a kernel frame, then op_mul's first byte
        stack({{2, 0x500}, {1, 0x1200}, {1, 0x2043}}, 2),               // in libc, called from op_mul's last byte
        stack({{1, 0x1010}, {1, 0x2043}, {1, 0x1010}, {1, 0x2043}}, 4),  // op_add reentered: counted once
        stack({{1, 0x1010}, {1, 0x2099}}, 7),                           // a return address of no known call
        stack({{1, 0x1010}, {2, 0x2043}}, 6),                           // a caller in another image
    };
    const std::vector<AfdoStackCall> calls = afdo_stack_calls(stacks, "/opt/vm", call_at_return, vm_function_at);
    REQUIRE(calls.size() == 3);
    CHECK(calls[0].call == 0x2040);
    CHECK(calls[0].target == "op_add");
    CHECK(calls[0].samples == 9);
    CHECK(calls[1].call == 0x2040);
    CHECK(calls[1].target == "op_mul");  // 0x1200 is a return address: the call ends op_mul
    CHECK(calls[1].samples == 5);
    CHECK(calls[2].call == 0x3010);
    CHECK(calls[2].target == "run");
    CHECK(calls[2].samples == 8);
}

TEST_CASE("an indirect call's targets are their entries through it, not their samples") {
    // op_mul runs 4x longer a call than op_add: 600 calls of op_add take 10
    // samples under the call at 0x2040, 200 calls of op_mul 30 there; op_mul
    // has 200 more entries through another call (0x2080), seen in as many samples.
    const std::vector<AfdoStackCall> calls = {
        {0x2040, "op_add", 10}, {0x2040, "op_mul", 30}, {0x2080, "op_mul", 30},
        {0x2090, "op_neg", 1},  {0x2090, "op_xor", 3},  {0x20a0, "op_neg", 2}, {0x20a0, "op_pop", 6},
    };
    const auto targets = afdo_call_targets(calls, {{"op_add", 600}, {"op_mul", 400}, {"op_xor", 48}, {"op_pop", 0}},
                                           {{0x2040, 5}, {0x20a0, 80}});
    CHECK(targets.at(0x2040).at("op_add") == doctest::Approx(600));
    CHECK(targets.at(0x2040).at("op_mul") == doctest::Approx(200));
    CHECK(targets.at(0x2080).at("op_mul") == doctest::Approx(200));
    // op_neg's entries are unknown: its samples at op_xor's 16 calls per sample.
    CHECK(targets.at(0x2090).at("op_xor") == doctest::Approx(48));
    CHECK(targets.at(0x2090).at("op_neg") == doctest::Approx(16));
    // No target's entries known: the call's own 80 executions split by samples.
    CHECK(targets.at(0x20a0).at("op_neg") == doctest::Approx(20));
    CHECK(targets.at(0x20a0).at("op_pop") == doctest::Approx(60));
    CHECK(targets.size() == 4);
}

TEST_CASE("an indirect call site lists its targets, and counts at least their calls") {
    AfdoInstruction dispatch = at({frame("run", 10, 14)}, 1000);
    dispatch.indirect_targets = {{"op_add", 750}, {"op_mul", 250}, {"op_neg", 0.3}};
    AfdoInstruction copy = at({frame("run", 10, 14)}, 200);  // the same call, peeled out of the loop
    copy.indirect_targets = {{"op_add", 200}};
    AfdoInstruction undercounted = at({frame("run", 10, 16)}, 10);  // the flow saw fewer runs than calls
    undercounted.indirect_targets = {{"op_add", 90}, {"op_mul", 30}};
    AfdoProfile profile;
    profile.functions.push_back(
        afdo_function("run", 1, {dispatch, copy, undercounted, at({frame("run", 10, 12)}, 1000)}));
    CHECK(render_afdo_text(profile) ==
          "run:2120:1\n"
          " 2: 1000\n"
          " 4: 1000 op_add:950 op_mul:250\n"  // op_neg's 0.3 calls round to none
          " 6: 120 op_add:90 op_mul:30\n");
}

namespace {

// wordfreq's scan loop as calc saw it (the recording of 2026-11-26, samples
// and counts rounded): the header (block 0) and latch (block 3) measured by
// register progress at 1.117e8 iterations; the word side (block 1) and the
// word-ending side (block 2, add_word's probes, stalling on the table) are
// ranges the samples cannot decide, their points the split calc's own flow
// chose. The loop is entered once and left once.
CalcProcedure scan_loop() {
    CalcProcedure p;
    const double iterations = 1.117e8;
    p.blocks.resize(4);
    p.instructions.resize(4);
    const std::uint64_t samples[] = {121, 271, 589, 100};
    const double best[] = {1.5, 4, 12, 1};
    for (std::uint32_t b = 0; b < 4; ++b) {
        p.blocks[b].index = b;
        p.blocks[b].first = b;
        p.blocks[b].count = 1;
        p.blocks[b].samples = samples[b];
        p.blocks[b].best_cycles = best[b];
        p.instructions[b].address = 0x10 * (b + 1);
    }
    for (std::uint32_t b : {0u, 3u}) {
        p.blocks[b].executions = p.blocks[b].executions_min = p.blocks[b].executions_max = iterations;
        p.blocks[b].confidence = Confidence::kMeasured;
    }
    p.blocks[1].executions = 5.73e7;
    p.blocks[1].executions_min = 6.4e6;
    p.blocks[2].executions = 5.44e7;
    p.blocks[2].executions_min = 3.9e4;
    for (std::uint32_t b : {1u, 2u}) {
        p.blocks[b].ranged = true;
        p.blocks[b].executions_max = iterations;
    }
    p.edges = {{kEntryBlock, 0, EdgeKind::kEntry, 0, 40},      {0, 1, EdgeKind::kBranch, 0, 5.73e7},
               {0, 2, EdgeKind::kFallThrough, 0, 5.44e7},       {1, 3, EdgeKind::kFallThrough, 0, 5.73e7},
               {2, 3, EdgeKind::kJump, 0, 5.44e7},              {3, 0, EdgeKind::kBranch, 0, iterations - 40},
               {3, kExitBlock, EdgeKind::kFallThrough, 0, 40}};
    // The header's jump: 54 of 61 snapshots went to the word side.
    p.branches = {{0x10, 54, 61, false}};
    return p;
}

}  // namespace

TEST_CASE("the profile's flow keeps the counts calc measured") {
    const double period = 591632;
    const CalcProcedure p = scan_loop();
    // Re-estimated from its samples, the measured loop gives way to its
    // stalling side (the export before: 78.8 M iterations of 111.7 M).
    const std::vector<double> relaxed = layout_counts(p, period, LayoutCountSource::kFlow).blocks;
    CHECK(relaxed[0] < 0.9 * 1.117e8);
    // Held: the header and latch keep calc's count, the sides share it.
    const std::vector<double> held = afdo_block_counts(p, period);
    CHECK(held[0] == doctest::Approx(1.117e8).epsilon(0.001));
    CHECK(held[3] == doctest::Approx(1.117e8).epsilon(0.001));
    CHECK(held[1] + held[2] == doctest::Approx(1.117e8).epsilon(0.001));
    // An anchored branch's edges keep calc's split too.
    CalcProcedure anchored = scan_loop();
    anchored.branches[0].anchored = true;
    anchored.edges[1].executions = 9.6e7;
    anchored.edges[2].executions = 1.57e7;
    const std::vector<double> split = afdo_block_counts(anchored, period);
    CHECK(split[1] == doctest::Approx(9.6e7).epsilon(0.001));
    CHECK(split[2] == doctest::Approx(1.57e7).epsilon(0.001));
}

namespace {

// jsonq's arena_alloc (issue 36), reduced: the entry's guard jumps to an
// unsampled slow path that ends in a call to exit (out of memory); the
// common side, sampled, returns. Register snapshots evaluated the guard
// 19 times and never saw it taken.
CalcProcedure guarded_exit() {
    CalcProcedure p;
    p.blocks.resize(3);
    p.instructions.resize(3);
    const std::uint64_t samples[] = {55, 0, 48};
    const double best[] = {1.5, 3.5, 1.5};
    for (std::uint32_t b = 0; b < 3; ++b) {
        p.blocks[b].index = b;
        p.blocks[b].first = b;
        p.blocks[b].count = 1;
        p.blocks[b].samples = samples[b];
        p.blocks[b].best_cycles = best[b];
        p.blocks[b].executions = b == 1 ? 0 : 7.475e6;
        p.instructions[b].address = 0x10 * (b + 1);
    }
    p.edges = {{kEntryBlock, 0, EdgeKind::kEntry, 0, 7.475e6}, {0, 1, EdgeKind::kBranch, 0, 0},
               {0, 2, EdgeKind::kFallThrough, 0, 7.475e6},     {1, kExitBlock, EdgeKind::kNoReturn, 0, 0},
               {2, kExitBlock, EdgeKind::kReturn, 0, 7.475e6}};
    p.branches = {{0x10, 0, 19, false}};
    return p;
}

}  // namespace

// An edge no snapshot chose is evidence that it ran less often than the
// other, not a share of 1 / (n + 2): stated as one pseudo-snapshot, the
// flow put a quarter of that share (~89,000 executions) on the unsampled
// out-of-memory exit, which never ran.
TEST_CASE("the profile's flow puts no count on a side no snapshot or sample saw") {
    const double period = 415284;
    const std::vector<double> counts = afdo_block_counts(guarded_exit(), period);
    CHECK(counts[1] < 100);
    CHECK(counts[2] == doctest::Approx(7.475e6).epsilon(0.01));
    // One snapshot of 20 taken: the side takes its share again.
    CalcProcedure seen = guarded_exit();
    seen.branches[0] = {0x10, 1, 20, false};
    const std::vector<double> shared = afdo_block_counts(seen, period);
    CHECK(shared[1] > 1e5);
}

TEST_CASE("an epoch without register snapshots of the image is said to give counts from samples alone") {
    const store::ImageId app{"/usr/bin/app", "ab12"};
    const store::ImageId lib{"/usr/lib/libz.so.1", "cd34"};
    store::EpochContents contents;
    // A daemon's default: no snapshots at all.
    std::string w = missing_registers_warning(contents, "cpu-clock", app);
    CHECK(w.find("no register snapshots of /usr/bin/app for cpu-clock") != std::string::npos);
    CHECK(w.find("--registers N") != std::string::npos);
    // Snapshots of another image, or of the image under another event, do not anchor it.
    store::RegisterProfile r;
    r.event = "cpu-clock";
    r.images = {lib, app};
    r.samples.push_back({.pid = 7, .tid = 7, .time_ns = 1, .image = 0, .offset = 0x1000, .regs = {}});
    contents.registers.push_back(r);
    store::RegisterProfile other = r;
    other.event = "task-clock";
    other.samples[0].image = 1;
    contents.registers.push_back(other);
    CHECK_FALSE(missing_registers_warning(contents, "cpu-clock", app).empty());
    // One snapshot of the image is enough to say nothing.
    contents.registers[0].samples.push_back({.pid = 7, .tid = 7, .time_ns = 2, .image = 1, .offset = 0x2000, .regs = {}});
    CHECK(missing_registers_warning(contents, "cpu-clock", app).empty());
    // An image index past the table is not the image.
    contents.registers[0].samples.back().image = 9;
    CHECK_FALSE(missing_registers_warning(contents, "cpu-clock", app).empty());
}
