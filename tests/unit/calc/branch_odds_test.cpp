// Branch conditions evaluated on register snapshots: the flags a cmp/test
// sets, read by each jcc; which snapshots may decide a branch (the block's
// instructions up to the compare replayed on them, nothing writing the
// operands between the compare and the jump); the counts per block.
#include <doctest/doctest.h>

#include <numeric>
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

// The odds of a CFG with one evaluable branch, over every snapshot.
BranchOdds only_odds(const Cfg& cfg, const std::vector<RegisterSample>& stream) {
    std::vector<std::uint32_t> all(stream.size());
    std::iota(all.begin(), all.end(), 0u);
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    return odds[0];
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

TEST_CASE("branch odds: a snapshot before an add to the operand decides the branch through the replayed add") {
    // 0x1000 add rdi, 1; 0x1004 cmp rdi, 15; 0x1008 jg 0x100b; 0x100a nop; 0x100b ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x83, 0xc7, 0x01, 0x48, 0x83, 0xff, 0x0f, 0x7f, 0x01, 0x90, 0xc3});
    std::vector<RegisterSample> stream = {snap(0x1000, 7, 15), snap(0x1004, 7, 16), snap(0x1000, 7, 14)};
    std::vector<std::uint32_t> all = {0, 1, 2};
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].total == 3);  // 15 + 1 and 16 go the taken way, 14 + 1 falls through
    CHECK(odds[0].taken == 2);
}

TEST_CASE("branch odds: every snapshot after the operand's load decides a letter test, none before it") {
    // wordfreq's letter test (gcc -O2):
    // 0x1000 movzx eax, byte ptr [r13+rbx]; 0x1006 mov esi, eax; 0x1008 and esi, 0xffffffdf;
    // 0x100b sub esi, 0x41; 0x100e cmp sil, 0x19; 0x1012 ja 0x1018; 0x1014 add rbx, 1; 0x1018 ret
    Cfg cfg = cfg_of(0x1000, {0x41, 0x0f, 0xb6, 0x44, 0x1d, 0x00, 0x89, 0xc6, 0x83, 0xe6, 0xdf, 0x83, 0xee,
                              0x41, 0x40, 0x80, 0xfe, 0x19, 0x77, 0x04, 0x48, 0x83, 0xc3, 0x01, 0xc3});
    auto at = [](std::uint64_t pc, std::uint64_t rax, std::uint64_t rsi) {
        RegisterSample s = snap(pc, 0, rax);
        s.regs[6] = rsi;
        return s;
    };
    std::vector<RegisterSample> stream = {
        at(0x1000, 'a', 0),                  // before the load: its character is not known yet
        at(0x1006, 'a', 0),                  // a letter: falls through
        at(0x1008, ' ', ' '),                // a space: taken
        at(0x100b, 'Z', 'Z' & 0xdf),         // a capital: falls through
        at(0x100e, ',', (',' & 0xdf) - 0x41)  // at the compare itself: taken
    };
    std::vector<std::uint32_t> all = {0, 1, 2, 3, 4};
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].total == 4);
    CHECK(odds[0].taken == 2);
}

TEST_CASE("branch odds: a `sub` that sets the flags decides its branch before, at and after it") {
    // GCC's pointer compare (jsonq's end-of-input test):
    // 0x1000 mov rbp, [rdi]; 0x1003 mov r11, [rdi+8]; 0x1007 mov rdi, rbp; 0x100a sub rdi, r11;
    // 0x100d jae 0x1010; 0x100f nop; 0x1010 ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x8b, 0x2f, 0x4c, 0x8b, 0x5f, 0x08, 0x48, 0x89, 0xef, 0x4c, 0x29, 0xdf, 0x73,
                              0x01, 0x90, 0xc3});
    CHECK(!branch_condition(cfg, 0));  // a compare's callers (loop exits) keep cmp/test only
    auto cond = branch_condition(cfg, 0, true);
    REQUIRE(cond);
    CHECK(cond->writes_a);
    CHECK(cond->a == 7);   // rdi
    CHECK(cond->b == 11);  // r11
    auto at = [](std::uint64_t pc, std::uint64_t rdi, std::uint64_t rbp, std::uint64_t r11) {
        RegisterSample s = snap(pc, 7, rdi);
        s.regs[5] = rbp;
        s.regs[11] = r11;
        return s;
    };
    std::vector<RegisterSample> stream = {
        at(0x1000, 0, 900, 100),          // before the loads: decides nothing
        at(0x1007, 0, 100, 200),          // rdi = rbp replayed: 100 < 200, falls through
        at(0x100a, 300, 300, 200),        // at the sub: 300 >= 200, taken
        at(0x100d, 0, 200, 200),          // past it: rdi = 200 - 200, so a = 0 + 200 >= 200, taken
        at(0x100d, std::uint64_t(5) - 9, 5, 9),  // a = (5 - 9) + 9 = 5 < 9: falls through
    };
    const BranchOdds odds = only_odds(cfg, stream);
    CHECK(odds.total == 4);
    CHECK(odds.taken == 2);
}

TEST_CASE("branch odds: an `and` that sets the flags is a test, and past it the result alone decides") {
    // glibc's conversion state check: 0x1000 mov eax, [rdi]; 0x1002 mov r15d, eax;
    // 0x1005 and r15d, 7; 0x1009 je 0x100c; 0x100b nop; 0x100c ret
    Cfg cfg = cfg_of(0x1000, {0x8b, 0x07, 0x41, 0x89, 0xc7, 0x41, 0x83, 0xe7, 0x07, 0x74, 0x01, 0x90, 0xc3});
    auto cond = branch_condition(cfg, 0, true);
    REQUIRE(cond);
    CHECK(cond->is_test);
    CHECK(cond->writes_a);
    std::vector<RegisterSample> stream = {
        snap(0x1002, 0, 8),     // eax = 8 replayed into r15d: 8 & 7 == 0, taken
        snap(0x1005, 15, 0x10), // at the and: 0x10 & 7 == 0, taken
        snap(0x1005, 15, 0x13), // 3: falls through
        snap(0x1009, 15, 0),    // past it, r15d holds the result: 0, taken
        snap(0x1009, 15, 3),    // falls through
    };
    const BranchOdds odds = only_odds(cfg, stream);
    CHECK(odds.total == 5);
    CHECK(odds.taken == 3);
}

TEST_CASE("branch odds: `sub a, a` leaves nothing to evaluate") {
    // 0x1000 sub rax, rax; 0x1003 je 0x1006; 0x1005 nop; 0x1006 ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x29, 0xc0, 0x74, 0x01, 0x90, 0xc3});
    CHECK(!branch_condition(cfg, 0, true));
}

TEST_CASE("branch odds: where the pcs' shares disagree, the median pc's share decides, not the pooled one") {
    // The letter test above. Snapshots at four pcs: a stall that depends on
    // the way taken (the misprediction of a rare space) holds the interrupt
    // at 0x1008, where spaces read 60% against about 10% at the others.
    Cfg cfg = cfg_of(0x1000, {0x41, 0x0f, 0xb6, 0x44, 0x1d, 0x00, 0x89, 0xc6, 0x83, 0xe6, 0xdf, 0x83, 0xee,
                              0x41, 0x40, 0x80, 0xfe, 0x19, 0x77, 0x04, 0x48, 0x83, 0xc3, 0x01, 0xc3});
    auto at = [](std::uint64_t pc, std::uint64_t c) {
        RegisterSample s = snap(pc, 0, c);
        s.regs[6] = pc >= 0x100b ? (c & 0xdf) - (pc >= 0x100e ? 0x41 : 0) : pc >= 0x1008 ? c : 0;
        return s;
    };
    std::vector<RegisterSample> stream;
    const auto add = [&](std::uint64_t pc, int spaces, int letters) {
        for (int k = 0; k < spaces; ++k) stream.push_back(at(pc, ' '));
        for (int k = 0; k < letters; ++k) stream.push_back(at(pc, 'e'));
    };
    add(0x1006, 10, 90);   // 10%
    add(0x1008, 120, 80);  // 60%: the stall's pc
    add(0x100b, 12, 88);   // 12%
    add(0x100e, 8, 92);    // 8%
    std::vector<std::uint32_t> all;
    for (std::uint32_t k = 0; k < stream.size(); ++k) all.push_back(k);
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].total == 500);
    CHECK(odds[0].positions_disagree);
    CHECK(odds[0].median_of_positions);
    // Pooled: 150 of 500 (30%). The median of 8%, 10%, 12%, 60%: 11%, 55 of 500.
    CHECK(odds[0].taken == 55);
    // The interval still spans every pc's.
    CHECK(odds[0].share_low < 0.08);
    CHECK(odds[0].share_high > 0.6);

    // Pcs whose intervals overlap (8% of 100, 11% of 300, 18% and 14% of 50):
    // the pooled count stands (57 of 500; their median, 12.5%, would say 62).
    stream.clear();
    add(0x1006, 8, 92);
    add(0x1008, 33, 267);
    add(0x100b, 9, 41);
    add(0x100e, 7, 43);
    all.resize(stream.size());
    auto agreeing = branch_odds(cfg, stream, 0, all);
    REQUIRE(agreeing.size() == 1);
    CHECK(agreeing[0].total == 500);
    CHECK(!agreeing[0].positions_disagree);
    CHECK(!agreeing[0].median_of_positions);
    CHECK(agreeing[0].taken == 57);

    // Two pcs that disagree cannot say which holds the stall: pooled.
    stream.clear();
    add(0x1006, 10, 90);
    add(0x1008, 120, 80);
    all.resize(stream.size());
    auto two = branch_odds(cfg, stream, 0, all);
    REQUIRE(two.size() == 1);
    CHECK(two[0].positions_disagree);
    CHECK(!two[0].median_of_positions);
    CHECK(two[0].taken == 130);
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

TEST_CASE("branch odds: the share's interval spans pcs that disagree, not only all snapshots pooled") {
    // 0x1000 mov rax, rdi; 0x1003 cmp rdi, 15; 0x1007 jg 0x100c; 0x1009 inc rax; 0x100c ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x89, 0xf8, 0x48, 0x83, 0xff, 0x0f, 0x7f, 0x03, 0x48, 0xff, 0xc0, 0xc3});
    // 10% taken at the mov, 50% at the compare (each way's time there
    // differs): 30% of all 200, whose own interval excludes both.
    std::vector<RegisterSample> stream;
    for (int k = 0; k < 100; ++k) stream.push_back(snap(0x1000, 7, k < 10 ? 20 : 3));
    for (int k = 0; k < 100; ++k) stream.push_back(snap(0x1003, 7, k < 50 ? 20 : 3));
    std::vector<std::uint32_t> all;
    for (std::uint32_t k = 0; k < stream.size(); ++k) all.push_back(k);
    auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].taken == 60);
    const auto [pooled_low, pooled_high] = share_interval(60, 200);
    CHECK(pooled_low > 0.2);
    CHECK(pooled_high < 0.4);
    CHECK(odds[0].share_low == doctest::Approx(share_interval(10, 100).first));
    CHECK(odds[0].share_low < 0.1);
    CHECK(odds[0].share_high == doctest::Approx(share_interval(50, 100).second));
    CHECK(odds[0].share_high > 0.5);
    // Wilson's interval at two standard errors.
    CHECK(share_interval(0, 400).second == doctest::Approx(4.0 / 404));
    CHECK(share_interval(0, 0).first == 0);
    CHECK(share_interval(0, 0).second == 1);
}

TEST_CASE("branch odds: a compare with memory's flags are timed, and registers decide before them") {
    // A varint's length byte by byte (SQLite's cell header):
    // 0x1000 cmpb $0, (rdi); 0x1003 jns 0x100a; 0x1005 inc rdi; 0x1008 jmp 0x1000; 0x100a ret
    // The flags at the jump are time-weighted where the load's stall lands,
    // and the stall can depend on the way the branch goes (flags_jump).
    Cfg cfg = cfg_of(0x1000, {0x80, 0x3f, 0x00, 0x79, 0x05, 0x48, 0xff, 0xc7, 0xeb, 0xf6, 0xc3});
    CHECK_FALSE(branch_condition(cfg, 0, true));
    const auto f = flags_jump(cfg, 0);
    REQUIRE(f);
    CHECK(f->reads_memory);
    std::vector<RegisterSample> stream;
    for (int k = 0; k < 8; ++k) {
        RegisterSample s;
        s.offset = 0x1003;
        s.flags = ecpi::store::kFlagsRecorded | 0x2 | (k < 2 ? 0x80 : 0);  // SF in 2 of 8: the loop goes on
        stream.push_back(s);
    }
    std::vector<std::uint32_t> all(stream.size());
    std::iota(all.begin(), all.end(), 0u);
    const auto odds = branch_odds(cfg, stream, 0, all);
    REQUIRE(odds.size() == 1);
    CHECK(odds[0].timed);
    CHECK(odds[0].total == 8);
    CHECK(odds[0].taken == 6);  // jns: taken where SF is clear
    CHECK_FALSE(odds[0].median_of_positions);
}

TEST_CASE("branch odds: a register compare's jump is decided, not timed") {
    // 0x1000 cmp rdi, rsi; 0x1003 jl 0x1006; 0x1005 nop; 0x1006 ret: no
    // memory; a snapshot before the compare decides by its operands.
    Cfg cfg = cfg_of(0x1000, {0x48, 0x39, 0xf7, 0x7c, 0x01, 0x90, 0xc3});
    const auto f = flags_jump(cfg, 0);
    REQUIRE(f);
    CHECK_FALSE(f->reads_memory);
    RegisterSample s;
    s.offset = 0x1000;
    s.regs[7] = 1;  // rdi (canonical: rax rcx rdx rbx rsp rbp rsi rdi ...)
    s.regs[6] = 2;  // rsi
    s.flags = ecpi::store::kFlagsRecorded | 0x2;
    std::vector<RegisterSample> stream{s};
    const auto odds = branch_odds(cfg, stream, 0, std::vector<std::uint32_t>{0});
    REQUIRE(odds.size() == 1);
    CHECK_FALSE(odds[0].timed);
    CHECK(odds[0].taken == 1);  // 1 < 2
}

TEST_CASE("branch odds: flags past a compare whose registers the block then overwrote") {
    // 0x1000 cmp rdi, rsi; 0x1003 mov edi, 0; 0x1008 jl 0x100b; 0x100a nop; 0x100b ret
    Cfg cfg = cfg_of(0x1000, {0x48, 0x39, 0xf7, 0xbf, 0x00, 0x00, 0x00, 0x00, 0x7c, 0x01, 0x90, 0xc3});
    const auto f = flags_jump(cfg, 0);
    REQUIRE(f);
    CHECK(cfg.instructions[f->from].address == 0x1003);  // the mov writes no flags
    const auto at = [](std::uint64_t pc, std::uint16_t flags) {
        RegisterSample s;
        s.offset = pc;
        s.flags = flags;
        return s;
    };
    constexpr std::uint16_t sf = 0x80, of = 0x800;
    std::vector<RegisterSample> stream;
    stream.push_back(at(0x1008, ecpi::store::kFlagsRecorded | sf));       // less: taken
    stream.push_back(at(0x1008, ecpi::store::kFlagsRecorded | sf | of));  // not less
    stream.push_back(at(0x1003, ecpi::store::kFlagsRecorded | sf));       // past the compare, before the jump: less
    stream.push_back(at(0x1008, sf));                                      // not recorded: rdi was overwritten, nothing to say
    const BranchOdds o = only_odds(cfg, stream);
    CHECK(o.total == 3);
    CHECK(o.taken == 2);
}

TEST_CASE("branch odds: a decrement's flags close a counted loop") {
    // 0x1000 dec ecx; 0x1002 jne 0x1000; 0x1004 ret
    Cfg cfg = cfg_of(0x1000, {0xff, 0xc9, 0x75, 0xfc, 0xc3});
    const auto f = flags_jump(cfg, 0);
    REQUIRE(f);
    std::vector<RegisterSample> stream;
    for (int k = 0; k < 10; ++k) {
        RegisterSample s;
        s.offset = 0x1002;
        s.flags = ecpi::store::kFlagsRecorded | (k == 0 ? 0x40 : 0);  // ZF once: the last turn
        stream.push_back(s);
    }
    const BranchOdds o = only_odds(cfg, stream);
    CHECK(o.total == 10);
    CHECK(o.taken == 9);
}

TEST_CASE("branch odds: each jump's condition on the flags") {
    constexpr std::uint16_t cf = 0x1, pf = 0x4, zf = 0x40, sf = 0x80, of = 0x800;
    CHECK(evaluate_flags(X86_INS_JL, sf));
    CHECK_FALSE(evaluate_flags(X86_INS_JL, sf | of));
    CHECK(evaluate_flags(X86_INS_JGE, sf | of));
    CHECK(evaluate_flags(X86_INS_JLE, zf));
    CHECK(evaluate_flags(X86_INS_JG, 0));
    CHECK_FALSE(evaluate_flags(X86_INS_JG, of));
    CHECK(evaluate_flags(X86_INS_JB, cf));
    CHECK(evaluate_flags(X86_INS_JA, 0));
    CHECK_FALSE(evaluate_flags(X86_INS_JA, zf));
    CHECK(evaluate_flags(X86_INS_JBE, zf));
    CHECK(evaluate_flags(X86_INS_JO, of));
    CHECK(evaluate_flags(X86_INS_JP, pf));
    CHECK(evaluate_flags(X86_INS_JNP, 0));
}
