// The `ecpi cachesim` report (JSON schema "ecpi.cachesim", docs/json-schema.md):
// per level references, misses, miss rate and its error bound; misses per
// procedure, per source line and per data object (heap objects by
// allocation site, globals by ELF symbol, stacks by thread); MemSpy's
// bottleneck view (the share of all misses the top entries hold).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/analyze/cachesim/memtrace_trace.h"

namespace ecpi::analyze {

struct CachesimReportInput {
    std::vector<TraceModule> modules;
    UnknownEstimate estimate = UnknownEstimate::kStale;
    std::string source;               // "runtime", "lackey" or "trace"
    bool pc_is_return_address = true; // runtime pcs follow the callback's call instruction
    std::vector<std::string> command;
    std::string caches_source;
    std::uint64_t sample = 1;         // --sample 1/N
    std::uint64_t window = 0;         // --window
    std::uint64_t seed = 0;
    bool objects_available = true;    // false: the source has no allocation events
    nlohmann::json program;           // exit status, seconds, runtime counters (object or null)
    std::vector<std::string> notes;   // what the reader must know (dropped records, ...)
    // Combined sampling (MemSpy 7.3): the levels marked in set_levels are
    // reported from `sets` (every reference to its sampled sets, no
    // windows), the others from the time-sampled simulator. Procedures,
    // lines and objects come from the time-sampled one.
    const CacheSimulator* sets = nullptr;
    std::vector<bool> set_levels;
};

nlohmann::json cachesim_report_json(const CacheSimulator& sim, const CachesimReportInput& input);
// Text for people; `limit` rows per table (0: all).
std::string render_cachesim_text(const nlohmann::json& report, std::size_t limit);

}  // namespace ecpi::analyze
