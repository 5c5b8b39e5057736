// A loop's trip length from its trips' first iterations. See entry_trips.h.
#include "ecpi/analyze/calc/entry_trips.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

#include <capstone/capstone.h>

#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/switch_odds.h"

namespace ecpi::analyze {

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;

bool holds(const std::vector<int>& regs, int r) { return std::find(regs.begin(), regs.end(), r) != regs.end(); }

bool writes_gp(const DecodedInstruction& d, int gp) {
    return std::any_of(d.writes.begin(), d.writes.end(), [gp](std::uint16_t w) { return gp_register_number(w) == gp; });
}

// What an instruction of the loop does to register gp: adds a constant to
// it (the constant), masks it by a steady register or a constant (0), or
// something else (none).
std::optional<std::int64_t> step_or_mask(const DecodedInstruction& d, int gp, const std::vector<int>& steady) {
    if (gp_register_number(d.first_register) != gp || (d.first_size != 4 && d.first_size != 8) || d.loads ||
        d.stores)
        return std::nullopt;
    switch (d.id) {
        case X86_INS_INC: return 1;
        case X86_INS_DEC: return -1;
        case X86_INS_ADD:
            if (d.has_immediate && d.immediate != 0) return d.immediate;
            return std::nullopt;
        case X86_INS_SUB:
            if (d.has_immediate && d.immediate != 0) return -d.immediate;
            return std::nullopt;
        case X86_INS_LEA:
            if (d.memory.base == d.first_register && d.memory.index == 0 && d.memory.segment == 0 && d.memory.disp != 0)
                return d.memory.disp;
            return std::nullopt;
        case X86_INS_AND:
            if (d.has_immediate || (d.second_register != 0 && holds(steady, gp_register_number(d.second_register))))
                return 0;
            return std::nullopt;
        default: return std::nullopt;
    }
}

// Whether block b runs on every way round loop l: in no loop nested in
// it, and dominating its latch (an iteration that goes on passes it).
bool every_turn(const LoopInfo& loops, std::uint32_t l, std::uint32_t b) {
    return b < loops.innermost.size() && loops.innermost[b] == l &&
           dominates(loops, b, loops.loops[l].latches.front());
}

// Whether register gp is stepped in loop l as entry_trips.h requires.
bool stepped(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l, int gp) {
    const Loop& loop = loops.loops[l];
    const std::vector<int>& steady = loops.steady[l];
    int sign = 0;
    bool every = false;
    for (auto b : loop.blocks) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            if (!writes_gp(d, gp)) continue;
            const auto step = step_or_mask(d, gp, steady);
            if (!step) return false;
            if (*step == 0) continue;
            const int s = *step > 0 ? 1 : -1;
            if (sign != 0 && s != sign) return false;
            sign = s;
            every = every || every_turn(loops, l, b);
        }
    }
    return every;
}

// What one iteration of loop l adds to register gp: the sum of its adds
// where each is in a block every way round passes; 0 where one is not, or
// where gp is masked (its value wraps).
std::int64_t step_per_iteration(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l, int gp) {
    std::int64_t sum = 0;
    for (auto b : loops.loops[l].blocks) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            if (!writes_gp(d, gp)) continue;
            const auto step = step_or_mask(d, gp, loops.steady[l]);
            if (!step || *step == 0 || !every_turn(loops, l, b)) return 0;
            sum += *step;
        }
    }
    return sum;
}

// The one edge into loop l's header from outside it, and the one back
// edge; kNone when there are others.
std::pair<std::uint32_t, std::uint32_t> header_edges(const Cfg& cfg, const Loop& loop) {
    std::uint32_t entry = kNone, back = kNone;
    for (auto e : cfg.blocks[loop.header].in_edges) {
        const std::uint32_t from = cfg.edges[e].from;
        auto& slot = from < cfg.blocks.size() && loop.contains(from) ? back : entry;
        if (slot != kNone || from >= cfg.blocks.size()) return {kNone, kNone};
        slot = e;
    }
    return {entry, back};
}

// The header's pcs after its first write of the site's register at
// instruction k, when that write adds a constant (EntryTripSite::after_*).
void after_first_write(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l, std::uint32_t k, EntryTripSite& site) {
    const auto& head = cfg.blocks[loops.loops[l].header];
    const auto add = step_or_mask(cfg.instructions[k], site.gp, loops.steady[l]);
    if (!add || *add == 0 || k + 1 >= head.first + head.count) return;
    const DecodedInstruction& write = cfg.instructions[k];
    site.after_begin = write.address + write.size;
    site.after_add = *add;
    const auto& last = cfg.instructions[head.first + head.count - 1];
    site.after_end = last.address + last.size;
    for (std::uint32_t j = k + 1; j < head.first + head.count; ++j)
        if (writes_gp(cfg.instructions[j], site.gp)) {
            site.after_end = cfg.instructions[j].address + cfg.instructions[j].size;
            break;
        }
}

}  // namespace

std::optional<EntryTripSite> entry_trip_site(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l) {
    if (l >= loops.loops.size()) return std::nullopt;
    const Loop& loop = loops.loops[l];
    if (loop.has_call || loop.latches.size() != 1) return std::nullopt;
    const auto [entry, back] = header_edges(cfg, loop);
    if (entry == kNone || back == kNone) return std::nullopt;
    const std::uint32_t preheader = cfg.edges[entry].from;
    if (cfg.blocks[preheader].out_edges.size() != 1) return std::nullopt;
    const auto& pre = cfg.blocks[preheader];
    const auto& head = cfg.blocks[loop.header];
    for (int gp = 0; gp < 16; ++gp) {
        if (gp == 4 || !stepped(cfg, loops, l, gp)) continue;
        bool set_before = false;
        for (std::uint32_t k = pre.first; k < pre.first + pre.count; ++k)
            set_before = set_before || writes_gp(cfg.instructions[k], gp);
        if (!set_before) continue;
        EntryTripSite site;
        site.loop = l;
        site.preheader = preheader;
        site.entry_edge = entry;
        site.back_edge = back;
        site.gp = gp;
        site.top_begin = cfg.instructions[head.first].address;
        const auto& last = cfg.instructions[head.first + head.count - 1];
        site.top_end = last.address + last.size;
        for (std::uint32_t k = head.first; k < head.first + head.count; ++k)
            if (writes_gp(cfg.instructions[k], gp)) {
                site.top_end = cfg.instructions[k].address;
                after_first_write(cfg, loops, l, k, site);
                break;
            }
        site.step = step_per_iteration(cfg, loops, l, gp);
        if (site.top_end > site.top_begin) return site;
    }
    return std::nullopt;
}

std::optional<std::uint64_t> trip_start(const Cfg& cfg, const LoopInfo& loops, const EntryTripSite& site,
                                        const store::RegisterSample& s) {
    const auto& pre = cfg.blocks[site.preheader];
    const std::vector<int>& steady = loops.steady[site.loop];
    // Before instruction k, a register the loop leaves alone and the rest
    // of the preheader (k on) does not write holds its snapshot value.
    std::array<bool, 16> written_later{};
    std::vector<std::array<bool, 16>> later(pre.count);
    for (std::uint32_t i = pre.count; i-- > 0;) {
        for (auto w : cfg.instructions[pre.first + i].writes)
            if (int n = gp_register_number(w); n >= 0) written_later[static_cast<std::size_t>(n)] = true;
        later[i] = written_later;
    }
    KnownRegisters r;
    for (std::uint32_t i = 0; i < pre.count; ++i) {
        for (int n : steady)
            if (!later[i][static_cast<std::size_t>(n)]) {
                r.value[static_cast<std::size_t>(n)] = s.regs[static_cast<std::size_t>(n)];
                r.known[static_cast<std::size_t>(n)] = true;
            }
        replay(cfg.instructions[pre.first + i], r);
    }
    if (!r.known[static_cast<std::size_t>(site.gp)]) return std::nullopt;
    return r.value[static_cast<std::size_t>(site.gp)];
}

namespace {

// The trip length from the second iterations (EntryTrips::second), and the
// range over both references where they disagree. A row sum of 3 to 10
// words a row (mean 6.47): 117 of 214 snapshots at its header's top in a
// first iteration read 1.83 (1.63-2.13) (docs/ACCURACY.md).
void add_second_iterations(EntryTrips& out) {
    const std::uint32_t later = out.snapshots - out.first;
    if (out.second < kMinFirstSnapshots || later < out.second) return;
    out.later_length = 1 + static_cast<double>(later) / static_cast<double>(out.second);
    const auto [low, high] = share_interval(out.second, later);
    const double later_low = 1 + 1 / high, later_high = low > 0 ? 1 + 1 / low : INFINITY;
    out.disagree = later_low > out.high || later_high < out.low;
    if (!out.disagree) return;
    out.low = std::min(out.low, later_low);
    out.high = std::max(out.high, later_high);
}

}  // namespace

EntryTrips entry_trips(const Cfg& cfg, const LoopInfo& loops, const EntryTripSite& site,
                       std::span<const store::RegisterSample> stream, std::uint32_t image,
                       std::span<const std::uint32_t> candidates) {
    EntryTrips out;
    std::map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> by_pc;  // pc: (first, all)
    const auto visit = [&](std::size_t p) {
        if (p >= stream.size()) return;
        const store::RegisterSample& s = stream[p];
        if (s.image != image) return;
        const bool top = s.offset >= site.top_begin && s.offset < site.top_end;
        if (!top && !(s.offset >= site.after_begin && s.offset < site.after_end)) return;
        const auto start = trip_start(cfg, loops, site, s);
        if (!start) {
            ++out.unknown;
            return;
        }
        // In a first iteration the register holds its start, or past the
        // header's first write the start plus what that write adds.
        const std::uint64_t begin = *start + static_cast<std::uint64_t>(top ? 0 : site.after_add);
        const std::uint64_t value = s.regs[static_cast<std::size_t>(site.gp)];
        const bool first = value == begin;
        ++out.snapshots;
        out.first += first ? 1 : 0;
        if (site.step != 0 && value == begin + static_cast<std::uint64_t>(site.step)) ++out.second;
        auto& at = by_pc[s.offset];
        at.first += first ? 1 : 0;
        ++at.second;
    };
    if (candidates.empty()) {
        for (std::size_t p = 0; p < stream.size(); ++p) visit(p);
    } else {
        for (auto p : candidates) visit(p);
    }
    // A start the replay cannot know is one the preheader reads from
    // memory or from a register the loop changes: it is so for every
    // snapshot, or for a signal handler's few.
    if (out.snapshots < kMinEntryTripSnapshots || out.first < kMinFirstSnapshots ||
        100.0 * out.unknown > out.snapshots + out.unknown)
        return out;
    out.length = static_cast<double>(out.snapshots) / static_cast<double>(out.first);
    auto [low, high] = share_interval(out.first, out.snapshots);
    for (const auto& [pc, n] : by_pc) {
        if (n.second < kOddsPositionSnapshots) continue;
        const auto [pc_low, pc_high] = share_interval(n.first, n.second);
        low = std::min(low, pc_low);
        high = std::max(high, pc_high);
    }
    // The share of first iterations is entries over iterations.
    out.low = 1 / high;
    out.high = low > 0 ? 1 / low : INFINITY;
    out.known = true;
    add_second_iterations(out);
    return out;
}

bool narrow_by_entry_trips(ClassRange& range, const EntryTrips& trips, double entries_low, double entries_high,
                           double less) {
    if (!range.ranged || !trips.known) return false;
    const double least = entries_low * (trips.low - less), most = entries_high * (trips.high - less);
    if (!(least <= range.max) || !(most >= range.min)) return false;
    range.min = std::max(range.min, least);
    range.max = std::min(range.max, most);
    return true;
}

}  // namespace ecpi::analyze
