// `ecpi prof`: DCPI's dcpiprof (Figure 1). Samples per procedure or per image,
// sorted by decreasing samples, one column per event.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

struct ProfOptions {
    enum class By { kProcedure, kImage } by = By::kProcedure;
    std::vector<std::string> events;          // empty: every event in the epoch
    std::optional<std::uint32_t> pid;         // only this process
    std::size_t limit = 0;                    // 0: no limit
};

struct ProfRow {
    std::string procedure;                    // "" when by image
    std::string image;                        // image path
    std::string build_id;
    std::map<std::string, std::uint64_t> samples;  // per event
    double percent = 0;                       // of the sort event's total
    double cumulative_percent = 0;
};

struct ProfReport {
    std::string database;                     // set by the caller (build_prof_report leaves it empty)
    std::string epoch;
    ProfOptions::By by = ProfOptions::By::kProcedure;
    std::optional<std::uint32_t> pid;         // the pid filter, if any; totals are then that process's
    std::string sort_event;                   // first event: rows are sorted by it
    std::vector<std::string> events;
    std::map<std::string, store::EventMeta> totals;  // per event: samples, unknown, lost, period
    std::vector<ProfRow> rows;
    std::vector<std::string> warnings;        // skipped files, unreadable images
    // Per event that kept registers (ecpi record --registers): snapshots
    // stored (all processes: what calc can pair) and one sample in `every`.
    struct Snapshots {
        std::uint64_t stored = 0;
        std::uint32_t every = 0;
    };
    std::map<std::string, Snapshots> snapshots;
    // The kernel's idle time per CPU in ns (analyze/reports/kernel_idle.h);
    // empty when not recorded or with a pid filter.
    std::vector<std::uint64_t> idle_ns_per_cpu;
    // Images whose samples fell in functions without a name, once each, with
    // what to do (analyze/reports/symbol_hints.h); only with by procedure.
    std::vector<std::string> hints;
};

[[nodiscard]] Result<ProfReport> build_prof_report(const store::EpochContents& contents,
                                                   const ProfOptions& options,
                                                   Symbolizer& symbolizer);
// DCPI Figure 1 layout. Warnings are not part of the text: the CLI prints
// report.warnings to stderr (the JSON carries them in "warnings").
std::string render_prof_text(const ProfReport& report);
// {"schema":"ecpi.prof","version":1,...}; documented in docs/json-schema.md.
nlohmann::json render_prof_json(const ProfReport& report);

}  // namespace ecpi::analyze
