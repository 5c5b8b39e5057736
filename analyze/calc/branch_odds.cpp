// Branch probabilities from register snapshots. See branch_odds.h.
#include "ecpi/analyze/calc/branch_odds.h"

#include <algorithm>

#include <capstone/capstone.h>

namespace ecpi::analyze {

namespace {

bool evaluable_jump(unsigned id) {
    switch (id) {
        case X86_INS_JE: case X86_INS_JNE: case X86_INS_JL: case X86_INS_JGE: case X86_INS_JLE: case X86_INS_JG:
        case X86_INS_JB: case X86_INS_JAE: case X86_INS_JBE: case X86_INS_JA: case X86_INS_JS: case X86_INS_JNS:
            return true;
        default:
            return false;
    }
}

constexpr std::uint32_t kNone = 0xffffffffu;

std::uint64_t mask(std::uint8_t width) { return width >= 8 ? ~0ULL : (1ULL << (8 * width)) - 1; }

std::int64_t sign_extend(std::uint64_t v, std::uint8_t width) {
    if (width >= 8) return static_cast<std::int64_t>(v);
    const unsigned shift = 64 - 8 * width;
    return static_cast<std::int64_t>(v << shift) >> shift;
}

bool writes_gp(const DecodedInstruction& d, int gp) {
    for (auto r : d.writes)
        if (gp_register_number(r) == gp) return true;
    return false;
}

std::uint32_t edge_of(const Cfg& cfg, std::uint32_t b, EdgeKind kind) {
    for (auto e : cfg.blocks[b].out_edges)
        if (cfg.edges[e].kind == kind) return e;
    return kNone;
}

}  // namespace

std::optional<BranchCondition> branch_condition(const Cfg& cfg, std::uint32_t b) {
    const auto& blk = cfg.blocks[b];
    if (blk.count < 2) return std::nullopt;
    const std::uint32_t jump = blk.first + blk.count - 1;
    const auto& j = cfg.instructions[jump];
    if (j.flow != FlowKind::kCondJump || !evaluable_jump(j.id)) return std::nullopt;
    // The last instruction before the jump that writes the flags must be the
    // compare; anything else (an add that sets them, a load) cannot be
    // evaluated from registers alone.
    std::uint32_t setter = jump;
    for (std::uint32_t k = jump; k-- > blk.first;)
        if (cfg.instructions[k].writes.contains(kFlagsRegister)) {
            setter = k;
            break;
        }
    if (setter == jump) return std::nullopt;
    const auto& s = cfg.instructions[setter];
    if ((s.id != X86_INS_CMP && s.id != X86_INS_TEST) || s.loads || s.first_register == 0) return std::nullopt;
    if (s.first_size != 1 && s.first_size != 2 && s.first_size != 4 && s.first_size != 8) return std::nullopt;
    BranchCondition c;
    c.setter = setter;
    c.jump = jump;
    c.is_test = s.id == X86_INS_TEST;
    c.a = gp_register_number(s.first_register);
    c.width = s.first_size;
    if (s.has_immediate) {
        c.immediate = s.immediate;
    } else if (s.second_register != 0) {
        c.b = gp_register_number(s.second_register);
        if (c.b < 0) return std::nullopt;
    } else {
        return std::nullopt;
    }
    if (c.a < 0) return std::nullopt;
    c.jcc = j.id;
    return c;
}

bool evaluate(const BranchCondition& c, std::uint64_t a, std::uint64_t b) {
    const std::uint64_t m = mask(c.width);
    a &= m;
    b &= m;
    const std::uint64_t r = (c.is_test ? (a & b) : (a - b)) & m;
    const bool zf = r == 0;
    const bool sf = sign_extend(r, c.width) < 0;
    // test clears CF and OF; for cmp, CF is the unsigned borrow and
    // SF != OF is signed less-than.
    const bool cf = !c.is_test && a < b;
    const bool less = c.is_test ? sf : sign_extend(a, c.width) < sign_extend(b, c.width);
    switch (c.jcc) {
        case X86_INS_JE: return zf;
        case X86_INS_JNE: return !zf;
        case X86_INS_JL: return less;
        case X86_INS_JGE: return !less;
        case X86_INS_JLE: return zf || less;
        case X86_INS_JG: return !zf && !less;
        case X86_INS_JB: return cf;
        case X86_INS_JAE: return !cf;
        case X86_INS_JBE: return cf || zf;
        case X86_INS_JA: return !cf && !zf;
        case X86_INS_JS: return sf;
        case X86_INS_JNS: return !sf;
        default: return false;
    }
}

std::vector<BranchOdds> branch_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                                    std::span<const std::uint32_t> candidates) {
    std::vector<std::optional<BranchCondition>> conditions(cfg.blocks.size());
    std::vector<bool> looked(cfg.blocks.size(), false);
    std::vector<BranchOdds> odds(cfg.blocks.size());
    const auto& in = cfg.instructions;
    for (auto p : candidates) {
        if (p >= stream.size() || stream[p].image != image) continue;
        const auto& snap = stream[p];
        // The instruction the snapshot's pc is at (the next to execute).
        auto it = std::upper_bound(in.begin(), in.end(), snap.offset,
                                   [](std::uint64_t a, const DecodedInstruction& d) { return a < d.address; });
        if (it == in.begin()) continue;
        --it;
        if (snap.offset != it->address) continue;
        const auto k = static_cast<std::uint32_t>(it - in.begin());
        const std::uint32_t b = cfg.instruction_block[k];
        if (!looked[b]) {
            conditions[b] = branch_condition(cfg, b);
            looked[b] = true;
        }
        const auto& c = conditions[b];
        if (!c) continue;
        // The operands at the compare are the snapshot's if nothing from
        // the pc (or the compare, if the pc is past it) to the jump writes them.
        bool intact = true;
        // (The compare itself writes only the flags, whatever the decoder's
        // access flags say: Capstone marks `test al, imm8`'s al written.)
        for (std::uint32_t x = std::min(k, c->setter); x < c->jump && intact; ++x)
            intact = x == c->setter || (!writes_gp(in[x], c->a) && (c->b < 0 || !writes_gp(in[x], c->b)));
        if (!intact) continue;
        const std::uint64_t a = snap.regs[static_cast<std::size_t>(c->a)];
        const std::uint64_t bv = c->b < 0 ? static_cast<std::uint64_t>(c->immediate) : snap.regs[static_cast<std::size_t>(c->b)];
        auto& o = odds[b];
        o.block = b;
        ++o.total;
        if (evaluate(*c, a, bv)) ++o.taken;
    }
    std::vector<BranchOdds> out;
    for (std::uint32_t b = 0; b < odds.size(); ++b) {
        if (odds[b].total == 0) continue;
        odds[b].taken_edge = edge_of(cfg, b, EdgeKind::kBranch);
        odds[b].fall_edge = edge_of(cfg, b, EdgeKind::kFallThrough);
        if (odds[b].taken_edge == kNone || odds[b].fall_edge == kNone) continue;
        out.push_back(odds[b]);
    }
    return out;
}

}  // namespace ecpi::analyze
