// A loop estimated with the leaves it calls. See call_regions.h.
#include "ecpi/analyze/calc/call_regions.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace ecpi::analyze {

namespace {

// Calls of `start` an iteration from the loop's direct call sites.
double direct_calls_an_iteration(const RegionLoop& loop, std::uint64_t start) {
    return static_cast<double>(std::count(loop.direct.begin(), loop.direct.end(), start));
}

bool is_indirect_target(std::span<const std::uint64_t> indirect_targets, std::uint64_t start) {
    return std::find(indirect_targets.begin(), indirect_targets.end(), start) != indirect_targets.end();
}

bool covers(std::span<const RegionCallee> callees, std::uint64_t start) {
    return std::any_of(callees.begin(), callees.end(), [start](const RegionCallee& c) { return c.start == start; });
}

// The calls an iteration the snapshots gave `start` among the indirect calls' targets.
double indirect_share(const RegionLoop& loop, std::uint64_t start) {
    double n = 0;
    for (const auto& [target, share] : loop.indirect_shares)
        if (target == start) n += share;
    return n;
}

// Per target, the calls an iteration the loop's indirect call sites make
// to it by their snapshots' shares; empty unless every site is decided.
std::vector<std::pair<std::uint64_t, double>> decided_shares(const CalcProcedure& proc, const CalcLoop& loop) {
    std::map<std::uint64_t, double> shares;
    for (const auto& [site, target] : loop.calls) {
        if (target != 0) continue;
        const auto c = std::find_if(proc.call_sites.begin(), proc.call_sites.end(),
                                    [site](const CalcCallSite& s) { return s.address == site; });
        if (c == proc.call_sites.end() || !c->decided) return {};
        double total = 0;
        for (const auto& [t, n] : c->targets_seen) total += n;
        if (!(total > 0)) return {};
        for (const auto& [t, n] : c->targets_seen) shares[t] += n / total;
    }
    return {shares.begin(), shares.end()};
}

// Who calls what among the procedures, per image.
struct CallGraph {
    std::map<std::pair<std::size_t, std::uint64_t>, std::size_t> by_start;  // (image, start) -> position in procs
    std::map<std::pair<std::size_t, std::uint64_t>, std::vector<std::uint64_t>> direct_callers;  // (image, target) -> call sites
    std::map<std::size_t, std::vector<std::uint64_t>> indirect_sites;  // image -> indirect call sites
};

CallGraph call_graph(std::span<const RegionProcedure> procs) {
    CallGraph g;
    for (std::size_t k = 0; k < procs.size(); ++k) {
        const CalcProcedure& proc = *procs[k].proc;
        const std::size_t image = procs[k].image;
        g.by_start[{image, proc.start}] = k;
        for (const CalcCallSite& c : proc.call_sites) {
            if (c.target == 0) g.indirect_sites[image].push_back(c.address);
            else g.direct_callers[{image, c.target}].push_back(c.address);
        }
    }
    return g;
}

// A leaf without loops: its best case a call is bounded by its paths',
// whatever its own estimate makes of its blocks' counts. A callee with a
// loop costs what its trips take, which its own samples would have to tell
// (interp's `run` from its repetition loop in main: its entries came out at
// 3 against 6,000 when taken in). One that jumps to other code (a tail
// call) or whose jumps calc cannot follow runs code outside the region.
bool straight_leaf(const CalcProcedure& p) {
    return p.call_sites.empty() && p.loops.empty() && !p.tail_jumps && !p.missing_edges;
}

struct LoopRegion;
bool seen_targets(std::span<const RegionProcedure> procs, const CallGraph& g, std::size_t k,
                  const std::function<bool(std::uint64_t)>& in_loop,
                  std::vector<std::pair<std::uint64_t, double>> shares, LoopRegion& r);

// The region of one loop of the procedure at procs[k]: its callees
// (leaves that only this loop's calls reach) and the targets its indirect
// calls may have; none where the loop does not qualify.
struct LoopRegion {
    RegionLoop loop;
    std::vector<RegionCallee> callees;
    std::vector<std::uint64_t> indirect_targets;
    std::vector<std::size_t> callee_positions;  // in procs, `callees`' order
};

std::optional<LoopRegion> loop_region(std::span<const RegionProcedure> procs, const CallGraph& g, std::size_t k,
                                      const CalcLoop& loop) {
    if (loop.anchored || !loop.straight || loop.calls.empty()) return std::nullopt;
    const CalcProcedure& proc = *procs[k].proc;
    const std::size_t image = procs[k].image;
    const auto in_loop = [&loop](std::uint64_t site) {
        return std::any_of(loop.calls.begin(), loop.calls.end(), [site](const auto& c) { return c.first == site; });
    };
    LoopRegion r;
    r.loop.samples = static_cast<double>(loop.samples);
    r.loop.best_cycles = loop.best_cycles;
    const auto add_callee = [&](std::size_t pos) {
        const CalcProcedure& callee = *procs[pos].proc;
        if (std::find(r.callee_positions.begin(), r.callee_positions.end(), pos) != r.callee_positions.end()) return;
        r.callee_positions.push_back(pos);
        r.callees.push_back({callee.start, static_cast<double>(callee.samples), callee.best_cycles_per_call});
    };
    // Steps: its direct callees, each a leaf whose every caller is this loop;
    for (const auto& [site, target] : loop.calls) {
        if (target == 0) {
            ++r.loop.indirect;
            continue;
        }
        const auto it = g.by_start.find({image, target});
        if (it == g.by_start.end() || target == proc.start || !straight_leaf(*procs[it->second].proc))
            return std::nullopt;
        const auto& callers = g.direct_callers.at({image, target});
        if (!std::all_of(callers.begin(), callers.end(), in_loop)) return std::nullopt;
        r.loop.direct.push_back(target);
        add_callee(it->second);
    }
    if (r.loop.indirect == 0) return r;
    // its indirect calls, the image's only ones: they reach the targets
    // their snapshots saw, where those decide them, else they may reach
    // its direct callees and the sampled leaves of the image no direct call
    // reaches.
    const auto& sites = g.indirect_sites.at(image);
    if (!std::all_of(sites.begin(), sites.end(), in_loop)) return std::nullopt;
    if (seen_targets(procs, g, k, in_loop, decided_shares(proc, loop), r)) return r;
    for (auto t : r.loop.direct)
        if (std::find(r.indirect_targets.begin(), r.indirect_targets.end(), t) == r.indirect_targets.end())
            r.indirect_targets.push_back(t);
    for (const auto& [key, pos] : g.by_start) {
        const CalcProcedure& p = *procs[pos].proc;
        if (key.first != image || pos == k || !straight_leaf(p) || p.samples == 0 ||
            g.direct_callers.contains(key))
            continue;
        r.indirect_targets.push_back(p.start);
        add_callee(pos);
    }
    return r;
}

// Where the snapshots decided the indirect calls (`shares` not empty) and
// every target they saw is a leaf of the image whose direct callers are
// the loop's: those targets, with their shares, join the region r. Else r
// is left as it was.
bool seen_targets(std::span<const RegionProcedure> procs, const CallGraph& g, std::size_t k,
                  const std::function<bool(std::uint64_t)>& in_loop,
                  std::vector<std::pair<std::uint64_t, double>> shares, LoopRegion& r) {
    if (shares.empty()) return false;
    const std::size_t image = procs[k].image;
    std::vector<std::size_t> positions;
    for (const auto& [target, share] : shares) {
        const auto it = g.by_start.find({image, target});
        if (it == g.by_start.end() || it->second == k || !straight_leaf(*procs[it->second].proc)) return false;
        if (const auto callers = g.direct_callers.find({image, target}); callers != g.direct_callers.end())
            if (!std::all_of(callers->second.begin(), callers->second.end(), in_loop)) return false;
        positions.push_back(it->second);
    }
    for (std::size_t j = 0; j < shares.size(); ++j) {
        r.indirect_targets.push_back(shares[j].first);
        if (std::find(r.callee_positions.begin(), r.callee_positions.end(), positions[j]) != r.callee_positions.end())
            continue;
        const CalcProcedure& callee = *procs[positions[j]].proc;
        r.callee_positions.push_back(positions[j]);
        r.callees.push_back({callee.start, static_cast<double>(callee.samples), callee.best_cycles_per_call});
    }
    r.loop.indirect_shares = std::move(shares);
    return true;
}

}  // namespace

std::optional<RegionCounts> region_counts(const RegionLoop& loop, std::span<const RegionCallee> callees,
                                          std::span<const std::uint64_t> indirect_targets, CallCosts costs) {
    if (loop.indirect > 0 && indirect_targets.empty()) return std::nullopt;
    for (auto t : loop.direct)
        if (!covers(callees, t)) return std::nullopt;
    for (auto t : indirect_targets)
        if (!covers(callees, t)) return std::nullopt;
    // Steps: the region's samples, its instructions' best case an
    // iteration at the cheapest and the dearest split of its indirect calls
    // over their targets, the calls' bound, and the counts.
    double samples = loop.samples, instructions = loop.best_cycles;
    double cheapest = INFINITY, dearest = 0;
    for (const RegionCallee& c : callees) {
        samples += c.samples;
        instructions += direct_calls_an_iteration(loop, c.start) * c.best_cycles;
        if (!is_indirect_target(indirect_targets, c.start)) continue;
        cheapest = std::min(cheapest, c.best_cycles);
        dearest = std::max(dearest, c.best_cycles);
    }
    const double indirect = static_cast<double>(loop.indirect);
    const bool decided = !loop.indirect_shares.empty();
    if (loop.indirect == 0 || decided) cheapest = dearest = 0;
    if (decided)
        for (const RegionCallee& c : callees) instructions += indirect_share(loop, c.start) * c.best_cycles;
    const double bound = static_cast<double>(loop.direct.size()) * costs.direct + indirect * costs.indirect;
    const double low = std::max(instructions + indirect * cheapest, bound);
    const double high = std::max(instructions + indirect * dearest, bound);
    if (!(samples > 0) || !(low > 0) || high > kMaxSplitSpread * low) return std::nullopt;
    const double cycles = std::sqrt(low * high);
    RegionCounts out;
    out.iterations = samples / cycles;
    out.best_cycles = cycles;
    // Where the indirect calls go is not in the code (call_regions.h): a
    // target they may reach keeps its own count; the others' entries are
    // their call sites'.
    // Where the snapshots decided them, every callee's entries are its
    // calls' (direct and its share of the indirect).
    for (const RegionCallee& c : callees)
        if (decided || !is_indirect_target(indirect_targets, c.start))
            out.entries.emplace_back(c.start, (direct_calls_an_iteration(loop, c.start) + indirect_share(loop, c.start)) *
                                                  out.iterations);
    return out;
}

std::map<std::size_t, ProcedureRegion> call_region_counts(std::span<const RegionProcedure> procs,
                                                          CallCosts costs, double period_cycles) {
    const CallGraph g = call_graph(procs);
    struct Found {
        std::size_t k;
        std::uint64_t header;
        LoopRegion region;
    };
    std::vector<Found> found;
    std::map<std::size_t, int> claims;  // callee position -> regions
    for (std::size_t k = 0; k < procs.size(); ++k)
        for (const CalcLoop& loop : procs[k].proc->loops)
            if (auto r = loop_region(procs, g, k, loop)) {
                for (auto pos : r->callee_positions) ++claims[pos];
                found.push_back({k, loop.header, std::move(*r)});
            }
    std::map<std::size_t, ProcedureRegion> out;
    for (const Found& f : found) {
        const auto& positions = f.region.callee_positions;
        if (std::any_of(positions.begin(), positions.end(), [&](std::size_t pos) { return claims[pos] > 1; }))
            continue;
        const auto counts = region_counts(f.region.loop, f.region.callees, f.region.indirect_targets, costs);
        if (!counts) continue;
        ProcedureRegion& mine = out[f.k];
        mine.loop = true;
        mine.counts.emplace_back(f.header, counts->iterations * period_cycles);
        mine.best_cycles[f.header] = counts->best_cycles;
        for (const auto& [start, entries] : counts->entries)
            for (std::size_t c = 0; c < f.region.callees.size(); ++c)
                if (f.region.callees[c].start == start) out[positions[c]].counts.emplace_back(start, entries * period_cycles);
    }
    return out;
}

}  // namespace ecpi::analyze
