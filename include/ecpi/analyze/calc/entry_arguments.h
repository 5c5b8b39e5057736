// Constants a procedure's callers pass it decide its entry block's branch
// (issue 36).
//
// A kernel guarded by `if (n <= 0) return` (GCC: `test esi, esi; jle`) has
// an entry branch no sample decides: its block is a few cycles long and the
// early return is unsampled, so the flow may send any share of the entries
// there for almost nothing (an unsampled execution costs its best-case
// cycles over the period: 4,428 of branchy's 15,991 calls of `classify`
// cost the flow 0.01 samples, and its loop kept 28% too few iterations).
// Where every caller is known (run_calc's entries from callers, exact) and
// each call's block sets the argument register to the same constant before
// the call (`mov esi, 0x2000; call classify`), the branch is decided: the
// way the constant does not take never runs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"

namespace ecpi::analyze {

// A general-purpose register (hardware number) and the value it holds in full.
struct ArgumentValue {
    int gp = -1;
    std::uint64_t value = 0;
    bool operator==(const ArgumentValue&) const = default;
};

// The registers the call at instruction `call` (a CFG instruction index)
// holds constants in: those whose last write before it in its block, and
// after the block's previous call, is a move of an immediate (32-bit moves
// zero-extend) or a zeroing idiom.
[[nodiscard]] std::vector<ArgumentValue> call_arguments(const Cfg& cfg, std::uint32_t call);

// The values every call site passes alike (sites: each one's constants);
// none when there are no sites.
[[nodiscard]] std::vector<ArgumentValue> common_arguments(std::span<const std::vector<ArgumentValue>> sites);

// The entry block's out edge (a CFG edge index) that never runs when the
// procedure is entered with `arguments`: its closing compare reads only
// registers they give and that the block does not write before it.
[[nodiscard]] std::optional<std::uint32_t> ruled_out_entry_edge(const Cfg& cfg,
                                                                std::span<const ArgumentValue> arguments);

}  // namespace ecpi::analyze
