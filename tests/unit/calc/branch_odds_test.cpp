// Branch conditions evaluated on register snapshots: the flags a cmp/test
// sets, read by each jcc; which snapshots may decide a branch (nothing
// writes the operands between the pc and the jump); the counts per block.
#include <doctest/doctest.h>

#include <vector>

#include <capstone/capstone.h>

#include "ecpi/analyze/calc/branch_odds.h"

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;

namespace {

Cfg cfg_of(std::uint64_t at, const std::vector<std::uint8_t>& code) {
    auto insns = decode_x86_64(at, code);
    REQUIRE(insns.ok());
    return build_cfg(at, at + code.size(), std::move(*insns), {});
}

RegisterSample snap(std::uint64_t pc, int reg, std::uint64_t value) {
    RegisterSample s;
    s.offset = pc;
    s.regs[static_cast<std::size_t>(reg)] = value;
    return s;
}

}  // namespace

TEST_CASE("branch odds: conditions as the flags decide them") {
    BranchCondition c;
    c.width = 8;
    c.jcc = X86_INS_JL;  // cmp a, b; jl: signed a < b
    CHECK(evaluate(c, static_cast<std::uint64_t>(-5), 3));
    CHECK(!evaluate(c, 3, static_cast<std::uint64_t>(-5)));
    c.jcc = X86_INS_JB;  // unsigned
    CHECK(!evaluate(c, static_cast<std::uint64_t>(-5), 3));
    CHECK(evaluate(c, 3, static_cast<std::uint64_t>(-5)));
    c.jcc = X86_INS_JE;
    c.width = 4;  // only the low 32 bits compare
    CHECK(evaluate(c, 0x100000007ULL, 7));
    c.is_test = true;  // test a, b; jne: (a & b) != 0
    c.jcc = X86_INS_JNE;
    CHECK(evaluate(c, 0x30, 0x10));
    CHECK(!evaluate(c, 0x30, 0x0f));
    c.jcc = X86_INS_JS;
    c.width = 1;
    CHECK(evaluate(c, 0x80, 0xff));
    c.jcc = X86_INS_JLE;  // test: less is SF (OF is clear)
    CHECK(evaluate(c, 0, 0));
    CHECK(!evaluate(c, 1, 1));
}

TEST_CASE("branch odds: the share of snapshots that go the taken way") {
    // 0x1000 mov rax, rdi; 0x1003 cmp rdi, 15; 0x1007 jg 0x100c; 0x1009 inc rax; 0x100c ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x89, 0xf8, 0x48, 0x83, 0xff, 0x0f, 0x7f, 0x03, 0x48, 0xff, 0xc0, 0xc3});
    auto cond = branch_condition(cfg, 0);
    REQUIRE(cond);
    CHECK(cond->a == 7);  // rdi
    CHECK(cond->b == -1);
    CHECK(cond->immediate == 15);
    std::vector<RegisterSample> stream;
    for (int k = 0; k < 10; ++k) stream.push_back(snap(k % 2 ? 0x1000 : 0x1003, 7, k < 3 ? 20 : 3));
    stream.push_back(snap(0x1009, 7, 20));  // past the branch: decides nothing
    std::vector<std::uint32_t> all;
    for (std::uint32_t k = 0; k < stream.size(); ++k) all.push_back(k);
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].block == 0);
    CHECK(odds[0].total == 10);
    CHECK(odds[0].taken == 3);
    CHECK(cfg.edges[odds[0].taken_edge].kind == EdgeKind::kBranch);
    CHECK(cfg.edges[odds[0].fall_edge].kind == EdgeKind::kFallThrough);
}

TEST_CASE("branch odds: a snapshot whose operand is written before the compare decides nothing") {
    // 0x1000 add rdi, 1; 0x1004 cmp rdi, 15; 0x1008 jg 0x100b; 0x100a nop; 0x100b ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x83, 0xc7, 0x01, 0x48, 0x83, 0xff, 0x0f, 0x7f, 0x01, 0x90, 0xc3});
    std::vector<RegisterSample> stream = {snap(0x1000, 7, 15), snap(0x1004, 7, 16)};
    std::vector<std::uint32_t> all = {0, 1};
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].total == 1);  // only the snapshot after the add
    CHECK(odds[0].taken == 1);
}

TEST_CASE("branch odds: a branch on a loaded value or on flags from arithmetic is not evaluated") {
    // 0x1000 cmp qword ptr [rdi], 0; 0x1004 je 0x1007; 0x1006 nop; 0x1007 ret
    Cfg mem = cfg_of(0x1000, {0x48, 0x83, 0x3f, 0x00, 0x74, 0x01, 0x90, 0xc3});
    CHECK(!branch_condition(mem, 0));
    // 0x1000 sub rdi, 1; 0x1004 jne 0x1007; 0x1006 nop; 0x1007 ret
    Cfg sub = cfg_of(0x1000, {0x48, 0x83, 0xef, 0x01, 0x75, 0x01, 0x90, 0xc3});
    CHECK(!branch_condition(sub, 0));
}

TEST_CASE("branch odds: a byte-register test decides its branch (the compare writes no operand)") {
    // 0x1000 test al, 6; 0x1002 jne 0x1005; 0x1004 nop; 0x1005 ret
    Cfg cfg = cfg_of(0x1000, {0xa8, 0x06, 0x75, 0x01, 0x90, 0xc3});
    REQUIRE(branch_condition(cfg, 0));
    std::vector<RegisterSample> stream;
    for (std::uint64_t v : {2, 4, 6, 8, 0x108}) stream.push_back(snap(0x1000, 0, v));
    std::vector<std::uint32_t> all = {0, 1, 2, 3, 4};
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].total == 5);
    CHECK(odds[0].taken == 3);
}
