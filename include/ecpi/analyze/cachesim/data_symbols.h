// Global and static variables by address: the cache report names a data
// object by the variable holding it, and the simulator, given them before
// the run, counts a miss under that variable instead of under its line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/analyze/cachesim/memtrace_trace.h"

namespace ecpi::analyze {

struct DataSymbol {
    std::uint64_t start = 0, end = 0;  // ELF addresses
    std::string name;
};

// STT_OBJECT symbols with a size (globals and statics), sorted by start,
// and the first PT_LOAD's vaddr - offset (for modules known only by their
// mapping). An unreadable file leaves both alone.
void read_elf_data(const std::string& path, std::vector<DataSymbol>& out, std::optional<std::uint64_t>& load_delta);

// The load bias of a module: its recorded one, or its mapping's start less
// the ELF's first PT_LOAD vaddr - offset.
std::uint64_t module_bias(const TraceModule& m, std::optional<std::uint64_t> load_delta);

// The variables of a set of loaded modules, by runtime address.
class DataSymbolIndex {
public:
    explicit DataSymbolIndex(const std::vector<TraceModule>& modules);
    // The runtime range [start, end) of the variable holding `address`, if
    // a module's symbol table names one.
    [[nodiscard]] std::optional<std::pair<std::uint64_t, std::uint64_t>> range_of(std::uint64_t address) const;

private:
    struct Module {
        std::uint64_t start = 0, end = 0, bias = 0;
        std::vector<DataSymbol> data;
    };
    std::vector<Module> modules_;
};

// Keys the misses into the modules' variables by variable in `sim` and
// `sets` (CacheSimulator::key_statics_by), before the first reference.
void key_statics_by_symbols(const std::vector<TraceModule>& modules, CacheSimulator& sim, CacheSimulator* sets);

}  // namespace ecpi::analyze
