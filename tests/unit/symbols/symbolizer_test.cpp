// SymbolTable, read_build_id and Symbolizer against binaries built from
// data/symtest.cpp; expected answers come from nm/objdump/readelf listings.
#include "ecpi/analyze/symbols/symbolizer.h"

#include <doctest/doctest.h>

#include <cstdlib>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace fs = std::filesystem;
using ecpi::analyze::Symbol;
using ecpi::analyze::Symbolizer;
using ecpi::analyze::SymbolTable;
using ecpi::analyze::read_build_id;
using namespace ecpi::analyze::testing;

namespace {

// Functions data/symtest.cpp defines, by their demangled names.
const char* const kKnownFunctions[] = {
    "ecpi_test::compute(int)",
    "ecpi_test::compute(double)",
    "ecpi_test::Widget::spin(int) const",
    "local_helper(int)",  // static
    "plain_c_function",   // extern "C"
    "main",
};

std::string name_at(const SymbolTable& table, std::uint64_t addr) {
    const Symbol* sym = table.lookup(addr);
    return sym != nullptr ? sym->name : "<none>";
}

// Every known function resolves at its nm address and inside its body.
void check_known_functions(const SymbolTable& table, const fs::path& nm_listing) {
    auto nm = nm_functions(nm_listing);
    for (const char* name : kKnownFunctions) {
        CAPTURE(name);
        REQUIRE(nm.count(name) == 1);
        std::uint64_t addr = nm.at(name);
        CHECK(name_at(table, addr) == name);
        const Symbol* sym = table.lookup(addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->start == addr);
        CHECK(sym->size > 0);
        CHECK(name_at(table, addr + sym->size - 1) == name);
    }
}

// Every PLT entry objdump labels "x@plt" resolves to the same name.
void check_plt(const SymbolTable& table, const fs::path& plt_listing) {
    auto plt = objdump_plt_entries(plt_listing);
    REQUIRE(plt.count("puts@plt") == 1);
    for (const auto& [label, addr] : plt) {
        CAPTURE(label);
        CHECK(name_at(table, addr) == label);
        CHECK(name_at(table, addr + 5) == label);
    }
}

}  // namespace

TEST_CASE("read_build_id matches readelf -n") {
    auto bid = read_build_id(ECPI_SYMTEST);
    REQUIRE(bid.ok());
    CHECK(*bid == readelf_build_id(ECPI_SYMTEST_NOTES));
    CHECK(bid->size() == 40);  // SHA-1, as GNU ld emits by default

    auto missing = read_build_id("/nonexistent/file");
    REQUIRE(!missing.ok());
    CHECK(missing.error().message().find("/nonexistent/file") != std::string::npos);

    TempDir tmp;
    write_text(tmp.path() / "not-elf", "hello\n");
    auto not_elf = read_build_id(tmp.path() / "not-elf");
    REQUIRE(!not_elf.ok());
    CHECK(not_elf.error().message().find("not an ELF file") != std::string::npos);
}

TEST_CASE("from_elf: functions of an unstripped binary, demangled") {
    auto table = SymbolTable::from_elf(ECPI_SYMTEST);
    REQUIRE_MESSAGE(table.ok(), table.error().message());
    CHECK(table->build_id() == readelf_build_id(ECPI_SYMTEST_NOTES));
    check_known_functions(*table, ECPI_SYMTEST_NM);

    // Sorted by address, unique starts.
    const auto& symbols = table->symbols();
    for (std::size_t i = 1; i < symbols.size(); ++i) CHECK(symbols[i - 1].start < symbols[i].start);

    // Before the first symbol, and past the end of a sized symbol in a gap.
    CHECK(table->lookup(0) == nullptr);
    std::size_t gaps = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
        const Symbol& s = symbols[i];
        if (s.size == 0 || s.start + s.size >= symbols[i + 1].start) continue;
        CAPTURE(s.name);
        CHECK(table->lookup(s.start + s.size) == nullptr);
        ++gaps;
    }
    CHECK(gaps > 0);  // -O1 aligns functions, so padding exists between some
}

TEST_CASE("from_elf: PLT entries, lazy-binding layout (.plt)") {
    auto table = SymbolTable::from_elf(ECPI_SYMTEST);
    REQUIRE(table.ok());
    check_plt(*table, ECPI_SYMTEST_PLT);
    // putchar's address is taken, so its calls use .plt.got or the GOT
    // directly; __cxa_finalize is always called through .plt.got.
    auto plt = objdump_plt_entries(ECPI_SYMTEST_PLT);
    CHECK(plt.count("__cxa_finalize@plt") == 1);
}

TEST_CASE("from_elf: PLT entries, IBT layout (.plt.sec)") {
    REQUIRE(read_text(ECPI_SYMTEST_IBT_PLT).find("section .plt.sec") != std::string::npos);
    auto table = SymbolTable::from_elf(ECPI_SYMTEST_IBT);
    REQUIRE(table.ok());
    check_known_functions(*table, ECPI_SYMTEST_IBT_NM);
    check_plt(*table, ECPI_SYMTEST_IBT_PLT);
}

#ifdef ECPI_SYMTEST_CLANG
TEST_CASE("from_elf: clang-built binary with IBT PLT") {
    auto table = SymbolTable::from_elf(ECPI_SYMTEST_CLANG);
    REQUIRE(table.ok());
    check_known_functions(*table, ECPI_SYMTEST_CLANG_NM);
    check_plt(*table, ECPI_SYMTEST_CLANG_PLT);
}
#endif

TEST_CASE("from_elf: stripped binary, debug file through .gnu_debuglink") {
    const fs::path stripped = ECPI_SYMTEST_STRIPPED;
    const fs::path debug = ECPI_SYMTEST_DEBUG;
    // The build copies symbols, so the stripped binary has the same build id.
    REQUIRE(read_build_id(stripped).ok());
    CHECK(*read_build_id(stripped) == readelf_build_id(ECPI_SYMTEST_NOTES));

    SUBCASE("next to the binary") {
        auto table = SymbolTable::from_elf(stripped);
        REQUIRE(table.ok());
        check_known_functions(*table, ECPI_SYMTEST_NM);
        check_plt(*table, ECPI_SYMTEST_PLT);  // from the stripped file's own .plt
    }
    SUBCASE("in the .debug subdirectory") {
        TempDir tmp;
        copy_into(stripped, tmp.path() / "bin" / "symtest");
        copy_into(debug, tmp.path() / "bin" / ".debug" / "symtest.debug");
        auto table = SymbolTable::from_elf(tmp.path() / "bin" / "symtest");
        REQUIRE(table.ok());
        check_known_functions(*table, ECPI_SYMTEST_NM);
    }
    SUBCASE("under <root>/<binary dir>/") {
        TempDir tmp;
        fs::path bin_dir = fs::canonical(tmp.path()) / "bin";
        copy_into(stripped, bin_dir / "symtest");
        fs::path root = tmp.path() / "debug-root";
        copy_into(debug, root / bin_dir.relative_path() / "symtest.debug");
        auto without_root = SymbolTable::from_elf(bin_dir / "symtest");
        REQUIRE(without_root.ok());
        auto nm = nm_functions(ECPI_SYMTEST_NM);
        CHECK(without_root->lookup(nm.at("main")) == nullptr);
        auto table = SymbolTable::from_elf(bin_dir / "symtest", {root});
        REQUIRE(table.ok());
        check_known_functions(*table, ECPI_SYMTEST_NM);
    }
    SUBCASE("a debug file without build id, accepted by its CRC") {
        const fs::path crc_stripped = ECPI_SYMTEST_CRC_STRIPPED;
        auto debug_bid = read_build_id(crc_stripped.parent_path() / "symtest.debug");
        REQUIRE(debug_bid.ok());
        CHECK(debug_bid->empty());
        auto table = SymbolTable::from_elf(crc_stripped);
        REQUIRE(table.ok());
        check_known_functions(*table, ECPI_SYMTEST_NM);

        // The same file with one byte changed no longer matches the CRC.
        TempDir tmp;
        copy_into(crc_stripped, tmp.path() / "symtest");
        copy_into(crc_stripped.parent_path() / "symtest.debug", tmp.path() / "symtest.debug");
        {
            std::fstream f(tmp.path() / "symtest.debug", std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(-1, std::ios::end);
            f.put('\x5a');
        }
        auto tampered = SymbolTable::from_elf(tmp.path() / "symtest");
        REQUIRE(tampered.ok());
        CHECK(tampered->lookup(nm_functions(ECPI_SYMTEST_NM).at("main")) == nullptr);
    }
    SUBCASE("a debuglink candidate with the wrong CRC and build id is rejected") {
        TempDir tmp;
        copy_into(stripped, tmp.path() / "symtest");
        copy_into(ECPI_SYMTEST_IBT, tmp.path() / "symtest.debug");  // another build
        auto table = SymbolTable::from_elf(tmp.path() / "symtest");
        REQUIRE(table.ok());  // .dynsym and the PLT remain
        auto nm = nm_functions(ECPI_SYMTEST_NM);
        for (const char* name : kKnownFunctions) {
            CAPTURE(name);
            const Symbol* sym = table->lookup(nm.at(name));
            CHECK((sym == nullptr || sym->name != name));
        }
        check_plt(*table, ECPI_SYMTEST_PLT);
    }
}

TEST_CASE("from_elf: stripped binary, debug file by build id") {
    TempDir tmp;
    copy_into(ECPI_SYMTEST_STRIPPED, tmp.path() / "alone" / "symtest");  // no debuglink target here
    std::string bid = readelf_build_id(ECPI_SYMTEST_NOTES);
    fs::path root = tmp.path() / "root";
    copy_into(ECPI_SYMTEST_DEBUG, root / ".build-id" / bid.substr(0, 2) / (bid.substr(2) + ".debug"));

    auto table = SymbolTable::from_elf(tmp.path() / "alone" / "symtest", {root});
    REQUIRE(table.ok());
    CHECK(table->build_id() == bid);
    check_known_functions(*table, ECPI_SYMTEST_NM);
    check_plt(*table, ECPI_SYMTEST_PLT);

    // The debug file alone (no PLT contents) still names the functions.
    auto debug_only = SymbolTable::from_elf(root / ".build-id" / bid.substr(0, 2) / (bid.substr(2) + ".debug"));
    REQUIRE(debug_only.ok());
    check_known_functions(*debug_only, ECPI_SYMTEST_NM);
}

TEST_CASE("from_kallsyms: text symbols rebased to _text, modules, aliases") {
    TempDir tmp;
    write_text(tmp.path() / "kallsyms",
               "0000000000000000 A fixed_percpu_data\n"
               "ffffffff81000000 T startup_64\n"
               "ffffffff81000000 T _stext\n"
               "ffffffff81000000 T _text\n"
               "ffffffff81000100 t local_fn\n"
               "ffffffff81000200 W weak_fn\n"
               "ffffffff81000300 D some_data\n"
               "ffffffff81000400 T next_fn\n"
               "ffffffff81000400 t next_fn_local_alias\n"
               "ffffffffc0001000 t mod_fn\t[ext4]\n"
               "ffffffffc0001080 T mod_fn2\t[ext4]\n");
    auto table = SymbolTable::from_kallsyms(tmp.path() / "kallsyms");
    REQUIRE_MESSAGE(table.ok(), table.error().message());
    CHECK(name_at(*table, 0) == "_text");  // global aliases: the shortest name
    CHECK(name_at(*table, 0xff) == "_text");
    CHECK(name_at(*table, 0x100) == "local_fn");
    CHECK(name_at(*table, 0x250) == "weak_fn");
    CHECK(name_at(*table, 0x3ff) == "weak_fn");  // data symbols do not end text symbols
    CHECK(name_at(*table, 0x400) == "next_fn");  // global preferred over a local alias
    CHECK(name_at(*table, 0xffffffffc0001000 - 0xffffffff81000000) == "mod_fn [ext4]");
    CHECK(name_at(*table, 0xffffffffc0001090 - 0xffffffff81000000) == "mod_fn2 [ext4]");
    CHECK(table->symbols().size() == 6);
    for (const auto& sym : table->symbols()) CHECK(sym.size == 0);
}

TEST_CASE("from_kallsyms: hidden addresses and bad input") {
    TempDir tmp;
    write_text(tmp.path() / "hidden",
               "0000000000000000 T _stext\n0000000000000000 T _text\n0000000000000000 t foo\n");
    auto hidden = SymbolTable::from_kallsyms(tmp.path() / "hidden");
    REQUIRE(!hidden.ok());
    CHECK(hidden.error().message() ==
          "kernel symbols unavailable (kallsyms addresses are hidden; run as root or set kernel.kptr_restrict=0)");

    write_text(tmp.path() / "no-text", "ffffffff81000100 t foo\n");
    auto no_text = SymbolTable::from_kallsyms(tmp.path() / "no-text");
    REQUIRE(!no_text.ok());
    CHECK(no_text.error().message().find("_text") != std::string::npos);

    auto missing = SymbolTable::from_kallsyms(tmp.path() / "missing");
    REQUIRE(!missing.ok());
}

TEST_CASE("from_kallsyms: the running kernel, addresses shown or hidden") {
    if (!fs::exists("/proc/kallsyms")) return;
    auto table = SymbolTable::from_kallsyms();
    if (table.ok()) {
        CHECK(!table->symbols().empty());
        CHECK(table->lookup(0) != nullptr);
    } else {
        CHECK(table.error().message().find("kernel symbols unavailable") == 0);
    }
}

TEST_CASE("Symbolizer: search order and remembered failures") {
    TempDir tmp;
    const std::string bid = readelf_build_id(ECPI_SYMTEST_NOTES);
    const auto nm = nm_functions(ECPI_SYMTEST_NM);
    const std::uint64_t main_addr = nm.at("main");
    write_text(tmp.path() / "kallsyms", "ffffffff81000000 T _text\nffffffff81000100 T schedule\n");

    Symbolizer::Options options;
    options.database = tmp.path() / "db";
    options.kallsyms = tmp.path() / "kallsyms";
    options.debug_roots = {tmp.path() / "debug"};
    Symbolizer symbolizer(options);

    SUBCASE("recorded path with a matching build id") {
        const Symbol* sym = symbolizer.lookup({ECPI_SYMTEST, bid}, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "main");
    }
    SUBCASE("recorded path, image without build id") {
        const fs::path plain = tmp.path() / "symtest-no-build-id";
        const std::string strip = "objcopy --remove-section .note.gnu.build-id '" + std::string(ECPI_SYMTEST) + "' '" +
                                  plain.string() + "'";
        REQUIRE(std::system(strip.c_str()) == 0);
        const Symbol* sym = symbolizer.lookup({plain.string(), ""}, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "main");
    }
    SUBCASE("a path recorded without build id that now holds one is another binary") {
        const auto& t = symbolizer.table({ECPI_SYMTEST, ""});
        REQUIRE(!t.ok());
        CHECK(t.error().message().find("has changed since it was profiled (build id " + bid + ", profiled none)") !=
              std::string::npos);
    }
    SUBCASE("a path forged to a file that is no ELF image is not used") {
        write_text(tmp.path() / "shadow", "root:$6$secret:19000:0:99999:7:::\n");
        const auto& t = symbolizer.table({(tmp.path() / "shadow").string(), ""});
        REQUIRE(!t.ok());
        CHECK(t.error().message().find("root:") == std::string::npos);
    }
    SUBCASE("the database's build-id image cache comes first") {
        copy_into(ECPI_SYMTEST, tmp.path() / "db" / "images" / bid.substr(0, 2) / bid.substr(2));
        const Symbol* sym = symbolizer.lookup({"/gone/in/another/namespace/symtest", bid}, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "main");
    }
    SUBCASE("a debug file by build id when the binary is gone") {
        copy_into(ECPI_SYMTEST_DEBUG, tmp.path() / "debug" / ".build-id" / bid.substr(0, 2) / (bid.substr(2) + ".debug"));
        const Symbol* sym = symbolizer.lookup({"/gone/symtest", bid}, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "main");
    }
    SUBCASE("a changed binary is not used, and the failure is remembered") {
        ecpi::store::ImageId image{ECPI_SYMTEST, "00112233445566778899aabbccddeeff00112233"};
        const auto& first = symbolizer.table(image);
        REQUIRE(!first.ok());
        CHECK(first.error().message().find("has changed since it was profiled") != std::string::npos);
        CHECK(&symbolizer.table(image) == &first);
        CHECK(symbolizer.lookup(image, main_addr) == nullptr);
    }
    SUBCASE("missing file") {
        const auto& t = symbolizer.table({"/gone/libfoo.so", "aabbcc"});
        REQUIRE(!t.ok());
        CHECK(t.error().message().find("/gone/libfoo.so: no such file") != std::string::npos);
    }
    SUBCASE("special images") {
        const Symbol* sym = symbolizer.lookup({ecpi::store::kKernelImage, ""}, 0x180);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "schedule");
        CHECK(!symbolizer.table({ecpi::store::kUnknownImage, ""}).ok());
        CHECK(!symbolizer.table({ecpi::store::kVdsoImage, ""}).ok());
        CHECK(!symbolizer.table({"[anon:jit]", ""}).ok());
    }
}
