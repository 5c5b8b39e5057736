// Loop iteration rates from pairs of register snapshots. See register_progress.h.
#include "ecpi/analyze/calc/register_progress.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <capstone/capstone.h>

namespace ecpi::analyze {

namespace {

bool in_own_code(const ProgressQuery& q, const store::RegisterSample& s) {
    return s.image == q.image && q.in_loop(s.offset);
}

// Which snapshots are the loop's: in its code, or in its calls' code with
// the signature of a trip (ProgressQuery::in_callees).
class Members {
public:
    explicit Members(const ProgressQuery& q) : q_(q) {
        if (!q.in_callees || q.signature.empty()) return;
        for (std::size_t p = 0; p < q.stream.size(); ++p)
            if (in_own_code(q, q.stream[p])) signatures_.insert(signature(q.stream[p]));
    }
    bool with_callees() const { return !signatures_.empty(); }
    bool own(const store::RegisterSample& s) const { return in_own_code(q_, s); }
    bool in_callee(const store::RegisterSample& s) const {
        return with_callees() && s.image == q_.image && !q_.in_loop(s.offset) && q_.in_callees(s.offset) &&
               signatures_.contains(signature(s));
    }
    bool operator()(const store::RegisterSample& s) const { return own(s) || in_callee(s); }

private:
    std::vector<std::uint64_t> signature(const store::RegisterSample& s) const {
        std::vector<std::uint64_t> v;
        for (int r : q_.signature) v.push_back(s.regs[static_cast<std::size_t>(r)]);
        return v;
    }
    const ProgressQuery& q_;
    std::set<std::vector<std::uint64_t>> signatures_;
};

// Calls f(p) for each position of the stream that may hold the loop's
// snapshots: the candidates, unless the calls' snapshots count too (they
// are outside the procedure's candidates) or there are none.
template <typename F>
void each_position(const ProgressQuery& q, const Members& m, F&& f) {
    if (q.candidates.empty() || m.with_callees()) {
        for (std::size_t p = 0; p < q.stream.size(); ++p) f(p);
    } else {
        for (auto p : q.candidates)
            if (p < q.stream.size()) f(p);
    }
}

struct Pair {
    double iterations = 0;
    double ns = 0;
    double rate() const { return iterations / ns; }
};

// Why a pair cannot be used, or how many iterations it saw.
enum class Verdict { kUse, kOtherThread, kLeftLoop, kInvariant, kDirection, kTooFar, kGap };

// max_gap_ns: 0 when the hops between a and b were checked already.
Verdict judge(const ProgressQuery& q, const Members& m, const store::RegisterSample& a,
              const store::RegisterSample& b, double max_gap_ns, double& iterations) {
    if (a.tid != b.tid || a.pid != b.pid) return Verdict::kOtherThread;
    if (!m(b)) return Verdict::kLeftLoop;
    for (int r : q.invariant)
        if (a.regs[static_cast<std::size_t>(r)] != b.regs[static_cast<std::size_t>(r)]) return Verdict::kInvariant;
    const double ns = static_cast<double>(b.time_ns) - static_cast<double>(a.time_ns);
    if (ns <= 0 || (max_gap_ns > 0 && ns > max_gap_ns)) return Verdict::kGap;
    // The register's movement in its own width, as a signed number (a
    // 32-bit counter wraps at 2^32; a 64-bit one at 2^64).
    const auto r = static_cast<std::size_t>(q.gp);
    std::uint64_t raw = b.regs[r] - a.regs[r];
    std::int64_t moved;
    if (q.width == 4) moved = static_cast<std::int32_t>(static_cast<std::uint32_t>(raw));
    else moved = static_cast<std::int64_t>(raw);
    if (moved % q.step != 0) return Verdict::kDirection;
    const std::int64_t n = moved / q.step;
    if (n < 0) return Verdict::kDirection;
    // No loop of a register this wide runs a quarter of its range between
    // two samples; such a jump is another invocation that kept the invariants.
    const double limit = q.width == 4 ? std::ldexp(1.0, 30) : std::ldexp(1.0, 62);
    if (std::fabs(static_cast<double>(n) * static_cast<double>(q.step)) > limit) return Verdict::kTooFar;
    iterations = static_cast<double>(n);
    return Verdict::kUse;
}

void count(PairCounts& c, Verdict v) {
    switch (v) {
        case Verdict::kUse: ++c.used; break;
        case Verdict::kOtherThread: ++c.other_thread; break;
        case Verdict::kLeftLoop: ++c.left_loop; break;
        case Verdict::kInvariant: ++c.invariant_changed; break;
        case Verdict::kDirection: ++c.wrong_direction; break;
        case Verdict::kTooFar: ++c.too_far; break;
        case Verdict::kGap: ++c.gap; break;
    }
}

// The induction register as a signed number of its width, in the stepping
// direction, so that values compare in iterations.
double position(const ProgressQuery& q, const store::RegisterSample& s) {
    const auto raw = s.regs[static_cast<std::size_t>(q.gp)];
    const double v = q.width == 4 ? static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(raw)))
                                  : static_cast<double>(static_cast<std::int64_t>(raw));
    return v / static_cast<double>(q.step);
}

struct Span {
    double low = INFINITY, high = -INFINITY;
    void add(double v) {
        low = std::min(low, v);
        high = std::max(high, v);
    }
    double width() const { return high >= low ? high - low : 0; }
};

// The pair's end for the snapshot at p: the next one (through_calls: the
// thread's next one in the loop, kGap if a hop on the way is too long, or
// the first of another thread). Returns the end's position.
std::size_t pair_end(const ProgressQuery& q, const Members& m, std::size_t p, bool& gap, LoopRate& out) {
    gap = false;
    std::size_t j = p + 1;
    if (!q.through_calls) return j;
    const auto& a = q.stream[p];
    while (j < q.stream.size() && q.stream[j].tid == a.tid && q.stream[j].pid == a.pid) {
        const double hop = static_cast<double>(q.stream[j].time_ns) - static_cast<double>(q.stream[j - 1].time_ns);
        ++out.hops;
        if (q.max_gap_ns > 0 && hop > q.max_gap_ns) {
            ++out.gap_hops;
            gap = true;
            return j;
        }
        if (m(q.stream[j])) return j;
        ++j;
    }
    return std::min(j, q.stream.size() - 1);
}

std::vector<Pair> collect_pairs(const ProgressQuery& q, const Members& m, LoopRate& out, Span& span) {
    PairCounts& counts = out.pairs;
    std::vector<Pair> pairs;
    each_position(q, m, [&](std::size_t p) {
        const auto& a = q.stream[p];
        if (!m(a)) return;
        span.add(position(q, a));
        if (p + 1 >= q.stream.size()) return;
        bool gap = false;
        const auto& b = q.stream[pair_end(q, m, p, gap, out)];
        double iterations = 0;
        Verdict v = gap ? Verdict::kGap : judge(q, m, a, b, q.through_calls ? 0 : q.max_gap_ns, iterations);
        count(counts, v);
        if (v == Verdict::kUse)
            pairs.push_back({iterations, static_cast<double>(b.time_ns) - static_cast<double>(a.time_ns)});
    });
    return pairs;
}

// A pair far faster than the others passed every check by chance (another
// invocation with the same invariants and a register further along): drop
// pairs above 8x the median rate. Slow pairs stay: a loop whose iterations
// take about a sampling period moves 0 or 1 between samples, and dropping
// the zeros would inflate its rate.
void trim(std::vector<Pair>& pairs, PairCounts& counts) {
    if (pairs.size() < kMinPairs) return;
    std::vector<double> rates;
    rates.reserve(pairs.size());
    for (const auto& p : pairs) rates.push_back(p.rate());
    std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
    const double median = rates[rates.size() / 2];
    if (median <= 0) return;
    auto out = std::remove_if(pairs.begin(), pairs.end(), [&](const Pair& p) { return p.rate() > 8 * median; });
    const auto dropped = static_cast<std::uint32_t>(pairs.end() - out);
    counts.outlier += dropped;
    counts.used -= dropped;
    pairs.erase(out, pairs.end());
}

// kMaxBackwardShare: pairs crossing a trip's end were told apart.
bool crossings_caught(const PairCounts& c) {
    return c.used >= kMinPairsToTrustCrossings &&
           static_cast<double>(c.wrong_direction) <= kMaxBackwardShare * static_cast<double>(c.used);
}

double median_iterations(const std::vector<Pair>& pairs) {
    std::vector<double> moved;
    moved.reserve(pairs.size());
    for (const auto& p : pairs) moved.push_back(p.iterations);
    const auto mid = moved.begin() + static_cast<std::ptrdiff_t>(moved.size() / 2);
    std::nth_element(moved.begin(), mid, moved.end());
    return *mid;
}

// Whether snapshot b of the same thread continues a's trip: the loop's
// invariants unchanged and the induction register moved forward (or not).
bool same_trip(const ProgressQuery& q, const store::RegisterSample& a, const store::RegisterSample& b) {
    for (int r : q.invariant)
        if (a.regs[static_cast<std::size_t>(r)] != b.regs[static_cast<std::size_t>(r)]) return false;
    const auto r = static_cast<std::size_t>(q.gp);
    const std::uint64_t raw = b.regs[r] - a.regs[r];
    const std::int64_t moved = q.width == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(raw))
                                            : static_cast<std::int64_t>(raw);
    return moved % q.step == 0 && moved / q.step >= 0;
}

}  // namespace

namespace {

// The calls' snapshots taken for the loop's, against the loop's own: no
// snapshot outside the loop and its calls is in one of its trips.
CalleeShare share_of_members(const ProgressQuery& q, const Members& m) {
    CalleeShare out;
    for (const auto& s : q.stream) {
        if (m.own(s)) ++out.in_loop;
        else if (m.in_callee(s)) ++out.in_callees;
    }
    if (out.in_loop == 0) {
        out.high = INFINITY;
        return out;
    }
    // The loop's time is its own samples' times (n + k) / n: as sure as a
    // count of n + k samples (Poisson, about 2 sigma), the calls' share
    // taking the uncertainty.
    const double n = static_cast<double>(out.in_loop), k = static_cast<double>(out.in_callees);
    out.away = out.in_callees;
    out.share = k / n;
    const double spread = 2 / std::sqrt(n + k);
    out.low = std::max(0.0, (1 + out.share) * (1 - spread) - 1);
    out.high = (1 + out.share) * (1 + spread) - 1;
    return out;
}

}  // namespace

CalleeShare callee_share(const ProgressQuery& q) {
    CalleeShare out;
    if (q.gp < 0 || q.gp >= 16 || q.step == 0 || !q.in_loop) return out;
    const Members members(q);
    if (members.with_callees()) return share_of_members(q, members);
    // Each run of snapshots outside the loop is walked once: from the
    // snapshot in the loop just before it.
    each_position(q, members, [&](std::size_t p) {
        const auto& a = q.stream[p];
        if (!members.own(a)) return;
        ++out.in_loop;
        std::size_t j = p + 1;
        while (j < q.stream.size() && q.stream[j].tid == a.tid && q.stream[j].pid == a.pid &&
               !members.own(q.stream[j]))
            ++j;
        if (j >= q.stream.size() || q.stream[j].tid != a.tid || q.stream[j].pid != a.pid) return;
        const auto between = static_cast<std::uint32_t>(j - p - 1);
        if (same_trip(q, a, q.stream[j])) {
            out.away += between;
            ++out.same_trip;
        } else {
            out.crossing += between;
        }
    });
    if (out.in_loop == 0) {
        out.high = INFINITY;
        return out;
    }
    const double n = static_cast<double>(out.in_loop), k = static_cast<double>(out.away);
    out.share = k / n;
    out.low = std::max(0.0, k - 2 * std::sqrt(k)) / n;
    const double all = k + static_cast<double>(out.crossing);
    out.high = (all + 1 + 2 * std::sqrt(all + 1)) / std::max(static_cast<double>(out.same_trip), 1.0);
    return out;
}

LoopRate loop_rate(const ProgressQuery& q) {
    LoopRate out;
    if (q.gp < 0 || q.gp >= 16 || q.step == 0 || !q.in_loop) return out;
    Span span;
    const Members members(q);
    std::vector<Pair> pairs = collect_pairs(q, members, out, span);
    trim(pairs, out.pairs);
    if (pairs.size() < kMinPairs) return out;
    const auto& c = out.pairs;
    const std::uint32_t considered = c.used + c.outlier + c.other_thread + c.left_loop + c.invariant_changed +
                                     c.wrong_direction + c.too_far + c.gap;
    const std::uint32_t stayed = c.used + c.outlier + c.gap;
    const bool long_hops = q.through_calls
                               ? static_cast<double>(out.gap_hops) > kMaxInterruptedShare * static_cast<double>(out.hops)
                               : static_cast<double>(c.gap) > kMaxInterruptedShare * static_cast<double>(stayed);
    if (long_hops) {
        out.interrupted = true;
        return out;
    }
    if (static_cast<double>(c.used) < kMinUsableShare * static_cast<double>(considered)) {
        out.few_usable = true;
        return out;
    }
    out.span_iterations = span.width();
    out.median_iterations = median_iterations(pairs);
    for (const auto& p : pairs) out.most_iterations = std::max(out.most_iterations, p.iterations);
    // A loop whose pairs all moved 0 (iterations about a period long) still
    // needs a span of several iterations to show its trips are long. A
    // pair that crosses a trip's end lands ahead of where it started only
    // when it ran more than a whole trip; where no pair used moved half a
    // span, the crossings all moved back and were refused (calls.c's
    // `caller` on a Zen 5 VM: pairs of 12.7 k iterations, a median 7.9
    // times under its trips of 100 k).
    // Pairs that moved nothing show no span either way: they keep the
    // median's rule.
    const bool crossings_backward = out.most_iterations > 0 && out.span_iterations >= kMinSpanPerMove &&
                                    out.most_iterations * kMaxMoveInSpan <= out.span_iterations;
    if (std::max(out.median_iterations, 1.0) * kMinSpanPerMove > out.span_iterations && !crossings_backward &&
        !crossings_caught(c)) {
        out.short_trips = true;
        return out;
    }
    for (const auto& p : pairs) {
        out.iterations += p.iterations;
        out.seconds += p.ns * 1e-9;
    }
    if (out.seconds <= 0) return out;
    out.iterations_per_ns = out.iterations / (out.seconds * 1e9);
    // Spread: eight interleaved groups of pairs, each its own rate.
    std::array<Pair, 8> groups{};
    for (std::size_t k = 0; k < pairs.size(); ++k) {
        groups[k % 8].iterations += pairs[k].iterations;
        groups[k % 8].ns += pairs[k].ns;
    }
    out.low = out.high = out.iterations_per_ns;
    for (const auto& g : groups) {
        if (g.ns <= 0) continue;
        out.low = std::min(out.low, g.rate());
        out.high = std::max(out.high, g.rate());
    }
    out.known = true;
    return out;
}

namespace {

// Sums for one least-squares slope, about an origin near the data (pointer
// registers are ~1e13 iterations from 0: squares there lose every digit).
struct SlopeSums {
    double n = 0, x = 0, y = 0, xx = 0, xy = 0, yy = 0;
    void add(double dx, double dy) {
        n += 1;
        x += dx;
        y += dy;
        xx += dx * dx;
        xy += dx * dy;
        yy += dy * dy;
    }
    double sxx() const { return n > 1 ? xx - x * x / n : 0; }
    double sxy() const { return n > 1 ? xy - x * y / n : 0; }
    double syy() const { return n > 1 ? yy - y * y / n : 0; }
};

struct NestedGroup {
    double x0 = 0, y0 = 0;               // the group's first snapshot
    std::array<SlopeSums, 8> parts;      // interleaved by the group's snapshot order
    std::size_t seen = 0;
    // The snapshots furthest back and furthest on in the outer loop, and
    // the inner register there: the chord over the trip.
    double x_low = INFINITY, y_at_low = 0, x_high = -INFINITY, y_at_high = 0;
};

// The pooled slope of `part` (or of all eight, part < 0) over the groups,
// and its standard error.
std::pair<double, double> pooled_slope(const std::map<std::vector<std::uint64_t>, NestedGroup>& groups, int part) {
    double sxx = 0, sxy = 0, syy = 0, n = 0;
    for (const auto& [key, g] : groups)
        for (int k = 0; k < 8; ++k) {
            if (part >= 0 && k != part) continue;
            const SlopeSums& s = g.parts[static_cast<std::size_t>(k)];
            sxx += s.sxx();
            sxy += s.sxy();
            syy += s.syy();
            n += s.n;
        }
    if (!(sxx > 0)) return {0, 0};
    const double slope = sxy / sxx;
    const double residual = std::max(0.0, syy - slope * sxy) / std::max(1.0, n - 2);
    return {slope, std::sqrt(residual / sxx)};
}

}  // namespace

std::uint32_t loop_entries_seen(const ProgressQuery& q) {
    std::uint32_t seen = 0;
    if (!q.in_loop) return seen;
    const auto visit = [&](std::size_t p) {
        if (p == 0 || p >= q.stream.size() || !in_own_code(q, q.stream[p])) return;
        const store::RegisterSample& before = q.stream[p - 1];
        if (before.tid == q.stream[p].tid && before.pid == q.stream[p].pid && !in_own_code(q, before)) ++seen;
    };
    if (q.candidates.empty()) {
        for (std::size_t p = 0; p < q.stream.size(); ++p) visit(p);
    } else {
        for (auto p : q.candidates) visit(p);
    }
    return seen;
}

NestedRatio nested_ratio(const ProgressQuery& outer, int inner_gp, std::int64_t inner_step, std::uint8_t inner_width) {
    NestedRatio out;
    if (outer.gp < 0 || outer.gp >= 16 || outer.step == 0 || inner_gp < 0 || inner_gp >= 16 || inner_step == 0 ||
        !outer.in_loop)
        return out;
    ProgressQuery inner = outer;
    inner.gp = inner_gp;
    inner.step = inner_step;
    inner.width = inner_width;
    std::map<std::vector<std::uint64_t>, NestedGroup> groups;
    const auto visit = [&](std::size_t p) {
        const auto& s = outer.stream[p];
        if (s.image != outer.image || !outer.in_loop(s.offset)) return;
        std::vector<std::uint64_t> key;
        for (int r : outer.invariant) key.push_back(s.regs[static_cast<std::size_t>(r)]);
        const double x = position(outer, s), y = position(inner, s);
        auto [it, fresh] = groups.try_emplace(std::move(key));
        NestedGroup& g = it->second;
        if (fresh) {
            g.x0 = x;
            g.y0 = y;
        }
        g.parts[g.seen++ % 8].add(x - g.x0, y - g.y0);
        if (x < g.x_low) std::tie(g.x_low, g.y_at_low) = std::pair{x, y};
        if (x > g.x_high) std::tie(g.x_high, g.y_at_high) = std::pair{x, y};
        ++out.snapshots;
    };
    if (outer.candidates.empty()) {
        for (std::size_t p = 0; p < outer.stream.size(); ++p) visit(p);
    } else {
        for (auto p : outer.candidates)
            if (p < outer.stream.size()) visit(p);
    }
    if (out.snapshots < kMinNestedSnapshots) return out;
    // The range: the eight groups' slopes and two standard errors of the
    // pooled one, whichever reach further.
    const auto [slope, error] = pooled_slope(groups, -1);
    out.per_outer = slope;
    out.low = slope - 2 * error;
    out.high = slope + 2 * error;
    for (int k = 0; k < 8; ++k) {
        const double part = pooled_slope(groups, k).first;
        out.low = std::min(out.low, part);
        out.high = std::max(out.high, part);
    }
    // A slope weighs the trip's middle; the count is its ends' difference
    // (a trip whose inner work is uneven along it bends the line): the
    // chord from its first to its last snapshot joins the range.
    double dx = 0, dy = 0;
    for (const auto& [key, g] : groups)
        if (g.x_high > g.x_low) {
            dx += g.x_high - g.x_low;
            dy += g.y_at_high - g.y_at_low;
        }
    if (dx > 0) {
        out.low = std::min(out.low, dy / dx);
        out.high = std::max(out.high, dy / dx);
    }
    out.known = out.per_outer > 0 && out.low > 0 && out.high <= kMaxNestedSpread * out.low;
    return out;
}

}  // namespace ecpi::analyze

namespace ecpi::analyze {

namespace {

std::uint64_t width_mask(std::uint8_t width) { return width >= 8 ? ~0ULL : (1ULL << (8 * width)) - 1; }

// Whether the compare, with the induction register at v, stays in the loop.
bool stays(const TripExit& exit, std::uint64_t v, std::uint64_t other) {
    const bool taken = exit.induction_first ? evaluate(exit.condition, v, other) : evaluate(exit.condition, other, v);
    return taken == exit.stay_when_taken;
}

}  // namespace

std::uint64_t iterations_left(const TripExit& exit, std::int64_t step, std::uint64_t at_compare, std::uint64_t other) {
    const std::uint8_t width = exit.condition.width;
    const std::uint64_t m = width_mask(width);
    const auto step_u = static_cast<std::uint64_t>(step);
    const auto at = [&](std::uint64_t k) { return (at_compare + k * step_u) & m; };
    const unsigned jcc = exit.condition.jcc;
    // `test r, r` compares r with 0; any other test is no bound.
    const bool self_test = exit.condition.is_test && exit.condition.a == exit.condition.b;
    if (exit.condition.is_test && !self_test) return 0;
    if (jcc == X86_INS_JE || jcc == X86_INS_JNE) {
        // An equality: the register meets the bound after (bound - v) / step
        // steps in its width, or never.
        if (!stays(exit, at(0), other)) return 1;
        const std::uint64_t b = self_test ? 0 : other & m;
        std::uint64_t distance = (b - (at_compare & m)) & m;
        std::uint64_t unit = step_u & m;
        if (step < 0) {
            distance = ((at_compare & m) - b) & m;
            unit = static_cast<std::uint64_t>(-step) & m;
        }
        if (unit == 0 || distance % unit != 0) return 0;
        const std::uint64_t k = distance / unit;
        if (k >= kMaxTrip || stays(exit, at(k), other)) return 0;
        return k + 1;
    }
    // An ordered compare (or a test) leaves once the register passes the
    // bound: the first k whose compare goes out, by doubling and halving.
    if (!stays(exit, at(0), other)) return 1;
    std::uint64_t lo = 0, hi = 1;  // stays at lo, to find: the first out in (lo, hi]
    while (stays(exit, at(hi), other)) {
        lo = hi;
        if (hi >= kMaxTrip) return 0;
        hi *= 2;
    }
    while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        (stays(exit, at(mid), other) ? lo : hi) = mid;
    }
    return hi + 1;
}

namespace {

struct TripGroup {
    std::uint64_t longest = 0;
    std::vector<std::uint64_t> left;   // per snapshot: iterations left
    std::uint32_t entries_seen = 0;    // its snapshots whose thread's previous one was outside the loop
};

}  // namespace

TripLength trip_length(const ProgressQuery& q, const TripExit& exit) {
    TripLength out;
    if (q.gp < 0 || q.gp >= 16 || q.step == 0 || !q.in_loop || !exit.after_step) return out;
    const int other_reg = exit.induction_first ? exit.condition.b : exit.condition.a;
    std::map<std::vector<std::uint64_t>, TripGroup> groups;
    const auto visit = [&](std::size_t p) {
        if (p >= q.stream.size() || !in_own_code(q, q.stream[p])) return;
        const store::RegisterSample& s = q.stream[p];
        std::uint64_t x = s.regs[static_cast<std::size_t>(q.gp)];
        if (!exit.after_step(s.offset)) x += static_cast<std::uint64_t>(q.step);
        const std::uint64_t other = other_reg < 0 ? static_cast<std::uint64_t>(exit.condition.immediate)
                                                  : s.regs[static_cast<std::size_t>(other_reg)];
        const std::uint64_t left = iterations_left(exit, q.step, x, other);
        if (left == 0) {
            ++out.unbounded;
            return;
        }
        ++out.snapshots;
        std::vector<std::uint64_t> key;
        for (int r : q.invariant) key.push_back(s.regs[static_cast<std::size_t>(r)]);
        TripGroup& g = groups[key];
        g.longest = std::max(g.longest, left);
        g.left.push_back(left);
        // Through calls, the thread's previous snapshot outside the loop's
        // code may be in a callee of this trip: no entry known.
        if (!q.through_calls && p > 0 && q.stream[p - 1].tid == s.tid && q.stream[p - 1].pid == s.pid &&
            !in_own_code(q, q.stream[p - 1]))
            ++g.entries_seen;
    };
    if (q.candidates.empty()) {
        for (std::size_t p = 0; p < q.stream.size(); ++p) visit(p);
    } else {
        for (auto p : q.candidates) visit(p);
    }
    // Entries per group go as its snapshots over its length (its time, at
    // one cost per iteration in every group): the mean length over entries
    // is the snapshots over the sum of those.
    double snapshots = 0, entries = 0;
    out.low = INFINITY;
    out.high = 0;
    for (const auto& [key, g] : groups) {
        const auto n = static_cast<std::uint32_t>(g.left.size());
        // Every group ran at least one trip, each of its entries seen a
        // trip at least as long as its furthest snapshot from the end.
        out.fewest += static_cast<double>(std::max(g.entries_seen, 1u)) * static_cast<double>(g.longest);
        if (n < kMinTripSnapshots) {
            out.high = std::max(out.high, 2.0 * static_cast<double>(g.longest));
            continue;
        }
        const double length = static_cast<double>(g.longest);
        const auto early = std::count_if(g.left.begin(), g.left.end(),
                                         [&](std::uint64_t left) { return 2 * static_cast<double>(left) > length; });
        if (static_cast<double>(early) < kMinEarlyShare * n) out.late = true;
        ++out.groups;
        out.in_groups += n;
        snapshots += n;
        entries += n / length;
        out.low = std::min(out.low, length);
        // A start none of n snapshots saw: the trips' first 3/n of their
        // time unseen happens 5% of the time.
        out.high = std::max(out.high, length / std::max(1 - 3.0 / n, 0.5));
    }
    // A snapshot whose register never meets the exit (a signal handler's
    // registers, say) is one in a hundred at most.
    if (out.groups == 0 || out.late || 100.0 * out.unbounded > out.snapshots + out.unbounded ||
        static_cast<double>(out.in_groups) < kMinGroupedShare * static_cast<double>(out.snapshots))
        return out;
    out.length = snapshots / entries;
    out.known = true;
    return out;
}

}  // namespace ecpi::analyze
