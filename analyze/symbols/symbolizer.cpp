// Symbol tables from ELF files (elfutils libelf/libdw) and /proc/kallsyms.
// Contracts are in include/ecpi/analyze/symbols/symbolizer.h.
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/analyze/symbols/eh_frame.h"
#include "ecpi/analyze/symbols/xz.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

namespace ecpi::analyze {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kNoEnd = std::numeric_limits<std::uint64_t>::max();
const fs::path kDefaultDebugRoot = "/usr/lib/debug";

std::string to_hex(const void* data, std::size_t size) {
    static constexpr char kDigits[] = "0123456789abcdef";
    const auto* bytes = static_cast<const unsigned char*>(data);
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out += kDigits[bytes[i] >> 4];
        out += kDigits[bytes[i] & 0xf];
    }
    return out;
}

std::string hex_number(std::uint64_t value) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(value));
    return buf;
}

// C++ (Itanium ABI) names are demangled; anything else is returned as is.
std::string demangle(const char* name) {
    if (name[0] != '_' || name[1] != 'Z') return name;
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || out == nullptr) {
        std::free(out);
        return name;
    }
    std::string result(out);
    std::free(out);
    return result;
}

// An open ELF file; closes its descriptor and libelf handle on destruction.
class ElfFile {
public:
    static Result<ElfFile> open(const fs::path& path) {
        static const bool initialized = elf_version(EV_CURRENT) != EV_NONE;
        if (!initialized) return Error("libelf: " + std::string(elf_errmsg(-1)));
        // Image paths come from profiles others wrote: O_NONBLOCK so that a
        // FIFO cannot block the open, and only a regular file is read (never
        // /dev/zero or a device), checked on the open descriptor.
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) return Error::from_errno(errno, "opening " + path.string());
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            ::close(fd);
            return Error(path.string() + ": not a regular file; not opened");
        }
        Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
        if (elf == nullptr) {
            std::string msg = path.string() + ": " + elf_errmsg(-1);
            ::close(fd);
            return Error(std::move(msg));
        }
        ElfFile file(fd, elf, path);
        if (elf_kind(elf) != ELF_K_ELF) return Error(path.string() + ": not an ELF file");
        if (gelf_getehdr(elf, &file.ehdr_) == nullptr)
            return Error(path.string() + ": bad ELF header: " + elf_errmsg(-1));
        return file;
    }

    // An ELF image held in memory (the decompressed .gnu_debugdata of `path`).
    static Result<ElfFile> from_memory(std::vector<unsigned char> bytes, const fs::path& path) {
        auto owned = std::make_unique<std::vector<unsigned char>>(std::move(bytes));
        Elf* elf = elf_memory(reinterpret_cast<char*>(owned->data()), owned->size());
        if (elf == nullptr) return Error(path.string() + ": " + elf_errmsg(-1));
        ElfFile file(-1, elf, path);
        file.memory_ = std::move(owned);
        if (elf_kind(elf) != ELF_K_ELF) return Error(path.string() + ": not an ELF file");
        if (gelf_getehdr(elf, &file.ehdr_) == nullptr)
            return Error(path.string() + ": bad ELF header: " + elf_errmsg(-1));
        return file;
    }

    ElfFile(ElfFile&& other) noexcept
        : fd_(std::exchange(other.fd_, -1)),
          elf_(std::exchange(other.elf_, nullptr)),
          path_(std::move(other.path_)),
          ehdr_(other.ehdr_),
          memory_(std::move(other.memory_)) {}
    ElfFile& operator=(ElfFile&&) = delete;
    ElfFile(const ElfFile&) = delete;
    ~ElfFile() {
        if (elf_ != nullptr) elf_end(elf_);
        if (fd_ >= 0) ::close(fd_);
    }

    Elf* elf() const { return elf_; }
    const fs::path& path() const { return path_; }
    unsigned machine() const { return ehdr_.e_machine; }
    const unsigned char* ident() const { return ehdr_.e_ident; }

    std::string build_id() const {
        const void* bytes = nullptr;
        ssize_t len = dwelf_elf_gnu_build_id(elf_, &bytes);
        if (len <= 0 || bytes == nullptr) return {};
        return to_hex(bytes, static_cast<std::size_t>(len));
    }

private:
    ElfFile(int fd, Elf* elf, fs::path path) : fd_(fd), elf_(elf), path_(std::move(path)) {}
    int fd_ = -1;
    Elf* elf_ = nullptr;
    fs::path path_;
    GElf_Ehdr ehdr_{};
    std::unique_ptr<std::vector<unsigned char>> memory_;  // the image of from_memory (outlives elf_)
};

struct Section {
    std::size_t index = 0;
    Elf_Scn* scn = nullptr;
    GElf_Shdr shdr{};
    std::string name;

    bool has_data() const { return shdr.sh_type != SHT_NOBITS && shdr.sh_size > 0; }
};

std::vector<Section> list_sections(const ElfFile& file) {
    std::vector<Section> sections;
    std::size_t shstrndx = 0;
    if (elf_getshdrstrndx(file.elf(), &shstrndx) != 0) return sections;
    for (Elf_Scn* scn = elf_nextscn(file.elf(), nullptr); scn != nullptr;
         scn = elf_nextscn(file.elf(), scn)) {
        Section s;
        s.scn = scn;
        s.index = elf_ndxscn(scn);
        if (gelf_getshdr(scn, &s.shdr) == nullptr) continue;
        const char* name = elf_strptr(file.elf(), shstrndx, s.shdr.sh_name);
        s.name = name != nullptr ? name : "";
        sections.push_back(std::move(s));
    }
    return sections;
}

const Section* find_section(const std::vector<Section>& sections, std::string_view name) {
    for (const auto& s : sections)
        if (s.name == name) return &s;
    return nullptr;
}

const Section* section_by_index(const std::vector<Section>& sections, std::size_t index) {
    for (const auto& s : sections)
        if (s.index == index) return &s;
    return nullptr;
}

}  // namespace

// A symbol before aliases are merged.
struct RawSymbol {
    std::string name;
    std::uint64_t start = 0;
    std::uint64_t size = 0;
    std::uint64_t bound = 0;  // end of the containing section; 0: unbounded
    int rank = 1;             // 0: global, 1: local or weak (aliases prefer 0)
    std::string linkage;      // the ELF name, undemangled
    bool local = false;
    bool from_frame_info = false;  // an .eh_frame FDE's extent, named IMAGE+0xSTART
};

struct SymbolTable::Builder {
    static SymbolTable build(std::vector<RawSymbol> raw, std::string build_id) {
        // Aliases (same start): global before local/weak, then the shorter name.
        std::sort(raw.begin(), raw.end(), [](const RawSymbol& a, const RawSymbol& b) {
            if (a.start != b.start) return a.start < b.start;
            if (a.rank != b.rank) return a.rank < b.rank;
            if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();
            return a.name < b.name;
        });
        std::vector<RawSymbol> unique;
        unique.reserve(raw.size());
        for (auto& sym : raw) {
            if (!unique.empty() && unique.back().start == sym.start) {
                unique.back().size = std::max(unique.back().size, sym.size);
                unique.back().bound = std::max(unique.back().bound, sym.bound);
                continue;
            }
            unique.push_back(std::move(sym));
        }
        // Size-0 symbols strictly inside a sized function are labels the
        // assembler typed as functions (noise): drop them so they do not
        // split the function that contains them.
        std::vector<RawSymbol> kept;
        kept.reserve(unique.size());
        std::uint64_t covered_end = 0;
        for (auto& sym : unique) {
            if (sym.size == 0 && sym.start < covered_end) continue;
            if (sym.size > 0) covered_end = std::max(covered_end, sym.start + sym.size);
            kept.push_back(std::move(sym));
        }

        SymbolTable table;
        table.build_id_ = std::move(build_id);
        table.symbols_.reserve(kept.size());
        table.ends_.reserve(kept.size());
        for (std::size_t i = 0; i < kept.size(); ++i) {
            const RawSymbol& sym = kept[i];
            std::uint64_t end;
            if (sym.size > 0) {
                end = sym.start + sym.size;
            } else {
                end = i + 1 < kept.size() ? kept[i + 1].start : kNoEnd;
                if (sym.bound != 0) end = std::max(sym.start, std::min(end, sym.bound));
            }
            table.symbols_.push_back(Symbol{sym.name, sym.start, sym.size, sym.linkage, sym.local,
                                            sym.from_frame_info});
            if (sym.from_frame_info) ++table.frame_named_;
            table.ends_.push_back(end);
        }
        return table;
    }
};

namespace {

// Function symbols of every section of `type` (SHT_SYMTAB or SHT_DYNSYM).
// Returns false when the file has no such table with contents.
bool read_function_symbols(const ElfFile& file, const std::vector<Section>& sections,
                           Elf64_Word type, std::vector<RawSymbol>& out) {
    bool found = false;
    for (const auto& sec : sections) {
        if (sec.shdr.sh_type != type || !sec.has_data() || sec.shdr.sh_entsize == 0) continue;
        Elf_Data* data = elf_getdata(sec.scn, nullptr);
        if (data == nullptr || data->d_buf == nullptr) continue;
        found = true;
        Elf_Data* xndx = nullptr;  // extended section indices, for files with > 65279 sections
        for (const auto& x : sections)
            if (x.shdr.sh_type == SHT_SYMTAB_SHNDX && x.shdr.sh_link == sec.index)
                xndx = elf_getdata(x.scn, nullptr);
        std::size_t count = sec.shdr.sh_size / sec.shdr.sh_entsize;
        for (std::size_t i = 1; i < count; ++i) {
            GElf_Sym sym;
            Elf32_Word shndx_ext = 0;
            if (gelf_getsymshndx(data, xndx, static_cast<int>(i), &sym, &shndx_ext) == nullptr)
                continue;
            int st_type = GELF_ST_TYPE(sym.st_info);
            if (st_type != STT_FUNC && st_type != STT_GNU_IFUNC) continue;
            std::size_t shndx = sym.st_shndx == SHN_XINDEX ? shndx_ext : sym.st_shndx;
            if (shndx == SHN_UNDEF) continue;  // an import
            const char* name = elf_strptr(file.elf(), sec.shdr.sh_link, sym.st_name);
            if (name == nullptr || name[0] == '\0') continue;
            RawSymbol raw;
            raw.name = demangle(name);
            raw.linkage = name;
            raw.local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
            raw.start = sym.st_value;
            if (file.machine() == EM_ARM) raw.start &= ~std::uint64_t{1};  // Thumb bit
            raw.size = sym.st_size;
            raw.rank = GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 0 : 1;
            if (shndx < SHN_LORESERVE || sym.st_shndx == SHN_XINDEX) {
                const Section* home = section_by_index(sections, shndx);
                if (home != nullptr && (home->shdr.sh_flags & SHF_ALLOC) != 0)
                    raw.bound = home->shdr.sh_addr + home->shdr.sh_size;
            }
            out.push_back(std::move(raw));
        }
    }
    return found;
}

struct PltRelocTypes {
    unsigned jump_slot = 0;
    unsigned glob_dat = 0;
    unsigned irelative = 0;
};

std::optional<PltRelocTypes> plt_reloc_types(unsigned machine) {
    switch (machine) {
        case EM_X86_64: return PltRelocTypes{R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT, R_X86_64_IRELATIVE};
        case EM_386: return PltRelocTypes{R_386_JMP_SLOT, R_386_GLOB_DAT, R_386_IRELATIVE};
        case EM_AARCH64:
            return PltRelocTypes{R_AARCH64_JUMP_SLOT, R_AARCH64_GLOB_DAT, R_AARCH64_IRELATIVE};
        default: return std::nullopt;
    }
}

// x86-64 PLT entry -> the GOT slot it jumps through: [endbr64] [bnd] jmp *disp32(%rip).
// Lazy .plt entries start with the jmp; IBT .plt.sec and .plt.got entries
// start with endbr64. Returns nullopt for entries that do not jump through
// the GOT (the IBT .plt's lazy stubs: endbr64; push $index; jmp .plt).
std::optional<std::uint64_t> x86_64_got_slot(const unsigned char* p, std::size_t n,
                                             std::uint64_t addr) {
    std::size_t pos = 0;
    static constexpr unsigned char kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    if (n >= 4 && std::memcmp(p, kEndbr64, 4) == 0) pos = 4;
    if (pos < n && p[pos] == 0xf2) ++pos;  // bnd prefix (MPX PLTs)
    if (pos + 6 > n || p[pos] != 0xff || p[pos + 1] != 0x25) return std::nullopt;
    std::int32_t disp;
    std::memcpy(&disp, p + pos + 2, sizeof disp);  // x86 is little-endian
    return addr + pos + 6 + static_cast<std::int64_t>(disp);
}

// Names PLT entries "callee@plt". The callee of an entry is found from the
// GOT slot its jmp reads (x86-64), matched with the JUMP_SLOT/GLOB_DAT
// relocation of that slot; where an entry cannot be decoded, entry i of the
// PLT belongs to relocation i of .rela.plt (the order the linker emits).
void synthesize_plt(const ElfFile& file, const std::vector<Section>& sections,
                    std::vector<RawSymbol>& out) {
    auto types = plt_reloc_types(file.machine());
    if (!types) return;

    std::map<std::uint64_t, std::string> slot_names;  // GOT slot address -> callee
    std::vector<std::string> plt_order;              // names in .rela.plt order
    for (const auto& rel : sections) {
        bool rela = rel.shdr.sh_type == SHT_RELA;
        if ((!rela && rel.shdr.sh_type != SHT_REL) || !rel.has_data() || rel.shdr.sh_entsize == 0)
            continue;
        const Section* dynsym = section_by_index(sections, rel.shdr.sh_link);
        if (dynsym == nullptr || dynsym->shdr.sh_type != SHT_DYNSYM || !dynsym->has_data()) continue;
        Elf_Data* rel_data = elf_getdata(rel.scn, nullptr);
        Elf_Data* sym_data = elf_getdata(dynsym->scn, nullptr);
        if (rel_data == nullptr || sym_data == nullptr) continue;
        bool is_plt = rel.name == ".rela.plt" || rel.name == ".rel.plt";
        std::size_t count = rel.shdr.sh_size / rel.shdr.sh_entsize;
        for (std::size_t i = 0; i < count; ++i) {
            GElf_Rela r{};
            if (rela) {
                if (gelf_getrela(rel_data, static_cast<int>(i), &r) == nullptr) continue;
            } else {
                GElf_Rel plain;
                if (gelf_getrel(rel_data, static_cast<int>(i), &plain) == nullptr) continue;
                r.r_offset = plain.r_offset;
                r.r_info = plain.r_info;
            }
            auto r_type = static_cast<unsigned>(GELF_R_TYPE(r.r_info));
            auto sym_index = GELF_R_SYM(r.r_info);
            std::string name;
            if (r_type == types->jump_slot || r_type == types->glob_dat) {
                GElf_Sym sym;
                if (sym_index != 0 && gelf_getsym(sym_data, static_cast<int>(sym_index), &sym) != nullptr) {
                    const char* s = elf_strptr(file.elf(), dynsym->shdr.sh_link, sym.st_name);
                    if (s != nullptr && s[0] != '\0') name = demangle(s);
                }
            } else if (r_type == types->irelative && rela) {
                name = "*ABS*+0x" + hex_number(static_cast<std::uint64_t>(r.r_addend));  // as perf names it
            }
            if (is_plt) plt_order.push_back(name);
            if (!name.empty()) slot_names.emplace(r.r_offset, std::move(name));
        }
    }
    if (slot_names.empty()) return;

    auto add_entries = [&](const Section* sec, std::uint64_t header, std::uint64_t default_entsize,
                           bool index_fallback) {
        if (sec == nullptr || !sec->has_data()) return;
        Elf_Data* data = elf_getdata(sec->scn, nullptr);
        if (data == nullptr || data->d_buf == nullptr) return;
        const auto* bytes = static_cast<const unsigned char*>(data->d_buf);
        std::uint64_t size = std::min<std::uint64_t>(sec->shdr.sh_size, data->d_size);
        std::uint64_t entsize = sec->shdr.sh_entsize != 0 ? sec->shdr.sh_entsize : default_entsize;
        std::size_t index = 0;
        for (std::uint64_t off = header; off + entsize <= size; off += entsize, ++index) {
            std::uint64_t addr = sec->shdr.sh_addr + off;
            std::string name;
            if (file.machine() == EM_X86_64) {
                if (auto slot = x86_64_got_slot(bytes + off, entsize, addr)) {
                    auto it = slot_names.find(*slot);
                    if (it != slot_names.end()) name = it->second;
                }
            }
            if (name.empty() && index_fallback && index < plt_order.size()) name = plt_order[index];
            if (name.empty()) continue;
            out.push_back(RawSymbol{name + "@plt", addr, entsize, sec->shdr.sh_addr + sec->shdr.sh_size, 0});
        }
    };

    const Section* plt = find_section(sections, ".plt");
    const Section* plt_sec = find_section(sections, ".plt.sec");
    switch (file.machine()) {
        case EM_X86_64:
            if (plt_sec != nullptr) {
                // IBT layout (-z ibtplt / -z ibt): calls go to .plt.sec; the
                // .plt only holds lazy-binding stubs, which are left unnamed.
                add_entries(plt_sec, 0, 16, true);
            } else {
                // Lazy layout: a 16-byte PLT0 header, then 16-byte entries.
                add_entries(plt, 16, 16, true);
            }
            // Imports whose address is also taken are called through .plt.got
            // (8-byte entries, 16 with IBT; the linker sets sh_entsize).
            add_entries(find_section(sections, ".plt.got"), 0, 8, false);
            break;
        case EM_386: add_entries(plt, 16, 16, true); break;
        case EM_AARCH64: add_entries(plt, 32, 16, true); break;
        default: break;
    }
}

// The CRC32 .gnu_debuglink records (the zlib/IEEE polynomial, initial value 0).
std::optional<std::uint32_t> file_crc32(const fs::path& path) {
    static const auto table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::uint32_t crc = 0xffffffffu;
    std::vector<char> buf(1 << 16);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        std::streamsize got = in.gcount();
        for (std::streamsize i = 0; i < got; ++i)
            crc = table[(crc ^ static_cast<unsigned char>(buf[static_cast<std::size_t>(i)])) & 0xff] ^ (crc >> 8);
    }
    if (in.bad()) return std::nullopt;
    return crc ^ 0xffffffffu;
}

bool regular_file_exists(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

bool same_file(const fs::path& a, const fs::path& b) {
    std::error_code ec;
    bool same = fs::equivalent(a, b, ec);
    return !ec && same;
}

std::string build_id_of_file(const fs::path& path) {
    auto file = ElfFile::open(path);
    return file.ok() ? file->build_id() : std::string();
}

fs::path build_id_debug_path(const fs::path& root, const std::string& build_id) {
    return root / ".build-id" / build_id.substr(0, 2) / (build_id.substr(2) + ".debug");
}

// The separate debug file of a stripped binary, searched as GDB does: by
// build id under each root, then by .gnu_debuglink next to the binary, in
// its .debug/ subdirectory and under <root>/<binary's dir>/. A debuglink
// candidate must match the recorded CRC or carry the same build id.
std::optional<fs::path> find_debug_file(const ElfFile& file, const std::string& build_id,
                                        const std::vector<fs::path>& roots) {
    if (build_id.size() > 2) {
        for (const auto& root : roots) {
            fs::path p = build_id_debug_path(root, build_id);
            if (regular_file_exists(p) && !same_file(p, file.path()) && build_id_of_file(p) == build_id)
                return p;
        }
    }
    GElf_Word crc = 0;
    const char* link = dwelf_elf_gnu_debuglink(file.elf(), &crc);
    if (link == nullptr || link[0] == '\0') return std::nullopt;
    std::error_code ec;
    fs::path real = fs::canonical(file.path(), ec);
    fs::path dir = (ec ? fs::absolute(file.path(), ec) : real).parent_path();
    std::vector<fs::path> candidates = {dir / link, dir / ".debug" / link};
    for (const auto& root : roots) candidates.push_back(root / dir.relative_path() / link);
    for (const auto& candidate : candidates) {
        if (!regular_file_exists(candidate) || same_file(candidate, file.path())) continue;
        if (!build_id.empty() && build_id_of_file(candidate) == build_id) return candidate;
        if (auto got = file_crc32(candidate); got && *got == crc) return candidate;
    }
    return std::nullopt;
}

// .gnu_debugdata (MiniDebugInfo): an xz-compressed ELF file whose .symtab
// names the local functions of a stripped binary (Fedora, and any distribution
// that runs its find-debuginfo). A section that cannot be read is named in
// `notes` and otherwise ignored: the rest of the table still stands.
void read_minidebuginfo(const ElfFile& file, const std::vector<Section>& sections, std::vector<RawSymbol>& out,
                        std::vector<std::string>& notes) {
    const Section* sec = find_section(sections, ".gnu_debugdata");
    if (sec == nullptr || !sec->has_data()) return;
    Elf_Data* data = elf_getdata(sec->scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) return;
    std::string where = file.path().filename().string() + ": .gnu_debugdata";
    auto bytes = xz_decompress(data->d_buf, data->d_size);
    if (!bytes.ok()) {
        notes.push_back(where + " " + bytes.error().message());
        return;
    }
    auto mini = ElfFile::from_memory(std::move(*bytes), file.path().string() + " (.gnu_debugdata)");
    if (!mini.ok()) {
        notes.push_back(where + " is not an ELF file; ignored");
        return;
    }
    if (!read_function_symbols(*mini, list_sections(*mini), SHT_SYMTAB, out))
        notes.push_back(where + " holds no symbol table; ignored");
}

std::vector<CodeRange> executable_ranges(const std::vector<Section>& sections) {
    std::vector<CodeRange> code;
    for (const auto& s : sections) {
        if ((s.shdr.sh_flags & SHF_EXECINSTR) == 0 || (s.shdr.sh_flags & SHF_ALLOC) == 0 || !s.has_data()) continue;
        if (s.shdr.sh_addr + s.shdr.sh_size < s.shdr.sh_addr) continue;  // wraps: forged
        code.push_back(CodeRange{s.shdr.sh_addr, s.shdr.sh_addr + s.shdr.sh_size});
    }
    return code;
}

// Functions no symbol covers, from the binary's .eh_frame FDEs: each FDE
// whose start no symbol covers becomes "IMAGE+0xSTART" (START in the ELF
// virtual address space of the store's offsets, so the name depends only on
// the build), ending where the FDE ends or the next symbol starts.
// `named` is the table of `raw` so far.
void add_frame_functions(const ElfFile& file, const std::vector<Section>& sections, const std::string& label,
                         const SymbolTable& named, std::vector<RawSymbol>& raw, std::vector<std::string>& notes) {
    const Section* eh = find_section(sections, ".eh_frame");
    if (eh == nullptr || !eh->has_data() || eh->shdr.sh_type != SHT_PROGBITS) return;
    Elf_Data* data = elf_getdata(eh->scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) return;
    FdeScan scan = scan_eh_frame(file.ident(), data->d_buf, data->d_size, eh->shdr.sh_addr,
                                 executable_ranges(sections));
    if (scan.stopped || scan.refused > 0)
        notes.push_back(file.path().filename().string() + ": .eh_frame " +
                        (scan.stopped ? "is malformed; read up to the damage" : "has FDEs that cannot be used") +
                        " (" + std::to_string(scan.refused) + " FDEs refused: outside code, empty or overlapping)");
    if (scan.functions.empty()) return;

    const auto& symbols = named.symbols();
    std::vector<RawSymbol> added;
    for (const auto& fde : scan.functions) {
        if (named.lookup(fde.start) != nullptr) continue;
        std::uint64_t end = fde.end;
        auto next = std::upper_bound(symbols.begin(), symbols.end(), fde.start,
                                     [](std::uint64_t a, const Symbol& s) { return a < s.start; });
        if (next != symbols.end()) end = std::min(end, next->start);
        RawSymbol sym;
        sym.name = label + "+0x" + hex_number(fde.start);
        sym.start = fde.start;
        sym.size = end - fde.start;
        sym.local = true;
        sym.from_frame_info = true;
        added.push_back(std::move(sym));
    }
    for (auto& sym : added) raw.push_back(std::move(sym));
}

}  // namespace

Result<SymbolTable> SymbolTable::from_elf(const fs::path& path,
                                          const std::vector<fs::path>& debug_search,
                                          const std::string& image_name,
                                          const fs::path& debug_file) {
    ECPI_ASSIGN_OR_RETURN(ElfFile file, ElfFile::open(path));
    std::vector<Section> sections = list_sections(file);
    std::string build_id = file.build_id();
    std::vector<std::string> notes;

    std::vector<RawSymbol> raw;
    fs::path used_debug_file;
    bool have_symtab = read_function_symbols(file, sections, SHT_SYMTAB, raw);
    if (!have_symtab) {
        std::vector<fs::path> roots = debug_search;
        if (std::find(roots.begin(), roots.end(), kDefaultDebugRoot) == roots.end())
            roots.push_back(kDefaultDebugRoot);
        std::optional<fs::path> debug_path;
        if (!debug_file.empty() && build_id_of_file(debug_file) == build_id) debug_path = debug_file;
        if (!debug_path) debug_path = find_debug_file(file, build_id, roots);
        if (debug_path) {
            auto debug = ElfFile::open(*debug_path);
            if (debug.ok()) have_symtab = read_function_symbols(*debug, list_sections(*debug), SHT_SYMTAB, raw);
            if (have_symtab) used_debug_file = *debug_path;
        }
    }
    // MiniDebugInfo holds only the functions .dynsym lacks: both are read.
    if (!have_symtab) read_minidebuginfo(file, sections, raw, notes);
    if (!have_symtab) read_function_symbols(file, sections, SHT_DYNSYM, raw);
    // PLT contents exist only in the binary itself (a debug file has them as NOBITS).
    synthesize_plt(file, sections, raw);
    std::string label = image_name.empty() ? path.filename().string() : image_name;
    // A full symbol table names every function; only a stripped image's gaps
    // are filled from .eh_frame (which also spares big unstripped binaries
    // a second table).
    if (!have_symtab) add_frame_functions(file, sections, label, Builder::build(raw, {}), raw, notes);
    if (raw.empty())
        return Error(path.string() + ": no function symbols and no .eh_frame (stripped, and no separate debug "
                     "file found)");
    SymbolTable table = Builder::build(std::move(raw), std::move(build_id));
    table.notes_ = std::move(notes);
    table.complete_ = have_symtab;
    table.debug_file_ = std::move(used_debug_file);
    return table;
}

SymbolTable SymbolTable::idle_cpus() {
    std::vector<RawSymbol> raw;
    raw.reserve(store::kMaxCpus + 1);
    for (std::uint64_t cpu = 0; cpu < store::kMaxCpus; ++cpu)
        raw.push_back(RawSymbol{"[idle cpu " + std::to_string(cpu) + "]", cpu, 1, 0, 0, "", false});
    raw.push_back(RawSymbol{"[idle]", kIdleAnyCpu, 1, 0, 0, "", false});
    return Builder::build(std::move(raw), "");
}

Result<SymbolTable> SymbolTable::from_kallsyms(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return Error::from_errno(errno, "opening " + path.string());
    std::vector<RawSymbol> raw;
    std::optional<std::uint64_t> text;
    std::string line;
    while (std::getline(in, line)) {
        // "ffffffff81000000 T _text" or "ffffffffc0a01000 t name\t[module]"
        char* end = nullptr;
        unsigned long long addr = std::strtoull(line.c_str(), &end, 16);
        if (end == line.c_str() || *end != ' ') continue;
        std::string_view rest(end + 1);
        if (rest.size() < 3 || rest[1] != ' ') continue;
        char type = rest[0];
        rest.remove_prefix(2);
        std::size_t ws = rest.find_first_of(" \t");
        std::string name(rest.substr(0, ws));
        if (name.empty()) continue;
        if (name == "_text" && !text) text = addr;
        if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
        if (ws != std::string_view::npos) {
            std::string_view module = rest.substr(ws);
            std::size_t b = module.find_first_not_of(" \t");
            if (b != std::string_view::npos) {
                module.remove_prefix(b);
                name += ' ';
                name += module;  // "name [module]"
            }
        }
        RawSymbol sym;
        sym.name = std::move(name);
        sym.start = addr;
        sym.rank = type == 'T' ? 0 : 1;
        raw.push_back(std::move(sym));
    }
    if (in.bad()) return Error::from_errno(errno, "reading " + path.string());
    if (!text) return Error(path.string() + ": no _text symbol (not a kallsyms file?)");
    if (*text == 0)
        return Error("kernel symbols unavailable (kallsyms addresses are hidden; run as root or set "
                     "kernel.kptr_restrict=0)");
    // The store keeps kernel offsets as pc - _text (include/ecpi/store/profile.h).
    std::vector<RawSymbol> rebased;
    rebased.reserve(raw.size());
    for (auto& sym : raw) {
        if (sym.start < *text) continue;
        sym.start -= *text;
        rebased.push_back(std::move(sym));
    }
    if (rebased.empty()) return Error(path.string() + ": no kernel text symbols");
    return Builder::build(std::move(rebased), {});
}

std::uint64_t SymbolTable::end_of(const Symbol& sym) const {
    auto index = static_cast<std::size_t>(&sym - symbols_.data());
    return index < ends_.size() ? ends_[index] : sym.start + sym.size;
}

const Symbol* SymbolTable::lookup(std::uint64_t addr) const {
    auto it = std::upper_bound(symbols_.begin(), symbols_.end(), addr,
                               [](std::uint64_t a, const Symbol& s) { return a < s.start; });
    if (it == symbols_.begin()) return nullptr;
    --it;
    auto index = static_cast<std::size_t>(it - symbols_.begin());
    return addr < ends_[index] ? &*it : nullptr;
}

std::string unsymbolized_name(const store::ImageId& image) {
    if (image.path.empty()) return store::kUnknownImage;
    if (image.path.front() == '[') return image.path;
    std::string name = fs::path(image.path).filename().string();
    return "[" + (name.empty() ? image.path : name) + "]";
}

Result<std::string> read_build_id(const fs::path& path) {
    ECPI_ASSIGN_OR_RETURN(ElfFile file, ElfFile::open(path));
    return file.build_id();
}

// --- Symbolizer ------------------------------------------------------------

struct Symbolizer::Impl {
    Options options;
    std::map<store::ImageId, Result<SymbolTable>> tables;
    std::map<store::ImageId, fs::path> files;  // the ELF file each loaded table came from
    // Separate debug files read without the image (found by build id alone,
    // or fetched); a table's own debug_file() names the others.
    std::map<store::ImageId, fs::path> debug_files;
    // libdebuginfod could not be loaded (said once): no image asks again.
    bool debuginfod_missing = false;

    std::optional<Result<SymbolTable>> from_symfs(const store::ImageId& image, const std::string& label,
                                                  std::vector<std::string>& reasons) {
        const std::string& bid = image.build_id;
        for (const auto& dir : options.symfs) {
            // A recorded path is data others wrote: one that climbs out of DIR is not followed.
            fs::path inside = fs::path(image.path).relative_path().lexically_normal();
            std::vector<fs::path> candidates;
            if (!inside.empty() && *inside.begin() != "..") candidates.push_back(dir / inside);
            if (!label.empty() && label != "..") candidates.push_back(dir / label);
            if (bid.size() > 2) candidates.push_back(dir / ".build-id" / bid.substr(0, 2) / bid.substr(2));
            for (const auto& candidate : candidates) {
                if (!regular_file_exists(candidate)) continue;
                auto got = read_build_id(candidate);
                if (!got.ok()) {
                    reasons.push_back(got.error().message());
                    continue;
                }
                if (*got != bid) {
                    reasons.push_back(candidate.string() + " under --symfs has build id " +
                                      (got->empty() ? std::string("none") : *got) + ", not the profiled " +
                                      (bid.empty() ? std::string("none") : bid) + "; refused");
                    continue;
                }
                auto table = SymbolTable::from_elf(candidate, options.debug_roots, label);
                if (!table.ok()) {
                    reasons.push_back(table.error().message());
                    continue;
                }
                files[image] = candidate;
                return table;
            }
        }
        return std::nullopt;
    }

    // Whether to ask debuginfod for `image`'s debug file: an image of a file
    // (not "[vdso]" and the like) with a build id whose symbols are partial
    // (`local` is the table read without debuginfod).
    bool wants_debuginfod(const store::ImageId& image, const Result<SymbolTable>& local) const {
        if (debuginfod_missing || !debuginfod_active(options.debuginfod)) return false;
        if (image.build_id.size() <= 2 || image.path.empty() || image.path.front() == '[') return false;
        return !local.ok() || !local->complete();
    }

    void report(const std::string& line) const {
        if (options.debuginfod.report) options.debuginfod.report(line);
    }

    // The table of `image`, with its debug file fetched from debuginfod when
    // the local files name its functions only in part (or not at all); a
    // failure is reported once and the local table stands.
    Result<SymbolTable> load(const store::ImageId& image) {
        Result<SymbolTable> local = load_local(image);
        if (!wants_debuginfod(image, local)) return local;
        const std::string label = fs::path(image.path).filename().string();
        const char* fallback = local.ok() ? "; its functions keep the names of .dynsym and .eh_frame" : "";
        auto fetched = fetch_debuginfo(options.debuginfod, image.build_id, label);
        if (!fetched.ok() && fetched.error().errno_value() == ELIBACC) {  // the library, not this image
            debuginfod_missing = true;
            report(fetched.error().message() + "; reports go on without fetching debug files");
            return local;
        }
        if (!fetched.ok()) {
            report(fetched.error().message() + fallback);
            return local;
        }
        auto file = files.find(image);
        auto table = file != files.end() ? SymbolTable::from_elf(file->second, options.debug_roots, label, *fetched)
                                         : SymbolTable::from_elf(*fetched, options.debug_roots, label);
        if (!table.ok() || (file != files.end() && table->debug_file() != *fetched)) {
            report("debuginfod: the fetched " + fetched->string() + " does not name the functions of " + label +
                   (table.ok() ? std::string() : " (" + table.error().message() + ")") + fallback);
            return local;
        }
        debug_files[image] = *fetched;
        return table;
    }

    Result<SymbolTable> load_local(const store::ImageId& image) {
        const std::string& path = image.path;
        if (path == store::kKernelImage) return SymbolTable::from_kallsyms(options.kallsyms);
        if (path == store::kUnknownImage) return Error("samples that mapped to no executable image");
        if (path == store::kIdleImage) return SymbolTable::idle_cpus();
        // The recorder saves the vDSO in the build-id cache (it is the same
        // image in every process of one kernel).
        if (path == store::kVdsoImage && (image.build_id.size() <= 2 || !options.database))
            return Error("the vDSO was not saved with the profile");
        if (path.starts_with("[anon")) return Error("anonymous memory (JIT-compiled code?) has no symbols");
        if (path.starts_with("[") && path != store::kVdsoImage) return Error("special mapping without symbols");

        std::vector<std::string> reasons;
        const std::string& bid = image.build_id;
        // Names of functions without symbols carry the recorded file name,
        // never the name of the cached copy they were read from.
        const std::string label = fs::path(path).filename().string();
        // 1. The database's build-id cache: DB/images/<bid[0:2]>/<bid[2:]>, the
        //    layout of store::Database::cached_image_path (keep in sync).
        if (options.database && bid.size() > 2) {
            fs::path cached = *options.database / "images" / bid.substr(0, 2) / bid.substr(2);
            if (regular_file_exists(cached)) {
                auto table = SymbolTable::from_elf(cached, options.debug_roots, label);
                if (table.ok()) {
                    files[image] = cached;
                    return table;
                }
                reasons.push_back(table.error().message());
            }
        }
        // 2. A copy under --symfs with the recorded build id.
        if (auto copy = from_symfs(image, label, reasons)) return std::move(*copy);
        // 3. The recorded path, if it still holds the binary that was
        //    profiled: a regular ELF file whose build id is the recorded one
        //    (none for none). A profile is data others wrote: a path forged
        //    to /etc/shadow or /dev/zero is refused here (issue 20, defect 2).
        if (regular_file_exists(path)) {
            std::string now;
            bool readable = true;
            auto got = read_build_id(path);
            if (!got.ok()) {
                reasons.push_back(got.error().message());
                readable = false;
            } else {
                now = *got;
            }
            if (!readable) {
                // named above
            } else if (now == bid) {
                auto table = SymbolTable::from_elf(path, options.debug_roots, label);
                if (table.ok()) {
                    files[image] = path;
                    return table;
                }
                reasons.push_back(table.error().message());
            } else {
                reasons.push_back(path + " has changed since it was profiled (build id " +
                                  (now.empty() ? std::string("none") : now) + ", profiled " +
                                  (bid.empty() ? std::string("none") : bid) + ")");
            }
        } else {
            reasons.push_back(path + ": no such file");
        }
        // 4. A separate debug file found by build id alone.
        if (bid.size() > 2) {
            for (const auto& root : options.debug_roots) {
                fs::path debug = build_id_debug_path(root, bid);
                if (!regular_file_exists(debug)) continue;
                auto table = SymbolTable::from_elf(debug, options.debug_roots, label);
                if (table.ok()) {
                    debug_files[image] = debug;
                    return table;
                }
                reasons.push_back(table.error().message());
            }
        }
        std::string message;
        for (const auto& r : reasons) {
            if (!message.empty()) message += "; ";
            message += r;
        }
        return Error(std::move(message));
    }
};

Symbolizer::Symbolizer(Options options) : impl_(std::make_unique<Impl>()) {
    impl_->options = std::move(options);
}
Symbolizer::~Symbolizer() = default;
Symbolizer::Symbolizer(Symbolizer&&) noexcept = default;
Symbolizer& Symbolizer::operator=(Symbolizer&&) noexcept = default;

const Result<SymbolTable>& Symbolizer::table(const store::ImageId& image) {
    auto it = impl_->tables.find(image);
    if (it == impl_->tables.end()) it = impl_->tables.emplace(image, impl_->load(image)).first;
    return it->second;
}

std::optional<fs::path> Symbolizer::image_file(const store::ImageId& image) {
    if (!table(image).ok()) return std::nullopt;
    auto it = impl_->files.find(image);
    if (it == impl_->files.end()) return std::nullopt;
    return it->second;
}

std::optional<fs::path> Symbolizer::debug_file(const store::ImageId& image) {
    const auto& t = table(image);
    if (!t.ok()) return std::nullopt;
    if (auto it = impl_->debug_files.find(image); it != impl_->debug_files.end()) return it->second;
    if (!t->debug_file().empty()) return t->debug_file();
    return std::nullopt;
}

const Symbolizer::Options& Symbolizer::options() const { return impl_->options; }

std::string missing_images_note(const store::EpochContents& contents, const std::string& event,
                                Symbolizer& symbolizer) {
    std::string note;
    std::set<store::ImageId> seen;
    for (const auto& profile : contents.profiles) {
        const store::ImageId& image = profile.image;
        if (profile.event != event || profile.total() == 0 || image.path.empty() || image.path.front() == '[') continue;
        if (!seen.insert(image).second || symbolizer.table(image).ok()) continue;
        auto now = read_build_id(image.path);
        const char* what = !regular_file_exists(image.path) ? "is gone"
                           : (now.ok() && *now != image.build_id) ? "has changed since it was profiled"
                                                                  : nullptr;
        if (what == nullptr) continue;  // there, but unreadable: prof's warning names why
        if (!note.empty()) note += "; ";
        note += "image " + image.path + " (build id " + (image.build_id.empty() ? "none" : image.build_id) + ") " +
                what + "; point --symfs at a copy";
        // A copy under --symfs with another build id was refused: name it
        // (load() puts those reasons first).
        const std::string& why = symbolizer.table(image).error().message();
        if (auto refused = why.find("; refused"); refused != std::string::npos && why.find(" under --symfs ") < refused)
            note += " (" + why.substr(0, refused + 9) + ")";
    }
    return note;
}

const Symbol* Symbolizer::lookup(const store::ImageId& image, std::uint64_t offset) {
    const auto& t = table(image);
    return t.ok() ? t->lookup(offset) : nullptr;
}

}  // namespace ecpi::analyze
