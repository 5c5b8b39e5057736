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

#include "ecpi/analyze/symbols/debuginfod.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

class Symbolizer;

struct Symbol {
    std::string name;          // demangled; PLT entries as "name@plt"
    std::uint64_t start = 0;   // ELF virtual address (same space as store offsets)
    std::uint64_t size = 0;    // 0 when unknown (then it extends to the next symbol)
    std::string linkage_name;  // as in the ELF symbol table (mangled); "" where there is none (PLT, kallsyms)
    bool local = false;        // STB_LOCAL
    // No symbol names it: its extent is an .eh_frame FDE's and its name
    // "IMAGE+0xSTART" (IMAGE the image's file name, START as `start`).
    bool from_frame_info = false;
};

// The symbols of one image, sorted by address.
class SymbolTable {
public:
    // Reads .symtab (or, for a stripped file, a separate debug file's, or
    // .gnu_debugdata's with .dynsym) and synthesizes PLT names; in a file
    // without a full .symtab (its own or a debug file's), functions no symbol
    // covers are named from their .eh_frame FDE "IMAGE+0xSTART", IMAGE
    // being `image_name` (default: the file's name). `debug_search` are extra
    // roots for separate debug files (default /usr/lib/debug); `debug_file`,
    // when given, is a separate debug file of `file` (checked by build id) to
    // use before searching.
    static Result<SymbolTable> from_elf(const std::filesystem::path& file,
                                        const std::vector<std::filesystem::path>& debug_search = {},
                                        const std::string& image_name = {},
                                        const std::filesystem::path& debug_file = {});
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
    // Whether a full .symtab (the file's own or a separate debug file's) named
    // the functions; false for a stripped image read from .dynsym,
    // .gnu_debugdata and .eh_frame.
    bool complete() const { return complete_; }
    // The separate debug file whose .symtab was read ("" when none was).
    const std::filesystem::path& debug_file() const { return debug_file_; }
    // How many symbols are FDE extents (Symbol::from_frame_info): > 0 means the
    // image lacks names for some of its functions.
    std::size_t frame_named() const { return frame_named_; }
    // What could not be used while reading (a refused .gnu_debugdata, a
    // damaged .eh_frame), one line each; the table stands without it.
    const std::vector<std::string>& notes() const { return notes_; }

private:
    struct Builder;  // analyze/symbols/symbolizer.cpp: dedupes aliases, computes ends_
    friend struct Builder;
    std::vector<Symbol> symbols_;
    // ends_[i]: first address past symbols_[i]: start + size, or for size 0
    // the next symbol's start, bounded by the end of its ELF section.
    std::vector<std::uint64_t> ends_;
    std::string build_id_;
    bool complete_ = false;
    std::filesystem::path debug_file_;
    std::size_t frame_named_ = 0;
    std::vector<std::string> notes_;
};

// The one name every report and export gives samples of `image` that no
// symbol (nor .eh_frame FDE) covers: "[gzip]" (the file name in brackets);
// special images keep their own name ("[unknown]", "[vdso]"). Names that
// start with '[' are never a function's.
std::string unsymbolized_name(const store::ImageId& image);

// For the images with samples of `event` whose symbols cannot be read because
// their file is gone or changed: "image /x/chase (build id 12ab..) is gone;
// point --symfs at a copy", joined by "; " ("" when there are none). Reports
// that look a procedure up by name say this rather than "no samples".
std::string missing_images_note(const store::EpochContents& contents, const std::string& event,
                                Symbolizer& symbolizer);

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
        // --symfs DIR: copies of images that moved or were deleted, looked up
        // (after the database's cache, before the recorded path) as
        // DIR/<recorded path>, DIR/<file name> and DIR/.build-id/xx/rest; a
        // copy is used only with the recorded build id, and one with another
        // build id is refused by name.
        std::vector<std::filesystem::path> symfs;
        // Separate debug files fetched by build id for images without a full
        // symbol table (when enabled and DEBUGINFOD_URLS is set); each image's
        // failure is said once on debuginfod.report, and its names stay
        // those of .dynsym and .eh_frame.
        DebuginfodOptions debuginfod;
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
    // The separate debug file the image's symbols came from (found locally or
    // fetched), for DWARF; nullopt when there is none.
    std::optional<std::filesystem::path> debug_file(const store::ImageId& image);
    const Options& options() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ecpi::analyze
