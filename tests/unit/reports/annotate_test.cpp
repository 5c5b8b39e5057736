// DebugInfo (DWARF lines and inline chains, code bytes, disassembly) against
// binutils' addr2line and objdump, and `ecpi annotate` on data/annotest.c:
// with source, with the source file gone, and without DWARF.
#include "ecpi/analyze/reports/annotate.h"

#include <algorithm>

#include <doctest/doctest.h>

#include "annotest_fixture.h"
#include "ecpi/analyze/symbols/debug_info.h"

using namespace ecpi::analyze;
using namespace ecpi::analyze::testing;
using ecpi::store::EpochContents;
using ecpi::store::ImageId;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// Samples on every instruction of hot_loop (weight 1 + index) and a few
// on leaf_work, recorded from `binary`.
LoadedProfile annotest_profile(const std::string& binary) {
    auto fn = function_addresses(binary);
    auto insns = objdump_instructions(binary, "hot_loop");
    std::map<std::uint64_t, std::uint64_t> counts;
    for (std::size_t i = 0; i < insns.size(); ++i) counts[insns[i]] = 1 + i;
    counts[fn.at("leaf_work")] = 5;
    LoadedProfile p;
    p.source.spec = "test.db";
    p.source.database = "/nonexistent/test.db";
    p.source.epoch = "00003";
    p.contents.epoch = "00003";
    p.contents.profiles = {image_profile({binary, read_build_id(binary).value()}, "cpu-clock", 1000, {{42, counts}})};
    return p;
}

}  // namespace

TEST_CASE("DebugInfo: lines and inline chains agree with addr2line -i") {
    auto info = DebugInfo::open(ECPI_ANNOTEST);
    REQUIRE_MESSAGE(info.ok(), info.error().message());
    CHECK(info->has_lines());
    auto insns = objdump_instructions(ECPI_ANNOTEST, "hot_loop");
    REQUIRE(insns.size() > 4);
    bool saw_inline = false;
    for (auto address : insns) {
        CAPTURE(address);
        auto ours = info->frames_at(address);
        auto theirs = addr2line(ECPI_ANNOTEST, address);
        REQUIRE(ours.size() == theirs.size());
        for (std::size_t i = 0; i < ours.size(); ++i) {
            CHECK(ours[i].function == theirs[i].first);
            CHECK(ours[i].line == theirs[i].second);
            CHECK(ours[i].inlined == (i + 1 < ours.size()));
        }
        if (ours.size() > 1) {
            saw_inline = true;
            CHECK(ours[0].function == "mix");
            CHECK(ours[0].line == marker_line("MARK_MIX"));
            CHECK(ours[1].line == marker_line("MARK_LOOP"));
            CHECK(ours[0].decl_line > 0);
        }
        CHECK(ours.back().function == "hot_loop");
        CHECK(ours.back().file.ends_with("annotest.c"));
    }
    CHECK(saw_inline);
}

TEST_CASE("DebugInfo: code bytes and disassembly match objdump's instruction boundaries") {
    auto info = DebugInfo::open(ECPI_ANNOTEST);
    REQUIRE(info.ok());
    auto fn = function_addresses(ECPI_ANNOTEST);
    auto table = SymbolTable::from_elf(ECPI_ANNOTEST).value();
    const Symbol* sym = table.lookup(fn.at("hot_loop"));
    REQUIRE(sym != nullptr);
    auto bytes = info->code(sym->start, table.end_of(*sym));
    REQUIRE_MESSAGE(bytes.ok(), bytes.error().message());
    CHECK(bytes->size() == sym->size);
    auto insns = disassemble(info->machine(), sym->start, *bytes);
    REQUIRE(insns.ok());
    std::vector<std::uint64_t> ours;
    for (const auto& i : *insns) ours.push_back(i.address);
    CHECK(ours == objdump_instructions(ECPI_ANNOTEST, "hot_loop"));
    CHECK(insns->back().text.starts_with("ret"));
    auto none = info->code(0, 16);
    CHECK_FALSE(none.ok());
    auto bad = disassemble(0xffff, 0, *bytes);
    CHECK_FALSE(bad.ok());
}

TEST_CASE("annotate: source lines, assembly, inlined function, hottest marks") {
    TempDir tmp;
    LoadedProfile profile = annotest_profile(ECPI_ANNOTEST);
    Symbolizer symbolizer = test_symbolizer(tmp.path());
    AnnotateOptions options;
    options.procedure = "hot_loop";
    auto report = build_annotate_report(profile, options, symbolizer);
    REQUIRE_MESSAGE(report.ok(), report.error().message());
    auto insns = objdump_instructions(ECPI_ANNOTEST, "hot_loop");
    std::uint64_t expected = 0;
    for (std::size_t i = 0; i < insns.size(); ++i) expected += 1 + i;
    CHECK(report->procedure == "hot_loop");
    CHECK(report->samples == expected);
    CHECK(report->event_total == expected + 5);
    CHECK(report->have_code);
    CHECK(report->have_lines);
    CHECK(report->notes.empty());

    std::size_t n = 0;
    std::uint64_t sum = 0;
    bool inlined_mix = false;
    for (const auto& block : report->blocks) {
        for (const auto& insn : block.instructions) {
            ++n;
            sum += insn.samples;
            CHECK_FALSE(insn.text.empty());
        }
        if (!block.inlined.empty() && block.inlined.front() == "mix") {
            inlined_mix = true;
            CHECK(block.line == marker_line("MARK_MIX"));
        }
    }
    CHECK(n == insns.size());
    CHECK(sum == expected);
    CHECK(inlined_mix);

    // The loop line carries samples; its text is read from the source file.
    const AnnotatedLine* loop = nullptr;
    std::size_t hot = 0;
    for (const auto& line : report->lines) {
        if (line.line == marker_line("MARK_LOOP")) loop = &line;
        if (line.hot) ++hot;
    }
    REQUIRE(loop != nullptr);
    REQUIRE(loop->text.has_value());
    CHECK(contains(*loop->text, "MARK_LOOP"));
    CHECK(hot == std::min<std::size_t>(3, report->lines.size()));
    // The last instruction has the most samples: it is marked hot.
    CHECK(report->blocks.back().instructions.back().hot);

    std::string text = render_annotate_text(*report);
    CHECK(contains(text, "Procedure: hot_loop"));
    CHECK(contains(text, "Hottest source lines:"));
    CHECK(contains(text, "[inlined: mix]"));
    CHECK(contains(text, "MARK_LOOP"));
    nlohmann::json j = render_annotate_json(*report);
    CHECK(j["schema"] == "ecpi.annotate");
    CHECK(j["version"] == 1);
    CHECK(j["have_lines"] == true);
    CHECK(j["samples"] == expected);
}

TEST_CASE("annotate: missing source file, no DWARF, unknown procedure") {
    TempDir tmp;
    Symbolizer symbolizer = test_symbolizer(tmp.path());
    AnnotateOptions options;
    options.procedure = "hot_loop";

    auto nosrc = build_annotate_report(annotest_profile(ECPI_ANNOTEST_NOSRC), options, symbolizer);
    REQUIRE_MESSAGE(nosrc.ok(), nosrc.error().message());
    CHECK(nosrc->have_code);
    CHECK(nosrc->have_lines);
    REQUIRE(!nosrc->notes.empty());
    CHECK(contains(nosrc->notes.front(), "annotest_nosrc.c not found"));
    for (const auto& line : nosrc->lines) CHECK_FALSE(line.text.has_value());
    CHECK(contains(render_annotate_text(*nosrc), "Note: source file"));

    auto nodwarf = build_annotate_report(annotest_profile(ECPI_ANNOTEST_NODWARF), options, symbolizer);
    REQUIRE_MESSAGE(nodwarf.ok(), nodwarf.error().message());
    CHECK(nodwarf->have_code);
    CHECK_FALSE(nodwarf->have_lines);
    CHECK(nodwarf->lines.empty());
    REQUIRE(nodwarf->notes.size() == 1);
    CHECK(contains(nodwarf->notes.front(), "no DWARF line information"));
    CHECK(contains(render_annotate_text(*nodwarf), "Assembly ("));

    options.procedure = "hot_lop";
    auto typo = build_annotate_report(annotest_profile(ECPI_ANNOTEST), options, symbolizer);
    REQUIRE_FALSE(typo.ok());
    CHECK(contains(typo.error().message(), "close matches: hot_loop"));

    options.procedure = "hot_loop";
    options.event = "cycles";
    auto other_event = build_annotate_report(annotest_profile(ECPI_ANNOTEST), options, symbolizer);
    REQUIRE_FALSE(other_event.ok());
    CHECK(contains(other_event.error().message(), "has no cycles samples (it has cpu-clock)"));
}

TEST_CASE("annotate: direct calls name their targets as objdump does (PLT entries included)") {
    TempDir tmp;
    Symbolizer symbolizer = test_symbolizer(tmp.path());
    // main calls hot_loop, caller_a, caller_b and printf through the PLT.
    const std::string binary = ECPI_ANNOTEST;
    LoadedProfile profile = annotest_profile(binary);
    std::map<std::uint64_t, std::uint64_t> on_main;
    for (std::uint64_t address : objdump_instructions(binary, "main")) on_main[address] = 1;
    profile.contents.profiles = {
        image_profile({binary, read_build_id(binary).value()}, "cpu-clock", 1000, {{42, on_main}})};
    AnnotateOptions options;
    options.procedure = "main";
    auto report = build_annotate_report(profile, options, symbolizer);
    REQUIRE_MESSAGE(report.ok(), report.error().message());

    // objdump's names of main's call targets: "call   1040 <printf@plt>".
    std::istringstream dump(run_command(std::string(ECPI_OBJDUMP) + " -d --no-show-raw-insn '" + binary + "'"));
    std::vector<std::string> objdump_targets;
    std::string line;
    bool inside = false;
    while (std::getline(dump, line)) {
        if (line.ends_with("<main>:")) inside = true;
        else if (inside && line.empty()) break;
        else if (inside && line.find("call") != std::string::npos && line.find('<') != std::string::npos)
            objdump_targets.push_back(line.substr(line.find('<')));
    }
    std::vector<std::string> ours;
    for (const auto& block : report->blocks)
        for (const auto& insn : block.instructions)
            if (insn.text.starts_with("call ") && insn.text.find('<') != std::string::npos)
                ours.push_back(insn.text.substr(insn.text.find('<')));
    REQUIRE(!objdump_targets.empty());
    CHECK(ours == objdump_targets);
    CHECK(std::any_of(ours.begin(), ours.end(), [](const std::string& t) { return t.ends_with("@plt>"); }));
}
