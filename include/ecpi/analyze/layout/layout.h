// `ecpi layout`: profile-guided code layout from ecpi profiles (Spike, on
// today's post-link optimizer and linkers). Spike turned DCPI-style profiles
// into a faster executable: hot blocks packed, cold code split out,
// procedures ordered by call affinity. Here the same job is handed to LLVM
// BOLT (branch records in its fdata text format) and to lld (a symbol
// ordering file, a call-graph ordering file).
//
// The edge counts are `ecpi calc`'s: execution estimates from samples with
// frequency equivalence, anchored where register progress measured a loop
// and split where register snapshots decided a branch (calc.h). Not per-block
// sample counts, which is what BOLT reads without LBR (`perf2bolt -nl`) and
// what DCPI 6.1 shows to be biased: a rare block that stalls looks hot.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/flow_inference.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

enum class FunctionOrder { kC3, kPettisHansen };

// Where the counts written to BOLT come from (`--counts`):
//  - kRules: calc's estimates with the edge rules below (layout_edge_counts);
//    edges need not conserve flow, and blocks no sample reached stay at 0.
//  - kFlow: flow inference (flow_inference.h) over the procedure's CFG, with
//    sampled blocks and snapshot-decided branches as soft constraints
//    (layout_flow_problem): every count conserves flow.
enum class LayoutCountSource { kRules, kFlow };

struct LayoutOptions {
    std::string image;                        // path, path suffix or file name (required)
    std::string event;                        // "" = calc's choice (cycles, else cpu-clock)
    std::optional<double> cpu_mhz;
    std::string machine = "auto";
    std::uint64_t min_samples = 1;            // procedures with fewer samples get no records
    FunctionOrder order = FunctionOrder::kC3;
    std::uint64_t cluster_bytes = 4096;       // C3: a cluster stops growing past one page
    LayoutCountSource counts = LayoutCountSource::kFlow;
};

struct LayoutFunction {
    std::string name;                         // linkage (ELF) name: what BOLT and lld match
    // BOLT's name: a local (static) symbol is "name/N", N counting the
    // local symbols of that name in address order from 1 (BOLT's
    // NameResolver); its profile ignores records under the bare name.
    std::string bolt_name;
    std::string display;                      // demangled
    std::uint64_t start = 0, size = 0;
    std::uint64_t samples = 0;
    double invocations = 0;                   // calc's estimate
};

// One BOLT branch record: a jump or call site and where it went.
struct LayoutBranch {
    std::uint32_t from = 0;                   // index into functions
    std::uint64_t from_offset = 0;            // of the jump or call instruction, within its function
    std::uint32_t to = 0;
    std::uint64_t to_offset = 0;              // of the target block (0 for a call)
    double count = 0;
    bool call = false;
    bool ranged = false;                      // the count is calc's point inside a range the samples allow
};

// A block's execution count, for BOLT's no-LBR profile (`--format
// bolt-blocks`), where BOLT infers the edges itself.
struct LayoutBlock {
    std::uint32_t function = 0;               // index into functions
    std::uint64_t offset = 0;                 // of the block's first instruction, within its function
    double count = 0;
};

struct CallEdge {
    std::uint32_t caller = 0, callee = 0;     // indices into functions
    double weight = 0;
};

struct LayoutReport {
    std::string image, build_id, epoch, event;
    std::vector<LayoutFunction> functions;
    std::vector<LayoutBranch> branches;
    std::vector<LayoutBlock> blocks;          // profiled functions' blocks with a count
    std::vector<CallEdge> calls;
    std::string call_source;                  // "stacks" (-g) or "call sites" (calc's estimates)
    std::vector<std::uint32_t> order;         // functions, hottest chains first
    std::vector<std::string> warnings;
};

// A call site seen on -g stacks: the caller's call instruction (found by
// the return address after it) and the callee, weighted in stack samples.
struct StackCallSite {
    std::uint32_t caller = 0;                 // index into functions
    std::uint64_t call_offset = 0;            // of the call instruction, within the caller
    std::uint32_t callee = 0;
    double samples = 0;
};

// BOLT call records from -g stacks (issue 17: "calls between functions from
// -g call stacks, caller's call site to callee entry"), for the sites that
// no direct call record already covers (indirect calls: a handler table,
// virtual calls). Each callee's estimated entries (`invocations`) minus
// what direct call records already bring it are split over those sites by
// their stack samples; a site gets at least one call per sample.
[[nodiscard]] std::vector<LayoutBranch> stack_call_records(const std::vector<LayoutFunction>& functions,
                                                           const std::vector<LayoutBranch>& branches,
                                                           const std::vector<StackCallSite>& sites);

// Return address -> the address of the call instruction before it, over
// `image`'s sampled procedures in `calc` (a caller frame on a -g stack holds
// the return address; BOLT and AutoFDO key call records by the call).
std::map<std::uint64_t, std::uint64_t> calls_by_return_address(const CalcReport& calc, const std::string& image);

// "call 0x401136" -> 0x401136: the target of a direct call as calc's
// disassembly writes it; nullopt for anything else.
std::optional<std::uint64_t> direct_call_target(const std::string& text);

[[nodiscard]] Result<LayoutReport> build_layout(const store::EpochContents& contents, const LayoutOptions& options,
                                                Symbolizer& symbolizer);

// C3 (Ottoni & Maher, CGO 2017): in decreasing hotness, each function joins
// the cluster of its hottest caller unless the merged cluster passes
// `cluster_bytes` or its density (samples per byte) falls below an eighth of
// the caller's cluster's; clusters are then laid out densest first.
std::vector<std::uint32_t> c3_order(const std::vector<LayoutFunction>& functions, const std::vector<CallEdge>& calls,
                                    std::uint64_t cluster_bytes);
// Pettis & Hansen (PLDI 1990): merge the chains joined by the heaviest call
// edges first, each merge in the orientation that puts the edge's two
// functions closest; chains laid out by samples.
std::vector<std::uint32_t> pettis_hansen_order(const std::vector<LayoutFunction>& functions,
                                               const std::vector<CallEdge>& calls);

// BOLT's fdata text: `1 FUNC OFFSET 1 FUNC OFFSET MISPREDICTS COUNT`, offsets
// in hex within functions.
// A conditional block's edge counts (indexed like p.edges) capped by what
// their targets' samples allow: executions x best-case cycles cannot pass
// about S + 2*sqrt(S) + 3 sampling periods of S samples. Where neither
// target was sampled, the block's count is split by those caps.
void cap_edges_by_samples(const CalcProcedure& p, double period_cycles, std::vector<double>& counts);
// Every edge's count (indexed like p.edges) as written to BOLT: calc's
// estimates with missing outflow carried onto zero edges, split by what the
// successors' samples guarantee, capped by what they allow, split by the
// branch's register snapshots (one decides), and where the two edges of a
// conditional block are still equal, 1:3 in favour of the fall-through.
std::vector<double> layout_edge_counts(const CalcProcedure& p, double period_cycles);
// Each block's count (indexed like p.blocks) for BOLT's no-LBR profile: what
// the branch records (edge_counts, from layout_edge_counts) bring into it,
// so the edge rules above decide it; a block no record enters (an entry, a
// block reached by falling through from one without a jump) keeps calc's
// estimate.
std::vector<double> layout_block_counts(const CalcProcedure& p, const std::vector<double>& edge_counts);

// The flow problem of a procedure (indexed like p.blocks and p.edges): a
// sampled block is a Poisson soft count at calc's estimate, except that one
// side of a conditional jump whose count is a range is free down to what
// its samples guarantee and cheap above it (a stalling rare path must not
// take an unsampled common path's flow); a block without samples costs its
// best-case cycles over the sampling period per execution (the likelihood
// of no sample); a forward taken edge costs a little more than a
// fall-through (the compiler's guess decides ties); a conditional jump with register snapshots puts each edge at
// its share of the block's estimate.
FlowProblem layout_flow_problem(const CalcProcedure& p, double period_cycles);

struct LayoutCounts {
    std::vector<double> blocks;               // indexed like p.blocks
    std::vector<double> edges;                // indexed like p.edges
};
// The counts written to BOLT: layout_edge_counts and layout_block_counts
// (kRules), or the solution of layout_flow_problem (kFlow).
LayoutCounts layout_counts(const CalcProcedure& p, double period_cycles, LayoutCountSource source);

std::string render_bolt_fdata(const LayoutReport& report);
// BOLT's no-LBR fdata (what `perf2bolt -nl` writes): `no_lbr EVENT:` then
// `1 FUNC OFFSET COUNT` per block, offsets in hex within functions; BOLT
// infers the edges from the block counts, consistently.
std::string render_bolt_block_counts(const LayoutReport& report);
// lld --symbol-ordering-file: one symbol per line.
std::string render_lld_order(const LayoutReport& report);
// lld --call-graph-ordering-file: `caller callee weight`.
std::string render_lld_call_graph(const LayoutReport& report);
// {"schema":"ecpi.layout","version":1,...}; documented in docs/json-schema.md.
nlohmann::json render_layout_json(const LayoutReport& report);

}  // namespace ecpi::analyze
