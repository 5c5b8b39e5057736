// bench/budget.sh's question from the other side (issue 35): what one sample
// costs a program, measured the way the daemon's calibration measures it
// (paired runs without and with a cpu-clock event on this thread), but at
// rates given here instead of the calibration's own, and with the machine's
// other CPUs idle or busy. The daemon calibrates at 4999 Hz and
// samples at the rate the budget affords (about 2,000 Hz here): where a
// sample's cost depends on the rate (a handler whose code and data a slower
// rate leaves cold) or on the other CPUs' load, the rate it chooses misses
// its budget by that factor.
//
// Usage: ecpi_bench_budget_cost SECONDS_PER_POINT ROUNDS CPU idle|busy|raw HZ...
//   (root). Every round measures each rate once, in a rotated order; each
//   line: round, rate, load of the other CPUs, pairs, median cost per sample
//   and its 95% interval, quartiles (microseconds of the program's time).
//   `raw`: the same pairs with a cpu-clock event that has no BPF program and
//   no ring (the interrupt alone), timed here rather than by the daemon's
//   calibration, and HZ 0 allowed: an event enabled and disabled around the
//   sampled run that never fires, which shows what switching it costs or
//   saves apart from any sample. Its lines give the median loss of the
//   sampled run in percent instead of a cost per sample.
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ecpi/loader/budget.h"
#include "ecpi/loader/sampler.h"

namespace {

// One spinning child process pinned to each CPU but `cpu`: the machine's
// other CPUs busy, as bench/budget.sh's workload keeps them.
std::vector<pid_t> busy_other_cpus(int cpu) {
    std::vector<pid_t> children;
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int other = 0; other < n; ++other) {
        if (other == cpu) continue;
        const pid_t pid = fork();
        if (pid == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(other, &one);
            sched_setaffinity(0, sizeof one, &one);
            volatile unsigned long x = 0;
            for (;;) x = x * 6364136223846793005UL + 1;
        }
        if (pid > 0) children.push_back(pid);
    }
    return children;
}

void stop(const std::vector<pid_t>& children) {
    for (pid_t pid : children) kill(pid, SIGKILL);
    for (pid_t pid : children) waitpid(pid, nullptr, 0);
}

double now_s() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The calibration's program (loader/collect/budget.cpp's Workload): a
// random read-modify-write walk over a private 1 MiB table.
struct Walk {
    std::vector<std::uint64_t> table = std::vector<std::uint64_t>(1u << 17, 1);
    std::uint64_t state = 0x9e3779b97f4a7c15ULL;
    double seconds(long iterations) {
        const double t0 = now_s();
        std::uint64_t h = state, acc = state;
        for (long k = 0; k < iterations; ++k) {
            h ^= h >> 33;
            h = (h + static_cast<std::uint64_t>(k)) * 0xff51afd7ed558ccdULL;
            h ^= h >> 33;
            const std::size_t slot = h & (table.size() - 1);
            acc += table[slot];
            table[slot] = h ^ acc;
            acc = acc * 6364136223846793005ULL + 1442695040888963407ULL;
            acc ^= acc >> 29;
        }
        state = acc;
        return now_s() - t0;
    }
};

// Pairs without and with a plain cpu-clock event (no BPF program, no ring):
// the median loss of the sampled run, in percent.
int raw_pairs(int round, std::uint64_t hz, double seconds) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = hz ? 1'000'000'000ull / hz : 10'000'000'000ull;
    attr.disabled = 1;
    const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        std::perror("budget_cost: perf_event_open");
        return 1;
    }
    Walk walk;
    long iterations = 100000;
    iterations = static_cast<long>(static_cast<double>(iterations) * 0.025 / walk.seconds(iterations));
    std::vector<double> losses;
    const double end = now_s() + seconds;
    for (int p = 0; now_s() < end; ++p) {
        double plain = 0, sampled = 0;
        for (int half = 0; half < 2; ++half) {
            if ((half == 0) == (p % 2 == 0)) {
                plain = walk.seconds(iterations);
                continue;
            }
            ioctl(static_cast<int>(fd), PERF_EVENT_IOC_RESET, 0);
            ioctl(static_cast<int>(fd), PERF_EVENT_IOC_ENABLE, 0);
            sampled = walk.seconds(iterations);
            ioctl(static_cast<int>(fd), PERF_EVENT_IOC_DISABLE, 0);
        }
        losses.push_back(100 * (sampled - plain) / sampled);
    }
    close(static_cast<int>(fd));
    std::sort(losses.begin(), losses.end());
    auto at = [&](double q) { return losses[static_cast<std::size_t>(q * static_cast<double>(losses.size() - 1))]; };
    std::printf("%d\t%llu\traw\t%zu\tloss%%\t%.3f\tq1\t%.3f\tq3\t%.3f\n", round, static_cast<unsigned long long>(hz), losses.size(), at(0.5),
                at(0.25), at(0.75));
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: %s SECONDS_PER_POINT ROUNDS CPU idle|busy HZ...\n", argv[0]);
        return 2;
    }
    const double seconds = std::atof(argv[1]);
    const int rounds = std::atoi(argv[2]);
    const int cpu = std::atoi(argv[3]);
    const bool busy = std::string(argv[4]) == "busy";
    std::vector<std::uint64_t> rates;
    for (int i = 5; i < argc; ++i) rates.push_back(std::strtoull(argv[i], nullptr, 10));
    if (std::string(argv[4]) == "raw") {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);
        for (int r = 0; r < rounds; ++r)
            for (std::size_t k = 0; k < rates.size(); ++k)
                if (raw_pairs(r, rates[(k + static_cast<std::size_t>(r)) % rates.size()], seconds) != 0) return 1;
        return 0;
    }
    auto sampler = ecpi::loader::Sampler::load(ecpi::loader::SamplerOptions{});
    if (!sampler.ok()) {
        std::fprintf(stderr, "budget_cost: loading the sampler: %s\n", sampler.error().message().c_str());
        return 1;
    }
    std::printf("round\thz\tothers\tpairs\tmedian_us\tlower_us\tupper_us\tq1_us\tq3_us\n");
    for (int r = 0; r < rounds; ++r) {
        for (std::size_t k = 0; k < rates.size(); ++k) {
            const std::uint64_t hz = rates[(k + static_cast<std::size_t>(r)) % rates.size()];
            ecpi::loader::CalibrationOptions options;
            options.cpus = {cpu};
            options.hz = hz;
            options.max_seconds = seconds;
            options.max_pairs = 100000;
            options.precision = 0;  // measure for the whole time given
            options.precision_us = 0;
            const auto children = busy ? busy_other_cpus(cpu) : std::vector<pid_t>{};
            auto cost = ecpi::loader::measure_sample_cost(*sampler, options);
            stop(children);
            if (!cost.ok()) {
                std::fprintf(stderr, "budget_cost: %s\n", cost.error().message().c_str());
                return 1;
            }
            const auto& c = cost->per_cpu.front();
            std::printf("%d\t%llu\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", r, static_cast<unsigned long long>(hz),
                        argv[4], c.pairs, c.median_us, c.lower_us, c.upper_us, c.low_us, c.high_us);
            std::fflush(stdout);
        }
    }
    return 0;
}
