// The session's setup and its sampling rate: the database, the events, the
// targets, the BPF sampler; the overhead budget's calibration and the
// period randomization.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "pinned_to_cpu.h"
#include "recorder_session.h"

namespace ecpi::loader::detail {

Result<void> Session::setup() {
    start_kernel_idle_clock();
    ECPI_RETURN_IF_ERROR(open_database());
    ECPI_RETURN_IF_ERROR(prepare_events());
    ECPI_RETURN_IF_ERROR(read_kernel_and_cpus());
    save_vdso_image();
    ECPI_RETURN_IF_ERROR(open_cgroups_and_check_pids());
    ECPI_RETURN_IF_ERROR(open_sideband());
    ECPI_RETURN_IF_ERROR(load_sampler());
    ECPI_RETURN_IF_ERROR(track_targets());
    start_unwinding();
    ECPI_RETURN_IF_ERROR(attach_events());
    if (!options_.command.empty()) ECPI_RETURN_IF_ERROR(child_.release());
    return ok();
}

// Idle is machine-wide: the kernel's idle time per CPU is kept only when the
// whole machine is recorded (issue 30: tickless idle CPUs take no samples).
void Session::start_kernel_idle_clock() {
    if (options_.pids.empty() && options_.command.empty() && options_.cgroups.empty())
        if (auto started = kernel_idle_.start(); !started.ok()) warn_once(started.error().message());
}

// The database, its current epoch, and the control socket when asked for.
Result<void> Session::open_database() {
    ECPI_ASSIGN_OR_RETURN(auto db, store::Database::open(options_.database, store::Database::Mode::kCreate));
    db_.emplace(std::move(db));
    ECPI_ASSIGN_OR_RETURN(epoch_, db_->current_epoch());
    summary_.epoch = epoch_;
    disk_bytes_at_start_ = db_->disk_bytes();
    if (!options_.control_socket.empty()) {
        ECPI_ASSIGN_OR_RETURN(auto server, ControlServer::listen(options_.control_socket));
        control_.emplace(std::move(server));
    }
    return ok();
}

// The events to sample, the clock rate they are timed by, and their counters.
Result<void> Session::prepare_events() {
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
    return ok();
}

// The kernel text start (kernel samples are stored relative to it) and the
// CPUs to sample.
Result<void> Session::read_kernel_and_cpus() {
    auto text = kernel_text_address();
    if (text.ok()) kernel_.text = *text;
    else kernel_.error = text.error().message();
    if (!kernel_.error.empty()) warn_once("kernel samples are stored unrebased: " + kernel_.error);

    ECPI_ASSIGN_OR_RETURN(cpus_, online_cpus());
    return ok();
}

// Saves the vDSO so samples in it (clock_gettime, ...) get symbols later.
void Session::save_vdso_image() {
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

// The --cgroup directories, opened; the --pid processes, checked to exist.
Result<void> Session::open_cgroups_and_check_pids() {
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
    return ok();
}

// Side-band records first, so no mmap between the /proc scan and the
// first sample goes unseen.
Result<void> Session::open_sideband() {
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
    return ok();
}

// The BPF sampler; with an overhead budget, the rate it affords; the epoch
// the rate records into.
Result<void> Session::load_sampler() {
    SamplerOptions sopts;
    sopts.filter_tgids = !options_.pids.empty() || !options_.command.empty();
    sopts.capture_stacks = options_.call_graph;
    sopts.unwind_cfi = options_.call_graph && !options_.call_graph_fp;
    if (sopts.unwind_cfi && !sopts.filter_tgids) sopts.unwind_rows = unwind_rows_for_system("/proc", sopts.unwind_rows);
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
    return ok();
}

// The processes to sample: the command (forked, not yet released), the
// --pid processes and their descendants, or every process.
Result<void> Session::track_targets() {
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
    return ok();
}

// -g with CFI (issue 29): unwind tables load on their own thread for the
// targets first (every process when there are none). A command's mappings
// are read at its exec (its first mmap), not now.
void Session::start_unwinding() {
    if (options_.call_graph && !options_.call_graph_fp)
        start_unwinder(unwinder_, *sampler_, unwind_targets(), options_.command.empty(), db_->path() / "unwind");
    flushed_stack_ends_.assign(events_.size(), {});
}

// The processes whose unwind tables load first (empty: every process).
std::vector<std::uint32_t> Session::unwind_targets() const {
    if (!options_.command.empty()) return {static_cast<std::uint32_t>(child_.pid())};
    auto pids = options_.pids;
    for (auto pid : existing_descendants(options_.pids)) pids.push_back(pid);
    return pids;
}

// One perf event per event, CPU and cgroup, attached to the sampler.
Result<void> Session::attach_events() {
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
            // What a load that misses costs the sampled program, for calc's
            // pointer chases (load_chain.h), which need register snapshots.
            // Only while a command waits to be released: with --pid or
            // --cgroup the target runs meanwhile, and the 0.3-0.6 s came out
            // of a 1.5 s --duration (tests/bpf/record_cgroup.sh).
            if (options_.registers_every > 0 && !options_.command.empty() && chase_period_ != mean_periods_[k]) {
                chase_period_ = mean_periods_[k];
                auto chase = measure_sampled_chase(mean_periods_[k]);
                if (chase.ok()) chase_latency_ = std::move(*chase);
                else warn_once("the pointer-chase latency is not recorded (ecpi calc cannot time pointer chases by it): " + chase.error().message());
            }
            return;
        }
}

// Where the command runs, once a tick (/proc/PID/stat's `processor`: the
// CPU its main thread last ran on), for time_chase_after_command.
void Session::note_command_cpu() {
    std::ifstream stat("/proc/" + std::to_string(child_.pid()) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return;
    const auto comm_end = text.rfind(')');  // the name may hold spaces and parentheses
    if (comm_end == std::string::npos) return;
    std::istringstream fields(text.substr(comm_end + 1));
    std::string field;
    for (int i = 3; i <= 39 && fields >> field; ++i) {
        if (i < 39) continue;
        char* end = nullptr;
        const long cpu = std::strtol(field.c_str(), &end, 10);
        if (end != field.c_str() && *end == '\0' && cpu >= 0 && cpu < CPU_SETSIZE) ++command_cpu_ticks_[static_cast<int>(cpu)];
    }
}

// The pointer chase timed again once the command has exited, pinned to each
// CPU it ran on for at least a tenth of its ticks (at most four): in a VM a
// step's time depends on the vCPU (this 2-CPU VM: 147 against 173 ns at
// 16 MiB unsampled, 300 against 440 under sampling; docs/ACCURACY.md, "The
// chase timed where the command ran"), and the measurement before the
// command ran wherever the recorder did. The command is gone and the last
// drain has run: the sampling events are stopped so that only the
// recorder's own event samples the chase, as before the command.
void Session::time_chase_after_command() {
    constexpr std::size_t kMostCpus = 4;
    if (chase_period_ == 0 || chase_latency_.empty() || options_.command.empty() || !child_.poll()) return;
    std::vector<std::pair<std::uint32_t, int>> ticks;
    std::uint32_t total = 0;
    for (const auto& [cpu, n] : command_cpu_ticks_) {
        ticks.push_back({n, cpu});
        total += n;
    }
    std::sort(ticks.rbegin(), ticks.rend());
    for (std::size_t k = 0; k < events_.size(); ++k)
        for (int fd : sampler_->event_fds(static_cast<std::uint16_t>(k))) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    std::vector<CpuChase> after;
    for (const auto& [n, cpu] : ticks) {
        if (after.size() == kMostCpus || n * 10 < total) break;
        PinnedToCpu pin(cpu);
        if (!pin.pinned()) continue;
        auto sizes = measure_sampled_chase(chase_period_);
        if (!sizes.ok()) {
            warn_once("the pointer chase was not timed on the CPUs the command ran on (calc uses the time from before "
                      "it): " + sizes.error().message());
            return;
        }
        after.push_back({cpu, static_cast<double>(n), std::move(*sizes)});
    }
    chase_latency_ = chase_where_command_ran(chase_latency_, after);
}

// Issue 20: measures what one sample costs on this machine and sets the
// rate the budget affords; issue 35: on up to four CPUs in step, until the
// cost is known to 10% (at most 16 CPU-seconds), pooled with the last
// calibrations of this boot, the rate chosen from the 95% upper bound. The
// handler must not filter the calibration out, so this process is tracked
// while it runs.
Result<void> Session::calibrate_budget() {
    budget_monitor_.wait();  // the check while running uses the same calibration event
    const bool filtering = !options_.pids.empty() || !options_.command.empty();
    const auto self = static_cast<std::uint32_t>(getpid());
    if (filtering) ECPI_RETURN_IF_ERROR(sampler_->track_tgid(self));
    CalibrationOptions calibration;
    calibration.cpus = calibration_cpus(cpus_);
    const double cpu_before = cpu_seconds();
    auto cost = measure_sample_cost(*sampler_, calibration);
    calibration_cpu_s_ += cpu_seconds() - cpu_before;  // reported apart from the daemon's own CPU
    if (filtering) ECPI_RETURN_IF_ERROR(sampler_->untrack_tgid(self));
    if (!cost.ok()) return Error("calibrating the overhead budget: " + cost.error().message());
    sample_cost_ = with_calibration_history(*cost, calibration);
    const double budget = *options_.overhead_budget_percent;
    rate_choice_ = choose_rate(*sample_cost_, budget, events_.size());
    calibrated_unix_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    next_calibration_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.calibration_interval_s));
    budget_monitor_.reset(*sample_cost_, Clock::now());
    log_calibration(*sample_cost_, budget);
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
    auto epoch = apply_rate(rate_choice_.hz);  // counts of the old period stay in the old epoch
    if (!epoch.ok()) {
        warn_once("cannot start a new epoch for the new rate (" + epoch.error().message() + "); keeping " +
                  std::to_string(before) + " Hz");
        return;
    }
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

}  // namespace ecpi::loader::detail
