// Idle from the kernel's own accounting (issue 30): a tickless idle CPU takes
// no timer samples, so the sampled idle counts of an epoch miss the CPUs that
// sleep longest. Where the recorder saved the kernel's idle time per CPU
// (store::EpochMeta::idle_ns_per_cpu), reports show that, as time and as
// samples at the event's period.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// For cpu-clock (the event that samples idle CPUs), replaces the sampled idle
// counts by the kernel's idle time per CPU divided by the period (rounded):
// idle_per_cpu and idle then say how many samples a CPU that never slept
// would have taken. Other events, and epochs without the kernel's idle time,
// are left as recorded. Call it on an epoch as read, before
// include_idle_samples.
void idle_from_kernel(store::EpochContents& contents);

// "cpu0 0.21 s, cpu1 3.80 s", or "" when not known.
std::string idle_time_per_cpu(const std::vector<std::uint64_t>& idle_ns_per_cpu);

}  // namespace ecpi::analyze
