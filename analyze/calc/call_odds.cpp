// An indirect call's targets from register snapshots. See call_odds.h.
#include "ecpi/analyze/calc/call_odds.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include <capstone/capstone.h>

#include "ecpi/analyze/calc/switch_odds.h"

namespace ecpi::analyze {

namespace {

// rbx, rbp, r12-r15: a callee returns them as it found them (System V ABI).
bool callee_saved(std::uint16_t canonical) {
    const int n = gp_register_number(canonical);
    return n == 3 || n == 5 || (n >= 12 && n <= 15);
}

// A rip-relative lea: its address (made absolute when decoded).
std::optional<std::uint64_t> rip_lea(const DecodedInstruction& d) {
    const bool rip_base = d.memory.base != 0 && gp_register_number(d.memory.base) < 0;
    if (d.id != X86_INS_LEA || !rip_base || d.memory.index != 0 || d.memory.segment != 0) return std::nullopt;
    return static_cast<std::uint64_t>(d.memory.disp);
}

// The address register `reg` holds at instruction k on every path to it:
// the one rip-relative lea every backward path meets first (a call on the
// way keeps only a callee-saved register). None where a path reaches the
// entry, another write, or two different addresses.
std::optional<std::uint64_t> static_address(const Cfg& cfg, std::uint32_t k, std::uint16_t reg) {
    std::optional<std::uint64_t> found;
    std::set<std::uint32_t> seen;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> work{{cfg.instruction_block[k], k}};  // block, end
    while (!work.empty()) {
        const auto [b, end] = work.back();
        work.pop_back();
        const auto& blk = cfg.blocks[b];
        bool defined = false;
        for (std::uint32_t x = end; x-- > blk.first;) {
            const auto& d = cfg.instructions[x];
            if (is_call(d.flow) && !callee_saved(reg)) return std::nullopt;
            if (!d.writes.contains(reg)) continue;
            const auto v = rip_lea(d);
            if (!v || (found && *found != *v)) return std::nullopt;
            found = v;
            defined = true;
            break;
        }
        if (defined) continue;
        for (auto e : blk.in_edges) {
            const std::uint32_t from = cfg.edges[e].from;
            if (from >= cfg.blocks.size()) return std::nullopt;  // the procedure's entry
            if (seen.insert(from).second) work.push_back({from, cfg.blocks[from].first + cfg.blocks[from].count});
        }
    }
    return found;
}

// Replays one instruction; cdqe (rax from eax, sign-extended) too.
void replay_one(const DecodedInstruction& d, KnownRegisters& r) {
    if (d.id != X86_INS_CDQE) return replay(d, r);
    const int rax = 0;
    if (!r.known[rax]) return;
    r.value[rax] = static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(r.value[rax])));
}

// Whether the call's index register was loaded from memory in its block,
// through register moves (as switch_odds' index_loaded_in_block).
bool index_loaded(const Cfg& cfg, std::uint32_t call) {
    std::uint16_t reg = cfg.instructions[call].memory.index;
    const std::uint32_t first = cfg.blocks[cfg.instruction_block[call]].first;
    for (std::uint32_t x = call; x-- > first;) {
        const auto& d = cfg.instructions[x];
        if (!d.writes.contains(reg)) continue;
        if (d.loads) return true;
        if (d.id == X86_INS_CDQE) continue;  // rax from eax: the same register
        const bool moves = d.id == X86_INS_MOV || d.id == X86_INS_MOVSXD || d.id == X86_INS_MOVZX ||
                           d.id == X86_INS_MOVSX;
        if (!moves || d.has_immediate || d.second_register == 0) return false;
        reg = d.second_register;
    }
    return false;
}

// An indirect call through a table of 8-byte entries, and where its base
// comes from: the table's address less index*8 (none where it cannot be known).
struct TableCall {
    std::uint32_t call = 0;   // CFG index
    std::uint64_t base = 0;   // base register's address (or 0) + disp
};

std::optional<TableCall> table_call(const Cfg& cfg, std::uint32_t k) {
    const auto& d = cfg.instructions[k];
    if (d.flow != FlowKind::kIndirectCall || !d.loads || d.memory.index == 0 || d.memory.scale != 8 ||
        d.memory.segment != 0 || gp_register_number(d.memory.index) < 0)
        return std::nullopt;
    std::uint64_t base = 0;
    if (d.memory.base != 0) {
        if (gp_register_number(d.memory.base) < 0) return std::nullopt;  // rip-relative with an index: not x86
        const auto b = static_address(cfg, k, d.memory.base);
        if (!b) return std::nullopt;
        base = *b;
    }
    return TableCall{k, base + static_cast<std::uint64_t>(d.memory.disp)};
}

// The first call at or after instruction k in its block.
std::optional<std::uint32_t> next_call(const Cfg& cfg, std::uint32_t k) {
    const auto& blk = cfg.blocks[cfg.instruction_block[k]];
    for (std::uint32_t x = k; x < blk.first + blk.count; ++x)
        if (is_call(cfg.instructions[x].flow)) return x;
    return std::nullopt;
}

// The target a snapshot at instruction k calls, if nothing between k and
// the call (no other call) loses the index.
std::optional<std::uint64_t> target_from(const Cfg& cfg, const TableCall& t, std::uint32_t k,
                                         const store::RegisterSample& snap, const PointerAt& pointer_at) {
    if (k > t.call) return std::nullopt;
    KnownRegisters r;
    for (std::size_t n = 0; n < r.value.size() && n < snap.regs.size(); ++n) {
        r.value[n] = snap.regs[n];
        r.known[n] = true;
    }
    for (std::uint32_t x = k; x < t.call; ++x) {
        if (is_call(cfg.instructions[x].flow)) return std::nullopt;
        replay_one(cfg.instructions[x], r);
    }
    const auto index = known_value(r, cfg.instructions[t.call].memory.index);
    if (!index) return std::nullopt;
    const auto target = pointer_at(t.base + *index * 8);
    if (!target || *target == 0) return std::nullopt;
    return target;
}

// The call's loop's induction variable and the registers the loop never
// writes: what the index may be a function of for the window.
struct Induction {
    int gp = -1;
    std::int64_t step = 0;
    std::uint8_t width = 8;
    std::uint32_t instruction = 0;  // the stepping instruction (CFG index)
    std::vector<int> invariant;
};

// Each induction variable of the block's innermost loop.
std::vector<Induction> inductions_of(const LoopInfo* loops, std::uint32_t block) {
    std::vector<Induction> out;
    if (!loops || block >= loops->innermost.size() || loops->innermost[block] == kNoLoop) return out;
    const std::uint32_t l = loops->innermost[block];
    for (const InductionVariable& iv : loops->induction)
        if (iv.loop == l && iv.gp >= 0 && iv.step != 0)
            out.push_back(Induction{iv.gp, iv.step, iv.width, iv.instruction, loops->invariant[l]});
    return out;
}

// The target the call selects with the induction at `value` at instruction
// k and the loop's invariants as in `snap`; none where the index needs any
// other register.
std::optional<std::uint64_t> target_at(const Cfg& cfg, const TableCall& t, std::uint32_t k,
                                       const store::RegisterSample& snap, const Induction& iv, std::uint64_t value,
                                       const PointerAt& pointer_at) {
    KnownRegisters r;
    for (int n : iv.invariant) {
        r.value[static_cast<std::size_t>(n)] = snap.regs[static_cast<std::size_t>(n)];
        r.known[static_cast<std::size_t>(n)] = true;
    }
    r.value[static_cast<std::size_t>(iv.gp)] = iv.width == 4 ? value & 0xffffffffULL : value;
    r.known[static_cast<std::size_t>(iv.gp)] = true;
    for (std::uint32_t x = k; x < t.call; ++x) replay_one(cfg.instructions[x], r);
    const auto index = known_value(r, cfg.instructions[t.call].memory.index);
    if (!index) return std::nullopt;
    const auto target = pointer_at(t.base + *index * 8);
    if (!target || *target == 0) return std::nullopt;
    return target;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    const std::int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// The steps j (from v, `step` apart) whose values v + j*step lie in [lo, hi].
std::pair<std::int64_t, std::int64_t> steps_within(std::int64_t v, std::int64_t lo, std::int64_t hi, std::int64_t step) {
    if (step > 0) return {ceil_div(lo - v, step), floor_div(hi - v, step)};
    return {ceil_div(hi - v, step), floor_div(lo - v, step)};
}

// Where the index's computation starts: the instruction after the last
// call before `call` in its block, or the block's first.
std::uint32_t segment_start(const Cfg& cfg, std::uint32_t call) {
    const std::uint32_t first = cfg.blocks[cfg.instruction_block[call]].first;
    for (std::uint32_t x = call; x-- > first;)
        if (is_call(cfg.instructions[x].flow)) return x + 1;
    return first;
}

// The induction's value at the segment's start `s` in a snapshot at k (as
// a signed number of its width): its value less a step taken between them.
std::int64_t induction_at_start(const store::RegisterSample& snap, const Induction& iv, std::uint32_t s,
                                std::uint32_t k) {
    const std::uint64_t raw = snap.regs[static_cast<std::size_t>(iv.gp)];
    std::int64_t v = iv.width == 4 ? static_cast<std::int32_t>(raw) : static_cast<std::int64_t>(raw);
    if (iv.instruction >= s && iv.instruction < k) v -= iv.step;
    return v;
}

// Per target, the window's selections around each snapshot, replayed from
// the segment's start; empty where any snapshot's index is not a function
// of the induction and the loop's invariants there.
std::map<std::uint64_t, std::uint32_t> window_targets(const Cfg& cfg, const TableCall& t,
                                                      std::span<const store::RegisterSample> stream,
                                                      std::span<const std::uint32_t> snaps, const Induction& iv,
                                                      const PointerAt& pointer_at) {
    const std::uint32_t s = segment_start(cfg, t.call);
    std::vector<std::int64_t> at_start;
    for (auto p : snaps) at_start.push_back(induction_at_start(stream[p], iv, s, *instruction_at(cfg, stream[p].offset)));
    if (at_start.empty()) return {};
    const auto [lo_it, hi_it] = std::minmax_element(at_start.begin(), at_start.end());
    const std::int64_t lo = *lo_it, hi = *hi_it, half = static_cast<std::int64_t>(kWindow / 2);
    std::map<std::uint64_t, std::uint32_t> out;
    for (std::size_t n = 0; n < snaps.size(); ++n) {
        const std::int64_t v = at_start[n];
        // kWindow values a step apart around v, shifted to lie within [lo, hi] where the range allows.
        const auto [jmin, jmax] = steps_within(v, lo, hi, iv.step);
        const std::int64_t first = std::clamp<std::int64_t>(-half, jmin, std::max<std::int64_t>(jmin, jmax - kWindow + 1));
        for (std::int64_t j = first; j < first + static_cast<std::int64_t>(kWindow); ++j) {
            const auto target = target_at(cfg, t, s, stream[snaps[n]], iv, static_cast<std::uint64_t>(v + j * iv.step),
                                          pointer_at);
            if (!target) return {};
            ++out[*target];
        }
    }
    return out;
}

}  // namespace

bool call_odds_decide(const CallOdds& o) { return !o.index_from_memory && o.total >= kMinCallSnapshots; }

std::vector<CallOdds> indirect_call_odds(const Cfg& cfg, const PointerAt& pointer_at,
                                         std::span<const store::RegisterSample> stream, std::uint32_t image,
                                         std::span<const std::uint32_t> candidates, const LoopInfo* loops) {
    // Steps: the table calls, each snapshot's next call in its block (if a
    // table call, its target), the odds.
    std::map<std::uint32_t, TableCall> calls;  // CFG index -> table call
    for (std::uint32_t k = 0; k < cfg.instructions.size(); ++k)
        if (const auto t = table_call(cfg, k)) calls[k] = *t;
    if (calls.empty()) return {};
    std::map<std::uint32_t, std::map<std::uint64_t, std::uint32_t>> seen;  // call index -> target -> snapshots
    std::map<std::uint32_t, std::vector<std::uint32_t>> deciding;          // call index -> its snapshots' positions
    for (auto p : candidates) {
        if (p >= stream.size() || stream[p].image != image) continue;
        const auto k = instruction_at(cfg, stream[p].offset);
        if (!k) continue;
        const auto call = next_call(cfg, *k);
        const auto t = call ? calls.find(*call) : calls.end();
        if (t == calls.end()) continue;
        if (const auto target = target_from(cfg, t->second, *k, stream[p], pointer_at)) {
            ++seen[t->first][*target];
            deciding[t->first].push_back(p);
        }
    }
    std::vector<CallOdds> out;
    for (const auto& [call, targets] : seen) {
        CallOdds o;
        o.call = cfg.instructions[call].address;
        o.index_from_memory = index_loaded(cfg, call);
        const auto& snaps = deciding.at(call);
        o.total = static_cast<std::uint32_t>(snaps.size());
        std::map<std::uint64_t, std::uint32_t> window;  // the first induction variable the index follows
        for (const Induction& iv : inductions_of(loops, cfg.instruction_block[call]))
            if (window = window_targets(cfg, calls.at(call), stream, snaps, iv, pointer_at); !window.empty()) break;
        o.by_induction = !window.empty();
        for (const auto& [target, n] : o.by_induction ? window : targets) o.targets.emplace_back(target, n);
        out.push_back(std::move(o));
    }
    return out;
}

}  // namespace ecpi::analyze
