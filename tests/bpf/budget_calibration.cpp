// The overhead budget's calibration (loader/collect/budget.cpp, issue 20) measured
// against a sampler whose handler is made expensive on purpose: this test is
// linked with the test-hook build of bpf/sampler.bpf.c (ECPI_TEST_HOOKS),
// whose handler first spins for `test_sample_cost_ns`. A calibration that
// measured nothing, or measured something other than the handler's cost,
// would choose the same rate both times. Then the check while running: a
// handler made dear after the calibration must lower the rate. Needs root;
// exits 77 otherwise.
#include <sched.h>
#include <unistd.h>

#include <cstdio>

#include <chrono>

#include "budget_monitor.h"
#include "ecpi/loader/budget.h"
#include "ecpi/loader/sampler.h"

namespace {

struct Measured {
    ecpi::loader::SampleCost cost;
    ecpi::loader::RateChoice rate;
};

bool measure(std::uint64_t spin_ns, Measured& out) {
    ecpi::loader::SamplerOptions options;
    options.test_sample_cost_ns = spin_ns;
    auto sampler = ecpi::loader::Sampler::load(options);
    if (!sampler.ok()) {
        std::fprintf(stderr, "loading the test-hook sampler: %s\n", sampler.error().message().c_str());
        return false;
    }
    ecpi::loader::CalibrationOptions calibration;
    // 6 s: at 45 us a sample (an AMD VM) 2 s gave 2-4 pairs, too few to
    // tell a 100 us dearer handler from the spread (quartiles 40-111 us).
    calibration.max_seconds = 6;
    auto cost = ecpi::loader::measure_sample_cost(*sampler, calibration);
    if (!cost.ok()) {
        std::fprintf(stderr, "calibrating: %s\n", cost.error().message().c_str());
        return false;
    }
    out.cost = *cost;
    out.rate = ecpi::loader::choose_rate(*cost, 1.0, 1);
    std::printf("handler spin %6llu ns: one sample costs %.1f us (bound %.1f, quartiles %.1f-%.1f, %d pairs at %llu Hz), 1%% budget -> %llu Hz\n",
                static_cast<unsigned long long>(spin_ns), cost->median_us, cost->bound_us, cost->low_us, cost->high_us, cost->pairs,
                static_cast<unsigned long long>(cost->hz),
                static_cast<unsigned long long>(out.rate.hz));
    return true;
}

// Issue 35 item 2: the daemon's check while running. Calibrated on a cheap
// handler, the rate in force fits the budget; then every sample becomes 100 us
// dearer (as when a busier kernel or a new hypervisor makes samples dear), and
// the next check must say to lower the rate, to one that fits at the new cost.
int check_while_running() {
    ecpi::loader::SamplerOptions options;
    auto sampler = ecpi::loader::Sampler::load(options);
    if (!sampler.ok()) {
        std::fprintf(stderr, "loading the test-hook sampler: %s\n", sampler.error().message().c_str());
        return 1;
    }
    ecpi::loader::CalibrationOptions calibration;
    // 6 s: at 45 us a sample (an AMD VM) 2 s gave 2-4 pairs, too few to
    // tell a 100 us dearer handler from the spread (quartiles 40-111 us).
    calibration.max_seconds = 6;
    auto cost = ecpi::loader::measure_sample_cost(*sampler, calibration);
    if (!cost.ok()) {
        std::fprintf(stderr, "calibrating: %s\n", cost.error().message().c_str());
        return 1;
    }
    // The rate in force: what the calibration chose for the cheap handler. At
    // 100 us more a sample, 1% affords at most 100 Hz; the check lowers only
    // past its drift allowance (10%), so at most 110 Hz must remain.
    const std::uint64_t calibrated_hz = ecpi::loader::choose_rate(*cost, 1.0, 1).hz;
    std::uint64_t hz = calibrated_hz;
    if (hz < 250) {
        std::printf("the check while running not tested: the cheap handler's calibration chose only %llu Hz (a loaded machine)\n",
                    static_cast<unsigned long long>(hz));
        return 0;
    }
    ecpi::loader::BudgetMonitor monitor;
    const auto start = ecpi::loader::BudgetMonitor::Clock::now();
    monitor.reset(*cost, start);
    sampler->set_test_sample_cost(100'000);
    std::optional<ecpi::loader::BudgetCheck> verdict;
    std::string error;
    // The window keeps the calibration's cheap pairs: a few checks fill it with
    // dear ones, each lowering the rate in force as the daemon does.
    for (int check = 1; check <= 8 && hz > 110; ++check) {
        monitor.start_if_due(*sampler, {sched_getcpu()}, start + std::chrono::seconds(61 * check));
        monitor.wait();
        verdict = monitor.take_result(hz, 1.0, 1, error);
        if (!error.empty()) {
            std::fprintf(stderr, "the check measured nothing: %s\n", error.c_str());
            return 1;
        }
        if (verdict)
            std::printf("check %d: bound %.1f us (median %.1f, %zu pairs): %.2f%% at %llu Hz -> %s %llu Hz\n", check,
                        verdict->cost_us.upper, verdict->cost_us.median, verdict->window_pairs, verdict->overhead_percent,
                        static_cast<unsigned long long>(hz), verdict->lower ? "lower to" : "keep",
                        static_cast<unsigned long long>(verdict->lower ? verdict->hz : hz));
        if (verdict && verdict->lower) hz = verdict->hz;
    }
    // Lowered to what fits the dear handler, not merely nudged by noise in the cheap one's pairs.
    if (hz > 110) {
        std::printf("FAIL: the checks while running lowered %llu Hz only to %llu Hz after samples became 100 us dearer "
                    "(at most 110 Hz fits)\n",
                    static_cast<unsigned long long>(calibrated_hz), static_cast<unsigned long long>(hz));
        return 1;
    }
    return 0;
}

// Issue 35: several CPUs are measured in step, one thread each, as the
// daemon samples a busy machine: both CPUs measured, at the same time (their
// measuring times add up to about twice the whole; one after the other they
// would add up to the whole), and the dear handler shows on each.
int in_step() {
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        std::puts("calibrating in step not tested: one CPU online");
        return 0;
    }
    ecpi::loader::SamplerOptions options;
    options.test_sample_cost_ns = 100'000;
    auto sampler = ecpi::loader::Sampler::load(options);
    if (!sampler.ok()) {
        std::fprintf(stderr, "loading the test-hook sampler: %s\n", sampler.error().message().c_str());
        return 1;
    }
    ecpi::loader::CalibrationOptions calibration;
    calibration.cpus = {0, 1};
    // 6 s: at 45 us a sample (an AMD VM) 2 s gave 2-4 pairs, too few to
    // tell a 100 us dearer handler from the spread (quartiles 40-111 us).
    calibration.max_seconds = 6;
    const auto t0 = std::chrono::steady_clock::now();
    auto cost = ecpi::loader::measure_sample_cost(*sampler, calibration);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!cost.ok()) {
        std::fprintf(stderr, "calibrating in step: %s\n", cost.error().message().c_str());
        return 1;
    }
    int failures = 0;
    double measuring = 0;
    for (const auto& c : cost->per_cpu) {
        std::printf("in step: CPU %d %.1f us (%d pairs, %.2f s)\n", c.cpu, c.median_us, c.pairs, c.seconds);
        measuring += c.seconds;
        if (c.median_us < 60) {
            std::printf("FAIL: CPU %d measured a 100 us handler at %.1f us\n", c.cpu, c.median_us);
            ++failures;
        }
    }
    if (cost->per_cpu.size() != 2) {
        std::printf("FAIL: %zu CPUs measured in step, not 2\n", cost->per_cpu.size());
        ++failures;
    }
    if (measuring < 1.5 * elapsed) {
        std::printf("FAIL: the CPUs measured %.2f s in all in %.2f s: one after the other, not in step\n", measuring, elapsed);
        ++failures;
    }
    return failures;
}

}  // namespace

int main() {
    if (geteuid() != 0) {
        std::puts("skipped: loading BPF programs needs root");
        return 77;
    }
    Measured plain, dear;
    if (!measure(0, plain) || !measure(100'000, dear)) return 1;
    // A calibration whose own pairs spread wider than the difference the
    // test looks for cannot tell it (CI's host, 2026-11-27: 2 pairs of the
    // dear handler, quartiles 24.9-128.6 us, where a quiet run gives 6 pairs
    // within 2 us): the machine was busy, not the measure wrong. Once more.
    if (dear.cost.pairs < 4 || dear.cost.high_us - dear.cost.low_us > 50) {
        std::printf("the dear handler's pairs cannot tell 100 us apart (%d pairs, quartiles %.1f-%.1f us): measuring again\n",
                    dear.cost.pairs, dear.cost.low_us, dear.cost.high_us);
        if (!measure(100'000, dear)) return 1;
    }
    int failures = 0;
    // 100 us more per sample must show as most of 100 us (the spin runs
    // in the timer interrupt the calibration's program waits for).
    if (dear.cost.median_us < plain.cost.median_us + 60) {
        std::printf("FAIL: a 100 us handler measured only %.1f us more than the plain one\n",
                    dear.cost.median_us - plain.cost.median_us);
        ++failures;
    }
    // At >= 100 us a sample, 1% of a CPU affords at most 100 samples a second.
    if (dear.rate.hz > 100 || dear.rate.hz >= plain.rate.hz) {
        std::printf("FAIL: the expensive handler got %llu Hz (the plain one %llu Hz)\n",
                    static_cast<unsigned long long>(dear.rate.hz), static_cast<unsigned long long>(plain.rate.hz));
        ++failures;
    }
    if (dear.cost.low_us > dear.cost.median_us || dear.cost.median_us > dear.cost.high_us) {
        std::puts("FAIL: quartiles out of order");
        ++failures;
    }
    failures += check_while_running();
    failures += in_step();
    return failures == 0 ? 0 : 1;
}
