// The overhead budget (issue 20): what one sample costs a program on this
// machine, measured, and the highest sampling rate that keeps that cost
// within a given share of its time. DCPI's promise was "always on, nearly
// free"; in a VM every sample's timer interrupt is a hypervisor exit, so the
// rate a machine affords is measured rather than assumed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ecpi/result.h"

namespace ecpi::loader {

class Sampler;

// The range a budget may choose from, per CPU and event (docs/PERFORMANCE.md).
// Below 19 Hz a day's profile of a quiet service is too thin to read; above
// 4999 Hz the timer interrupts alone cost a VM more than any budget allows.
inline constexpr std::uint64_t kBudgetMinHz = 19;
inline constexpr std::uint64_t kBudgetMaxHz = 4999;
// The calibration samples at the top of the range, where the cost is
// largest and so measured with the least relative noise.
inline constexpr std::uint64_t kCalibrationHz = 4999;

// The cost of one sample to the sampled program, in microseconds of its
// wall time, over `pairs` interleaved pairs of runs: the median and the
// quartiles (the spread).
struct SampleCost {
    double median_us = 0;
    double low_us = 0;    // first quartile
    double high_us = 0;   // third quartile
    int pairs = 0;
    std::uint64_t hz = 0; // the calibration event's rate
    int cpu = -1;         // the CPU the calibration ran on
};

// Times the add chain (perf_events.h) on this thread, pinned to the CPU it
// runs on, alternately without and with a cpu-clock event at `hz` whose
// overflows run the sampler's handler (Sampler::attach_calibration); each
// pair's extra wall time divided by the samples taken in it is one estimate.
// About 50 ms a pair. The thread's CPU affinity is restored afterwards. The
// caller makes sure the handler does not filter this process out (tracks it
// when the sampler filters by process).
[[nodiscard]] Result<SampleCost> measure_sample_cost(Sampler& sampler, int pairs = 8,
                                                     std::uint64_t hz = kCalibrationHz);

struct RateChoice {
    std::uint64_t hz = 0;              // per CPU and event
    double overhead_percent = 0;       // the cost at that rate: median cost x rate x events
    bool floor_over_budget = false;    // even kBudgetMinHz costs more than the budget
};

// The highest rate whose cost stays within `budget_percent` of a program's
// time with `events` events sampled, rounded down to two significant digits
// and clamped to [kBudgetMinHz, kBudgetMaxHz]. A cost of 0 or less (the
// measurement could not see it) chooses the top of the range.
RateChoice choose_rate(const SampleCost& cost, double budget_percent, std::size_t events);

}  // namespace ecpi::loader
