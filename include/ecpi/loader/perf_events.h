// perf_event_open wrappers: the sampling events BPF attaches to, and the
// side-band "dummy" events whose ring buffers carry the kernel's mmap2, comm,
// fork and exit records (with build ids) for every process.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::loader {

// An event a user may ask for with -e.
struct EventSpec {
    std::string name;            // as the user wrote it: "cpu-clock", "cycles", ...
    std::uint32_t type = 0;      // PERF_TYPE_*
    std::uint64_t config = 0;
    bool is_clock = false;       // period in nanoseconds
};

// Known event names; an unknown name is an error listing the known ones.
[[nodiscard]] Result<EventSpec> parse_event(const std::string& name);
std::vector<std::string> known_event_names();

// CLOCK_MONOTONIC in nanoseconds: the clock of bpf_ktime_get_ns() and of the
// side-band records' times (SidebandReader asks the kernel for it), so a
// sample and a mapping can be put in the order they happened.
std::uint64_t monotonic_ns();

// Mean sampling period for `hz` samples per second per CPU: nanoseconds for
// the clocks, events for hardware counters (cycles from the CPU clock rate).
std::uint64_t mean_period(const EventSpec& event, std::uint64_t hz, double cpu_mhz);

// Online CPU numbers.
[[nodiscard]] Result<std::vector<int>> online_cpus();

// The first CPU as /proc/cpuinfo describes it (all cores of a machine are
// one model here); fields it lacks stay empty/0.
struct CpuInfo {
    std::string vendor;  // vendor_id
    std::uint64_t family = 0;
    std::uint64_t model = 0;
    std::string name;    // model name
    double mhz = 0;      // cpu MHz: the nominal clock rate
};
CpuInfo read_cpuinfo();

// The nominal CPU clock rate in MHz (from /proc/cpuinfo), 0 when unknown.
double cpu_mhz();

// The clock rate this thread's core runs at now, in MHz: a chain of
// dependent register adds retires one add per cycle on every x86-64 core,
// timed on the thread's CPU clock (median of `rounds` rounds of about 4 ms).
// Unlike /proc/cpuinfo's nominal rate it includes turbo. 0 on other
// architectures.
double measure_cpu_mhz(int rounds = 5);

// Wall-clock seconds this thread takes to run `iterations` x 8 dependent
// register adds (the chain above); 0 on other architectures.
double add_chain_wall_seconds(long iterations);

// The same chain timed on the wall clock while a cpu-clock event samples
// this thread every `period_ns` (no BPF program, no ring buffer): the cycles
// a program keeps per second when sampled at that rate. Every sample costs
// the sampled program time in the handler and, in a VM, in the hypervisor
// (about 9% at 4999 Hz here), so this is the rate that turns a cpu-clock
// period into the cycles the program ran. It leaves out what the handler's
// cache and TLB footprint costs the program afterwards, so it is an upper
// bound of that rate. Median of `rounds` rounds of 100 samples each (at
// most 50 ms a round: fewer samples at low rates, where the cost is small).
[[nodiscard]] Result<double> measure_sampled_cpu_mhz(std::uint64_t period_ns, int rounds = 3);

// What one step of a dependent chain of loads that miss costs a program
// sampled every `period_ns` (store::EpochMeta::chase_latency, used by calc's
// load_chain.h): a random cyclic pointer chase, one pointer per 64-byte line,
// over 1, 4, 16 and 64 MiB of 4 KiB pages (TLB misses and a VM's nested page
// walks included), timed like measure_sampled_cpu_mhz on this thread's CPU
// time less what it waited runnable. Per size, from where the linking began
// and after one whole traversal unsampled up to 16 MiB (the steady state of a
// program that chases that span again and again; 2,000 steps at 64 MiB), the
// median of `rounds` rounds of 20,000 steps and their fastest and slowest.
// ecpi record measures it only around a command: while it waits to be
// released, and again once it has exited, on the CPUs it ran on
// (chase_where_command_ran).
[[nodiscard]] Result<std::vector<store::ChaseLatency>> measure_sampled_chase(std::uint64_t period_ns, int rounds = 3);

// The chase timed on one CPU, and how much of the command ran there.
struct CpuChase {
    int cpu = -1;
    double weight = 0;                        // the command's share of time on that CPU
    std::vector<store::ChaseLatency> sizes;
};

// The chase as recorded: the measurement before the command (on whichever
// CPU the recorder ran) and those after it exited, pinned to the CPUs it
// ran on (a step's time differs by CPU in a VM: 147 against 173 ns at
// 16 MiB on this 2-CPU VM's two vCPUs, 300 against 440 under sampling).
// Per size: the mean of the CPUs' medians by their weights, and the
// fastest and slowest rounds of every measurement. A size measured only
// before keeps that measurement; with no CPU measured after, `before`.
[[nodiscard]] std::vector<store::ChaseLatency> chase_where_command_ran(const std::vector<store::ChaseLatency>& before,
                                                                       const std::vector<CpuChase>& after);

class FileDescriptor {
public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) : fd_(fd) {}
    FileDescriptor(FileDescriptor&& o) noexcept : fd_(o.release()) {}
    FileDescriptor& operator=(FileDescriptor&& o) noexcept;
    ~FileDescriptor();
    int get() const { return fd_; }
    int release() { int fd = fd_; fd_ = -1; return fd; }
    explicit operator bool() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

// One sampling event per CPU. `cgroup_fd` >= 0 restricts counting to that
// cgroup (and its descendants), as perf's -G does.
struct SamplingEventOptions {
    std::uint64_t period = 0;
    int cgroup_fd = -1;
};
[[nodiscard]] Result<std::vector<FileDescriptor>> open_sampling_events(const EventSpec& event,
                                                                       const std::vector<int>& cpus,
                                                                       const SamplingEventOptions& options);
// Changes a running event's period (PERF_EVENT_IOC_PERIOD).
[[nodiscard]] Result<void> set_period(int fd, std::uint64_t period);

// Whether this thread can sample cycles with a branch stack of user-space
// branches (last-branch records: Intel LBR, AMD LbrExtV2, Arm BRBE), as
// `ecpi paths record --source lbr` needs: opens such an event on the calling
// thread, disabled, and closes it. The error is one line: "this machine has
// no last-branch records (LBR): <why>; use --source instrumented (...)" when
// the hardware lacks them (no PMU, as in most VMs, or a PMU without a branch
// stack); "opening last-branch records (LBR): <why>; or use --source
// instrumented (...)" when permission (CAP_PERFMON, perf_event_paranoid) or
// file descriptors are what is missing.
[[nodiscard]] Result<void> check_lbr_support();

// Records read from the side-band ring buffers.
// One perf event's ring buffer: the event's descriptor and its mapping (a
// metadata page, then `size` bytes of data), unmapped when it goes.
class PerfRing {
public:
    // Maps `pages` pages of data for the event `fd` (owned from here on);
    // `what` names the ring in the error.
    static Result<PerfRing> map(FileDescriptor fd, std::size_t pages, const std::string& what);
    PerfRing(PerfRing&& o) noexcept { *this = std::move(o); }
    PerfRing& operator=(PerfRing&& o) noexcept;
    PerfRing(const PerfRing&) = delete;
    PerfRing& operator=(const PerfRing&) = delete;
    ~PerfRing();

    perf_event_mmap_page* meta() const { return static_cast<perf_event_mmap_page*>(base_); }
    std::uint8_t* data() const { return static_cast<std::uint8_t*>(base_) + page_size_; }
    std::size_t size() const { return size_; }  // data bytes
    int fd() const { return fd_.get(); }

private:
    PerfRing() = default;
    FileDescriptor fd_;
    void* base_ = nullptr;
    std::size_t size_ = 0, page_size_ = 0;
};

struct SidebandHandler {
    // time_ns: when it was mapped (CLOCK_MONOTONIC, monotonic_ns()).
    std::function<void(std::uint32_t pid, std::uint64_t start, std::uint64_t len, std::uint64_t pgoff,
                       const std::string& path, const std::string& build_id, std::uint64_t time_ns)> mmap;
    std::function<void(std::uint32_t pid, const std::string& comm, bool exec)> comm;
    std::function<void(std::uint32_t pid, std::uint32_t ppid)> fork;
    std::function<void(std::uint32_t pid)> exit;
};

// A per-CPU dummy event recording mmap2 (executable mappings, with build id),
// comm (exec), fork and exit records of every process.
class SidebandReader {
public:
    static Result<SidebandReader> open(const std::vector<int>& cpus, std::size_t pages_per_cpu = 256);
    SidebandReader(SidebandReader&&) noexcept = default;
    SidebandReader& operator=(SidebandReader&&) noexcept = default;

    // Reads every record written so far, in per-CPU order. Records from
    // different CPUs are merged by timestamp so a fork is seen before its
    // child's exec.
    void drain(const SidebandHandler& handler);
    std::uint64_t lost_records() const { return lost_; }

private:
    SidebandReader() = default;
    std::vector<PerfRing> rings_;
    std::uint64_t lost_ = 0;
    std::vector<std::uint8_t> scratch_;
};

}  // namespace ecpi::loader
