// Jump tables split by their index on register snapshots (switch_odds.h):
// the replay of the instructions between a snapshot and the table's load,
// and the case each snapshot's index selects in real compiler output.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/switch_odds.h"
#include "test_cfg.h"

using namespace ecpi::analyze;
using test::cfgtest_binaries;
using ecpi::store::RegisterSample;

namespace {

std::vector<DecodedInstruction> decoded(const std::vector<std::uint8_t>& code) {
    auto insns = decode_x86_64(0x1000, code);
    REQUIRE(insns.ok());
    return std::move(*insns);
}

KnownRegisters all_known(std::uint64_t value) {
    KnownRegisters r;
    r.value.fill(value);
    r.known.fill(true);
    return r;
}

}  // namespace

TEST_CASE("switch odds: the replay computes moves, shifts, masks, multiplies and lea; a load is unknown") {
    // imul eax, eax, 0x19660d; add eax, 0x3c6ef35f; mov ecx, eax; shr ecx, 0x1d;
    // and edx, 7; lea r10, [rdi + rcx*8]; mov rdx, qword ptr [rdi]
    const auto code = decoded({0x69, 0xc0, 0x0d, 0x66, 0x19, 0x00, 0x05, 0x5f, 0xf3, 0x6e, 0x3c, 0x89, 0xc1,
                               0xc1, 0xe9, 0x1d, 0x83, 0xe2, 0x07, 0x4c, 0x8d, 0x14, 0xcf, 0x48, 0x8b, 0x17});
    REQUIRE(code.size() == 7);
    KnownRegisters r = all_known(0);
    r.value[0] = 777;           // eax: the generator's state
    r.value[2] = 0xfffffffffULL;  // rdx
    r.value[7] = 0x10000;       // rdi
    for (std::size_t k = 0; k < 6; ++k) replay(code[k], r);
    const std::uint32_t seed = 777u * 1664525u + 1013904223u;
    CHECK(r.value[0] == seed);  // 32-bit results zero-extend
    CHECK(r.value[1] == seed >> 29);
    CHECK(r.value[2] == 7);
    CHECK(r.value[10] == 0x10000 + 8 * (seed >> 29));
    CHECK(r.known[10]);
    replay(code[6], r);
    CHECK_FALSE(r.known[2]);   // loaded from memory
    CHECK(r.known[1]);
}

TEST_CASE("switch odds: each snapshot's index selects its case's edge, in GCC's and Clang's tables") {
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        Cfg cfg = test::cfg_of(file, "dispatch");
        REQUIRE(cfg.jump_tables.size() == 1);
        const JumpTable& t = cfg.jump_tables[0];
        REQUIRE(t.targets.size() == t.entries);
        std::uint32_t jump_block = 0;
        for (std::uint32_t k = 0; k < cfg.instructions.size(); ++k)
            if (cfg.instructions[k].address == t.jump) jump_block = cfg.instruction_block[k];
        const auto& blk = cfg.blocks[jump_block];
        // Snapshots at the block's first instruction, every register holding
        // the case number (whichever the compiler indexes with), case k
        // taken k + 1 times; one index past the table; one snapshot in
        // another block.
        std::vector<RegisterSample> stream;
        auto snap = [&](std::uint64_t pc, std::uint64_t v) {
            RegisterSample s;
            s.offset = pc;
            s.regs.fill(v);
            stream.push_back(s);
        };
        for (std::uint32_t k = 0; k < 8; ++k)
            for (std::uint32_t n = 0; n <= k; ++n) snap(cfg.instructions[blk.first].address, k);
        snap(cfg.instructions[blk.first].address, t.entries + 5);
        snap(cfg.instructions[cfg.blocks[0].first].address, 3);
        std::vector<std::uint32_t> all;
        for (std::uint32_t k = 0; k < stream.size(); ++k) all.push_back(k);
        const auto odds = switch_odds(cfg, stream, 0, all);
        REQUIRE(odds.size() == 1);
        CHECK(odds[0].block == jump_block);
        CHECK(odds[0].total == 36);
        for (std::size_t j = 0; j < odds[0].edges.size(); ++j) {
            const std::uint32_t to = cfg.edges[odds[0].edges[j]].to;
            std::uint32_t expected = 0;
            for (std::uint32_t k = 0; k < 8; ++k) {
                std::uint32_t target_block = 0;
                for (std::uint32_t x = 0; x < cfg.instructions.size(); ++x)
                    if (cfg.instructions[x].address == t.targets[k]) target_block = cfg.instruction_block[x];
                if (target_block == to) expected += k + 1;
            }
            CAPTURE(j);
            CHECK(odds[0].counts[j] == expected);
        }
    }
}

TEST_CASE("switch odds: a case byte loaded just before the table decides nothing, and says why") {
    // An interpreter's step (data/cfgtest.c): `switch (in->op)` loads the
    // byte right before the table (GCC in the table's block, Clang in the
    // bounds check before it). The snapshots after the load do hold the
    // index, but each stands for the wait after the case before it: their
    // shares are of time, not of executions (interp: a case 14% of the
    // dispatches was chosen by 33% of them). `dispatch`'s index comes in a
    // register from its caller: its snapshots decide.
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        for (const char* name : {"step", "dispatch"}) {
            CAPTURE(name);
            Cfg cfg = test::cfg_of(file, name);
            REQUIRE(cfg.jump_tables.size() == 1);
            const JumpTable& t = cfg.jump_tables[0];
            std::uint32_t jump = 0;
            for (std::uint32_t k = 0; k < cfg.instructions.size(); ++k)
                if (cfg.instructions[k].address == t.jump) jump = k;
            // Snapshots at the jump's own block, the index (whichever register
            // holds it) read there: every register holding case 2.
            const std::uint32_t first = cfg.blocks[cfg.instruction_block[jump]].first;
            std::vector<RegisterSample> stream;
            for (std::uint32_t k = first; k <= jump; ++k) {
                RegisterSample s;
                s.offset = cfg.instructions[k].address;
                s.regs.fill(2);
                stream.push_back(s);
            }
            std::vector<std::uint32_t> all;
            for (std::uint32_t k = 0; k < stream.size(); ++k) all.push_back(k);
            const auto odds = switch_odds(cfg, stream, 0, all);
            REQUIRE(odds.size() == 1);
            CHECK(odds[0].total > 0);
            const bool loaded = std::string(name) == "step";
            CHECK(odds[0].index_from_memory == loaded);
            CHECK((switch_undecided(odds[0]) != nullptr) == loaded);
        }
    }
}
