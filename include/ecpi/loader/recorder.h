// One recording session (`ecpi record`): sampling events + BPF sampler +
// side-band mmap records + process table, drained periodically and merged
// into the profile store.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::loader {

struct RecordOptions {
    std::filesystem::path database = "ecpi.db";
    std::uint64_t frequency = 4999;                 // samples per second per CPU
    // The overhead budget (issue 20, loader/collect/budget.h): with a value, the rate
    // per CPU is the highest whose measured cost stays within this percent of
    // a program's time, clamped to [kBudgetMinHz, kBudgetMaxHz], and
    // `frequency` is ignored. The daemon re-calibrates every
    // `calibration_interval_s` and when the number of online CPUs changes;
    // a new rate starts a new epoch (counts of different periods do not add).
    std::optional<double> overhead_budget_percent;
    double calibration_interval_s = 3600;
    // The calibrations of this boot a new one pools its pairs with and adds
    // to (loader/collect/budget_history.h); empty: each stands alone.
    std::filesystem::path calibration_history = "/run/ecpi/budget-calibrations";
    std::vector<std::string> events = {"cpu-clock"};
    bool call_graph = false;                        // -g
    bool call_graph_fp = false;                     // --call-graph fp: frame pointers only (else CFI, fp fallback)
    bool randomize = true;                          // DCPI 4.1.1 period randomization
    // Target: exactly one of these (none = the whole system).
    std::vector<std::uint32_t> pids;                // -p: these and their children
    std::vector<std::string> cgroups;               // --cgroup PATH (several for the daemon)
    std::vector<std::string> command;               // -- COMMAND ARGS...
    // The signal that stopped the recording, passed on to COMMAND when it is
    // still running (SIGTERM when null or 0).
    const std::atomic<int>* stop_signal = nullptr;
    std::optional<double> duration_s;               // stop after this long
    double drain_interval_s = 1.0;                  // flip and drain the kernel tables
    double flush_interval_s = 10.0;                 // merge into the store
    std::uint32_t table_entries = 16384;            // per table (two tables)
    std::uint32_t ringbuf_bytes = 8u << 20;
    // One user-mode sample in N (per CPU) keeps its general-purpose registers
    // with its thread and time (a .reg file per event, issue 21); 0: none.
    std::uint32_t registers_every = 0;
    std::function<void(const std::string&)> log;    // progress and warnings, one line each
    // Called on the recording thread after each successful merge into the
    // store; must return at once (the daemon's pusher only wakes its thread).
    std::function<void()> merged;

    // Daemon mode (`ecpi daemon`): runs until `stop`, merges after every drain,
    // serves the control socket, keeps memory and disk under their limits.
    bool daemon = false;
    bool exclude_self = false;                      // do not sample this process
    std::uint64_t max_memory_bytes = 0;             // 0: no limit
    std::uint64_t max_disk_bytes = 0;               // 0: no limit
    double epoch_interval_s = 86400;                // daemon: start a new epoch this often; 0: never
    std::uint64_t compact_bytes = 4u << 20;         // daemon: try compacting once the journal grew this much
    std::filesystem::path control_socket;           // empty: none
};

struct EventSummary {
    std::string name;
    std::uint64_t period = 0;
    std::uint64_t samples = 0;        // stored, including unknown
    std::uint64_t unknown = 0;
    std::uint64_t lost = 0;           // ring buffer full
    std::uint64_t spilled = 0;        // table full, went through the ring buffer (not lost)
    std::uint64_t taken = 0;          // samples the BPF handler counted: taken == samples + lost
    std::uint64_t registers = 0;      // register snapshots stored
    std::uint64_t registers_lost = 0; // register snapshots the register ring buffer could not take
    std::uint64_t idle = 0;           // samples that found a CPU idle (pid 0): counted apart, not in `samples`
};

struct RecordSummary {
    std::vector<EventSummary> events;
    std::uint64_t frequency = 0;         // the rate per CPU at the end (chosen by the budget, or -F)
    // With an overhead budget: the last calibration's cost of one sample
    // (median and quartiles, microseconds) and the estimated overhead at
    // `frequency`; 0 without one.
    double sample_cost_us = 0, sample_cost_low_us = 0, sample_cost_high_us = 0;
    double estimated_overhead_percent = 0;
    std::string epoch;
    std::optional<int> command_status;   // exit status to return (128+signal when killed)
    bool interrupted = false;
    std::uint64_t drains = 0;
    std::uint64_t sideband_lost = 0;     // mmap/comm records the kernel dropped
    std::uint64_t stack_samples = 0;     // -g
    std::uint64_t distinct_stacks_per_drain = 0;  // summed over drains
    double loader_cpu_s = 0;             // user + system CPU of this process
    double wall_s = 0;
    std::uint64_t bpf_run_time_ns = 0, bpf_run_count = 0;  // when kernel.bpf_stats_enabled
    std::uint64_t unknown_record_kinds = 0;
    // -g with CFI: the unwind tables loaded (issue 29; unwinder_summary()); empty otherwise.
    std::map<std::string, double> unwind;
    std::vector<std::string> warnings;
};

// Runs until the command exits, the duration passes or `stop` becomes true.
// Samples drained before an error are flushed when possible.
[[nodiscard]] Result<RecordSummary> record(const RecordOptions& options, const std::atomic<bool>& stop);

// Which of CAP_BPF, CAP_PERFMON this process lacks (empty when root or both held).
std::vector<std::string> missing_capabilities();

}  // namespace ecpi::loader
