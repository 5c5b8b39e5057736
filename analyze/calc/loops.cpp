// Natural loops and induction variables. See loops.h.
#include "ecpi/analyze/calc/loops.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include <capstone/capstone.h>

#include "ecpi/analyze/calc/callee_code.h"

namespace ecpi::analyze {

bool Loop::contains(std::uint32_t block) const { return std::binary_search(blocks.begin(), blocks.end(), block); }

namespace {

bool in_mask(std::uint16_t mask, int gp) { return ((mask >> gp) & 1u) != 0; }

// What a call instruction may write: the callee's code where it is known.
// What a call may write: its target's writes, or for a call through a
// table the union of the targets its snapshots decided (a target no
// deciding snapshot chose runs below about 1% of the calls, call_odds.h).
std::uint16_t call_writes_of(const DecodedInstruction& d, const CallWrites& call_writes,
                             const IndirectTargets& indirect) {
    if (!call_writes) return kAllGp;
    if (d.flow == FlowKind::kCall && d.target != 0) return call_writes(d.target);
    if (d.flow != FlowKind::kIndirectCall || !indirect) return kAllGp;
    const std::vector<std::uint64_t> targets = indirect(d.address);
    if (targets.empty()) return kAllGp;
    std::uint16_t w = 0;
    for (std::uint64_t t : targets) w = static_cast<std::uint16_t>(w | call_writes(t));
    return w;
}

// Cooper, Harvey and Kennedy's iterative dominator algorithm over the
// blocks plus a root (index nb) standing for kEntryBlock.
std::vector<std::uint32_t> dominator_tree(const Cfg& cfg) {
    const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
    const std::uint32_t root = nb;
    auto successors = [&](std::uint32_t n, std::vector<std::uint32_t>& out) {
        out.clear();
        if (n == root) {
            for (const auto& e : cfg.edges)
                if (e.from == kEntryBlock && e.to < nb) out.push_back(e.to);
            return;
        }
        for (auto e : cfg.blocks[n].out_edges)
            if (cfg.edges[e].to < nb) out.push_back(cfg.edges[e].to);
    };
    // Reverse postorder from the root (iterative DFS).
    std::vector<std::uint32_t> order;
    std::vector<std::uint32_t> rpo_index(nb + 1, kNoLoop);
    {
        std::vector<bool> seen(nb + 1, false);
        std::vector<std::pair<std::uint32_t, std::size_t>> stack = {{root, 0}};
        std::vector<std::vector<std::uint32_t>> succ(nb + 1);
        for (std::uint32_t n = 0; n <= nb; ++n) successors(n, succ[n]);
        seen[root] = true;
        while (!stack.empty()) {
            auto& [n, next] = stack.back();
            if (next < succ[n].size()) {
                std::uint32_t s = succ[n][next++];
                if (!seen[s]) {
                    seen[s] = true;
                    stack.push_back({s, 0});
                }
                continue;
            }
            order.push_back(n);
            stack.pop_back();
        }
        std::reverse(order.begin(), order.end());
        for (std::uint32_t k = 0; k < order.size(); ++k) rpo_index[order[k]] = k;
    }
    std::vector<std::vector<std::uint32_t>> preds(nb + 1);
    for (const auto& e : cfg.edges) {
        if (e.to >= nb) continue;
        preds[e.to].push_back(e.from == kEntryBlock ? root : e.from);
    }
    std::vector<std::uint32_t> idom(nb + 1, kNoLoop);
    idom[root] = root;
    auto intersect = [&](std::uint32_t a, std::uint32_t b) {
        while (a != b) {
            while (rpo_index[a] > rpo_index[b]) a = idom[a];
            while (rpo_index[b] > rpo_index[a]) b = idom[b];
        }
        return a;
    };
    for (bool changed = true; changed;) {
        changed = false;
        for (std::uint32_t n : order) {
            if (n == root) continue;
            std::uint32_t new_idom = kNoLoop;
            for (auto p : preds[n]) {
                if (rpo_index[p] == kNoLoop || idom[p] == kNoLoop) continue;
                new_idom = new_idom == kNoLoop ? p : intersect(p, new_idom);
            }
            if (new_idom != kNoLoop && idom[n] != new_idom) {
                idom[n] = new_idom;
                changed = true;
            }
        }
    }
    idom.pop_back();
    for (auto& d : idom)
        if (d == root) d = kEntryBlock;
    return idom;
}

// Natural loops: per header, the union of the bodies of its back edges.
std::vector<Loop> natural_loops(const Cfg& cfg, const LoopInfo& info, const CallWrites& call_writes,
                                const IndirectTargets& indirect) {
    const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
    std::map<std::uint32_t, Loop> by_header;
    for (const auto& e : cfg.edges) {
        if (e.from >= nb || e.to >= nb || !dominates(info, e.to, e.from)) continue;
        Loop& loop = by_header[e.to];
        loop.header = e.to;
        loop.latches.push_back(e.from);
        std::vector<bool> in(nb, false);
        for (auto b : loop.blocks) in[b] = true;
        in[e.to] = true;
        std::vector<std::uint32_t> work;
        if (!in[e.from]) {
            in[e.from] = true;
            work.push_back(e.from);
        }
        while (!work.empty()) {
            std::uint32_t b = work.back();
            work.pop_back();
            for (auto pe : cfg.blocks[b].in_edges) {
                std::uint32_t p = cfg.edges[pe].from;
                if (p < nb && !in[p]) {
                    in[p] = true;
                    work.push_back(p);
                }
            }
        }
        loop.blocks.clear();
        for (std::uint32_t b = 0; b < nb; ++b)
            if (in[b]) loop.blocks.push_back(b);
    }
    std::vector<Loop> loops;
    for (auto& [h, loop] : by_header) {
        std::sort(loop.latches.begin(), loop.latches.end());
        loop.latches.erase(std::unique(loop.latches.begin(), loop.latches.end()), loop.latches.end());
        for (auto b : loop.blocks) {
            const auto& blk = cfg.blocks[b];
            for (std::uint32_t i = 0; i < blk.count; ++i) {
                const DecodedInstruction& d = cfg.instructions[blk.first + i];
                if (!is_call(d.flow)) continue;
                loop.has_call = true;
                const std::uint16_t w = call_writes_of(d, call_writes, indirect);
                loop.callee_writes = static_cast<std::uint16_t>(loop.callee_writes | w);
                loop.call_clobbers = static_cast<std::uint16_t>(loop.call_clobbers | (w & kCallerSavedGp));
            }
        }
        loops.push_back(std::move(loop));
    }
    // Outer loops first: a loop holding more blocks cannot be inside one holding fewer.
    std::stable_sort(loops.begin(), loops.end(),
                     [](const Loop& a, const Loop& b) { return a.blocks.size() > b.blocks.size(); });
    return loops;
}

void nest(LoopInfo& info, std::uint32_t blocks) {
    info.innermost.assign(blocks, kNoLoop);
    for (std::uint32_t l = 0; l < info.loops.size(); ++l) {
        Loop& loop = info.loops[l];
        // The innermost loop already holding the header encloses this one
        // (loops come outer first, so it has been assigned).
        loop.parent = info.innermost[loop.header];
        loop.depth = loop.parent == kNoLoop ? 1 : info.loops[loop.parent].depth + 1;
        for (auto b : loop.blocks) info.innermost[b] = l;
    }
}

// The constant an instruction adds to its first operand register, when it
// is one of the stepping forms.
std::optional<std::int64_t> constant_step(const DecodedInstruction& d) {
    if (d.first_register == 0 || (d.first_size != 4 && d.first_size != 8)) return std::nullopt;
    switch (d.id) {
        case X86_INS_INC: return 1;
        case X86_INS_DEC: return -1;
        case X86_INS_ADD:
            if (d.has_immediate && !d.loads && !d.stores) return d.immediate;
            return std::nullopt;
        case X86_INS_SUB:
            if (d.has_immediate && !d.loads && !d.stores) return -d.immediate;
            return std::nullopt;
        case X86_INS_LEA:
            if (d.memory.base == d.first_register && d.memory.index == 0 && d.memory.segment == 0) return d.memory.disp;
            return std::nullopt;
        default: return std::nullopt;
    }
}

// Per loop: which general-purpose registers its instructions write (a call
// the caller-saved ones its callee may change) and read, and the one writer
// of each register written exactly once.
struct RegisterUse {
    std::array<std::uint32_t, 16> writers{};  // instructions writing the register
    std::array<std::uint32_t, 16> last_writer{};
    std::array<bool, 16> read{};
};

RegisterUse register_use(const Cfg& cfg, const Loop& loop) {
    RegisterUse use;
    for (auto b : loop.blocks) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t i = 0; i < blk.count; ++i) {
            const std::uint32_t k = blk.first + i;
            const DecodedInstruction& d = cfg.instructions[k];
            for (auto r : d.reads)
                if (int n = gp_register_number(r); n >= 0) use.read[static_cast<std::size_t>(n)] = true;
            for (auto r : d.writes)
                if (int n = gp_register_number(r); n >= 0) {
                    ++use.writers[static_cast<std::size_t>(n)];
                    use.last_writer[static_cast<std::size_t>(n)] = k;
                }
            if (is_call(d.flow))
                for (int n = 0; n < 16; ++n)
                    if (in_mask(loop.call_clobbers, n)) ++use.writers[static_cast<std::size_t>(n)];
        }
    }
    return use;
}

// The steps a register takes in each block of loop l, when every write to
// it in the loop adds the same constant (none in a nested loop): per block
// the number of stepping instructions, with the step and width.
struct PathSteps {
    std::map<std::uint32_t, int> in_block;
    std::int64_t step = 0;
    std::uint8_t width = 0;
    std::uint32_t first = 0;   // the first stepping instruction
};

std::optional<PathSteps> path_steps(const Cfg& cfg, const LoopInfo& info, std::uint32_t l, int n) {
    PathSteps ps;
    bool any = false;
    for (auto b : info.loops[l].blocks) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            if (!std::any_of(d.writes.begin(), d.writes.end(), [&](auto r) { return gp_register_number(r) == n; }))
                continue;
            // A step inside a nested loop runs once per inner iteration. A
            // nested loop that leaves the register alone adds no step to a
            // path however often it turns (stepped_on_every_path's counts
            // stay consistent around its cycle).
            if (info.innermost[b] != l) return std::nullopt;
            auto s = constant_step(d);
            if (!s || *s == 0 || gp_register_number(d.first_register) != n) return std::nullopt;
            if (any && (*s != ps.step || d.first_size != ps.width)) return std::nullopt;
            if (!any) ps.first = k;
            any = true;
            ps.step = *s;
            ps.width = d.first_size;
            ++ps.in_block[b];
        }
    }
    if (!any) return std::nullopt;
    return ps;
}

// A register written by several instructions, each adding the same
// constant, where every path from the loop's header to a latch passes
// exactly one of them (`i++` at the end of each arm of an if): it steps
// once per iteration, and the header runs once per iteration.
std::optional<InductionVariable> stepped_on_every_path(const Cfg& cfg, const LoopInfo& info, std::uint32_t l, int n) {
    const Loop& loop = info.loops[l];
    auto ps = path_steps(cfg, info, l, n);
    if (!ps) return std::nullopt;
    std::map<std::uint32_t, int> at_end;  // steps from the header's start to the block's end, on every path to it
    at_end[loop.header] = ps->in_block[loop.header];
    for (std::size_t round = 0; round < loop.blocks.size(); ++round)
        for (auto b : loop.blocks) {
            if (b == loop.header) continue;
            for (auto e : cfg.blocks[b].in_edges) {
                const std::uint32_t u = cfg.edges[e].from;
                if (u == kEntryBlock || !loop.contains(u) || !at_end.contains(u)) continue;
                const int v = at_end[u] + ps->in_block[b];
                if (auto it = at_end.find(b); it != at_end.end() && it->second != v) return std::nullopt;
                at_end[b] = v;
            }
        }
    for (auto [b, v] : at_end)
        if (v > 1) return std::nullopt;
    for (auto latch : loop.latches)
        if (!at_end.contains(latch) || at_end[latch] != 1) return std::nullopt;
    return InductionVariable{l, n, ps->step, ps->width, ps->first, loop.header};
}

void induction_variables(const Cfg& cfg, LoopInfo& info) {
    info.invariant.assign(info.loops.size(), {});
    info.steady.assign(info.loops.size(), {});
    for (std::uint32_t l = 0; l < info.loops.size(); ++l) {
        const Loop& loop = info.loops[l];
        const RegisterUse use = register_use(cfg, loop);
        for (int n = 0; n < 16; ++n) {
            const auto r = static_cast<std::size_t>(n);
            if (use.writers[r] == 0) {
                if (use.read[r]) info.invariant[l].push_back(n);
                if (n != 4 /* rsp */ && !in_mask(loop.callee_writes, n)) info.steady[l].push_back(n);
                continue;
            }
            if (n == 4 /* rsp */ || in_mask(loop.call_clobbers, n)) continue;
            if (use.writers[r] > 1) {
                if (auto iv = stepped_on_every_path(cfg, info, l, n)) info.induction.push_back(*iv);
                continue;
            }
            const std::uint32_t k = use.last_writer[r];
            const DecodedInstruction& d = cfg.instructions[k];
            if (gp_register_number(d.first_register) != n) continue;
            auto step = constant_step(d);
            if (!step || *step == 0) continue;
            const std::uint32_t b = cfg.instruction_block[k];
            if (info.innermost[b] != l) continue;  // runs once per iteration of a nested loop, not of this one
            bool every_iteration = std::all_of(loop.latches.begin(), loop.latches.end(),
                                               [&](std::uint32_t latch) { return dominates(info, b, latch); });
            if (!every_iteration) continue;
            info.induction.push_back({l, n, *step, d.first_size, k, b});
        }
    }
}

// A register kept across a call in one block: stored to the frame, the
// call, then loaded back from the same slot (GCC's spill of a caller-saved
// register live across the call).
struct RestoredAcrossCall {
    int gp = -1;
    std::uint32_t call = 0, load = 0;     // CFG instruction indices
};

bool frame_slot(const DecodedInstruction& d) {
    return gp_register_number(d.memory.base) == 4 /* rsp */ && d.memory.index == 0 && d.memory.segment == 0;
}

std::vector<RestoredAcrossCall> restored_across_calls(const Cfg& cfg, std::uint32_t b) {
    std::vector<RestoredAcrossCall> out;
    struct Saved {
        std::int64_t slot = 0;
        std::optional<std::uint32_t> call;
    };
    std::map<int, Saved> saved;
    const auto& blk = cfg.blocks[b];
    for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
        const DecodedInstruction& d = cfg.instructions[k];
        if (is_call(d.flow)) {
            for (auto& [n, s] : saved)
                if (!s.call) s.call = k;
            continue;
        }
        const bool whole = d.operands.rfind("qword ptr", 0) == 0;  // the store's memory operand comes first
        if (d.id == X86_INS_MOV && d.stores && frame_slot(d) && whole) {
            for (auto it = saved.begin(); it != saved.end();)  // the slot is overwritten
                it = it->second.slot == d.memory.disp ? saved.erase(it) : std::next(it);
            if (const int n = gp_register_number(d.second_register); n >= 0) saved[n] = {d.memory.disp, {}};
            continue;
        }
        const int loaded = gp_register_number(d.first_register);
        if (d.id == X86_INS_MOV && d.loads && frame_slot(d) && d.first_size == 8 && saved.contains(loaded) &&
            saved[loaded].slot == d.memory.disp && saved[loaded].call) {
            out.push_back({loaded, *saved[loaded].call, k});
            saved.erase(loaded);
            continue;
        }
        if (d.stores && frame_slot(d))
            for (auto it = saved.begin(); it != saved.end();)
                it = it->second.slot == d.memory.disp ? saved.erase(it) : std::next(it);
        if (std::any_of(d.writes.begin(), d.writes.end(), [](auto r) { return gp_register_number(r) == 4; }))
            saved.clear();  // the frame moved
    }
    return out;
}

// Per block of a loop (in loop.blocks' order): the registers it keeps
// across its calls.
using KeptAcrossCalls = std::vector<std::vector<RestoredAcrossCall>>;

// The instructions of loop l that may change register n, but for calls
// across which its block keeps n and the loads that restore it (those
// spans go to `clobbered`).
std::vector<std::uint32_t> writers_of(const Cfg& cfg, const Loop& loop, const KeptAcrossCalls& kept_in, int n,
                                      std::vector<std::pair<std::uint64_t, std::uint64_t>>& clobbered) {
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < loop.blocks.size(); ++i) {
        const std::uint32_t b = loop.blocks[i];
        const std::vector<RestoredAcrossCall>& kept = kept_in[i];
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            const bool call = is_call(d.flow) && in_mask(loop.call_clobbers, n);
            if (!call && !std::any_of(d.writes.begin(), d.writes.end(), [&](auto r) { return gp_register_number(r) == n; }))
                continue;
            const auto across = std::find_if(kept.begin(), kept.end(), [&](const RestoredAcrossCall& r) {
                return r.gp == n && (r.call == k || r.load == k);
            });
            if (across == kept.end()) {
                out.push_back(k);
            } else if (across->call == k) {
                clobbered.emplace_back(d.address + d.size, cfg.instructions[across->load].address);
            }
        }
    }
    return out;
}

// Registers stepped by a constant in one block of a loop that does not run
// on every iteration, and written nowhere else in it (BlockCounter).
void block_counters(const Cfg& cfg, LoopInfo& info) {
    for (std::uint32_t l = 0; l < info.loops.size(); ++l) {
        const Loop& loop = info.loops[l];
        KeptAcrossCalls kept;
        for (auto b : loop.blocks) kept.push_back(restored_across_calls(cfg, b));
        for (int n = 0; n < 16; ++n) {
            if (n == 4 /* rsp */) continue;
            const bool induction = std::any_of(info.induction.begin(), info.induction.end(),
                                               [&](const InductionVariable& iv) { return iv.loop == l && iv.gp == n; });
            if (induction) continue;
            BlockCounter c;
            const std::vector<std::uint32_t> writers = writers_of(cfg, loop, kept, n, c.clobbered);
            if (writers.size() != 1) continue;
            const std::uint32_t k = writers.front();
            const DecodedInstruction& d = cfg.instructions[k];
            const auto step = constant_step(d);
            const std::uint32_t b = cfg.instruction_block[k];
            if (!step || *step == 0 || gp_register_number(d.first_register) != n || info.innermost[b] != l) continue;
            c.counter = {l, n, *step, d.first_size, k, b};
            info.counters.push_back(std::move(c));
        }
    }
}

}  // namespace

bool dominates(const LoopInfo& info, std::uint32_t a, std::uint32_t b) {
    if (a >= info.idom.size() || b >= info.idom.size()) return false;
    for (std::uint32_t x = b; x != kEntryBlock && x != kNoLoop; x = info.idom[x]) {
        if (x == a) return true;
        if (info.idom[x] == x) break;
    }
    return false;
}

LoopInfo find_loops(const Cfg& cfg, const CallWrites& call_writes, const IndirectTargets& indirect) {
    LoopInfo info;
    if (cfg.blocks.empty()) return info;
    info.idom = dominator_tree(cfg);
    info.loops = natural_loops(cfg, info, call_writes, indirect);
    nest(info, static_cast<std::uint32_t>(cfg.blocks.size()));
    induction_variables(cfg, info);
    block_counters(cfg, info);
    return info;
}

}  // namespace ecpi::analyze
