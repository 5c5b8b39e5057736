// CFG construction on real compiler output (data/cfgtest.c): jump tables in
// PIC and non-PIC form, calls to abort() ending a block, tail calls, loops
// and a loop that never exits.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/json_document.h"
#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "test_cfg.h"

using namespace ecpi::analyze;
using test::cfgtest_binaries;

namespace {

struct Built {
    Cfg cfg;
    std::string file;
};

using test::cfg_of;

std::size_t count_edges(const Cfg& cfg, EdgeKind kind) {
    return static_cast<std::size_t>(
        std::count_if(cfg.edges.begin(), cfg.edges.end(), [&](const CfgEdge& e) { return e.kind == kind; }));
}

// Every instruction in exactly one block, blocks in order, edge lists consistent.
void check_well_formed(const Cfg& cfg) {
    std::uint32_t next = 0;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        CHECK(cfg.blocks[b].first == next);
        CHECK(cfg.blocks[b].count > 0);
        for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i) CHECK(cfg.block_of(next + i) == b);
        next += cfg.blocks[b].count;
        for (auto e : cfg.blocks[b].out_edges) CHECK(cfg.edges[e].from == b);
        for (auto e : cfg.blocks[b].in_edges) CHECK(cfg.edges[e].to == b);
    }
    CHECK(next == cfg.instructions.size());
    CHECK(count_edges(cfg, EdgeKind::kEntry) == 1);
}

}  // namespace

TEST_CASE("decoding: registers are canonical, memory operands and flow kinds are known") {
    // mov rax, qword ptr [rdi + 8]; add eax, ecx; jne -4; ret
    const std::uint8_t code[] = {0x48, 0x8b, 0x47, 0x08, 0x01, 0xc8, 0x75, 0xf8, 0xc3};
    auto insns = decode_x86_64(0x1000, code);
    REQUIRE(insns.ok());
    REQUIRE(insns->size() == 4);
    const auto& mov = (*insns)[0];
    CHECK(mov.loads);
    CHECK_FALSE(mov.stores);
    CHECK(mov.memory.disp == 8);
    const auto& add = (*insns)[1];
    CHECK(add.writes.contains(mov.writes.front()));  // eax is rax
    CHECK(add.writes.contains(kFlagsRegister));
    CHECK((*insns)[2].flow == FlowKind::kCondJump);
    CHECK((*insns)[2].target == 0x1000);
    CHECK((*insns)[3].flow == FlowKind::kReturn);
    // xor eax, eax is a zero idiom: no input dependency.
    const std::uint8_t zero[] = {0x31, 0xc0};
    auto z = decode_x86_64(0, zero);
    REQUIRE(z.ok());
    CHECK((*z)[0].zero_idiom);
    CHECK((*z)[0].reads.empty());
    // Undecodable bytes become one-byte traps.
    const std::uint8_t bad[] = {0x06};
    auto b = decode_x86_64(0, bad);
    REQUIRE(b.ok());
    CHECK((*b)[0].mnemonic == "(bad)");
    CHECK((*b)[0].flow == FlowKind::kTrap);
}

TEST_CASE("no-return functions are recognized by name") {
    CHECK(is_noreturn_function("abort@plt"));
    CHECK(is_noreturn_function("exit"));
    CHECK(is_noreturn_function("__stack_chk_fail@plt"));
    CHECK(is_noreturn_function("__cxa_throw"));
    CHECK(is_noreturn_function("std::__throw_length_error(char const*)"));
    CHECK_FALSE(is_noreturn_function("printf@plt"));
    CHECK_FALSE(is_noreturn_function("exit_handler"));
}

TEST_CASE("switch statements become jump tables, PIC and non-PIC, GCC and Clang") {
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        Cfg cfg = cfg_of(file, "dispatch");
        check_well_formed(cfg);
        CHECK_FALSE(cfg.missing_edges);
        REQUIRE(cfg.jump_tables.size() == 1);
        CHECK(cfg.jump_tables[0].entries >= 8);
        // Eight cases with distinct bodies: at least eight distinct targets
        // (the default may share one).
        std::set<std::uint32_t> targets;
        for (const auto& e : cfg.edges)
            if (e.kind == EdgeKind::kSwitch) targets.insert(e.to);
        CHECK(targets.size() >= 7);
        CHECK(count_edges(cfg, EdgeKind::kUnresolved) == 0);
    }
}

TEST_CASE("a switch in a loop whose table address was loaded before the loop is a jump table") {
    // GCC's PIE and Clang's code load the table's address with a `lea` in
    // the loop's preheader, out of the matcher's window; the bound check
    // (`cmp; ja`) stays beside the jump. The table is the one such `lea`
    // whose entries all land on the procedure's instructions.
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        Cfg cfg = cfg_of(file, "unescape");
        check_well_formed(cfg);
        CHECK_FALSE(cfg.missing_edges);
        CHECK(count_edges(cfg, EdgeKind::kUnresolved) == 0);
        REQUIRE(cfg.jump_tables.size() == 1);
        CHECK(cfg.jump_tables[0].entries >= 9);
        std::set<std::uint32_t> targets;
        for (const auto& e : cfg.edges)
            if (e.kind == EdgeKind::kSwitch) targets.insert(e.to);
        CHECK(targets.size() >= 7);  // '"', '/' and '\\' store the byte read: compilers share their case
    }
}

TEST_CASE("a call to abort ends its block with an edge to the exit") {
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        Cfg cfg = cfg_of(file, "checked");
        check_well_formed(cfg);
        CHECK(count_edges(cfg, EdgeKind::kNoReturn) == 1);
        CHECK(count_edges(cfg, EdgeKind::kReturn) >= 1);
    }
}

TEST_CASE("a tail call is a jump out of the procedure") {
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        Cfg cfg = cfg_of(file, "tail");
        check_well_formed(cfg);
        CHECK(count_edges(cfg, EdgeKind::kTailJump) >= 1);
        CHECK_FALSE(cfg.missing_edges);
    }
}

TEST_CASE("a counted loop has a back edge; a loop that never exits gets a loop-exit edge") {
    for (const auto& file : cfgtest_binaries()) {
        CAPTURE(file);
        Cfg loop = cfg_of(file, "counted");
        check_well_formed(loop);
        bool back = false;
        for (const auto& e : loop.edges)
            if (e.from != kEntryBlock && e.to != kExitBlock && e.to <= e.from) back = true;
        CHECK(back);
        CHECK(count_edges(loop, EdgeKind::kLoopExit) == 0);

        Cfg inf = cfg_of(file, "forever");
        check_well_formed(inf);
        CHECK(count_edges(inf, EdgeKind::kLoopExit) == 1);
    }
}

TEST_CASE("an indirect jump through a register loaded with an index is unresolved: missing edges") {
    // mov rax, qword ptr [rdi + rsi*8]; jmp rax   (a computed goto)
    const std::uint8_t code[] = {0x48, 0x8b, 0x04, 0xf7, 0xff, 0xe0};
    auto insns = decode_x86_64(0x2000, code);
    REQUIRE(insns.ok());
    Cfg cfg = build_cfg(0x2000, 0x2000 + sizeof code, std::move(*insns), {});
    CHECK(cfg.missing_edges);
    CHECK(cfg.unresolved_jumps == std::vector<std::uint64_t>{0x2004});
    // mov rax, qword ptr [rdi + 8]; jmp rax   (a call through a pointer, in tail position)
    const std::uint8_t tail[] = {0x48, 0x8b, 0x47, 0x08, 0xff, 0xe0};
    auto t = decode_x86_64(0x3000, tail);
    REQUIRE(t.ok());
    Cfg tc = build_cfg(0x3000, 0x3000 + sizeof tail, std::move(*t), {});
    CHECK_FALSE(tc.missing_edges);
    CHECK(count_edges(tc, EdgeKind::kTailJump) == 1);
}

TEST_CASE("leaf functions: no call and no jump out of themselves") {
    for (const auto& file : cfgtest_binaries()) {
        INFO(file);
        auto table = SymbolTable::from_elf(file);
        REQUIRE(table.ok());
        auto image = ImageBytes::open(file);
        REQUIRE(image.ok());
        auto leaf = [&](const std::string& name) {
            for (const auto& s : table->symbols())
                if (s.name == name) return is_leaf_function(*image, s.start, table->end_of(s));
            FAIL("no symbol " << name);
            return false;
        };
        CHECK(leaf("leaf"));
        CHECK(leaf("counted"));
        CHECK_FALSE(leaf("tail"));     // jmp leaf
        CHECK_FALSE(leaf("checked"));  // call abort
        CHECK_FALSE(leaf("main"));
        CHECK_FALSE(is_leaf_function(*image, 0x10, 0x10));  // empty range
    }
}

TEST_CASE("calc JSON written one procedure at a time is the whole document's text") {
    const std::string file = ECPI_CFGTEST_GCC;
    auto table = SymbolTable::from_elf(file);
    REQUIRE(table.ok());
    auto image = ImageBytes::open(file);
    REQUIRE(image.ok());
    auto model = MachineModel::load(MachineModel::kDefault);
    REQUIRE(model.ok());
    CalcReport report;
    report.event = "cpu-clock";
    report.warnings = {"a warning"};
    auto text_of = [](const CalcReport& r) {
        std::ostringstream out;
        write_calc_json(r, out);
        return out.str();
    };
    CHECK(text_of(report) == ecpi::dump_document(render_calc_json(report)));  // no procedures: "procedures": []
    report.event_samples = 1234;  // a share of all samples in every summary
    for (const char* name : {"counted", "dispatch", "leaf"}) {
        const Symbol* sym = nullptr;
        for (const auto& s : table->symbols())
            if (s.name == name) sym = &s;
        REQUIRE(sym != nullptr);
        ProcedureInput in;
        in.name = name;
        in.start = sym->start;
        in.end = table->end_of(*sym);
        in.image = &*image;
        // "leaf" unsampled: a summary of zeros, CPIs null.
        if (std::string(name) != "leaf") in.samples = {{sym->start, 40}, {sym->start + 4, 7}};
        auto proc = analyze_procedure(in, *model, 1000);
        REQUIRE(proc.ok());
        report.procedures.push_back(std::move(*proc));
        CHECK(text_of(report) == ecpi::dump_document(render_calc_json(report)));
    }
}

TEST_CASE("calc never states a confident zero calls for a procedure that took samples") {
    CalcReport report;
    report.event = "cpu-clock";
    CalcProcedure ran_once;  // its loop took the samples, its entry none: the estimate rounds to 0
    ran_once.name = "run_once";
    ran_once.image = "/bin/prog";
    ran_once.samples = 5134;
    ran_once.invocations = 0.2;
    CalcProcedure estimated = ran_once;
    estimated.name = "called";
    estimated.invocations = 41800000;
    report.procedures = {ran_once, estimated};
    const std::string text = render_calc_text(report);
    CHECK(text.find("run_once  (/bin/prog)  5134 samples, calls not estimated") != std::string::npos);
    CHECK(text.find("41800000 calls (est.)") != std::string::npos);
    CHECK(text.find(" 0 calls") == std::string::npos);
    const auto json = render_calc_json(report);
    CHECK(json["procedures"][0]["invocations"].is_null());
    CHECK(json["procedures"][1]["invocations"] == 41800000.0);
}
