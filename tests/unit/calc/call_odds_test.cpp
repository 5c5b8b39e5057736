// An indirect call's targets from register snapshots (call_odds.h): the
// replay from a snapshot to a call through a table, the table's address
// from a rip-relative lea on every path to it, and its entries read from
// the image (relocated in a position-independent one), in real compiler
// output and in hand-written code.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/call_odds.h"
#include "ecpi/analyze/calc/loops.h"
#include "test_cfg.h"

using namespace ecpi::analyze;
using test::cfgtest_binaries;
using ecpi::store::RegisterSample;

namespace {

std::uint64_t start_of(const std::string& file, const std::string& name) {
    auto table = SymbolTable::from_elf(file);
    REQUIRE(table.ok());
    for (const auto& s : table->symbols())
        if (s.name == name) return s.start;
    FAIL("no symbol " << name << " in " << file);
    return 0;
}

RegisterSample snapshot(std::uint64_t pc, std::uint64_t every_register) {
    RegisterSample s;
    s.offset = pc;
    s.regs.fill(every_register);
    return s;
}

std::vector<std::uint32_t> all_of(const std::vector<RegisterSample>& stream) {
    std::vector<std::uint32_t> v;
    for (std::uint32_t k = 0; k < stream.size(); ++k) v.push_back(k);
    return v;
}

std::uint32_t seen(const CallOdds& o, std::uint64_t target) {
    for (const auto& [t, n] : o.targets)
        if (t == target) return n;
    return 0;
}

}  // namespace

TEST_CASE("call odds: each snapshot's index selects its table entry's target, in GCC's (PIE and not) and Clang's code") {
    // data/cfgtest.c's mixed(): halve(i) directly, then steps[i & 1](s)
    // through a table of {halve, negate}. PIE code reads the table through
    // a register set by a rip-relative lea before the loop, and the file
    // holds 0 in the table's entries (R_X86_64_RELATIVE relocations).
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        const Cfg cfg = test::cfg_of(file, "mixed");
        auto image = ImageBytes::open(file);
        REQUIRE(image.ok());
        const PointerAt pointer_at = [&image](std::uint64_t a) { return image->pointer_at(a); };
        const std::uint64_t halve = start_of(file, "halve"), negate = start_of(file, "negate");
        std::uint64_t direct = 0, indirect = 0, after_direct = 0, loop_top = 0;
        for (std::size_t k = 0; k < cfg.instructions.size(); ++k) {
            const auto& d = cfg.instructions[k];
            if (d.flow == FlowKind::kCall && d.target == halve) {
                direct = d.address;
                after_direct = cfg.instructions[k + 1].address;
                loop_top = cfg.instructions[cfg.blocks[cfg.instruction_block[k]].first].address;
            }
            if (d.flow == FlowKind::kIndirectCall) indirect = d.address;
        }
        REQUIRE(direct != 0);
        REQUIRE(indirect != 0);
        // Between the calls, i taken 0..7 (every register holding it,
        // whichever the compiler keeps i in): three even, five odd; before
        // the direct call: not replayed across it; at the procedure's entry:
        // no table call follows in its block.
        std::vector<RegisterSample> stream;
        for (std::uint64_t i : {0, 2, 4, 1, 3, 5, 7, 9}) stream.push_back(snapshot(after_direct, i));
        if (loop_top != direct) stream.push_back(snapshot(loop_top, 6));
        stream.push_back(snapshot(direct, 6));
        stream.push_back(snapshot(cfg.start, 6));
        const auto odds = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream));
        REQUIRE(odds.size() == 1);
        CHECK(odds[0].call == indirect);
        CHECK(odds[0].total == 8);
        CHECK(seen(odds[0], halve) == 3);
        CHECK(seen(odds[0], negate) == 5);
        CHECK(odds[0].targets.size() == 2);
        CHECK_FALSE(odds[0].index_from_memory);
        CHECK_FALSE(call_odds_decide(odds[0]));  // 8 of the 400 needed
        for (int n = 0; n < 400; ++n) stream.push_back(snapshot(after_direct, static_cast<std::uint64_t>(n)));
        const auto more = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream));
        REQUIRE(more.size() == 1);
        CHECK(seen(more[0], halve) == 203);
        CHECK(call_odds_decide(more[0]));
    }
}

TEST_CASE("call odds: cdqe replayed; an index loaded from memory just before the call decides nothing") {
    // lea r13, [rip+0x1000]; mov rax, rbx; and eax, 1; cdqe;
    // call [r13+rax*8]; mov rax, [rdi]; call [r13+rax*8]; ret   (at 0x1000)
    const std::vector<std::uint8_t> code = {0x4c, 0x8d, 0x2d, 0x00, 0x10, 0x00, 0x00, 0x48, 0x89, 0xd8, 0x83,
                                            0xe0, 0x01, 0x48, 0x98, 0x41, 0xff, 0x54, 0xc5, 0x00, 0x48, 0x8b,
                                            0x07, 0x41, 0xff, 0x54, 0xc5, 0x00, 0xc3};
    auto insns = decode_x86_64(0x1000, code);
    REQUIRE(insns.ok());
    REQUIRE(insns->size() == 8);
    const Cfg cfg = build_cfg(0x1000, 0x1000 + code.size(), std::move(*insns), CfgContext{});
    const std::map<std::uint64_t, std::uint64_t> table = {{0x2007, 0xa000}, {0x200f, 0xb000}};  // lea: 0x1007 + 0x1000
    const PointerAt pointer_at = [&table](std::uint64_t a) -> std::optional<std::uint64_t> {
        const auto it = table.find(a);
        if (it == table.end()) return std::nullopt;
        return it->second;
    };
    std::vector<RegisterSample> stream = {snapshot(0x1007, 4), snapshot(0x1007, 5), snapshot(0x100d, 0xffffffff00000001ULL),
                                          snapshot(0x1014, 0), snapshot(0x1017, 1), snapshot(0x1017, 1)};
    const auto odds = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream));
    REQUIRE(odds.size() == 2);
    CHECK(odds[0].call == 0x100f);  // rax from rbx & 1, and at cdqe from eax (the high half dropped)
    CHECK(odds[0].total == 3);
    CHECK(seen(odds[0], 0xa000) == 1);
    CHECK(seen(odds[0], 0xb000) == 2);
    CHECK_FALSE(odds[0].index_from_memory);
    // The second call's index comes from memory: the snapshot before the
    // load cannot know it, the two after it wait after the first call.
    CHECK(odds[1].call == 0x1017);
    CHECK(odds[1].total == 2);
    CHECK(odds[1].index_from_memory);
    for (int n = 0; n < 500; ++n) stream.push_back(snapshot(0x1017, 1));
    const auto more = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream));
    REQUIRE(more.size() == 2);
    CHECK_FALSE(call_odds_decide(more[1]));
}

TEST_CASE("call odds: where the index follows the loop's counter, a snapshot stands for the iterations around it") {
    // mixed()'s steps[i & 1]: i is the loop's induction variable. Ten
    // snapshots at even i and two at odd (the time before the call longer
    // when halve comes next, say): counted alone they say 10:2; the
    // iterations around each split 1:1, as the loop runs them.
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        const Cfg cfg = test::cfg_of(file, "mixed");
        const LoopInfo loops = find_loops(cfg);
        auto image = ImageBytes::open(file);
        REQUIRE(image.ok());
        const PointerAt pointer_at = [&image](std::uint64_t a) { return image->pointer_at(a); };
        const std::uint64_t halve = start_of(file, "halve"), negate = start_of(file, "negate");
        std::uint64_t after_direct = 0;
        for (std::size_t k = 0; k + 1 < cfg.instructions.size(); ++k)
            if (cfg.instructions[k].flow == FlowKind::kCall && cfg.instructions[k].target == halve)
                after_direct = cfg.instructions[k + 1].address;
        REQUIRE(after_direct != 0);
        std::vector<RegisterSample> stream;
        for (std::uint64_t i = 0; i < 20; i += 2) stream.push_back(snapshot(after_direct, i));
        for (std::uint64_t i : {1, 3}) stream.push_back(snapshot(after_direct, i));
        const auto plain = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream));
        REQUIRE(plain.size() == 1);
        CHECK_FALSE(plain[0].by_induction);
        CHECK(seen(plain[0], halve) == 10);
        CHECK(seen(plain[0], negate) == 2);
        const auto windowed = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream), &loops);
        REQUIRE(windowed.size() == 1);
        CHECK(windowed[0].by_induction);
        CHECK(windowed[0].total == 12);
        CHECK(seen(windowed[0], halve) == 12 * kWindow / 2);
        CHECK(seen(windowed[0], negate) == 12 * kWindow / 2);
    }
}

TEST_CASE("call odds: an index that needs more than the counter and the loop's invariants keeps the snapshots' own targets") {
    // The hand-written code's first call: rax from rbx, which no loop steps
    // here (there is no loop): the window has no counter to follow.
    const std::vector<std::uint8_t> code = {0x4c, 0x8d, 0x2d, 0x00, 0x10, 0x00, 0x00, 0x48, 0x89, 0xd8, 0x83,
                                            0xe0, 0x01, 0x48, 0x98, 0x41, 0xff, 0x54, 0xc5, 0x00, 0xc3};
    auto insns = decode_x86_64(0x1000, code);
    REQUIRE(insns.ok());
    const Cfg cfg = build_cfg(0x1000, 0x1000 + code.size(), std::move(*insns), CfgContext{});
    const LoopInfo loops = find_loops(cfg);
    const PointerAt pointer_at = [](std::uint64_t a) -> std::optional<std::uint64_t> {
        if (a == 0x2007) return 0xa000;
        if (a == 0x200f) return 0xb000;
        return std::nullopt;
    };
    const std::vector<RegisterSample> stream = {snapshot(0x1007, 4), snapshot(0x1007, 5), snapshot(0x1007, 7)};
    const auto odds = indirect_call_odds(cfg, pointer_at, stream, 0, all_of(stream), &loops);
    REQUIRE(odds.size() == 1);
    CHECK_FALSE(odds[0].by_induction);
    CHECK(seen(odds[0], 0xa000) == 1);
    CHECK(seen(odds[0], 0xb000) == 2);
}
