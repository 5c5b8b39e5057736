// Results of `ecpi probe` (targeted call-path profiles, iPath): the report
// both the live table and `ecpi paths` print, its JSON form (schema
// "ecpi.probe", docs/json-schema.md) and its file in the database
// (FORMAT.md §11: epochs/<epoch>/probe-<unix time>.json, written atomically).
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::store {

inline constexpr int kProbeReportVersion = 1;
inline constexpr int kProbeHistogramBuckets = 64;  // log2 buckets of nanoseconds

// One call site of a call path: the return address as `symbol+offset` in `image`.
struct ProbeFrame {
    std::string symbol;       // "[unknown]" when no symbol holds the address
    std::uint64_t offset = 0; // from the symbol's start; the ELF vaddr when unknown
    std::string image;        // path as the process saw it; "" when unmapped
    auto operator<=>(const ProbeFrame&) const = default;
};

// One timer (wall, cpu or blocked) of one call path. Per-call values feed it;
// with --sample only some calls are timed and totals are estimates.
struct ProbeTimer {
    std::uint64_t timed_calls = 0;
    std::uint64_t measured_ns = 0;     // sum over the timed calls
    std::uint64_t min_ns = 0, max_ns = 0;
    double sum_squares = 0;            // of per-call ns, for the sampling error
    std::vector<std::uint64_t> histogram;  // [i]: calls with 2^i <= ns < 2^(i+1) ([0] also holds 0 ns)

    void add(std::uint64_t ns);
    void merge(const ProbeTimer& other);
    double mean_ns() const;
    // Total over `calls` calls: exact when every call was timed, else
    // mean × calls; `error_ns` is then the 95% bound (1.96 standard errors).
    double total_ns(std::uint64_t calls) const;
    double error_ns(std::uint64_t calls) const;
    // Variational path profiling 5.1: total − count × minimum (over timed calls).
    std::uint64_t net_variation_ns() const;
};

struct ProbePath {
    std::vector<ProbeFrame> frames;  // call sites, outermost first; the probed function is not repeated
    bool truncated = false;          // the walk could not reach the thread's outermost frame
    std::uint64_t calls = 0;         // exact (every entry)
    std::uint64_t unmatched = 0;     // timed entries whose return never came (longjmp, exit, still open)
    std::map<std::string, ProbeTimer> timers;  // "wall", "cpu", "blocked"
};

struct ProbeFunction {
    std::string pattern;     // the --func / add pattern that selected it
    std::string symbol;      // symbol table name
    std::string demangled;
    std::string image;       // path as the process saw it
    std::string build_id;
    std::uint64_t address = 0;  // ELF vaddr of the entry
    bool timed = false;
    bool removed = false;       // removed while the target ran; its results so far are kept
    std::uint64_t calls = 0, unmatched = 0;
    std::vector<ProbePath> paths;
};

struct ProbeReport {
    std::uint32_t pid = 0;
    std::string comm;
    std::vector<std::string> command;  // `-- COMMAND`, empty with -p
    std::int64_t started_unix = 0;
    double duration_s = 0;
    bool final = false;                // the run is over (not a live snapshot)
    bool target_exited = false;
    std::vector<std::string> metrics;  // of "count", "wall", "cpu", "blocked"
    std::uint32_t sample_n = 0;        // --sample 1/N (0: every call timed)
    std::uint32_t sample_burst = 0;
    std::map<std::string, std::uint64_t> counters;  // drops and anomalies, by name
    std::vector<ProbeFunction> functions;
    std::vector<std::string> warnings;
};

nlohmann::json probe_report_to_json(const ProbeReport& report);
// Rejects another schema or a newer version by name.
[[nodiscard]] Result<ProbeReport> probe_report_from_json(const nlohmann::json& json);

// Writes the report into the database's current epoch as
// probe-<unix time>[.<n>].json (temp + fsync + rename, under the writer lock);
// returns the file written.
[[nodiscard]] Result<std::filesystem::path> save_probe_report(Database& db, const ProbeReport& report);

struct SavedProbeReport {
    std::string epoch;
    std::filesystem::path file;
};
// Every probe report in the database, oldest first (by epoch, then name).
[[nodiscard]] Result<std::vector<SavedProbeReport>> list_probe_reports(const Database& db);
[[nodiscard]] Result<ProbeReport> read_probe_report(const std::filesystem::path& file);

}  // namespace ecpi::store
