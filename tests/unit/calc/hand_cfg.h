// A CFG made by hand for the estimator's tests: blocks of instructions with
// known best-case cycles M_i, edges, and samples S_i = F * M_i.
#pragma once

#include <cstdint>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/machine_model.h"

namespace ecpi::analyze::test {

struct HandCfg {
    Cfg cfg;
    std::vector<BlockTiming> timing;

    // A block of `m.size()` instructions with the given M_i (all known).
    std::uint32_t add_block(const std::vector<double>& m) {
        auto b = static_cast<std::uint32_t>(cfg.blocks.size());
        BasicBlock blk;
        blk.first = static_cast<std::uint32_t>(cfg.instructions.size());
        blk.count = static_cast<std::uint32_t>(m.size());
        for (std::size_t i = 0; i < m.size(); ++i) {
            DecodedInstruction d;
            d.address = 0x1000 + cfg.instructions.size() * 4;
            d.size = 4;
            cfg.instructions.push_back(d);
            cfg.instruction_block.push_back(b);
        }
        cfg.blocks.push_back(blk);
        BlockTiming t;
        t.m = m;
        t.known.assign(m.size(), true);
        for (std::uint32_t i = 0; i < m.size(); ++i) t.span_start.push_back(i);
        t.wait = m;
        for (double x : m) t.cycles += x;
        timing.push_back(t);
        return b;
    }
    void edge(std::uint32_t from, std::uint32_t to, EdgeKind kind = EdgeKind::kJump) {
        auto e = static_cast<std::uint32_t>(cfg.edges.size());
        cfg.edges.push_back({from, to, kind});
        if (from != kEntryBlock) cfg.blocks[from].out_edges.push_back(e);
        if (to != kExitBlock) cfg.blocks[to].in_edges.push_back(e);
    }
    // S_i = F * M_i for every instruction of block b (rounded).
    void sample(std::vector<std::uint64_t>& s, std::uint32_t b, double f) {
        for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i)
            s[cfg.blocks[b].first + i] = static_cast<std::uint64_t>(f * timing[b].m[i] + 0.5);
    }
};

}  // namespace ecpi::analyze::test
