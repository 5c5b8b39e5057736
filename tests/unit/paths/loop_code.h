// A loop's CFG shared by the paths tests: 0 entry, 1 header, 2 tests (taken
// 3, else 4), 3, 4 latch, 5 exit, with its blocks at `starts` (ascending).
#pragma once

#include <cstdint>
#include <vector>

#include "ecpi/analyze/paths/branch_paths.h"

namespace ecpi::analyze::test {

struct LoopCode : PathCodeMap {
    PathProcedure p;
    explicit LoopCode(const std::vector<std::uint64_t>& starts) {
        p.name = "loop";
        p.start = starts.front();
        p.end = starts.back() + 0x10;
        p.block_starts = starts;
        p.successors = {{1}, {2}, {3, 4}, {4}, {1, 5}, {}};
        p.loop_headers = {{}, {1}, {1}, {1}, {1}, {}};
        p.taken = {kNoBlock, kNoBlock, 3, kNoBlock, 1, kNoBlock};
        p.fall_through = {kNoBlock, kNoBlock, 4, kNoBlock, 5, kNoBlock};
        p.recorded.assign(6, true);
    }
    const PathProcedure* procedure_at(std::uint64_t a) override { return a >= p.start && a < p.end ? &p : nullptr; }
};

}  // namespace ecpi::analyze::test
