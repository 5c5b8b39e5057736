// The constants a procedure's callers pass decide its entry guard
// (entry_arguments.h, issue 36): on hand-assembled code in the shape GCC
// -O2 gives branchy.c's kernels and their caller, and the image's imported
// call slots (ImageBytes::imported_slot) on real compiler output.
#include <doctest/doctest.h>

#include <fstream>
#include <vector>

#include "ecpi/analyze/calc/entry_arguments.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "hand_code.h"

using namespace ecpi::analyze;

namespace {

constexpr int kRdx = 2, kRsi = 6, kRdi = 7;

std::uint32_t call_index(const Cfg& cfg) {
    for (std::uint32_t k = 0; k < cfg.instructions.size(); ++k)
        if (is_call(cfg.instructions[k].flow)) return k;
    FAIL("no call");
    return 0;
}

// The entry block's edge of `kind`.
std::uint32_t entry_edge(const Cfg& cfg, EdgeKind kind) {
    for (auto e : cfg.blocks[0].out_edges)
        if (cfg.edges[e].kind == kind) return e;
    FAIL("no such edge out of the entry block");
    return 0;
}

// minmax's guard: test esi, esi; jle .Lempty; mov eax, esi; ret; .Lempty: xor eax, eax; ret
const std::vector<std::uint8_t> kGuard = {0x85, 0xf6, 0x7e, 0x03, 0x89, 0xf0, 0xc3, 0x31, 0xc0, 0xc3};

}  // namespace

TEST_CASE("entry arguments: the constants a call's block moves into registers before it") {
    // mov edi, 0x3039; mov esi, 0x2000; xor edx, edx; mov ecx, 7; add ecx, 1; call 0x3000; ret
    const Cfg cfg = test::hand_assembled(0x2000, {0xbf, 0x39, 0x30, 0x00, 0x00, 0xbe, 0x00, 0x20, 0x00, 0x00, 0x31,
                                                  0xd2, 0xb9, 0x07, 0x00, 0x00, 0x00, 0x83, 0xc1, 0x01, 0xe8, 0xe7,
                                                  0x0f, 0x00, 0x00, 0xc3});
    const std::vector<ArgumentValue> args = call_arguments(cfg, call_index(cfg));
    const std::vector<ArgumentValue> want = {{kRdx, 0}, {kRsi, 0x2000}, {kRdi, 0x3039}};
    CHECK(args == want);  // ecx's last write is an add: not a constant
}

TEST_CASE("entry arguments: a constant set in another block than the call's is not taken") {
    // mov esi, 5; jmp .L; .L: call 0x3000; ret (the jump's target starts a block)
    const Cfg cfg = test::hand_assembled(0x2000, {0xbe, 0x05, 0x00, 0x00, 0x00, 0xeb, 0x00, 0xe8, 0xf4, 0x0f, 0x00,
                                                  0x00, 0xc3});
    CHECK(call_arguments(cfg, call_index(cfg)).empty());
}

TEST_CASE("entry arguments: a constant set before an earlier call in the block is not taken") {
    // mov esi, 0x2000; call 0x3000; mov edi, 1; call 0x3000; ret: the first
    // callee may change esi (main's block calls fill, then classify)
    const Cfg cfg = test::hand_assembled(0x2000, {0xbe, 0x00, 0x20, 0x00, 0x00, 0xe8, 0xf6, 0x0f, 0x00, 0x00, 0xbf,
                                                  0x01, 0x00, 0x00, 0x00, 0xe8, 0xec, 0x0f, 0x00, 0x00, 0xc3});
    std::vector<std::uint32_t> calls;
    for (std::uint32_t k = 0; k < cfg.instructions.size(); ++k)
        if (is_call(cfg.instructions[k].flow)) calls.push_back(k);
    REQUIRE(calls.size() == 2);
    const std::vector<ArgumentValue> first = {{kRsi, 0x2000}};
    CHECK(call_arguments(cfg, calls[0]) == first);
    const std::vector<ArgumentValue> second = {{kRdi, 1}};
    CHECK(call_arguments(cfg, calls[1]) == second);
}

TEST_CASE("entry arguments: only the values every call site passes alike") {
    const std::vector<std::vector<ArgumentValue>> sites = {{{kRsi, 8192}, {kRdi, 1}}, {{kRsi, 8192}, {kRdi, 2}}};
    const std::vector<ArgumentValue> want = {{kRsi, 8192}};
    CHECK(common_arguments(sites) == want);
    const std::vector<std::vector<ArgumentValue>> one_unknown = {{{kRsi, 8192}}, {}};
    CHECK(common_arguments(one_unknown).empty());
    CHECK(common_arguments({}).empty());
}

TEST_CASE("entry arguments: the guard's way the callers' constant does not take is ruled out") {
    const Cfg cfg = test::hand_assembled(0x3000, kGuard);
    const std::vector<ArgumentValue> n8192 = {{kRsi, 0x2000}};
    CHECK(ruled_out_entry_edge(cfg, n8192) == entry_edge(cfg, EdgeKind::kBranch));  // n > 0: never the early return
    const std::vector<ArgumentValue> zero = {{kRsi, 0}};
    CHECK(ruled_out_entry_edge(cfg, zero) == entry_edge(cfg, EdgeKind::kFallThrough));
    // 0x80000000 is negative as the 32-bit operand the test reads.
    const std::vector<ArgumentValue> negative = {{kRsi, 0x80000000u}};
    CHECK(ruled_out_entry_edge(cfg, negative) == entry_edge(cfg, EdgeKind::kFallThrough));
    const std::vector<ArgumentValue> other = {{kRdi, 0x2000}};
    CHECK(!ruled_out_entry_edge(cfg, other));  // the compare reads esi, which no caller set
}

TEST_CASE("entry arguments: a compare with an immediate is evaluated at the callers' value") {
    // cmp esi, 16; jg .Lbig; mov eax, esi; ret; .Lbig: xor eax, eax; ret
    const Cfg cfg = test::hand_assembled(0x3000, {0x83, 0xfe, 0x10, 0x7f, 0x03, 0x89, 0xf0, 0xc3, 0x31, 0xc0, 0xc3});
    const std::vector<ArgumentValue> big = {{kRsi, 0x2000}};
    CHECK(ruled_out_entry_edge(cfg, big) == entry_edge(cfg, EdgeKind::kFallThrough));
    const std::vector<ArgumentValue> small = {{kRsi, 3}};
    CHECK(ruled_out_entry_edge(cfg, small) == entry_edge(cfg, EdgeKind::kBranch));
}

TEST_CASE("entry arguments: a register the entry block changes, or flags from arithmetic, decide nothing") {
    // mov esi, 5; test esi, esi; jle ... : the callers' esi is not what the test reads
    std::vector<std::uint8_t> written = {0xbe, 0x05, 0x00, 0x00, 0x00};
    written.insert(written.end(), kGuard.begin(), kGuard.end());
    const std::vector<ArgumentValue> n8192 = {{kRsi, 0x2000}};
    CHECK(!ruled_out_entry_edge(test::hand_assembled(0x3000, written), n8192));
    // search's guard: sub esi, 1; js .Lnone (the flags come from the sub)
    const Cfg search = test::hand_assembled(0x3000, {0x83, 0xee, 0x01, 0x78, 0x03, 0x89, 0xf0, 0xc3, 0x31, 0xc0, 0xc3});
    CHECK(!ruled_out_entry_edge(search, n8192));
}

TEST_CASE("imported call slots: _start's call of __libc_start_main goes through one, code addresses are none") {
    auto table = SymbolTable::from_elf(ECPI_CFGTEST_GCC);
    REQUIRE(table.ok());
    auto image = ImageBytes::open(ECPI_CFGTEST_GCC);
    REQUIRE(image.ok());
    const Symbol* start = nullptr;
    for (const auto& s : table->symbols())
        if (s.name == "_start") start = &s;
    REQUIRE(start);
    const auto bytes = image->read(start->start, table->end_of(*start) - start->start);
    auto insns = decode_x86_64(start->start, bytes);
    REQUIRE(insns.ok());
    int imported = 0;
    for (const auto& d : *insns)
        if (d.flow == FlowKind::kIndirectCall && d.loads && image->imported_slot(static_cast<std::uint64_t>(d.memory.disp)))
            ++imported;
    CHECK(imported == 1);
    CHECK(!image->imported_slot(start->start));
}
