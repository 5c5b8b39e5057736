// .eh_frame FDE extents (contract in include/ecpi/analyze/symbols/eh_frame.h).
// libdw's dwarf_next_cfi frames the entries and parses each CIE; the pointer
// encodings of initial_location and address_range (DWARF for x86-64 and
// the LSB's .eh_frame encodings) are decoded here.
#include "ecpi/analyze/symbols/eh_frame.h"

#include <elf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

namespace ecpi::analyze {

namespace {

constexpr std::uint8_t kEncOmit = 0xff;
constexpr std::uint8_t kEncIndirect = 0x80;
constexpr std::uint8_t kEncApplMask = 0x70;
constexpr std::uint8_t kEncPcrel = 0x10;

using Bytes = const std::uint8_t*;

std::optional<std::uint64_t> read_leb(Bytes& p, Bytes end, bool is_signed) {
    std::uint64_t value = 0;
    unsigned shift = 0;
    while (p < end && shift < 64) {
        std::uint8_t byte = *p++;
        value |= std::uint64_t{byte & 0x7fu} << shift;
        shift += 7;
        if ((byte & 0x80) == 0) {
            if (is_signed && shift < 64 && (byte & 0x40) != 0) value |= ~std::uint64_t{0} << shift;
            return value;
        }
    }
    return std::nullopt;  // ran off the entry, or more than 64 bits
}

template <typename T>
std::optional<std::uint64_t> read_fixed(Bytes& p, Bytes end) {
    if (end - p < static_cast<std::ptrdiff_t>(sizeof(T))) return std::nullopt;
    T v;
    std::memcpy(&v, p, sizeof v);  // little-endian images only (checked by the caller)
    p += sizeof v;
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
}

// The value part of a DW_EH_PE encoding (low nibble), not yet applied.
std::optional<std::uint64_t> read_value(std::uint8_t enc, Bytes& p, Bytes end, unsigned address_size) {
    switch (enc & 0x0f) {
        case 0x00: return address_size == 8 ? read_fixed<std::uint64_t>(p, end)
                                            : read_fixed<std::uint32_t>(p, end);
        case 0x01: return read_leb(p, end, false);
        case 0x02: return read_fixed<std::uint16_t>(p, end);
        case 0x03: return read_fixed<std::uint32_t>(p, end);
        case 0x04: return read_fixed<std::uint64_t>(p, end);
        case 0x09: return read_leb(p, end, true);
        case 0x0a: return read_fixed<std::int16_t>(p, end);
        case 0x0b: return read_fixed<std::int32_t>(p, end);
        case 0x0c: return read_fixed<std::int64_t>(p, end);
        default: return std::nullopt;
    }
}

// An encoded pointer at `field_addr`: absolute or pc-relative (the two that
// .eh_frame uses for initial_location); anything else is not decoded.
std::optional<std::uint64_t> read_pointer(std::uint8_t enc, Bytes& p, Bytes end, unsigned address_size,
                                          std::uint64_t field_addr) {
    if (enc == kEncOmit || (enc & kEncIndirect) != 0) return std::nullopt;
    auto value = read_value(enc, p, end, address_size);
    if (!value) return std::nullopt;
    switch (enc & kEncApplMask) {
        case 0x00: return *value;
        case kEncPcrel: return field_addr + *value;
        default: return std::nullopt;
    }
}

// The FDE pointer encoding a CIE declares ('R' in a "z..." augmentation;
// absptr without augmentation); nullopt for augmentations not understood.
std::optional<std::uint8_t> fde_encoding(const Dwarf_CIE& cie, unsigned address_size) {
    const char* aug = cie.augmentation;
    if (aug == nullptr) return std::nullopt;
    if (aug[0] == '\0') return std::uint8_t{0};
    if (aug[0] != 'z' || cie.augmentation_data == nullptr) return std::nullopt;
    Bytes p = cie.augmentation_data;
    Bytes end = p + cie.augmentation_data_size;
    for (const char* c = aug + 1; *c != '\0'; ++c) {
        switch (*c) {
            case 'R':
                if (p >= end) return std::nullopt;
                return *p;
            case 'L': ++p; break;
            case 'P': {
                if (p >= end) return std::nullopt;
                std::uint8_t penc = *p++;
                if (penc != kEncOmit && !read_value(penc, p, end, address_size)) return std::nullopt;
                break;
            }
            case 'S': case 'B': break;
            default: return std::nullopt;
        }
    }
    return std::uint8_t{0};  // "z" without R: absptr
}

// Sorted, inside one code range, no overlaps (the first by start wins).
FdeScan keep_plausible(std::vector<CodeRange> raw, const std::vector<CodeRange>& code, FdeScan scan) {
    std::sort(raw.begin(), raw.end());
    for (const auto& r : raw) {
        bool inside = std::any_of(code.begin(), code.end(), [&](const CodeRange& c) {
            return r.start >= c.start && r.end <= c.end;
        });
        if (!inside || (!scan.functions.empty() && r.start < scan.functions.back().end)) {
            ++scan.refused;
            continue;
        }
        scan.functions.push_back(r);
    }
    return scan;
}

}  // namespace

FdeScan scan_eh_frame(const unsigned char* e_ident, const void* bytes, std::size_t size,
                      std::uint64_t section_addr, const std::vector<CodeRange>& code) {
    FdeScan scan;
    if (bytes == nullptr || size == 0 || e_ident[EI_DATA] != ELFDATA2LSB) return scan;
    const unsigned address_size = e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;
    Elf_Data data{};
    data.d_buf = const_cast<void*>(bytes);
    data.d_size = size;
    data.d_type = ELF_T_BYTE;
    auto base = static_cast<Bytes>(bytes);

    std::map<Dwarf_Off, std::optional<std::uint8_t>> cie_encodings;
    auto encoding_of = [&](Dwarf_Off cie_offset) -> std::optional<std::uint8_t> {
        auto [it, inserted] = cie_encodings.try_emplace(cie_offset);
        if (!inserted) return it->second;
        Dwarf_CFI_Entry cie;
        Dwarf_Off next = 0;
        if (dwarf_next_cfi(e_ident, &data, true, cie_offset, &next, &cie) == 0 && dwarf_cfi_cie_p(&cie))
            it->second = fde_encoding(cie.cie, address_size);
        return it->second;
    };

    std::vector<CodeRange> raw;
    Dwarf_Off offset = 0;
    std::size_t fdes = 0;
    while (offset < size) {
        Dwarf_CFI_Entry entry;
        Dwarf_Off next = 0;
        int rc = dwarf_next_cfi(e_ident, &data, true, offset, &next, &entry);
        if (rc == 1) break;  // the end (or a zero terminator)
        if (rc != 0 || next <= offset || next > size) {
            scan.stopped = true;
            break;
        }
        offset = next;
        if (dwarf_cfi_cie_p(&entry)) continue;
        if (++fdes > kMaxFdes) {
            scan.stopped = true;
            break;
        }
        auto enc = encoding_of(entry.fde.CIE_pointer);
        Bytes p = entry.fde.start;
        Bytes end = entry.fde.end;
        std::optional<std::uint64_t> start, length;
        if (enc) start = read_pointer(*enc, p, end, address_size, section_addr + static_cast<std::uint64_t>(p - base));
        if (start) length = read_value(*enc, p, end, address_size);
        if (!start || !length || *length == 0 || *start + *length <= *start) {
            ++scan.refused;
            continue;
        }
        raw.push_back(CodeRange{*start, *start + *length});
    }
    return keep_plausible(std::move(raw), code, std::move(scan));
}

}  // namespace ecpi::analyze
