// Johnson-Pearson-Pingali cycle equivalence (PLDI 1994, Figure 4) and the
// split CFG it runs on (DCPI 6.1.2). See cycle_equivalence.h.
#include "ecpi/analyze/calc/cycle_equivalence.h"

#include <algorithm>
#include <limits>
#include <utility>

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

// Adjacency in CSR form; self-loops are left out.
struct Adjacency {
    std::vector<std::uint32_t> start, list;
};

Adjacency adjacency(std::uint32_t nodes, std::span<const UndirectedEdge> edges) {
    const std::uint32_t m = static_cast<std::uint32_t>(edges.size());
    std::vector<std::uint32_t> degree(nodes + 1, 0);
    for (std::uint32_t e = 0; e < m; ++e) {
        if (edges[e].a == edges[e].b) continue;
        ++degree[edges[e].a];
        ++degree[edges[e].b];
    }
    Adjacency adj;
    adj.start.assign(nodes + 1, 0);
    for (std::uint32_t v = 0; v < nodes; ++v) adj.start[v + 1] = adj.start[v] + degree[v];
    adj.list.resize(adj.start[nodes]);
    std::vector<std::uint32_t> fill(adj.start.begin(), adj.start.end() - 1);
    for (std::uint32_t e = 0; e < m; ++e) {
        if (edges[e].a == edges[e].b) continue;
        adj.list[fill[edges[e].a]++] = e;
        adj.list[fill[edges[e].b]++] = e;
    }
    return adj;
}

// An undirected DFS forest: preorder numbers, tree edges, and each
// backedge's lower (descendant) and upper (ancestor) end.
struct DfsTree {
    std::vector<std::uint32_t> dfsnum, order, parent_edge;
    // Backedges grouped by their lower and upper ends (linked lists through arrays).
    std::vector<std::uint32_t> from_head, to_head;
    std::vector<std::uint32_t> from_next, to_next, upper;
    std::vector<std::uint32_t> first_child, next_sibling;

    DfsTree(std::uint32_t nodes, std::uint32_t m)
        : dfsnum(nodes, kNone), parent_edge(nodes, kNone), from_head(nodes, kNone), to_head(nodes, kNone),
          from_next(m, kNone), to_next(m, kNone), upper(m, kNone), first_child(nodes, kNone),
          next_sibling(nodes, kNone) {
        order.reserve(nodes);
    }
};

// The DFS from r, with an explicit stack, over edges not yet seen.
void dfs_from(DfsTree& t, std::span<const UndirectedEdge> edges, const Adjacency& adj, std::uint32_t r,
              std::vector<std::uint8_t>& edge_seen) {
    auto other_end = [&](std::uint32_t e, std::uint32_t v) { return edges[e].a == v ? edges[e].b : edges[e].a; };
    struct Frame {
        std::uint32_t node, next;
    };
    std::vector<Frame> stack;
    t.dfsnum[r] = static_cast<std::uint32_t>(t.order.size());
    t.order.push_back(r);
    stack.push_back({r, adj.start[r]});
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next == adj.start[f.node + 1]) {
            stack.pop_back();
            continue;
        }
        std::uint32_t e = adj.list[f.next++];
        if (edge_seen[e]) continue;
        edge_seen[e] = 1;
        std::uint32_t v = f.node;
        std::uint32_t w = other_end(e, v);
        if (t.dfsnum[w] == kNone) {
            t.parent_edge[w] = e;
            t.next_sibling[w] = t.first_child[v];
            t.first_child[v] = w;
            t.dfsnum[w] = static_cast<std::uint32_t>(t.order.size());
            t.order.push_back(w);
            stack.push_back({w, adj.start[w]});
        } else {
            // w is an ancestor of v (undirected DFS has no cross edges).
            t.upper[e] = w;
            t.from_next[e] = t.from_head[v];
            t.from_head[v] = e;
            t.to_next[e] = t.to_head[w];
            t.to_head[w] = e;
        }
    }
}

// The DFS forest from root, then from every node not reached yet.
DfsTree dfs_tree(std::uint32_t nodes, std::span<const UndirectedEdge> edges, const Adjacency& adj,
                 std::uint32_t root) {
    DfsTree t(nodes, static_cast<std::uint32_t>(edges.size()));
    std::vector<std::uint8_t> edge_seen(edges.size(), 0);
    dfs_from(t, edges, adj, root < nodes ? root : 0, edge_seen);
    for (std::uint32_t v = 0; v < nodes; ++v)
        if (t.dfsnum[v] == kNone) dfs_from(t, edges, adj, v, edge_seen);
    return t;
}

// Figure 4's bottom-up pass, nodes in reverse preorder: each node's bracket
// list is built from its children's, and the tree edge above it takes the
// class of its (top bracket, list size).
class BracketPass {
public:
    BracketPass(const DfsTree& tree, std::uint32_t nodes, std::uint32_t m, std::vector<std::uint32_t>& cls,
                std::uint32_t& next_class)
        : t_(tree), m_(m), cls_(cls), next_class_(next_class), blist_(nodes), hi_(nodes, kNone),
          cap_head_(nodes, kNone) {
        pool_.prev.reserve(m * 2);
        for (std::uint32_t e = 0; e < m; ++e) pool_.add();  // bracket id e == edge e
    }

    void run() {
        for (auto it = t_.order.rbegin(); it != t_.order.rend(); ++it) visit(*it);
    }

private:
    void visit(std::uint32_t n) {
        auto [hi0, hi2] = high_points(n);
        BracketList& bl = blist_[n];
        for (std::uint32_t c = t_.first_child[n]; c != kNone; c = t_.next_sibling[c]) bl.concat(pool_, blist_[c]);
        for (std::uint32_t d = cap_head_[n]; d != kNone; d = cap_next_[d - m_]) bl.erase(pool_, d);
        for (std::uint32_t e = t_.to_head[n]; e != kNone; e = t_.to_next[e]) {
            bl.erase(pool_, e);
            if (cls_[e] == kNone) cls_[e] = next_class_++;
        }
        for (std::uint32_t e = t_.from_head[n]; e != kNone; e = t_.from_next[e]) bl.push(pool_, e);
        if (hi2 < hi0) {
            // A capping backedge from n to the node numbered hi2.
            std::uint32_t d = pool_.add();
            std::uint32_t target = t_.order[hi2];
            cap_next_.push_back(cap_head_[target]);
            cap_head_[target] = d;
            bl.push(pool_, d);
        }
        classify_tree_edge(n, bl);
    }

    // hi0: the highest node n's own backedges reach; hi[n]: the highest
    // reached from n's subtree; hi2: the highest reached through any child
    // but the one reaching highest. Returns (hi0, hi2).
    std::pair<std::uint32_t, std::uint32_t> high_points(std::uint32_t n) {
        std::uint32_t hi0 = kNone;
        for (std::uint32_t e = t_.from_head[n]; e != kNone; e = t_.from_next[e]) hi0 = std::min(hi0, t_.dfsnum[t_.upper[e]]);
        std::uint32_t hi1 = kNone, hichild = kNone;
        for (std::uint32_t c = t_.first_child[n]; c != kNone; c = t_.next_sibling[c])
            if (hichild == kNone || hi_[c] < hi1) {
                hi1 = hi_[c];
                hichild = c;
            }
        hi_[n] = std::min(hi0, hi1);
        std::uint32_t hi2 = kNone;
        for (std::uint32_t c = t_.first_child[n]; c != kNone; c = t_.next_sibling[c])
            if (c != hichild) hi2 = std::min(hi2, hi_[c]);
        return {hi0, hi2};
    }

    void classify_tree_edge(std::uint32_t n, const BracketList& bl) {
        std::uint32_t e = t_.parent_edge[n];
        if (e == kNone) return;  // a DFS root
        if (bl.size == 0) {
            cls_[e] = next_class_++;  // a bridge: on no cycle
            return;
        }
        std::uint32_t b = bl.head;
        if (pool_.recent_size[b] != bl.size) {
            pool_.recent_size[b] = bl.size;
            pool_.recent_class[b] = next_class_++;
        }
        cls_[e] = pool_.recent_class[b];
        if (pool_.recent_size[b] == 1 && b < m_) cls_[b] = cls_[e];
    }

    const DfsTree& t_;
    const std::uint32_t m_;
    std::vector<std::uint32_t>& cls_;
    std::uint32_t& next_class_;
    BracketPool pool_;
    std::vector<BracketList> blist_;
    std::vector<std::uint32_t> hi_;
    // Capping backedges by their upper end.
    std::vector<std::uint32_t> cap_head_;
    std::vector<std::uint32_t> cap_next_;
};

// Renumbers densely in edge order (capping-only classes leave gaps).
void renumber_densely(std::vector<std::uint32_t>& cls, std::uint32_t next_class) {
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
}

}  // namespace

std::vector<std::uint32_t> cycle_equivalence(std::uint32_t nodes, std::span<const UndirectedEdge> edges,
                                             std::uint32_t root) {
    const std::uint32_t m = static_cast<std::uint32_t>(edges.size());
    std::vector<std::uint32_t> cls(m, kNone);
    std::uint32_t next_class = 0;
    if (nodes == 0) return cls;
    // Self-loops are set aside: each is its own class.
    for (std::uint32_t e = 0; e < m; ++e)
        if (edges[e].a == edges[e].b) cls[e] = next_class++;
    const Adjacency adj = adjacency(nodes, edges);
    const DfsTree tree = dfs_tree(nodes, edges, adj, root);
    BracketPass(tree, nodes, m, cls, next_class).run();
    renumber_densely(cls, next_class);
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
