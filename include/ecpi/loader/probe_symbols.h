// Function symbols of ELF images for `ecpi probe`: which functions a
// pattern names (iPath 4.1: every match is probed and kept apart), where
// they live in the file (uprobes attach by file offset), and which function
// contains a return address of a call path. Read with libelf in the loader,
// which must not depend on analyze/.
#pragma once

#include "ecpi/edit_distance.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::loader {

struct FunctionSymbol {
    std::string name;        // as in the symbol table (mangled for C++)
    std::string demangled;   // == name for C
    std::uint64_t vaddr = 0; // ELF virtual address
    std::uint64_t size = 0;
    bool global = false;     // STB_GLOBAL or STB_WEAK (local functions may repeat across files)
};

class ElfSymbols {
public:
    // .symtab when present, else .dynsym. Fails when the file is not ELF.
    [[nodiscard]] static Result<ElfSymbols> read(const std::filesystem::path& file);

    // Sorted by vaddr; aliases (several names, one address) are all kept.
    const std::vector<FunctionSymbol>& functions() const { return functions_; }
    // False for a stripped file: only exported (.dynsym) functions are known.
    bool has_symtab() const { return has_symtab_; }
    // The function whose [vaddr, vaddr + size) holds `vaddr` (the nearest one
    // below it when sizes are missing).
    const FunctionSymbol* containing(std::uint64_t vaddr) const;
    // Where `vaddr` lies in the file (PT_LOAD segments); uprobes take this.
    std::optional<std::uint64_t> file_offset(std::uint64_t vaddr) const;
    // File offset -> vaddr, for addresses resolved through a mapping.
    std::optional<std::uint64_t> vaddr_of_offset(std::uint64_t offset) const;
    const std::string& build_id() const { return build_id_; }
    // DT_NEEDED entries and the DT_RUNPATH / DT_RPATH search list.
    const std::vector<std::string>& needed() const { return needed_; }
    const std::vector<std::string>& runpath() const { return runpath_; }

private:
    struct Segment { std::uint64_t offset, filesz, vaddr; };
    std::vector<FunctionSymbol> functions_;
    std::vector<Segment> segments_;
    std::vector<std::string> needed_, runpath_;
    std::string build_id_;
    bool has_symtab_ = false;
};

// `[IMAGE:]FUNCTION`. IMAGE is a file name ("libc.so.6"), a prefix of one
// up to '.' or '-' ("libc"), a glob, or a path; FUNCTION is a name or glob
// matched against the symbol, its demangled form, and the demangled form
// without parameters ("ns::f" matches both overloads ns::f(int), ns::f(char)).
// The first single ':' separates them ("::" belongs to C++ names).
struct FunctionPattern {
    std::string text;     // as written
    std::string image;    // empty: any image of the process
    std::string function;
};
[[nodiscard]] Result<FunctionPattern> parse_function_pattern(std::string_view text);
bool image_matches(const FunctionPattern& pattern, const std::filesystem::path& image);
bool function_matches(const FunctionPattern& pattern, const FunctionSymbol& symbol);

// Up to `limit` distinct names close to the pattern's function part
// (substring or small edit distance), closest first.
std::vector<std::string> near_matches(const FunctionPattern& pattern,
                                      const std::vector<const ElfSymbols*>& images, std::size_t limit = 5);

// The shared libraries `executable` will load (DT_NEEDED, transitively),
// found as the dynamic loader would without running it: DT_RPATH,
// LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.conf(.d) and the default
// directories. Libraries not found are skipped.
std::vector<std::filesystem::path> needed_libraries(const std::filesystem::path& executable);

// Levenshtein distance (for close matches; tested in probe_symbols_test).
using ecpi::edit_distance;  // include/ecpi/edit_distance.h

}  // namespace ecpi::loader
