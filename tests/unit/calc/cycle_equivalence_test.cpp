// Cycle equivalence against a brute-force oracle: in a 2-edge-connected
// graph, edges a and b are cycle equivalent exactly when b is a bridge of the
// graph without a.
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <set>

#include "ecpi/analyze/calc/cycle_equivalence.h"

using namespace ecpi::analyze;

namespace {

// Bridges of the graph without edge `removed` (Tarjan low-link, recursive: the
// test graphs are small).
std::vector<bool> bridges_without(std::uint32_t nodes, const std::vector<UndirectedEdge>& edges, std::size_t removed) {
    std::vector<std::vector<std::pair<std::uint32_t, std::size_t>>> adj(nodes);
    for (std::size_t e = 0; e < edges.size(); ++e) {
        if (e == removed || edges[e].a == edges[e].b) continue;
        adj[edges[e].a].push_back({edges[e].b, e});
        adj[edges[e].b].push_back({edges[e].a, e});
    }
    std::vector<int> num(nodes, -1), low(nodes, 0);
    std::vector<bool> bridge(edges.size(), false);
    int counter = 0;
    std::function<void(std::uint32_t, std::size_t)> dfs = [&](std::uint32_t v, std::size_t via) {
        num[v] = low[v] = counter++;
        for (auto [w, e] : adj[v]) {
            if (e == via) continue;
            if (num[w] < 0) {
                dfs(w, e);
                low[v] = std::min(low[v], low[w]);
                if (low[w] > num[v]) bridge[e] = true;
            } else {
                low[v] = std::min(low[v], num[w]);
            }
        }
    };
    for (std::uint32_t v = 0; v < nodes; ++v)
        if (num[v] < 0) dfs(v, SIZE_MAX);
    return bridge;
}

void check_against_oracle(std::uint32_t nodes, const std::vector<UndirectedEdge>& edges) {
    auto cls = cycle_equivalence(nodes, edges, 0);
    REQUIRE(cls.size() == edges.size());
    for (std::size_t a = 0; a < edges.size(); ++a) {
        auto bridge = bridges_without(nodes, edges, a);
        for (std::size_t b = 0; b < edges.size(); ++b) {
            if (a == b) continue;
            bool equivalent = bridge[b];
            if ((cls[a] == cls[b]) != equivalent) {
                std::string g;
                for (auto& e : edges) g += std::to_string(e.a) + "-" + std::to_string(e.b) + " ";
                FAIL_CHECK("edges " << a << " and " << b << " in graph " << g << ": classes " << cls[a] << ","
                                    << cls[b] << " but oracle says " << equivalent);
                return;
            }
        }
    }
}

// A random strongly connected directed multigraph (a random Hamiltonian cycle
// plus random extra edges, self-loops and parallel edges included), whose
// undirected version is 2-edge-connected.
std::vector<UndirectedEdge> random_graph(std::mt19937& rng, std::uint32_t nodes, std::uint32_t extra) {
    std::vector<std::uint32_t> perm(nodes);
    for (std::uint32_t i = 0; i < nodes; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<UndirectedEdge> edges;
    for (std::uint32_t i = 0; i < nodes; ++i) edges.push_back({perm[i], perm[(i + 1) % nodes]});
    std::uniform_int_distribution<std::uint32_t> pick(0, nodes - 1);
    for (std::uint32_t k = 0; k < extra; ++k) {
        std::uint32_t a = pick(rng), b = pick(rng);
        edges.push_back({a, b});
        if (rng() % 10 == 0) edges.push_back({a, b});  // parallel edge
    }
    std::shuffle(edges.begin(), edges.end(), rng);
    return edges;
}

// A random CFG: blocks with fall-through, branches, returns, and some loops
// that never exit; built through the same entry points as real code.
Cfg random_cfg(std::mt19937& rng, std::uint32_t nb) {
    Cfg cfg;
    for (std::uint32_t b = 0; b < nb; ++b) {
        DecodedInstruction d;
        d.address = 0x1000 + b;
        d.size = 1;
        cfg.instructions.push_back(d);
        cfg.blocks.push_back({b, 1, {}, {}});
        cfg.instruction_block.push_back(b);
    }
    auto add = [&](std::uint32_t from, std::uint32_t to, EdgeKind k) {
        auto e = static_cast<std::uint32_t>(cfg.edges.size());
        cfg.edges.push_back({from, to, k});
        if (from != kEntryBlock) cfg.blocks[from].out_edges.push_back(e);
        if (to != kExitBlock) cfg.blocks[to].in_edges.push_back(e);
    };
    add(kEntryBlock, 0, EdgeKind::kEntry);
    std::uniform_int_distribution<std::uint32_t> pick(0, nb - 1);
    for (std::uint32_t b = 0; b < nb; ++b) {
        switch (rng() % 6) {
            case 0: add(b, kExitBlock, EdgeKind::kReturn); break;
            case 1: add(b, pick(rng), EdgeKind::kJump); break;
            case 2:
            case 3:
                add(b, pick(rng), EdgeKind::kBranch);
                add(b, b + 1 < nb ? b + 1 : kExitBlock, EdgeKind::kFallThrough);
                break;
            case 4:
                for (int k = 0; k < 3; ++k) add(b, pick(rng), EdgeKind::kSwitch);
                break;
            default: add(b, b + 1 < nb ? b + 1 : kExitBlock, EdgeKind::kFallThrough); break;
        }
    }
    return cfg;
}

}  // namespace

TEST_CASE("cycle equivalence: small hand-made graphs") {
    // A single cycle: every edge equivalent.
    check_against_oracle(3, {{0, 1}, {1, 2}, {2, 0}});
    // Diamond with back edge: the two arms are separate classes.
    check_against_oracle(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 0}});
    // Parallel edges and a self-loop.
    check_against_oracle(2, {{0, 1}, {0, 1}, {1, 1}, {1, 0}});
    auto cls = cycle_equivalence(3, std::vector<UndirectedEdge>{{0, 1}, {1, 2}, {2, 0}}, 0);
    CHECK(cls[0] == cls[1]);
    CHECK(cls[1] == cls[2]);
}

TEST_CASE("cycle equivalence agrees with the bridge oracle on thousands of random graphs") {
    std::mt19937 rng(12345);
    int graphs = 0;
    for (int round = 0; round < 3000; ++round) {
        std::uint32_t nodes = 2 + rng() % 14;
        std::uint32_t extra = rng() % (2 * nodes);
        auto edges = random_graph(rng, nodes, extra);
        check_against_oracle(nodes, edges);
        ++graphs;
    }
    CHECK(graphs == 3000);
}

TEST_CASE("frequency classes of random CFGs agree with the oracle on the split graph") {
    std::mt19937 rng(777);
    for (int round = 0; round < 2000; ++round) {
        auto cfg = random_cfg(rng, 1 + rng() % 12);
        connect_entry_and_exit(cfg);
        auto g = split_graph(cfg);
        check_against_oracle(g.nodes, g.edges);
        auto fc = frequency_classes(cfg);
        auto cls = cycle_equivalence(g.nodes, g.edges, 0);
        for (std::size_t b = 0; b < cfg.blocks.size(); ++b) CHECK(fc.block_class[b] == cls[b]);
    }
}

TEST_CASE("frequency classes: a loop body and its header, a diamond's arms") {
    // 0: entry/header; 1: body (cond back to 0 or fall to 2); 2: return.
    //   0 -> 1 (fall), 1 -> 0 (branch), 1 -> 2 (fall), 2 -> exit.
    Cfg cfg = [] {
        Cfg c;
        for (std::uint32_t b = 0; b < 3; ++b) {
            c.instructions.push_back({});
            c.blocks.push_back({b, 1, {}, {}});
            c.instruction_block.push_back(b);
        }
        auto add = [&](std::uint32_t from, std::uint32_t to, EdgeKind k) {
            auto e = static_cast<std::uint32_t>(c.edges.size());
            c.edges.push_back({from, to, k});
            if (from != kEntryBlock) c.blocks[from].out_edges.push_back(e);
            if (to != kExitBlock) c.blocks[to].in_edges.push_back(e);
        };
        add(kEntryBlock, 0, EdgeKind::kEntry);
        add(0, 1, EdgeKind::kFallThrough);
        add(1, 0, EdgeKind::kBranch);
        add(1, 2, EdgeKind::kFallThrough);
        add(2, kExitBlock, EdgeKind::kReturn);
        return c;
    }();
    auto fc = frequency_classes(cfg);
    CHECK(fc.block_class[0] == fc.block_class[1]);     // header and body run equally often
    CHECK(fc.block_class[0] != fc.block_class[2]);     // the exit block runs once per call
    CHECK(fc.block_class[2] == fc.invocation_class);
    CHECK(fc.edge_class[0] == fc.invocation_class);    // the entry edge
    CHECK(fc.edge_class[2] != fc.block_class[0]);      // the back edge runs once less
}

TEST_CASE("missing edges: every block and edge on its own") {
    Cfg cfg;
    for (std::uint32_t b = 0; b < 2; ++b) {
        cfg.instructions.push_back({});
        cfg.blocks.push_back({b, 1, {}, {}});
        cfg.instruction_block.push_back(b);
    }
    cfg.edges = {{kEntryBlock, 0, EdgeKind::kEntry}, {0, 1, EdgeKind::kFallThrough}, {1, kExitBlock, EdgeKind::kUnresolved}};
    cfg.missing_edges = true;
    auto fc = frequency_classes(cfg);
    CHECK_FALSE(fc.from_cycle_equivalence);
    std::set<std::uint32_t> all(fc.block_class.begin(), fc.block_class.end());
    all.insert(fc.edge_class.begin(), fc.edge_class.end());
    all.insert(fc.invocation_class);
    CHECK(all.size() == 6);
}
