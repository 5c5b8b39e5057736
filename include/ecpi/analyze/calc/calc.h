// `ecpi calc`: DCPI's dcpicalc (Figure 2 without the culprit column, which
// is the next analysis). For one procedure (or every sampled procedure):
// the CFG, frequency classes, machine-model timing and frequency estimates,
// then per block the best-case and actual CPI and per instruction the
// samples, estimated execution count, CPI, confidence and source line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/calc/callee_code.h"
#include "ecpi/analyze/calc/culprits.h"
#include "ecpi/analyze/calc/entry_arguments.h"
#include "ecpi/analyze/calc/frequency.h"
#include "ecpi/analyze/calc/register_progress.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

struct CalcOptions {
    std::string procedure;                    // name (exact, or unique loose match); ignored with `all`
    bool all = false;                         // every sampled procedure of every image
    bool unsampled = false;                   // with `all`: every procedure of the images, sampled or not
    std::optional<std::string> image;         // only images whose path equals this or ends with "/" + it
    std::string event;                        // "" = cycles if recorded, else cpu-clock, else the first
    std::optional<double> cpu_mhz;            // override the clock rate recorded in the epoch
    // Override the chase latency recorded in the epoch (load_chain.h); empty: as recorded.
    std::vector<store::ChaseLatency> chase_latency;
    std::string machine = "auto";             // a built-in model name, a JSON file, or "auto" (by the recorded CPU)
    bool lines = true;                        // look up source lines (DWARF)
    bool summary = false;                     // DCPI Figure 4 per procedure (and per image with --all); no listing
    // Ranges widened by the clock rate's margin (kClockMargin) where samples
    // become cycles through a clock: what a report claims. Off for readers
    // of the counts alone (export, layout): the rate's error scales every
    // count of the run alike and moves no count against another, while
    // their flows weigh a count by its range's width.
    bool clock_margin_in_ranges = true;
};

struct CalcCulprit {
    StallCause cause = StallCause::kUnexplained;
    double cycles_min = 0, cycles_max = 0;    // stall cycles per execution
    std::optional<std::uint64_t> instruction; // the culprit instruction's address
};

struct CalcInstruction {
    std::uint64_t address = 0;
    std::string text;
    std::uint64_t samples = 0;
    double best_cycles = 0;                   // M_i (model, in the profile's attribution)
    bool best_known = false;
    double executions = 0;                    // estimated execution count
    double executions_min = 0, executions_max = 0;  // == executions unless its block's count is a range
    std::optional<double> cpi;                // cycles per execution (none when executions == 0)
    Confidence confidence = Confidence::kLow;
    std::string file;                         // source file:line from DWARF ("" when none)
    int line = 0;
    double static_cycles = 0;                 // per execution (culprits.h)
    double dynamic_cycles = 0;                // per execution; negative: faster than the best case
    std::vector<CalcCulprit> culprits;        // dynamic causes, then the static one
};

struct CalcBlock {
    std::uint32_t index = 0;
    std::uint64_t address = 0;
    std::uint32_t first = 0, count = 0;       // instruction range in CalcProcedure::instructions
    std::uint32_t frequency_class = 0;
    std::uint64_t samples = 0;
    double executions = 0;
    // The range the samples allow where they cannot decide (ranges.h);
    // both == executions when the count is not a range.
    double executions_min = 0, executions_max = 0;
    bool ranged = false;
    std::string point_reason;                 // why a range is a point ("" where it is not)
    double best_cycles = 0;                   // best-case cycles per execution
    double best_cpi = 0;                      // best_cycles / instructions
    std::optional<double> actual_cpi;         // samples * P / executions / instructions
    Confidence confidence = Confidence::kLow;
    EstimateSource source = EstimateSource::kNone;
    bool steady_state = false;
};

struct CalcEdge {
    std::uint32_t from = 0, to = 0;           // block indices; kEntryBlock / kExitBlock
    EdgeKind kind = EdgeKind::kFallThrough;
    std::uint32_t frequency_class = 0;
    double executions = 0;
};

// A block of a measured loop counted by a register only it steps (loops.h,
// BlockCounter): its executions per iteration of the loop, read as the slope
// of that register on the loop's induction register over its snapshots.
struct CalcCounter {
    std::uint64_t block = 0;                  // address of the counted block
    std::string reg;                          // the counter ("edx")
    std::int64_t step = 0;
    std::uint64_t step_address = 0;           // the stepping instruction
    double per_iteration = 0;                 // executions per iteration of the loop
    double executions = 0, executions_min = 0, executions_max = 0;
};

// A natural loop (loops.h) and what register progress said of it.
struct CalcLoop {
    std::uint64_t header = 0;                 // address of the header block
    std::uint32_t depth = 1;
    std::uint32_t blocks = 0;
    std::uint64_t samples = 0;                // samples in its blocks (nested loops included)
    std::string induction;                    // the induction register ("rax", "esi"); "" when none
    std::int64_t step = 0;                    // per iteration
    std::uint64_t step_address = 0;           // the stepping instruction
    bool anchored = false;                    // its count comes from register progress
    std::string why_not;                      // when not anchored: why
    // A pointer chase (load_chain.h): the chain, its working set and time an
    // iteration, or why its chase latency was not used ("" : no chain).
    std::string load_chain;
    double iterations = 0;                    // anchored: executions of the stepping block
    double iterations_min = 0, iterations_max = 0;  // from the spread of the rate
    double iterations_per_second = 0;
    // Anchored through its outer loop (nested_ratio): its iterations per
    // outer iteration (0: measured by its own pairs, or not at all).
    double per_outer_iteration = 0;
    // Not anchored, but its trips' length read off its exit's bound on its
    // snapshots (trip_length): its count is its entries times that (0: none).
    double trip_length = 0;
    // The trip length from its trips' first iterations (entry_trips.h): why,
    // in words ("" when from its exit's bound or none).
    std::string trip_starts;
    // Measured by register progress, then counted anew as its measured
    // entries times its trips' length, which its rate's bounds excluded:
    // both counts, in words ("" when not).
    std::string recounted;
    std::vector<CalcCounter> counters;        // blocks counted by a register (anchored loops only)
    PairCounts pairs;                         // register_progress.h
    // For call regions (call_regions.h, run_calc), not rendered: whether
    // every block of the loop runs once an iteration (one frequency class),
    // its own instructions' best case an iteration, and its calls (address,
    // target; target 0: indirect).
    bool straight = false;
    double best_cycles = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    // Its count came from its samples and its callees' as one region.
    bool from_region = false;
    double region_best_cycles = 0;            // the region's best case an iteration
};

// A conditional branch whose way was read off register snapshots (branch_odds.h).
struct CalcBranch {
    std::uint64_t jump = 0;                   // address of the jcc
    std::uint32_t taken = 0, snapshots = 0;   // snapshots that decided it, and of them the taken way
    bool anchored = false;                    // its edges' counts are measured: its block's count split by the share
    bool median_of_positions = false;         // its pcs' shares disagree: `taken` is the median pc's share of `snapshots`
};

// A jump table whose index was read on register snapshots (switch_odds.h).
struct CalcSwitch {
    struct Case {
        std::uint64_t target = 0;             // the case's first instruction
        std::uint32_t snapshots = 0;          // snapshots whose index selected it
    };
    std::uint64_t jump = 0;                   // address of the indirect jump
    std::vector<Case> cases;
    std::uint32_t snapshots = 0;              // snapshots that decided the case
    bool anchored = false;                    // its cases' counts are measured: its block's count split by the shares
    std::string undecided;                    // why its snapshots decide nothing (empty: they do); see switch_odds.h
};

// A call in the procedure and its block's count: a measured call site's
// count is its callee's entry count (run_calc carries it over).
struct CalcCallSite {
    std::uint64_t address = 0;
    std::uint64_t target = 0;                 // 0: an indirect call
    double executions = 0;
    bool measured = false;                    // its block's count is measured (register progress)
    // An indirect call through a table: the targets its block's register
    // snapshots called (call_odds.h), target -> snapshots; empty where none
    // decided one. `decided`: enough of them, and the index was not loaded
    // just before the call (call_odds_decide).
    std::vector<std::pair<std::uint64_t, std::uint32_t>> targets_seen;
    bool decided = false;
    // An indirect call through a slot the loader fills with another image's
    // symbol (`call [rip + got]` to an imported function): it leaves the image.
    bool imported = false;
    // A direct call: the constants its block leaves in registers (entry_arguments.h).
    std::vector<ArgumentValue> arguments;
};

struct CalcProcedure {
    std::string name;
    std::string image;                        // recorded path
    std::string build_id;
    std::uint64_t start = 0, end = 0;
    std::uint64_t samples = 0;
    double invocations = 0;                   // estimated calls
    double best_cpi = 0;                      // weighted by estimated executions
    std::optional<double> actual_cpi;
    std::uint32_t frequency_classes = 0;
    bool missing_edges = false;
    // A way out by a jump to other code (a tail call): its callers' calls
    // run that code too.
    bool tail_jumps = false;
    std::vector<std::uint64_t> unresolved_jumps;
    std::uint32_t jump_tables = 0;
    StallSummary stalls;                      // DCPI Figure 4 (each cause's range covers both ends of every count range)
    std::uint64_t anchored_samples = 0;       // samples of blocks whose count is measured (register progress)
    std::uint64_t ranged_samples = 0;         // samples of blocks whose count is a range
    std::vector<CalcLoop> loops;
    std::vector<CalcBranch> branches;
    // Conditional jumps only a compare with memory's flags decided: shares
    // of time (BranchOdds::timed), floors in the flow, never a split.
    std::vector<CalcBranch> timed_branches;
    std::vector<CalcSwitch> switches;         // jump tables split by their index on register snapshots
    std::vector<CalcBlock> blocks;
    std::vector<CalcInstruction> instructions;
    std::vector<CalcEdge> edges;
    std::vector<CalcCallSite> call_sites;     // kept with or without details; not rendered
    // Whether its entry count came from its callers' measured call sites.
    bool entry_from_callers = false;
    // Its best case a call: its blocks' best-case cycles at its estimate's
    // counts over its invocations (0: not run).
    double best_cycles_per_call = 0;
    // Its count came from a call region (call_regions.h): its calls from a
    // loop estimated with it.
    bool entry_from_region = false;
    // Its callers' constant arguments and its entry branch (entry_arguments.h):
    // the way they rule out ("" where none), or where samples fell on that
    // way, the conflict (the samples stand; run_calc warns).
    std::string entry_guard;
    std::string entry_conflict;
    // Where the flow's counts asked more best-case cycles than the samples
    // hold (best_case_excess: their ratio), every count was scaled by
    // best_case_scale to what the samples pay for (bound_by_best_case).
    std::optional<double> best_case_scale, best_case_excess;
};

struct CalcImageSummary {
    std::string image;
    std::string build_id;
    std::uint32_t procedures = 0;
    StallSummary stalls;
};

struct CalcReport {
    std::string database;                     // set by the caller
    std::string epoch;
    std::string event;
    std::uint64_t period = 0;                 // in the event's unit
    std::uint64_t event_samples = 0;          // all samples of the event in the epoch
    double period_cycles = 0;                 // P
    double cpu_mhz = 0;
    std::string clock_source;                 // where cpu_mhz came from, said in the output
    std::string machine;
    std::string machine_source;               // why this model: named, or matched to the recorded CPU
    int sample_skid = 1;                      // the model's: where samples land relative to the waiting instruction
    std::vector<CalcProcedure> procedures;    // hottest first with --all
    std::vector<CalcImageSummary> images;     // with --all: the procedures' stalls added up per image
    std::vector<std::string> warnings;
    bool summary = false;                     // procedures carry no blocks, instructions or edges
    double analysis_seconds = 0;
    std::uint64_t analyzed_bytes = 0;         // code bytes analyzed
};

// How far a one-shot recording's clock rate may be off the rate its samples
// ran at: nine recordings of `jsonq 100 5000` read 2,763-2,942 MHz at
// record time while bench/accuracy.sh's own measurement for its jsonq run
// read 2,424 (1.14-1.21x); its effective rates for ten workloads in one
// session spread 2,238-2,957 MHz (docs/ACCURACY.md).
inline constexpr double kClockMargin = 1.2;

// The analysis of one procedure from its code and its per-address samples;
// the building block of run_calc, exposed for tests and the accuracy bench.
struct ProcedureInput {
    std::string name;
    std::uint64_t start = 0, end = 0;
    // Samples become cycles through a clock rate measured once (a clock
    // event's period in ns): the best-case bound allows the rate's error,
    // and the reported ranges of the counts the samples' cycles decide are
    // widened by it each way (ranges.h, widen_by_clock_margin). 1 where the
    // event counts cycles itself.
    double clock_margin = kClockMargin;
    bool widen_ranges_by_clock = true;        // CalcOptions::clock_margin_in_ranges
    const ImageBytes* image = nullptr;        // code and jump tables
    std::function<std::string(std::uint64_t)> name_at;  // for no-return calls
    // Whether the function at an address is a leaf (culprits.h); unset: unknown.
    std::function<bool(std::uint64_t)> leaf_callee;
    // The code a direct call to an address runs (callee_code.h); unset or
    // null: unknown (a call may change every caller-saved register).
    std::function<const CalleeCode*(std::uint64_t)> callee_code;
    std::map<std::uint64_t, std::uint64_t> samples;      // address -> samples
    // Samples of an event counting retired instructions (address -> samples)
    // and its period; empty/0 when not recorded.
    std::map<std::uint64_t, std::uint64_t> instruction_samples;
    double instruction_period = 0;
    // Samples of other events, where recorded, bound their causes
    // (culprits.h): "branch-misses", "cache-misses"; address -> samples,
    // and the period.
    struct EventProfile {
        std::map<std::uint64_t, std::uint64_t> samples;
        double period = 0;
    };
    std::map<std::string, EventProfile> bounding_events;
    bool kernel_sampled = true;               // the profile holds kernel samples for the cycle event
    bool details = true;                      // false: leave blocks, instructions and edges out
    // Register snapshots (register_progress.h), when the epoch kept them for
    // the cycle event: the whole stream of the profile, this image's index in
    // it, and the positions of the snapshots in [start, end) of the image.
    struct Registers {
        std::span<const store::RegisterSample> stream;
        std::uint32_t image = 0;
        std::vector<std::uint32_t> candidates;
        double period_ns = 0;                 // wall-clock time one sample stands for
        double max_gap_ns = 0;                // pairs further apart are not used
    };
    std::optional<Registers> registers;
    // A random chase's time per step by working-set size (load_chain.h); empty: unknown.
    std::vector<store::ChaseLatency> chase_latency;
    // Its entry count from its callers' measured call sites (run_calc),
    // when known: exact (within a measured count's tolerance) where every
    // caller's count is measured, else a lower bound.
    struct EntryCount {
        double executions = 0;
        bool lower_bound = false;
        // Where exact: the constants every caller passes (entry_arguments.h).
        std::vector<ArgumentValue> arguments;
    };
    std::optional<EntryCount> entry;
    // Counts from a call region (call_regions.h, run_calc): a block's first
    // address and its executions. They replace the block's class's own
    // estimate (rated low; ranges stay what the samples allow).
    std::vector<std::pair<std::uint64_t, double>> region;
    bool region_loop = false;                 // a loop of this procedure is the region's (else: a callee)
};
[[nodiscard]] Result<CalcProcedure> analyze_procedure(const ProcedureInput& input, const MachineModel& model,
                                                      double period_cycles, const EstimatorOptions& options = {});

[[nodiscard]] Result<CalcReport> run_calc(const store::EpochContents& contents, const CalcOptions& options,
                                          Symbolizer& symbolizer);

bool is_clock_event(const std::string& event);  // cpu-clock, task-clock

std::string render_calc_text(const CalcReport& report);
// {"schema":"ecpi.calc","version":2,...}; documented in docs/json-schema.md.
nlohmann::json render_calc_json(const CalcReport& report);
// Writes render_calc_json(report).dump(2) without building the whole tree
// (`calc --all` on a large library: one procedure's tree at a time).
void write_calc_json(const CalcReport& report, std::ostream& out);

}  // namespace ecpi::analyze
