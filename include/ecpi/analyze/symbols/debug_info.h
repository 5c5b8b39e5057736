// What an image's own bytes and DWARF say about an address: the source
// line and the chain of inlined functions (libdw), the code bytes of a range
// (libelf), and their disassembly (Capstone). Used by `ecpi annotate`,
// `ecpi diff --by instruction` and the pprof export's line tables.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

class Symbolizer;

// One level of the source view of an address, innermost first: frames[0] is
// the function the instruction's line belongs to (possibly inlined), with that
// line; frames[i + 1] is the function frames[i] was inlined into, with the
// line of the inlined call.
struct SourceFrame {
    std::string function;      // demangled linkage name where DWARF has one, else the DWARF name
    std::string file;          // as DWARF names it (absolute when the compiler recorded the directory)
    int line = 0;              // 0: unknown
    int column = 0;
    bool inlined = false;      // an inlined instance (not the outermost function)
    std::string decl_file;     // where the function is declared, for pprof's Function
    int decl_line = 0;
    std::string linkage_name;  // as the compiler spells it (mangled; DW_AT_name in C), for sample profiles
    // DWARF's discriminator of `line` (the line table's for frames[0], the
    // inlined call's DW_AT_GNU_discriminator for the others), as encoded.
    std::uint32_t discriminator = 0;
};

struct Instruction {
    std::uint64_t address = 0;
    std::uint32_t size = 0;
    std::string text;          // "mov rax, qword ptr [rdi]" (Intel syntax)
};

class DebugInfo {
public:
    // Opens an ELF file and, through elfutils' standard search, its DWARF
    // (in the file, by build id under the debug roots, or by .gnu_debuglink).
    // An image without DWARF opens fine: has_lines() is then false.
    // `debug_file`, when given, is the separate debug file to read DWARF from
    // (one the Symbolizer found or fetched by build id); else libdwfl searches.
    static Result<DebugInfo> open(const std::filesystem::path& elf_file,
                                  const std::vector<std::filesystem::path>& debug_roots = {},
                                  const std::filesystem::path& debug_file = {});
    DebugInfo(DebugInfo&&) noexcept;
    DebugInfo& operator=(DebugInfo&&) noexcept;
    ~DebugInfo();

    bool has_lines() const;
    // Innermost first; empty when DWARF says nothing about the address.
    std::vector<SourceFrame> frames_at(std::uint64_t address) const;
    // The code bytes of [start, end) from the executable section holding
    // them, cut at the section's end. Errors when no section holds `start`.
    Result<std::vector<std::uint8_t>> code(std::uint64_t start, std::uint64_t end) const;
    unsigned machine() const;  // ELF e_machine
    const std::filesystem::path& path() const;

private:
    struct Impl;
    explicit DebugInfo(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Disassembles `bytes` (which start at `address`) for an ELF machine
// (x86-64, i386, AArch64). Bytes Capstone cannot decode become "(bad)"
// one-byte instructions so the listing always covers the range.
Result<std::vector<Instruction>> disassemble(unsigned machine, std::uint64_t address,
                                             std::span<const std::uint8_t> bytes);

// DebugInfo per image, opened on first use through the Symbolizer's choice
// of file (build-id cache or the recorded path). Failures are remembered.
class DebugInfoCache {
public:
    explicit DebugInfoCache(Symbolizer& symbolizer);
    // nullptr when the image's file cannot be found or opened; `why` (if
    // given) receives the reason.
    const DebugInfo* get(const store::ImageId& image, std::string* why = nullptr);

private:
    Symbolizer& symbolizer_;
    std::map<store::ImageId, Result<DebugInfo>> cache_;
};

// The lines of a source file, read once (empty result when unreadable).
class SourceFiles {
public:
    // nullptr when the file cannot be read.
    const std::vector<std::string>* lines(const std::string& file);

private:
    std::map<std::string, std::optional<std::vector<std::string>>> cache_;
};

}  // namespace ecpi::analyze
