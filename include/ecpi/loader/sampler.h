// The BPF side of a recording: loads sampler.bpf.c, attaches it to the
// sampling events, and drains its two tables and ring buffer without losing
// or double counting a sample.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/loader/perf_events.h"
#include "ecpi/result.h"

struct ecpi_sample_key;
struct ecpi_stack_record;

namespace ecpi::loader {

// One aggregated or raw sample as drained from the kernel.
struct RawSample {
    std::uint32_t tgid = 0;
    std::uint16_t event = 0;
    bool kernel = false;
    std::uint64_t pc = 0;
    std::uint64_t count = 0;
    // CLOCK_MONOTONIC by which the samples were taken (they carry no time of
    // their own): the table's flip, or the end of the ring buffer's read.
    std::uint64_t time_ns = 0;
};

// The user registers and stack bytes (from sp up) of a -g sample taken
// before its process's unwind tables loaded (ECPI_RECORD_STACK_COPY).
struct UserStackCopy {
    std::uint64_t pc = 0, sp = 0, bp = 0;
    std::vector<std::uint8_t> bytes;
};

// One -g sample: stacks leaf first, kernel frames then user frames.
struct RawStackSample {
    std::uint32_t tgid = 0;
    std::uint16_t event = 0;
    bool kernel = false;
    std::uint64_t pc = 0;
    std::uint64_t time_ns = 0;  // when it was taken (bpf_ktime_get_ns: CLOCK_MONOTONIC)
    std::vector<std::uint64_t> kernel_ips;
    std::vector<std::uint64_t> user_ips;
    std::optional<UserStackCopy> copy;  // set: user_ips are still to be walked (Unwinder::complete)
};

// The user-mode registers of one sample (--registers), in hardware encoding
// order (store::GpRegister).
struct RawRegisterSample {
    std::uint32_t tgid = 0;
    std::uint32_t tid = 0;
    std::uint16_t event = 0;
    std::uint64_t time_ns = 0;
    std::uint64_t pc = 0;
    std::array<std::uint64_t, 16> regs{};
    std::uint16_t flags = 0;  // store::RegisterSample::flags
};

// A process's argument strings read in BPF at its exec (ECPI_RECORD_EXEC_ARGS):
// the command line of a process that exits before a drain can read /proc.
struct RawExecArgs {
    std::uint32_t tgid = 0;
    std::string cmdline;     // arguments joined by spaces, as read_cmdline gives them
    bool truncated = false;  // the list was longer than the BPF record holds
};

struct SamplerCounters {
    std::uint64_t samples = 0;
    std::uint64_t table_full = 0;     // sent to the ring buffer instead
    std::uint64_t ringbuf_lost = 0;   // lost: the ring buffer was full
    std::uint64_t stack_errors = 0;
    std::uint64_t registers_lost = 0; // register snapshots the register ring buffer could not take
    // How user stack walks ended, indexed by ECPI_COUNTER_* - ECPI_COUNTER_STACK_ROOT
    // (root, frame pointers, then the cut reasons; kStackEndNames).
    std::array<std::uint64_t, 7> stack_ends{};
};

// Names of SamplerCounters::stack_ends, as stored (store::EventMeta::stack_ends).
inline constexpr std::array<const char*, 7> kStackEndNames = {
    "root", "frame_pointers", "no_table", "no_row", "unsupported_rule", "frame_limit", "unreadable"};

// The CFI unwinding maps of a loaded sampler (bpf/ecpi_abi.h), for loader/unwind/unwinder.cpp.
struct UnwindMapFds {
    int rows = -1;
    std::uint32_t row_capacity = 0;
    int tables = -1;
    int processes = -1;
    int pages = -1;                   // the tables' page indexes
    std::uint32_t page_capacity = 0;
};

struct SamplerOptions {
    bool filter_tgids = false;
    bool capture_stacks = false;
    bool unwind_cfi = false;                // with capture_stacks: CFI walk, frame pointers as the fallback
    std::uint32_t unwind_rows = 1u << 21;   // CFI rows of all images together (8 bytes each)
    std::uint32_t unwind_pages = 1u << 18;  // page index entries of all images (4 bytes each; one per 4 KiB of text)
    std::uint32_t exclude_tgid = 0;
    std::uint32_t table_entries = 16384;
    std::uint32_t ringbuf_bytes = 8u << 20;
    std::uint32_t registers_every = 0;  // one user-mode sample in N keeps its registers; 0: none
    std::uint32_t registers_ringbuf_bytes = 8u << 20;  // power of two, >= one page
    // Nanoseconds every sample spins before anything else: honoured only by
    // test builds (ECPI_TEST_HOOKS, bpf/CMakeLists.txt), ignored otherwise.
    std::uint64_t test_sample_cost_ns = 0;
};

class Sampler {
public:
    static Result<Sampler> load(const SamplerOptions& options);
    Sampler(Sampler&&) noexcept;
    Sampler& operator=(Sampler&&) noexcept;
    ~Sampler();  // detaches everything: no program, link or event is left behind

    // Track a process (and, through the fork tracepoint, its children).
    Result<void> track_tgid(std::uint32_t tgid);
    Result<void> untrack_tgid(std::uint32_t tgid);
    // Attach to every per-CPU fd of one event; `event_index` is the cookie
    // (below ECPI_CALIBRATION_EVENT).
    Result<void> attach(std::uint16_t event_index, std::vector<FileDescriptor> fds);
    // The overhead budget's calibration event (loader/collect/budget.cpp): the
    // handler runs on its overflows like on any event's, with the
    // calibration cookie, whose samples the drain drops. One per CPU
    // measured at once; each is detached by its descriptor.
    Result<void> attach_calibration(FileDescriptor fd);
    void detach_calibration(int fd);
    // Samples that found a CPU in its idle task, per event index and per
    // possible CPU, since load (cumulative).
    Result<std::vector<std::vector<std::uint64_t>>> idle_counts() const;
    // All attached perf fds of one event (for period changes).
    std::vector<int> event_fds(std::uint16_t event_index) const;

    // Flip the active table, wait until no handler still writes the old one,
    // and append its contents to `out`. Then empty it.
    Result<void> drain_table(std::vector<RawSample>& out);
    // Consume the ring buffers: spilled samples into `flat`, -g samples into
    // `stacks`, register snapshots into `registers`.
    Result<void> drain_ringbuf(std::vector<RawSample>& flat, std::vector<RawStackSample>& stacks,
                               std::vector<RawRegisterSample>& registers);

    // The argument strings of the execs seen since the last call, in exec order
    // (collected while drain_ringbuf runs), and how many the kernel's ring could not take.
    std::vector<RawExecArgs> take_exec_args();
    std::uint64_t exec_args_lost() const;

    // Per-event counters summed over CPUs.
    Result<std::vector<SamplerCounters>> counters() const;
    // Kernel BPF statistics (run time and count) of the sampling program,
    // available when kernel.bpf_stats_enabled=1.
    struct ProgStats {
        std::uint64_t run_time_ns = 0, run_cnt = 0;
        std::string tag;  // the kernel's hash of the handler's instructions, hex
    };
    Result<ProgStats> prog_stats() const;
    std::uint64_t unknown_record_kinds() const;
    // -g stack records dropped as malformed, by reason ("short_frames 2, ..."; empty: none).
    std::string malformed_stack_records() const;
#ifdef ECPI_TEST_HOOKS
    // Test builds: every sample spins this long from now on (SamplerOptions::test_sample_cost_ns).
    void set_test_sample_cost(std::uint64_t ns);
#endif
    UnwindMapFds unwind_maps() const;

private:
    Sampler() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ecpi::loader
