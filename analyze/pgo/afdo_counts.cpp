// The block counts an AutoFDO profile carries: layout's flow over calc's
// estimates, with calc's measurements held. Contracts:
// include/ecpi/analyze/pgo/afdo.h.
#include "ecpi/analyze/calc/flow_inference.h"
#include "ecpi/analyze/layout/layout.h"
#include "ecpi/analyze/pgo/afdo.h"

namespace ecpi::analyze {

namespace {

// The block a conditional jump closes (p.blocks.size() where none does).
std::uint32_t block_closed_by(const CalcProcedure& p, std::uint64_t jump) {
    for (std::uint32_t b = 0; b < p.blocks.size(); ++b) {
        const CalcBlock& blk = p.blocks[b];
        if (blk.count > 0 && blk.first + blk.count <= p.instructions.size() &&
            p.instructions[blk.first + blk.count - 1].address == jump)
            return b;
    }
    return static_cast<std::uint32_t>(p.blocks.size());
}

}  // namespace

FlowProblem afdo_flow_problem(const CalcProcedure& p, double period_cycles) {
    FlowProblem problem = layout_flow_problem(p, period_cycles);
    for (std::uint32_t b = 0; b < p.blocks.size() && b < problem.blocks.size(); ++b)
        if (p.blocks[b].confidence == Confidence::kMeasured && p.blocks[b].executions > 0)
            problem.blocks[b] = measured_count(p.blocks[b].executions);
    for (const CalcBranch& br : p.branches) {
        if (!br.anchored) continue;
        const std::uint32_t b = block_closed_by(p, br.jump);
        for (std::size_t e = 0; e < p.edges.size() && e < problem.edges.size(); ++e)
            if (p.edges[e].from == b && p.edges[e].to < p.blocks.size())
                problem.edges[e].count = measured_count(p.edges[e].executions);
    }
    return problem;
}

std::vector<double> afdo_block_counts(const CalcProcedure& p, double period_cycles) {
    return solve_flow(afdo_flow_problem(p, period_cycles)).blocks;
}

}  // namespace ecpi::analyze
