// Flow inference as a minimum-cost circulation. See flow_inference.h.
#include "ecpi/analyze/calc/flow_inference.h"

#include "ecpi/analyze/calc/branch_odds.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>

namespace ecpi::analyze {

SoftCount free_count() { return SoftCount{}; }

SoftCount unseen_count(double cost) {
    SoftCount c;
    c.up = {FlowSegment{std::numeric_limits<double>::infinity(), std::max(cost, 0.0)}};
    return c;
}

namespace {

// The mean slope of S*f/E - S*ln(f) between a*E and b*E, per unit of f.
double poisson_slope(double estimate, double samples, double a, double b) {
    return samples / estimate * ((b - a) - std::log(b / a)) / (b - a);
}

void add_poisson_up(SoftCount& c, double center, double samples) {
    c.up.push_back({center, poisson_slope(center, samples, 1, 2)});
    c.up.push_back({2 * center, poisson_slope(center, samples, 2, 4)});
    c.up.push_back({std::numeric_limits<double>::infinity(), samples / center});
}

void add_poisson_down(SoftCount& c, double center, double samples) {
    // Stretches below the center, nearest first: [E/2, E], [E/4, E/2],
    // [E/16, E/4], [0, E/16] (the last at the slope at E/32: no samples
    // come from a block that hardly ran).
    c.down.push_back({center / 2, -poisson_slope(center, samples, 0.5, 1)});
    c.down.push_back({center / 4, -poisson_slope(center, samples, 0.25, 0.5)});
    c.down.push_back({center * 3 / 16, -poisson_slope(center, samples, 1.0 / 16, 0.25)});
    c.down.push_back({center / 16, samples / center * 31});
}

}  // namespace

SoftCount poisson_count(double estimate, double samples) {
    if (!(estimate > 0) || !(samples > 0)) return free_count();
    SoftCount c;
    c.estimate = estimate;
    c.up.clear();
    add_poisson_up(c, estimate, samples);
    add_poisson_down(c, estimate, samples);
    return c;
}

SoftCount poisson_range(double low, double high, double samples) {
    if (!(samples > 0) || !(high > 0)) return free_count();
    low = std::clamp(low, 0.0, high);
    SoftCount c;
    c.estimate = low;
    c.up.clear();
    if (high > low) c.up.push_back({high - low, 0});
    add_poisson_up(c, high, samples);
    if (low > 0) add_poisson_down(c, low, samples);
    return c;
}

SoftCount measured_count(double executions) {
    constexpr double kMeasuredCost = 1000;  // per execution, each way
    SoftCount c;
    c.estimate = std::max(executions, 0.0);
    c.up = {FlowSegment{std::numeric_limits<double>::infinity(), kMeasuredCost}};
    if (c.estimate > 0) c.down = {FlowSegment{c.estimate, kMeasuredCost}};
    return c;
}

// `c` with every execution below `floor` priced at kBelowFloorCost.
SoftCount floored(SoftCount c, double floor) {
    if (!(floor > 0) || !(c.estimate > floor)) return c;
    std::vector<FlowSegment> down;
    double left = c.estimate - floor;  // executions from the point down to the floor
    for (const FlowSegment& s : c.down) {
        if (left <= 0) break;
        down.push_back({std::min(s.length, left), s.cost});
        left -= s.length;
    }
    if (left > 0) down.push_back({left, down.empty() ? 0 : down.back().cost});
    down.push_back({floor, std::max(kBelowFloorCost, down.empty() ? 0 : down.back().cost)});  // convex
    c.down = std::move(down);
    return c;
}

// A case of a jump table whose index is loaded just before it
// (switch_undecided): a snapshot there stands for the wait after the case
// before, so a case's share of the snapshots is a share of time after its
// predecessors, not of executions (a compare with memory's flags likewise:
// the wait for its load). Over four harness recordings (interp's
// 14 cases, jsonq's parse_value's 8) the executed share of a case some
// snapshot chose ran from 0.33x to 150x its snapshots' share: a case that
// follows a slow one is seen more often than it runs, one that follows a
// fast one hardly at all, so the shares give no point and no ceiling. They
// do give a floor: each case ran at least a quarter of the lower end of its
// share (Wilson's interval, two standard errors); at half (with floors
// that then stacked over the flow's rounds) interp's cases were floored
// above their truth in one recording of four (its `run` 68.5% -> 3.5%
// within 10%). Without a floor the flow gave
// jsonq's two commonest token kinds, seen by 36% and 19% of the snapshots
// and sampled 626 and 2,038 times, 0.02 M and 0.04 M executions against
// callgrind's 55 M and 46 M (their samples, ranged over a call and a load,
// weighed nearly nothing).
constexpr double kTimedShareFactor = 4;

double timed_share_floor(std::uint32_t chose, std::uint32_t total) {
    if (chose == 0 || total < chose) return 0;
    return share_interval(chose, total).first / kTimedShareFactor;
}

// `c` with every execution below `floor` priced at kBelowFloorCost, where
// `c` itself asks for less (a free edge: no other evidence).
SoftCount with_floor(SoftCount c, double floor) {
    if (!(floor > 0)) return c;
    if (c.estimate > floor) return floored(std::move(c), floor);
    c.estimate = floor;
    c.down = {FlowSegment{floor, kBelowFloorCost}};
    return c;
}

double samples_per_execution(double best_cycles, double period_cycles) {
    const double cycles = best_cycles > 0 ? best_cycles : 1;
    return period_cycles > 0 ? cycles / period_cycles : 1e-9 * cycles;
}

// A ranged block that is one side of a conditional jump: above what its
// samples guarantee, each execution costs this share of an unsampled
// block's (its best-case cycles over the period). A rare path that stalls
// holds many samples that say little of its count (DCPI 6.1); free within
// its range it would take all of its predecessor's flow from an unsampled
// common path (the handlers workload, free within the whole range: 84-86%
// of exact's gain, against 94% with this rule; at the full unsampled price
// SQLite 78% on three recordings, at a quarter 81%; docs/LAYOUT.md).
constexpr double kRangedAboveGuaranteed = 0.25;

namespace {

// A side of a conditional jump that calc left a point (class_ranges ranges
// no class of fewer than 8 samples) whose one or two samples all sit just
// after a call: they hold the call's return and the callee's last waits as
// much as the block's own cycles, so its count, samples over its best-case
// cycles, is only an upper end (DCPI 6: samples over best-case cycles
// overstates a rarely run block that stalls). Its samples' own error
// (S +- 2 sqrt(S), as class_ranges) reaches 0 for two samples or fewer.
// jsonq's arena_alloc: one sample after the growth path's malloc returned,
// over 8 best-case cycles, made 51,910 executions of a path that ran 274
// times, and the flow kept half of them (issue 36).
constexpr double kFewSamples = 3;

}  // namespace

EvidenceRange few_samples_range(const BlockEvidence& b) {
    if (!b.alternative || !b.after_call || b.ranged || !(b.samples > 0) || b.samples >= kFewSamples ||
        !(b.executions > 0))
        return {};
    return {true, std::max(b.samples - 2 * std::sqrt(b.samples), 0.0) / b.samples * b.executions, b.executions};
}

SoftCount block_evidence(const BlockEvidence& b, double period_cycles) {
    if (!(b.samples > 0) || !(b.executions > 0))
        return unseen_count(samples_per_execution(b.best_cycles, period_cycles));
    double low = b.executions_min, high = b.executions_max;
    if (const EvidenceRange few = few_samples_range(b); few.ranged) {
        low = few.low;
        high = few.high;
    } else if (!b.ranged || !b.alternative || b.executions_max <= b.executions_min) {
        // A range outside a branch (an entry block that may stall): calc's
        // point, which a range would let fall to its floor for free.
        return poisson_count(b.executions, b.samples);
    }
    SoftCount c = poisson_range(low, high, b.samples);
    c.up.front().cost = kRangedAboveGuaranteed * samples_per_execution(b.best_cycles, period_cycles);
    for (std::size_t k = 1; k < c.up.size(); ++k) c.up[k].cost = std::max(c.up[k].cost, c.up[k - 1].cost);
    return c;
}

namespace {

constexpr std::int64_t kUnbounded = std::int64_t{1} << 52;

std::int64_t whole(double v) {
    if (!(v > 0)) return 0;
    if (v >= static_cast<double>(kUnbounded)) return kUnbounded;
    return std::llround(v);
}

// The residual network of the circulation, with successive shortest paths
// (Dijkstra on reduced costs; every cost starts non-negative).
class Network {
public:
    explicit Network(std::size_t nodes) : out_(nodes) {}

    std::size_t add_arc(std::uint32_t from, std::uint32_t to, std::int64_t cap, double cost) {
        const std::size_t a = arcs_.size();
        arcs_.push_back({to, cap, cost, cap});
        arcs_.push_back({from, 0, -cost, 0});
        out_[from].push_back(a);
        out_[to].push_back(a + 1);
        return a;
    }

    std::int64_t flow(std::size_t arc) const { return arcs_[arc].initial - arcs_[arc].cap; }

    // Sends what `source` can send to `sink` at least cost.
    void run(std::uint32_t source, std::uint32_t sink) {
        const std::size_t n = out_.size();
        std::vector<double> potential(n, 0), dist(n);
        std::vector<std::size_t> via(n);
        std::vector<bool> done(n);
        using Item = std::pair<double, std::uint32_t>;
        for (;;) {
            std::fill(dist.begin(), dist.end(), std::numeric_limits<double>::infinity());
            std::fill(done.begin(), done.end(), false);
            std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
            dist[source] = 0;
            queue.push({0, source});
            while (!queue.empty()) {
                const auto [d, u] = queue.top();
                queue.pop();
                if (done[u]) continue;
                done[u] = true;
                if (u == sink) break;
                for (std::size_t a : out_[u]) {
                    const Arc& arc = arcs_[a];
                    if (arc.cap <= 0) continue;
                    const double reduced = std::max(0.0, arc.cost + potential[u] - potential[arc.to]);
                    if (d + reduced < dist[arc.to]) {
                        dist[arc.to] = d + reduced;
                        via[arc.to] = a;
                        queue.push({dist[arc.to], arc.to});
                    }
                }
            }
            if (!done[sink]) return;
            // Nodes past the sink's distance keep reduced costs >= 0 with
            // min(dist, dist[sink]).
            for (std::size_t v = 0; v < n; ++v) potential[v] += std::min(dist[v], dist[sink]);
            std::int64_t push = kUnbounded;
            for (std::uint32_t v = sink; v != source; v = arcs_[via[v] ^ 1].to) push = std::min(push, arcs_[via[v]].cap);
            for (std::uint32_t v = sink; v != source; v = arcs_[via[v] ^ 1].to) {
                arcs_[via[v]].cap -= push;
                arcs_[via[v] ^ 1].cap += push;
            }
        }
    }

private:
    struct Arc {
        std::uint32_t to;
        std::int64_t cap;
        double cost;
        std::int64_t initial;
    };
    std::vector<Arc> arcs_;
    std::vector<std::vector<std::size_t>> out_;
};

// One count of the problem as arcs from `tail` to `head`: its estimate sent
// ahead (the excess at head, the deficit at tail, which the circulation
// settles), its `up` stretches forward, its `down` stretches backward.
struct Placed {
    std::int64_t estimate = 0;
    std::vector<std::pair<std::size_t, double>> up, down;  // arc, cost per unit
};

Placed place(Network& net, std::vector<std::int64_t>& excess, std::uint32_t tail, std::uint32_t head,
             const SoftCount& c) {
    Placed p;
    p.estimate = whole(c.estimate);
    excess[head] += p.estimate;
    excess[tail] -= p.estimate;
    for (const FlowSegment& s : c.up) {
        const std::int64_t cap = std::isinf(s.length) ? kUnbounded : whole(s.length);
        if (cap > 0) p.up.push_back({net.add_arc(tail, head, cap, std::max(s.cost, 0.0)), std::max(s.cost, 0.0)});
    }
    // Lowering may take the count to 0 and no further; the last stretch
    // takes what rounding left over.
    std::int64_t left = p.estimate;
    for (std::size_t k = 0; k < c.down.size() && left > 0; ++k) {
        const std::int64_t cap = k + 1 == c.down.size() ? left : std::min(left, whole(c.down[k].length));
        if (cap <= 0) continue;
        const double cost = std::max(c.down[k].cost, 0.0);
        p.down.push_back({net.add_arc(head, tail, cap, cost), cost});
        left -= cap;
    }
    if (left > 0) p.down.push_back({net.add_arc(head, tail, left, 0), 0.0});
    return p;
}

}  // namespace

FlowSolution solve_flow(const FlowProblem& problem) {
    const auto n = static_cast<std::uint32_t>(problem.blocks.size());
    // Block b is an arc from node 2b (its entry) to 2b + 1 (its exit).
    const std::uint32_t source = 2 * n, sink = 2 * n + 1, super_source = 2 * n + 2, super_sink = 2 * n + 3;
    Network net(2 * n + 4);
    std::vector<std::int64_t> excess(2 * n + 4, 0);
    std::vector<Placed> blocks, edges;
    for (std::uint32_t b = 0; b < n; ++b) blocks.push_back(place(net, excess, 2 * b, 2 * b + 1, problem.blocks[b]));
    std::vector<bool> valid;
    for (const FlowArc& e : problem.edges) {
        const bool ok = (e.from == kFlowSource || e.from < n) && (e.to == kFlowSink || e.to < n);
        valid.push_back(ok);
        if (!ok) {
            edges.emplace_back();
            continue;
        }
        const std::uint32_t tail = e.from == kFlowSource ? source : 2 * e.from + 1;
        const std::uint32_t head = e.to == kFlowSink ? sink : 2 * e.to;
        edges.push_back(place(net, excess, tail, head, e.count));
    }
    // What leaves the procedure enters it again: a circulation.
    net.add_arc(sink, source, kUnbounded, 0);
    for (std::uint32_t v = 0; v < super_source; ++v) {
        if (excess[v] > 0) net.add_arc(super_source, v, excess[v], 0);
        if (excess[v] < 0) net.add_arc(v, super_sink, -excess[v], 0);
    }
    net.run(super_source, super_sink);

    FlowSolution out;
    const auto settle = [&](const Placed& p) {
        double count = static_cast<double>(p.estimate);
        for (const auto& [arc, cost] : p.up) {
            count += static_cast<double>(net.flow(arc));
            out.cost += static_cast<double>(net.flow(arc)) * cost;
        }
        for (const auto& [arc, cost] : p.down) {
            count -= static_cast<double>(net.flow(arc));
            out.cost += static_cast<double>(net.flow(arc)) * cost;
        }
        return count;
    };
    for (const Placed& p : blocks) out.blocks.push_back(settle(p));
    for (std::size_t k = 0; k < edges.size(); ++k) out.edges.push_back(valid[k] ? settle(edges[k]) : 0.0);
    return out;
}

}  // namespace ecpi::analyze
