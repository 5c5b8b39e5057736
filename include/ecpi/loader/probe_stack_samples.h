// Stack samples of a probed process (issue 31 item 2): where a probed
// function's time is within the probe's own noise, reports give the time
// from these samples instead (the samples whose stack holds the function
// under a path × the period ÷ the path's exact calls,
// analyze/paths/probe_net.h). The events count on-CPU time and keep only
// samples taken in user mode: the uprobe traps, in the kernel, are not in
// them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ecpi/loader/perf_events.h"
#include "ecpi/result.h"

namespace ecpi::loader {

class StackSampler {
public:
    // One cpu-clock event per CPU for `pid` and the threads it starts later,
    // every `period_ns` of its on-CPU time, with its user-mode frame-pointer
    // call chain (or, without `call_chains`, the sampled pc alone: what
    // `paths record` needs, and cheaper to take).
    [[nodiscard]] static Result<StackSampler> open(std::uint32_t pid, const std::vector<int>& cpus,
                                                   std::uint64_t period_ns, std::size_t pages_per_cpu = 256,
                                                   bool call_chains = true);
    StackSampler(StackSampler&&) noexcept = default;
    StackSampler& operator=(StackSampler&&) noexcept = default;

    // Calls `sample` for every user-mode sample written so far: chain[0] is
    // the sampled pc, then the return addresses, innermost first.
    void drain(const std::function<void(const std::vector<std::uint64_t>& chain)>& sample);
    std::uint64_t period_ns() const { return period_ns_; }
    std::uint64_t lost_records() const { return lost_; }
    std::uint64_t kernel_samples() const { return kernel_; }  // dropped: taken in the kernel

private:
    StackSampler() = default;
    std::vector<PerfRing> rings_;
    std::uint64_t period_ns_ = 0, lost_ = 0, kernel_ = 0;
    bool call_chains_ = true;
    std::vector<std::uint8_t> record_;
    std::vector<std::uint64_t> chain_;
};

}  // namespace ecpi::loader
