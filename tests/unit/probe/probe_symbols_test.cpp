#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "ecpi/loader/probe_symbols.h"

using namespace ecpi::loader;

TEST_CASE("patterns split at the first single colon") {
    auto p = parse_function_pattern("libc.so.6:malloc");
    REQUIRE(p.ok());
    CHECK(p->image == "libc.so.6");
    CHECK(p->function == "malloc");
    auto cpp = parse_function_pattern("ns::Parser::parse");
    REQUIRE(cpp.ok());
    CHECK(cpp->image.empty());
    CHECK(cpp->function == "ns::Parser::parse");
    auto both = parse_function_pattern("libfoo.so:ns::f*");
    REQUIRE(both.ok());
    CHECK(both->image == "libfoo.so");
    CHECK(both->function == "ns::f*");
    CHECK_FALSE(parse_function_pattern(":f").ok());
    CHECK_FALSE(parse_function_pattern("libc:").ok());
}

TEST_CASE("images match by name, prefix, glob or path") {
    auto p = *parse_function_pattern("libc:malloc");
    CHECK(image_matches(p, "/usr/lib/x86_64-linux-gnu/libc.so.6"));
    CHECK(image_matches(p, "/lib/libc-2.31.so"));
    CHECK_FALSE(image_matches(p, "/usr/lib/libcrypto.so.3"));
    CHECK(image_matches(*parse_function_pattern("libcrypto*:f"), "/usr/lib/libcrypto.so.3"));
    CHECK(image_matches(*parse_function_pattern("x"), "/anything"));
}

TEST_CASE("functions match mangled, demangled and parameterless names") {
    FunctionSymbol f{"_ZN2ns6Parser5parseEi", "ns::Parser::parse(int)", 0x1000, 10, true};
    FunctionSymbol g{"_ZN2ns6Parser5parseEPKc", "ns::Parser::parse(char const*)", 0x2000, 10, true};
    auto by_name = *parse_function_pattern("ns::Parser::parse");
    CHECK(function_matches(by_name, f));
    CHECK(function_matches(by_name, g));  // both overloads, kept apart by address
    CHECK(function_matches(*parse_function_pattern("ns::Parser::parse(int)"), f));
    CHECK_FALSE(function_matches(*parse_function_pattern("ns::Parser::parse(int)"), g));
    CHECK(function_matches(*parse_function_pattern("_ZN2ns6Parser5parseEi"), f));
    CHECK(function_matches(*parse_function_pattern("ns::*"), f));
    FunctionSymbol c{"ledger_lookup", "ledger_lookup", 0x3000, 5, true};
    CHECK(function_matches(*parse_function_pattern("ledger_*"), c));
    CHECK_FALSE(function_matches(*parse_function_pattern("ledger"), c));
}

TEST_CASE("edit distance") {
    CHECK(edit_distance("kitten", "sitting") == 3);
    CHECK(edit_distance("", "abc") == 3);
    CHECK(edit_distance("same", "same") == 0);
}

TEST_CASE("symbols of the callpaths test program") {
    auto elf = ElfSymbols::read(TESTPROG_CALLPATHS);
    REQUIRE(elf.ok());
    CHECK(elf->has_symtab());
    const FunctionSymbol* target = nullptr;
    for (const auto& f : elf->functions())
        if (f.name == "cp_target") target = &f;
    REQUIRE(target != nullptr);
    CHECK(target->size > 0);
    CHECK(elf->containing(target->vaddr) == target);
    CHECK(elf->containing(target->vaddr + target->size - 1) == target);
    auto off = elf->file_offset(target->vaddr);
    REQUIRE(off.has_value());
    CHECK(elf->vaddr_of_offset(*off) == target->vaddr);
    CHECK_FALSE(elf->build_id().empty());
    // It needs the C library, which the loader finds as ld.so would.
    bool libc = false;
    for (const auto& lib : needed_libraries(TESTPROG_CALLPATHS))
        libc = libc || lib.filename().string().rfind("libc.so", 0) == 0;
    CHECK(libc);
    // Near matches for a typo.
    auto near = near_matches(*parse_function_pattern("cp_targte"), {&*elf});
    REQUIRE_FALSE(near.empty());
    CHECK(near.front() == "cp_target");
}

TEST_CASE("a stripped binary has no symtab") {
    auto dir = std::filesystem::temp_directory_path() / ("ecpi-probe-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    auto stripped = dir / "stripped";
    std::filesystem::copy_file(TESTPROG_CALLPATHS, stripped, std::filesystem::copy_options::overwrite_existing);
    int rc = std::system(("strip " + stripped.string() + " 2>/dev/null").c_str());
    if (rc == 0) {
        auto elf = ElfSymbols::read(stripped);
        REQUIRE(elf.ok());
        CHECK_FALSE(elf->has_symtab());
        for (const auto& f : elf->functions()) CHECK(f.name != "cp_target");
    }
    std::filesystem::remove_all(dir);
    CHECK_FALSE(ElfSymbols::read("/proc/self/status").ok());
}
