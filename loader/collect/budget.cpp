#include "ecpi/loader/budget.h"

#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <barrier>
#include <thread>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <cerrno>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/sampler.h"
#include "pinned_to_cpu.h"

namespace ecpi::loader {
namespace {

// Lowers the thread to SCHED_IDLE while it lives (the check while running
// measures only in time no program wants), then restores its policy.
class IdlePriority {
public:
    explicit IdlePriority(bool wanted) {
        if (!wanted) return;
        policy_ = sched_getscheduler(0);
        saved_ok_ = policy_ >= 0 && sched_getparam(0, &param_) == 0;
        sched_param idle{};
        if (saved_ok_ && sched_setscheduler(0, SCHED_IDLE, &idle) != 0) saved_ok_ = false;
    }
    ~IdlePriority() {
        if (saved_ok_) sched_setscheduler(0, policy_, &param_);
    }
    IdlePriority(const IdlePriority&) = delete;
    IdlePriority& operator=(const IdlePriority&) = delete;

private:
    int policy_ = 0;
    sched_param param_{};
    bool saved_ok_ = false;
};

// The calibration's cpu-clock event: on `cpu` for every task (the kind the
// daemon samples with, so the same timer path), or on this thread alone
// (cpu < 0: the check while running, whose idle-priority thread must not
// have a program that preempts it sampled at the calibration's rate).
Result<FileDescriptor> open_calibration_clock(std::uint64_t period_ns, int cpu) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = period_ns;
    attr.disabled = 1;
    const pid_t pid = cpu < 0 ? 0 : -1;
    long fd = syscall(SYS_perf_event_open, &attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
        return Error::from_errno(errno, cpu < 0 ? std::string("opening a cpu-clock event on the recorder's thread to calibrate the overhead budget")
                                                : "opening a cpu-clock event on CPU " + std::to_string(cpu) + " to calibrate the overhead budget");
    return FileDescriptor(static_cast<int>(fd));
}

// Samples the event took while enabled since its last reset: the time it
// counted over its period.
std::uint64_t samples_taken(int fd, std::uint64_t period_ns) {
    std::uint64_t counted_ns = 0;
    if (::read(fd, &counted_ns, sizeof counted_ns) != static_cast<ssize_t>(sizeof counted_ns)) return 0;
    return counted_ns / period_ns;
}

double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double at = q * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(at));
    const auto hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

// The program the calibration times: a pseudo-random read-modify-write walk
// over a private 1 MiB table with integer work between (a program that works
// in its caches, so what a sample evicts is part of its cost), or the
// register-only add chain.
class Workload {
public:
    explicit Workload(bool add_chain_only) : add_chain_only_(add_chain_only) {
        if (add_chain_only_) return;
        table_.resize(kSlots);
        for (std::size_t i = 0; i < kSlots; ++i) table_[i] = mix(i + 1);
    }
    // Seconds of this thread's CPU time for `iterations` rounds: the
    // interrupts and VM exits it suffers are in it, other tasks' time
    // slices and the host's steal time are not (a run preempted on a busy
    // machine says nothing about what a sample costs). The add chain is
    // timed by the wall clock.
    double seconds(long iterations) {
        if (add_chain_only_) return add_chain_wall_seconds(iterations * 8);
        timespec a{}, b{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        std::uint64_t h = state_, acc = state_;
        for (long k = 0; k < iterations; ++k) {
            h = mix(h + static_cast<std::uint64_t>(k));
            const std::size_t slot = h & (kSlots - 1);
            acc += table_[slot];
            table_[slot] = h ^ acc;
            acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
            acc ^= acc >> 29;
        }
        state_ = acc;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        return static_cast<double>(b.tv_sec - a.tv_sec) + static_cast<double>(b.tv_nsec - a.tv_nsec) * 1e-9;
    }

private:
    static constexpr std::size_t kSlots = (1u << 20) / sizeof(std::uint64_t);
    bool add_chain_only_;
    std::vector<std::uint64_t> table_;
    std::uint64_t state_ = 0x9e3779b97f4a7c15ULL;
};

// The calibration event on this thread, attached to the sampler's handler
// while it lives.
class CalibrationEvent {
public:
    // cpu < 0: on this thread only (open_calibration_clock).
    static Result<std::unique_ptr<CalibrationEvent>> open(Sampler& sampler, std::uint64_t hz, int cpu) {
        const std::uint64_t period_ns = 1'000'000'000ull / hz;
        ECPI_ASSIGN_OR_RETURN(FileDescriptor owned, open_calibration_clock(period_ns, cpu));
        const int fd = owned.get();
        ECPI_RETURN_IF_ERROR(sampler.attach_calibration(std::move(owned)));
        return std::unique_ptr<CalibrationEvent>(new CalibrationEvent(sampler, fd, period_ns));
    }
    ~CalibrationEvent() { sampler_.detach_calibration(fd_); }
    CalibrationEvent(const CalibrationEvent&) = delete;
    CalibrationEvent& operator=(const CalibrationEvent&) = delete;
    // Runs `run` with the event enabled; the samples it took.
    template <typename Run>
    Result<std::uint64_t> sampled(Run&& run) {
        if (ioctl(fd_, PERF_EVENT_IOC_RESET, 0) != 0 || ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0) != 0)
            return Error::from_errno(errno, "enabling the overhead budget's calibration event");
        run();
        ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
        return samples_taken(fd_, period_ns_);
    }

private:
    CalibrationEvent(Sampler& sampler, int fd, std::uint64_t period_ns) : sampler_(sampler), fd_(fd), period_ns_(period_ns) {}
    Sampler& sampler_;
    int fd_;
    std::uint64_t period_ns_;
};

// One pair: the same run without and with sampling, alternating which goes
// first. The extra time per sample in microseconds; nothing when the pair
// took no samples.
struct Pair {
    double cost_us = 0;
};
// `before_half` runs before each half: the CPUs measured in step start their
// halves together (all sampled at once, as the daemon samples them).
template <typename BeforeHalf>
Result<std::optional<Pair>> measure_pair(CalibrationEvent& event, Workload& work, long iterations, bool sampled_first,
                                         std::uint64_t hz, BeforeHalf&& before_half) {
    double unsampled = 0, sampled = 0;
    std::uint64_t samples = 0;
    for (int half = 0; half < 2; ++half) {
        before_half();
        if ((half == 0) != sampled_first) {
            unsampled = work.seconds(iterations);
            continue;
        }
        ECPI_ASSIGN_OR_RETURN(samples, event.sampled([&] { sampled = work.seconds(iterations); }));
    }
    // A per-CPU event also samples whatever preempted the thread, whose
    // time is not in the run's: the thread's own samples are its CPU time
    // over the period.
    samples = std::min<std::uint64_t>(samples, static_cast<std::uint64_t>(std::ceil(sampled * static_cast<double>(hz))));
    if (samples == 0 || unsampled <= 0 || sampled <= 0) return std::optional<Pair>();
    return std::optional<Pair>(Pair{(sampled - unsampled) / static_cast<double>(samples) * 1e6});
}

// The fastest the calibration may sample: half the kernel's
// perf_event_max_sample_rate (the kernel throttles an event past it).
std::uint64_t calibration_ceiling_hz(std::uint64_t wanted) {
    std::uint64_t ceiling = wanted;
    if (FILE* f = std::fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re")) {
        unsigned long long max_rate = 0;
        if (std::fscanf(f, "%llu", &max_rate) == 1 && max_rate > 0) ceiling = std::min<std::uint64_t>(ceiling, max_rate / 2);
        std::fclose(f);
    }
    return ceiling;
}

constexpr long kProbeIterations = 200'000;  // a few ms

// Runs of options.run_seconds unsampled (~1,000 samples at 4999 Hz), in
// iterations of the walk. The speed is taken after a first pass over the
// table (a cold table ran up to 3x slower, and the runs came out a third of
// their length).
Result<long> run_iterations(Workload& work, const CalibrationOptions& options) {
    work.seconds(kProbeIterations);
    const double probe_s = work.seconds(kProbeIterations);
    if (probe_s <= 0) return Error("calibrating the overhead budget needs the x86-64 add chain; use -F to set the rate");
    return std::max<long>(1000, static_cast<long>(kProbeIterations * options.run_seconds / probe_s));
}

// Measures on one CPU for at most `seconds`: pairs until the interval is
// narrow enough.
Result<CpuCost> measure_on_cpu(Sampler& sampler, int cpu, const CalibrationOptions& options, double seconds, Workload& work) {
    const auto t0 = std::chrono::steady_clock::now();
    PinnedToCpu pin(cpu);
    if (!pin.pinned()) return Error("cannot run on CPU " + std::to_string(cpu) + " to calibrate the overhead budget");
    ECPI_ASSIGN_OR_RETURN(const long iterations, run_iterations(work, options));
    const std::uint64_t hz = std::max<std::uint64_t>(calibration_ceiling_hz(options.hz), 1);
    const int event_cpu = options.per_cpu_event ? cpu : -1;
    ECPI_ASSIGN_OR_RETURN(auto event, CalibrationEvent::open(sampler, hz, event_cpu));
    std::vector<double> costs;
    for (int p = 0; p < options.max_pairs && seconds_since(t0) < seconds; ++p) {
        ECPI_ASSIGN_OR_RETURN(auto pair, measure_pair(*event, work, iterations, p % 2 == 1, hz, [] {}));
        if (!pair) continue;
        costs.push_back(pair->cost_us);
        if (static_cast<int>(costs.size()) >= options.min_pairs && precise_enough(median_bound(costs, options.confidence), options))
            break;
    }
    CpuCost c = summarize_cpu(cpu, hz, std::move(costs), options);
    c.seconds = seconds_since(t0);
    return c;
}

// Issue 35: the CPUs measured at once, one thread each, their halves in step
// (all sampled together, as the daemon samples a busy machine). Measured one
// at a time, a CPU read 3.5-4.1 us a sample; in step 3.4-6.2 (mean 4.7) in the
// same hold (2026-11-27): the other CPUs' samples and work are part of what
// a sample costs. They stop together: when time is up or every CPU's
// interval is narrow enough.
class Lockstep {
public:
    Lockstep(std::size_t cpus, const CalibrationOptions& options, std::chrono::steady_clock::time_point deadline)
        : options_(options), deadline_(deadline), precise_(cpus, false), barrier_(static_cast<std::ptrdiff_t>(cpus), Decide{this}) {}
    void wait() { barrier_.arrive_and_wait(); }
    void leave() { barrier_.arrive_and_drop(); }
    // After a pair: whether to stop, decided once all have arrived.
    bool done_after(std::size_t index, const std::vector<double>& costs, int pairs) {
        precise_[index] = static_cast<int>(costs.size()) >= options_.min_pairs &&
                          precise_enough(median_bound(costs, options_.confidence), options_);
        if (index == 0) pairs_ = pairs;  // the same count in every thread; read once all have arrived
        barrier_.arrive_and_wait();
        return stop_;
    }

private:
    struct Decide {
        Lockstep* self;
        void operator()() noexcept {
            self->stop_ = self->stop_ || std::chrono::steady_clock::now() >= self->deadline_ || self->pairs_ >= self->options_.max_pairs ||
                          std::all_of(self->precise_.begin(), self->precise_.end(), [](bool p) { return p; });
        }
    };
    const CalibrationOptions& options_;
    std::chrono::steady_clock::time_point deadline_;
    std::vector<char> precise_;
    int pairs_ = 0;
    bool stop_ = false;
    std::barrier<Decide> barrier_;
};

// One CPU's thread of a calibration in step.
Result<CpuCost> measure_in_step_on(CalibrationEvent& event, int cpu, std::uint64_t hz, std::size_t index,
                                   const CalibrationOptions& options, Lockstep& step) {
    const auto t0 = std::chrono::steady_clock::now();
    PinnedToCpu pin(cpu);
    IdlePriority priority(options.low_priority);
    Workload work(options.add_chain_only);
    auto iterations = pin.pinned() ? run_iterations(work, options)
                                   : Result<long>(Error("cannot run on CPU " + std::to_string(cpu) + " to calibrate the overhead budget"));
    if (!iterations.ok()) {
        step.leave();
        return iterations.error();
    }
    std::vector<double> costs;
    for (int p = 0;; ++p) {
        auto pair = measure_pair(event, work, *iterations, p % 2 == 1, hz, [&] { step.wait(); });
        if (!pair.ok()) {
            step.leave();
            return pair.error();
        }
        if (*pair) costs.push_back((*pair)->cost_us);
        if (step.done_after(index, costs, p + 1)) break;
    }
    CpuCost c = summarize_cpu(cpu, hz, std::move(costs), options);
    c.seconds = seconds_since(t0);
    return c;
}

Result<std::vector<CpuCost>> measure_in_step(Sampler& sampler, const std::vector<int>& cpus, const CalibrationOptions& options,
                                             double seconds) {
    const std::uint64_t hz = std::max<std::uint64_t>(calibration_ceiling_hz(options.hz), 1);
    std::vector<std::unique_ptr<CalibrationEvent>> events;
    for (int cpu : cpus) {
        ECPI_ASSIGN_OR_RETURN(auto event, CalibrationEvent::open(sampler, hz, cpu));
        events.push_back(std::move(event));
    }
    Lockstep step(cpus.size(), options, std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
    std::vector<std::optional<Result<CpuCost>>> results(cpus.size());
    {
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < cpus.size(); ++i)
            threads.emplace_back([&, i] { results[i].emplace(measure_in_step_on(*events[i], cpus[i], hz, i, options, step)); });
    }
    std::vector<CpuCost> measured;
    std::string failed;
    for (auto& r : results) {
        if (!r->ok()) failed = r->error().message();
        else if ((*r)->pairs > 0) measured.push_back(std::move(**r));
    }
    if (measured.empty()) return Error(failed.empty() ? "the overhead budget's calibration took no samples; use -F to set the rate" : failed);
    return measured;
}

}  // namespace

MedianBound median_bound(std::vector<double> values, double confidence) {
    MedianBound b;
    b.confidence = confidence;
    if (values.empty()) return b;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    b.median = quantile(values, 0.5);
    // The true median lies above the (r+1)-th largest value when at most r
    // values lie above it: P(Binomial(n, 1/2) <= r). The bound is the value
    // with the largest r whose probability is at most 1 - confidence (the
    // same r from below gives the lower bound).
    const double alpha = 1 - confidence, nd = static_cast<double>(n);
    auto pmf = [&](std::size_t r) {
        const double rd = static_cast<double>(r);
        return std::exp(std::lgamma(nd + 1) - std::lgamma(rd + 1) - std::lgamma(nd - rd + 1) - nd * std::log(2.0));
    };
    double cdf = pmf(0);
    b.enough = cdf <= alpha;
    std::size_t r = 0;
    while (b.enough && r + 1 < n && cdf + pmf(r + 1) <= alpha) cdf += pmf(++r);
    b.upper = values[n - 1 - r];
    b.lower = values[r];
    return b;
}

bool precise_enough(const MedianBound& bound, const CalibrationOptions& options) {
    if (!bound.enough) return false;
    const double half_width = (bound.upper - bound.lower) / 2;
    return half_width <= std::max(options.precision * std::abs(bound.median), options.precision_us);
}

CpuCost summarize_cpu(int cpu, std::uint64_t hz, std::vector<double> costs, const CalibrationOptions& options) {
    CpuCost c;
    c.cpu = cpu;
    c.hz = hz;
    c.pairs = static_cast<int>(costs.size());
    if (costs.empty()) return c;
    const MedianBound b = median_bound(costs, options.confidence);
    c.median_us = b.median;
    c.lower_us = b.lower;
    c.upper_us = b.upper;
    c.low_us = quantile(costs, 0.25);
    c.high_us = quantile(costs, 0.75);
    c.precise = c.pairs >= options.min_pairs && precise_enough(b, options);
    c.costs_us = std::move(costs);
    return c;
}

std::vector<int> calibration_cpus(const std::vector<int>& cpus, std::size_t at_most) {
    if (cpus.size() <= at_most) return cpus;
    std::vector<int> spread;
    for (std::size_t i = 0; i < at_most; ++i) spread.push_back(cpus[i * cpus.size() / at_most]);
    return spread;
}

bool cpus_agree(const std::vector<CpuCost>& per_cpu) {
    for (const auto& a : per_cpu)
        for (const auto& b : per_cpu)
            if (a.median_us > b.upper_us || a.median_us < b.lower_us) return false;
    return true;
}

namespace {

// Every CPU's pairs together, where each CPU kept them.
std::vector<double> pooled_pairs(const std::vector<CpuCost>& per_cpu) {
    std::vector<double> all;
    for (const auto& c : per_cpu) {
        if (c.costs_us.empty()) return {};
        all.insert(all.end(), c.costs_us.begin(), c.costs_us.end());
    }
    return all;
}

// Where the CPUs differ, the dearest by its median decides, with that median
// as its cost where it lies above the bound of all pairs together: its own
// bound, from the ten or so pairs a CPU got in a calibration of 8 s, was the noisiest figure
// of the calibration (on 2 CPUs one restart in eight read 19.5 µs and chose
// 510 Hz, where the others chose 1,300-1,900).
void use_dearest_median(const std::vector<CpuCost>& per_cpu, const MedianBound& all_pairs, SampleCost& cost) {
    const auto dearest = std::max_element(per_cpu.begin(), per_cpu.end(),
                                          [](const CpuCost& a, const CpuCost& b) { return a.median_us < b.median_us; });
    cost.median_us = dearest->median_us;
    cost.low_us = dearest->low_us;
    cost.high_us = dearest->high_us;
    cost.bound_us = std::max(all_pairs.upper, dearest->median_us);
    cost.hz = dearest->hz;
    cost.cpu = dearest->cpu;
}

}  // namespace

SampleCost summarize_costs(std::vector<CpuCost> per_cpu, double confidence) {
    SampleCost cost;
    cost.confidence = confidence;
    if (per_cpu.empty()) return cost;
    const auto worst = std::max_element(per_cpu.begin(), per_cpu.end(),
                                        [](const CpuCost& a, const CpuCost& b) { return a.upper_us < b.upper_us; });
    cost.median_us = worst->median_us;
    cost.low_us = worst->low_us;
    cost.high_us = worst->high_us;
    cost.bound_us = worst->upper_us;
    cost.hz = worst->hz;
    cost.cpu = worst->cpu;
    cost.precise = true;
    for (const auto& c : per_cpu) {
        cost.pairs += c.pairs;
        cost.precise = cost.precise && c.precise;
    }
    // Issue 35: where the CPUs agree, one cost holds for all of them, and the
    // bound of all their pairs together is tighter and unbiased; the highest
    // of several CPUs' own bounds (a few dozen pairs each) is the noisiest of
    // them, and chose rates 2x apart between restarts on 16 CPUs.
    if (per_cpu.size() > 1) {
        if (auto all = pooled_pairs(per_cpu); !all.empty()) {
            const MedianBound b = median_bound(all, confidence);
            if (cpus_agree(per_cpu)) {
                cost.median_us = b.median;
                cost.bound_us = b.upper;
                cost.low_us = quantile(all, 0.25);
                cost.high_us = quantile(all, 0.75);
                cost.pooled = true;
            } else {
                use_dearest_median(per_cpu, b, cost);
            }
        }
    }
    cost.per_cpu = std::move(per_cpu);
    return cost;
}

Result<SampleCost> measure_sample_cost(Sampler& sampler, const CalibrationOptions& options) {
    if (options.min_pairs < 1 || options.hz == 0) return Error("calibrating the overhead budget needs at least one pair at a rate above 0 Hz");
    std::vector<int> cpus = options.cpus;
    if (cpus.empty()) cpus.push_back(std::max(sched_getcpu(), 0));
    // The same CPU time either way: at most max_seconds over all CPUs.
    const double per_cpu_s = std::max(0.5, options.max_seconds / static_cast<double>(cpus.size()));
    if (cpus.size() > 1 && options.in_step && options.per_cpu_event) {
        ECPI_ASSIGN_OR_RETURN(auto measured, measure_in_step(sampler, cpus, options, per_cpu_s));
        return summarize_costs(std::move(measured), options.confidence);
    }
    IdlePriority priority(options.low_priority);
    Workload work(options.add_chain_only);
    std::vector<CpuCost> measured;
    std::string failed;
    for (int cpu : cpus) {
        auto c = measure_on_cpu(sampler, cpu, options, per_cpu_s, work);
        if (!c.ok()) failed = c.error().message();
        else if (c->pairs > 0) measured.push_back(std::move(*c));
    }
    if (measured.empty())
        return Error(failed.empty() ? "the overhead budget's calibration took no samples; use -F to set the rate" : failed);
    return summarize_costs(std::move(measured), options.confidence);
}

RateChoice choose_rate(const SampleCost& cost, double budget_percent, std::size_t events) {
    const double per_hz = cost.bound_us * 1e-6 * static_cast<double>(std::max<std::size_t>(events, 1)) * 100.0;
    RateChoice choice;
    if (per_hz <= 0) {
        choice.hz = kBudgetMaxHz;
        return choice;
    }
    const double wanted = budget_percent / per_hz;
    std::uint64_t hz = kBudgetMaxHz;
    if (wanted < static_cast<double>(kBudgetMaxHz)) {
        // Two significant digits: 253 Hz -> 250, 1234 -> 1200, 47.9 -> 47.
        auto raw = static_cast<std::uint64_t>(std::max(wanted, 0.0));
        std::uint64_t unit = 1;
        while (raw / unit >= 100) unit *= 10;
        hz = raw / unit * unit;
    }
    choice.floor_over_budget = static_cast<double>(kBudgetMinHz) * per_hz > budget_percent;
    choice.hz = std::clamp(hz, kBudgetMinHz, kBudgetMaxHz);
    choice.overhead_percent = static_cast<double>(choice.hz) * per_hz;
    return choice;
}

}  // namespace ecpi::loader

namespace ecpi::loader {

BudgetCheck check_budget(const std::vector<double>& window_costs_us, std::uint64_t hz_in_force, double budget_percent,
                         std::size_t events, double confidence) {
    BudgetCheck check;
    check.hz = hz_in_force;
    check.window_pairs = window_costs_us.size();
    check.cost_us = median_bound(window_costs_us, confidence);
    SampleCost cost;
    cost.bound_us = check.cost_us.upper;
    const double per_hz = cost.bound_us * 1e-4 * static_cast<double>(std::max<std::size_t>(events, 1));
    check.overhead_percent = per_hz * static_cast<double>(hz_in_force);
    if (!check.cost_us.enough || check.overhead_percent <= budget_percent * (1 + kBudgetDriftAllowance)) return check;
    const RateChoice choice = choose_rate(cost, budget_percent, events);
    if (choice.hz < hz_in_force) {
        check.lower = true;
        check.hz = choice.hz;
    }
    return check;
}

std::size_t pairs_before_cost_step(const std::vector<double>& window_costs_us, double alpha) {
    const std::size_t n = window_costs_us.size();
    // The longest run of newest pairs all dearer than every pair before it.
    std::size_t step = 0;
    double newest_min = std::numeric_limits<double>::infinity();
    for (std::size_t k = 1; k < n; ++k) {
        newest_min = std::min(newest_min, window_costs_us[n - k]);
        const double older_max = *std::max_element(window_costs_us.begin(), window_costs_us.end() - static_cast<std::ptrdiff_t>(k));
        if (newest_min <= older_max) continue;
        // 1 / C(n, k): the newest k the dearest of n by chance.
        const double log_choose = std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
                                  std::lgamma(static_cast<double>(n - k) + 1);
        if (-log_choose <= std::log(alpha)) step = n - k;
    }
    return step;
}

}  // namespace ecpi::loader
