// A static model of an x86-64 core that gives, for every instruction of a
// basic block, M_i: the minimum number of cycles the profile should charge to
// instruction i per execution when there are no dynamic stalls (DCPI 6.1.3).
//
// DCPI scheduled each block on an in-order Alpha and took M_i as the cycles
// i spent at the head of the issue queue. An out-of-order x86 core has no
// such queue head; what a clock interrupt observes is retirement. So the
// model is an idealized out-of-order core (dispatch and retire widths, ports,
// per-class latencies and uop counts, read from a JSON file under
// analyze/calc/machine/ so other cores can be added) simulated over the block: W_j
// is the number of cycles instruction j keeps retirement waiting (retire_j -
// retire_{j-1}). A timer interrupt is taken once the oldest instruction
// retires, so on x86 the sample lands `sample_skid` instructions later: M_i =
// W_{i - skid}. docs/MACHINE_MODEL.md lists every assumption.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/result.h"

namespace ecpi::analyze {

struct InstructionClass {
    std::string name;
    double latency = 1;        // cycles from operands ready to result (plus the load latency for a memory source)
    int uops = 1;              // fused-domain uops (dispatch and retire slots)
    int port = -1;             // port group index, -1: none
    double occupancy = 1;      // cycles the port stays busy (1: pipelined)
    bool unknown = false;      // data-dependent timing (rep string ops, serializing): M unknown
    // Derived from the name when the model is loaded (the simulation's hot path).
    bool stack_op = false;     // push, pop, call, ret: rsp is updated at decode (stack engine)
    bool pure_load = false;    // load, pop: the result is the loaded value
    bool stores_itself = false;// store, push, call: the memory write is the instruction itself
    bool long_latency = false; // a unit that is not pipelined (occupancy > 1: dividers, square root)
    bool sync = false;         // locked, fencing or serializing ("atomic" and "serialize" classes)
};

// Why, in the model's schedule, an instruction kept retirement waiting (the
// static stalls of DCPI 6.3, for an out-of-order core).
enum class StaticCause : std::uint8_t {
    kNone,              // retired with the previous instruction
    kDependency,        // waited for a register or flags operand from an earlier instruction
    kMemoryDependency,  // a load waited for the data of an earlier store to the same address
    kPort,              // operands ready, but every unit of its port group was busy
    kFrontend,          // dispatch or retirement width (or a full reorder buffer)
    kLatency,           // its own execution latency (load-to-use, multiply, ...)
    kDivider,           // its own latency on a unit that is not pipelined (div, sqrt)
};
const char* static_cause_name(StaticCause cause);
inline constexpr std::uint32_t kNoInstruction = 0xffffffffu;

// Timing of one basic block.
struct BlockTiming {
    // Per instruction of the block, in the profile's attribution (after skid):
    // the best-case cycles charged to it per execution; valid where known[i].
    std::vector<double> m;
    std::vector<bool> known;
    // For an issue point i, the first instruction of the span since the
    // instruction producing its critical operand (DCPI 6.1.3's ratio over a
    // span): the span is [span_start[i], i]. span_start[i] == i when there is
    // no producer in the block or nothing between them.
    std::vector<std::uint32_t> span_start;
    // W_j: cycles instruction j keeps retirement waiting (before skid).
    std::vector<double> wait;
    // Per instruction, in the profile's attribution like `m`: why the
    // instruction whose wait lands here waited, and the CFG index of the
    // instruction it waited for (kNoInstruction when none).
    std::vector<StaticCause> static_cause;
    std::vector<std::uint32_t> static_culprit;
    double cycles = 0;         // best-case cycles per execution of the block (sum of wait)
    // A lower bound on the block's cycles from its calls: the model's
    // call_return_cycles per call (a call and its return take that long
    // however little the callee and the code around do, which overlap with
    // it). Not in `cycles` nor in any M_i: where those samples land (after
    // the call, in the callee) varies.
    double call_cycles = 0;
    bool steady_state = false; // timed as a loop iteration in steady state
    bool has_context = false;  // timed after the code that precedes it (a loop or a unique predecessor)
};

class MachineModel {
public:
    // A built-in model by name ("x86_64-generic") or a JSON file path.
    static Result<MachineModel> load(std::string_view name_or_path);
    static Result<MachineModel> from_json(const nlohmann::json& json);
    static std::vector<std::string> builtin_names();
    static constexpr const char* kDefault = "x86_64-generic";
    // calc's default: the built-in model whose "match" fits the CPU recorded
    // with the epoch, else kDefault.
    static constexpr const char* kAuto = "auto";
    // The first built-in model matching this CPU (by its "match" object), or
    // nullopt.
    static std::optional<std::string> builtin_for_cpu(std::string_view vendor, std::uint64_t family,
                                                      std::uint64_t model);

    const std::string& name() const { return name_; }
    int sample_skid() const { return sample_skid_; }
    // Blocks up to this many instructions take their whole block as each
    // issue point's window (frequency.h): on some cores samples in a short
    // loop land wherever retirement groups end, not where the model says.
    std::uint32_t whole_block_below() const { return whole_block_below_; }
    // The fewest cycles a call and its return take, a short callee's code
    // and independent work around the call included (0 = not modelled);
    // see BlockTiming::call_cycles.
    double call_return_cycles() const { return call_return_cycles_; }
    // The same for a call through a register or memory (a table of
    // functions): a predicted indirect call and its return (Zen 5: 5.5
    // against 4.1, bench/accuracy/call_return.c). A model that does not
    // say takes a direct call's.
    double indirect_call_return_cycles() const { return indirect_call_return_cycles_; }
    // An instruction's share of BlockTiming::call_cycles: 0 unless a call.
    double call_cycles(FlowKind flow) const {
        return flow == FlowKind::kCall ? call_return_cycles_
               : flow == FlowKind::kIndirectCall ? indirect_call_return_cycles_
                                                 : 0;
    }
    int retire_width() const { return retire_width_; }
    // The most instructions a core this model stands for retires a cycle
    // (ranges.h: what must land on a block outside a loop's steady state).
    // A measured model's own retire_width; the generic model stands for
    // several cores and takes the widest of them.
    int widest_retire() const { return widest_retire_; }
    // Instructions in flight: a loop's trip that fits can run its whole
    // recurrence under an older instruction's stall (ranges.cpp).
    int rob_size() const { return rob_size_; }
    // Cycles lost per branch misprediction, and the pessimistic cost of one
    // cache miss served from memory (used to bound stalls from event counts).
    double mispredict_penalty() const { return mispredict_penalty_; }
    // Upper bounds for culprit ranges, in cycles: one miss to DRAM, and one
    // page walk (a TLB miss whose walk misses the caches; longer under a
    // hypervisor, whose nested walk reads two page tables).
    double memory_latency() const { return memory_latency_; }
    double page_walk_latency() const { return page_walk_latency_; }

    // The class an instruction is timed with (memory operands add the load
    // latency and store uops on top of it).
    const InstructionClass& classify(const DecodedInstruction& insn) const;

    // Times every block of the CFG: a block that is a loop on its own, or on
    // a simple cycle of blocks through its latch, in steady state over several
    // iterations; a block with a unique predecessor after that predecessor;
    // any other block from an idle machine with its first instructions'
    // M unknown.
    std::vector<BlockTiming> time_blocks(const Cfg& cfg) const;

private:
    struct Simulation;
    class BlockTimer;  // time_blocks' steps (machine_model.cpp)
    std::string name_;
    int dispatch_width_ = 4;
    int retire_width_ = 4;
    int widest_retire_ = 4;
    int rob_size_ = 224;
    double load_latency_ = 5;
    double store_forward_latency_ = 5;
    int sample_skid_ = 1;
    std::uint32_t whole_block_below_ = 0;
    double call_return_cycles_ = 0;
    double indirect_call_return_cycles_ = 0;
    std::string match_vendor_;
    std::vector<std::uint64_t> match_families_, match_models_;  // empty: any
    double mispredict_penalty_ = 17;
    double memory_latency_ = 600;
    double page_walk_latency_ = 1200;
    int loop_iterations_ = 8;
    bool macro_fusion_ = true;
    bool move_elimination_ = true;
    bool zero_idioms_ = true;
    bool overlap_blocks_ = true;
    std::vector<int> port_counts_;
    std::vector<InstructionClass> classes_;
    // The same for copies of one loaded model: keys classify's per-thread
    // cache of instruction classes.
    std::uint64_t identity_ = 0;
    const InstructionClass& classify_by_name(const DecodedInstruction& insn) const;
    std::map<std::string, std::size_t, std::less<>> by_mnemonic_;
    std::vector<std::pair<std::string, std::size_t>> by_prefix_;
    std::size_t default_class_ = 0, default_vector_class_ = 0;
    std::size_t load_class_ = 0, store_class_ = 0, nop_class_ = 0;
};

}  // namespace ecpi::analyze
