#include "ecpi/loader/recorder.h"

#include <malloc.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "recorder_session.h"

namespace ecpi::loader {
namespace detail {

namespace {

// This process's resident memory and CPU time (user + system).
std::uint64_t rss_bytes() {
    std::ifstream in("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    in >> size >> resident;
    return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

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
    nlohmann::json status = {{"schema", "ecpi.daemon.status"},
            {"version", 1},
            {"database", options_.database.string()},
            {"epoch", epoch_},
            {"uptime_seconds", uptime},
            // The calibration's workload (seconds of busy CPUs at start and
            // hourly) is the budget's measurement, not the daemon's cost:
            // reported apart (issue 34).
            {"cpu_percent", uptime > 0 ? 100.0 * std::max(0.0, cpu_seconds() - calibration_cpu_s_) / uptime : 0.0},
            {"calibration_cpu_seconds", calibration_cpu_s_},
            {"rss_bytes", rss_bytes()},
            {"processes_tracked", processes_.process_count()},
            {"drains", summary_.drains},
            {"sideband_lost", sideband_->lost_records()},
            {"warnings", summary_.warnings.size()},
            {"bpf_run_count", bpf_stats.run_cnt},
            {"bpf_run_time_ns", bpf_stats.run_time_ns},
            {"sampling", sampling_json()},
            {"events", events},
            {"unwind", unwinder_ && counters.ok() ? unwind_status_json(unwinder_->stats(), *counters) : nlohmann::json()}};
    status.update(disk_json());
    return status;
}

// The rate in force and, with an overhead budget, how it was chosen.
nlohmann::json Session::sampling_json() const {
    nlohmann::json j{{"frequency_hz", frequency_},
                     {"randomized", options_.randomize},
                     {"chosen_by", options_.overhead_budget_percent ? "overhead budget" : "-F"}};
    if (!options_.overhead_budget_percent || !sample_cost_) return j;
    const double seconds_to_next = std::chrono::duration<double>(next_calibration_ - Clock::now()).count();
    j["overhead_budget_percent"] = *options_.overhead_budget_percent;
    j["cost_per_sample_us"] = sample_cost_json(*sample_cost_);
    const double per_hz = sample_cost_->bound_us * 1e-4 * static_cast<double>(events_.size());
    j["estimated_overhead_percent"] = per_hz * static_cast<double>(frequency_);
    if (options_.daemon) j["check"] = budget_monitor_.status_json();
    j["floor_over_budget"] = rate_choice_.floor_over_budget;
    j["range_hz"] = {kBudgetMinHz, kBudgetMaxHz};
    j["calibrated_unix"] = calibrated_unix_;
    if (options_.daemon) j["next_calibration_seconds"] = std::max(0.0, seconds_to_next);
    return j;
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

    bool failed = false;
    auto sampled = sample_until_done(started, failed);
    Error loop_error = sampled.ok() ? Error() : sampled.error();

    // Final drain and flush: everything sampled so far reaches the disk.
    if (unwinder_) unwinder_->finish();  // stack copies still waiting for tables are walked now
    auto drained = drain_cycle();
    if (!drained.ok() && !failed) {
        loop_error = drained.error();
        failed = true;
    }
    if (unwinder_) summary_.unwind = unwinder_summary(unwinder_->stats());
    take_final_counters();
    if (!failed && !summary_.interrupted) time_chase_after_command();
    auto flushed = flush();
    warn_lost_records();
    sampler_.reset();  // detach before waiting for the command
    sideband_.reset();

    if (!options_.command.empty()) {
        if (summary_.interrupted || failed) child_.terminate(signal_for_command());
        summary_.command_status = child_.wait();
    }
    summarize_rate();
    summary_.loader_cpu_s = cpu_seconds();
    summary_.wall_s = std::chrono::duration<double>(Clock::now() - started).count();
    if (failed) return loop_error;
    if (!flushed.ok()) return flushed.error();
    return summary_;
}

// A command still running when the recording stops gets the signal that
// stopped ecpi (`kill -INT` of ecpi ends it as Ctrl-C would: 130), SIGTERM
// otherwise (a failed drain, the duration).
int Session::signal_for_command() const {
    const int received = options_.stop_signal ? options_.stop_signal->load() : 0;
    return received > 0 ? received : SIGTERM;
}

// The run loop: every tick, until stopped, the command exits or the duration
// is over; drains and flushes at their intervals. A failed drain ends it
// (`failed`, the drain's error returned).
Result<void> Session::sample_until_done(Clock::time_point started, bool& failed) {
    auto next_drain = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.drain_interval_s));
    auto next_flush = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.flush_interval_s));
    std::optional<Clock::time_point> deadline;
    if (options_.duration_s)
        deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*options_.duration_s));

    while (true) {
        std::this_thread::sleep_for(kTick);
        if (stop_.load()) {
            summary_.interrupted = true;
            break;
        }
        if (!options_.command.empty() && child_.poll()) break;
        if (chase_period_ != 0) note_command_cpu();
        auto now = Clock::now();
        if (deadline && now >= *deadline) break;
        if (options_.randomize) jitter_periods();
        consume_ringbuf();
        drain_sideband();
        if (control_) control_->serve([this](const std::string& request) { return handle_control(request); });
        if (now >= next_drain) {
            auto r = drain_cycle();
            if (!r.ok()) {
                failed = true;
                return r.error();
            }
            next_drain = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.drain_interval_s));
        }
        if (now >= next_flush) {
            auto r = flush();
            if (!r.ok()) warn_once(r.error().message() + " (will retry)");
            if (options_.daemon) {
                close_epoch_if_due();
                enforce_limits();
                check_cgroups();
                if (options_.overhead_budget_percent) recalibrate_if_due(now);
                if (options_.overhead_budget_percent) check_budget_if_due(now);
            }
            next_flush = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.flush_interval_s));
        }
    }
    return ok();
}

// The kernel's counters at the end: spilled, taken, register snapshots lost,
// and the BPF program's run statistics.
void Session::take_final_counters() {
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
}

// Records the kernel lost or the loader could not read, counted and warned about.
void Session::warn_lost_records() {
    summary_.sideband_lost = sideband_->lost_records();
    summary_.unknown_record_kinds = sampler_->unknown_record_kinds();
    if (summary_.unknown_record_kinds)
        warn_once(std::to_string(summary_.unknown_record_kinds) +
                  " ring-buffer records of an unknown kind were ignored (loader and BPF object disagree)");
    if (auto malformed = sampler_->malformed_stack_records(); !malformed.empty())
        warn_once("-g stack records dropped as malformed (" + malformed + "); loader and BPF object disagree");
    if (summary_.sideband_lost)
        warn_once(std::to_string(summary_.sideband_lost) +
                  " mmap/comm records were lost by the kernel; some samples may be [unknown]");
    if (auto lost = sampler_->exec_args_lost())
        warn_once(std::to_string(lost) +
                  " command lines read at exec did not fit the kernel's ring buffer; processes that exited"
                  " within a drain of their exec may show an empty cmdline");
}

// The rate the recording ended at and, with a budget, what a sample cost.
void Session::summarize_rate() {
    summary_.frequency = frequency_;
    if (sample_cost_) {
        summary_.sample_cost_us = sample_cost_->median_us;
        summary_.sample_cost_low_us = sample_cost_->low_us;
        summary_.sample_cost_high_us = sample_cost_->high_us;
        summary_.estimated_overhead_percent =
            sample_cost_->bound_us * 1e-4 * static_cast<double>(events_.size()) * static_cast<double>(frequency_);
    }
}

}  // namespace detail

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
    detail::Session session(options, stop);
    return session.run();
}

}  // namespace ecpi::loader
