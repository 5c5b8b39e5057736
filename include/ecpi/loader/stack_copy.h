// The user-space half of the sampler's CFI walk (issue 29): a -g sample
// taken before its process's unwind tables reached the kernel carries a
// bounded copy of its stack (ECPI_RECORD_STACK_COPY); it is walked here,
// step for step as bpf/sampler.bpf.c's walk_step, once the tables load.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ecpi/loader/sampler.h"
#include "ecpi/loader/unwind_table.h"

namespace ecpi::loader {

// The row of a pc: 0 with `row` filled, or the ECPI_COUNTER_CUT_* reason
// (the sampler's unwind_lookup).
using UnwindRowLookup = std::function<std::uint32_t(std::uint64_t pc, UnwindRow& row)>;

struct CopyWalk {
    std::vector<std::uint64_t> ips;  // leaf first
    std::uint32_t end = 0;           // the ECPI_COUNTER_* the BPF walk would have counted
};

// Walks `copy` by its rows, frame pointers where a pc has none, reading only
// inside the copied bytes: at most ECPI_MAX_USER_STACK_DEPTH frames.
CopyWalk walk_stack_copy(const UserStackCopy& copy, const UnwindRowLookup& lookup);

}  // namespace ecpi::loader
