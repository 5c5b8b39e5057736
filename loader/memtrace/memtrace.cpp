// Runs programs for `ecpi cachesim` (include/ecpi/loader/memtrace.h).
#include "ecpi/loader/memtrace.h"

#include <x86intrin.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

namespace ecpi::loader {

static_assert(sizeof(ecpi_rt_record) == 16);
static_assert(sizeof(ecpi_rt_ring) == 192);
static_assert(sizeof(ecpi_rt_module) == 264);
static_assert(offsetof(ecpi_rt_ring, tail) == 64);

int exit_code_of(int wait_status) {
    if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
    return 1;
}

std::string describe_wait_status(int wait_status) {
    if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
    if (WIFSIGNALED(wait_status)) return std::string("killed by signal ") + strsignal(WTERMSIG(wait_status));
    return "stopped";
}

namespace {

using Clock = std::chrono::steady_clock;

// A started program: reaped (and killed first, if still running) on destruction.
class Program {
public:
    Program() = default;
    Program(const Program&) = delete;
    Program& operator=(const Program&) = delete;
    ~Program() {
        if (pid_ > 0 && !status_) {
            ::kill(pid_, SIGKILL);
            int status;
            ::waitpid(pid_, &status, 0);
        }
    }

    // fork + exec with `env` added and `inherit` left open in the child.
    // Fails (with errno in words) when exec fails.
    Result<void> start(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                       const std::vector<int>& inherit) {
        if (argv.empty()) return Error("no command to run");
        int report[2];
        if (pipe2(report, O_CLOEXEC) != 0) return Error::from_errno(errno, "creating a pipe");
        started_ = Clock::now();
        pid_t pid = fork();
        if (pid < 0) {
            ::close(report[0]);
            ::close(report[1]);
            return Error::from_errno(errno, "forking to run '" + argv[0] + "'");
        }
        if (pid == 0) {
            ::close(report[0]);
            for (int fd : inherit) fcntl(fd, F_SETFD, 0);
            for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
            prctl_parent_death();
            std::vector<char*> args;
            for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            execvp(args[0], args.data());
            int err = errno;
            (void)!::write(report[1], &err, sizeof err);
            _exit(127);
        }
        ::close(report[1]);
        pid_ = pid;
        int err = 0;
        ssize_t n = ::read(report[0], &err, sizeof err);
        ::close(report[0]);
        if (n == sizeof err) {
            wait_blocking();
            return Error::from_errno(err, "running '" + argv[0] + "'");
        }
        return ok();
    }

    bool running() {
        if (status_) return false;
        int status;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) finish(status);
        return !status_;
    }
    void wait_blocking() {
        int status;
        if (!status_ && ::waitpid(pid_, &status, 0) == pid_) finish(status);
    }
    void kill(int sig) {
        if (!status_) ::kill(pid_, sig);
    }
    pid_t pid() const { return pid_; }
    ProgramExit exit() const { return ProgramExit{status_.value_or(0), seconds_}; }

private:
    static void prctl_parent_death();
    void finish(int status) {
        status_ = status;
        seconds_ = std::chrono::duration<double>(Clock::now() - started_).count();
    }
    pid_t pid_ = -1;
    std::optional<int> status_;
    double seconds_ = 0;
    Clock::time_point started_;
};

// The program dies with ecpi: a traced program whose consumer is gone
// would otherwise wait for ring space (the runtime also gives up on its own).
void Program::prctl_parent_death() { prctl(PR_SET_PDEATHSIG, SIGKILL); }

void sleep_briefly(long ns) {
    timespec ts{0, ns};
    nanosleep(&ts, nullptr);
}

// The drain loop's sleep when a pass found every ring empty: 1 ms. Under
// time and set sampling the records arrive in a thin steady stream (the
// windows, the sampled sets' references), so a pass finds a few and the
// next one none: with a 0.1 ms sleep hashtable's run at --sets 1/8 made
// up to 3,700 wake-ups (nanosleep, then waitpid before every pass: up to
// 11,400 calls) on the 2 CPUs it shares with the program
// (docs/CACHESIM.md, "Fixed costs at 1/8"). A ring of 2^18 records takes
// over 3 ms to fill even when every reference is recorded (hashtable's
// 70 M references a second), so 1 ms leaves the producer room; the last
// records wait at most 1 ms.
constexpr long kIdleSleepNs = 1'000'000;

// The shared control region (memfd), unmapped and closed on destruction.
class ControlRegion {
public:
    ~ControlRegion() {
        if (map_) munmap(map_, size_);
        if (fd_ >= 0) ::close(fd_);
    }
    Result<void> create(const MemtraceRunOptions& o) {
        if (o.ring_records == 0 || (o.ring_records & (o.ring_records - 1)) != 0)
            return Error("ring size " + std::to_string(o.ring_records) + " is not a power of two");
        size_ = ECPI_RT_RING_OFFSET(o.rings, o.ring_records);
        fd_ = memfd_create("ecpi-rt-control", MFD_CLOEXEC);
        if (fd_ < 0) return Error::from_errno(errno, "creating the control region (memfd_create)");
        if (ftruncate(fd_, off_t(size_)) != 0) return Error::from_errno(errno, "sizing the control region");
        void* m = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (m == MAP_FAILED) return Error::from_errno(errno, "mapping the control region");
        map_ = static_cast<char*>(m);
        auto* h = header();
        h->magic = ECPI_RT_MAGIC;
        h->abi_version = ECPI_RT_ABI_VERSION;
        h->header_size = sizeof(ecpi_rt_header);
        h->region_size = size_;
        h->features_requested = o.features;
        h->window = o.window;
        h->off_mean = o.off_mean;
        h->seed = o.seed;
        h->set_bitmap = o.set_bitmap;
        h->set_shift = o.set_shift;
        h->set_rotate_step = o.set_rotate_step;
        h->set_rotate_windows = o.set_rotate_windows;
        h->set_rotate_warm = o.set_rotate_warm;
        h->set_hit_mask = o.set_hit_mask;
        h->ring_count = o.rings;
        h->ring_records = o.ring_records;
        return ok();
    }
    ecpi_rt_header* header() { return reinterpret_cast<ecpi_rt_header*>(map_); }
    ecpi_rt_ring* ring(std::uint32_t i) {
        return reinterpret_cast<ecpi_rt_ring*>(map_ + ECPI_RT_RING_OFFSET(i, header()->ring_records));
    }
    int fd() const { return fd_; }

private:
    int fd_ = -1;
    char* map_ = nullptr;
    std::size_t size_ = 0;
};

// One pass over the claimed rings: hands each ring's new records to the
// handler (at most `budget` per ring, so one busy thread cannot starve the
// others) and frees their space. Returns how many records it handed over.
Result<std::uint64_t> drain_pass(ControlRegion& region, const RecordHandler& handler, std::uint64_t budget) {
    auto* h = region.header();
    std::uint32_t claimed = std::min(__atomic_load_n(&h->rings_claimed, __ATOMIC_ACQUIRE), h->ring_count);
    std::uint64_t total = 0;
    for (std::uint32_t i = 0; i < claimed; i++) {
        ecpi_rt_ring* r = region.ring(i);
        std::uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
        std::uint64_t tail = r->tail;
        if (head - tail > h->ring_records) return Error("ring " + std::to_string(i) + " is corrupt (head " + std::to_string(head) + ", tail " + std::to_string(tail) + ")");
        const auto* records = reinterpret_cast<const ecpi_rt_record*>(r + 1);
        std::uint64_t mask = h->ring_records - 1;
        std::uint64_t n = std::min(head - tail, budget);
        while (n > 0) {
            // Hand over the contiguous part up to the ring's end.
            std::uint64_t at = tail & mask;
            std::uint64_t chunk = std::min(n, h->ring_records - at);
            ECPI_RETURN_IF_ERROR(handler(i, std::span<const ecpi_rt_record>(records + at, chunk)));
            tail += chunk;
            n -= chunk;
            total += chunk;
            __atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
        }
    }
    return total;
}

// The time stamp counter beside CLOCK_MONOTONIC: the runtime stamps block
// entries with the TSC (cheap, no system call); the rate over the whole run
// turns ticks into nanoseconds (invariant TSC, constant rate on x86-64
// machines of the last fifteen years and in KVM guests).
struct TscStamp {
    std::uint64_t ticks = 0;
    std::uint64_t ns = 0;
};

TscStamp tsc_stamp() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return {__rdtsc(), std::uint64_t(ts.tv_sec) * 1'000'000'000ull + std::uint64_t(ts.tv_nsec)};
}

double tsc_rate_since(const TscStamp& start) {
    TscStamp now = tsc_stamp();
    if (now.ns <= start.ns || now.ticks <= start.ticks) return 0;
    return double(now.ticks - start.ticks) / double(now.ns - start.ns);
}

std::vector<LoadedModule> modules_of(const ecpi_rt_header* h) {
    std::vector<LoadedModule> out;
    std::uint32_t n = std::min<std::uint32_t>(h->module_count, ECPI_RT_MAX_MODULES);
    for (std::uint32_t i = 0; i < n; i++) {
        const auto& m = h->modules[i];
        LoadedModule lm;
        lm.path.assign(m.path, strnlen(m.path, sizeof m.path));
        lm.base = m.base;
        lm.start = m.start;
        lm.end = m.end;
        out.push_back(lm);
    }
    return out;
}

}  // namespace

Result<MemtraceRunResult> run_memtrace(const MemtraceRunOptions& options, const RecordHandler& handler,
                                       const std::atomic<bool>& stop) {
    ControlRegion region;
    ECPI_RETURN_IF_ERROR(region.create(options));
    const TscStamp started = tsc_stamp();
    Program program;
    ECPI_RETURN_IF_ERROR(program.start(options.argv, {{ECPI_RT_CONTROL_ENV, std::to_string(region.fd())}}, {region.fd()}));
    auto* h = region.header();
    bool signalled = false;
    bool ready = !options.on_runtime_ready;
    Result<void> failure = ok();
    bool running = true;
    bool was_empty = false;  // the last pass found every ring empty
    for (;;) {
        // Whether the program still runs, asked before a pass that follows
        // an empty one: when it had exited and this pass finds the rings
        // empty, every record was read. (A busy pass needs no waitpid.)
        if (was_empty) running = program.running();
        // The runtime fills in its modules before it claims a ring.
        if (!ready && __atomic_load_n(&h->rings_claimed, __ATOMIC_ACQUIRE) > 0) {
            ready = true;
            if (auto r = options.on_runtime_ready({modules_of(h), h->block_cost_ticks, std::uint32_t(program.pid())}); !r.ok()) {
                failure = r.error();
                break;
            }
        }
        // Nothing is read before that: a ring claimed since the check above
        // waits a pass, so the caller's start (cachesim's variables, the
        // paths' block cost) comes before the first record.
        auto drained = ready ? drain_pass(region, handler, 1u << 16) : Result<std::uint64_t>(std::uint64_t{0});
        if (!drained.ok()) {
            failure = drained.error();
            break;
        }
        if (*drained == 0) {
            if (!running) break;  // exited and every ring is empty
            sleep_briefly(kIdleSleepNs);
        }
        was_empty = *drained == 0;
        if (stop.load() && !signalled) {
            program.kill(SIGTERM);
            signalled = true;
        }
    }
    // Producers must never wait for a consumer that stopped reading.
    __atomic_store_n(&h->consumer_gone, 1, __ATOMIC_RELEASE);
    if (!failure.ok()) {
        program.kill(SIGKILL);
        program.wait_blocking();
        return failure.error().with_context("reading the program's trace");
    }
    program.wait_blocking();
    MemtraceRunResult result;
    result.exit = program.exit();
    result.runtime_active = (h->features_active & options.features) == options.features;
    result.block_cost_ticks = h->block_cost_ticks;
    result.tsc_ticks_per_ns = tsc_rate_since(started);
    result.runtime_error.assign(h->runtime_error, strnlen(h->runtime_error, sizeof h->runtime_error));
    result.modules = modules_of(h);
    result.threads_without_ring = h->threads_without_ring;
    result.producer_stall_seconds = double(h->stall_ns) / 1e9;
    std::uint32_t claimed = std::min(h->rings_claimed, h->ring_count);
    for (std::uint32_t i = 0; i < claimed; i++) result.dropped_records += region.ring(i)->dropped;
    return result;
}

// ---------------------------------------------------------------- valgrind

namespace {

// The file-backed mappings of a process, one module per path (the mapping of
// file offset 0 gives the start; the ELF's first PT_LOAD gives the bias).
void read_maps(pid_t pid, std::map<std::string, LoadedModule>& modules) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string range, perms, offset, dev, inode, path;
        if (!(ls >> range >> perms >> offset >> dev >> inode)) continue;
        std::getline(ls >> std::ws, path);
        if (path.empty() || path[0] != '/') continue;
        auto dash = range.find('-');
        if (dash == std::string::npos) continue;
        std::uint64_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
        std::uint64_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
        std::uint64_t off = std::stoull(offset, nullptr, 16);
        auto [it, fresh] = modules.try_emplace(path);
        LoadedModule& m = it->second;
        if (fresh) {
            m.path = path;
            m.bias_known = false;
            m.start = lo;
            m.end = hi;
        }
        if (off == 0) m.start = lo;
        m.end = std::max(m.end, hi);
    }
}

}  // namespace

Result<LackeyRunResult> run_lackey(const std::vector<std::string>& argv,
                                   const std::function<Result<void>(std::string_view text)>& on_text,
                                   const std::atomic<bool>& stop) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Error::from_errno(errno, "creating a pipe for valgrind's trace");
    // A large pipe, read in large gulps: lackey writes a line at a time, and
    // waking up for each would cost more than simulating it.
    fcntl(pipe_fds[0], F_SETPIPE_SZ, 1 << 20);
    std::vector<std::string> args = {"valgrind", "--tool=lackey", "--trace-mem=yes",
                                     "--log-fd=" + std::to_string(pipe_fds[1]), "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    Program program;
    auto started = program.start(args, {}, {pipe_fds[1]});
    ::close(pipe_fds[1]);
    if (!started.ok()) {
        ::close(pipe_fds[0]);
        if (started.error().errno_value() == ENOENT)
            return Error("valgrind is not installed (install Debian's 'valgrind' package, or run 'make deps')");
        return started.error();
    }
    std::map<std::string, LoadedModule> modules;
    std::vector<char> buffer(1 << 20);
    auto last_maps = Clock::now() - std::chrono::seconds(1);
    Result<void> failure = ok();
    bool signalled = false;
    for (;;) {
        ssize_t n = ::read(pipe_fds[0], buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            failure = Error::from_errno(errno, "reading valgrind's trace");
            break;
        }
        if (n == 0) break;  // valgrind closed its log: the program ended
        if (n < (1 << 16)) sleep_briefly(2'000'000);
        if (Clock::now() - last_maps > std::chrono::milliseconds(100)) {
            read_maps(program.pid(), modules);
            last_maps = Clock::now();
        }
        auto r = on_text(std::string_view(buffer.data(), std::size_t(n)));
        if (!r.ok()) {
            failure = r.error();
            break;
        }
        if (stop.load() && !signalled) {
            program.kill(SIGTERM);
            signalled = true;
        }
    }
    ::close(pipe_fds[0]);
    if (!failure.ok()) {
        program.kill(SIGKILL);
        program.wait_blocking();
        return failure.error();
    }
    program.wait_blocking();
    LackeyRunResult result;
    result.exit = program.exit();
    for (auto& [path, m] : modules) result.modules.push_back(m);
    return result;
}

}  // namespace ecpi::loader
