// Natural loops and induction variables on GCC's and Clang's output of
// data/loops.c at -O1..-O3, and on hand-made graphs.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/loops.h"
#include "test_cfg.h"

using namespace ecpi::analyze;
using test::cfg_of;

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
