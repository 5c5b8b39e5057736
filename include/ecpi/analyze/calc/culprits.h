// Culprits for every stall (DCPI 6.3, Figures 2 and 4): for each instruction,
// the cycles beyond the best case (dynamic stalls) get every possible reason
// that the code, the CFG and the samples could not rule out ("guilty until
// proven innocent"), each with a range of cycles; the best case's own stalls
// (static stalls) get the reason the machine model's schedule gives and the
// instruction waited for. Per procedure, the cycles are tallied into DCPI
// Figure 4's summary.
//
// Attribution: a clock interrupt on x86 is taken once the oldest instruction
// retires, so a sample's PC is the instruction after the one that kept
// retirement waiting (machine_model.h). Execution stalls (a load that missed,
// a divide) are therefore looked for in the instructions just before the
// sampled one, front-end stalls (an I-cache miss, a misprediction's refetch)
// at the sampled instruction itself: it is the one that had not arrived.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/frequency.h"
#include "ecpi/analyze/calc/machine_model.h"

namespace ecpi::analyze {

enum class StallCause : std::uint8_t {
    // Dynamic
    kICache,
    kITlb,
    kDCache,
    kDTlb,
    kBranchMispredict,
    kStoreBuffer,       // store buffer full, memory ordering (4K aliasing, machine clears)
    kDivider,           // a long-latency unit whose latency depends on the data
    kSync,              // locked instructions, fences, serializing instructions
    kPageFault,
    kContextSwitch,
    kUnexplained,
    // Static (the machine model's schedule)
    kDependency,
    kMemoryDependency,
    kPort,
    kFrontend,
    kLatency,
    kStaticDivider,     // reported as "divider" with "kind": "static"
};
inline constexpr std::size_t kStallCauses = static_cast<std::size_t>(StallCause::kStaticDivider) + 1;
const char* stall_cause_name(StallCause cause);   // the JSON name: "icache", "dcache", "dependency", ...
const char* stall_cause_title(StallCause cause);  // the summary's label: "I-cache miss", ...
char stall_cause_letter(StallCause cause);        // the bubble letter of DCPI Figure 2
bool is_dynamic(StallCause cause);

struct Culprit {
    StallCause cause = StallCause::kUnexplained;
    double cycles_min = 0;                    // stall cycles per execution of the instruction
    double cycles_max = 0;
    std::uint32_t instruction = kNoInstruction;  // CFG index of the culprit instruction (a load, a branch, ...)
};

struct InstructionStalls {
    double static_cycles = 0;                 // per execution: the part of M_i that is a static stall
    double dynamic_cycles = 0;                // per execution: actual - best case (negative: a gain)
    std::vector<Culprit> culprits;            // dynamic culprits first, then the static one
};

// DCPI Figure 4's tally, in cycles (add them up over procedures and images).
struct StallSummary {
    std::uint64_t samples = 0;
    double total_cycles = 0;                  // samples * P: "total tallied"
    double best_cycles = 0;                   // sum of executions * M
    double executed_instructions = 0;         // sum of executions
    double execution = 0;                     // best case without its static stalls
    std::array<double, kStallCauses> min{};   // per cause (static causes: min == max)
    std::array<double, kStallCauses> max{};
    double dynamic_positive = 0;              // cycles beyond the best case where the profile shows more
    double unexplained_gain = 0;              // <= 0: cycles the profile shows fewer than the best case
    double sampling_error = 0;                // samples on instructions estimated never to execute
    void add(const StallSummary& other);
    double dynamic_stall() const;             // sum of dynamic stall cycles (the positive ones) + gain
    double static_stall() const;
};

struct EventSamples {
    std::vector<std::uint64_t> per_instruction;  // same layout as the cycle samples
    double period = 0;                            // events per sample
    bool empty() const { return per_instruction.empty() || period <= 0; }
};

struct CulpritInput {
    const Cfg* cfg = nullptr;
    const std::vector<BlockTiming>* timing = nullptr;
    const FrequencyEstimate* estimate = nullptr;
    std::span<const std::uint64_t> samples;   // cycle samples per instruction
    double period_cycles = 0;                 // P
    const MachineModel* model = nullptr;
    // The profile samples kernel code for this event: then the time spent
    // handling page faults and context switches is charged to the kernel's
    // code, not to the user instruction that caused them.
    bool kernel_sampled = true;
    // Whether the function at a direct call's target makes no call and no
    // jump out of itself: then its return is predicted by the return stack
    // buffer (only an interrupt or context switch in between can spoil it,
    // and those are candidates of their own). Asked only after calls where a
    // stall is explained; unset: unknown for every callee.
    std::function<bool(std::uint64_t)> leaf_callee;
    // Hardware events, where recorded, bound their causes.
    EventSamples branch_misses;
    EventSamples cache_misses;
};

struct CulpritAnalysis {
    std::vector<InstructionStalls> instructions;  // per CFG instruction
    StallSummary summary;
};

[[nodiscard]] CulpritAnalysis find_culprits(const CulpritInput& input);

}  // namespace ecpi::analyze
