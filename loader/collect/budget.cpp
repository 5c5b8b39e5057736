#include "ecpi/loader/budget.h"

#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <vector>

#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/sampler.h"

namespace ecpi::loader {
namespace {

// Restores the thread's CPU affinity when the calibration ends, however it ends.
class PinnedToCpu {
public:
    explicit PinnedToCpu(int cpu) {
        saved_ok_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
    }
    ~PinnedToCpu() {
        if (saved_ok_) sched_setaffinity(0, sizeof saved_, &saved_);
    }
    PinnedToCpu(const PinnedToCpu&) = delete;
    PinnedToCpu& operator=(const PinnedToCpu&) = delete;
    bool pinned() const { return pinned_; }

private:
    cpu_set_t saved_{};
    bool saved_ok_ = false;
    bool pinned_ = false;
};

Result<FileDescriptor> open_thread_clock(std::uint64_t period_ns) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = period_ns;
    attr.disabled = 1;
    long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "opening a cpu-clock event on the recorder's thread to calibrate the overhead budget");
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

}  // namespace

Result<SampleCost> measure_sample_cost(Sampler& sampler, int pairs, std::uint64_t hz) {
    if (pairs < 1 || hz == 0) return Error("calibrating the overhead budget needs at least one pair at a rate above 0 Hz");
    const std::uint64_t period_ns = 1'000'000'000ull / hz;
    const int cpu = sched_getcpu();
    PinnedToCpu pin(std::max(cpu, 0));
    ECPI_ASSIGN_OR_RETURN(FileDescriptor owned, open_thread_clock(period_ns));
    const int fd = owned.get();
    ECPI_RETURN_IF_ERROR(sampler.attach_calibration(std::move(owned)));
    struct Detach {
        Sampler& s;
        ~Detach() { s.detach_calibration(); }
    } detach{sampler};

    // Runs of about 25 ms unsampled: long enough for ~125 samples at 4999 Hz.
    const double probe_s = add_chain_wall_seconds(1'000'000);
    if (probe_s <= 0) return Error("calibrating the overhead budget needs the x86-64 add chain; use -F to set the rate");
    const auto iterations = static_cast<long>(1'000'000 * 0.025 / probe_s);

    std::vector<double> costs;
    for (int p = 0; p < pairs; ++p) {
        double unsampled = 0, sampled = 0;
        std::uint64_t samples = 0;
        for (int half = 0; half < 2; ++half) {
            const bool with_sampling = (half == 0) == (p % 2 == 1);  // alternate which run goes first
            if (!with_sampling) {
                unsampled = add_chain_wall_seconds(iterations);
                continue;
            }
            if (ioctl(fd, PERF_EVENT_IOC_RESET, 0) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
                return Error::from_errno(errno, "enabling the overhead budget's calibration event");
            sampled = add_chain_wall_seconds(iterations);
            ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
            samples = samples_taken(fd, period_ns);
        }
        if (samples > 0 && unsampled > 0 && sampled > 0)
            costs.push_back((sampled - unsampled) / static_cast<double>(samples) * 1e6);
    }
    if (costs.empty()) return Error("the overhead budget's calibration took no samples; use -F to set the rate");
    SampleCost cost;
    cost.median_us = quantile(costs, 0.5);
    cost.low_us = quantile(costs, 0.25);
    cost.high_us = quantile(costs, 0.75);
    cost.pairs = static_cast<int>(costs.size());
    cost.hz = hz;
    cost.cpu = pin.pinned() ? cpu : -1;
    return cost;
}

RateChoice choose_rate(const SampleCost& cost, double budget_percent, std::size_t events) {
    const double per_hz = cost.median_us * 1e-6 * static_cast<double>(std::max<std::size_t>(events, 1)) * 100.0;
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
