// Results of `ecpi probe` (targeted call-path profiles, iPath): the report
// both the live table and `ecpi paths` print, its JSON form (schema
// "ecpi.probe", docs/json-schema.md) and its file in the database
// (FORMAT.md §11: epochs/<epoch>/probe-<unix time>.json, written atomically).
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
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
    // Probed calls (any probe, same thread) made inside the timed calls: the
    // whole cost of each of their probes is inside these times.
    std::uint64_t nested_calls = 0;
    std::uint64_t nested_stepped = 0;  // of which the probed function's first instruction is single-stepped
    std::uint64_t nested_frames = 0;   // frames the entry walked in those calls, summed
    // The time net of the probe (analyze/paths/probe_net.h); absent when the
    // probe's cost was not measured.
    struct Net {
        double probe_ns = 0;      // per call: the probe's cost subtracted from the mean
        double mean_ns = 0;       // measured mean - probe_ns (can fall below 0 within the noise)
        double noise_ns = 0;      // per call: the uncertainty of probe_ns
        bool within_noise = false;  // the net mean is not above twice the noise: see low_ns..high_ns
        double low_ns = 0, high_ns = 0;  // the net mean's range (mean ± noise, not below 0)
        // Within the noise and the path has stack samples (on-CPU time, for
        // the cpu and the wall timer alike): the samples whose stack holds
        // the function under this path × the sampling period ÷ the path's
        // exact calls, which reports then show.
        bool from_samples = false;
        double samples_mean_ns = 0;
        // The samples' own 95% range: the count's counting error alone
        // (Poisson, (sqrt(n) -+ 0.98)^2 samples), the same scale.
        double samples_low_ns = 0, samples_high_ns = 0;
        // Which method gave the reported figure: "subtraction", "range"
        // (within the noise, no samples) or "stack samples".
        const char* method() const { return from_samples ? "stack samples" : within_noise ? "range" : "subtraction"; }
    };
    std::optional<Net> net;

    void add(std::uint64_t ns);
    void merge(const ProbeTimer& other);
    double mean_ns() const;
    // What reports show: net of the probe where it was subtracted (a net
    // mean below 0 counts as 0 in the total), else as measured.
    double reported_mean_ns() const;  // the stack-sample figure where Net::from_samples
    double reported_total_ns(std::uint64_t calls) const;
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
    // User-mode stack samples of the target (ProbeReport::stack_sample_period_ns)
    // whose stack holds the probed function called through this path.
    std::uint64_t stack_samples = 0;
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
    bool entry_stepped = false; // the kernel single-steps its first instruction (ProbeCost::stepped)
    std::uint64_t calls = 0, unmatched = 0;
    std::vector<ProbePath> paths;
};

// What probing costs per call on this machine, measured when the session
// starts (loader/probe/probe_calibration.cpp): empty functions in ecpi
// itself, probed as the target's functions are, called in rounds. x86
// kernels emulate some first instructions of a probed function (push,
// nop, jumps and calls) and single-step the others out of line, one more
// trap inside the call: each kind is measured on a function of its own.
struct ProbeCostKind {
    // Inside a probed call's own wall (and on-CPU) time: the part of the
    // entry and return traps between the two clock reads. Median of the
    // rounds' means; the spread is half the range of the rounds' means.
    double self_wall_ns = 0, self_cpu_ns = 0, self_spread_ns = 0;
    double self_sd_ns = 0;       // per call (standard deviation over every call)
    // What one probed call adds to its caller's time: both traps whole
    // (the caller's clock, probed minus unprobed).
    double pair_ns = 0, pair_spread_ns = 0;
    double pair_cpu_ns = 0;      // the same in the caller's CPU time (the thread's CPU clock over a round)
    double pair_depth = 0;       // mean frames the entry walked in those calls
};
struct ProbeCost {
    std::string method;          // how it was measured, in one line
    std::uint32_t rounds = 0;
    std::uint64_t calls = 0;     // probed calls over all rounds and both kinds
    double unprobed_ns = 0;      // the empty functions' own call, unprobed
    ProbeCostKind emulated;      // first instruction emulated by the kernel
    ProbeCostKind stepped;       // first instruction single-stepped out of line
    // Each frame the entry walks adds to what a probed call costs its callers
    // (from calls at two depths); a nested call's pair cost is corrected by
    // frame_ns × (its depth − pair_depth).
    double frame_ns = 0, frame_cpu_ns = 0;
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
    std::uint64_t stack_sample_period_ns = 0;  // on-CPU sampling period of ProbePath::stack_samples (0: none)
    std::optional<ProbeCost> probe_cost;  // absent: times are as measured (--raw-times, --bare, no timer)
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
