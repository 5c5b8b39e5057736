// A bisection's trip length from its bounds at its snapshots. See
// bisection_trips.h.
#include "ecpi/analyze/calc/bisection_trips.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <capstone/capstone.h>

#include "ecpi/analyze/calc/branch_odds.h"

namespace ecpi::analyze {

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;

bool writes_gp(const DecodedInstruction& d, int gp) {
    return std::any_of(d.writes.begin(), d.writes.end(), [gp](std::uint16_t w) { return gp_register_number(w) == gp; });
}

int first_gp(const DecodedInstruction& d) { return gp_register_number(d.first_register); }

bool plain_lea(const DecodedInstruction& d) {
    return d.id == X86_INS_LEA && d.memory.segment == 0 && (d.first_size == 4 || d.first_size == 8);
}

bool shift_right_by_one(const DecodedInstruction& d) {
    return (d.id == X86_INS_SAR || d.id == X86_INS_SHR) && (!d.has_immediate || d.immediate == 1) &&
           d.second_register == 0 && !d.loads && !d.stores;
}

struct Midpoint {
    int m = -1, p = -1, q = -1;  // m = (p + q) >> 1
};

// The loop halves two registers' sum into a third: `lea m, [p + q]` (or
// `mov m, p; add m, q`) and then `sar`/`shr m, 1` with no other write of m
// between, in one block.
std::vector<Midpoint> midpoints(const Cfg& cfg, const Loop& loop) {
    std::vector<Midpoint> found;
    for (auto b : loop.blocks) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k + 1 < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            const DecodedInstruction& next = cfg.instructions[k + 1];
            Midpoint mid;
            mid.m = first_gp(d);
            std::uint32_t sum_end = kNone;
            if (plain_lea(d) && d.memory.scale == 1 && d.memory.disp == 0 && d.memory.index != 0) {
                mid.p = gp_register_number(d.memory.base);
                mid.q = gp_register_number(d.memory.index);
                sum_end = k + 1;
            } else if (d.reg_move && next.id == X86_INS_ADD && first_gp(next) == mid.m && !next.has_immediate) {
                mid.p = gp_register_number(d.second_register);
                mid.q = gp_register_number(next.second_register);
                sum_end = k + 2;
            }
            if (sum_end == kNone || mid.m < 0 || mid.p < 0 || mid.q < 0 || mid.p == mid.q || mid.m == mid.p ||
                mid.m == mid.q || mid.p == 4 || mid.q == 4)
                continue;
            for (std::uint32_t j = sum_end; j < blk.first + blk.count; ++j) {
                const DecodedInstruction& s = cfg.instructions[j];
                if (!writes_gp(s, mid.m)) continue;
                if (first_gp(s) == mid.m && shift_right_by_one(s)) found.push_back(mid);
                break;
            }
        }
    }
    return found;
}

// What each write of a bound in the loop sets it to: the midpoint plus a
// constant (`lea p, [m + c]`, or `mov p, m` after `add m, c` in its block),
// -1, 0 or 1. Every write of m itself must be its own sum and shift or add
// or subtract one. Which bound is the low one (written m + 1) and whether
// the high one is written m - 1 (the loop runs while low <= high) or m
// (while low < high); none where the writes do not say.
std::optional<BisectionSite> bounds_of(const Cfg& cfg, const Loop& loop, const Midpoint& mid) {
    std::optional<std::int64_t> step_p, step_q;  // the one constant each bound is written with
    for (auto b : loop.blocks) {
        const auto& blk = cfg.blocks[b];
        std::int64_t offset = 0;  // m's distance from the midpoint so far in this block
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            for (auto w : d.writes) {
                const int r = gp_register_number(w);
                if (r < 0 || (r != mid.p && r != mid.q && r != mid.m)) continue;
                if (first_gp(d) != r || d.loads || d.stores) return std::nullopt;
                if (r == mid.m) {
                    if ((d.id == X86_INS_ADD || d.id == X86_INS_SUB) && d.has_immediate &&
                        (d.immediate == 1 || d.immediate == -1)) {
                        offset += d.id == X86_INS_ADD ? d.immediate : -d.immediate;
                    } else if (d.id == X86_INS_INC || d.id == X86_INS_DEC) {
                        offset += d.id == X86_INS_INC ? 1 : -1;
                    } else if (plain_lea(d) || d.reg_move || d.id == X86_INS_ADD || shift_right_by_one(d)) {
                        offset = 0;  // the midpoint's own sum and shift (midpoints() found them)
                        const bool own = shift_right_by_one(d) ||
                                         (plain_lea(d) && d.memory.index != 0) ||
                                         (d.reg_move && (gp_register_number(d.second_register) == mid.p ||
                                                         gp_register_number(d.second_register) == mid.q)) ||
                                         (d.id == X86_INS_ADD && !d.has_immediate);
                        if (!own) return std::nullopt;
                    } else {
                        return std::nullopt;
                    }
                    continue;
                }
                std::int64_t c = 0;
                if (plain_lea(d) && gp_register_number(d.memory.base) == mid.m && d.memory.index == 0)
                    c = d.memory.disp + offset;
                else if (d.reg_move && gp_register_number(d.second_register) == mid.m)
                    c = offset;
                else
                    return std::nullopt;
                if (c < -1 || c > 1) return std::nullopt;
                auto& step = r == mid.p ? step_p : step_q;
                if (step && *step != c) return std::nullopt;
                step = c;
            }
        }
    }
    if (!step_p || !step_q) return std::nullopt;
    BisectionSite site;
    if (*step_p == 1 && *step_q <= 0) {
        site.low = mid.p;
        site.high = mid.q;
        site.inclusive = *step_q == -1;
    } else if (*step_q == 1 && *step_p <= 0) {
        site.low = mid.q;
        site.high = mid.p;
        site.inclusive = *step_p == -1;
    } else {
        return std::nullopt;
    }
    return site;
}

// The width of the midpoint's arithmetic: its shift's operand bytes.
std::uint8_t midpoint_width(const Cfg& cfg, const Loop& loop, int m) {
    for (auto b : loop.blocks) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k) {
            const DecodedInstruction& d = cfg.instructions[k];
            if (first_gp(d) == m && shift_right_by_one(d)) return d.first_size;
        }
    }
    return 8;
}

// The one edge into the header from outside the loop (kNone: none or several).
std::uint32_t entry_edge(const Cfg& cfg, const Loop& loop) {
    std::uint32_t entry = kNone;
    for (auto e : cfg.blocks[loop.header].in_edges) {
        const std::uint32_t from = cfg.edges[e].from;
        if (from >= cfg.blocks.size()) return kNone;
        if (loop.contains(from)) continue;
        if (entry != kNone) return kNone;
        entry = e;
    }
    return entry;
}

// The pcs where neither bound has been written since the header: blocks
// reached from it only through blocks that write neither (back edges
// aside), up to their first write.
std::vector<std::pair<std::uint64_t, std::uint64_t>> own_bounds_pcs(const Cfg& cfg, const Loop& loop, int p, int q) {
    const auto first_write = [&](std::uint32_t b) {
        const auto& blk = cfg.blocks[b];
        for (std::uint32_t k = blk.first; k < blk.first + blk.count; ++k)
            if (writes_gp(cfg.instructions[k], p) || writes_gp(cfg.instructions[k], q)) return k;
        return kNone;
    };
    std::vector<bool> dirty(cfg.blocks.size(), false);  // a bound may be written before b's start
    for (bool changed = true; changed;) {
        changed = false;
        for (auto b : loop.blocks) {
            if (b == loop.header || dirty[b]) continue;
            for (auto e : cfg.blocks[b].in_edges) {
                const std::uint32_t from = cfg.edges[e].from;
                if (from >= cfg.blocks.size() || !loop.contains(from)) continue;
                if (dirty[from] || first_write(from) != kNone) {
                    dirty[b] = true;
                    changed = true;
                    break;
                }
            }
        }
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> pcs;
    for (auto b : loop.blocks) {
        if (dirty[b]) continue;
        const auto& blk = cfg.blocks[b];
        const std::uint32_t w = first_write(b);
        const std::uint32_t end = w == kNone ? blk.first + blk.count : w;
        if (end == blk.first) continue;
        const auto& last = cfg.instructions[end - 1];
        pcs.emplace_back(cfg.instructions[blk.first].address, last.address + last.size);
    }
    return pcs;
}

bool leaves_loop(const Cfg& cfg, const Loop& loop, std::uint32_t b) {
    const auto& out = cfg.blocks[b].out_edges;
    return std::any_of(out.begin(), out.end(), [&](std::uint32_t e) {
        return cfg.edges[e].to >= cfg.blocks.size() || !loop.contains(cfg.edges[e].to);
    });
}

// The blocks leaving the loop on a compare of two of the bounds and the
// midpoint (`cmp lo, hi`, or clang's `cmp mid, hi` for `lo = mid + 1; if
// (lo > hi)`).
std::vector<std::uint32_t> exit_tests(const Cfg& cfg, const Loop& loop, const BisectionSite& site, int m) {
    std::vector<std::uint32_t> blocks;
    const auto ours = [&](int r) { return r == site.low || r == site.high || r == m; };
    for (auto b : loop.blocks) {
        if (!leaves_loop(cfg, loop, b)) continue;
        const auto c = branch_condition(cfg, b);
        if (c && !c->is_test && c->a != c->b && ours(c->a) && ours(c->b)) blocks.push_back(b);
    }
    return blocks;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Whether the snapshots spread evenly over the levels from the bottom
// (one candidate left) to the top one (bisection_trips.h: the model's
// test).
void check_levels(BisectionTrips& out) {
    std::vector<double> held;
    for (std::size_t k = 1; k < out.levels.size(); ++k)
        if (out.levels[k] > 0) held.push_back(out.levels[k]);
    // The median over the levels that hold any: a trip passes every level
    // below its top, so a level short of it is one trips do not reach.
    const double m = out.per_level = median(held);
    out.top = 0;
    for (std::size_t k = 1; k < out.levels.size(); ++k)
        if (out.levels[k] >= m / 2) out.top = static_cast<std::uint32_t>(k);
    if (m < kMinBisectionLevelSnapshots) {
        out.uneven = true;
        return;
    }
    for (std::uint32_t k = 1; k <= out.top; ++k) {
        const double n = out.levels[k];
        if (std::abs(n - m) > std::max(0.4 * m, 3 * std::sqrt(m))) {
            out.uneven = true;
            out.uneven_level = k;
            return;
        }
    }
}

// The snapshot at stream position p when it is the procedure's and taken
// where the bounds are the iteration's own (BisectionSite::pcs).
const store::RegisterSample* own_bounds_snapshot(const BisectionSite& site, std::span<const store::RegisterSample> stream,
                                                 std::uint32_t image, std::size_t p) {
    if (p >= stream.size()) return nullptr;
    const store::RegisterSample& s = stream[p];
    if (s.image != image) return nullptr;
    const bool in = std::any_of(site.pcs.begin(), site.pcs.end(), [&](const auto& r) {
        return s.offset >= r.first && s.offset < r.second;
    });
    return in ? &s : nullptr;
}

// A bound's value, signed at the midpoint's width.
std::int64_t bound_value(const BisectionSite& site, std::uint64_t v) {
    return site.width == 4 ? static_cast<std::int64_t>(static_cast<std::int32_t>(static_cast<std::uint32_t>(v)))
                           : static_cast<std::int64_t>(v);
}

// Calls visit(p) for every stream position of the procedure's snapshots.
template <typename Visit>
void each_position(std::span<const store::RegisterSample> stream, std::span<const std::uint32_t> candidates, Visit visit) {
    if (candidates.empty()) {
        for (std::size_t p = 0; p < stream.size(); ++p) visit(p);
    } else {
        for (auto p : candidates) visit(p);
    }
}

// Where the levels are uneven but every trip starts at one width and runs
// to the bottom, the iterations take unequal times, not the trips unequal
// lengths: a trip runs the levels from that width's down, log2(w + 1)
// (BisectionTrips::equal_trips).
void equal_trips(BisectionTrips& out, const std::map<std::int64_t, std::uint32_t>& widest, std::size_t level) {
    if (out.uneven_level <= 1 || out.top != level || widest.empty() || out.levels.size() < 2) return;
    if (out.levels[1] < out.per_level / 2) return;  // trips that end early
    std::uint32_t all = 0, most = 0;
    std::int64_t width = 0;
    for (const auto& [w, n] : widest) {
        all += n;
        if (n > most) {
            most = n;
            width = w;
        }
    }
    if (most < kMinBisectionStartSnapshots || most < kEqualStartShare * all) return;
    const double r = std::log2(static_cast<double>(width) + 1);
    out.equal_trips = true;
    out.start_width = static_cast<std::uint64_t>(width);
    out.start_snapshots = most;
    out.top_snapshots = all;
    out.length = r;
    out.low = std::max(1.0, std::floor(r));
    out.high = std::ceil(r);
    out.known = true;
}

// The moves of each snapshot's trip so far, replayed from the most common
// bounds at the top level (BisectionTrips::low_moves).
void count_moves(const BisectionSite& site, std::span<const store::RegisterSample> stream, std::uint32_t image,
                 std::span<const std::uint32_t> candidates, const std::map<std::pair<double, double>, std::uint32_t>& starts,
                 BisectionTrips& out) {
    std::pair<double, double> start{};
    std::uint32_t most = 0;
    for (const auto& [bounds, n] : starts)
        if (n > most) {
            most = n;
            start = bounds;
        }
    if (most < kMinBisectionStartSnapshots) return;
    each_position(stream, candidates, [&](std::size_t p) {
        const store::RegisterSample* s = own_bounds_snapshot(site, stream, image, p);
        if (!s) return;
        const std::int64_t lo = bound_value(site, s->regs[static_cast<std::size_t>(site.low)]);
        const std::int64_t hi = bound_value(site, s->regs[static_cast<std::size_t>(site.high)]);
        auto c_lo = static_cast<std::int64_t>(start.first), c_hi = static_cast<std::int64_t>(start.second);
        std::uint64_t low = 0, high = 0;
        for (int step = 0; step < 64 && (c_lo != lo || c_hi != hi); ++step) {
            const std::int64_t m = (c_lo + c_hi) >> 1;
            if (lo < c_lo || hi > c_hi) return;  // not on this start's path
            if (lo >= m + 1) {
                c_lo = m + 1;
                ++low;
            } else if (hi <= (site.inclusive ? m - 1 : m)) {
                c_hi = site.inclusive ? m - 1 : m;
                ++high;
            } else {
                return;
            }
        }
        if (c_lo != lo || c_hi != hi) return;
        out.low_moves += low;
        out.high_moves += high;
    });
}

}  // namespace

std::optional<BisectionSite> bisection_site(const Cfg& cfg, const LoopInfo& loops, std::uint32_t l) {
    if (l >= loops.loops.size()) return std::nullopt;
    const Loop& loop = loops.loops[l];
    const std::uint32_t entry = entry_edge(cfg, loop);
    if (entry == kNone) return std::nullopt;
    const std::uint32_t preheader = cfg.edges[entry].from;
    if (cfg.blocks[preheader].out_edges.size() != 1) return std::nullopt;
    const auto clobbered = [&](int r) { return ((loop.call_clobbers >> r) & 1u) != 0; };
    for (const Midpoint& mid : midpoints(cfg, loop)) {
        if (clobbered(mid.m) || clobbered(mid.p) || clobbered(mid.q)) continue;
        auto site = bounds_of(cfg, loop, mid);
        if (!site) continue;
        site->loop = l;
        site->preheader = preheader;
        site->entry_edge = entry;
        site->width = midpoint_width(cfg, loop, mid.m);
        site->pcs = own_bounds_pcs(cfg, loop, site->low, site->high);
        site->exit_tests = exit_tests(cfg, loop, *site, mid.m);
        if (!site->pcs.empty() && !site->exit_tests.empty()) return site;
    }
    return std::nullopt;
}

BisectionTrips bisection_trips(const BisectionSite& site, std::span<const store::RegisterSample> stream,
                               std::uint32_t image, std::span<const std::uint32_t> candidates) {
    BisectionTrips out;
    double sum = 0, sum_sq = 0;
    std::map<std::int64_t, std::uint32_t> widest;  // the widths seen at the highest level so far
    std::map<std::pair<double, double>, std::uint32_t> starts;  // and the bounds
    std::size_t widest_level = 0;
    const auto signed_value = [&](std::uint64_t v) { return static_cast<double>(bound_value(site, v)); };
    each_position(stream, candidates, [&](std::size_t p) {
        const store::RegisterSample* own = own_bounds_snapshot(site, stream, image, p);
        if (!own) return;
        const store::RegisterSample& s = *own;
        const double w = signed_value(s.regs[static_cast<std::size_t>(site.high)]) -
                         signed_value(s.regs[static_cast<std::size_t>(site.low)]) + (site.inclusive ? 1 : 0);
        if (w == 0) {
            // The trip's last test: the bounds met (lo == hi) or crossed by
            // one (lo == hi + 1). No iteration of the trip is left, and the
            // test is a fraction of an iteration's work, so it is no level.
            ++out.at_exit;
            return;
        }
        if (!(w >= 1)) {
            ++out.unknown;
            return;
        }
        const double r = std::log2(w + 1);
        sum += r;
        sum_sq += r * r;
        ++out.snapshots;
        const auto level = static_cast<std::size_t>(r + 0.5);
        if (out.levels.size() <= level) out.levels.resize(level + 1, 0);
        ++out.levels[level];
        if (level > widest_level) {
            widest.clear();
            starts.clear();
            widest_level = level;
        }
        if (level == widest_level) {
            ++widest[static_cast<std::int64_t>(w)];
            ++starts[{signed_value(s.regs[static_cast<std::size_t>(site.low)]),
                      signed_value(s.regs[static_cast<std::size_t>(site.high)])}];
        }
    });
    if (out.snapshots < kMinBisectionSnapshots || 100.0 * out.unknown > out.snapshots + out.unknown) return out;
    const double n = out.snapshots;
    const double mean = sum / n;
    const double se = std::sqrt(std::max(0.0, sum_sq / n - mean * mean) / n);
    out.length = std::max(1.0, 2 * mean - 1);
    out.low = std::max(1.0, 2 * (mean - 2 * se) - 1);
    out.high = 2 * (mean + 2 * se) - 1;
    check_levels(out);
    out.known = !out.uneven;
    if (out.uneven) equal_trips(out, widest, widest_level);
    if (out.equal_trips) count_moves(site, stream, image, candidates, starts, out);
    return out;
}

}  // namespace ecpi::analyze
