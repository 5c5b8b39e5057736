// SymbolTable, read_build_id and Symbolizer against binaries built from
// data/symtest.cpp; expected answers come from nm/objdump/readelf listings.
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/analyze/symbols/eh_frame.h"
#include "ecpi/analyze/symbols/xz.h"
#include "ecpi/analyze/symbols/capstone_library.h"
#include "ecpi/analyze/symbols/debug_info.h"

#include <doctest/doctest.h>

#include <elf.h>

#include <cerrno>
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
        CHECK(name_at(*without_root, nm.at("main")) != "main");
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
        CHECK(name_at(*tampered, nm_functions(ECPI_SYMTEST_NM).at("main")) != "main");
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

namespace {

std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
}

// Every known function of symtest, stripped, is one FDE-named row: its start
// and extent are the unstripped symbol's, its name IMAGE+0xSTART.
void check_frame_named(const SymbolTable& table, const std::string& label) {
    auto full = SymbolTable::from_elf(ECPI_SYMTEST);
    REQUIRE(full.ok());
    auto nm = nm_functions(ECPI_SYMTEST_NM);
    for (const char* name : kKnownFunctions) {
        CAPTURE(name);
        std::uint64_t addr = nm.at(name);
        const Symbol* sym = table.lookup(addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == label + "+0x" + hex(addr));
        CHECK(sym->from_frame_info);
        CHECK(sym->start == addr);
        CHECK(table.end_of(*sym) == full->end_of(*full->lookup(addr)));
    }
}

// Sorted, disjoint, each FDE-named row named after its own start.
void check_rows_sane(const SymbolTable& table, const std::string& label) {
    const auto& symbols = table.symbols();
    for (std::size_t i = 0; i < symbols.size(); ++i) {
        CAPTURE(symbols[i].name);
        if (i + 1 < symbols.size()) CHECK(table.end_of(symbols[i]) <= symbols[i + 1].start);
        if (symbols[i].from_frame_info) {
            CHECK(symbols[i].name == label + "+0x" + hex(symbols[i].start));
            CHECK(symbols[i].size > 0);
            CHECK(symbols[i].size < (std::uint64_t{1} << 24));
        }
    }
}

// A synthetic .eh_frame: one "zR" CIE (pc-relative sdata4 pointers), then FDEs.
class EhFrameWriter {
public:
    explicit EhFrameWriter(std::uint64_t section_addr) : addr_(section_addr) {
        std::size_t len = begin();
        u32(0);  // CIE id
        bytes_.push_back(1);  // version
        for (char c : std::string("zR")) bytes_.push_back(static_cast<unsigned char>(c));
        bytes_.push_back(0);
        bytes_.push_back(1);     // code alignment
        bytes_.push_back(0x78);  // data alignment -8
        bytes_.push_back(16);    // return address register
        bytes_.push_back(1);     // augmentation length
        bytes_.push_back(0x1b);  // DW_EH_PE_pcrel | DW_EH_PE_sdata4
        finish(len);
    }
    void fde(std::uint64_t start, std::int64_t range) {
        std::size_t len = begin();
        u32(static_cast<std::uint32_t>(bytes_.size()));  // back to the CIE at offset 0
        std::uint64_t field = addr_ + bytes_.size();
        u32(static_cast<std::uint32_t>(start - field));
        u32(static_cast<std::uint32_t>(range));
        bytes_.push_back(0);  // augmentation length
        finish(len);
    }
    void raw_u32(std::uint32_t v) { u32(v); }
    const std::vector<unsigned char>& bytes() const { return bytes_; }

private:
    void u32(std::uint32_t v) {
        for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<unsigned char>(v >> (8 * i)));
    }
    std::size_t begin() {
        std::size_t at = bytes_.size();
        u32(0);
        return at;
    }
    void finish(std::size_t at) {
        while ((bytes_.size() - at) % 4 != 0) bytes_.push_back(0);  // DW_CFA_nop
        auto len = static_cast<std::uint32_t>(bytes_.size() - at - 4);
        for (int i = 0; i < 4; ++i) bytes_[at + static_cast<std::size_t>(i)] = static_cast<unsigned char>(len >> (8 * i));
    }
    std::uint64_t addr_;
    std::vector<unsigned char> bytes_;
};

const unsigned char kIdent64[16] = {0x7f, 'E', 'L', 'F', 2 /*ELFCLASS64*/, 1 /*ELFDATA2LSB*/, 1};

}  // namespace

TEST_CASE("from_elf: stripped binary without a debug file: functions from .eh_frame, IMAGE+0xSTART") {
    auto table = SymbolTable::from_elf(ECPI_SYMTEST_NOSYM);
    REQUIRE(table.ok());
    CHECK(table->frame_named() >= std::size(kKnownFunctions));
    check_frame_named(*table, "symtest_nosym");
    check_rows_sane(*table, "symtest_nosym");
    check_plt(*table, ECPI_SYMTEST_PLT);
    CHECK(table->notes().empty());

    // The name is the recorded image's, not the file's (a cached copy).
    auto named = SymbolTable::from_elf(ECPI_SYMTEST_NOSYM, {}, "gzip");
    REQUIRE(named.ok());
    check_frame_named(*named, "gzip");

    // Through the Symbolizer, by the recorded path.
    Symbolizer symbolizer(Symbolizer::Options{});
    const std::string bid = readelf_build_id(ECPI_SYMTEST_NOTES);
    const Symbol* sym = symbolizer.lookup({ECPI_SYMTEST_NOSYM, bid}, nm_functions(ECPI_SYMTEST_NM).at("main"));
    REQUIRE(sym != nullptr);
    CHECK(sym->name == "symtest_nosym+0x" + hex(nm_functions(ECPI_SYMTEST_NM).at("main")));
}

TEST_CASE("from_elf: .gnu_debugdata (MiniDebugInfo) names a stripped binary's functions") {
    auto table = SymbolTable::from_elf(ECPI_SYMTEST_MINI);
    REQUIRE(table.ok());
    check_known_functions(*table, ECPI_SYMTEST_NM);
    check_plt(*table, ECPI_SYMTEST_PLT);
    CHECK(table->notes().empty());
}

TEST_CASE("from_elf: a .gnu_debugdata decompression bomb is refused by name; .eh_frame still names") {
    auto table = SymbolTable::from_elf(ECPI_SYMTEST_BOMB);
    REQUIRE(table.ok());
    REQUIRE(table->notes().size() == 1);
    CHECK(table->notes()[0].find(".gnu_debugdata expands past 64 MiB (a decompression bomb?); refused") !=
          std::string::npos);
    check_frame_named(*table, "symtest_bomb");
}

TEST_CASE("xz_decompress: bounded, damaged input named") {
    const char junk[] = "not xz at all";
    auto bad = ecpi::analyze::xz_decompress(junk, sizeof junk);
    REQUIRE(!bad.ok());
    CHECK(bad.error().message() == "not xz data");
}

TEST_CASE("scan_eh_frame: a forged FDE table: overlapping, empty, absurd and wrapping ranges") {
    using ecpi::analyze::CodeRange;
    using ecpi::analyze::scan_eh_frame;
    const std::uint64_t kSection = 0x3000;
    const std::vector<CodeRange> code = {{0x1000, 0x2000}};
    EhFrameWriter w(kSection);
    w.fde(0x1000, 0x100);         // kept
    w.fde(0x1080, 0x100);         // overlaps the first: refused
    w.fde(0x1800, 0x7fffffff);    // runs far past the code: refused
    w.fde(0x1200, 0);             // empty: refused
    w.fde(0x1400, 0x40);          // kept
    w.fde(0x1900, -1);            // a negative range (wraps as unsigned): refused
    w.fde(0x9000, 0x10);          // outside any code: refused

    SUBCASE("well framed") {
        auto scan = scan_eh_frame(kIdent64, w.bytes().data(), w.bytes().size(), kSection, code);
        CHECK(scan.functions == std::vector<CodeRange>{{0x1000, 0x1100}, {0x1400, 0x1440}});
        CHECK(scan.refused == 5);
        CHECK(!scan.stopped);
    }
    SUBCASE("an entry whose length runs past the section stops the walk, keeping what came before") {
        std::vector<unsigned char> bytes = w.bytes();
        bytes.insert(bytes.end(), {0xf0, 0xff, 0xff, 0x0f, 0, 0, 0, 0});  // length 0x0ffffff0
        auto scan = scan_eh_frame(kIdent64, bytes.data(), bytes.size(), kSection, code);
        CHECK(scan.stopped);
        CHECK(scan.functions == std::vector<CodeRange>{{0x1000, 0x1100}, {0x1400, 0x1440}});
    }
    SUBCASE("no executable range: nothing kept") {
        auto scan = scan_eh_frame(kIdent64, w.bytes().data(), w.bytes().size(), kSection, {});
        CHECK(scan.functions.empty());
        CHECK(scan.refused == 7);
    }
}

TEST_CASE("from_elf: Debian's stripped gzip and dash: one sane row per FDE") {
    for (const char* path : {"/usr/bin/gzip", "/bin/dash"}) {
        CAPTURE(path);
        if (!fs::exists(path)) continue;
        auto table = SymbolTable::from_elf(path);
        REQUIRE(table.ok());
        CHECK(table->frame_named() > 20);
        check_rows_sane(*table, fs::path(path).filename().string());
    }
}

TEST_CASE("Symbolizer: --symfs copies of moved images, by build id; a wrong build id is refused by name") {
    TempDir tmp;
    const std::string bid = readelf_build_id(ECPI_SYMTEST_NOTES);
    const std::uint64_t main_addr = nm_functions(ECPI_SYMTEST_NM).at("main");
    const ecpi::store::ImageId moved{"/gone/away/symtest", bid};

    SUBCASE("DIR/<recorded path>") {
        copy_into(ECPI_SYMTEST, tmp.path() / "symfs" / "gone" / "away" / "symtest");
        Symbolizer symbolizer({.symfs = {tmp.path() / "symfs"}});
        const Symbol* sym = symbolizer.lookup(moved, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "main");
        CHECK(symbolizer.image_file(moved) == tmp.path() / "symfs" / "gone" / "away" / "symtest");
    }
    SUBCASE("DIR/<file name>, and a stripped copy names functions after the recorded image") {
        copy_into(ECPI_SYMTEST_NOSYM, tmp.path() / "symfs" / "symtest");
        Symbolizer symbolizer({.symfs = {tmp.path() / "symfs"}});
        const Symbol* sym = symbolizer.lookup(moved, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "symtest+0x" + hex(main_addr));
    }
    SUBCASE("DIR/.build-id/xx/rest") {
        copy_into(ECPI_SYMTEST, tmp.path() / "symfs" / ".build-id" / bid.substr(0, 2) / bid.substr(2));
        Symbolizer symbolizer({.symfs = {tmp.path() / "symfs"}});
        const Symbol* sym = symbolizer.lookup(moved, main_addr);
        REQUIRE(sym != nullptr);
        CHECK(sym->name == "main");
    }
    SUBCASE("the right name with another build id is refused, named") {
        copy_into(ECPI_SYMTEST_IBT, tmp.path() / "symfs" / "symtest");
        Symbolizer symbolizer({.symfs = {tmp.path() / "symfs"}});
        const auto& t = symbolizer.table(moved);
        REQUIRE(!t.ok());
        const std::string other = *read_build_id(ECPI_SYMTEST_IBT);
        CHECK(t.error().message().find((tmp.path() / "symfs" / "symtest").string() + " under --symfs has build id " +
                                       other + ", not the profiled " + bid + "; refused") != std::string::npos);
    }
    SUBCASE("a recorded path that climbs out of DIR is not followed") {
        copy_into(ECPI_SYMTEST, tmp.path() / "outside" / "symtest");
        fs::create_directories(tmp.path() / "symfs");
        Symbolizer symbolizer({.symfs = {tmp.path() / "symfs"}});
        const ecpi::store::ImageId climbing{"../outside/other", bid};
        CHECK(!symbolizer.table(climbing).ok());
    }
    SUBCASE("without a copy, reports name the image that is gone") {
        ecpi::store::EpochContents contents;
        ecpi::store::ImageProfile profile;
        profile.image = moved;
        profile.event = "cpu-clock";
        profile.period = 1000;
        profile.processes.push_back({100, {{main_addr, 5}}});
        contents.profiles.push_back(profile);
        Symbolizer symbolizer(Symbolizer::Options{});
        CHECK(ecpi::analyze::missing_images_note(contents, "cpu-clock", symbolizer) ==
              "image /gone/away/symtest (build id " + bid + ") is gone; point --symfs at a copy");
        CHECK(ecpi::analyze::missing_images_note(contents, "cycles", symbolizer).empty());
    }
}

// Capstone is loaded at the first disassembly, not at start-up
// (capstone_library.h): the library ecpi was built against decodes; one
// that is missing, or lacks Capstone's functions, is one line naming it and
// the package to install.
TEST_CASE("Capstone: loaded at first use; a library that cannot be loaded is named with its package") {
    const std::uint8_t code[] = {0x55, 0xc3};  // push rbp; ret
    auto insns = ecpi::analyze::disassemble(EM_X86_64, 0x1000, code);
    REQUIRE_MESSAGE(insns.ok(), insns.error().message());
    REQUIRE(insns->size() == 2);
    CHECK((*insns)[0].text == "push rbp");
    CHECK((*insns)[1].address == 0x1001);
    CHECK(std::string(ecpi::analyze::capstone_soname()).starts_with("libcapstone.so."));

    auto missing = ecpi::analyze::capstone_api("libecpi-no-such-capstone.so.4");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().errno_value() == ELIBACC);
    CHECK_MESSAGE(missing.error().message().starts_with("cannot load libecpi-no-such-capstone.so.4 to disassemble ("),
                  missing.error().message());
    CHECK_MESSAGE(missing.error().message().ends_with("; install the Debian package libcapstone4"),
                  missing.error().message());
    auto other = ecpi::analyze::capstone_api("libz.so.1");
    REQUIRE_FALSE(other.ok());
    CHECK_MESSAGE(other.error().message().starts_with("libz.so.1 has no function cs_open"), other.error().message());
}
