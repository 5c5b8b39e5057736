// `ecpi probe` times net of the probe. A uprobe+uretprobe pair costs
// microseconds in a VM, far more than many probed functions take: every
// timed call holds the part of its own traps between the two clock reads
// (ProbeCostKind::self_*, of its first instruction's kind), and every call
// holds both traps whole of each probed call made inside it
// (ProbeCostKind::pair_ns × ProbeTimer::nested_calls, by kind).
// iPath's trampolines excluded their own cost; this subtracts ours, with
// its spread, and says where what is left is within the probe's own noise.
#pragma once

#include <string>

#include "ecpi/store/probe_results.h"

namespace ecpi::analyze {

// One path's timer ("wall" or "cpu") net of the probe. The noise per call is
// the spread of the measured self cost (half the range of its rounds' means),
// the spread of the pair cost for each nested call, the 95% bound of the
// mean of `timed_calls` calls whose probe cost varies by self_sd_ns, and 10%
// of the cost subtracted (what the calibration in ecpi misses of the same
// traps in the target, probe_net.cpp). A net mean below twice the noise is
// within the noise: reports give its range.
store::ProbeTimer::Net net_of_probe(const store::ProbeTimer& timer, const store::ProbeCost& cost,
                                    const std::string& timer_name, bool entry_stepped);

// A row within the noise whose report sampled the target's stacks: its
// figure becomes the path's stack samples × the period ÷ its exact calls
// (Net::from_samples). The samples are user-mode time on a CPU, where the
// probe's traps (kernel mode) are not. A wall row within the noise takes the
// same figure: what it holds beyond its on-CPU time (time off the CPU) is at
// most its net mean, itself within the noise, so the samples are the figure
// and the subtraction's range says how much off-CPU time it could hide (a
// function of 76 ns on the CPU read 551 ns of wall time net of a 5 us probe).
void use_stack_samples(store::ProbeTimer::Net& net, const store::ProbePath& path, std::uint64_t period_ns);

// Sets `net` on every wall and cpu timer of the report (blocked time is
// off the CPU, where the probe does not run); clears it without a probe cost.
void subtract_probe_cost(store::ProbeReport& report);

}  // namespace ecpi::analyze
