// Natural loops and induction variables on GCC's and Clang's output of
// data/loops.c at -O1..-O3, and on hand-made graphs.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/loops.h"
#include "hand_code.h"
#include "test_cfg.h"

using namespace ecpi::analyze;
using test::cfg_of;
using test::hand_assembled;
using test::wordfreq_count_words;

namespace {

std::vector<std::string> libraries() {
    std::vector<std::string> v;
    std::stringstream list(ECPI_LOOPS_LIBS);
    for (std::string item; std::getline(list, item, ':');) v.push_back(item);
    return v;
}

// The induction variables of the loops holding a load (the loops that do the work).
std::vector<InductionVariable> ivs_of_working_loops(const Cfg& cfg, const LoopInfo& info) {
    std::vector<InductionVariable> out;
    for (const auto& iv : info.induction) {
        bool loads = false;
        for (auto b : info.loops[iv.loop].blocks)
            for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i) loads = loads || cfg.instructions[cfg.blocks[b].first + i].loads;
        if (loads) out.push_back(iv);
    }
    return out;
}

}  // namespace

TEST_CASE("loops: counted, down-counting and pointer-stride loops have an induction variable at every -O level") {
    REQUIRE(libraries().size() >= 3);
    for (const auto& lib : libraries()) {
        for (const char* fn : {"chase", "sum_array", "sum_keys", "checksum"}) {
            CAPTURE(lib);
            CAPTURE(fn);
            Cfg cfg = cfg_of(lib, fn);
            LoopInfo info = find_loops(cfg);
            REQUIRE(!info.loops.empty());
            auto ivs = ivs_of_working_loops(cfg, info);
            REQUIRE(!ivs.empty());
            for (const auto& iv : ivs) {
                CHECK(iv.step != 0);
                CHECK((iv.width == 4 || iv.width == 8));
                CHECK(iv.gp != 4);  // never rsp
                const Loop& loop = info.loops[iv.loop];
                // Runs once per iteration: in the loop, in no nested loop,
                // dominating every latch.
                CHECK(loop.contains(iv.block));
                CHECK(info.innermost[iv.block] == iv.loop);
                for (auto latch : loop.latches) CHECK(dominates(info, iv.block, latch));
            }
        }
    }
}

TEST_CASE("loops: the chase's loop steps its counter by one per iteration unless unrolled") {
    for (const auto& lib : libraries()) {
        CAPTURE(lib);
        Cfg cfg = cfg_of(lib, "chase");
        LoopInfo info = find_loops(cfg);
        auto ivs = ivs_of_working_loops(cfg, info);
        REQUIRE(!ivs.empty());
        // Each load of next[p] in the loop is one source iteration: the
        // counter's step is as many source iterations as the loop body holds.
        std::int64_t loads = 0;
        for (auto b : info.loops[ivs.front().loop].blocks)
            for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i) loads += cfg.instructions[cfg.blocks[b].first + i].loads;
        bool some_counter = false;
        for (const auto& iv : ivs) some_counter = some_counter || iv.step == loads || iv.step == -loads;
        CHECK(some_counter);
    }
}

TEST_CASE("loops: a loop that moves by what it loads has no induction variable") {
    for (const auto& lib : libraries()) {
        CAPTURE(lib);
        Cfg cfg = cfg_of(lib, "list_sum");
        LoopInfo info = find_loops(cfg);
        REQUIRE(!info.loops.empty());
        CHECK(info.induction.empty());
        // The loop reads the list's registers and writes them: none is invariant
        // but what the loop never writes.
        for (const auto& inv : info.invariant)
            for (int r : inv) CHECK(r != 4);
    }
}

TEST_CASE("loops: nested loops nest, and the inner counter belongs to the inner loop") {
    for (const auto& lib : libraries()) {
        CAPTURE(lib);
        Cfg cfg = cfg_of(lib, "matrix_sum");
        LoopInfo info = find_loops(cfg);
        bool nested = false;
        for (const auto& l : info.loops) nested = nested || l.depth == 2;
        if (!nested) continue;  // a compiler may flatten or vectorize the inner loop away
        for (const auto& iv : info.induction) CHECK(info.innermost[iv.block] == iv.loop);
        for (std::uint32_t l = 0; l < info.loops.size(); ++l)
            if (info.loops[l].parent != kNoLoop) CHECK(info.loops[info.loops[l].parent].contains(info.loops[l].header));
    }
}

TEST_CASE("loops: dominators and loops of a hand-made graph") {
    // 0 -> 1; 1 -> 2, 1 -> 3; 2 -> 1 (back edge); 3 -> exit
    Cfg cfg;
    cfg.instructions.resize(4);
    for (std::uint32_t i = 0; i < 4; ++i) {
        cfg.instructions[i].address = 0x1000 + i;
        cfg.instructions[i].size = 1;
    }
    cfg.blocks.resize(4);
    cfg.instruction_block = {0, 1, 2, 3};
    for (std::uint32_t b = 0; b < 4; ++b) {
        cfg.blocks[b].first = b;
        cfg.blocks[b].count = 1;
    }
    auto edge = [&](std::uint32_t from, std::uint32_t to) {
        auto e = static_cast<std::uint32_t>(cfg.edges.size());
        cfg.edges.push_back({from, to, EdgeKind::kFallThrough});
        if (from != kEntryBlock) cfg.blocks[from].out_edges.push_back(e);
        if (to != kExitBlock) cfg.blocks[to].in_edges.push_back(e);
    };
    edge(kEntryBlock, 0);
    edge(0, 1);
    edge(1, 2);
    edge(1, 3);
    edge(2, 1);
    edge(3, kExitBlock);
    LoopInfo info = find_loops(cfg);
    CHECK(info.idom[0] == kEntryBlock);
    CHECK(info.idom[1] == 0);
    CHECK(info.idom[2] == 1);
    CHECK(info.idom[3] == 1);
    REQUIRE(info.loops.size() == 1);
    CHECK(info.loops[0].header == 1);
    CHECK(info.loops[0].blocks == std::vector<std::uint32_t>{1, 2});
    CHECK(info.loops[0].latches == std::vector<std::uint32_t>{2});
    CHECK(info.innermost[0] == kNoLoop);
    CHECK(info.innermost[2] == 0);
    CHECK(!dominates(info, 2, 3));
}

namespace {

// bench/accuracy/chain.c's tally() as gcc -O2 compiles it: `i++` is in
// each of the loop's two latches (the odd arm's and the else-if's), and the
// third arm jumps into the odd arm's latch.
std::vector<std::uint8_t> chain_tally() {
    return {0x85, 0xd2, 0x7e, 0x4d, 0x4c, 0x8b, 0x47, 0x18, 0x31, 0xc9, 0xeb, 0x12, 0x0f, 0x1f, 0x40, 0x00,
            0x48, 0x83, 0x07, 0x01, 0x49, 0x01, 0xc0, 0x83, 0xc1, 0x01, 0x39, 0xca, 0x74, 0x2f, 0x69, 0xf6,
            0x0d, 0x66, 0x19, 0x00, 0x81, 0xc6, 0x5f, 0xf3, 0x6e, 0x3c, 0x89, 0xf0, 0xc1, 0xe8, 0x0d, 0xf7,
            0xc6, 0x00, 0x20, 0x00, 0x00, 0x75, 0xd9, 0xa8, 0x06, 0x75, 0x1d, 0xc1, 0xe0, 0x03, 0x83, 0xc1,
            0x01, 0x48, 0x83, 0x47, 0x08, 0x01, 0x49, 0x31, 0xc0, 0x39, 0xca, 0x75, 0xd1, 0x4c, 0x89, 0x47,
            0x18, 0xc3, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x89, 0xf0, 0x48, 0x83, 0x47, 0x10, 0x01, 0xc1,
            0xe8, 0x0f, 0x49, 0x29, 0xc0, 0xeb, 0xb0};
}


}  // namespace

TEST_CASE("loops: a counter stepped once on every path through the iteration is an induction variable") {
    Cfg cfg = hand_assembled(0x11f0, chain_tally());
    LoopInfo info = find_loops(cfg);
    REQUIRE(info.loops.size() == 1);
    REQUIRE(info.loops[0].latches.size() == 2);
    REQUIRE(info.induction.size() == 1);
    const InductionVariable& iv = info.induction[0];
    CHECK(iv.gp == 1);  // ecx
    CHECK(iv.step == 1);
    CHECK(iv.width == 4);
    CHECK(iv.block == info.loops[0].header);  // runs once per iteration
    CHECK(cfg.instructions[iv.instruction].address == 0x1207);

    // Without the else-if arm's `i++` (a 3-byte nop instead), one path
    // through the iteration steps nothing: no induction variable.
    auto code = chain_tally();
    const std::size_t at = 0x122e - 0x11f0;
    REQUIRE(code[at] == 0x83);
    code[at] = 0x0f;
    code[at + 1] = 0x1f;
    code[at + 2] = 0x00;
    Cfg broken = hand_assembled(0x11f0, code);
    CHECK(find_loops(broken).induction.empty());
}

TEST_CASE("loops: a counter stepped on every path is an induction variable past a nested loop that leaves it alone") {
    Cfg cfg = hand_assembled(0x1590, wordfreq_count_words());
    LoopInfo info = find_loops(cfg);
    REQUIRE(info.loops.size() == 2);
    const Loop& scan = info.loops[0];  // outer first
    CHECK(scan.has_call);
    CHECK(info.loops[1].parent == 0);
    CHECK(cfg.instructions[cfg.blocks[scan.header].first].address == 0x15d9);
    REQUIRE(info.induction.size() == 1);
    const InductionVariable& iv = info.induction[0];
    CHECK(iv.loop == 0);
    CHECK(iv.gp == 3);  // rbx: callee-saved, so grow() leaves it alone too
    CHECK(iv.step == 1);
    CHECK(iv.width == 8);
    CHECK(iv.block == scan.header);

    // The probe loop stepping rbx instead of rsi (add $1,%rbx at 0x164d): a
    // path through it steps as often as it turns: rbx counts the probe
    // loop's iterations, not the scan loop's.
    auto code = wordfreq_count_words();
    const std::size_t at = 0x164d - 0x1590;
    REQUIRE(code[at + 2] == 0xc6);
    code[at + 2] = 0xc3;
    const LoopInfo probing = find_loops(hand_assembled(0x1590, code));
    REQUIRE(probing.loops.size() == 2);
    for (const auto& other : probing.induction) CHECK(other.loop == 1);
}

TEST_CASE("loops: a register one block steps, kept across a call by a spill and reload, counts that block") {
    // count_words' `words++` (add $1,%rdx at 0x167c) runs where a word ends,
    // not on every iteration of the scan loop; rdx is caller-saved, and the
    // block that calls grow() stores it at 0x16a3 and loads it back at 0x16b5.
    Cfg cfg = hand_assembled(0x1590, wordfreq_count_words());
    LoopInfo info = find_loops(cfg);
    REQUIRE(info.counters.size() == 1);
    const BlockCounter& c = info.counters[0];
    CHECK(c.counter.loop == 0);
    CHECK(c.counter.gp == 2);  // rdx
    CHECK(c.counter.step == 1);
    CHECK(c.counter.width == 8);
    CHECK(cfg.instructions[c.counter.instruction].address == 0x167c);
    CHECK(info.innermost[c.counter.block] == 0);
    for (auto latch : info.loops[0].latches) CHECK_FALSE(dominates(info, c.counter.block, latch));
    // Between the call and the reload a snapshot holds what grow() left.
    REQUIRE(c.clobbered.size() == 1);
    CHECK(c.clobbered[0].first == 0x16b1);
    CHECK(c.clobbered[0].second == 0x16b5);

    // Reloaded from another slot (mov 0x10(%rsp),%rdx): the call's clobber
    // stands, and rdx counts nothing.
    auto code = wordfreq_count_words();
    const std::size_t at = 0x16b5 - 0x1590;
    REQUIRE(code[at + 3] == 0x24);
    REQUIRE(code[at + 4] == 0x08);
    code[at + 4] = 0x10;
    CHECK(find_loops(hand_assembled(0x1590, code)).counters.empty());
}

TEST_CASE("loops: a call through a table writes what its decided targets write") {
    // for (i = 0; i != 100; i++) table[i](...): call qword [r12 + rax*8].
    const std::vector<std::uint8_t> code = {
        0x31, 0xdb,                    // 0x1000 xor ebx, ebx
        0x89, 0xd8,                    // 0x1002 mov eax, ebx
        0x41, 0xff, 0x14, 0xc4,        // 0x1004 call qword [r12 + rax*8]
        0x83, 0xc3, 0x01,              // 0x1008 add ebx, 1
        0x83, 0xfb, 0x64,              // 0x100b cmp ebx, 100
        0x75, 0xf2,                    // 0x100e jne 0x1002
        0xc3,                          // 0x1010 ret
    };
    const Cfg cfg = hand_assembled(0x1000, code);
    const CallWrites writes = [](std::uint64_t target) -> std::uint16_t {
        return target == 0x2000 ? 0x1 /* rax */ : 0x4 /* rdx */;
    };
    const LoopInfo unknown = find_loops(cfg, writes);
    REQUIRE(unknown.loops.size() == 1);
    CHECK(((unknown.loops[0].callee_writes >> 3) & 1u) == 1);  // rbx may be written
    const LoopInfo decided = find_loops(cfg, writes, [](std::uint64_t call) {
        return call == 0x1004 ? std::vector<std::uint64_t>{0x2000, 0x3000} : std::vector<std::uint64_t>{};
    });
    REQUIRE(decided.loops.size() == 1);
    CHECK(decided.loops[0].callee_writes == 0x5);
    CHECK(decided.loops[0].has_call);
    const LoopInfo none = find_loops(cfg, writes, [](std::uint64_t) { return std::vector<std::uint64_t>{}; });
    CHECK(((none.loops[0].callee_writes >> 3) & 1u) == 1);
}
