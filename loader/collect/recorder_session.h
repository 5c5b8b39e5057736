// Internal to loader/: the recording session behind ecpi::loader::record(),
// shared by its steps' files:
//   recorder.cpp          the run loop, the daemon's control and limits, record()
//   recorder_setup.cpp    setup: database, events, targets, sampler; the rate
//   recorder_drain.cpp    drain: BPF table, ring buffers, side-band; resolution
//   recorder_flush.cpp    flush: merge into the database, epochs
//   recorder_process.cpp  the child of `record -- COMMAND`, /proc look-ups
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/loader/budget.h"
#include "ecpi/loader/control.h"
#include "ecpi/loader/kernel_idle.h"
#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/process_table.h"
#include "ecpi/loader/recorder.h"
#include "ecpi/loader/sampler.h"
#include "ecpi/loader/unwinder.h"
#include "ecpi/store/profile.h"
#include "budget_monitor.h"

namespace ecpi::loader::detail {

using Clock = std::chrono::steady_clock;

inline constexpr std::uint32_t kKernelImageIndex = 0xfffffff0u;
inline constexpr std::uint32_t kUnknownImageIndex = 0xfffffff1u;
inline constexpr std::uint64_t kKernelSpaceStart = 0xffff800000000000ull;
inline constexpr auto kTick = std::chrono::milliseconds(50);

// A flat sample after resolution: (event, image, pid, offset).
struct FlatKey {
    std::uint16_t event;
    std::uint32_t image;
    std::uint32_t pid;
    std::uint64_t offset;
    bool operator==(const FlatKey&) const = default;
};
struct FlatKeyHash {
    std::size_t operator()(const FlatKey& k) const {
        std::uint64_t h = k.offset * 0x9e3779b97f4a7c15ull;
        h ^= (static_cast<std::uint64_t>(k.image) << 32 | k.pid) + 0x7f4a7c15 + (h << 6) + (h >> 2);
        h ^= k.event;
        return static_cast<std::size_t>(h);
    }
};

struct StackKey {
    std::uint16_t event;
    std::uint32_t pid;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> frames;  // (image, offset)
    bool operator==(const StackKey&) const = default;
};
struct StackKeyHash {
    std::size_t operator()(const StackKey& k) const {
        std::uint64_t h = k.event * 31ull + k.pid;
        for (const auto& [img, off] : k.frames) h = (h ^ (off + img)) * 0x100000001b3ull;
        return static_cast<std::size_t>(h);
    }
};

// Reads the kernel's text start once; kernel samples are stored relative to it.
struct KernelBase {
    std::uint64_t text = 0;
    std::string error;
};

// The child of `record -- COMMAND`: forked stopped on a pipe so it can be
// tracked before its first instruction, then released to exec.
class ChildProcess {
public:
    ~ChildProcess();

    Result<void> spawn(const std::vector<std::string>& argv);

    // Lets the child exec; fails when exec failed.
    Result<void> release();

    // The exit status when the child has exited (128+signal when killed).
    std::optional<int> poll();

    void terminate(int signal_number);

    std::optional<int> wait();

    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    int release_fd_ = -1;
    int report_fd_ = -1;
    bool reaped_ = false;
    std::optional<int> status_;
    std::string command_;
};

// Descendants of `roots` per /proc (children started before tracking began).
std::vector<std::uint32_t> existing_descendants(const std::vector<std::uint32_t>& roots);

// The command line of `pid` with NULs as spaces; "" when the process is gone.
std::string read_cmdline(std::uint32_t pid);

// This process's CPU time, user + system, all threads (getrusage).
double cpu_seconds();

class Session {
public:
    Session(const RecordOptions& options, const std::atomic<bool>& stop) : options_(options), stop_(stop) {}

    Result<RecordSummary> run();

private:
    void log(const std::string& line) {
        if (options_.log) options_.log(line);
    }
    void warn_once(const std::string& line) {
        if (warned_.insert(line).second) {
            summary_.warnings.push_back(line);
            log("warning: " + line);
        }
    }
    // setup(), in its order (recorder_setup.cpp).
    Result<void> setup();
    void start_kernel_idle_clock();
    Result<void> open_database();
    Result<void> prepare_events();
    Result<void> read_kernel_and_cpus();
    void save_vdso_image();
    Result<void> open_cgroups_and_check_pids();
    Result<void> open_sideband();
    Result<void> load_sampler();
    Result<void> track_targets();
    Result<void> attach_events();
    // The run loop and what follows it (recorder.cpp).
    Result<void> sample_until_done(Clock::time_point started, bool& failed);
    void take_final_counters();
    void warn_lost_records();
    void summarize_rate();
    int signal_for_command() const;
    Result<void> drain_cycle();
    void drain_sideband();
    std::vector<std::uint32_t> unwind_targets() const;
    void start_unwinding();
    void consume_ringbuf();
    void resolve_pending();
    void resolve_registers();
    Result<void> flush_registers();
    std::uint32_t registers_ringbuf_bytes() const;
    // flush(), in its order (recorder_flush.cpp).
    Result<void> flush();
    void take_lost_counts();
    Result<void> flush_flat();
    Result<void> flush_stacks();
    std::vector<store::ImageProfile> flat_profiles() const;
    std::vector<store::StackProfile> stack_profiles() const;
    // The daemon's flush (recorder_journal.cpp): one journal record per flush.
    Result<void> flush_journal();
    void compact_epoch(const std::string& epoch, std::uint64_t min_bytes);
    void close_epoch_if_due();
    void forget_stored_processes(store::EpochMeta& meta);
    nlohmann::json disk_json();
    std::string process_cmdline(std::uint32_t pid) const;
    void note_exec_args();
    store::EpochMeta epoch_meta();
    void count_flushed();
    store::ImageId image_id(std::uint32_t index) const;
    void jitter_periods();
    void take_idle_counts();
    void set_frequency(std::uint64_t hz);
    void measure_sampled_clock();
    void note_command_cpu();
    void time_chase_after_command();
    Result<void> calibrate_budget();
    void recalibrate_if_due(Clock::time_point now);
    void check_budget_if_due(Clock::time_point now);  // budget_session.cpp (issue 35)
    Result<std::string> apply_rate(std::uint64_t hz);
    void log_calibration(const SampleCost& cost, double budget);
    std::string calibration_key(const SampleCost& fresh, const CalibrationOptions& calibration) const;
    SampleCost with_calibration_history(const SampleCost& fresh, const CalibrationOptions& calibration);
    Result<std::string> start_new_epoch();
    Result<void> new_epoch_if_periods_differ();
    nlohmann::json sampling_json() const;
    std::string handle_control(const std::string& request);
    nlohmann::json status_json();
    void enforce_limits();
    void check_cgroups();
    std::vector<std::uint64_t> total_samples_;      // per event, resolved so far
    std::vector<std::uint64_t> interval_base_;      // total_samples_ at the previous drain
    std::pair<std::uint32_t, std::uint64_t> resolve_pc(std::uint32_t pid, std::uint64_t pc, bool kernel,
                                                       std::uint64_t time_ns);
    void forget_replaced_mappings(std::uint64_t drain_began_ns);
    static constexpr std::uint64_t kReplacedSpareNs = 1'000'000'000;
    std::uint64_t previous_drain_began_ns_ = 0;  // monotonic_ns() (issue 29)

    const RecordOptions& options_;
    const std::atomic<bool>& stop_;
    RecordSummary summary_;
    std::set<std::string> warned_;

    std::optional<store::Database> db_;
    std::string epoch_;
    std::vector<EventSpec> events_;
    std::vector<std::uint64_t> mean_periods_;
    std::uint64_t frequency_ = 0;                 // per CPU and event, in force (budget or -F)
    std::optional<SampleCost> sample_cost_;       // the last calibration (overhead budget only)
    RateChoice rate_choice_;
    Clock::time_point next_calibration_;
    std::int64_t calibrated_unix_ = 0;
    double calibration_cpu_s_ = 0;  // CPU seconds the budget's calibrations spent running their workload
    std::vector<std::vector<std::uint64_t>> flushed_idle_;  // per event, per CPU: idle samples already written
    KernelIdleClock kernel_idle_;  // the kernel's idle time per CPU, written at each flush (issue 30)
    std::vector<int> cpus_;
    std::optional<SidebandReader> sideband_;
    std::optional<Sampler> sampler_;
    ProcessTable processes_;
    ChildProcess child_;
    std::vector<std::pair<std::filesystem::path, FileDescriptor>> cgroups_;
    std::optional<ControlServer> control_;
    Clock::time_point started_ = Clock::now();
    std::vector<std::uint64_t> last_interval_samples_;  // per event, in the last drain
    double last_interval_s_ = 0;
    Clock::time_point last_drain_ = Clock::now();
    std::uint64_t last_disk_bytes_ = 0;
    bool memory_warned_ = false;
    KernelBase kernel_;
    BudgetMonitor budget_monitor_;  // after sampler_: its check thread uses the sampler
    CpuInfo cpu_;
    double mhz_ = 0;
    double measured_mhz_ = 0;  // measure_cpu_mhz() before sampling starts
    double sampled_mhz_ = 0;   // measure_sampled_cpu_mhz() at the first clock event's period
    std::vector<store::ChaseLatency> chase_latency_;  // measure_sampled_chase() at that period, with registers
    std::uint64_t chase_period_ = 0;                  // the period chase_latency_ was measured at
    std::map<int, std::uint32_t> command_cpu_ticks_;  // ticks the command was last seen on each CPU
    std::mt19937_64 rng_{std::random_device{}()};

    std::vector<RawSample> pending_flat_;
    std::vector<RawStackSample> pending_stacks_;
    std::vector<RawRegisterSample> pending_registers_;
    // Per event, resolved; `image` is an index into processes_.images() (or
    // kKernelImageIndex/kUnknownImageIndex) until flush() builds the table.
    std::vector<std::vector<store::RegisterSample>> registers_;
    std::vector<std::uint64_t> flushed_registers_lost_;  // per event, register losses already written
    std::unordered_map<FlatKey, std::uint64_t, FlatKeyHash> flat_;
    std::unordered_map<StackKey, std::uint64_t, StackKeyHash> stacks_;
    std::vector<store::EventMeta> unflushed_meta_;   // per event, since the last flush
    std::vector<std::uint64_t> flushed_lost_;        // lost counter already written
    std::set<std::uint32_t> pids_seen_;
    std::map<std::uint32_t, store::ProcessMeta> process_meta_;
    std::set<std::string> cached_build_ids_;
    // Daemon: the names each pid already has in the current epoch's journal
    // (a hash), so a long-lived process is written once per epoch, not at
    // every flush; bounded (cleared past kMaxStoredProcesses).
    std::unordered_map<std::uint32_t, std::size_t> stored_processes_;
    std::int64_t epoch_started_unix_ = 0;     // daemon: when the current epoch began (0: not known yet)
    std::uint64_t disk_bytes_at_start_ = 0;   // daemon: database size when it started
    std::uint64_t compactions_ = 0;
    std::optional<Unwinder> unwinder_;                               // -g with CFI (issue 29)
    std::vector<std::array<std::uint64_t, 7>> flushed_stack_ends_;  // per event, stack ends already written
};

}  // namespace ecpi::loader::detail
