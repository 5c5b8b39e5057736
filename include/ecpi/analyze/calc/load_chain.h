// Loops bound by a dependent chain of loads that miss (calc: a pointer
// chase's count from the machine's measured chase latency).
//
// `while (p) { ...; p = p->next; }` over a working set larger than the
// caches puts every cycle of an iteration on the load (or the instruction
// after it): DCPI 6.1's issue points cannot tell how long the load took,
// and the machine model's worst case (memory plus page walk) is no point
// estimate. What one step of such a chain costs a sampled program on this
// machine is measured at record time (store::EpochMeta::chase_latency: a
// random chase over buffers of a few sizes, timed under sampling at the
// recording's period, TLB misses and a VM's nested page walks included).
// A loop whose every iteration runs k loads `r = [r + d]` (r written by
// nothing else in the loop) and whose register snapshots show r at many
// distinct addresses spanning S bytes takes k steps of a chase over S per
// iteration (the model's best case for its body where that is longer):
// its count is its samples' time over that. Its range comes from the
// measurement's rounds and the sizes either side of S (the working set may
// be smaller than the span).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// A step's time (ns) of a chase over a working set, from the measured sizes.
struct ChaseTime {
    bool known = false;
    double ns = 0, ns_low = 0, ns_high = 0;
    std::string why_not;                  // when not known
};

// Interpolated in log(size) between the measured sizes around `bytes`;
// ns_low is the fastest round at the size at or below it, ns_high the
// slowest at the size at or above it. Not known below the smallest size
// measured (the loads may hit a cache: undecided) or above the largest.
[[nodiscard]] ChaseTime chase_time_at(std::span<const store::ChaseLatency> sizes, double bytes);

// `calc --chase-latency`: sizes as "MIB:NS[:LOW:HIGH]" separated by commas
// ("16:320:300:350,64:500"); LOW and HIGH default to NS.
[[nodiscard]] Result<std::vector<store::ChaseLatency>> parse_chase_latency(std::string_view spec);

// The loads of a loop that chase one register: each `mov r, [r + d]`
// (64-bit, no index, no segment) in the blocks that run once per iteration,
// with no other instruction of the loop writing r.
struct LoadChain {
    bool found = false;
    int gp = -1;                          // the register (hardware number)
    std::uint32_t loads = 0;              // chain loads per iteration
    std::string why_not;
};
[[nodiscard]] LoadChain find_load_chain(const Cfg& cfg, const Loop& loop, std::span<const std::uint32_t> once_blocks);

// The chased register's values over the loop's snapshots (zero left out).
struct ChainSpan {
    std::uint32_t snapshots = 0, distinct = 0;
    std::uint64_t low = 0, high = 0;
    double bytes() const { return snapshots ? static_cast<double>(high - low) + 64 : 0; }
};
[[nodiscard]] ChainSpan chain_span(std::span<const store::RegisterSample> stream,
                                   std::span<const std::uint32_t> candidates, std::uint32_t image,
                                   const std::function<bool(std::uint64_t)>& in_loop, int gp);

// What a chase loop's iteration costs (ns): k steps, or the body's best
// case where longer; the range adds the body to the slowest steps.
struct ChainIteration {
    bool known = false;
    double ns = 0, ns_low = 0, ns_high = 0;
    double span_bytes = 0;
    std::string why_not;
};
struct ChainEvidence {
    std::uint32_t min_snapshots = 32;     // fewer cannot show the working set
    double min_distinct = 0.9;            // share of distinct addresses: a chain over few nodes stays in cache
    // The measurement's slowest round times this bounds a step from above:
    // it took 60 ms at the start, the program runs for longer under other
    // loads (two recordings of chase.c an hour apart: 317 and 364 ns a step),
    // and does more per step than a bare chase (its compare and branch), never
    // less. At 2,500 samples/s chase.c's walk_until took 179 ns a step at
    // 16 MiB where record's slowest round read 131 (1.37x; at 10,000 a second
    // 1.0x-1.23x of the median in three recordings): issue 36's ranges must
    // not exclude such a program.
    double drift = 1.5;
};
[[nodiscard]] ChainIteration chain_iteration(const LoadChain& chain, const ChainSpan& span,
                                             std::span<const store::ChaseLatency> sizes, double body_ns,
                                             const ChainEvidence& evidence = {});

}  // namespace ecpi::analyze
