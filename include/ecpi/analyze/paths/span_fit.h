// Each path's mean cost from spans timed only at their ends (issue 31;
// runtime/rt_spans.c). A span's time is the sum over the paths that ran
// wholly inside it of their occurrences times their mean cost, plus a
// constant (the clock reads, and the parts of the paths cut by the span's
// two ends: spans start and end at random blocks). The means are fitted by
// non-negative least squares over every span, damped toward each path's
// stamped mean (the one its bursts measured), so that a path whose spans
// do not pin its cost down (too rare, or always beside another in the
// same proportion) keeps the stamped figure instead of an arbitrary one.
// "The same proportion" includes a regular mix, whose counts per span
// differ only by where the span's ends cut it: the ends of an out-of-order
// core's spans do not show where a path's cost was caused (issue 31), so
// such paths share one fitted total, split as their stamped means are, or
// where the program's pc samples cover them, as those are (SampleSplit).
//
// What the spans cannot tell (issue 31, SQLite): on an irregular mix of
// dozens of paths per span whose counts vary together, least squares has
// near-null directions, and the non-negative solution lands on a vertex:
// many paths at exactly 0 with a small standard error. That error is the
// damping's (the inverse of the damped normal matrix along a direction the
// spans do not see), not the spans': a confident wrong answer. So each
// fitted path also gets a 95% range by profiling the spans' own (undamped)
// residual sum of squares: [low, high] are the smallest and largest mean of
// that path over non-negative fits whose RSS is within chi-square(1, 0.95)
// = 3.84 residual variances of the reported fit's RSS (the likelihood-ratio
// interval of a Gaussian linear model, with the non-negativity kept; the
// reported fit is damped, so its RSS is at or above the minimum and the
// range is, if anything, wide). A path is undetermined where that range is
// wide both against its own cost and against what its spans alone would
// allow (span_fit.cpp: undetermined_rule), and where the fit holds it at 0
// while its spans push it below 0 by more than their noise (`contradicted`:
// its spans grow shorter as it runs more, which no cost explains); such a
// path's range runs from 0 to its stamped mean. VPP 4.1-4.2 times each
// sampled path by stamps at its own ends and accepts a bias if it is
// consistent; ../shared/notes/vpp-timing.md says why the inline build
// times spans instead (fenced stamps move cost between paths), which makes
// each path's cost an inverse problem: the range says where it has no
// unique answer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ecpi::analyze {

struct SpanCounts {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> counts;  // (path, occurrences wholly inside)
    double ticks = 0;                                             // end stamp - start stamp
    std::uint32_t blocks = 0;                                     // block entries it timed
};

struct SpanFitOptions {
    // The prior's weight, in spans that hold one occurrence of the path:
    // the stamped mean counts as much as that many such spans.
    double damping = 4;
    double flag_relative_error = 0.15;  // standard_error / mean above this: noisy
    std::size_t max_paths = 128;        // the most frequent ones are fitted; the rest keep their stamped mean
    double allowance = 3.84;            // chi-square(1 dof, 95%): the RSS increase, in residual variances, of the range
};

struct SpanFitPath {
    bool fitted = false;  // false: too rare to be among max_paths, or in no span
    double mean = 0;      // ticks per occurrence
    double standard_error = 0;    // ticks
    bool noisy = false;   // standard_error > flag_relative_error x mean (or a mean of 0)
    bool damped = false;  // the prior gives over 5% of the mean's precision: it leans on the stamped mean
    bool regular = false; // in a regular group (span_fit.cpp): its stamped mean scaled to the group's fitted total
    // The means the spans allow (95%, header comment); low <= mean <= high.
    double low = 0;
    double high = 0;
    bool undetermined = false;  // the range is wide: the spans do not pin this path's cost down (report its range)
    std::uint64_t span_occurrences = 0;
};

// A split of a regular mix that needs no stamp (issue 31): each path's cost
// per occurrence from the program's pc samples in its blocks, up to one
// common factor (-1: none), and the samples its blocks hold.
struct SampleSplit {
    std::vector<double> cost;
    std::vector<std::uint64_t> samples;
};
// A regular group is split by the samples only where each of its paths'
// blocks hold at least this many.
inline constexpr std::uint64_t kMinSplitSamples = 10;

struct SpanFit {
    std::vector<SpanFitPath> paths;  // indexed as the spans' path numbers
    double intercept = 0;            // ticks per span beyond its whole paths
    double residual = 0;             // ticks: the spans' residual standard deviation
    std::size_t spans = 0;           // spans fitted
    std::size_t interrupted = 0;     // left out: over 8x the median time per block entry (interrupts, faults)
    std::size_t outliers = 0;        // left out: residual over 6 robust standard deviations of the first fit
    std::size_t regular = 0;         // paths of a regular mix: their split is their stamped means' (span_fit.cpp)
    bool split_by_samples = false;   // ... or their pc samples' (SampleSplit)
    std::uint64_t split_samples = 0; // then: the fewest samples one of its paths' blocks hold
    std::size_t undetermined = 0;    // fitted paths whose range is wide (SpanFitPath::undetermined)
};

// Spans that took far longer than their blocks usually do (an interrupt, a
// page fault, preemption: time no path spent) are left out first, then
// those the first fit explains worst; the fit is made again without them.
// `prior_means[p]`: path p's stamped mean in ticks, or a negative value
// when its bursts never saw it (it is then damped toward the spans'
// average cost per occurrence).
// `split`: where it covers every path of a regular group with at least
// kMinSplitSamples samples each, the group's total is split by it instead
// of by the stamped means.
SpanFit fit_span_costs(const std::vector<SpanCounts>& spans, const std::vector<double>& prior_means,
                       const SpanFitOptions& options = {}, const SampleSplit& split = {});

}  // namespace ecpi::analyze
