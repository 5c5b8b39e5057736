#include "ecpi/loader/recorder.h"

#include <fcntl.h>
#include <malloc.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "ecpi/loader/budget.h"
#include "ecpi/loader/control.h"
#include "ecpi/loader/kernel_idle.h"
#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/process_table.h"
#include "ecpi/loader/sampler.h"
#include "ecpi/store/profile.h"

namespace ecpi::loader {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t kKernelImageIndex = 0xfffffff0u;
constexpr std::uint32_t kUnknownImageIndex = 0xfffffff1u;
constexpr std::uint64_t kKernelSpaceStart = 0xffff800000000000ull;
constexpr auto kTick = std::chrono::milliseconds(50);

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

std::string errno_text(int err) { return std::strerror(err); }

// Reads the kernel's text start once; kernel samples are stored relative to it.
struct KernelBase {
    std::uint64_t text = 0;
    std::string error;
};

// The child of `record -- COMMAND`: forked stopped on a pipe so it can be
// tracked before its first instruction, then released to exec.
class ChildProcess {
public:
    ~ChildProcess() {
        if (release_fd_ >= 0) ::close(release_fd_);
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            int status;
            ::waitpid(pid_, &status, 0);
        }
    }

    Result<void> spawn(const std::vector<std::string>& argv) {
        int release[2], report[2];
        if (pipe2(release, O_CLOEXEC) != 0) return Error::from_errno(errno, "creating a pipe");
        if (pipe2(report, O_CLOEXEC) != 0) {
            ::close(release[0]);
            ::close(release[1]);
            return Error::from_errno(errno, "creating a pipe");
        }
        pid_t pid = fork();
        if (pid < 0) return Error::from_errno(errno, "forking to run '" + argv[0] + "'");
        if (pid == 0) {
            ::close(release[1]);
            ::close(report[0]);
            char go;
            while (::read(release[0], &go, 1) < 0 && errno == EINTR) {
            }
            std::vector<char*> args;
            for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            execvp(args[0], args.data());
            int err = errno;
            [[maybe_unused]] auto n = ::write(report[1], &err, sizeof err);
            _exit(127);
        }
        ::close(release[0]);
        ::close(report[1]);
        pid_ = pid;
        release_fd_ = release[1];
        report_fd_ = report[0];
        command_ = argv[0];
        return ok();
    }

    // Lets the child exec; fails when exec failed.
    Result<void> release() {
        [[maybe_unused]] auto n = ::write(release_fd_, "x", 1);
        ::close(release_fd_);
        release_fd_ = -1;
        int err = 0;
        ssize_t got = ::read(report_fd_, &err, sizeof err);
        ::close(report_fd_);
        report_fd_ = -1;
        if (got == static_cast<ssize_t>(sizeof err))
            return Error("cannot run '" + command_ + "': " + errno_text(err) +
                         (err == ENOENT ? " (check the command name and PATH)" : ""));
        return ok();
    }

    // The exit status when the child has exited (128+signal when killed).
    std::optional<int> poll() {
        if (pid_ <= 0 || reaped_) return status_;
        int status;
        pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            reaped_ = true;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        return status_;
    }

    void terminate() {
        if (pid_ > 0 && !reaped_) ::kill(pid_, SIGTERM);
    }

    std::optional<int> wait() {
        if (pid_ > 0 && !reaped_) {
            int status;
            if (::waitpid(pid_, &status, 0) == pid_) {
                reaped_ = true;
                status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
        }
        return status_;
    }

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
std::vector<std::uint32_t> existing_descendants(const std::vector<std::uint32_t>& roots) {
    std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> children;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string text;
        std::getline(stat, text);
        auto close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::uint32_t ppid = 0;
        char state;
        if (std::sscanf(text.c_str() + close + 1, " %c %u", &state, &ppid) != 2) continue;
        children[ppid].push_back(static_cast<std::uint32_t>(std::stoul(name)));
    }
    std::vector<std::uint32_t> out, work(roots);
    std::unordered_set<std::uint32_t> seen(roots.begin(), roots.end());
    while (!work.empty()) {
        auto p = work.back();
        work.pop_back();
        for (auto c : children[p]) {
            if (seen.insert(c).second) {
                out.push_back(c);
                work.push_back(c);
            }
        }
    }
    return out;
}

// A process may exit between open and read: read() then fails with ESRCH,
// which libstdc++'s stream buffers throw from underflow through
// istreambuf_iterator (it stopped the daemon under a burst of short-lived
// processes). Plain read(), bounded, and "" when the process is gone.
std::string read_cmdline(std::uint32_t pid) {
    constexpr std::size_t kMaxCmdline = 64 << 10;
    const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string s;
    char buf[4096];
    while (s.size() < kMaxCmdline) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        s.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    if (s.size() > kMaxCmdline) s.resize(kMaxCmdline);
    std::replace(s.begin(), s.end(), '\0', ' ');
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

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
    Result<void> setup();
    Result<void> drain_cycle();
    void drain_sideband();
    void consume_ringbuf();
    void resolve_pending();
    void resolve_registers();
    Result<void> flush_registers();
    std::uint32_t registers_ringbuf_bytes() const;
    Result<void> flush();
    void jitter_periods();
    void take_idle_counts();
    void set_frequency(std::uint64_t hz);
    void measure_sampled_clock();
    Result<void> calibrate_budget();
    void recalibrate_if_due(Clock::time_point now);
    Result<std::string> start_new_epoch();
    Result<void> new_epoch_if_periods_differ();
    nlohmann::json sampling_json() const;
    std::string handle_control(const std::string& request);
    nlohmann::json status_json();
    void enforce_limits();
    void check_cgroups();
    std::vector<std::uint64_t> total_samples_;      // per event, resolved so far
    std::vector<std::uint64_t> interval_base_;      // total_samples_ at the previous drain
    std::pair<std::uint32_t, std::uint64_t> resolve_pc(std::uint32_t pid, std::uint64_t pc, bool kernel);

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
    std::vector<std::vector<std::uint64_t>> flushed_idle_;  // per event, per CPU: idle samples already written
    KernelIdleClock kernel_idle_;  // the kernel's idle time per CPU, written at each flush
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
    CpuInfo cpu_;
    double mhz_ = 0;
    double measured_mhz_ = 0;  // measure_cpu_mhz() before sampling starts
    double sampled_mhz_ = 0;   // measure_sampled_cpu_mhz() at the first clock event's period
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
};

std::pair<std::uint32_t, std::uint64_t> Session::resolve_pc(std::uint32_t pid, std::uint64_t pc, bool kernel) {
    if (kernel || pc >= kKernelSpaceStart) return {kKernelImageIndex, pc - kernel_.text};
    if (auto r = processes_.resolve(pid, pc)) return {r->image, r->offset};
    return {kUnknownImageIndex, pc};
}

Result<void> Session::setup() {
    if (options_.pids.empty() && options_.command.empty() && options_.cgroups.empty())  // idle is machine-wide
        if (auto started = kernel_idle_.start(); !started.ok()) warn_once(started.error().message());
    ECPI_ASSIGN_OR_RETURN(auto db, store::Database::open(options_.database, store::Database::Mode::kCreate));
    db_.emplace(std::move(db));
    ECPI_ASSIGN_OR_RETURN(epoch_, db_->current_epoch());
    summary_.epoch = epoch_;
    if (!options_.control_socket.empty()) {
        ECPI_ASSIGN_OR_RETURN(auto server, ControlServer::listen(options_.control_socket));
        control_.emplace(std::move(server));
    }

    for (const auto& name : options_.events) {
        ECPI_ASSIGN_OR_RETURN(auto spec, parse_event(name));
        if (std::any_of(events_.begin(), events_.end(), [&](const EventSpec& e) { return e.name == spec.name; }))
            return Error("event '" + name + "' is given twice");
        events_.push_back(spec);
    }
    cpu_ = read_cpuinfo();
    mhz_ = cpu_.mhz;
    measured_mhz_ = measure_cpu_mhz();  // ~20 ms, before any sampling disturbs it
    set_frequency(options_.frequency);  // the budget's calibration may change it once the sampler is loaded
    unflushed_meta_.assign(events_.size(), {});
    flushed_lost_.assign(events_.size(), 0);
    registers_.assign(events_.size(), {});
    flushed_registers_lost_.assign(events_.size(), 0);
    total_samples_.assign(events_.size(), 0);
    interval_base_.assign(events_.size(), 0);

    auto text = kernel_text_address();
    if (text.ok()) kernel_.text = *text;
    else kernel_.error = text.error().message();
    if (!kernel_.error.empty()) warn_once("kernel samples are stored unrebased: " + kernel_.error);

    ECPI_ASSIGN_OR_RETURN(cpus_, online_cpus());

    // Save the vDSO so samples in it (clock_gettime, ...) get symbols later.
    {
        auto tmp = options_.database / (".vdso-" + std::to_string(getpid()));
        auto bid = save_vdso(tmp);
        if (bid.ok()) {
            auto cached = db_->cache_image(*bid, tmp);
            if (cached.ok()) processes_.set_vdso_build_id(*bid);
            else warn_once("cannot save the vDSO: " + cached.error().message());
        } else {
            warn_once("cannot save the vDSO: " + bid.error().message());
        }
        std::error_code ec;
        std::filesystem::remove(tmp, ec);
    }

    for (const auto& name : options_.cgroups) {
        std::filesystem::path cg = name;
        if (cg.is_relative()) cg = std::filesystem::path("/sys/fs/cgroup") / cg;
        int fd = ::open(cg.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return Error("opening cgroup " + cg.string() + ": " + std::strerror(errno) +
                         "; --cgroup needs a cgroup v2 directory such as /sys/fs/cgroup/system.slice/x.service");
        cgroups_.emplace_back(cg, FileDescriptor(fd));
    }
    for (auto pid : options_.pids) {
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            return Error("no process with pid " + std::to_string(pid) + " (check the pid with `ps`)");
    }

    // Side-band records first, so no mmap between the /proc scan and the
    // first sample goes unseen.
    ECPI_ASSIGN_OR_RETURN(auto sideband, SidebandReader::open(cpus_));
    sideband_.emplace(std::move(sideband));

    processes_.new_image_hook = [this](const ImageInfo& image) {
        if (!image.elf_error.empty())
            warn_once("cannot read " + image.id.path + " (" + image.elf_error +
                      "); its samples are kept by file offset, unsymbolized");
        if (!image.foreign_namespace || image.id.build_id.empty() || !image.elf_error.empty()) return;
        if (!cached_build_ids_.insert(image.id.build_id).second) return;
        auto r = db_->cache_image(image.id.build_id, image.readable_path);
        if (!r.ok()) warn_once("cannot cache " + image.id.path + " for later symbolization: " + r.error().message());
    };

    SamplerOptions sopts;
    sopts.filter_tgids = !options_.pids.empty() || !options_.command.empty();
    sopts.capture_stacks = options_.call_graph;
    if (options_.exclude_self) sopts.exclude_tgid = static_cast<std::uint32_t>(getpid());
    sopts.table_entries = options_.table_entries;
    sopts.ringbuf_bytes = options_.ringbuf_bytes;
    sopts.registers_every = options_.registers_every;
    sopts.registers_ringbuf_bytes = registers_ringbuf_bytes();
    ECPI_ASSIGN_OR_RETURN(auto sampler, Sampler::load(sopts));
    sampler_.emplace(std::move(sampler));
    if (options_.overhead_budget_percent) {
        ECPI_RETURN_IF_ERROR(calibrate_budget());
        set_frequency(rate_choice_.hz);
    }
    ECPI_RETURN_IF_ERROR(new_epoch_if_periods_differ());
    measure_sampled_clock();

    if (!options_.command.empty()) {
        ECPI_RETURN_IF_ERROR(child_.spawn(options_.command));
        ECPI_RETURN_IF_ERROR(sampler_->track_tgid(static_cast<std::uint32_t>(child_.pid())));
        processes_.scan_proc(static_cast<std::uint32_t>(child_.pid()));
    } else if (!options_.pids.empty()) {
        for (auto pid : options_.pids) ECPI_RETURN_IF_ERROR(sampler_->track_tgid(pid));
        // The fork hook is attached: children started from now on are tracked
        // in the kernel; those started earlier are found in /proc.
        for (auto pid : existing_descendants(options_.pids)) ECPI_RETURN_IF_ERROR(sampler_->track_tgid(pid));
        for (auto pid : options_.pids) processes_.scan_proc(pid);
        for (auto pid : existing_descendants(options_.pids)) processes_.scan_proc(pid);
    } else {
        processes_.scan_all_proc();
    }

    for (std::size_t i = 0; i < events_.size(); ++i) {
        SamplingEventOptions eopts;
        eopts.period = mean_periods_[i];
        std::vector<int> cgroup_fds;
        for (const auto& [path, fd] : cgroups_) cgroup_fds.push_back(fd.get());
        if (cgroup_fds.empty()) cgroup_fds.push_back(-1);
        for (int cgroup_fd : cgroup_fds) {
            eopts.cgroup_fd = cgroup_fd;
            ECPI_ASSIGN_OR_RETURN(auto fds, open_sampling_events(events_[i], cpus_, eopts));
            ECPI_RETURN_IF_ERROR(sampler_->attach(static_cast<std::uint16_t>(i), std::move(fds)));
        }
    }
    if (!options_.command.empty()) ECPI_RETURN_IF_ERROR(child_.release());
    return ok();
}

void Session::set_frequency(std::uint64_t hz) {
    frequency_ = hz;
    mean_periods_.clear();
    for (const auto& e : events_) mean_periods_.push_back(mean_period(e, hz, mhz_));
}

// What a clock event's period is worth in cycles of the sampled program
// (docs/ACCURACY.md): timed under sampling at the same period, ~60 ms.
void Session::measure_sampled_clock() {
    for (std::size_t k = 0; k < events_.size(); ++k)
        if (events_[k].is_clock) {
            auto sampled = measure_sampled_cpu_mhz(mean_periods_[k]);
            if (sampled.ok()) sampled_mhz_ = *sampled;
            else warn_once("the clock rate under sampling is not recorded (ecpi calc falls back to the unsampled rate): " + sampled.error().message());
            return;
        }
}

// Issue 20: measures what one sample costs on this machine (about 0.5 s on
// one CPU) and sets the rate the budget affords. The handler must not filter
// the calibration out, so this process is tracked while it runs.
Result<void> Session::calibrate_budget() {
    const bool filtering = !options_.pids.empty() || !options_.command.empty();
    const auto self = static_cast<std::uint32_t>(getpid());
    if (filtering) ECPI_RETURN_IF_ERROR(sampler_->track_tgid(self));
    auto cost = measure_sample_cost(*sampler_);
    if (filtering) ECPI_RETURN_IF_ERROR(sampler_->untrack_tgid(self));
    if (!cost.ok()) return Error("calibrating the overhead budget: " + cost.error().message());
    sample_cost_ = *cost;
    const double budget = *options_.overhead_budget_percent;
    rate_choice_ = choose_rate(*cost, budget, events_.size());
    calibrated_unix_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    next_calibration_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.calibration_interval_s));
    char line[320];
    std::snprintf(line, sizeof line,
                  "overhead budget %.2f%%: one sample costs %.1f us (quartiles %.1f-%.1f us, %d pairs on CPU %d); "
                  "%llu Hz per CPU fits, an estimated %.2f%%",
                  budget, cost->median_us, cost->low_us, cost->high_us, cost->pairs, cost->cpu,
                  static_cast<unsigned long long>(rate_choice_.hz), rate_choice_.overhead_percent);
    log(line);
    if (rate_choice_.floor_over_budget) {
        std::snprintf(line, sizeof line,
                      "even the lowest rate, %llu Hz, costs an estimated %.2f%%, over the budget of %.2f%%: sampling at "
                      "%llu Hz anyway (raise --overhead-budget, or force a rate with -F)",
                      static_cast<unsigned long long>(kBudgetMinHz), rate_choice_.overhead_percent, budget,
                      static_cast<unsigned long long>(kBudgetMinHz));
        warn_once(line);
    }
    return ok();
}

// The daemon re-calibrates hourly and when the CPU count changes (a VM
// resized). A rate that moves by more than 20% starts a new epoch; smaller
// moves are noise and keep the rate.
void Session::recalibrate_if_due(Clock::time_point now) {
    auto online = online_cpus();
    const bool cpus_changed = online.ok() && online->size() != cpus_.size();
    if (now < next_calibration_ && !cpus_changed) return;
    if (cpus_changed)
        log("the number of online CPUs changed from " + std::to_string(cpus_.size()) + " to " +
            std::to_string(online->size()) + "; re-calibrating (only the CPUs online at start are sampled)");
    const std::uint64_t before = frequency_;
    if (auto r = calibrate_budget(); !r.ok()) {
        warn_once(r.error().message() + "; keeping " + std::to_string(before) + " Hz");
        next_calibration_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.calibration_interval_s));
        return;
    }
    if (cpus_changed) cpus_ = *online;
    const double moved = std::abs(static_cast<double>(rate_choice_.hz) - static_cast<double>(before)) / static_cast<double>(before);
    if (moved <= 0.2) {
        log("keeping " + std::to_string(before) + " Hz per CPU (the new estimate is within 20%)");
        return;
    }
    auto epoch = start_new_epoch();  // counts of the old period stay in the old epoch
    if (!epoch.ok()) {
        warn_once("cannot start a new epoch for the new rate (" + epoch.error().message() + "); keeping " +
                  std::to_string(before) + " Hz");
        return;
    }
    set_frequency(rate_choice_.hz);
    for (std::size_t i = 0; i < events_.size(); ++i)
        for (int fd : sampler_->event_fds(static_cast<std::uint16_t>(i)))
            if (auto r = set_period(fd, mean_periods_[i]); !r.ok()) warn_once("cannot change the sampling rate: " + r.error().message());
    measure_sampled_clock();
    log("sampling rate changed from " + std::to_string(before) + " to " + std::to_string(frequency_) +
        " Hz per CPU; recording into epoch " + *epoch);
}

// DCPI 4.1.1: a randomized sampling period keeps samples from falling in
// lock step with periodic work. The period of each event on each CPU is
// redrawn every tick, uniformly within +-10% of the mean.
void Session::jitter_periods() {
    std::uniform_real_distribution<double> factor(0.9, 1.1);
    for (std::size_t i = 0; i < events_.size(); ++i) {
        for (int fd : sampler_->event_fds(static_cast<std::uint16_t>(i))) {
            auto period = static_cast<std::uint64_t>(static_cast<double>(mean_periods_[i]) * factor(rng_));
            auto r = set_period(fd, std::max<std::uint64_t>(period, 1));
            if (!r.ok()) warn_once("period randomization disabled: " + r.error().message());
        }
    }
}

// The register ring holds at least 4 s of snapshots at the sampling rate on
// every CPU (the ring is read every tick; a flush can hold the loop up for
// a while), so a one-shot recording loses none: 4999 Hz on 2 CPUs with every
// sample is 1.7 MB/s, an 8 MB ring. A page when snapshots are off.
std::uint32_t Session::registers_ringbuf_bytes() const {
    constexpr std::uint64_t kPage = 4096, kMinBytes = 256 << 10, kMaxBytes = 256u << 20;
    constexpr double kSeconds = 4.0, kRecordBytes = 160 + 8;  // record + ring-buffer header
    if (options_.registers_every == 0) return kPage;
    const double rate = static_cast<double>(options_.frequency) * static_cast<double>(std::max<std::size_t>(1, cpus_.size())) *
                        static_cast<double>(std::max<std::size_t>(1, options_.events.size())) /
                        static_cast<double>(options_.registers_every);
    const auto wanted = static_cast<std::uint64_t>(rate * kRecordBytes * kSeconds);
    std::uint64_t bytes = kMinBytes;
    while (bytes < wanted && bytes < kMaxBytes) bytes <<= 1;
    return static_cast<std::uint32_t>(bytes);
}

void Session::consume_ringbuf() {
    auto r = sampler_->drain_ringbuf(pending_flat_, pending_stacks_, pending_registers_);
    if (!r.ok()) warn_once(r.error().message());
}

// DCPI 5.4: sort raw samples by (pid, pc) before the image look-ups, so each
// process's mappings are searched in address order.
void Session::resolve_pending() {
    std::sort(pending_flat_.begin(), pending_flat_.end(), [](const RawSample& a, const RawSample& b) {
        return std::tie(a.tgid, a.pc) < std::tie(b.tgid, b.pc);
    });
    auto add_flat = [&](std::uint16_t event, std::uint32_t pid, std::uint64_t pc, bool kernel, std::uint64_t n) {
        auto [image, offset] = resolve_pc(pid, pc, kernel);
        flat_[{event, image, pid, offset}] += n;
        auto& meta = unflushed_meta_[event];
        meta.samples += n;
        total_samples_[event] += n;
        if (image == kUnknownImageIndex) meta.unknown += n;
        pids_seen_.insert(pid);
    };
    for (const auto& s : pending_flat_) {
        if (s.event >= events_.size()) continue;
        add_flat(s.event, s.tgid, s.pc, s.kernel, s.count);
    }
    pending_flat_.clear();

    std::unordered_set<StackKey, StackKeyHash> distinct;
    for (const auto& s : pending_stacks_) {
        if (s.event >= events_.size()) continue;
        add_flat(s.event, s.tgid, s.pc, s.kernel, 1);
        StackKey key{s.event, s.tgid, {}};
        key.frames.reserve(s.kernel_ips.size() + s.user_ips.size());
        for (auto ip : s.kernel_ips) key.frames.push_back(resolve_pc(s.tgid, ip, true));
        for (auto ip : s.user_ips) key.frames.push_back(resolve_pc(s.tgid, ip, false));
        if (key.frames.empty()) key.frames.push_back(resolve_pc(s.tgid, s.pc, s.kernel));
        distinct.insert(key);
        stacks_[std::move(key)] += 1;
        ++summary_.stack_samples;
    }
    summary_.distinct_stacks_per_drain += distinct.size();
    pending_stacks_.clear();
    resolve_registers();
}

// Register snapshots map their pc like any user-mode sample; the snapshots
// are sorted by (tgid, pc) first, like the flat samples (DCPI 5.4).
void Session::resolve_registers() {
    std::sort(pending_registers_.begin(), pending_registers_.end(),
              [](const RawRegisterSample& a, const RawRegisterSample& b) {
                  return std::tie(a.tgid, a.pc) < std::tie(b.tgid, b.pc);
              });
    for (const auto& raw : pending_registers_) {
        if (raw.event >= events_.size()) continue;
        store::RegisterSample s;
        s.pid = raw.tgid;
        s.tid = raw.tid;
        s.time_ns = raw.time_ns;
        std::tie(s.image, s.offset) = resolve_pc(raw.tgid, raw.pc, false);
        s.regs = raw.regs;
        registers_[raw.event].push_back(s);
    }
    pending_registers_.clear();
}

// Side-band records only add mappings and mark exits (forgetting waits for
// reap_exited at a drain), so reading them at every tick is safe and keeps a
// burst of process creation from overflowing the kernel's ring.
void Session::drain_sideband() {
    sideband_->drain({
        [this](std::uint32_t pid, std::uint64_t start, std::uint64_t len, std::uint64_t pgoff, const std::string& path,
               const std::string& build_id) { processes_.on_mmap(pid, start, len, pgoff, path, build_id); },
        [this](std::uint32_t pid, const std::string& comm, bool exec) { processes_.on_comm(pid, comm, exec); },
        [this](std::uint32_t pid, std::uint32_t ppid) { processes_.on_fork(pid, ppid); },
        [this](std::uint32_t pid) { processes_.on_exit(pid); },
    });
}

Result<void> Session::drain_cycle() {
    // Order matters: flip the table first, then read the side-band records,
    // so every drained sample's mmap has been seen (it happened before).
    auto r = sampler_->drain_table(pending_flat_);
    consume_ringbuf();
    drain_sideband();
    // Remember names while the processes still exist.
    for (auto pid : pids_seen_) {
        if (process_meta_.count(pid)) continue;
        store::ProcessMeta meta;
        meta.comm = processes_.comm(pid);
        meta.cmdline = read_cmdline(pid);
        if (pid == 0) meta.comm = "swapper";
        process_meta_[pid] = meta;
    }
    resolve_pending();
    for (auto pid : pids_seen_) {
        auto& meta = process_meta_[pid];
        if (meta.comm.empty()) meta.comm = processes_.comm(pid);
        if (meta.cmdline.empty()) meta.cmdline = read_cmdline(pid);
    }
    processes_.reap_exited();
    ++summary_.drains;
    auto now = Clock::now();
    last_interval_s_ = std::chrono::duration<double>(now - last_drain_).count();
    last_drain_ = now;
    last_interval_samples_.assign(events_.size(), 0);
    for (std::size_t i = 0; i < events_.size(); ++i) {
        last_interval_samples_[i] = total_samples_[i] - interval_base_[i];
        interval_base_[i] = total_samples_[i];
    }
    return r;
}

Result<void> Session::flush() {
    // Lost counts are cumulative in the kernel: store the increase.
    auto counters = sampler_->counters();
    if (counters.ok()) {
        for (std::size_t i = 0; i < events_.size(); ++i) {
            auto lost = (*counters)[i].ringbuf_lost;
            unflushed_meta_[i].lost += lost - flushed_lost_[i];
            flushed_lost_[i] = lost;
            const auto registers_lost = (*counters)[i].registers_lost;
            unflushed_meta_[i].registers_lost += registers_lost - flushed_registers_lost_[i];
            flushed_registers_lost_[i] = registers_lost;
        }
    }
    take_idle_counts();
    // Group the flat samples into one ImageProfile per (image, event).
    std::map<std::pair<std::uint32_t, std::uint16_t>, std::map<std::uint32_t, std::map<std::uint64_t, std::uint64_t>>>
        grouped;
    for (const auto& [k, n] : flat_) grouped[{k.image, k.event}][k.pid][k.offset] += n;

    auto image_id = [&](std::uint32_t index) -> store::ImageId {
        if (index == kKernelImageIndex) return {store::kKernelImage, ""};
        if (index == kUnknownImageIndex) return {store::kUnknownImage, ""};
        return processes_.images()[index].id;
    };
    std::string first_error;
    std::unordered_map<FlatKey, std::uint64_t, FlatKeyHash> unwritten;
    for (const auto& [key, by_pid] : grouped) {
        store::ImageProfile profile;
        profile.image = image_id(key.first);
        profile.event = events_[key.second].name;
        profile.period = mean_periods_[key.second];
        for (const auto& [pid, offsets] : by_pid) {
            store::ProcessCounts pc;
            pc.pid = pid;
            for (const auto& [off, n] : offsets) pc.counts.push_back({off, n});
            profile.processes.push_back(std::move(pc));
        }
        auto r = db_->merge(epoch_, profile);
        if (!r.ok()) {
            if (first_error.empty()) first_error = r.error().message();
            // Keep the samples for the next flush rather than losing them.
            for (const auto& [pid, offsets] : by_pid)
                for (const auto& [off, n] : offsets) unwritten[{key.second, key.first, pid, off}] += n;
        }
    }
    flat_ = std::move(unwritten);

    if (!stacks_.empty()) {
        std::vector<store::StackProfile> per_event(events_.size());
        std::vector<std::map<std::uint32_t, std::uint32_t>> image_slots(events_.size());
        for (std::size_t i = 0; i < events_.size(); ++i) {
            per_event[i].event = events_[i].name;
            per_event[i].period = mean_periods_[i];
        }
        for (const auto& [key, n] : stacks_) {
            auto& sp = per_event[key.event];
            auto& slots = image_slots[key.event];
            store::StackSample sample;
            sample.pid = key.pid;
            sample.count = n;
            for (const auto& [img, off] : key.frames) {
                auto [it, inserted] = slots.emplace(img, static_cast<std::uint32_t>(sp.images.size()));
                if (inserted) sp.images.push_back(image_id(img));
                sample.frames.push_back({it->second, off});
            }
            sp.stacks.push_back(std::move(sample));
        }
        bool stacks_ok = true;
        for (const auto& sp : per_event) {
            if (sp.stacks.empty()) continue;
            auto r = db_->merge(epoch_, sp);
            if (!r.ok()) {
                stacks_ok = false;
                if (first_error.empty()) first_error = r.error().message();
            }
        }
        if (stacks_ok) stacks_.clear();
    }

    if (auto r = flush_registers(); !r.ok() && first_error.empty()) first_error = r.error().message();

    store::EpochMeta meta;
    for (std::size_t i = 0; i < events_.size(); ++i) {
        auto m = unflushed_meta_[i];
        m.period = mean_periods_[i];
        meta.events[events_[i].name] = m;
    }
    for (auto pid : pids_seen_) meta.processes[pid] = process_meta_[pid];
    utsname uts{};
    if (uname(&uts) == 0) {
        meta.hostname = uts.nodename;
        meta.kernel_release = uts.release;
    }
    meta.cpu_mhz = mhz_;
    meta.cpu_mhz_measured = measured_mhz_;
    meta.cpu_mhz_sampled = sampled_mhz_;
    meta.cpu_vendor = cpu_.vendor;
    meta.cpu_family = cpu_.family;
    meta.cpu_model = cpu_.model;
    meta.cpu_name = cpu_.name;
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    meta.first_sample_unix = now;  // merge keeps the earliest
    meta.last_update_unix = now;
    if (auto idle = kernel_idle_.pending(); idle.ok()) meta.idle_ns_per_cpu = std::move(*idle);
    else warn_once(idle.error().message());
    if (first_error.empty()) {
        auto r = db_->merge(epoch_, meta);
        if (!r.ok()) first_error = r.error().message();
        else {
            kernel_idle_.settle();
            for (std::size_t i = 0; i < events_.size(); ++i) {
                auto& e = summary_.events[i];
                e.samples += unflushed_meta_[i].samples;
                e.unknown += unflushed_meta_[i].unknown;
                e.lost += unflushed_meta_[i].lost;
                e.idle += unflushed_meta_[i].idle;
            }
            unflushed_meta_.assign(events_.size(), {});
            pids_seen_.clear();
            process_meta_.clear();  // names are kept on disk; memory stays bounded
        }
    }
    if (!first_error.empty()) return Error("writing to " + options_.database.string() + ": " + first_error);
    if (options_.merged) options_.merged();
    return ok();
}

// Idle samples (the CPU in its idle task, pid 0) are counted in the kernel
// per event and CPU and never aggregated by pc (issue 20): store the
// increase since the last flush in the epoch's metadata.
void Session::take_idle_counts() {
    auto idle = sampler_->idle_counts();
    if (!idle.ok()) {
        warn_once(idle.error().message());
        return;
    }
    flushed_idle_.resize(events_.size());
    for (std::size_t i = 0; i < events_.size() && i < idle->size(); ++i) {
        const auto& now = (*idle)[i];
        auto& before = flushed_idle_[i];
        before.resize(now.size(), 0);
        auto& meta = unflushed_meta_[i];
        if (meta.idle_per_cpu.size() < now.size()) meta.idle_per_cpu.resize(now.size(), 0);
        for (std::size_t cpu = 0; cpu < now.size(); ++cpu) {
            const std::uint64_t added = now[cpu] - before[cpu];
            meta.idle_per_cpu[cpu] += added;
            meta.idle += added;
            before[cpu] = now[cpu];
        }
    }
}

// One RegisterProfile per event, its image table built from the loader's
// image indices. Snapshots that could not be written stay for the next flush.
Result<void> Session::flush_registers() {
    auto image_id = [&](std::uint32_t index) -> store::ImageId {
        if (index == kKernelImageIndex) return {store::kKernelImage, ""};
        if (index == kUnknownImageIndex) return {store::kUnknownImage, ""};
        return processes_.images()[index].id;
    };
    std::string first_error;
    for (std::size_t i = 0; i < events_.size(); ++i) {
        if (registers_[i].empty()) continue;
        store::RegisterProfile profile;
        profile.event = events_[i].name;
        profile.period = mean_periods_[i];
        profile.every = options_.registers_every;
        // Snapshots come sorted by (process, pc): consecutive ones share
        // their image, so the last lookup is remembered.
        std::unordered_map<std::uint32_t, std::uint32_t> slots;
        std::vector<std::uint32_t> loader_index;  // per slot
        std::uint32_t last_image = UINT32_MAX, last_slot = 0;
        profile.samples = std::move(registers_[i]);
        for (store::RegisterSample& s : profile.samples) {
            if (s.image != last_image) {
                auto [it, inserted] = slots.emplace(s.image, static_cast<std::uint32_t>(profile.images.size()));
                if (inserted) {
                    profile.images.push_back(image_id(s.image));
                    loader_index.push_back(s.image);
                }
                last_image = s.image;
                last_slot = it->second;
            }
            s.image = last_slot;
        }
        auto r = db_->merge(epoch_, profile);
        if (!r.ok()) {
            // Kept for the next flush, with the loader's image indices back.
            for (store::RegisterSample& s : profile.samples) s.image = loader_index[s.image];
            registers_[i] = std::move(profile.samples);
            if (first_error.empty()) first_error = r.error().message();
            continue;
        }
        summary_.events[i].registers += profile.samples.size();
        registers_[i].clear();
    }
    if (!first_error.empty()) return Error(first_error);
    return ok();
}

std::uint64_t rss_bytes() {
    std::ifstream in("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    in >> size >> resident;
    return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

nlohmann::json Session::status_json() {
    double uptime = std::chrono::duration<double>(Clock::now() - started_).count();
    nlohmann::json events = nlohmann::json::array();
    auto counters = sampler_->counters();
    for (std::size_t i = 0; i < events_.size(); ++i) {
        const auto& e = summary_.events[i];
        std::uint64_t samples = total_samples_[i];
        std::uint64_t unknown = e.unknown + unflushed_meta_[i].unknown;
        nlohmann::json ev{{"event", events_[i].name},
                          {"period", mean_periods_[i]},
                          {"samples", samples},
                          {"samples_per_second", last_interval_s_ > 0 && i < last_interval_samples_.size()
                                                     ? static_cast<double>(last_interval_samples_[i]) / last_interval_s_
                                                     : 0.0},
                          {"unknown", unknown},
                          {"unknown_percent", samples ? 100.0 * static_cast<double>(unknown) / static_cast<double>(samples) : 0.0}};
        if (counters.ok()) {
            // Taken by the BPF program so far, drained or not: "samples"
            // moves only at each drain.
            ev["samples_taken"] = (*counters)[i].samples;
            ev["table_evictions"] = (*counters)[i].table_full;
            ev["ringbuf_lost"] = (*counters)[i].ringbuf_lost;
            ev["registers_lost"] = (*counters)[i].registers_lost;
        }
        ev["registers"] = e.registers + registers_[i].size();  // stored + waiting for the next flush
        events.push_back(ev);
    }
    // Zero unless kernel.bpf_stats_enabled=1.
    Sampler::ProgStats bpf_stats;
    if (auto st = sampler_->prog_stats(); st.ok()) bpf_stats = *st;
    return {{"schema", "ecpi.daemon.status"},
            {"version", 1},
            {"database", options_.database.string()},
            {"epoch", epoch_},
            {"uptime_seconds", uptime},
            {"cpu_percent", uptime > 0 ? 100.0 * cpu_seconds() / uptime : 0.0},
            {"rss_bytes", rss_bytes()},
            {"disk_bytes", db_->disk_bytes()},
            {"processes_tracked", processes_.process_count()},
            {"drains", summary_.drains},
            {"sideband_lost", sideband_->lost_records()},
            {"warnings", summary_.warnings.size()},
            {"bpf_run_count", bpf_stats.run_cnt},
            {"bpf_run_time_ns", bpf_stats.run_time_ns},
            {"sampling", sampling_json()},
            {"events", events}};
}

// The rate in force and, with an overhead budget, how it was chosen.
nlohmann::json Session::sampling_json() const {
    nlohmann::json j{{"frequency_hz", frequency_},
                     {"randomized", options_.randomize},
                     {"chosen_by", options_.overhead_budget_percent ? "overhead budget" : "-F"}};
    if (!options_.overhead_budget_percent || !sample_cost_) return j;
    const double seconds_to_next = std::chrono::duration<double>(next_calibration_ - Clock::now()).count();
    j["overhead_budget_percent"] = *options_.overhead_budget_percent;
    j["cost_per_sample_us"] = {{"median", sample_cost_->median_us},
                               {"low", sample_cost_->low_us},
                               {"high", sample_cost_->high_us},
                               {"pairs", sample_cost_->pairs},
                               {"calibration_hz", sample_cost_->hz},
                               {"cpu", sample_cost_->cpu}};
    const double per_hz = sample_cost_->median_us * 1e-4 * static_cast<double>(events_.size());
    j["estimated_overhead_percent"] = per_hz * static_cast<double>(frequency_);
    j["floor_over_budget"] = rate_choice_.floor_over_budget;
    j["range_hz"] = {kBudgetMinHz, kBudgetMaxHz};
    j["calibrated_unix"] = calibrated_unix_;
    if (options_.daemon) j["next_calibration_seconds"] = std::max(0.0, seconds_to_next);
    return j;
}

// Counts of different periods do not add (FORMAT.md §4): when the rate this
// recording chose (the overhead budget measures it anew at every start)
// gives an event a period other than the one the current epoch holds, the
// daemon and budget-chosen recordings continue in a new epoch; a rate the
// user forced with -F keeps the old behaviour (the merge names the clash).
Result<void> Session::new_epoch_if_periods_differ() {
    if (!options_.daemon && !options_.overhead_budget_percent) return ok();
    auto meta = db_->read_epoch_meta(epoch_);
    if (!meta.ok()) {
        warn_once("cannot read the current epoch's metadata (" + meta.error().message() + "); recording into a new epoch");
    } else {
        bool differ = false, close = true;
        std::vector<std::uint64_t> recorded = mean_periods_;
        for (std::size_t i = 0; i < events_.size(); ++i) {
            auto it = meta->events.find(events_[i].name);
            if (it == meta->events.end() || it->second.period == 0 || it->second.period == mean_periods_[i]) continue;
            differ = true;
            recorded[i] = it->second.period;
            const double ratio = static_cast<double>(mean_periods_[i]) / static_cast<double>(it->second.period);
            if (ratio < 0.8 || ratio > 1.2) close = false;
        }
        if (!differ) return ok();
        // A budget's rate measured again within 20% of the one the epoch was
        // recorded at is the same rate within the calibration's noise (as at
        // an hourly re-calibration): keep the epoch's periods and continue it.
        if (close && options_.overhead_budget_percent) {
            const double ratio = static_cast<double>(mean_periods_[0]) / static_cast<double>(recorded[0]);
            frequency_ = static_cast<std::uint64_t>(std::llround(static_cast<double>(frequency_) * ratio));
            mean_periods_ = recorded;
            log("continuing epoch " + epoch_ + " at its rate, " + std::to_string(frequency_) +
                " Hz per CPU (within 20% of the budget's)");
            return ok();
        }
    }
    const std::string old = epoch_;
    ECPI_ASSIGN_OR_RETURN(epoch_, db_->new_epoch());
    summary_.epoch = epoch_;
    log("epoch " + old + " was sampled at another period; recording into epoch " + epoch_);
    return ok();
}

// Drains and flushes the current epoch, then records into a new one; returns
// the closed epoch's name.
Result<std::string> Session::start_new_epoch() {
    auto drained = drain_cycle();
    auto flushed = flush();
    if (!drained.ok()) return drained.error();
    if (!flushed.ok()) return flushed.error();
    ECPI_ASSIGN_OR_RETURN(std::string next, db_->new_epoch());
    std::string closed = epoch_;
    epoch_ = next;
    summary_.epoch = epoch_;
    log("closed epoch " + closed + ", started epoch " + epoch_);
    return closed;
}

// One request line from `ecpi ctl`; the reply is one JSON line.
std::string Session::handle_control(const std::string& request) {
    auto error = [](const std::string& msg) { return nlohmann::json{{"error", msg}}.dump(); };
    if (request == "status") return status_json().dump();
    if (request == "flush") {
        auto drained = drain_cycle();
        auto flushed = flush();
        if (!drained.ok()) return error(drained.error().message());
        if (!flushed.ok()) return error(flushed.error().message());
        return nlohmann::json{{"schema", "ecpi.daemon.flush"}, {"version", 1}, {"ok", true}, {"epoch", epoch_}}.dump();
    }
    if (request == "epoch") {
        auto closed = start_new_epoch();
        if (!closed.ok()) return error(closed.error().message());
        return nlohmann::json{{"schema", "ecpi.daemon.epoch"}, {"version", 1}, {"ok", true}, {"epoch", epoch_},
                              {"closed_epoch", *closed}}
            .dump();
    }
    return error("unknown request '" + request + "' (requests: status, flush, epoch)");
}

// Memory: what a drain accumulates is written at every merge, exited
// processes are reaped; what is left is returned to the system. Disk: the
// oldest epochs go first.
void Session::enforce_limits() {
    malloc_trim(0);
    if (options_.max_memory_bytes) {
        auto rss = rss_bytes();
        if (rss > options_.max_memory_bytes && !memory_warned_) {
            memory_warned_ = true;
            warn_once("resident memory " + std::to_string(rss >> 20) + " MB exceeds --max-memory " +
                      std::to_string(options_.max_memory_bytes >> 20) + " MB (" +
                      std::to_string(processes_.process_count()) + " processes tracked)");
        } else if (rss <= options_.max_memory_bytes) {
            memory_warned_ = false;
        }
    }
    if (options_.max_disk_bytes) {
        auto bytes = db_->disk_bytes();
        while (bytes > options_.max_disk_bytes) {
            auto epochs = db_->epochs();
            if (!epochs.ok() || epochs->size() < 2) {
                warn_once("the current epoch alone holds " + std::to_string(bytes) + " bytes, over --max-disk; "
                          "start a new epoch with `ecpi ctl epoch` or raise --max-disk");
                break;
            }
            auto removed = db_->remove_epoch(epochs->front());
            if (!removed.ok()) {
                warn_once("cannot remove the oldest epoch: " + removed.error().message());
                break;
            }
            log("removed epoch " + epochs->front() + " (" + std::to_string(*removed) +
                " bytes) to stay under --max-disk");
            bytes = db_->disk_bytes();
        }
    }
}

void Session::check_cgroups() {
    for (const auto& [path, fd] : cgroups_) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
            warn_once("cgroup " + path.string() + " was removed; its processes are no longer sampled");
    }
}

Result<RecordSummary> Session::run() {
    auto started = Clock::now();
    auto setup_result = setup();
    if (!setup_result.ok()) return setup_result.error();
    for (std::size_t i = 0; i < events_.size(); ++i) summary_.events.push_back({events_[i].name, mean_periods_[i]});

    auto next_drain = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.drain_interval_s));
    auto next_flush = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.flush_interval_s));
    std::optional<Clock::time_point> deadline;
    if (options_.duration_s)
        deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*options_.duration_s));
    Error loop_error;
    bool failed = false;

    while (true) {
        std::this_thread::sleep_for(kTick);
        if (stop_.load()) {
            summary_.interrupted = true;
            break;
        }
        if (!options_.command.empty() && child_.poll()) break;
        auto now = Clock::now();
        if (deadline && now >= *deadline) break;
        if (options_.randomize) jitter_periods();
        consume_ringbuf();
        drain_sideband();
        if (control_) control_->serve([this](const std::string& request) { return handle_control(request); });
        if (now >= next_drain) {
            auto r = drain_cycle();
            if (!r.ok()) {
                loop_error = r.error();
                failed = true;
                break;
            }
            next_drain = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.drain_interval_s));
        }
        if (now >= next_flush) {
            auto r = flush();
            if (!r.ok()) warn_once(r.error().message() + " (will retry)");
            if (options_.daemon) {
                enforce_limits();
                check_cgroups();
                if (options_.overhead_budget_percent) recalibrate_if_due(now);
            }
            next_flush = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.flush_interval_s));
        }
    }

    // Final drain and flush: everything sampled so far reaches the disk.
    auto drained = drain_cycle();
    if (!drained.ok() && !failed) {
        loop_error = drained.error();
        failed = true;
    }
    auto counters = sampler_->counters();
    if (counters.ok())
        for (std::size_t i = 0; i < events_.size(); ++i) {
            summary_.events[i].spilled = (*counters)[i].table_full;
            summary_.events[i].taken = (*counters)[i].samples;
            summary_.events[i].registers_lost = (*counters)[i].registers_lost;
        }
    if (auto stats = sampler_->prog_stats(); stats.ok()) {
        summary_.bpf_run_time_ns = stats->run_time_ns;
        summary_.bpf_run_count = stats->run_cnt;
    }
    auto flushed = flush();
    summary_.sideband_lost = sideband_->lost_records();
    summary_.unknown_record_kinds = sampler_->unknown_record_kinds();
    if (summary_.unknown_record_kinds)
        warn_once(std::to_string(summary_.unknown_record_kinds) +
                  " ring-buffer records of an unknown kind were ignored (loader and BPF object disagree)");
    if (summary_.sideband_lost)
        warn_once(std::to_string(summary_.sideband_lost) +
                  " mmap/comm records were lost by the kernel; some samples may be [unknown]");
    sampler_.reset();  // detach before waiting for the command
    sideband_.reset();

    if (!options_.command.empty()) {
        if (summary_.interrupted || failed) child_.terminate();
        summary_.command_status = child_.wait();
    }
    summary_.frequency = frequency_;
    if (sample_cost_) {
        summary_.sample_cost_us = sample_cost_->median_us;
        summary_.sample_cost_low_us = sample_cost_->low_us;
        summary_.sample_cost_high_us = sample_cost_->high_us;
        summary_.estimated_overhead_percent =
            sample_cost_->median_us * 1e-4 * static_cast<double>(events_.size()) * static_cast<double>(frequency_);
    }
    summary_.loader_cpu_s = cpu_seconds();
    summary_.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
    if (failed) return loop_error;
    if (!flushed.ok()) return flushed.error();
    return summary_;
}

}  // namespace

std::vector<std::string> missing_capabilities() {
    if (geteuid() == 0) return {};
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &header, data) != 0) return {"CAP_BPF", "CAP_PERFMON"};
    auto has = [&](int cap) { return (data[cap / 32].effective & (1u << (cap % 32))) != 0; };
    constexpr int kCapSysAdmin = 21, kCapPerfmon = 38, kCapBpf = 39;
    if (has(kCapSysAdmin)) return {};
    std::vector<std::string> missing;
    if (!has(kCapBpf)) missing.push_back("CAP_BPF");
    if (!has(kCapPerfmon)) missing.push_back("CAP_PERFMON");
    return missing;
}

Result<RecordSummary> record(const RecordOptions& options, const std::atomic<bool>& stop) {
    auto missing = missing_capabilities();
    if (!missing.empty()) {
        std::string list;
        for (const auto& m : missing) list += (list.empty() ? "" : " and ") + m;
        return Error("recording needs " + list +
                     " (or root): run it with sudo, or grant them with `setcap cap_bpf,cap_perfmon+ep $(command -v ecpi)`",
                     EPERM);
    }
    Session session(options, stop);
    return session.run();
}

}  // namespace ecpi::loader
