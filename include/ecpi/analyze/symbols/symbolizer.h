// Symbol lookup for stored profiles: ELF .symtab/.dynsym (elfutils), separate
// debug files found by build id or .gnu_debuglink, demangled C++ names, PLT
// entries, and the kernel from /proc/kallsyms. analyze/ never talks to the
// kernel except to read /proc/kallsyms for the [kernel] image.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

struct Symbol {
    std::string name;          // demangled; PLT entries as "name@plt"
    std::uint64_t start = 0;   // ELF virtual address (same space as store offsets)
    std::uint64_t size = 0;    // 0 when unknown (then it extends to the next symbol)
    std::string linkage_name;  // as in the ELF symbol table (mangled); "" where there is none (PLT, kallsyms)
    bool local = false;        // STB_LOCAL
};

// The symbols of one image, sorted by address.
class SymbolTable {
public:
    // Reads .symtab (or .dynsym) and synthesizes PLT names. `debug_search`
    // are extra roots for separate debug files (default /usr/lib/debug).
    static Result<SymbolTable> from_elf(const std::filesystem::path& file,
                                        const std::vector<std::filesystem::path>& debug_search = {});
    // /proc/kallsyms format; addresses become offsets from _text.
    static Result<SymbolTable> from_kallsyms(const std::filesystem::path& file = "/proc/kallsyms");

    // The pseudo-image of idle samples (store::kIdleImage, shown with
    // --include-idle): offset N is CPU N ("[idle cpu N]"), kIdleAnyCpu the
    // idle samples whose CPU an old database did not record ("[idle]").
    static constexpr std::uint64_t kIdleAnyCpu = 1u << 20;
    static SymbolTable idle_cpus();

    // The symbol containing addr, or nullptr.
    const Symbol* lookup(std::uint64_t addr) const;
    const std::vector<Symbol>& symbols() const { return symbols_; }
    // First address past `sym`, which must come from this table: start + size,
    // or for a size-0 symbol the next symbol's start (bounded by its section).
    std::uint64_t end_of(const Symbol& sym) const;
    const std::string& build_id() const { return build_id_; }  // hex, may be empty

private:
    struct Builder;  // analyze/symbols/symbolizer.cpp: dedupes aliases, computes ends_
    friend struct Builder;
    std::vector<Symbol> symbols_;
    // ends_[i]: first address past symbols_[i]: start + size, or for size 0
    // the next symbol's start, bounded by the end of its ELF section.
    std::vector<std::uint64_t> ends_;
    std::string build_id_;
};

// Reads the GNU build id note of an ELF file (lowercase hex), if any.
Result<std::string> read_build_id(const std::filesystem::path& file);

// Finds and caches the SymbolTable for each ImageId: the database's build-id
// cache first, then the recorded path (used only when its build id matches),
// then /usr/lib/debug/.build-id. Unresolvable images are remembered with the
// reason so each is reported once.
class Symbolizer {
public:
    struct Options {
        std::optional<std::filesystem::path> database;  // for its build-id image cache
        std::filesystem::path kallsyms = "/proc/kallsyms";
        std::vector<std::filesystem::path> debug_roots = {"/usr/lib/debug"};
    };
    explicit Symbolizer(Options options);
    ~Symbolizer();
    Symbolizer(Symbolizer&&) noexcept;
    Symbolizer& operator=(Symbolizer&&) noexcept;

    // nullptr when the image cannot be read or has no symbol at offset.
    const Symbol* lookup(const store::ImageId& image, std::uint64_t offset);
    // The SymbolTable of an image, or the reason it is unavailable.
    const Result<SymbolTable>& table(const store::ImageId& image);
    // The ELF file the image's table was read from (the cached copy or the
    // recorded path; never a separate debug file), for code bytes and DWARF.
    // nullopt when the table came from elsewhere or could not be read.
    std::optional<std::filesystem::path> image_file(const store::ImageId& image);
    const Options& options() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ecpi::analyze
