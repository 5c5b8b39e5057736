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

#include "ecpi_abi.h"

namespace ecpi::loader {

static_assert(sizeof(ecpi_unwind_row) == 8, "ABI: ecpi_unwind_row");

namespace {

// x86-64 DWARF register numbers.
constexpr Dwarf_Word kRegRbp = 6;
constexpr Dwarf_Word kRegRsp = 7;
constexpr int kRegRip = 16;  // the return-address column

// One FDE's address range.
struct FdeRange {
    std::uint64_t lo = 0, hi = 0;
    Dwarf_CFI* cfi = nullptr;  // which section's CFI describes it
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

// The FDE pointer encoding a CIE's augmentation ('zR...') declares.
std::optional<std::uint8_t> fde_encoding(const Dwarf_CIE& cie, bool eh_frame) {
    if (!eh_frame) return DW_EH_PE_absptr;
    const char* aug = cie.augmentation;
    if (!aug || aug[0] != 'z') return aug && aug[0] == '\0' ? std::optional<std::uint8_t>(DW_EH_PE_absptr) : std::nullopt;
    const std::uint8_t* p = cie.augmentation_data;
    const std::uint8_t* end = p ? p + cie.augmentation_data_size : nullptr;
    std::uint8_t enc = DW_EH_PE_absptr;
    for (const char* c = aug + 1; *c; ++c) {
        if (*c == 'S' || *c == 'B') continue;
        if (!p || p >= end) return std::nullopt;
        if (*c == 'R') enc = *p++;
        else if (*c == 'L') ++p;
        else if (*c == 'P') {
            std::uint8_t penc = *p++;
            if (!read_encoded(p, end, static_cast<std::uint8_t>(penc & 0x0f), 0)) return std::nullopt;
        } else return std::nullopt;  // an augmentation we do not know: its FDEs are skipped
    }
    return enc;
}

// One CFI section read as raw entries.
struct CfiSection {
    Elf_Data* data = nullptr;
    std::uint64_t address = 0;  // sh_addr
    bool eh_frame = false;
    Dwarf_CFI* cfi = nullptr;
};

// Every FDE's [lo, hi) in `section`, bounded by `limits`.
Result<void> list_fdes(const unsigned char* ident, const CfiSection& section, const UnwindLimits& limits,
                       std::vector<FdeRange>& out, UnwindTable& table) {
    std::unordered_map<Dwarf_Off, std::optional<std::uint8_t>> cie_encodings;
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
        auto [it, inserted] = cie_encodings.try_emplace(entry.fde.CIE_pointer);
        if (inserted) {
            Dwarf_Off ignored = 0;
            Dwarf_CFI_Entry cie;
            if (dwarf_next_cfi(ident, section.data, section.eh_frame, entry.fde.CIE_pointer, &ignored, &cie) == 0 &&
                cie.CIE_id == DW_CIE_ID_64)
                it->second = fde_encoding(cie.cie, section.eh_frame);
        }
        ++table.fdes;
        const std::uint8_t* p = entry.fde.start;
        std::optional<std::uint64_t> lo, range;
        if (it->second && p >= base && entry.fde.end <= base + section.data->d_size) {
            lo = read_encoded(p, entry.fde.end, *it->second, section.address + (p - base));
            range = read_encoded(p, entry.fde.end, static_cast<std::uint8_t>(*it->second & 0x0f), 0);
        }
        if (!lo || !range || *range == 0 || *lo + *range < *lo || *lo + *range > UINT32_MAX) {
            ++table.skipped_fdes;
            continue;
        }
        if (out.size() >= limits.max_fdes)
            return Error("more than " + std::to_string(limits.max_fdes) + " FDEs; the image is refused");
        out.push_back({*lo, *lo + *range, section.cfi});
    }
    return ok();
}

bool is_offset_from_cfa(const Dwarf_Op* ops, std::size_t nops, const Dwarf_Op* mem, std::int64_t& offset) {
    if (ops != mem || nops == 0 || ops[0].atom != DW_OP_call_frame_cfa) return false;
    if (nops == 1) {
        offset = 0;
        return true;
    }
    if (nops != 2 || ops[1].atom != DW_OP_plus_uconst) return false;
    offset = static_cast<std::int64_t>(ops[1].number);
    return true;
}

// The PLT's CFA expression as ld writes it:
// breg7 8; breg16 0; lit15; and; litK; ge; lit3; shl; plus.
std::optional<std::uint16_t> plt_threshold(const Dwarf_Op* ops, std::size_t nops) {
    if (nops != 9) return std::nullopt;
    if (ops[0].atom != DW_OP_breg7 || ops[0].number != 8) return std::nullopt;
    if (ops[1].atom != DW_OP_breg16 || ops[1].number != 0) return std::nullopt;
    if (ops[2].atom != DW_OP_lit15 || ops[3].atom != DW_OP_and) return std::nullopt;
    if (ops[4].atom < DW_OP_lit0 || ops[4].atom > DW_OP_lit15 || ops[5].atom != DW_OP_ge) return std::nullopt;
    if (ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl || ops[8].atom != DW_OP_plus) return std::nullopt;
    return static_cast<std::uint16_t>(ops[4].atom - DW_OP_lit0);
}

// The CFA part of a row; false when the sampler cannot evaluate it.
bool classify_cfa(Dwarf_Frame* frame, UnwindRow& row) {
    Dwarf_Op* ops = nullptr;
    std::size_t nops = 0;
    if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops == 0) return false;
    if (auto k = plt_threshold(ops, nops)) {
        row.kind = ECPI_UNWIND_PLT;
        row.cfa_offset8 = *k;
        return true;
    }
    if (nops != 1 || ops[0].atom != DW_OP_bregx || (ops[0].number != kRegRsp && ops[0].number != kRegRbp))
        return false;
    auto offset = static_cast<std::int64_t>(ops[0].number2);
    if (offset < 0 || offset % 8 != 0 || offset / 8 > UINT16_MAX) return false;
    row.kind = ops[0].number == kRegRsp ? ECPI_UNWIND_CFA_RSP : ECPI_UNWIND_CFA_RBP;
    row.cfa_offset8 = static_cast<std::uint16_t>(offset / 8);
    return true;
}

// The rule of one row in the sampler's terms.
UnwindRow classify(Dwarf_Frame* frame, std::uint64_t pc) {
    UnwindRow row;
    row.pc = static_cast<std::uint32_t>(pc);
    row.kind = ECPI_UNWIND_INVALID;
    bool signal = false;
    Dwarf_Addr start = 0, end = 0;
    if (dwarf_frame_info(frame, &start, &end, &signal) < 0 || signal) return row;
    Dwarf_Op mem[3];
    Dwarf_Op* ops = nullptr;
    std::size_t nops = 0;
    if (dwarf_frame_register(frame, kRegRip, mem, &ops, &nops) != 0) return row;
    if (nops == 0 && ops == mem) {
        row.kind = ECPI_UNWIND_END;
        return row;
    }
    std::int64_t ra_offset = 0;
    if (!is_offset_from_cfa(ops, nops, mem, ra_offset) || ra_offset != -8) return row;
    UnwindRow rule = row;
    if (!classify_cfa(frame, rule)) return row;
    if (dwarf_frame_register(frame, static_cast<int>(kRegRbp), mem, &ops, &nops) != 0) return row;
    if (nops != 0) {  // nops == 0: same value or undefined, the sampler keeps rbp
        std::int64_t offset = 0;
        if (!is_offset_from_cfa(ops, nops, mem, offset) || offset >= 0 || offset % 8 != 0 || offset / 8 < INT8_MIN)
            return row;
        rule.rbp_offset8 = static_cast<std::int8_t>(offset / 8);
    }
    return rule;
}

struct Budget {
    const UnwindLimits& limits;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    std::uint64_t steps = 0;

    Result<void> step() {
        if (++steps > limits.max_steps)
            return Error("more than " + std::to_string(limits.max_steps) + " CFI rows to evaluate; the image is refused");
        if ((steps & 1023) == 0 && limits.cancel && limits.cancel->load()) return Error("cancelled");
        if ((steps & 1023) == 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limits.max_seconds)
            return Error("building took over " + std::to_string(static_cast<int>(limits.max_seconds)) +
                         " s; the image is refused");
        return ok();
    }
};

void append(std::vector<UnwindRow>& rows, UnwindRow row) {
    if (!rows.empty() && rows.back().pc == row.pc) rows.pop_back();
    if (!rows.empty()) {
        const UnwindRow& last = rows.back();
        if (last.kind == row.kind && last.rbp_offset8 == row.rbp_offset8 && last.cfa_offset8 == row.cfa_offset8)
            return;
    }
    rows.push_back(row);
}

// The rows of one FDE range [lo, hi), then a NONE row at hi.
Result<void> rows_of(const FdeRange& fde, Budget& budget, UnwindTable& table) {
    std::uint64_t pc = fde.lo;
    while (pc < fde.hi) {
        ECPI_RETURN_IF_ERROR(budget.step());
        Dwarf_Frame* frame = nullptr;
        if (dwarf_cfi_addrframe(fde.cfi, pc, &frame) != 0 || !frame) {
            append(table.rows, {static_cast<std::uint32_t>(pc), ECPI_UNWIND_INVALID, 0, 0});
            break;
        }
        Dwarf_Addr start = 0, end = 0;
        dwarf_frame_info(frame, &start, &end, nullptr);
        UnwindRow row = classify(frame, pc);
        std::free(frame);
        if (row.kind == ECPI_UNWIND_INVALID) ++table.invalid_rows;
        append(table.rows, row);
        if (end <= pc) break;  // libdw made no progress: the rest of the FDE stays as it is
        pc = end;
        if (table.rows.size() > budget.limits.max_rows)
            return Error("more than " + std::to_string(budget.limits.max_rows) + " unwind rows; the image is refused");
    }
    append(table.rows, {static_cast<std::uint32_t>(fde.hi), ECPI_UNWIND_NONE, 0, 0});
    return ok();
}

struct ElfFile {
    int fd = -1;
    Elf* elf = nullptr;
    Dwarf* dwarf = nullptr;
    Dwarf_CFI* eh_cfi = nullptr;
    ~ElfFile() {
        if (eh_cfi) dwarf_cfi_end(eh_cfi);
        if (dwarf) dwarf_end(dwarf);
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

// The image's CFI sections: .eh_frame first, then .debug_frame.
Result<std::vector<CfiSection>> cfi_sections(ElfFile& f, const UnwindLimits& limits) {
    std::size_t shstrndx = 0;
    if (elf_getshdrstrndx(f.elf, &shstrndx) != 0) return Error("no section name table");
    std::vector<CfiSection> out;
    Elf_Scn* debug_frame = nullptr;
    for (Elf_Scn* scn = elf_nextscn(f.elf, nullptr); scn; scn = elf_nextscn(f.elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS) continue;
        const char* name = elf_strptr(f.elf, shstrndx, shdr.sh_name);
        if (!name) continue;
        bool eh = std::strcmp(name, ".eh_frame") == 0;
        if (!eh && std::strcmp(name, ".debug_frame") != 0) continue;
        if (shdr.sh_size > limits.max_section_bytes)
            return Error(std::string(name) + " is larger than " + std::to_string(limits.max_section_bytes >> 20) +
                         " MB; the image is refused");
        if (!eh) {
            debug_frame = scn;
            continue;
        }
        f.eh_cfi = dwarf_getcfi_elf(f.elf);
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (f.eh_cfi && data && data->d_buf) out.push_back({data, shdr.sh_addr, true, f.eh_cfi});
    }
    if (debug_frame) {
        f.dwarf = dwarf_begin_elf(f.elf, DWARF_C_READ, nullptr);
        Dwarf_CFI* cfi = f.dwarf ? dwarf_getcfi(f.dwarf) : nullptr;
        Elf_Data* data = elf_getdata(debug_frame, nullptr);
        if (cfi && data && data->d_buf) out.push_back({data, 0, false, cfi});
    }
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

}  // namespace ecpi::loader
