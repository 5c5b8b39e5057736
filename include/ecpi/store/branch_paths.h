// Acyclic branch paths with their time per occurrence (variational path
// profiling, VPP 4), as `ecpi paths record` and `ecpi paths import` save
// them: one document per run, branch-paths-<unix>.json in the database's
// current epoch (schema "ecpi.branch-paths", docs/json-schema.md).
//
// Times are kept in the source's ticks (the time stamp counter for the
// instrumented source, core cycles for LBR) with the rate that turns them
// into nanoseconds; per path a log-linear histogram of occurrence times
// (8 buckets per power of two: an eighth of an octave, at most 9% wide)
// gives its distribution and low percentiles.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::store {

// Occurrences longer than this and 8x their path's median were interrupted
// (the report keeps them apart; the span fit leaves them out of its prior).
inline constexpr double kLongFloorNs = 5000;

// Log-linear histogram buckets of tick counts.
std::uint32_t tick_bucket(std::uint64_t ticks);
std::uint64_t tick_bucket_low(std::uint32_t bucket);   // smallest value in the bucket
std::uint64_t tick_bucket_high(std::uint32_t bucket);  // largest value in the bucket

struct BranchPath {
    std::string procedure;                // symbol name
    std::uint64_t procedure_start = 0;    // ELF virtual address
    std::string start_kind;               // "entry", "loop" (after a back edge) or "return" (after a callee returned)
    std::vector<std::uint64_t> blocks;    // start addresses of the blocks the path entered, in order
    std::string decisions;                // per conditional block on the way: T taken, N not taken, ? through unseen blocks
    std::string end_kind;                 // "back-edge", "call", "return"
    std::uint64_t occurrences = 0;
    std::uint64_t total_ticks = 0;
    std::uint64_t min_ticks = 0;
    struct Bucket {
        std::uint64_t occurrences = 0;
        std::uint64_t ticks = 0;  // their total time
    };
    std::map<std::uint32_t, Bucket> histogram;  // tick_bucket -> occurrences and their time
    // Spans (`ecpi flags paths --inline`): occurrences wholly inside a span,
    // and the mean cost fitted over the spans (analyze/paths/span_fit.h).
    std::uint64_t span_occurrences = 0;
    bool fitted = false;
    double fit_mean_ticks = 0;
    double fit_stderr_ticks = 0;
    bool fit_noisy = false;   // its standard error exceeds 15% of the mean
    bool fit_damped = false;  // too few spans: the mean leans on the stamped one; or a regular mix's share
    // The means the spans allow (95%, span_fit.h); undetermined: a range
    // too wide to give the path a mean (the report times it by the range).
    double fit_low_ticks = 0;
    double fit_high_ticks = 0;
    bool fit_undetermined = false;

    // Occurrences at or below the p-quantile (0 < p <= 1), read from the
    // histogram: the high edge of the bucket holding it, capped by min..
    std::uint64_t quantile_ticks(double p) const;
};

struct BranchPathProfile {
    std::string source;                   // "instrumented" or "lbr"
    std::string image;                    // path of the profiled binary
    std::string build_id;                 // hex; "" when it has none
    std::string tick_unit;                // "tsc" or "cycles"
    double ticks_per_ns = 0;              // 0: unknown (report in ticks)
    std::string rate_source;              // how ticks_per_ns was found
    double block_cost_ticks = 0;          // subtracted per recorded block entry
    std::uint64_t sample_every = 1;       // 1 in N block entries recorded (in bursts)
    std::uint64_t burst = 0;              // block entries per burst (0: not sampled in bursts)
    std::vector<std::string> command;
    std::uint64_t bursts = 0;             // ON windows or LBR stacks read
    std::uint64_t blocks = 0;             // block entries read
    std::uint64_t blocks_outside = 0;     // in no procedure of the image (other modules, no symbol)
    std::uint64_t blocks_at_edges = 0;    // before the first path start or after the last path end of a burst
    std::uint64_t occurrences = 0;        // complete path occurrences
    std::uint64_t spans = 0;              // spans timed at their ends (inline builds); 0: paths timed by stamps alone
    double fit_intercept_ticks = 0;       // the fit's cost per span beyond its whole paths
    double fit_residual_ticks = 0;        // the spans' residual standard deviation
    std::vector<std::string> notes;
    std::vector<BranchPath> paths;
};

nlohmann::json branch_paths_to_json(const BranchPathProfile& profile);
// Rejects another schema or a newer version by name; bounds every list.
[[nodiscard]] Result<BranchPathProfile> branch_paths_from_json(const nlohmann::json& json);

[[nodiscard]] Result<std::filesystem::path> save_branch_paths(Database& db, const BranchPathProfile& profile);
// Every saved branch-path document, oldest first.
[[nodiscard]] Result<std::vector<std::filesystem::path>> list_branch_paths(const Database& db, const std::string& epoch = "");
[[nodiscard]] Result<BranchPathProfile> read_branch_paths(const std::filesystem::path& file);

}  // namespace ecpi::store
