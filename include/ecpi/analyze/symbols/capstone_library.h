// Capstone's functions, loaded when the first instruction is disassembled
// rather than by the dynamic loader at start-up (include/ecpi/shared_library.h):
// libcapstone carries every architecture's tables, 77,000 relocations on
// Debian 12, a few milliseconds of every ecpi command before main(), while
// only annotate, diff, calc and the path and layout reports disassemble
// (docs/CACHESIM.md, "Start-up").
#pragma once

#include <capstone/capstone.h>

#include <string>

#include "ecpi/result.h"

namespace ecpi::analyze {

struct CapstoneApi {
    decltype(&cs_open) open = nullptr;
    decltype(&cs_close) close = nullptr;
    decltype(&cs_option) option = nullptr;
    decltype(&cs_malloc) insn_malloc = nullptr;
    decltype(&cs_free) insn_free = nullptr;
    decltype(&cs_disasm_iter) disasm_iter = nullptr;
    decltype(&cs_reg_name) reg_name = nullptr;
    decltype(&cs_regs_access) regs_access = nullptr;
};

// The library ecpi was built against (its SONAME, found at configure time).
const char* capstone_soname();

// Capstone's functions from `soname`, loaded once per process; the error
// (errno ELIBACC) names the library and the package to install. Thread-safe.
[[nodiscard]] Result<const CapstoneApi*> capstone_api(const std::string& soname = capstone_soname());

}  // namespace ecpi::analyze
