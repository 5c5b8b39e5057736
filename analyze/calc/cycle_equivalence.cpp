// Johnson-Pearson-Pingali cycle equivalence (PLDI 1994, Figure 4) and the
// split CFG it runs on (DCPI 6.1.2). See cycle_equivalence.h.
#include "ecpi/analyze/calc/cycle_equivalence.h"

#include <algorithm>
#include <limits>

namespace ecpi::analyze {

namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Brackets live in one pool (real backedges use their edge id, capping
// backedges are appended), linked into per-node lists. Every operation the
// algorithm needs is O(1): push on top, top, delete a known bracket, concat.
struct BracketPool {
    std::vector<std::uint32_t> prev, next;
    std::vector<std::uint32_t> recent_size;
    std::vector<std::uint32_t> recent_class;

    std::uint32_t add() {
        prev.push_back(kNone);
        next.push_back(kNone);
        recent_size.push_back(kNone);
        recent_class.push_back(kNone);
        return static_cast<std::uint32_t>(prev.size() - 1);
    }
};

struct BracketList {
    std::uint32_t head = kNone, tail = kNone, size = 0;

    void push(BracketPool& p, std::uint32_t x) {
        p.prev[x] = kNone;
        p.next[x] = head;
        if (head != kNone) p.prev[head] = x;
        head = x;
        if (tail == kNone) tail = x;
        ++size;
    }
    void erase(BracketPool& p, std::uint32_t x) {
        if (p.prev[x] != kNone) p.next[p.prev[x]] = p.next[x];
        else head = p.next[x];
        if (p.next[x] != kNone) p.prev[p.next[x]] = p.prev[x];
        else tail = p.prev[x];
        p.prev[x] = p.next[x] = kNone;
        --size;
    }
    // Appends `other` after this list's elements; `other` is left empty.
    void concat(BracketPool& p, BracketList& other) {
        if (other.head == kNone) return;
        if (head == kNone) {
            *this = other;
        } else {
            p.next[tail] = other.head;
            p.prev[other.head] = tail;
            tail = other.tail;
            size += other.size;
        }
        other = BracketList{};
    }
};

}  // namespace

std::vector<std::uint32_t> cycle_equivalence(std::uint32_t nodes, std::span<const UndirectedEdge> edges,
                                             std::uint32_t root) {
    const std::uint32_t m = static_cast<std::uint32_t>(edges.size());
    std::vector<std::uint32_t> cls(m, kNone);
    std::uint32_t next_class = 0;
    if (nodes == 0) return cls;

    // Adjacency in CSR form; self-loops are set aside (each is its own class).
    std::vector<std::uint32_t> degree(nodes + 1, 0);
    for (std::uint32_t e = 0; e < m; ++e) {
        if (edges[e].a == edges[e].b) {
            cls[e] = next_class++;
            continue;
        }
        ++degree[edges[e].a];
        ++degree[edges[e].b];
    }
    std::vector<std::uint32_t> adj_start(nodes + 1, 0);
    for (std::uint32_t v = 0; v < nodes; ++v) adj_start[v + 1] = adj_start[v] + degree[v];
    std::vector<std::uint32_t> adj(adj_start[nodes]);
    {
        std::vector<std::uint32_t> fill(adj_start.begin(), adj_start.end() - 1);
        for (std::uint32_t e = 0; e < m; ++e) {
            if (edges[e].a == edges[e].b) continue;
            adj[fill[edges[e].a]++] = e;
            adj[fill[edges[e].b]++] = e;
        }
    }
    auto other_end = [&](std::uint32_t e, std::uint32_t v) { return edges[e].a == v ? edges[e].b : edges[e].a; };

    // Undirected DFS with an explicit stack: preorder numbers, tree edges,
    // and each backedge's lower (descendant) and upper (ancestor) end.
    std::vector<std::uint32_t> dfsnum(nodes, kNone), order, parent_edge(nodes, kNone);
    order.reserve(nodes);
    std::vector<std::uint8_t> edge_seen(m, 0);
    // Backedges grouped by their lower and upper ends (linked lists through arrays).
    std::vector<std::uint32_t> from_head(nodes, kNone), to_head(nodes, kNone);
    std::vector<std::uint32_t> from_next(m, kNone), to_next(m, kNone), upper(m, kNone);
    std::vector<std::uint32_t> first_child(nodes, kNone), next_sibling(nodes, kNone);
    struct Frame {
        std::uint32_t node, next;
    };
    std::vector<Frame> stack;
    std::vector<std::uint32_t> roots;
    auto dfs_from = [&](std::uint32_t r) {
        roots.push_back(r);
        dfsnum[r] = static_cast<std::uint32_t>(order.size());
        order.push_back(r);
        stack.push_back({r, adj_start[r]});
        while (!stack.empty()) {
            Frame& f = stack.back();
            if (f.next == adj_start[f.node + 1]) {
                stack.pop_back();
                continue;
            }
            std::uint32_t e = adj[f.next++];
            if (edge_seen[e]) continue;
            edge_seen[e] = 1;
            std::uint32_t v = f.node;
            std::uint32_t w = other_end(e, v);
            if (dfsnum[w] == kNone) {
                parent_edge[w] = e;
                next_sibling[w] = first_child[v];
                first_child[v] = w;
                dfsnum[w] = static_cast<std::uint32_t>(order.size());
                order.push_back(w);
                stack.push_back({w, adj_start[w]});
            } else {
                // w is an ancestor of v (undirected DFS has no cross edges).
                upper[e] = w;
                from_next[e] = from_head[v];
                from_head[v] = e;
                to_next[e] = to_head[w];
                to_head[w] = e;
            }
        }
    };
    dfs_from(root < nodes ? root : 0);
    for (std::uint32_t v = 0; v < nodes; ++v)
        if (dfsnum[v] == kNone) dfs_from(v);

    BracketPool pool;
    pool.prev.reserve(m * 2);
    for (std::uint32_t e = 0; e < m; ++e) pool.add();  // bracket id e == edge e
    std::vector<BracketList> blist(nodes);
    std::vector<std::uint32_t> hi(nodes, kNone);
    // Capping backedges by their upper end.
    std::vector<std::uint32_t> cap_head(nodes, kNone);
    std::vector<std::uint32_t> cap_next;

    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const std::uint32_t n = *it;
        std::uint32_t hi0 = kNone;
        for (std::uint32_t e = from_head[n]; e != kNone; e = from_next[e]) hi0 = std::min(hi0, dfsnum[upper[e]]);
        std::uint32_t hi1 = kNone, hichild = kNone;
        for (std::uint32_t c = first_child[n]; c != kNone; c = next_sibling[c])
            if (hichild == kNone || hi[c] < hi1) {
                hi1 = hi[c];
                hichild = c;
            }
        hi[n] = std::min(hi0, hi1);
        std::uint32_t hi2 = kNone;
        for (std::uint32_t c = first_child[n]; c != kNone; c = next_sibling[c])
            if (c != hichild) hi2 = std::min(hi2, hi[c]);

        BracketList& bl = blist[n];
        for (std::uint32_t c = first_child[n]; c != kNone; c = next_sibling[c]) bl.concat(pool, blist[c]);
        for (std::uint32_t d = cap_head[n]; d != kNone; d = cap_next[d - m]) bl.erase(pool, d);
        for (std::uint32_t e = to_head[n]; e != kNone; e = to_next[e]) {
            bl.erase(pool, e);
            if (cls[e] == kNone) cls[e] = next_class++;
        }
        for (std::uint32_t e = from_head[n]; e != kNone; e = from_next[e]) bl.push(pool, e);
        if (hi2 < hi0) {
            // A capping backedge from n to the node numbered hi2.
            std::uint32_t d = pool.add();
            std::uint32_t target = order[hi2];
            cap_next.push_back(cap_head[target]);
            cap_head[target] = d;
            bl.push(pool, d);
        }
        std::uint32_t e = parent_edge[n];
        if (e == kNone) continue;  // a DFS root
        if (bl.size == 0) {
            cls[e] = next_class++;  // a bridge: on no cycle
            continue;
        }
        std::uint32_t b = bl.head;
        if (pool.recent_size[b] != bl.size) {
            pool.recent_size[b] = bl.size;
            pool.recent_class[b] = next_class++;
        }
        cls[e] = pool.recent_class[b];
        if (pool.recent_size[b] == 1 && b < m) cls[b] = cls[e];
    }
    // Renumber densely in edge order (capping-only classes leave gaps).
    std::vector<std::uint32_t> renumber(next_class, kNone);
    std::uint32_t dense = 0;
    for (auto& c : cls) {
        if (c == kNone) c = next_class;  // not reached (cannot happen): keep distinct below
        if (c < renumber.size()) {
            if (renumber[c] == kNone) renumber[c] = dense++;
            c = renumber[c];
        } else {
            c = dense++;
        }
    }
    return cls;
}

SplitGraph split_graph(const Cfg& cfg) {
    SplitGraph g;
    const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
    g.nodes = 2 + 2 * nb;
    g.edges.reserve(nb + cfg.edges.size() + 1);
    auto in_node = [](std::uint32_t b) { return 2 + 2 * b; };
    auto out_node = [](std::uint32_t b) { return 3 + 2 * b; };
    for (std::uint32_t b = 0; b < nb; ++b) g.edges.push_back({in_node(b), out_node(b)});
    for (const auto& e : cfg.edges) {
        std::uint32_t from = e.from == kEntryBlock ? 0 : out_node(e.from);
        std::uint32_t to = e.to == kExitBlock ? 1 : in_node(e.to);
        g.edges.push_back({from, to});
    }
    g.back_edge = static_cast<std::uint32_t>(g.edges.size());
    g.edges.push_back({1, 0});
    return g;
}

FrequencyClasses frequency_classes(const Cfg& cfg) {
    FrequencyClasses fc;
    const auto nb = static_cast<std::uint32_t>(cfg.blocks.size());
    const auto ne = static_cast<std::uint32_t>(cfg.edges.size());
    fc.block_class.resize(nb);
    fc.edge_class.resize(ne);
    if (cfg.missing_edges) {
        fc.from_cycle_equivalence = false;
        std::uint32_t c = 0;
        for (auto& x : fc.block_class) x = c++;
        for (auto& x : fc.edge_class) x = c++;
        fc.invocation_class = c++;
        fc.count = c;
        return fc;
    }
    SplitGraph g = split_graph(cfg);
    auto cls = cycle_equivalence(g.nodes, g.edges, 0);
    for (std::uint32_t b = 0; b < nb; ++b) fc.block_class[b] = cls[b];
    for (std::uint32_t e = 0; e < ne; ++e) fc.edge_class[e] = cls[nb + e];
    fc.invocation_class = cls[g.back_edge];
    fc.count = cls.empty() ? 0 : *std::max_element(cls.begin(), cls.end()) + 1;
    return fc;
}

}  // namespace ecpi::analyze
