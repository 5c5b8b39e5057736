// `ecpi stats`: DCPI's dcpistats (DCPI section 3.3, Figure 3). Statistics of
// each procedure's sample counts over N profiles (runs, epochs, machines),
// sorted by the normalized range, to find the procedures whose cost varies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/result.h"

namespace ecpi::analyze {

inline constexpr std::uint64_t kDefaultStatsMinSamples = 10;

struct StatsOptions {
    Grouping by = Grouping::kProcedure;
    std::optional<std::string> event;        // default: common_event()
    std::optional<std::uint32_t> pid;
    std::size_t limit = 0;                   // 0: all rows
    // Rows whose mean over the sets is under this many samples are hidden:
    // a procedure with 1 or 2 samples has a range of 100% by chance alone and
    // would rank first (issue 34, defect 7). 0 shows every row.
    std::uint64_t min_samples = kDefaultStatsMinSamples;
};

// One input profile of the statistics ("set" in DCPI's words).
struct StatsSet {
    std::string label;                       // the name given on the command line
    std::string database;
    std::string epoch;
    std::uint64_t total = 0;                 // samples of the event in this set
    std::uint64_t period = 0;
};

struct StatsRow {
    std::string procedure;                   // "" when by image
    std::string image;
    std::string build_id;
    std::vector<std::uint64_t> samples;      // one per set, 0 where absent
    std::uint64_t sum = 0;
    double sum_percent = 0;                  // sum over the total of all sets
    double range_percent = 0;                // (max - min) / sum: DCPI's normalized range
    std::size_t n = 0;                       // number of sets (absent counts as 0)
    double mean = 0;
    double stddev = 0;                       // sample standard deviation (N - 1); 0 when N = 1
    std::uint64_t min = 0;
    std::uint64_t max = 0;
};

struct StatsReport {
    std::string event;
    Grouping by = Grouping::kProcedure;
    std::optional<std::uint32_t> pid;
    std::vector<StatsSet> sets;
    std::uint64_t total = 0;                 // over all sets
    std::vector<StatsRow> rows;              // by decreasing range%, then sum, procedure, image
    std::size_t rows_total = 0;              // rows before the limit (after min_samples)
    std::uint64_t min_samples = 0;           // the threshold applied (mean samples per set)
    std::size_t rows_below_min_samples = 0;  // rows hidden by it
    std::vector<std::string> warnings;
};

// The statistics proper, over flat profiles already made (pure arithmetic;
// `sets[i]` describes `profiles[i]`, whose totals it takes).
StatsReport compute_stats(std::vector<StatsSet> sets, const std::vector<FlatProfile>& profiles,
                          Grouping by);

// Hides the rows whose mean per set is under `min_samples` (0: none), and
// counts them in the report.
void hide_rows_below(StatsReport& report, std::uint64_t min_samples);

// Picks the event, flattens each profile (images merged by build id) and
// computes the statistics.
[[nodiscard]] Result<StatsReport> build_stats_report(const std::vector<LoadedProfile>& profiles,
                                                     const StatsOptions& options, SymbolizerPool& symbolizers);

// DCPI Figure 3 layout: the totals of each set, then one row per procedure.
std::string render_stats_text(const StatsReport& report);
// {"schema":"ecpi.stats","version":1,...}; documented in docs/json-schema.md.
nlohmann::json render_stats_json(const StatsReport& report);

}  // namespace ecpi::analyze
