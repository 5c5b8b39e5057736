// A jump table's odds from register snapshots (issue 36 item 1: "switch
// tables split by the snapshot values of the index register").
//
// A snapshot taken in the block that ends in a recovered table jump, before
// the table's load, holds what the load's index will be once the rest of
// the block has run: the block's remaining instructions are replayed on the
// snapshot's registers (moves, adds, shifts, masks, multiplies, lea; any
// other write makes its register unknown) and the index read at the load.
// The table entry it selects is the case that execution went to. Over the
// block's snapshots, each case's share estimates its edge's share of the
// block's count, where time samples alone cannot split a dispatcher whose
// mispredicted jump stalls in the cases (DCPI 6.1: samples only count time).
//
// Like branch_odds.h's snapshots these are time-weighted: unbiased as long
// as the time spent before the jump does not depend on the case taken.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// General-purpose registers as far as replaying a few instructions knows them.
struct KnownRegisters {
    std::array<std::uint64_t, 16> value{};
    std::array<bool, 16> known{};
};

// Replays one instruction: its register result where it is one of the
// modelled forms, else every general-purpose register it writes unknown.
void replay(const DecodedInstruction& d, KnownRegisters& r);

// A block ending in a recovered table jump: its table, the instruction that
// reads the table's entry, and the register that indexes it there.
struct SwitchSite {
    const JumpTable* table = nullptr;
    std::uint32_t load = 0;          // CFG index of the table's load
    std::uint16_t index = 0;         // canonical id of its index register
};

// Per block ending in a recovered table jump whose load is found.
std::map<std::uint32_t, SwitchSite> switch_sites(const Cfg& cfg);

// The switch edge out of `site`'s block that table entry `entry` selects,
// or 0xffffffff when no edge leads to it.
std::uint32_t switch_edge(const Cfg& cfg, std::uint32_t block, const SwitchSite& site, std::uint64_t entry);

// The CFG index of the instruction that starts at `address`, if one does.
std::optional<std::uint32_t> instruction_at(const Cfg& cfg, std::uint64_t address);

// The value of a general-purpose register (canonical id) as far as known.
std::optional<std::uint64_t> known_value(const KnownRegisters& r, std::uint16_t canonical);

struct SwitchOdds {
    std::uint32_t block = 0;                 // the block ending in the table jump
    std::vector<std::uint32_t> edges;        // its switch edges (CFG edge indices)
    std::vector<std::uint32_t> counts;       // per edge: snapshots whose index selects it
    std::uint32_t total = 0;                 // snapshots that decided the case
    // The index is loaded from memory in the block itself (an interpreter's
    // `movzx eax, byte [pc]` before the table's load): only the snapshots
    // between that load and the table's decide, and each stands for the
    // short wait after the case before it, so a case's share is the share
    // of time after its predecessors, not of executions (issue 36: one
    // interpreter's case chosen by 33% of them ran 14% of the dispatches).
    // Such odds split nothing: the cases' counts come from their samples,
    // each case a snapshot chose held to a floor (switch_undecided; the
    // flow's timed_case_floor).
    bool index_from_memory = false;
};

// Why odds `o` decide nothing (nullptr when they do).
const char* switch_undecided(const SwitchOdds& o);

// Per block ending in a recovered jump table with at least one deciding
// snapshot. Arguments as branch_odds().
std::vector<SwitchOdds> switch_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                                    std::span<const std::uint32_t> candidates);

}  // namespace ecpi::analyze
