// Culprits for stalls, DCPI 6.3 ("guilty until proven innocent"). See culprits.h.
#include "ecpi/analyze/calc/culprits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

namespace ecpi::analyze {

namespace {

struct CauseInfo {
    const char* name;
    const char* title;
    char letter;
};

// Indexed by StallCause.
constexpr CauseInfo kCauses[kStallCauses] = {
    {"icache", "I-cache miss", 'i'},
    {"itlb", "ITLB miss", 'I'},
    {"dcache", "D-cache miss", 'd'},
    {"dtlb", "DTLB miss", 'D'},
    {"branch_mispredict", "Branch mispredict", 'b'},
    {"store_buffer", "Store buffer / memory ordering", 'w'},
    {"divider", "Divider / long-latency unit busy", 'v'},
    {"sync", "Synchronization (locked, fence)", 'y'},
    {"page_fault", "Page fault", 'p'},
    {"context_switch", "Context switch", 'c'},
    {"unexplained", "Unexplained stall", 'u'},
    {"dependency", "Register/flags dependency", 'r'},
    {"memory_dependency", "Memory dependency (store to load)", 'm'},
    {"port", "Execution port busy", 'f'},
    {"frontend", "Dispatch/retire width", 's'},
    {"latency", "Execution latency", 'l'},
    {"divider", "Divider latency", 'V'},
};

constexpr std::uint64_t kLineBytes = 64;
constexpr std::uint64_t kPageBytes = 4096;
// DCPI 6.3: predecessors and edges executed much less often than the stalled
// instruction itself are ignored when ruling out I-cache misses.
constexpr double kFrequentEdge = 0.1;
// How far past a mispredicted branch's target the refill exposes latencies.
constexpr std::uint32_t kRefillInstructions = 12;

StallCause from_static(StaticCause c) {
    switch (c) {
        case StaticCause::kDependency: return StallCause::kDependency;
        case StaticCause::kMemoryDependency: return StallCause::kMemoryDependency;
        case StaticCause::kPort: return StallCause::kPort;
        case StaticCause::kLatency: return StallCause::kLatency;
        case StaticCause::kDivider: return StallCause::kStaticDivider;
        case StaticCause::kFrontend:
        case StaticCause::kNone: break;
    }
    return StallCause::kFrontend;
}

struct Candidate {
    StallCause cause;
    double max;  // cycles per execution (bounded by the stall itself later)
    std::uint32_t instruction;
};

// A stall's candidate causes, each bounded by the stall itself (D cycles
// per execution); called as add(cause, bound, culprit).
struct Candidates {
    double D;
    std::vector<Candidate> list;
    void operator()(StallCause c, double max, std::uint32_t culprit) {
        if (max > 0) list.push_back({c, std::min(max, D), culprit});
    }
};

class Analyzer {
public:
    explicit Analyzer(const CulpritInput& in) : in_(in), cfg_(*in.cfg), est_(*in.estimate) {}

    CulpritAnalysis run() {
        CulpritAnalysis out;
        out.instructions.resize(cfg_.instructions.size());
        StallSummary& sum = out.summary;
        const double P = in_.period_cycles;
        const double width = static_cast<double>(in_.model->retire_width());
        for (std::uint32_t b = 0; b < cfg_.blocks.size(); ++b) {
            const auto& blk = cfg_.blocks[b];
            const auto& t = (*in_.timing)[b];
            const double F = est_.block_frequency[b];
            const double executions = F * P;
            // The share of the best case that is static stall: what exceeds
            // retiring `retire_width` instructions every cycle.
            double static_share = 0;
            if (t.cycles > 0) static_share = std::max(0.0, 1.0 - blk.count / (width * t.cycles));
            const std::vector<double> dynamic = F > 0 ? netted_dynamic(b, F) : std::vector<double>(blk.count, 0.0);
            for (std::uint32_t i = 0; i < blk.count; ++i) {
                const std::uint32_t k = blk.first + i;
                const std::uint64_t s = in_.samples[k];
                const double actual = static_cast<double>(s) * P;
                sum.samples += s;
                sum.total_cycles += actual;
                if (F <= 0) {
                    sum.sampling_error += actual;
                    continue;
                }
                const double m = t.known[i] ? t.m[i] : 0.0;
                sum.best_cycles += executions * m;
                sum.executed_instructions += executions;
                InstructionStalls& st = out.instructions[k];
                st.static_cycles = m * static_share;
                sum.execution += executions * (m - st.static_cycles);
                st.dynamic_cycles = dynamic[i];
                if (st.dynamic_cycles > 0) {
                    sum.dynamic_positive += executions * st.dynamic_cycles;
                    explain(b, i, st, executions, sum);
                } else {
                    sum.unexplained_gain += executions * st.dynamic_cycles;
                }
                if (st.static_cycles > 0) {
                    StallCause c = from_static(t.static_cause[i]);
                    st.culprits.push_back({c, st.static_cycles, st.static_cycles, t.static_culprit[i]});
                    sum.min[static_cast<std::size_t>(c)] += executions * st.static_cycles;
                    sum.max[static_cast<std::size_t>(c)] += executions * st.static_cycles;
                }
            }
        }
        return out;
    }

private:
    // Per instruction of block b: samples / F - M_i, with deficits netted
    // against surpluses of neighbours the timer interrupt may have landed
    // on instead. The model charges each wait `sample_skid` instructions
    // late, but the real skid varies by an instruction or two (and over a
    // whole short block on cores with whole-block windows): without
    // netting, a loop running exactly at its best case showed half its
    // cycles as "unexplained gain" and the same amount as stall next door.
    // Netting moves no cycles out of the block, so the totals still tally.
    std::vector<double> netted_dynamic(std::uint32_t b, double F) const {
        const auto& blk = cfg_.blocks[b];
        const auto& t = (*in_.timing)[b];
        std::vector<double> d(blk.count);
        for (std::uint32_t i = 0; i < blk.count; ++i)
            d[i] = static_cast<double>(in_.samples[blk.first + i]) / F - (t.known[i] ? t.m[i] : 0.0);
        const auto skid = static_cast<std::uint32_t>(std::max(in_.model->sample_skid(), 0));
        std::uint32_t reach = std::max<std::uint32_t>(2, skid + 1);
        if (blk.count <= in_.model->whole_block_below()) reach = blk.count;
        auto take = [&d](std::uint32_t to, std::uint32_t from) {
            const double moved = std::min(-d[to], std::max(d[from], 0.0));
            d[to] += moved;
            d[from] -= moved;
        };
        for (std::uint32_t i = 0; i < blk.count; ++i) {
            // Later instructions first: samples land after the cause.
            for (std::uint32_t j = i + 1; d[i] < 0 && j < blk.count && j - i <= reach; ++j) take(i, j);
            for (std::uint32_t j = i; d[i] < 0 && j > 0 && i - (j - 1) <= reach; --j) take(i, j - 1);
        }
        return d;
    }

    const DecodedInstruction& insn(std::uint32_t k) const { return cfg_.instructions[k]; }
    const InstructionClass& cls(std::uint32_t k) const { return in_.model->classify(insn(k)); }
    double edge_executions(std::uint32_t e) const { return est_.edge_frequency[e] * in_.period_cycles; }
    // An edge's estimate or, where propagation left it at 0, its source
    // block's (an edge runs at most as often as the block it leaves).
    double edge_frequency(std::uint32_t e) const {
        const auto from = cfg_.edges[e].from;
        if (est_.edge_frequency[e] > 0 || from == kEntryBlock) return est_.edge_frequency[e];
        return est_.block_frequency[from];
    }

    // The instruction `back` places before instruction i of block b on the
    // way execution most often comes (the most frequent in-edge), or
    // kNoInstruction at the procedure's entry.
    std::uint32_t before(std::uint32_t b, std::uint32_t i, std::uint32_t back) const {
        for (int guard = 0; guard < 64; ++guard) {
            if (i >= back) return cfg_.blocks[b].first + i - back;
            back -= i;
            std::uint32_t best = kNoInstruction;
            double best_f = -1;
            for (auto e : cfg_.blocks[b].in_edges) {
                const auto& edge = cfg_.edges[e];
                if (edge.from == kEntryBlock) continue;
                if (edge_frequency(e) > best_f) {
                    best_f = edge_frequency(e);
                    best = edge.from;
                }
            }
            if (best == kNoInstruction) return kNoInstruction;
            b = best;
            i = cfg_.blocks[b].count;
        }
        return kNoInstruction;
    }

    // The instruction of the block (or, in a loop, the previous iteration)
    // that last wrote register r before position i, or kNoInstruction.
    std::uint32_t writer_of(std::uint32_t b, std::uint32_t i, std::uint16_t r) const {
        const auto& blk = cfg_.blocks[b];
        for (std::uint32_t j = i; j-- > 0;)
            if (insn(blk.first + j).writes.contains(r)) return blk.first + j;
        bool self_loop = false;
        for (auto e : blk.in_edges) self_loop = self_loop || cfg_.edges[e].from == b;
        if (self_loop)
            for (std::uint32_t j = blk.count; j-- > i + 1;)
                if (insn(blk.first + j).writes.contains(r)) return blk.first + j;
        return kNoInstruction;
    }

    std::uint32_t block_of(std::uint32_t k) const { return cfg_.instruction_block[k]; }

    // Bytes the address of load l advances per execution, when its base
    // register only changes by constant increments where the load runs
    // (writes in code run under 1% as often, such as its initialization,
    // are ignored); infinity when unknown.
    double address_stride(std::uint32_t l) const {
        constexpr double kUnknown = std::numeric_limits<double>::infinity();
        const auto& m = insn(l).memory;
        // rip-relative (the base is not a register the load reads), indexed
        // or stack addresses: no bound.
        if (m.base == 0 || m.base == kStackPointer || m.index != 0 || !insn(l).reads.contains(m.base)) return kUnknown;
        const double f_load = est_.block_frequency[block_of(l)];
        if (f_load <= 0) return kUnknown;
        double bytes = 0;
        for (std::uint32_t j = 0; j < cfg_.instructions.size(); ++j) {
            const auto& d = insn(j);
            if (!d.writes.contains(m.base)) continue;
            const double f = est_.block_frequency[block_of(j)];
            if (f <= 0.01 * f_load) continue;
            auto step = constant_increment(d);
            if (!step) return kUnknown;
            bytes += std::abs(*step) * f;
        }
        // An address that does not move can still miss when other accesses
        // evict its line: no bound.
        return bytes > 0 ? bytes / f_load : kUnknown;
    }

    // The constant an `add reg, imm` / `sub reg, imm` / `inc` / `dec` adds.
    static std::optional<double> constant_increment(const DecodedInstruction& d) {
        if (d.mnemonic == "inc" || d.mnemonic == "dec") return 1.0;
        if (d.mnemonic != "add" && d.mnemonic != "sub") return std::nullopt;
        auto comma = d.operands.find(", ");
        if (comma == std::string::npos || d.operands.find('[') != std::string::npos) return std::nullopt;
        const std::string imm = d.operands.substr(comma + 2);
        char* end = nullptr;
        long long v = std::strtoll(imm.c_str(), &end, 0);
        if (end == imm.c_str() || *end != '\0') return std::nullopt;
        return static_cast<double>(v);
    }

    // Bound from event samples at an instruction and the next one (skid): events.
    double events_near(const EventSamples& ev, std::uint32_t k) const {
        double n = static_cast<double>(ev.per_instruction[k]);
        if (k + 1 < ev.per_instruction.size()) n += static_cast<double>(ev.per_instruction[k + 1]);
        return n * ev.period;
    }

    // Cycles per execution that `mispredicts` mispredictions of `branch`
    // can cost (fewer where branch-misses samples were recorded).
    double mispredict_bound(std::uint32_t branch, double mispredicts, double executions) const {
        if (!in_.branch_misses.empty()) mispredicts = std::min(mispredicts, events_near(in_.branch_misses, branch));
        return mispredicts * in_.model->mispredict_penalty() / executions;
    }

    // Misprediction candidates for a stall after the head of block b: the
    // conditional and indirect jumps that lead into b, each bounded by how
    // often it can mispredict.
    template <class Add>
    void mispredicts_into(std::uint32_t b, double executions, Add& add) const {
        const auto& blk = cfg_.blocks[b];
        // Block frequencies bound the edges (edge estimates can be 0 where
        // flow propagation stopped): into b at most b's count.
        const double into = est_.block_frequency[b] * in_.period_cycles;
        for (auto e : blk.in_edges) {
            const auto& edge = cfg_.edges[e];
            if (edge.from == kEntryBlock) continue;
            const auto& pb = cfg_.blocks[edge.from];
            const std::uint32_t br = pb.first + pb.count - 1;
            if (insn(br).flow == FlowKind::kCondJump) {
                // A branch that (almost) always goes one way is predicted: a
                // predictor mispredicts at most about twice per execution of
                // the rarer direction.
                double other = 0;
                for (auto oe : pb.out_edges) {
                    std::uint32_t to = cfg_.edges[oe].to;
                    if (to == b) continue;
                    other += to == kExitBlock ? edge_executions(oe) : est_.block_frequency[to] * in_.period_cycles;
                }
                add(StallCause::kBranchMispredict, mispredict_bound(br, std::min(into, 2 * other), executions), br);
            } else if (insn(br).flow == FlowKind::kIndirectJump) {
                add(StallCause::kBranchMispredict, mispredict_bound(br, into, executions), br);
            }
        }
    }

    // I-cache / ITLB and branch-misprediction candidates for instruction i
    // of block b as the instruction the front end had not delivered.
    template <class Add>
    void front_end(std::uint32_t b, std::uint32_t i, double D, double executions, Add& add) const {
        const auto& blk = cfg_.blocks[b];
        const std::uint32_t k = blk.first + i;
        const DecodedInstruction& d = insn(k);
        const std::uint32_t prev = i > 0 ? k - 1 : kNoInstruction;
        const bool after_call = prev != kNoInstruction && is_call(insn(prev).flow);
        // I-cache / ITLB (DCPI 6.3): inside a block only at the start of a
        // line (or an instruction crossing into the next); at a block head,
        // only when a frequent predecessor ends in another line. After a call
        // the callee ran in between and may have evicted the line.
        const std::uint64_t first = d.address, last = d.address + (d.size ? d.size - 1 : 0);
        bool line_miss = false, page_miss = false;
        if (i > 0) {
            line_miss = first % kLineBytes == 0 || first / kLineBytes != last / kLineBytes || after_call;
            page_miss = first % kPageBytes == 0 || first / kPageBytes != last / kPageBytes || after_call;
        } else {
            const double f = est_.block_frequency[b];
            bool any_frequent = false;
            for (auto e : blk.in_edges) any_frequent = any_frequent || edge_frequency(e) >= kFrequentEdge * f;
            for (auto e : blk.in_edges) {
                if (any_frequent && edge_frequency(e) < kFrequentEdge * f) continue;
                const auto& edge = cfg_.edges[e];
                if (edge.from == kEntryBlock) {  // called from elsewhere
                    line_miss = page_miss = true;
                    continue;
                }
                const auto& pb = cfg_.blocks[edge.from];
                std::uint64_t p = insn(pb.first + pb.count - 1).address;
                line_miss = line_miss || p / kLineBytes != first / kLineBytes;
                page_miss = page_miss || p / kPageBytes != first / kPageBytes;
            }
            line_miss = line_miss || first / kLineBytes != last / kLineBytes;
        }
        if (line_miss) add(StallCause::kICache, D, kNoInstruction);
        if (page_miss) add(StallCause::kITlb, D, kNoInstruction);

        // Branch misprediction: at the target of a conditional or indirect
        // jump (the refetch arrives there), and after a return.
        if (i == 0) {
            mispredicts_into(b, executions, add);
        } else if (after_call && !(insn(prev).flow == FlowKind::kCall && insn(prev).target != 0 &&
                                   in_.leaf_callee && in_.leaf_callee(insn(prev).target))) {
            add(StallCause::kBranchMispredict, mispredict_bound(prev, executions, executions), prev);  // the callee's return
        }
    }

    void explain(std::uint32_t b, std::uint32_t i, InstructionStalls& st, double executions, StallSummary& sum) {
        Candidates add{st.dynamic_cycles, {}};
        front_end_candidates(b, i, executions, add);
        execution_candidates(b, i, executions, add);
        // Page faults and context switches: with kernel samples, their
        // handling is charged to the kernel's code, not to k; without, any
        // instruction may have paid for them.
        if (!in_.kernel_sampled) {
            add(StallCause::kPageFault, add.D, kNoInstruction);
            add(StallCause::kContextSwitch, add.D, kNoInstruction);
        }
        one_per_culprit(add.list);
        assign_ranges(add.list, st, executions, sum);
    }

    void front_end_candidates(std::uint32_t b, std::uint32_t i, double executions, Candidates& add) const {
        // Front-end stalls land on the instruction that had not arrived, k,
        // and (the interrupt is taken at the next retirement) on the one
        // after it: so k and, within the block, the instruction before k.
        front_end(b, i, add.D, executions, add);
        if (i > 0) front_end(b, i - 1, add.D, executions, add);
        // After a misprediction the window restarts empty: the first
        // instructions past the target pay their latencies in full. So the
        // heads of blocks a few instructions back on the frequent path are
        // misprediction candidates too (bounded as at the head).
        for (std::uint32_t back = 2; back <= kRefillInstructions; ++back) {
            std::uint32_t j = before(b, i, back);
            if (j == kNoInstruction) break;
            std::uint32_t jb = block_of(j);
            if (cfg_.blocks[jb].first == j) mispredicts_into(jb, executions, add);
        }
    }

    void execution_candidates(std::uint32_t b, std::uint32_t i, double executions, Candidates& add) const {
        const std::uint32_t k = cfg_.blocks[b].first + i;
        const bool stores = block_stores(b);
        const std::vector<std::uint32_t> loads = window_candidates(execution_window(b, i), stores, add);
        load_candidates(b, loads, executions, stores, add);
        // A store that cannot get a store-buffer entry stops dispatch: the
        // store itself is where the interrupt finds the machine waiting.
        if (store_may_wait(k, stores)) add(StallCause::kStoreBuffer, add.D, k);
        if (cls(k).sync) add(StallCause::kSync, add.D, k);
    }

    // Execution stalls: the instruction(s) that kept retirement waiting
    // land `skid` places earlier (one or two instructions on x86).
    std::vector<std::uint32_t> execution_window(std::uint32_t b, std::uint32_t i) const {
        const auto& blk = cfg_.blocks[b];
        const std::uint32_t k = blk.first + i;
        const auto skid = static_cast<std::uint32_t>(std::max(in_.model->sample_skid(), 0));
        std::vector<std::uint32_t> window = {skid == 0 ? k : before(b, i, skid), before(b, i, skid + 1)};
        // On a core that spreads a short block's samples over it (the model's
        // whole_block_below, docs/MACHINE_MODEL.md) the instruction that kept
        // retirement waiting may be any of the block's.
        if (blk.count <= in_.model->whole_block_below())
            for (std::uint32_t j = 0; j < blk.count; ++j) window.push_back(blk.first + j);
        return window;
    }

    // Stores other than the stack's own (push, call): those hit the line
    // at the top of the stack, which stays in L1, so by themselves they
    // never fill the store buffer.
    bool block_stores(std::uint32_t b) const {
        const auto& blk = cfg_.blocks[b];
        bool stores = false;
        for (std::uint32_t j = 0; j < blk.count; ++j)
            stores = stores || (insn(blk.first + j).stores && !cls(blk.first + j).stack_op);
        return stores;
    }

    bool store_may_wait(std::uint32_t j, bool block_stores) const {
        return insn(j).stores && (!cls(j).stack_op || block_stores);
    }

    // Divider, sync and store-buffer candidates at the window's
    // instructions; returns the loads they are or depend on, each once.
    std::vector<std::uint32_t> window_candidates(const std::vector<std::uint32_t>& window, bool block_stores,
                                                 Candidates& add) const {
        std::vector<std::uint32_t> loads;
        for (auto w : window) {
            if (w == kNoInstruction) continue;
            const DecodedInstruction& wd = insn(w);
            if (wd.loads && !cls(w).stack_op) loads.push_back(w);
            // An operand (or the address) that comes from a load (DCPI: the
            // culprit list names the load).
            std::uint32_t wb = block_of(w);
            std::uint32_t wi = w - cfg_.blocks[wb].first;
            for (auto r : wd.reads) {
                if (r == kStackPointer) continue;
                std::uint32_t src = writer_of(wb, wi, r);
                if (src != kNoInstruction && insn(src).loads && !cls(src).stack_op) loads.push_back(src);
            }
            if (cls(w).long_latency) add(StallCause::kDivider, add.D, w);
            if (cls(w).sync) add(StallCause::kSync, add.D, w);
            if (store_may_wait(w, block_stores)) add(StallCause::kStoreBuffer, add.D, w);
        }
        std::sort(loads.begin(), loads.end());
        loads.erase(std::unique(loads.begin(), loads.end()), loads.end());
        return loads;
    }

    // D-cache, DTLB and memory-ordering candidates at the loads.
    void load_candidates(std::uint32_t b, const std::vector<std::uint32_t>& loads, double executions,
                         bool block_stores, Candidates& add) const {
        const double D = add.D;
        for (auto l : loads) {
            // A load walking memory with a small stride misses at most once
            // per line (D-cache) or page (DTLB) it moves through.
            const double stride = address_stride(l);
            const double latency = in_.model->memory_latency();
            double dcache = std::min(D, std::min(1.0, stride / static_cast<double>(kLineBytes)) * latency);
            double dtlb = std::min(D, std::min(1.0, stride / static_cast<double>(kPageBytes)) *
                                          in_.model->page_walk_latency());
            if (!in_.cache_misses.empty())
                dcache = std::min(dcache, events_near(in_.cache_misses, l) * latency / executions);
            add(StallCause::kDCache, dcache, l);
            add(StallCause::kDTlb, dtlb, l);
            // A load after a store in the same loop may wait on memory
            // ordering (a store to the same 4 KiB offset: 4K aliasing).
            if (block_stores && block_of(l) == b) add(StallCause::kStoreBuffer, D, l);
        }
    }

    // One entry per (cause, culprit instruction), the largest bound: the
    // same branch can be found at the head and through the refill walk.
    static void one_per_culprit(std::vector<Candidate>& cands) {
        std::sort(cands.begin(), cands.end(), [](const Candidate& x, const Candidate& y) {
            return std::tie(x.cause, x.instruction, y.max) < std::tie(y.cause, y.instruction, x.max);
        });
        cands.erase(std::unique(cands.begin(), cands.end(),
                                [](const Candidate& x, const Candidate& y) {
                                    return x.cause == y.cause && x.instruction == y.instruction;
                                }),
                    cands.end());
    }

    // Ranges per cause (DCPI Figure 4): at most its bound; at least what
    // the other causes together cannot explain. Into the instruction's
    // culprits and the summary.
    static void assign_ranges(const std::vector<Candidate>& cands, InstructionStalls& st, double executions,
                              StallSummary& sum) {
        const double D = st.dynamic_cycles;
        std::array<double, kStallCauses> cause_max{};
        for (const auto& c : cands) {
            auto x = static_cast<std::size_t>(c.cause);
            cause_max[x] = std::min(D, cause_max[x] + c.max);
        }
        double all_max = 0;
        for (auto v : cause_max) all_max += v;
        // A cause's minimum is spread over its culprit instructions in turn,
        // each up to its own bound, so no entry shows a minimum above its
        // maximum; the summary takes the cause's minimum whole.
        std::array<bool, kStallCauses> emitted{};
        std::array<double, kStallCauses> min_left{};
        for (std::size_t x = 0; x < kStallCauses; ++x)
            // Never above the cause's own bound: when all the bounds together
            // fall short of D, the rest is the unexplained stall below.
            min_left[x] = std::min(cause_max[x], std::max(0.0, D - (all_max - cause_max[x])));
        for (const auto& c : cands) {
            auto x = static_cast<std::size_t>(c.cause);
            const double cmax = std::min(c.max, cause_max[x]);
            if (!emitted[x]) {
                sum.min[x] += executions * min_left[x];
                sum.max[x] += executions * cause_max[x];
            }
            const double cmin = std::min(min_left[x], cmax);
            min_left[x] -= cmin;
            st.culprits.push_back({c.cause, cmin, cmax, c.instruction});
            emitted[x] = true;
        }
        if (all_max < D) {  // what no candidate can explain
            double u = D - all_max;
            st.culprits.push_back({StallCause::kUnexplained, u, u, kNoInstruction});
            auto x = static_cast<std::size_t>(StallCause::kUnexplained);
            sum.min[x] += executions * u;
            sum.max[x] += executions * u;
        }
    }

    const CulpritInput& in_;
    const Cfg& cfg_;
    const FrequencyEstimate& est_;
};

}  // namespace

const char* stall_cause_name(StallCause cause) { return kCauses[static_cast<std::size_t>(cause)].name; }
const char* stall_cause_title(StallCause cause) { return kCauses[static_cast<std::size_t>(cause)].title; }
char stall_cause_letter(StallCause cause) { return kCauses[static_cast<std::size_t>(cause)].letter; }
bool is_dynamic(StallCause cause) { return cause <= StallCause::kUnexplained; }

void StallSummary::add(const StallSummary& o) {
    samples += o.samples;
    total_cycles += o.total_cycles;
    best_cycles += o.best_cycles;
    executed_instructions += o.executed_instructions;
    execution += o.execution;
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        min[c] += o.min[c];
        max[c] += o.max[c];
    }
    dynamic_positive += o.dynamic_positive;
    unexplained_gain += o.unexplained_gain;
    sampling_error += o.sampling_error;
}

double StallSummary::dynamic_stall() const { return dynamic_positive + unexplained_gain; }

double StallSummary::static_stall() const {
    double s = 0;
    for (std::size_t c = 0; c < kStallCauses; ++c)
        if (!is_dynamic(static_cast<StallCause>(c))) s += min[c];
    return s;
}

CulpritAnalysis find_culprits(const CulpritInput& input) { return Analyzer(input).run(); }

}  // namespace ecpi::analyze
