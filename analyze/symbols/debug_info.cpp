// Source lines and inline chains (libdw through libdwfl's offline mode, which
// also finds separate debug files), code bytes (libelf) and disassembly
// (Capstone). Contracts: include/ecpi/analyze/symbols/debug_info.h.
#include "ecpi/analyze/symbols/debug_info.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>
#include <cstring>
#include <cxxabi.h>
#include <fstream>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/analyze/symbols/capstone_library.h"

namespace ecpi::analyze {

namespace fs = std::filesystem;

namespace {

std::string demangle(const char* name) {
    if (name == nullptr) return {};
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

// The name a function DIE (subprogram or inlined instance) has in the
// object: its linkage name (mangled), else DW_AT_name; "??" without either.
// Frames show it demangled (as the symbol table spells it).
// dwarf_attr_integrate follows DW_AT_abstract_origin / DW_AT_specification.
std::string raw_function_name(Dwarf_Die* die) {
    Dwarf_Attribute attr;
    for (unsigned name : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name}) {
        if (dwarf_attr_integrate(die, name, &attr) != nullptr) {
            if (const char* s = dwarf_formstring(&attr)) return s;
        }
    }
    if (dwarf_attr_integrate(die, DW_AT_name, &attr) != nullptr) {
        if (const char* s = dwarf_formstring(&attr)) return s;
    }
    return "??";
}

// DW_AT_GNU_discriminator (GCC and LLVM put it on inlined calls); elfutils'
// dwarf.h does not name it.
constexpr unsigned kAtGnuDiscriminator = 0x2136;

std::optional<Dwarf_Word> udata_attr(Dwarf_Die* die, unsigned name) {
    Dwarf_Attribute attr;
    Dwarf_Word value = 0;
    if (dwarf_attr(die, name, &attr) == nullptr || dwarf_formudata(&attr, &value) != 0) return std::nullopt;
    return value;
}

// The file a function is declared in. elfutils 0.188's dwarf_decl_file
// takes file index 0 for "no file", but DWARF 5 (clang 14's default)
// numbers the unit's own file 0: there, look the index up in the table of
// the unit that holds the attribute (an abstract origin's, for instances).
std::string decl_file_of(Dwarf_Die* die) {
    if (const char* decl = dwarf_decl_file(die)) return decl;
    Dwarf_Attribute attr;
    Dwarf_Word index = 0;
    if (dwarf_attr_integrate(die, DW_AT_decl_file, &attr) == nullptr || dwarf_formudata(&attr, &index) != 0 ||
        index != 0)
        return {};
    Dwarf_Die unit;
    Dwarf_Half version = 0;
    Dwarf_Files* files = nullptr;
    std::size_t nfiles = 0;
    if (dwarf_cu_die(attr.cu, &unit, &version, nullptr, nullptr, nullptr, nullptr, nullptr) == nullptr ||
        version < 5 || dwarf_getsrcfiles(&unit, &files, &nfiles) != 0 || nfiles == 0)
        return {};
    const char* src = dwarf_filesrc(files, 0, nullptr, nullptr);
    return src != nullptr ? src : "";
}

// libdwfl's find_debuginfo: the debug file named in the module's user data
// (a std::string set by DebugInfo::open) when there is one, else libdwfl's
// own search.
int find_named_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                         const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                         char** debuginfo_file_name) {
    const auto* named = static_cast<const std::string*>(*userdata);
    if (named != nullptr && !named->empty()) {
        int fd = ::open(named->c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) {
            *debuginfo_file_name = ::strdup(named->c_str());
            return fd;
        }
    }
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                        debuginfo_file_name);
}

}  // namespace

struct DebugInfo::Impl {
    // libdwfl keeps pointers to the callbacks and the search path: they live
    // here, beside the Dwfl, for as long as it does.
    std::string debuginfo_path;
    char* debuginfo_path_ptr = nullptr;
    std::string debug_file;  // the module's user data: see find_named_debuginfo
    Dwfl_Callbacks callbacks{};
    Dwfl* dwfl = nullptr;
    Dwfl_Module* module = nullptr;
    Elf* elf = nullptr;             // owned by dwfl
    Dwarf* dwarf = nullptr;         // owned by dwfl; nullptr without DWARF
    GElf_Addr elf_bias = 0;         // dwfl address = ELF virtual address + elf_bias
    unsigned machine = 0;
    fs::path path;
    // Each CU's address ranges (dwfl addresses), sorted, for binaries without
    // .debug_aranges; built on the first miss (cu_at).
    struct CuRange {
        Dwarf_Addr start, end;
        Dwarf_Die cu;
        Dwarf_Addr bias;
    };
    std::vector<CuRange> cu_ranges;
    bool cu_ranges_built = false;

    Dwarf_Die* cu_at(Dwarf_Addr dwfl_address, Dwarf_Addr* bias);
    void build_cu_ranges();

    ~Impl() {
        if (dwfl != nullptr) dwfl_end(dwfl);
    }
};

// clang emits no .debug_aranges, and elfutils before 0.189 (Debian 12 ships
// 0.188) finds a CU by address only through them: every clang-built binary
// had no source lines. A miss falls back to the CUs' own ranges
// (DW_AT_low_pc/high_pc or DW_AT_ranges), read once.
void DebugInfo::Impl::build_cu_ranges() {
    cu_ranges_built = true;
    constexpr std::size_t kMaxRanges = 1 << 20;  // bounded: the DWARF is untrusted
    Dwarf_Die* cu = nullptr;
    Dwarf_Addr cu_bias = 0;
    while ((cu = dwfl_module_nextcu(module, cu, &cu_bias)) != nullptr && cu_ranges.size() < kMaxRanges) {
        Dwarf_Addr base = 0, start = 0, end = 0;
        ptrdiff_t offset = 0;
        while ((offset = dwarf_ranges(cu, offset, &base, &start, &end)) > 0 && cu_ranges.size() < kMaxRanges)
            if (end > start) cu_ranges.push_back({start + cu_bias, end + cu_bias, *cu, cu_bias});
    }
    std::sort(cu_ranges.begin(), cu_ranges.end(), [](const CuRange& a, const CuRange& b) { return a.start < b.start; });
}

Dwarf_Die* DebugInfo::Impl::cu_at(Dwarf_Addr dwfl_address, Dwarf_Addr* bias) {
    if (Dwarf_Die* cu = dwfl_module_addrdie(module, dwfl_address, bias)) return cu;
    if (!cu_ranges_built) build_cu_ranges();
    auto it = std::upper_bound(cu_ranges.begin(), cu_ranges.end(), dwfl_address,
                               [](Dwarf_Addr a, const CuRange& r) { return a < r.start; });
    // Ranges of different CUs do not overlap; look back a few for a nested or unsorted end.
    for (int back = 0; back < 8 && it != cu_ranges.begin(); ++back) {
        --it;
        if (dwfl_address < it->end) {
            *bias = it->bias;
            return &it->cu;
        }
    }
    return nullptr;
}

DebugInfo::DebugInfo(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DebugInfo::DebugInfo(DebugInfo&&) noexcept = default;
DebugInfo& DebugInfo::operator=(DebugInfo&&) noexcept = default;
DebugInfo::~DebugInfo() = default;

Result<DebugInfo> DebugInfo::open(const fs::path& elf_file, const std::vector<fs::path>& debug_roots,
                                  const fs::path& debug_file) {
    auto impl = std::make_unique<Impl>();
    impl->path = elf_file;
    impl->debug_file = debug_file.string();
    // elfutils' search path syntax: "" (the file's directory), ".debug", then roots.
    impl->debuginfo_path = ":.debug";
    if (debug_roots.empty()) {
        impl->debuginfo_path += ":/usr/lib/debug";
    } else {
        for (const auto& root : debug_roots) impl->debuginfo_path += ":" + root.string();
    }
    impl->debuginfo_path_ptr = impl->debuginfo_path.data();
    impl->callbacks.find_elf = dwfl_build_id_find_elf;
    impl->callbacks.find_debuginfo = find_named_debuginfo;
    impl->callbacks.section_address = dwfl_offline_section_address;
    impl->callbacks.debuginfo_path = &impl->debuginfo_path_ptr;
    impl->dwfl = dwfl_begin(&impl->callbacks);
    if (impl->dwfl == nullptr) return Error(std::string("libdwfl: ") + dwfl_errmsg(-1));
    impl->module = dwfl_report_offline(impl->dwfl, elf_file.filename().c_str(), elf_file.c_str(), -1);
    if (impl->module == nullptr) return Error(elf_file.string() + ": " + dwfl_errmsg(-1));
    void** userdata = nullptr;
    dwfl_module_info(impl->module, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    if (userdata != nullptr) *userdata = &impl->debug_file;
    if (dwfl_report_end(impl->dwfl, nullptr, nullptr) != 0)
        return Error(elf_file.string() + ": " + dwfl_errmsg(-1));
    impl->elf = dwfl_module_getelf(impl->module, &impl->elf_bias);
    if (impl->elf == nullptr) return Error(elf_file.string() + ": " + dwfl_errmsg(-1));
    GElf_Ehdr ehdr;
    if (gelf_getehdr(impl->elf, &ehdr) == nullptr) return Error(elf_file.string() + ": bad ELF header");
    impl->machine = ehdr.e_machine;
    Dwarf_Addr dwarf_bias = 0;
    impl->dwarf = dwfl_module_getdwarf(impl->module, &dwarf_bias);  // nullptr: no DWARF anywhere
    return DebugInfo(std::move(impl));
}

bool DebugInfo::has_lines() const { return impl_->dwarf != nullptr; }
unsigned DebugInfo::machine() const { return impl_->machine; }
const fs::path& DebugInfo::path() const { return impl_->path; }

std::vector<SourceFrame> DebugInfo::frames_at(std::uint64_t address) const {
    std::vector<SourceFrame> frames;
    if (impl_->dwarf == nullptr) return frames;
    Dwarf_Addr bias = 0;
    Dwarf_Die* cu = impl_->cu_at(address + impl_->elf_bias, &bias);
    if (cu == nullptr) return frames;
    // Addresses inside the CU are DWARF addresses: dwfl address - bias.
    const Dwarf_Addr pc = address + impl_->elf_bias - bias;

    std::string file;
    int line = 0, column = 0;
    unsigned discriminator = 0;
    if (Dwarf_Line* l = dwarf_getsrc_die(cu, pc)) {
        if (const char* src = dwarf_linesrc(l, nullptr, nullptr)) file = src;
        dwarf_lineno(l, &line);
        dwarf_linecol(l, &column);
        dwarf_linediscriminator(l, &discriminator);
    }

    Dwarf_Files* files = nullptr;
    std::size_t nfiles = 0;
    bool have_files = dwarf_getsrcfiles(cu, &files, &nfiles) == 0;

    Dwarf_Die* scopes = nullptr;
    int n = dwarf_getscopes(cu, pc, &scopes);
    for (int i = 0; i < n; ++i) {
        Dwarf_Die* die = &scopes[i];
        int tag = dwarf_tag(die);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
        if (tag == DW_TAG_inlined_subroutine && i + 1 < n) {
            // dwarf_getscopes continues past an inlined instance with the
            // scopes of its abstract definition; the concrete scopes that
            // contain the instance (the caller) come from dwarf_getscopes_die.
            Dwarf_Die instance = *die;
            Dwarf_Die* outer = nullptr;
            int m = dwarf_getscopes_die(&instance, &outer);
            if (m > 0) {
                std::free(scopes);
                scopes = outer;  // outer[0] is the instance itself
                n = m;
                i = 0;
                die = &scopes[0];
            } else {
                std::free(outer);
            }
        }
        SourceFrame frame;
        frame.linkage_name = raw_function_name(die);
        frame.function = demangle(frame.linkage_name.c_str());
        frame.file = file;
        frame.line = line;
        frame.column = column;
        frame.discriminator = discriminator;
        frame.inlined = tag == DW_TAG_inlined_subroutine;
        frame.decl_file = decl_file_of(die);
        dwarf_decl_line(die, &frame.decl_line);
        frames.push_back(std::move(frame));
        if (tag == DW_TAG_subprogram) break;
        // The next frame out continues at the inlined call's site.
        file.clear();
        line = column = 0;
        discriminator = static_cast<unsigned>(udata_attr(die, kAtGnuDiscriminator).value_or(0));
        if (auto call_file = udata_attr(die, DW_AT_call_file); call_file && have_files && *call_file < nfiles) {
            if (const char* src = dwarf_filesrc(files, *call_file, nullptr, nullptr)) file = src;
        }
        if (auto call_line = udata_attr(die, DW_AT_call_line)) line = static_cast<int>(*call_line);
        if (auto call_column = udata_attr(die, DW_AT_call_column)) column = static_cast<int>(*call_column);
    }
    std::free(scopes);
    if (frames.empty() && line != 0) {
        // A line but no function DIE (assembly with -g): a frame without a name.
        SourceFrame frame;
        frame.file = file;
        frame.line = line;
        frame.column = column;
        frames.push_back(std::move(frame));
    }
    return frames;
}

Result<std::vector<std::uint8_t>> DebugInfo::code(std::uint64_t start, std::uint64_t end) const {
    for (Elf_Scn* scn = elf_nextscn(impl_->elf, nullptr); scn != nullptr; scn = elf_nextscn(impl_->elf, scn)) {
        GElf_Shdr shdr;
        if (gelf_getshdr(scn, &shdr) == nullptr) continue;
        if ((shdr.sh_flags & SHF_ALLOC) == 0 || (shdr.sh_flags & SHF_EXECINSTR) == 0) continue;
        if (start < shdr.sh_addr || start >= shdr.sh_addr + shdr.sh_size) continue;
        if (shdr.sh_type == SHT_NOBITS)
            return Error(impl_->path.string() + " holds no code (a separate debug file?)");
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (data == nullptr || data->d_buf == nullptr) return Error(impl_->path.string() + ": cannot read code section");
        std::uint64_t limit = std::min<std::uint64_t>(end, shdr.sh_addr + std::min<std::uint64_t>(shdr.sh_size, data->d_size));
        if (limit <= start) return std::vector<std::uint8_t>{};
        const auto* bytes = static_cast<const std::uint8_t*>(data->d_buf) + (start - shdr.sh_addr);
        return std::vector<std::uint8_t>(bytes, bytes + (limit - start));
    }
    return Error(impl_->path.string() + ": no code section holds address 0x" + [&] {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(start));
        return std::string(buf);
    }());
}

Result<std::vector<Instruction>> disassemble(unsigned machine, std::uint64_t address,
                                             std::span<const std::uint8_t> bytes) {
    cs_arch arch;
    cs_mode mode;
    switch (machine) {
        case EM_X86_64: arch = CS_ARCH_X86; mode = CS_MODE_64; break;
        case EM_386: arch = CS_ARCH_X86; mode = CS_MODE_32; break;
        case EM_AARCH64: arch = CS_ARCH_ARM64; mode = CS_MODE_ARM; break;
        default: return Error("no disassembler for ELF machine " + std::to_string(machine));
    }
    ECPI_ASSIGN_OR_RETURN(const CapstoneApi* cs, capstone_api());
    csh handle;
    if (cs->open(arch, mode, &handle) != CS_ERR_OK) return Error("capstone: cannot open a disassembler");
    cs_insn* insn = cs->insn_malloc(handle);
    std::vector<Instruction> out;
    const std::uint8_t* code = bytes.data();
    std::size_t size = bytes.size();
    std::uint64_t addr = address;
    while (size > 0) {
        if (cs->disasm_iter(handle, &code, &size, &addr, insn)) {
            std::string text = insn->mnemonic;
            if (insn->op_str[0] != '\0') {
                text += ' ';
                text += insn->op_str;
            }
            out.push_back({insn->address, insn->size, std::move(text)});
        } else {
            out.push_back({addr, 1, "(bad)"});
            ++code;
            --size;
            ++addr;
        }
    }
    cs->insn_free(insn, 1);
    cs->close(&handle);
    return out;
}

DebugInfoCache::DebugInfoCache(Symbolizer& symbolizer) : symbolizer_(symbolizer) {}

const DebugInfo* DebugInfoCache::get(const store::ImageId& image, std::string* why) {
    auto it = cache_.find(image);
    if (it == cache_.end()) {
        Result<DebugInfo> opened = Error("");
        if (image.path == store::kKernelImage) {
            opened = Error("kernel code is not read by ecpi (no vmlinux with debug info)");
        } else if (auto file = symbolizer_.image_file(image)) {
            opened = DebugInfo::open(*file, symbolizer_.options().debug_roots,
                                     symbolizer_.debug_file(image).value_or(fs::path()));
        } else {
            const auto& table = symbolizer_.table(image);
            opened = Error(table.ok() ? "the binary of " + image.path + " is not available" : table.error().message());
        }
        it = cache_.emplace(image, std::move(opened)).first;
    }
    if (!it->second.ok()) {
        if (why != nullptr) *why = it->second.error().message();
        return nullptr;
    }
    return &it->second.value();
}

const std::vector<std::string>* SourceFiles::lines(const std::string& file) {
    auto it = cache_.find(file);
    if (it == cache_.end()) {
        std::optional<std::vector<std::string>> lines;
        std::ifstream in(file);
        if (in && !file.empty()) {
            lines.emplace();
            std::string line;
            while (std::getline(in, line)) {
                if (!line.empty() && line.back() == '\r') line.pop_back();
                lines->push_back(std::move(line));
            }
        }
        it = cache_.emplace(file, std::move(lines)).first;
    }
    return it->second ? &*it->second : nullptr;
}

}  // namespace ecpi::analyze
