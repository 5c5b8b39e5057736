// What `ecpi probe` costs per call on this machine, measured when a timed
// session starts, as `paths record` measures its block cost: ecpi probes an
// empty function of its own with the same BPF programs and calls it in
// rounds. A uprobe and a uretprobe trap each cost microseconds in a VM; the
// part of them between the entry's and the return's clock reads is inside
// every call's measured time, and both traps whole are inside the time of
// every probed call's callers (iPath's trampolines excluded their own cost;
// analyze/paths/probe_net.h subtracts ours).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/probe_results.h"

namespace ecpi::loader {

struct ProbeCalibrationOptions {
    bool dwarf = false;                  // the session's --unwind dwarf (its entry copies the stack)
    std::uint32_t rounds = 9;
    std::uint32_t calls_per_round = 1000;
};

// One round of the calibration: per call of the empty function, what its
// exit record measured and what the calling loop's clock saw around it.
struct ProbeCalibrationRound {
    std::vector<double> wall_ns, cpu_ns;  // per timed call (exit records)
    std::vector<double> caller_ns;        // per call: the caller's clock
    double caller_cpu_ns = 0;             // per call: the calling thread's CPU time over the round
    std::uint64_t entries = 0, frames = 0; // entry records, and the frames their walks read
};

// Loads a second instance of the probe BPF programs for this process,
// probes two empty functions (one whose first instruction the kernel
// emulates, one whose first instruction it single-steps), runs the rounds
// of each (and as many unprobed ones first) and summarizes them. Needs the
// privileges `probe` needs.
[[nodiscard]] Result<store::ProbeCost> measure_probe_cost(const ProbeCalibrationOptions& options);

// Whether a uprobe on a function starting with these bytes single-steps its
// first instruction out of line (x86-64: everything but the push, nop,
// jump and call instructions the kernel emulates; elsewhere false).
bool entry_single_stepped(const std::uint8_t* bytes, std::size_t size);

// What each frame of the entry's walk costs, from the same calls at two
// depths (ProbeCost::frame_ns and frame_cpu_ns); 0 when the depths are equal.
std::pair<double, double> frame_cost(const store::ProbeCostKind& shallow, const store::ProbeCostKind& deep);

// One line: what a probed call costs and how it was measured.
std::string describe_probe_cost(const store::ProbeCost& cost);

// A round's mean without its interrupted calls: those above 10x the
// round's median (a tick, an interrupt or preemption inside them, which
// is not the probe's cost) are left out.
double mean_of_uninterrupted(const std::vector<double>& ns);

// One kind's rounds summarized: the median of the rounds' means (of their
// uninterrupted calls), half the rounds' interquartile range as the spread,
// the per-call standard deviation over every uninterrupted call. Fewer than
// 3 rounds with calls is an error.
// `unprobed` is a round of the same calls unprobed. pair_depth is the mean
// depth of the rounds' entries.
[[nodiscard]] Result<store::ProbeCostKind> summarize_probe_rounds(const std::vector<ProbeCalibrationRound>& rounds,
                                                                  const ProbeCalibrationRound& unprobed);

}  // namespace ecpi::loader
