// `ecpi export --format afdo`: sample profiles for clang's AutoFDO
// (`-fprofile-sample-use=FILE`) from ecpi's counts. Spike (section 2) fed
// its optimizer counts estimated from DCPI samples; AutoFDO (Chen et al.,
// CGO 2016) does the same from LBR samples. Here the counts are calc's
// flow-inferred block counts (layout_counts with flow inference: executions
// that conserve flow, not raw samples), so no LBR is needed.
//
// The text format is LLVM's (SampleProfReader.cpp, "text format"):
//
//   main:TOTAL:HEAD
//    OFFSET[.DISCRIMINATOR]: COUNT [TARGET:COUNT ...]
//    OFFSET[.DISCRIMINATOR]: CALLEE:TOTAL        (an inlined callee's profile,
//     OFFSET: COUNT                               its lines one space deeper)
//
// OFFSET is the line minus the function's first line (DW_AT_decl_line of
// its subprogram), as clang's FunctionSamples::getOffset computes it; the
// discriminator is the base discriminator clang reads back
// (DILocation::getBaseDiscriminator). Discriminators exist only in images
// built with `-fdebug-info-for-profiling` (or `-gmlt`/`-g` plus that flag):
// without them, every block of a line gets the line's highest count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/flow_inference.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// One level of an instruction's inline stack, outermost first: frames[0]
// is the symbol's function; each next frame is inlined into the one before.
struct AfdoFrame {
    std::string function;                     // linkage name (what clang's profile matches)
    int decl_line = 0;                        // the function's first line
    int line = 0;                             // the instruction's line (last frame) or the inlined call's
    std::uint32_t discriminator = 0;          // as DWARF encodes it (afdo_base_discriminator decodes)
    std::string decl_file;                    // the function's file (tells apart statics sharing a name)
};

// An instruction's count: its block's executions, at its source location.
struct AfdoInstruction {
    std::vector<AfdoFrame> frames;            // outermost first; empty: no line, skipped
    double count = 0;
    std::string call_target;                  // a direct call's callee (linkage name), else ""
    // An indirect call's targets seen on -g stacks and their estimated
    // calls (afdo_call_targets); empty without stacks.
    std::map<std::string, double> indirect_targets;
};

struct AfdoLocation {
    std::uint32_t offset = 0;                 // line - decl_line, masked to 16 bits as clang does
    std::uint32_t discriminator = 0;          // base discriminator
    auto operator<=>(const AfdoLocation&) const = default;
};

struct AfdoFunction {
    std::string name;
    std::uint64_t total = 0;                  // body counts plus inlined callees' totals
    std::uint64_t head = 0;                   // entries (top-level functions only)
    std::map<AfdoLocation, std::uint64_t> body;                               // max over the location's instructions
    std::map<AfdoLocation, std::map<std::string, std::uint64_t>> calls;       // call targets and counts
    std::map<AfdoLocation, std::map<std::string, AfdoFunction>> inlined;      // callee name -> its profile
};

struct AfdoProfile {
    std::string image, build_id, epoch, event;
    std::vector<AfdoFunction> functions;      // top-level, hottest (total) first
    std::vector<std::string> warnings;
};

// DWARF's discriminator as clang reads it back with -fdebug-info-for-profiling:
// LLVM's prefix encoding (llvm/Support/Discriminator.h) holds the base
// discriminator, then duplication factor and copy id, which the profile
// must not carry.
std::uint32_t afdo_base_discriminator(std::uint32_t encoded);

// The profile of one top-level function from its instructions: each
// location's count is the highest of its instructions' (AutoFDO's rule: a
// line's blocks run at least as often as the hottest), a direct call adds
// its count to its target at its location, an inlined frame becomes a
// nested profile at its call site. An indirect call lists its targets
// (indirect_targets), and its location counts at least their calls added
// up (the targets' entries say the call ran that often). `head` is the
// function's entry count.
AfdoFunction afdo_function(const std::string& name, double head, const std::vector<AfdoInstruction>& instructions);

// Whether instructions gathered under one name belong to distinct functions
// (their outermost frames differ in declaring file or first line): static
// functions of different files that share a name. clang 14's sample loader
// looks a function's profile up by its IR name (getCanonicalFnName strips
// only `.llvm.` and `.part.` suffixes), so such functions can only share one
// entry; `-funique-internal-linkage-names` names them `NAME.__uniq.HASH`
// (mangled: `_ZL6helperi.__uniq.HASH`) in the IR and in DWARF's linkage name,
// which is what the profile then carries.
bool afdo_shares_name(const std::vector<AfdoInstruction>& instructions);

// The warning an export owes when the epoch kept no register snapshot of
// `image` for `event` (a daemon's default, `record --registers off`): calc
// then has no loop or branch anchors and its counts come from samples
// alone (on jsonq, daemon profiles without snapshots sat about 1.4x
// further from exact counts' shape than with one sample in ten:
// docs/PGO.md).
// Empty when some snapshot of the image was kept.
std::string missing_registers_warning(const store::EpochContents& contents, const std::string& event,
                                      const store::ImageId& image);

// A call seen on -g stacks: a caller frame's return address mapped back to
// its call instruction, and the function of the frame below it (the callee).
struct AfdoStackCall {
    std::uint64_t call = 0;                   // the call instruction's address in the image
    std::string target;                       // the callee's function (linkage name)
    double samples = 0;                       // stack samples with this call on them
};

// The calls on `stacks` between two frames of `image` (the file's path as
// recorded): each adjacent pair of its frames, the caller's return address
// found in `call_at_return` (return address -> call instruction, as
// calls_by_return_address gives it), the callee named by `function_at`
// (given the address of an instruction in it: a leaf's pc, or a return
// address minus one; "" leaves the pair out). A call counts once per stack
// sample even where recursion repeats it. Sorted by (call, target).
std::vector<AfdoStackCall> afdo_stack_calls(const store::StackProfile& stacks, const std::string& image,
                                            const std::map<std::uint64_t, std::uint64_t>& call_at_return,
                                            const std::function<std::string(std::uint64_t)>& function_at);

// Each call's targets and how often it called each (call address -> target
// -> calls). Stack samples through a call are its calls times the callee's
// time per call, so they overweight slow callees; a target's calls are
// instead its entries (`entries`: the flow's count of its entry block)
// split over the calls it was seen under by their samples. A target of
// unknown entries (none, or 0) gets its samples times the calls per sample
// of the call's other targets, or, where no target's entries are known,
// its share by samples of the call's own executions (`call_counts`: call
// address -> the flow's count of its block).
std::map<std::uint64_t, std::map<std::string, double>> afdo_call_targets(
    const std::vector<AfdoStackCall>& calls, const std::map<std::string, double>& entries,
    const std::map<std::uint64_t, double>& call_counts);

// The flow problem of a procedure's profile counts: layout's
// (layout_flow_problem: each block's samples as soft evidence at calc's
// estimate, snapshot odds on its branches), except that what calc measured
// stays measured: a block whose count register progress measured
// (Confidence::kMeasured: a loop's iterations, and what anchored branches
// split off them) and the edges of a branch calc anchored on its snapshots
// are measured_count constraints at calc's counts. Re-estimated from their
// samples instead, a measured loop's count gives way to the stalls of the
// blocks around it (wordfreq's scan loop: 111.7 M iterations measured,
// within 1% of the truth, then 78.8 M in the profile).
FlowProblem afdo_flow_problem(const CalcProcedure& p, double period_cycles);
// Its solution's block counts (indexed like p.blocks).
std::vector<double> afdo_block_counts(const CalcProcedure& p, double period_cycles);

struct AfdoOptions {
    std::string image;                        // --image: path, path suffix or file name of the recorded image
    std::string event;                        // "" = calc's choice (cycles, else cpu-clock)
    std::string machine = "auto";
};

// The image's profile from a recorded epoch. An indirect call's targets
// come from the epoch's -g stacks of calc's event, where it has them.
// Errors (one line each): no samples in the image; the image's file has no line table (build with
// -g -fdebug-info-for-profiling); --image names a file whose build id is
// not the recorded one.
[[nodiscard]] Result<AfdoProfile> build_afdo_profile(const store::EpochContents& contents, const AfdoOptions& options,
                                                     Symbolizer& symbolizer);

// LLVM's text sample profile, functions in the order given.
std::string render_afdo_text(const AfdoProfile& profile);

}  // namespace ecpi::analyze
