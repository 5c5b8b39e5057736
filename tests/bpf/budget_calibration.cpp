// The overhead budget's calibration (loader/collect/budget.cpp, issue 20) measured
// against a sampler whose handler is made expensive on purpose: this test is
// linked with the test-hook build of bpf/sampler.bpf.c (ECPI_TEST_HOOKS),
// whose handler first spins for `test_sample_cost_ns`. A calibration that
// measured nothing, or measured something other than the handler's cost,
// would choose the same rate both times. Needs root; exits 77 otherwise.
#include <unistd.h>

#include <cstdio>

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
    calibration.max_seconds = 2;
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

}  // namespace

int main() {
    if (geteuid() != 0) {
        std::puts("skipped: loading BPF programs needs root");
        return 77;
    }
    Measured plain, dear;
    if (!measure(0, plain) || !measure(100'000, dear)) return 1;
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
    return failures == 0 ? 0 : 1;
}
