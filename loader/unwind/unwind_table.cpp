#include "ecpi/loader/unwind_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "cfi_program.h"
#include "ecpi_abi.h"

namespace ecpi::loader {

static_assert(sizeof(ecpi_unwind_row) == 8, "ABI: ecpi_unwind_row");

namespace {


// One FDE's address range and program.
struct FdeRange {
    std::uint64_t lo = 0, hi = 0;
    std::uint64_t start = 0;  // where its program starts (lo may be later: an overlapped head)
    detail::CfiProgram program;
};

// What an FDE takes from its CIE.
struct CieInfo {
    std::uint8_t encoding = DW_EH_PE_absptr;
    bool augmentation_data = false;  // 'z': FDEs carry a length-prefixed augmentation block
    detail::CfiProgram program;      // the CIE's part
};

// A DW_EH_PE-encoded pointer inside [p, end); advances p. `field_address`
// is where p points in the image (for pcrel).
std::optional<std::uint64_t> read_encoded(const std::uint8_t*& p, const std::uint8_t* end, std::uint8_t enc,
                                          std::uint64_t field_address) {
    if (enc == DW_EH_PE_omit) return std::nullopt;
    std::uint64_t v = 0;
    auto fixed = [&](std::size_t n, bool is_signed) -> bool {
        if (static_cast<std::size_t>(end - p) < n) return false;
        std::uint64_t raw = 0;
        std::memcpy(&raw, p, n);  // x86-64: little endian
        if (is_signed && n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~0ull << (8 * n);
        v = raw;
        p += n;
        return true;
    };
    auto leb = [&](bool is_signed) -> bool {
        unsigned shift = 0;
        std::uint8_t byte = 0x80;
        while (byte & 0x80) {
            if (p >= end || shift >= 64) return false;
            byte = *p++;
            v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
            shift += 7;
        }
        if (is_signed && shift < 64 && (byte & 0x40)) v |= ~0ull << shift;
        return true;
    };
    bool ok = false;
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr: ok = fixed(8, false); break;
    case DW_EH_PE_uleb128: ok = leb(false); break;
    case DW_EH_PE_udata2: ok = fixed(2, false); break;
    case DW_EH_PE_udata4: ok = fixed(4, false); break;
    case DW_EH_PE_udata8: ok = fixed(8, false); break;
    case DW_EH_PE_sleb128: ok = leb(true); break;
    case DW_EH_PE_sdata2: ok = fixed(2, true); break;
    case DW_EH_PE_sdata4: ok = fixed(4, true); break;
    case DW_EH_PE_sdata8: ok = fixed(8, true); break;
    default: return std::nullopt;
    }
    if (!ok) return std::nullopt;
    switch (enc & 0x70) {
    case DW_EH_PE_absptr: break;
    case DW_EH_PE_pcrel: v += field_address; break;
    default: return std::nullopt;  // datarel/textrel/funcrel: not used for FDE locations on x86-64
    }
    if (enc & DW_EH_PE_indirect) return std::nullopt;
    return v;
}

// What a CIE's augmentation ('zRS...') declares for its FDEs, and its program.
std::optional<CieInfo> cie_info(const Dwarf_CIE& cie, bool eh_frame) {
    CieInfo info;
    info.program.cie_begin = cie.initial_instructions;
    info.program.cie_end = cie.initial_instructions_end;
    info.program.code_alignment = cie.code_alignment_factor;
    info.program.data_alignment = cie.data_alignment_factor;
    info.program.return_register = cie.return_address_register;
    if (!info.program.cie_begin || info.program.cie_end < info.program.cie_begin) return std::nullopt;
    const char* aug = cie.augmentation;
    if (!eh_frame && aug && aug[0] == '\0') return info;
    if (!aug || aug[0] != 'z') return aug && aug[0] == '\0' ? std::optional<CieInfo>(info) : std::nullopt;
    info.augmentation_data = true;
    const std::uint8_t* p = cie.augmentation_data;
    const std::uint8_t* end = p ? p + cie.augmentation_data_size : nullptr;
    std::uint8_t& enc = info.encoding;
    for (const char* c = aug + 1; *c; ++c) {
        if (*c == 'S') {
            info.program.signal_frame = true;
            continue;
        }
        if (*c == 'B') continue;
        if (!p || p >= end) return std::nullopt;
        if (*c == 'R') enc = *p++;
        else if (*c == 'L') ++p;
        else if (*c == 'P') {
            std::uint8_t penc = *p++;
            if (!read_encoded(p, end, static_cast<std::uint8_t>(penc & 0x0f), 0)) return std::nullopt;
        } else return std::nullopt;  // an augmentation we do not know: its FDEs are skipped
    }
    return info;
}

// One CFI section read as raw entries.
struct CfiSection {
    Elf_Data* data = nullptr;
    std::uint64_t address = 0;  // sh_addr
    bool eh_frame = false;
};

// One FDE's range and program: initial location, address range,
// augmentation data ('z'), then instructions up to the entry's end.
std::optional<FdeRange> fde_range(const CieInfo& cie, const Dwarf_FDE& fde, const std::uint8_t* base,
                                  const CfiSection& section) {
    const std::uint8_t* p = fde.start;
    const std::uint8_t* end = fde.end;
    if (!p || !end || p < base || end > base + section.data->d_size || end < p) return std::nullopt;
    auto lo = read_encoded(p, end, cie.encoding, section.address + (p - base));
    auto range = read_encoded(p, end, static_cast<std::uint8_t>(cie.encoding & 0x0f), 0);
    if (!lo || !range || *range == 0 || *lo + *range < *lo || *lo + *range > UINT32_MAX) return std::nullopt;
    if (cie.augmentation_data) {
        auto n = read_encoded(p, end, DW_EH_PE_uleb128, 0);
        if (!n || *n > static_cast<std::uint64_t>(end - p)) return std::nullopt;
        p += *n;
    }
    FdeRange out{*lo, *lo + *range, *lo, cie.program};
    out.program.fde_begin = p;
    out.program.fde_end = end;
    return out;
}

// Every FDE's [lo, hi) in `section`, bounded by `limits`.
Result<void> list_fdes(const unsigned char* ident, const CfiSection& section, const UnwindLimits& limits,
                       std::vector<FdeRange>& out, UnwindTable& table) {
    std::unordered_map<Dwarf_Off, std::optional<CieInfo>> cies;
    const auto* base = static_cast<const std::uint8_t*>(section.data->d_buf);
    Dwarf_Off offset = 0;
    for (std::uint64_t entries = 0;; ++entries) {
        if (entries > 2 * limits.max_fdes)
            return Error("more than " + std::to_string(limits.max_fdes) + " FDEs; the image is refused");
        Dwarf_Off next = 0;
        Dwarf_CFI_Entry entry;
        int r = dwarf_next_cfi(ident, section.data, section.eh_frame, offset, &next, &entry);
        if (r != 0) break;  // end of the section, or an entry libdw cannot read: the rest is ignored
        if (next <= offset) break;
        offset = next;
        if (entry.CIE_id == DW_CIE_ID_64) continue;
        auto [it, inserted] = cies.try_emplace(entry.fde.CIE_pointer);
        if (inserted) {
            Dwarf_Off ignored = 0;
            Dwarf_CFI_Entry cie;
            if (dwarf_next_cfi(ident, section.data, section.eh_frame, entry.fde.CIE_pointer, &ignored, &cie) == 0 &&
                cie.CIE_id == DW_CIE_ID_64)
                it->second = cie_info(cie.cie, section.eh_frame);
        }
        ++table.fdes;
        auto fde = it->second ? fde_range(*it->second, entry.fde, base, section) : std::nullopt;
        if (!fde) {
            ++table.skipped_fdes;
            continue;
        }
        if (out.size() >= limits.max_fdes)
            return Error("more than " + std::to_string(limits.max_fdes) + " FDEs; the image is refused");
        out.push_back(*fde);
    }
    return ok();
}

struct Budget {
    const UnwindLimits& limits;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    std::uint64_t steps = 0;

    std::uint64_t next_check = 1024;

    // `n` more CFI instructions were run.
    Result<void> charge(std::uint64_t n) {
        steps += n;
        if (steps > limits.max_steps)
            return Error("more than " + std::to_string(limits.max_steps) + " CFI instructions to run; the image is refused");
        if (steps < next_check) return ok();
        next_check = steps + 1024;
        if (limits.cancel && limits.cancel->load()) return Error("cancelled");
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limits.max_seconds)
            return Error("building took over " + std::to_string(static_cast<int>(limits.max_seconds)) +
                         " s; the image is refused");
        return ok();
    }
};

// The rows of one FDE range [lo, hi), then a NONE row at hi: its program
// runs once (linear in its length).
Result<void> rows_of(const FdeRange& fde, Budget& budget, UnwindTable& table) {
    const auto steps = detail::run_cfi_program(fde.program, fde.start, fde.lo, fde.hi, table.rows, table.invalid_rows);
    ECPI_RETURN_IF_ERROR(budget.charge(steps + 1));
    if (table.rows.size() > budget.limits.max_rows)
        return Error("more than " + std::to_string(budget.limits.max_rows) + " unwind rows; the image is refused");
    return ok();
}

struct ElfFile {
    int fd = -1;
    Elf* elf = nullptr;
    ~ElfFile() {
        if (elf) elf_end(elf);
        if (fd >= 0) ::close(fd);
    }
};

Result<void> open_elf(const std::filesystem::path& file, const UnwindLimits& limits, ElfFile& f) {
    f.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f.fd < 0) return Error::from_errno(errno, "opening " + file.string());
    struct stat st{};
    if (fstat(f.fd, &st) != 0) return Error::from_errno(errno, "reading " + file.string());
    if (!S_ISREG(st.st_mode)) return Error(file.string() + " is not a regular file");
    if (static_cast<std::uint64_t>(st.st_size) > limits.max_file_bytes)
        return Error(file.string() + " is larger than " + std::to_string(limits.max_file_bytes >> 20) +
                     " MB; its unwind table is refused");
    elf_version(EV_CURRENT);
    f.elf = elf_begin(f.fd, ELF_C_READ_MMAP, nullptr);
    if (!f.elf || elf_kind(f.elf) != ELF_K_ELF) return Error(file.string() + " is not an ELF file");
    return ok();
}

// The bytes of a CFI section, decompressed where compressed (a
// .debug_frame may be), within the section limit.
Result<Elf_Data*> section_data(Elf_Scn* scn, const GElf_Shdr& shdr, const char* name, const UnwindLimits& limits) {
    auto too_large = [&] {
        return Error(std::string(name) + " is larger than " + std::to_string(limits.max_section_bytes >> 20) +
                     " MB; the image is refused");
    };
    if (shdr.sh_size > limits.max_section_bytes) return too_large();
    if ((shdr.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
        return Error(std::string(name) + " cannot be decompressed: " + elf_errmsg(-1));
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data && data->d_size > limits.max_section_bytes) return too_large();
    return data;
}

// The image's CFI sections: .eh_frame first, then .debug_frame.
Result<std::vector<CfiSection>> cfi_sections(ElfFile& f, const UnwindLimits& limits) {
    std::size_t shstrndx = 0;
    if (elf_getshdrstrndx(f.elf, &shstrndx) != 0) return Error("no section name table");
    std::vector<CfiSection> out;
    for (Elf_Scn* scn = elf_nextscn(f.elf, nullptr); scn; scn = elf_nextscn(f.elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS) continue;
        const char* name = elf_strptr(f.elf, shstrndx, shdr.sh_name);
        if (!name) continue;
        bool eh = std::strcmp(name, ".eh_frame") == 0;
        if (!eh && std::strcmp(name, ".debug_frame") != 0) continue;
        ECPI_ASSIGN_OR_RETURN(Elf_Data* data, section_data(scn, shdr, name, limits));
        if (data && data->d_buf) out.push_back({data, eh ? shdr.sh_addr : 0, eh});
    }
    std::stable_partition(out.begin(), out.end(), [](const CfiSection& c) { return c.eh_frame; });
    return out;
}

// FDEs sorted by address; an FDE overlapping an earlier one keeps only its tail.
void sort_ranges(std::vector<FdeRange>& fdes) {
    std::stable_sort(fdes.begin(), fdes.end(), [](const FdeRange& a, const FdeRange& b) { return a.lo < b.lo; });
    std::uint64_t covered = 0;
    std::vector<FdeRange> kept;
    for (auto fde : fdes) {
        fde.lo = std::max(fde.lo, covered);
        if (fde.lo >= fde.hi) continue;
        covered = fde.hi;
        kept.push_back(fde);
    }
    fdes = std::move(kept);
}

}  // namespace

Result<UnwindTable> build_unwind_table(const std::filesystem::path& file, const UnwindLimits& limits) {
    ElfFile f;
    ECPI_RETURN_IF_ERROR(open_elf(file, limits, f));
    ECPI_ASSIGN_OR_RETURN(auto sections, cfi_sections(f, limits));
    const unsigned char* ident = reinterpret_cast<const unsigned char*>(elf_getident(f.elf, nullptr));
    if (!ident || ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB)
        return Error(file.string() + " is not a little-endian 64-bit ELF file; its unwind table is refused");
    UnwindTable table;
    std::vector<FdeRange> fdes;
    for (const auto& section : sections) {
        auto r = list_fdes(ident, section, limits, fdes, table);
        if (!r.ok()) return r.error().with_context(file.string());
    }
    sort_ranges(fdes);
    Budget budget{limits};
    for (const auto& fde : fdes) {
        auto r = rows_of(fde, budget, table);
        if (!r.ok()) return r.error().with_context(file.string());
    }
    return table;
}

std::optional<UnwindRow> find_unwind_row(const std::vector<UnwindRow>& rows, std::uint64_t vaddr) {
    auto it = std::upper_bound(rows.begin(), rows.end(), vaddr,
                               [](std::uint64_t v, const UnwindRow& r) { return v < r.pc; });
    if (it == rows.begin()) return std::nullopt;
    return *(it - 1);
}

void to_abi(const UnwindRow& row, ecpi_unwind_row& out) {
    out.pc = row.pc;
    out.kind = row.kind;
    out.rbp_offset8 = row.rbp_offset8;
    out.cfa_offset8 = row.cfa_offset8;
}

UnwindPageIndex build_page_index(const std::vector<UnwindRow>& rows) {
    UnwindPageIndex index;
    if (rows.empty()) return index;
    index.base_page = rows.front().pc >> ECPI_UNWIND_PAGE_SHIFT;
    const std::uint32_t pages = (rows.back().pc >> ECPI_UNWIND_PAGE_SHIFT) - index.base_page + 1;
    index.below_page.resize(std::size_t{pages} + 1);
    std::uint32_t row = 0;
    for (std::uint32_t k = 0; k <= pages; ++k) {
        const std::uint64_t start = (std::uint64_t{index.base_page} + k) << ECPI_UNWIND_PAGE_SHIFT;
        while (row < rows.size() && rows[row].pc < start) ++row;
        index.below_page[k] = row;
    }
    return index;
}

std::pair<std::uint32_t, std::uint32_t> page_search_range(const UnwindPageIndex& index, std::uint32_t rows,
                                                          std::uint32_t vaddr) {
    if (index.below_page.size() < 2) return {0, rows};
    const std::uint32_t page = vaddr >> ECPI_UNWIND_PAGE_SHIFT;
    const auto pages = static_cast<std::uint32_t>(index.below_page.size() - 1);
    if (page < index.base_page) return {0, 0};
    if (page - index.base_page >= pages) return {rows, rows};
    return {index.below_page[page - index.base_page], index.below_page[page - index.base_page + 1]};
}

}  // namespace ecpi::loader
