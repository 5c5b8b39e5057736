// Branch probabilities from register snapshots. See branch_odds.h.
#include "ecpi/analyze/calc/branch_odds.h"

#include "ecpi/analyze/calc/switch_odds.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <optional>
#include <utility>

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

// A conditional jump whose condition is the status flags alone (not jcxz
// and its kin, which read rcx).
bool jumps_on_flags(unsigned id) {
    switch (id) {
        case X86_INS_JO: case X86_INS_JNO: case X86_INS_JP: case X86_INS_JNP: return true;
        default: return evaluable_jump(id);
    }
}

std::uint32_t edge_of(const Cfg& cfg, std::uint32_t b, EdgeKind kind) {
    for (auto e : cfg.blocks[b].out_edges)
        if (cfg.edges[e].kind == kind) return e;
    return kNone;
}

}  // namespace

std::optional<BranchCondition> branch_condition(const Cfg& cfg, std::uint32_t b, bool arithmetic) {
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
    const bool compares = s.id == X86_INS_CMP || s.id == X86_INS_TEST;
    const bool computes = arithmetic && (s.id == X86_INS_SUB || s.id == X86_INS_AND);
    if ((!compares && !computes) || s.loads || s.stores || s.first_register == 0) return std::nullopt;
    if (s.first_size != 1 && s.first_size != 2 && s.first_size != 4 && s.first_size != 8) return std::nullopt;
    BranchCondition c;
    c.setter = setter;
    c.jump = jump;
    c.is_test = s.id == X86_INS_TEST || s.id == X86_INS_AND;
    c.writes_a = computes;
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
    // `sub a, a` or `and a, a` leaves nothing to recover a from.
    if (c.writes_a && c.a == c.b) return std::nullopt;
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
    // test clears CF and OF; for cmp, CF is the unsigned borrow and OF a
    // signed overflow, so that SF != OF is signed less-than.
    const bool cf = !c.is_test && a < b;
    const bool of = !c.is_test && (sign_extend(a, c.width) < sign_extend(b, c.width)) != sf;
    const auto flags = static_cast<std::uint16_t>((cf ? 0x1 : 0) | (zf ? 0x40 : 0) | (sf ? 0x80 : 0) | (of ? 0x800 : 0));
    return evaluate_flags(c.jcc, flags);
}

bool evaluate_flags(unsigned jcc, std::uint16_t flags) {
    const bool cf = flags & 0x1, pf = flags & 0x4, zf = flags & 0x40, sf = flags & 0x80, of = flags & 0x800;
    switch (jcc) {
        case X86_INS_JE: return zf;
        case X86_INS_JNE: return !zf;
        case X86_INS_JL: return sf != of;
        case X86_INS_JGE: return sf == of;
        case X86_INS_JLE: return zf || sf != of;
        case X86_INS_JG: return !zf && sf == of;
        case X86_INS_JB: return cf;
        case X86_INS_JAE: return !cf;
        case X86_INS_JBE: return cf || zf;
        case X86_INS_JA: return !cf && !zf;
        case X86_INS_JS: return sf;
        case X86_INS_JNS: return !sf;
        case X86_INS_JO: return of;
        case X86_INS_JNO: return !of;
        case X86_INS_JP: return pf;
        case X86_INS_JNP: return !pf;
        default: return false;
    }
}

std::optional<FlagsJump> flags_jump(const Cfg& cfg, std::uint32_t b) {
    const auto& blk = cfg.blocks[b];
    if (blk.count == 0) return std::nullopt;
    const std::uint32_t jump = blk.first + blk.count - 1;
    const auto& j = cfg.instructions[jump];
    if (j.flow != FlowKind::kCondJump || !jumps_on_flags(j.id)) return std::nullopt;
    FlagsJump f;
    f.jump = jump;
    f.jcc = j.id;
    f.from = blk.first;
    for (std::uint32_t k = jump; k-- > blk.first;)
        if (cfg.instructions[k].writes.contains(kFlagsRegister)) {
            f.from = k + 1;
            // A compare with memory: its flags are time-weighted at the one
            // pc where its load's stall lands (the jump), so each execution
            // counts by the time its load took, and that can depend on the
            // way the branch goes. jsonq's table search misses the cache on
            // its first compare of a lookup (which goes on) and hits on the
            // second (which leaves): 7,281 of 7,553 snapshots went on against
            // callgrind's 50%, and its loop's count went 17.7 M -> 507 M
            // (12 M). Kept only where all went one way, the harness moved
            // little and SQLite's PGO share fell (docs/ACCURACY.md, "A jump's
            // way from the status flags"): timed, a floor under each way.
            f.reads_memory = cfg.instructions[k].loads;
            break;
        }
    return f;
}

namespace {

// A compare's two operand values for a snapshot at instruction k of its
// block. Before the compare, the block's instructions from the pc on are
// replayed on the snapshot's registers (switch_odds.h's modelled forms; a
// load or an unmodelled write leaves its register unknown): a snapshot
// anywhere after the operands' last load decides the branch, not only one
// between their last write and the jump (wordfreq's letter test `mov esi,
// eax; and esi, ~0x20; sub esi, 0x41; cmp sil, 25`: 928 snapshots at the
// compare, 2,809 after the character's load). Past the compare, the
// snapshot's registers are the compare's when nothing up to the jump
// writes them.
std::optional<std::pair<std::uint64_t, std::uint64_t>> operands_at_compare(const Cfg& cfg, const BranchCondition& c,
                                                                           std::uint32_t k,
                                                                           const store::RegisterSample& snap) {
    const auto& in = cfg.instructions;
    const auto b_of = [&](auto read) -> std::optional<std::uint64_t> {
        if (c.b < 0) return static_cast<std::uint64_t>(c.immediate);
        return read(c.b);
    };
    if (k < c.setter) {
        KnownRegisters r;
        for (std::size_t n = 0; n < r.value.size() && n < snap.regs.size(); ++n) {
            r.value[n] = snap.regs[n];
            r.known[n] = true;
        }
        // (A compare writes only the flags, whatever the decoder's access
        // flags say: Capstone marks `test al, imm8`'s al written.)
        for (std::uint32_t x = k; x < c.setter; ++x)
            if (in[x].id != X86_INS_CMP && in[x].id != X86_INS_TEST) replay(in[x], r);
        const auto read = [&](int n) { return known_value(r, gp_register_id(n)); };
        const auto a = read(c.a);
        const auto bv = b_of(read);
        if (!a || !bv) return std::nullopt;
        return std::pair{*a, *bv};
    }
    for (std::uint32_t x = c.setter + 1; x < c.jump; ++x)
        if (writes_gp(in[x], c.a) || (c.b >= 0 && writes_gp(in[x], c.b))) return std::nullopt;
    const auto read = [&](int n) -> std::optional<std::uint64_t> { return snap.regs[static_cast<std::size_t>(n)]; };
    const std::uint64_t a = *read(c.a), bv = *b_of(read);
    if (!c.writes_a || k == c.setter) return std::pair{a, bv};
    // Past a `sub`, a's register holds a - b: a is that plus b (the flags
    // are the subtraction's, as a compare's). Past an `and`, the flags are
    // the result's alone: evaluate it as `test r, r`.
    if (!c.is_test) return std::pair{a + bv, bv};
    return std::pair{a, ~std::uint64_t{0}};
}

// Where the pcs of a block disagree (BranchOdds::positions_disagree), the
// taken count at the median of the pcs' shares, of `total`: a stall that
// depends on the way the branch goes (its misprediction, a retirement
// group shifted by it) lands on one or two pcs and tilts the pooled share
// toward that way; the pcs without it see each way at its share of the
// executions. wordfreq's letter test: pcs 23.2%, 3.1%, 31.8%, 13.8%, 7.0%
// non-letters, pooled 17.9%, median 13.8%, truth 14.2% (its count_words
// within 10%: 81.3% -> 95.8% of samples); an earlier recording's pcs 17.4%,
// 6.0%, 20.8%, 9.9%: pooled 12.0%, median 13.65%. Two pcs cannot say
// which of them holds the stall (branchy's search: its exit test's two pcs
// of 4,531 and 238 snapshots; their mean put the loop at 1.18x where the
// pooled share gave 0.87x): at least kMedianPositions, else kNoMedian.
constexpr std::size_t kMedianPositions = 3;
constexpr std::uint32_t kNoMedian = 0xffffffffu;
using PcTally = std::map<std::uint32_t, std::pair<std::uint32_t, std::uint32_t>>;  // pc -> (taken, total)

std::uint32_t median_position_taken(const PcTally& by_pc, std::uint32_t total) {
    std::vector<double> shares;
    for (const auto& [pc, t] : by_pc)
        if (t.second >= kOddsPositionSnapshots) shares.push_back(static_cast<double>(t.first) / static_cast<double>(t.second));
    if (shares.size() < kMedianPositions) return kNoMedian;
    std::sort(shares.begin(), shares.end());
    const std::size_t n = shares.size();
    const double median = n % 2 == 1 ? shares[n / 2] : (shares[n / 2 - 1] + shares[n / 2]) / 2;
    return static_cast<std::uint32_t>(std::lround(median * static_cast<double>(total)));
}

// Which way the jump closing the block of instruction k went for this
// snapshot: from its status flags where it recorded them, nothing from k to
// the jump writes them and no writer in the block reads memory (flags_jump;
// flags the block takes from before it are read as they came), else
// from the register compare's operands (operands_at_compare).
// With `timed` set, the way from a compare with memory's flags, where
// nothing else decides it (FlagsJump::reads_memory).
std::optional<bool> way_taken(const Cfg& cfg, const std::optional<BranchCondition>& c,
                              const std::optional<FlagsJump>& f, std::uint32_t k, const store::RegisterSample& snap,
                              bool& timed) {
    timed = false;
    const bool flags_at = f && (snap.flags & store::kFlagsRecorded) && k >= f->from && k <= f->jump;
    if (flags_at && !f->reads_memory) return evaluate_flags(f->jcc, snap.flags);
    if (c)
        if (const auto operands = operands_at_compare(cfg, *c, k, snap))
            return evaluate(*c, operands->first, operands->second);
    if (!flags_at) return std::nullopt;
    timed = true;
    return evaluate_flags(f->jcc, snap.flags);
}

}  // namespace

std::pair<double, double> share_interval(std::uint32_t taken, std::uint32_t total) {
    if (total == 0) return {0, 1};
    constexpr double z = 2;
    const double n = total, p = taken / n;
    const double centre = (p + z * z / (2 * n)) / (1 + z * z / n);
    const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n);
    return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

std::vector<BranchOdds> branch_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                                    std::span<const std::uint32_t> candidates) {
    std::vector<std::optional<BranchCondition>> conditions(cfg.blocks.size());
    std::vector<std::optional<FlagsJump>> by_flags(cfg.blocks.size());
    std::vector<bool> looked(cfg.blocks.size(), false);
    std::vector<BranchOdds> odds(cfg.blocks.size()), timed_odds(cfg.blocks.size());
    // Per block, per pc: its snapshots taken, and in all.
    std::vector<PcTally> by_pc(cfg.blocks.size());
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
            conditions[b] = branch_condition(cfg, b, true);
            by_flags[b] = flags_jump(cfg, b);
            looked[b] = true;
        }
        bool timed = false;
        const auto taken = way_taken(cfg, conditions[b], by_flags[b], k, snap, timed);
        if (!taken) continue;
        if (timed) {
            timed_odds[b].block = b;
            ++timed_odds[b].total;
            if (*taken) ++timed_odds[b].taken;
            continue;
        }
        auto& o = odds[b];
        o.block = b;
        ++o.total;
        if (*taken) ++o.taken;
        auto& at_pc = by_pc[b][k];
        at_pc.first += *taken ? 1 : 0;
        ++at_pc.second;
    }
    std::vector<BranchOdds> out;
    for (std::uint32_t b = 0; b < odds.size(); ++b) {
        if (odds[b].total == 0 && timed_odds[b].total > 0) {
            odds[b] = timed_odds[b];
            odds[b].timed = true;
            by_pc[b].clear();  // (a share of time: no pc's share is read)
        }
        if (odds[b].total == 0) continue;
        std::tie(odds[b].share_low, odds[b].share_high) = share_interval(odds[b].taken, odds[b].total);
        double lowest_high = 1, highest_low = 0;
        for (const auto& [pc, t] : by_pc[b]) {
            if (t.second < kOddsPositionSnapshots) continue;
            const auto [low, high] = share_interval(t.first, t.second);
            odds[b].share_low = std::min(odds[b].share_low, low);
            odds[b].share_high = std::max(odds[b].share_high, high);
            lowest_high = std::min(lowest_high, high);
            highest_low = std::max(highest_low, low);
        }
        odds[b].positions_disagree = highest_low > lowest_high;
        if (odds[b].positions_disagree) {
            const std::uint32_t median = median_position_taken(by_pc[b], odds[b].total);
            if (median != kNoMedian) {
                odds[b].taken = median;
                odds[b].median_of_positions = true;
            }
        }
        odds[b].taken_edge = edge_of(cfg, b, EdgeKind::kBranch);
        odds[b].fall_edge = edge_of(cfg, b, EdgeKind::kFallThrough);
        if (odds[b].taken_edge == kNone || odds[b].fall_edge == kNone) continue;
        out.push_back(odds[b]);
    }
    return out;
}

}  // namespace ecpi::analyze
