#include "ecpi/loader/perf_events.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

namespace ecpi::loader {
namespace {

long perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
    return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

struct KnownEvent {
    const char* name;
    std::uint32_t type;
    std::uint64_t config;
    bool is_clock;
};
constexpr KnownEvent kKnownEvents[] = {
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, true},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, true},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, false},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, false},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, false},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, false},
};

// The errno values perf_event_open gives for a hardware event (or a branch
// stack) the machine has not got: no PMU (as in most VMs), or a PMU without it.
bool hardware_missing(int err) { return err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == EINVAL; }

// Why perf_event_open refused, in words: the cause, and for the refusals a
// user can lift, how. `hardware`: the event counts in a hardware PMU.
std::string refusal_in_words(bool hardware, int err) {
    if (hardware && hardware_missing(err)) return std::string("no hardware PMU: ") + std::strerror(err);
    if (err == EACCES || err == EPERM)
        return std::string(std::strerror(err)) +
               "; ecpi needs CAP_PERFMON (or root), and kernel.perf_event_paranoid may forbid it";
    if (err == EMFILE) return "too many open files; raise the limit with `ulimit -n`";
    return std::strerror(err);
}

// Why perf_event_open refused an event, in words, with what to do instead.
Error open_error(const EventSpec& event, int err) {
    const bool hardware = event.type == PERF_TYPE_HARDWARE;
    if (hardware && hardware_missing(err))
        return Error("event '" + event.name + "' is not supported on this machine (" +
                         refusal_in_words(hardware, err) + "); use -e cpu-clock or -e task-clock instead",
                     err);
    return Error("opening event '" + event.name + "': " + refusal_in_words(hardware, err), err);
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

FileDescriptor::~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
}

Result<PerfRing> PerfRing::map(FileDescriptor fd, std::size_t pages, const std::string& what) {
    PerfRing ring;
    ring.page_size_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    ring.size_ = pages * ring.page_size_;
    void* base = mmap(nullptr, ring.size_ + ring.page_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) return Error::from_errno(errno, "mapping " + what);
    ring.base_ = base;
    ring.fd_ = std::move(fd);
    return ring;
}

PerfRing& PerfRing::operator=(PerfRing&& o) noexcept {
    if (this != &o) {
        if (base_) munmap(base_, size_ + page_size_);
        fd_ = std::move(o.fd_);
        base_ = std::exchange(o.base_, nullptr);
        size_ = o.size_;
        page_size_ = o.page_size_;
    }
    return *this;
}

PerfRing::~PerfRing() {
    if (base_) munmap(base_, size_ + page_size_);
}

std::vector<std::string> known_event_names() {
    std::vector<std::string> names;
    for (const auto& e : kKnownEvents) names.emplace_back(e.name);
    return names;
}

std::uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

Result<EventSpec> parse_event(const std::string& name) {
    for (const auto& e : kKnownEvents) {
        if (name == e.name) return EventSpec{e.name, e.type, e.config, e.is_clock};
    }
    std::string list;
    for (const auto& n : known_event_names()) list += (list.empty() ? "" : ", ") + n;
    return Error("unknown event '" + name + "' (known events: " + list + ")");
}

std::uint64_t mean_period(const EventSpec& event, std::uint64_t hz, double mhz) {
    if (hz == 0) hz = 1;
    if (event.is_clock) return std::max<std::uint64_t>(1'000'000'000ull / hz, 10'000);
    // Hardware counters: one sample per 1/hz seconds of a busy CPU.
    double rate = mhz > 0 ? mhz * 1e6 : 2e9;
    if (event.config == PERF_COUNT_HW_CACHE_MISSES || event.config == PERF_COUNT_HW_BRANCH_MISSES)
        rate /= 100;  // roughly one miss per hundred cycles
    return std::max<std::uint64_t>(static_cast<std::uint64_t>(rate / static_cast<double>(hz)), 1000);
}

Result<std::vector<int>> online_cpus() {
    std::ifstream in("/sys/devices/system/cpu/online");
    if (!in) return Error::from_errno(errno, "reading /sys/devices/system/cpu/online");
    std::string text;
    std::getline(in, text);
    std::vector<int> cpus;
    std::stringstream ss(text);
    std::string range;
    while (std::getline(ss, range, ',')) {
        auto dash = range.find('-');
        int lo = std::stoi(range.substr(0, dash));
        int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
        for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    if (cpus.empty()) return Error("no online CPUs in /sys/devices/system/cpu/online");
    return cpus;
}

CpuInfo read_cpuinfo() {
    CpuInfo info;
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) break;  // the end of the first processor's block
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
        std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
        char* end = nullptr;
        if (key == "vendor_id") info.vendor = value;
        else if (key == "model name") info.name = value;
        else if (key == "cpu family") info.family = std::strtoull(value.c_str(), &end, 10);
        else if (key == "model") info.model = std::strtoull(value.c_str(), &end, 10);
        else if (key == "cpu MHz") info.mhz = std::strtod(value.c_str(), &end);
    }
    return info;
}

double cpu_mhz() { return read_cpuinfo().mhz; }

namespace {

// Cycles per second of a dependent chain of register adds (one add per
// cycle on every x86-64 core), timed on `clock`. Register adds, not `add
// $imm`: Golden Cove and later fold chains of immediate adds at rename
// (bench/accuracy/clock.c). 0 on other architectures.
double add_chain_mhz(long iterations, clockid_t clock) {
#if defined(__x86_64__)
    timespec a{}, b{};
    long n = iterations, x = 0;
    const long one = 1;
    clock_gettime(clock, &a);
    __asm__ volatile(
        "1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
        " add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
        " sub $1, %1\n jnz 1b"
        : "+r"(x), "+r"(n)
        : "r"(one));
    clock_gettime(clock, &b);
    const double s = static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) * 1e-9;
    return s > 0 ? 8.0 * static_cast<double>(iterations) / s / 1e6 : 0;
#else
    static_cast<void>(iterations);
    static_cast<void>(clock);
    return 0;
#endif
}

double median(std::vector<double> v) {
    v.erase(std::remove(v.begin(), v.end(), 0.0), v.end());
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
}

// Seconds this thread has waited runnable for a CPU (/proc/thread-self/
// schedstat's second field, ns), or NaN without schedstats.
double run_delay_seconds() {
    std::ifstream in("/proc/thread-self/schedstat");
    unsigned long long runtime = 0, delay = 0;
    if (!(in >> runtime >> delay)) return std::nan("");
    return static_cast<double>(delay) * 1e-9;
}

// The add chain's rate over the time the thread held its CPU: the wall time
// less what it waited runnable. Wall time keeps each sample's interrupt (and
// in a VM its exit), which thread CPU time leaves out; but on a loaded
// machine it also kept the time other threads ran: the demo recorded on a
// 2-CPU machine at load 2 stored 2,241 MHz, where share_sixty's known work
// (4 cycles an iteration) needs 2,910 MHz. A round preempted for most of
// its time says nothing (0: the median skips it).
double on_cpu_mhz(double wall_mhz, long iterations, double waited) {
    if (!(wall_mhz > 0) || std::isnan(waited)) return wall_mhz;
    const double wall = 8.0 * static_cast<double>(iterations) / (wall_mhz * 1e6);
    const double on_cpu = wall - std::max(waited, 0.0);
    if (on_cpu < wall / 4) return 0;
    return 8.0 * static_cast<double>(iterations) / on_cpu / 1e6;
}

}  // namespace

double add_chain_wall_seconds(long iterations) {
    const double mhz = add_chain_mhz(iterations, CLOCK_MONOTONIC);
    return mhz > 0 ? 8.0 * static_cast<double>(iterations) / (mhz * 1e6) : 0;
}

double measure_cpu_mhz(int rounds) {
    constexpr long kIterations = 2'000'000;  // x 8 adds: 16 M cycles, ~4 ms at 4 GHz
    std::vector<double> mhz;
    for (int r = 0; r < rounds; ++r) mhz.push_back(add_chain_mhz(kIterations, CLOCK_THREAD_CPUTIME_ID));
    return median(std::move(mhz));
}

namespace {

// A cpu-clock event sampling this thread every `period_ns`, disabled.
Result<FileDescriptor> self_clock_event(std::uint64_t period_ns) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = period_ns;
    attr.sample_type = PERF_SAMPLE_IP;
    attr.disabled = 1;
    long fd = perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "opening a cpu-clock event on the recorder's thread to time it under sampling");
    return FileDescriptor(static_cast<int>(fd));
}

// An anonymous mapping of 4 KiB pages, unmapped when it goes.
struct ChaseBuffer {
    explicit ChaseBuffer(std::size_t bytes) : size(bytes) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return;
        base = static_cast<char*>(p);
        madvise(base, bytes, MADV_NOHUGEPAGE);  // programs' heaps are mostly 4 KiB pages
    }
    ~ChaseBuffer() {
        if (base) munmap(base, size);
    }
    ChaseBuffer(const ChaseBuffer&) = delete;
    ChaseBuffer& operator=(const ChaseBuffer&) = delete;
    char* base = nullptr;
    std::size_t size = 0;
};

// Links the first `bytes` of `buf` into one random cycle (Sattolo's
// shuffle), a pointer at the start of each 64-byte line.
void link_chase(char* buf, std::size_t bytes, std::vector<std::uint32_t>& order, std::uint64_t& seed) {
    const std::size_t n = bytes / 64;
    order.resize(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
    for (std::size_t i = n - 1; i > 0; --i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(order[i], order[(seed >> 33) % i]);
    }
    for (std::size_t i = 0; i < n; ++i)
        *reinterpret_cast<void**>(buf + std::size_t{order[i]} * 64) = buf + std::size_t{order[(i + 1) % n]} * 64;
}

// ns per step of `steps` steps from *p, over the time the thread held its CPU.
double chase_ns(void**& p, long steps) {
    timespec a{}, b{};
    const double waited_before = run_delay_seconds();
    clock_gettime(CLOCK_MONOTONIC, &a);
    void** q = p;
    for (long i = 0; i < steps; ++i) q = static_cast<void**>(*q);
    clock_gettime(CLOCK_MONOTONIC, &b);
    const double waited = run_delay_seconds() - waited_before;
    p = q;
    const double wall = static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) * 1e-9;
    const double on_cpu = wall - (std::isnan(waited) ? 0.0 : std::max(waited, 0.0));
    if (on_cpu < wall / 4) return 0;  // preempted for most of the round: says nothing
    return on_cpu / static_cast<double>(steps) * 1e9;
}

}  // namespace

Result<std::vector<store::ChaseLatency>> measure_sampled_chase(std::uint64_t period_ns, int rounds) {
    ECPI_ASSIGN_OR_RETURN(FileDescriptor event, self_clock_event(period_ns));
    constexpr std::size_t kMiB = std::size_t{1} << 20;
    constexpr std::size_t kWholeWarmUp = 16 * kMiB;
    ChaseBuffer buf(64 * kMiB);
    if (!buf.base) return Error::from_errno(errno, "mapping 64 MiB to time a pointer chase (free some memory)");
    std::vector<std::uint32_t> order;
    std::uint64_t seed = 1;
    std::vector<store::ChaseLatency> out;
    for (std::size_t bytes = kMiB; bytes <= buf.size; bytes *= 4) {
        link_chase(buf.base, bytes, order, seed);
        // The steady state calc times is a program chasing the same span again
        // and again: each line was last touched a whole span ago. Right after
        // link_chase, the lines it wrote last are still in the caches and the
        // TLB's walk caches: a warm-up of 2,000 steps from an arbitrary line
        // read 41-66 ns at 4 MiB where the steady state is 18-22 (AMD EPYC
        // VM), 51-93 ns at 16 MiB where it is 145 and a program's chase took
        // 131 (16-CPU Intel Xeon VM, 300 MiB of L3). So start where link_chase
        // began writing, and warm up by one whole traversal, unsampled, up to
        // 16 MiB; past that the 2,000 steps suffice (the lines ahead were
        // written before 60 MiB of others) and a traversal would cost 0.2 s.
        void** p = reinterpret_cast<void**>(buf.base + std::size_t{order[0]} * 64);
        chase_ns(p, bytes <= kWholeWarmUp ? static_cast<long>(bytes / 64) : 2000);
        std::vector<double> ns;
        for (int r = 0; r < rounds; ++r) {
            if (ioctl(event.get(), PERF_EVENT_IOC_ENABLE, 0) != 0)
                return Error::from_errno(errno, "enabling the cpu-clock event that times the recorder's thread");
            ns.push_back(chase_ns(p, 20000));
            ioctl(event.get(), PERF_EVENT_IOC_DISABLE, 0);
        }
        ns.erase(std::remove(ns.begin(), ns.end(), 0.0), ns.end());
        if (ns.empty()) continue;
        std::sort(ns.begin(), ns.end());
        out.push_back({bytes, ns[ns.size() / 2], ns.front(), ns.back()});
    }
    return out;
}

std::vector<store::ChaseLatency> chase_where_command_ran(const std::vector<store::ChaseLatency>& before,
                                                        const std::vector<CpuChase>& after) {
    struct Pooled {
        double weighted_ns = 0, weight = 0, low = 0, high = 0;
        bool seen = false;
    };
    std::map<std::uint64_t, Pooled> by_size;
    for (const CpuChase& c : after) {
        if (!(c.weight > 0)) continue;
        for (const store::ChaseLatency& s : c.sizes) {
            Pooled& p = by_size[s.bytes];
            p.weighted_ns += c.weight * s.ns;
            p.weight += c.weight;
            p.low = p.seen ? std::min(p.low, s.ns_low) : s.ns_low;
            p.high = p.seen ? std::max(p.high, s.ns_high) : s.ns_high;
            p.seen = true;
        }
    }
    if (by_size.empty()) return before;
    std::vector<store::ChaseLatency> out;
    for (const auto& [bytes, p] : by_size) out.push_back({bytes, p.weighted_ns / p.weight, p.low, p.high});
    for (const store::ChaseLatency& b : before) {
        auto it = std::find_if(out.begin(), out.end(), [&](const store::ChaseLatency& a) { return a.bytes == b.bytes; });
        if (it == out.end()) {
            out.push_back(b);
            continue;
        }
        it->ns_low = std::min(it->ns_low, b.ns_low);
        it->ns_high = std::max(it->ns_high, b.ns_high);
    }
    std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.bytes < y.bytes; });
    return out;
}

Result<double> measure_sampled_cpu_mhz(std::uint64_t period_ns, int rounds) {
    ECPI_ASSIGN_OR_RETURN(FileDescriptor event, self_clock_event(period_ns));
    // 100 samples a round, so one more or fewer moves it by 1%, but at most
    // 50 ms (about 5 samples at 99 Hz, where sampling costs ~0.2% anyway).
    const double seconds = std::clamp(100.0 * static_cast<double>(period_ns) * 1e-9, 0.02, 0.05);
    const auto iterations = static_cast<long>(seconds * 4e9 / 8);
    std::vector<double> mhz;
    for (int r = 0; r < rounds; ++r) {
        if (ioctl(event.get(), PERF_EVENT_IOC_ENABLE, 0) != 0)
            return Error::from_errno(errno, "enabling the cpu-clock event that times the recorder's thread");
        const double waited_before = run_delay_seconds();
        const double wall_mhz = add_chain_mhz(iterations, CLOCK_MONOTONIC);
        const double waited = run_delay_seconds() - waited_before;
        ioctl(event.get(), PERF_EVENT_IOC_DISABLE, 0);
        mhz.push_back(on_cpu_mhz(wall_mhz, iterations, waited));
    }
    return median(std::move(mhz));
}

Result<std::vector<FileDescriptor>> open_sampling_events(const EventSpec& event, const std::vector<int>& cpus,
                                                         const SamplingEventOptions& options) {
    std::vector<FileDescriptor> fds;
    for (int cpu : cpus) {
        perf_event_attr attr{};
        attr.size = sizeof(attr);
        attr.type = event.type;
        attr.config = event.config;
        attr.sample_period = options.period;
        attr.disabled = 1;  // enabled when the BPF program is attached
        unsigned long flags = PERF_FLAG_FD_CLOEXEC;
        pid_t pid = -1;
        if (options.cgroup_fd >= 0) {
            pid = options.cgroup_fd;
            flags |= PERF_FLAG_PID_CGROUP;
        }
        long fd = perf_event_open(&attr, pid, cpu, -1, flags);
        if (fd < 0) return open_error(event, errno);
        fds.emplace_back(static_cast<int>(fd));
    }
    return fds;
}

Result<void> set_period(int fd, std::uint64_t period) {
    if (ioctl(fd, PERF_EVENT_IOC_PERIOD, &period) != 0) return Error::from_errno(errno, "setting sampling period");
    return ok();
}

Result<void> check_lbr_support() {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_CPU_CYCLES;
    attr.sample_period = 1'000'000;
    attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK;
    attr.branch_sample_type = PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_ANY;
    attr.exclude_kernel = 1;  // user branches only: what paranoid level 2 allows without CAP_PERFMON
    attr.exclude_hv = 1;
    attr.disabled = 1;        // opened to ask, never enabled
    const long fd = perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) {
        ::close(static_cast<int>(fd));
        return ok();
    }
    const int err = errno;
    constexpr const char* kAlternative = "use --source instrumented (programs built with 'ecpi flags paths')";
    if (hardware_missing(err))
        return Error(std::string("this machine has no last-branch records (LBR): ") + refusal_in_words(true, err) +
                         "; " + kAlternative,
                     err);
    // Permission or resources: the machine may have LBR, the recorder may not open it.
    return Error("opening last-branch records (LBR): " + refusal_in_words(true, err) + "; or " + kAlternative, err);
}

Result<SidebandReader> SidebandReader::open(const std::vector<int>& cpus, std::size_t pages_per_cpu) {
    SidebandReader reader;
    for (int cpu : cpus) {
        perf_event_attr attr{};
        attr.size = sizeof(attr);
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_DUMMY;
        attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
        attr.sample_id_all = 1;  // every record ends with {pid, tid, time}
        // Times on the samples' clock (bpf_ktime_get_ns): a sample taken before a
        // mapping was replaced is named with the mapping of its time (issue 29).
        attr.use_clockid = 1;
        attr.clockid = CLOCK_MONOTONIC;
        attr.mmap = 1;
        attr.mmap2 = 1;
        attr.comm = 1;
        attr.comm_exec = 1;
        attr.task = 1;
        attr.build_id = 1;  // mmap2 records carry the build id (Linux 5.12+)
        // No wakeup per record: the recorder reads the rings on its own tick
        // and never waits on them, and every wakeup is an irq_work (a
        // self-IPI, a VM exit under a hypervisor) in the context of the
        // process that forked, exec'd or mapped. The kernel's default wakes
        // at half the ring.
        long fd = perf_event_open(&attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EACCES || err == EPERM)
                return Error("opening the mmap side-band event: " + std::string(std::strerror(err)) +
                                 "; ecpi needs CAP_PERFMON (or root)",
                             err);
            return Error::from_errno(err, "opening the mmap side-band event on CPU " + std::to_string(cpu));
        }
        auto ring = PerfRing::map(FileDescriptor(static_cast<int>(fd)), pages_per_cpu,
                                  "the side-band ring buffer of CPU " + std::to_string(cpu));
        if (!ring.ok()) return ring.error();
        reader.rings_.push_back(std::move(*ring));
    }
    return reader;
}

void SidebandReader::drain(const SidebandHandler& handler) {
    struct Pending {
        std::uint64_t time;
        std::size_t offset;  // into scratch_
        std::size_t size;
    };
    std::vector<Pending> pending;
    scratch_.clear();
    for (auto& ring : rings_) {
        auto* meta = ring.meta();
        auto* data = ring.data();
        std::uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
        std::uint64_t tail = meta->data_tail;
        while (tail < head) {
            perf_event_header hdr;
            std::size_t pos = tail % ring.size();
            for (std::size_t i = 0; i < sizeof hdr; ++i)
                reinterpret_cast<std::uint8_t*>(&hdr)[i] = data[(pos + i) % ring.size()];
            if (hdr.size < sizeof hdr) break;  // corrupt: stop reading this ring
            std::size_t at = scratch_.size();
            scratch_.resize(at + hdr.size);
            for (std::size_t i = 0; i < hdr.size; ++i) scratch_[at + i] = data[(pos + i) % ring.size()];
            // sample_id trailer ends with the time for every record type we ask for.
            std::uint64_t time = 0;
            if (hdr.size >= sizeof hdr + 8) std::memcpy(&time, &scratch_[at + hdr.size - 8], 8);
            pending.push_back({time, at, hdr.size});
            tail += hdr.size;
        }
        __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
    }
    std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) { return a.time < b.time; });

    for (const auto& p : pending) {
        const std::uint8_t* rec = &scratch_[p.offset];
        perf_event_header hdr;
        std::memcpy(&hdr, rec, sizeof hdr);
        const std::uint8_t* body = rec + sizeof hdr;
        std::size_t body_size = hdr.size - sizeof hdr;
        auto u32_at = [&](std::size_t off) { std::uint32_t v; std::memcpy(&v, body + off, 4); return v; };
        auto u64_at = [&](std::size_t off) { std::uint64_t v; std::memcpy(&v, body + off, 8); return v; };
        constexpr std::size_t kTrailer = 16;  // {pid, tid, time}
        switch (hdr.type) {
        case PERF_RECORD_MMAP2: {
            // pid tid addr len pgoff {maj min ino ino_gen | bid_size res res bid[20]} prot flags filename
            constexpr std::size_t kFixed = 4 + 4 + 8 + 8 + 8 + 24 + 4 + 4;
            if (body_size < kFixed + kTrailer) break;
            std::string build_id;
            if (hdr.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
                std::uint8_t n = body[32];
                static const char* digits = "0123456789abcdef";
                for (std::uint8_t i = 0; i < n && i < 20; ++i) {
                    build_id.push_back(digits[body[36 + i] >> 4]);
                    build_id.push_back(digits[body[36 + i] & 0xf]);
                }
            }
            std::uint32_t prot = u32_at(56);
            if (!(prot & PROT_EXEC)) break;
            const char* name = reinterpret_cast<const char*>(body + kFixed);
            std::string path(name, strnlen(name, body_size - kFixed - kTrailer));
            if (handler.mmap) handler.mmap(u32_at(0), u64_at(8), u64_at(16), u64_at(24), path, build_id, p.time);
            break;
        }
        case PERF_RECORD_MMAP: {
            // Old-style record (no inode/build id); only for executable maps.
            constexpr std::size_t kFixed = 4 + 4 + 8 + 8 + 8;
            if (body_size < kFixed + kTrailer) break;
            const char* name = reinterpret_cast<const char*>(body + kFixed);
            std::string path(name, strnlen(name, body_size - kFixed - kTrailer));
            if (handler.mmap) handler.mmap(u32_at(0), u64_at(8), u64_at(16), u64_at(24), path, "", p.time);
            break;
        }
        case PERF_RECORD_COMM: {
            if (body_size < 8 + kTrailer) break;
            const char* name = reinterpret_cast<const char*>(body + 8);
            std::string comm(name, strnlen(name, body_size - 8 - kTrailer));
            bool exec = (hdr.misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
            // A thread renaming itself is not the process's name.
            if (handler.comm && (exec || u32_at(0) == u32_at(4))) handler.comm(u32_at(0), comm, exec);
            break;
        }
        case PERF_RECORD_FORK:
            if (body_size >= 16 && handler.fork) handler.fork(u32_at(0), u32_at(4));
            break;
        case PERF_RECORD_EXIT:
            // Only the thread-group leader's exit ends the process.
            if (body_size >= 16 && u32_at(0) == u32_at(8) && handler.exit) handler.exit(u32_at(0));
            break;
        case PERF_RECORD_LOST:
            if (body_size >= 16) lost_ += u64_at(8);
            break;
        default:
            break;
        }
    }
}

}  // namespace ecpi::loader
