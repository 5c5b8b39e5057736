// The overhead budget (issue 20): what one sample costs a program on this
// machine, measured, and the highest sampling rate that keeps that cost
// within a given share of its time. DCPI's promise was "always on, nearly
// free"; in a VM every sample's timer interrupt is a hypervisor exit, so the
// rate a machine affords is measured rather than assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::loader {

class Sampler;

// The range a budget may choose from, per CPU and event (docs/PERFORMANCE.md).
// Below 19 Hz a day's profile of a quiet service is too thin to read; above
// 4999 Hz the timer interrupts alone cost a VM more than any budget allows.
inline constexpr std::uint64_t kBudgetMinHz = 19;
inline constexpr std::uint64_t kBudgetMaxHz = 4999;
// The calibration samples at the top of the range, where the cost is
// largest and so measured with the least relative noise (or at half the
// kernel's perf_event_max_sample_rate where that is lower). Until
// 2026-11-27 it sampled up to 4x faster (20 kHz) where a 4-pair pilot lost
// under 5%; with runs of 200 ms that pilot took 1.6 s of every CPU's time,
// and a sample measured at 10-20 kHz read cheaper than at the 1-2 kHz then
// chosen (docs/PERFORMANCE.md), so the calibration no longer samples faster
// than any rate it may choose.
inline constexpr std::uint64_t kCalibrationHz = 4999;
// Each run of a pair (sampled or not) lasts about this long (issue 35): on
// the 2-CPU VM the same daemon at 2,000 Hz cost a program 0.86% in 25 ms
// slices and 2.04% in 200 ms ones (bench/budget_paired.c, docs/PERFORMANCE.md):
// part of what sampling costs builds up over the first tenths of a second it
// is on, and the daemon's sampling is never off. Runs of 25 ms read half the
// cost and chose twice the rate the budget affords.
inline constexpr double kCalibrationRunSeconds = 0.2;

// What the calibration measures on and when it may stop (issue 35): it keeps
// measuring pairs until the confidence interval of the median cost is
// within `precision` of the median (or `precision_us`, whichever is wider),
// or until `max_seconds` (all CPUs together) have passed, and the rate is
// then chosen from the interval's upper end.
struct CalibrationOptions {
    std::vector<int> cpus;              // the CPUs to measure on; empty: the one this thread runs on
    double confidence = 0.95;           // of the one-sided upper bound
    double precision = 0.10;            // wanted half-width of the interval, relative to the median
    double precision_us = 0.25;         // ... or absolute, whichever is wider
    int min_pairs = 8;                  // per CPU
    int max_pairs = 400;                // per CPU
    double max_seconds = 16.0;          // all CPUs together, at least 0.5 s each
    double run_seconds = kCalibrationRunSeconds;  // each run of a pair, as CPU time of the program
    std::uint64_t hz = kCalibrationHz;  // the rate to start at
    bool low_priority = false;          // SCHED_IDLE: measure only in time no program wants
    bool add_chain_only = false;        // time the register-only add chain, not the memory walk
    // The calibration event samples the measured CPU for every task, as the
    // daemon's own events do (its timer path is theirs); false: this thread
    // only (the check while running: at idle priority, a program that
    // preempts it must not be sampled at the calibration's rate).
    bool per_cpu_event = true;
    // Several CPUs measured at once, one thread each, their halves in step
    // (issue 35: as the daemon samples a busy machine); false: one at a time.
    bool in_step = true;
};

// A median with a distribution-free confidence interval from order
// statistics: `upper` is an upper bound of the true median at `confidence`
// (one-sided), `lower` the matching lower bound. With too few values for the
// confidence (fewer than 5 at 95%) the bounds are the extremes and `enough`
// is false.
struct MedianBound {
    double median = 0;
    double lower = 0;
    double upper = 0;
    double confidence = 0;
    bool enough = false;
};
MedianBound median_bound(std::vector<double> values, double confidence);

// Whether an interval is as narrow as `options` asks.
bool precise_enough(const MedianBound& bound, const CalibrationOptions& options);

// One CPU's measurement.
struct CpuCost {
    int cpu = -1;
    double median_us = 0, low_us = 0, high_us = 0;  // median and quartiles of the pairs
    double lower_us = 0, upper_us = 0;              // the confidence interval of the median
    int pairs = 0;
    std::uint64_t hz = 0;                           // the calibration event's rate
    bool precise = false;                           // the interval reached the precision asked
    double seconds = 0;                             // how long it measured
    std::vector<double> costs_us;                   // each pair's estimate
};

// One CPU's pairs summarized: median, quartiles, the median's interval and
// whether it is as narrow as `options` asks.
CpuCost summarize_cpu(int cpu, std::uint64_t hz, std::vector<double> costs, const CalibrationOptions& options);

// The cost of one sample to the sampled program, in microseconds of its
// wall time: per CPU measured, and the CPU whose upper bound is highest
// (the one the rate is chosen for) in the summary fields.
struct SampleCost {
    double median_us = 0;
    double low_us = 0;    // first quartile
    double high_us = 0;   // third quartile
    double bound_us = 0;  // the upper confidence bound of the median: what the rate is chosen from
    double confidence = 0;
    bool precise = false; // every CPU reached the precision asked
    int pairs = 0;        // all CPUs together
    std::uint64_t hz = 0; // the calibration event's rate (on the CPU of the bound)
    int cpu = -1;         // the CPU of the bound
    bool pooled = false;  // the CPUs agreed: median, quartiles and bound are of every CPU's pairs together
    int earlier_calibrations = 0;  // earlier calibrations of this boot whose pairs are in (budget_history.h)
    int earlier_pairs = 0;         // ... and their pairs, counted in `pairs`
    std::vector<CpuCost> per_cpu;
};

// The CPUs a calibration measures on: all of them up to `at_most`, else that
// many spread evenly over the list.
std::vector<int> calibration_cpus(const std::vector<int>& cpus, std::size_t at_most = 4);

// Whether the CPUs measured agree: every CPU's median within every other's
// confidence interval.
bool cpus_agree(const std::vector<CpuCost>& per_cpu);

// Summarizes per-CPU measurements (at least one): where the CPUs agree (each
// median within every other's interval) and kept their pairs, the pairs of
// all of them together decide (`pooled`); else the CPU with the highest
// upper bound does.
SampleCost summarize_costs(std::vector<CpuCost> per_cpu, double confidence);

// Times a program on this thread, pinned to each CPU in turn, alternately
// without and with a cpu-clock event whose overflows run the sampler's
// handler (Sampler::attach_calibration); each pair's extra CPU time of the
// thread (which includes the interrupts and VM exits it suffered, and
// excludes other tasks' time slices and the host's steal time) divided by
// the samples taken in it is one estimate. The program is a walk over a
// private 1 MiB table mixed with integer work (what an interrupt evicts from
// the caches costs it too) or, with add_chain_only, the register-only add
// chain (timed by the wall clock). Each run lasts `run_seconds` of CPU time.
// The thread's CPU affinity and scheduling policy
// are restored afterwards. The caller makes sure the handler does not filter
// this process out (tracks it when the sampler filters by process).
[[nodiscard]] Result<SampleCost> measure_sample_cost(Sampler& sampler, const CalibrationOptions& options = {});

struct RateChoice {
    std::uint64_t hz = 0;              // per CPU and event
    double overhead_percent = 0;       // the cost at that rate: the cost's upper bound x rate x events
    bool floor_over_budget = false;    // even kBudgetMinHz costs more than the budget
};

// The highest rate whose cost stays within `budget_percent` of a program's
// time with `events` events sampled, rounded down to two significant digits
// and clamped to [kBudgetMinHz, kBudgetMaxHz]; the cost is the upper bound
// (bound_us). A cost of 0 or less (the measurement could not see it) chooses
// the top of the range.
RateChoice choose_rate(const SampleCost& cost, double budget_percent, std::size_t events);

// The check while running (issue 35): the recent pairs measured at low
// priority say what a sample costs now. The rate is lowered when the upper
// bound of their median puts the rate in force more than kBudgetDriftAllowance
// over the budget; it is raised only by a full calibration.
inline constexpr double kBudgetDriftAllowance = 0.10;
inline constexpr std::size_t kBudgetWindowPairs = 64;

struct BudgetCheck {
    MedianBound cost_us;              // over the window
    double overhead_percent = 0;      // the rate in force at the bound
    bool lower = false;               // over budget: lower to `hz`
    std::uint64_t hz = 0;
    std::size_t window_pairs = 0;
};
BudgetCheck check_budget(const std::vector<double>& window_costs_us, std::uint64_t hz_in_force, double budget_percent,
                         std::size_t events, double confidence = 0.95);

// A step up in what a sample costs (a new hypervisor, a busier kernel): the
// newest k pairs of the window all dearer than every older one. Were the
// costs unchanged, every order of the pairs would be as likely, and the
// newest k the dearest with probability 1 / C(n, k); at most `alpha`, the
// older pairs describe a cost that no longer holds, and the count of them
// (to drop) is returned; 0 otherwise. Only a step up: it is what breaks the
// budget's promise, and a cheaper cost shows as the window turns over.
// A window of 64 pairs held a calibration's 16 cheap pairs while the checks
// added one or two dear pairs a minute (a 1 s check at 100 us a sample):
// its median stayed cheap for 8 minutes (2026-11-28, a Zen 3 VM).
inline constexpr double kBudgetStepAlpha = 0.005;
[[nodiscard]] std::size_t pairs_before_cost_step(const std::vector<double>& window_costs_us, double alpha = kBudgetStepAlpha);

}  // namespace ecpi::loader
