// One FDE's call-frame instructions (after its CIE's initial ones) run once,
// start to end, into the sampler's rows (ecpi_unwind_row): linear in the
// FDE's length, where asking libdw row by row re-ran the program from the
// FDE's start for every row (quadratic; cc1plus took about a second).
// Only what the sampler evaluates is tracked: the CFA, rbp and the return
// address; anything else about them makes the row INVALID. Untrusted input:
// every read is bounded by the instruction bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "ecpi/loader/unwind_table.h"

namespace ecpi::loader::detail {

struct CfiProgram {
    const std::uint8_t* cie_begin = nullptr;  // the CIE's initial instructions
    const std::uint8_t* cie_end = nullptr;
    const std::uint8_t* fde_begin = nullptr;  // the FDE's instructions
    const std::uint8_t* fde_end = nullptr;
    std::uint64_t code_alignment = 1;
    std::int64_t data_alignment = -8;
    std::uint64_t return_register = 16;
    bool signal_frame = false;  // augmentation 'S': the kernel's sigreturn trampoline
};

// Appends the rows of [lo, hi) to `rows` (through `append`, which merges
// equal neighbours); the program starts at `start` <= lo (an FDE whose head
// overlaps an earlier one keeps only its tail). Returns the number of
// instructions run, for the caller's budget; INVALID rows are counted in
// `invalid_rows`.
std::uint64_t run_cfi_program(const CfiProgram& program, std::uint64_t start, std::uint64_t lo, std::uint64_t hi,
                              std::vector<UnwindRow>& rows, std::uint64_t& invalid_rows);

// Appends `row`, replacing a row at the same pc and dropping a row equal to the last.
void append_row(std::vector<UnwindRow>& rows, UnwindRow row);

}  // namespace ecpi::loader::detail
