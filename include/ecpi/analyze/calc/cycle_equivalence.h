// Frequency equivalence (DCPI 6.1.2): blocks and edges of a CFG that are
// guaranteed to execute the same number of times, found with the linear-time
// cycle equivalence algorithm of Johnson, Pearson and Pingali ("The Program
// Structure Tree", PLDI 1994).
//
// Two edges of a strongly connected directed graph are cycle equivalent when
// every cycle through one passes through the other; JPP show this equals
// cycle equivalence in the undirected graph, where in a 2-edge-connected
// graph edges a and b are equivalent exactly when b is a bridge of the graph
// without a. Cycle-equivalent edges of the CFG made strongly connected carry
// the same execution count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"

namespace ecpi::analyze {

struct UndirectedEdge {
    std::uint32_t a = 0, b = 0;  // a == b is a self-loop; repeated pairs are parallel edges
};

// Cycle-equivalence class of each edge (dense ids from 0). O(nodes + edges):
// an explicit DFS stack, O(1) bracket-list operations. Self-loops get a class
// of their own. Meant for 2-edge-connected graphs (every edge on a cycle);
// a bridge gets a class of its own. Nodes not reachable from `root` are
// handled by further DFS trees.
std::vector<std::uint32_t> cycle_equivalence(std::uint32_t nodes, std::span<const UndirectedEdge> edges,
                                             std::uint32_t root = 0);

// The CFG made strongly connected, with every block split into an in-half
// and an out-half joined by a "block edge", so blocks and edges both get
// classes. Node 0 is the virtual start, node 1 the virtual exit; block b is
// nodes 2 + 2b (in) and 3 + 2b (out). Edge b is block b's block edge, edge
// blocks + e is CFG edge e (kEntryBlock is the start, kExitBlock the exit),
// and the last edge is the exit -> start edge closing every path.
struct SplitGraph {
    std::uint32_t nodes = 0;
    std::vector<UndirectedEdge> edges;  // a = tail, b = head of the directed edge
    std::uint32_t back_edge = 0;        // index of the exit -> start edge
};
SplitGraph split_graph(const Cfg& cfg);

struct FrequencyClasses {
    std::vector<std::uint32_t> block_class;  // per block
    std::vector<std::uint32_t> edge_class;   // per CFG edge
    std::uint32_t invocation_class = 0;      // class of the exit -> start edge: procedure invocations
    std::uint32_t count = 0;                 // number of classes
    bool from_cycle_equivalence = true;      // false: missing edges, every block and edge on its own
};

// DCPI 6.1.2: with missing edges every block and edge is its own class;
// otherwise the classes of the split graph's edges.
FrequencyClasses frequency_classes(const Cfg& cfg);

}  // namespace ecpi::analyze
