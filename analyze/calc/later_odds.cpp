// Odds from the executions after a snapshot's own. See later_odds.h.
#include "ecpi/analyze/calc/later_odds.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <capstone/capstone.h>

namespace ecpi::analyze {

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;
// A decision's later executions count only where its snapshots counted at
// least this many each on average: the replay then ran several executions
// past the skipped one, where they are no longer a function of it. A state
// machine's next state is known for one iteration after a snapshot, and it
// is the skipped step's result (branchy's machine: its second branch went
// one way in 33% of those, against 49% in callgrind and 53% in the
// snapshots before it; the loop's count came out 3.5x high).
constexpr double kLaterPerSnapshot = 4;

// How a block is left, as far as a replay can decide it.
struct Decision {
    enum class Kind : std::uint8_t { kFollow, kBranch, kSwitch, kStop } kind = Kind::kStop;
    std::optional<BranchCondition> branch;
    SwitchSite site;
    std::vector<std::uint32_t> edges;   // kBranch: taken, fall; kSwitch: its switch edges; kFollow: the one edge
};

bool writes_gp(const DecodedInstruction& d, int gp) {
    for (auto w : d.writes)
        if (gp_register_number(w) == gp) return true;
    return false;
}

// The compare's operands are still in their registers at the jump.
bool operands_reach_jump(const Cfg& cfg, const BranchCondition& c) {
    for (std::uint32_t x = c.setter + 1; x < c.jump; ++x)
        if (writes_gp(cfg.instructions[x], c.a) || (c.b >= 0 && writes_gp(cfg.instructions[x], c.b))) return false;
    return true;
}

std::uint32_t edge_of(const Cfg& cfg, std::uint32_t b, EdgeKind kind) {
    for (auto e : cfg.blocks[b].out_edges)
        if (cfg.edges[e].kind == kind) return e;
    return kNone;
}

Decision branch_decision(const Cfg& cfg, std::uint32_t b) {
    Decision d;
    d.branch = branch_condition(cfg, b);
    const std::uint32_t taken = edge_of(cfg, b, EdgeKind::kBranch), fall = edge_of(cfg, b, EdgeKind::kFallThrough);
    if (!d.branch || !operands_reach_jump(cfg, *d.branch) || taken == kNone || fall == kNone) return {};
    d.kind = Decision::Kind::kBranch;
    d.edges = {taken, fall};
    return d;
}

Decision decision_of(const Cfg& cfg, std::uint32_t b, const std::map<std::uint32_t, SwitchSite>& sites) {
    const auto& blk = cfg.blocks[b];
    const FlowKind last = cfg.instructions[blk.first + blk.count - 1].flow;
    if (last == FlowKind::kCondJump) return branch_decision(cfg, b);
    if (auto s = sites.find(b); s != sites.end()) {
        Decision d;
        d.kind = Decision::Kind::kSwitch;
        d.site = s->second;
        for (auto e : blk.out_edges)
            if (cfg.edges[e].kind == EdgeKind::kSwitch) d.edges.push_back(e);
        return d;
    }
    // The one way on (a loop that never exits also has a virtual edge to
    // the exit, which execution never takes).
    Decision d;
    for (auto e : blk.out_edges) {
        const EdgeKind kind = cfg.edges[e].kind;
        if (kind == EdgeKind::kLoopExit) continue;
        if ((kind != EdgeKind::kFallThrough && kind != EdgeKind::kJump) || !d.edges.empty()) return {};
        d.edges.push_back(e);
    }
    if (d.edges.empty()) return {};
    d.kind = Decision::Kind::kFollow;
    return d;
}

// A call may change every register the System V ABI lets it clobber.
void clobber_caller_saved(KnownRegisters& r) {
    for (int n : {0, 1, 2, 6, 7, 8, 9, 10, 11}) r.known[static_cast<std::size_t>(n)] = false;
}

// One instruction of the replay: a compare writes only the flags (Capstone
// marks `test al, imm8`'s al written; branch_odds.cpp).
void step(const DecodedInstruction& d, KnownRegisters& r) {
    if (d.id == X86_INS_CMP || d.id == X86_INS_TEST) return;
    replay(d, r);
    if (is_call(d.flow)) clobber_caller_saved(r);
}

// Per decision: executions counted per edge, and the snapshots that counted one.
struct Tally {
    std::vector<double> per_edge;
    double executions = 0;
    std::uint32_t snapshots = 0;
};

class Replayer {
public:
    explicit Replayer(const Cfg& cfg) : cfg_(cfg), sites_(switch_sites(cfg)) {
        decisions_.reserve(cfg.blocks.size());
        for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) decisions_.push_back(decision_of(cfg, b, sites_));
        tallies_.resize(cfg.blocks.size());
    }

    // Replays one snapshot taken at instruction k.
    void snapshot(std::uint32_t k, const store::RegisterSample& snap) {
        KnownRegisters r;
        for (std::size_t n = 0; n < r.value.size() && n < snap.regs.size(); ++n) {
            r.value[n] = snap.regs[n];
            r.known[n] = true;
        }
        met_.clear();
        std::uint32_t b = cfg_.instruction_block[k], budget = kLaterInstructions;
        std::uint64_t index = 0;  // the switch's index at its load
        bool index_known = false;
        while (true) {
            const auto& blk = cfg_.blocks[b];
            const Decision& d = decisions_[b];
            for (; k < blk.first + blk.count && budget > 0; ++k, --budget) {
                if (d.kind == Decision::Kind::kSwitch && k == d.site.load) {
                    const auto v = known_value(r, d.site.index);
                    index_known = v.has_value();
                    index = v.value_or(0);
                }
                step(cfg_.instructions[k], r);
            }
            if (budget == 0) break;
            const std::uint32_t e = leave(b, d, r, index_known ? &index : nullptr);
            index_known = false;
            if (e == kNone) break;
            if (d.kind != Decision::Kind::kFollow) count(b, d, e);
            b = cfg_.edges[e].to;
            if (b == kExitBlock) break;
            k = cfg_.blocks[b].first;
        }
        for (const auto& [block, n] : met_)
            if (n > 1) ++tallies_[block].snapshots;
    }

    LaterOdds odds() const;

private:
    // The edge the replay leaves block b by (kNone: undecided).
    std::uint32_t leave(std::uint32_t b, const Decision& d, const KnownRegisters& r,
                        const std::uint64_t* index) const {
        switch (d.kind) {
            case Decision::Kind::kFollow: return d.edges[0];
            case Decision::Kind::kBranch: {
                const auto& c = *d.branch;
                const auto a = known_value(r, gp_register_id(c.a));
                const auto bv = c.b < 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(c.immediate))
                                        : known_value(r, gp_register_id(c.b));
                if (!a || !bv) return kNone;
                return evaluate(c, *a, *bv) ? d.edges[0] : d.edges[1];
            }
            case Decision::Kind::kSwitch:
                return index ? switch_edge(cfg_, b, d.site, *index) : kNone;
            case Decision::Kind::kStop: return kNone;
        }
        return kNone;
    }

    // The first execution of a decision after the snapshot is skipped; the
    // next kLaterPerDecision are counted.
    void count(std::uint32_t b, const Decision& d, std::uint32_t e) {
        auto it = std::find_if(met_.begin(), met_.end(), [&](const auto& m) { return m.first == b; });
        if (it == met_.end()) {
            met_.emplace_back(b, 1);
            return;
        }
        if (it->second > kLaterPerDecision) return;
        ++it->second;
        Tally& t = tallies_[b];
        t.per_edge.resize(d.edges.size(), 0);
        const auto j = static_cast<std::size_t>(std::find(d.edges.begin(), d.edges.end(), e) - d.edges.begin());
        if (j < t.per_edge.size()) t.per_edge[j] += 1;
        t.executions += 1;
    }

    const Cfg& cfg_;
    std::map<std::uint32_t, SwitchSite> sites_;
    std::vector<Decision> decisions_;
    std::vector<Tally> tallies_;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> met_;  // this snapshot: decision block, executions met
};

// Snapshots x the share of counted executions, rounded.
std::uint32_t share_of(const Tally& t, std::size_t j) {
    return static_cast<std::uint32_t>(std::lround(t.snapshots * t.per_edge[j] / t.executions));
}

LaterOdds Replayer::odds() const {
    LaterOdds out;
    for (std::uint32_t b = 0; b < tallies_.size(); ++b) {
        const Tally& t = tallies_[b];
        const Decision& d = decisions_[b];
        if (t.snapshots == 0 || t.executions < kLaterPerSnapshot * t.snapshots) continue;
        if (d.kind == Decision::Kind::kBranch) {
            BranchOdds o;
            o.block = b;
            o.taken_edge = d.edges[0];
            o.fall_edge = d.edges[1];
            o.total = t.snapshots;
            o.taken = std::min(share_of(t, 0), o.total);
            std::tie(o.share_low, o.share_high) = share_interval(o.taken, o.total);
            out.branches.push_back(o);
        } else if (d.kind == Decision::Kind::kSwitch) {
            SwitchOdds o;
            o.block = b;
            o.edges = d.edges;
            for (std::size_t j = 0; j < d.edges.size(); ++j) {
                o.counts.push_back(share_of(t, j));
                o.total += o.counts.back();
            }
            if (o.total > 0) out.switches.push_back(std::move(o));
        }
    }
    return out;
}

template <typename Odds>
std::vector<Odds> prefer(std::vector<Odds> own, const std::vector<Odds>& later) {
    for (const Odds& l : later) {
        auto it = std::find_if(own.begin(), own.end(), [&](const Odds& o) { return o.block == l.block; });
        if (it == own.end())
            own.push_back(l);
        else if (2 * static_cast<std::uint64_t>(l.total) >= it->total)
            *it = l;
    }
    std::sort(own.begin(), own.end(), [](const Odds& x, const Odds& y) { return x.block < y.block; });
    return own;
}

}  // namespace

LaterOdds later_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                     std::span<const std::uint32_t> candidates) {
    if (cfg.blocks.empty() || candidates.empty()) return {};
    Replayer replayer(cfg);
    for (auto p : candidates) {
        if (p >= stream.size() || stream[p].image != image) continue;
        if (const auto k = instruction_at(cfg, stream[p].offset)) replayer.snapshot(*k, stream[p]);
    }
    return replayer.odds();
}

std::vector<BranchOdds> prefer_later(std::vector<BranchOdds> own, const std::vector<BranchOdds>& later) {
    return prefer(std::move(own), later);
}

std::vector<SwitchOdds> prefer_later(std::vector<SwitchOdds> own, const std::vector<SwitchOdds>& later) {
    return prefer(std::move(own), later);
}

}  // namespace ecpi::analyze
