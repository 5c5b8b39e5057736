// Runs a program built with `ecpi flags memtrace` (or `paths`) under control of ecpi's
// runtime (runtime/ecpi_rt_abi.h): creates the shared-memory control region
// with its per-thread rings, starts the program with ECPI_RT_CONTROL set,
// and drains the rings while it runs, handing raw record batches to the
// caller (which decodes and simulates them; see analyze/cachesim/memtrace_trace.h).
// Also runs unmodified programs under valgrind's lackey and hands its
// trace text over as it is produced.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi_rt_abi.h"

namespace ecpi::loader {

struct LoadedModule {
    std::string path;
    std::uint64_t base = 0;   // load bias: runtime address - ELF virtual address (0 when unknown)
    std::uint64_t start = 0;  // lowest mapped address
    std::uint64_t end = 0;    // first address past it
    bool bias_known = true;   // false: `start` is the mapping of file offset 0 (compute the bias from the ELF)
};

struct RuntimeStart {
    std::vector<LoadedModule> modules;  // where the program was loaded; [0] is the program itself
    std::uint64_t block_cost_ticks = 0; // paths: what one recorded block entry costs (TSC ticks)
    std::uint32_t pid = 0;              // the program's process id
};

struct ProgramExit {
    int wait_status = 0;
    double seconds = 0;       // wall time from start to exit
};
// The exit code ecpi returns for a program's wait status ("exited 3" -> 3,
// "killed by signal N" -> 128 + N), and its description.
int exit_code_of(int wait_status);
std::string describe_wait_status(int wait_status);

struct MemtraceRunOptions {
    std::vector<std::string> argv;
    std::uint64_t window = 100000;   // ON events per window
    std::uint64_t off_mean = 0;      // mean OFF gap (0: full simulation)
    std::uint64_t seed = 1;
    // Set sampling: references whose bit ((address >> set_shift) & 63) of
    // set_bitmap is set are recorded outside windows too (MEMREF_SET). 0: none.
    std::uint64_t set_bitmap = 0;
    std::uint64_t set_shift = 0;
    // The choice rotates every set_rotate_windows windows by set_rotate_step
    // bits, the next turn's groups added in a turn's last set_rotate_warm
    // windows (ecpi_rt_set_bitmap_at). 0: fixed.
    std::uint32_t set_rotate_step = 0;
    std::uint32_t set_rotate_windows = 0;
    std::uint32_t set_rotate_warm = 0;
    // Outside windows, sampled sets' certain first-level hits are counted,
    // not recorded (header.set_hit_mask: groups of sets - 1). 0: off.
    std::uint32_t set_hit_mask = 0;
    std::uint32_t rings = 64;        // threads that can be traced
    std::uint32_t ring_records = 1u << 18;
    std::uint32_t features = ECPI_RT_FEATURE_MEMTRACE;  // what the runtime is asked to record
    // Called once, before the first records are handed over, with what the
    // runtime found at start.
    std::function<Result<void>(const RuntimeStart&)> on_runtime_ready;
};

struct MemtraceRunResult {
    ProgramExit exit;
    std::vector<LoadedModule> modules;
    bool runtime_active = false;     // false: the program is not built with ecpi's runtime
    std::string runtime_error;       // what the runtime said, if it refused
    std::uint64_t threads_without_ring = 0;
    std::uint64_t dropped_records = 0;
    double producer_stall_seconds = 0;  // time the program waited for ring space
    // Paths: the runtime's cost of one recorded block entry, and the time
    // stamp counter's rate measured against CLOCK_MONOTONIC over the run.
    std::uint64_t block_cost_ticks = 0;
    double tsc_ticks_per_ns = 0;
};

// Called with each batch of records drained from ring `ring`, in order. An
// error stops the run (the program is killed) and is returned.
using RecordHandler = std::function<Result<void>(std::uint32_t ring, std::span<const ecpi_rt_record> records)>;

Result<MemtraceRunResult> run_memtrace(const MemtraceRunOptions& options, const RecordHandler& handler,
                                       const std::atomic<bool>& stop);

// valgrind --tool=lackey --trace-mem=yes -- argv, with the trace on a pipe.
// `on_text` receives the trace text in chunks as it is produced (lines may
// straddle chunks). Modules are read from the process's maps while it runs.
struct LackeyRunResult {
    ProgramExit exit;
    std::vector<LoadedModule> modules;
};
Result<LackeyRunResult> run_lackey(const std::vector<std::string>& argv,
                                   const std::function<Result<void>(std::string_view text)>& on_text,
                                   const std::atomic<bool>& stop);

}  // namespace ecpi::loader
