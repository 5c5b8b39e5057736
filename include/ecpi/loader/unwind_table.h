// Unwind tables for the sampler's CFI walk (issue 29): one image's
// .eh_frame (and .debug_frame where present) compiled into sorted compact
// rows (ecpi_unwind_row in bpf/ecpi_abi.h) that a BPF program can search and
// evaluate: CFA = rsp+k or rbp+k, where the caller's rbp was saved, the
// return address at CFA-8, END where CFI says the return address is
// undefined (the thread's outermost frame), INVALID for anything else.
// Building is bounded in time and memory: the input is untrusted.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ecpi/result.h"

struct ecpi_unwind_row;

namespace ecpi::loader {

// One row as user space sees it (the same fields as ecpi_unwind_row).
struct UnwindRow {
    std::uint32_t pc = 0;           // ELF virtual address where the row starts
    std::uint8_t kind = 0;          // enum ecpi_unwind_kind
    std::int8_t rbp_offset8 = 0;    // 0: unchanged; else saved at CFA + 8 * rbp_offset8
    std::uint16_t cfa_offset8 = 0;  // CFA = reg + 8 * cfa_offset8 (PLT: the (pc & 15) threshold)
    bool operator==(const UnwindRow&) const = default;
};

struct UnwindLimits {
    std::uint64_t max_file_bytes = 4ull << 30;     // images larger than this are refused
    std::uint64_t max_section_bytes = 64u << 20;   // .eh_frame/.debug_frame larger than this: refused
    std::uint64_t max_fdes = 1u << 20;
    std::uint64_t max_rows = 4u << 20;
    std::uint64_t max_steps = 16u << 20;           // libdw row look-ups, all FDEs together
    double max_seconds = 20;
    const std::atomic<bool>* cancel = nullptr;     // when set and true, the build stops
};

struct UnwindTable {
    std::vector<UnwindRow> rows;    // sorted by pc, adjacent rows differ
    std::uint64_t fdes = 0;         // FDEs read (both sections)
    std::uint64_t invalid_rows = 0; // rows the sampler cannot evaluate
    std::uint64_t skipped_fdes = 0; // FDEs that could not be decoded (bad CIE, range out of bounds)
};

// Builds the table of one ELF file. An image with no CFI yields an empty
// table; an image over a limit is refused with an Error naming the limit.
[[nodiscard]] Result<UnwindTable> build_unwind_table(const std::filesystem::path& file,
                                                     const UnwindLimits& limits = {});

// The row covering `vaddr` (nullopt below the first row). A NONE row means
// the address has no CFI.
std::optional<UnwindRow> find_unwind_row(const std::vector<UnwindRow>& rows, std::uint64_t vaddr);

// The row in the sampler's layout.
void to_abi(const UnwindRow& row, ecpi_unwind_row& out);

// A table's page index (bpf/ecpi_abi.h, ecpi_unwind_table): below_page[k] is
// the number of rows whose pc is below the start of page base_page + k
// (pages of 1 << ECPI_UNWIND_PAGE_SHIFT bytes), for k in 0 .. pages; the
// sampler searches only the rows between two neighbouring entries.
struct UnwindPageIndex {
    std::uint32_t base_page = 0;
    std::vector<std::uint32_t> below_page;  // pages + 1 entries; empty for an empty table
};
UnwindPageIndex build_page_index(const std::vector<UnwindRow>& rows);

// Rows [first, last) among which the sampler searches for `vaddr` (its
// page_range): the last row at or below vaddr is the one before the first
// row above it in that range.
std::pair<std::uint32_t, std::uint32_t> page_search_range(const UnwindPageIndex& index, std::uint32_t rows,
                                                          std::uint32_t vaddr);

}  // namespace ecpi::loader
