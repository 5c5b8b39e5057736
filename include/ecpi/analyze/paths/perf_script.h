// Last-branch records (LBR) as `perf script -F ip,brstack` prints them, for
// VPP's acyclic paths timed by hardware (issue 19 item 3): between two
// consecutive records of one sample the program ran straight from the
// first's target to the second's source, in the second's cycle count.
//
// The text, one sample a line:
//   [COMM] [PID[/TID]]  IP  FROM/TO/PRED/TX/ABORT/CYCLES[/TYPE[/SPEC...]]  ...
// IP is the sample address in hex (perf prints it without "0x", right-aligned);
// each branch entry is FROM and TO in hex with "0x", then
//   PRED   "P" predicted, "M" mispredicted, "-" unknown; perf 6.x adds "N"
//          for a not-taken branch ("PN", "MN"),
//   TX     "X" inside a transaction, or "-",
//   ABORT  "A" a transaction abort, or "-",
//   CYCLES decimal cycles since the previous record (0 or "-": not recorded;
//          Intel records them from Skylake on, older cores print 0),
// and whatever perf versions add after it ("/COND", "/CALL/NON_SPEC_CORRECT_PATH",
// or an empty field: perf 6.1 prints "/19/ "), which is ignored. Entries are
// newest first. Lines starting with '#' and blank lines are ignored.
// Not supported: brstack printed with -F dso ("0x...(libc.so.6)/..."), whose
// DSO names may hold '/' and spaces; brstacksym.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::analyze {

struct BranchRecord {
    std::uint64_t from = 0;
    std::uint64_t to = 0;
    bool mispredicted = false;  // "M"
    bool predicted = false;     // "P" ("-": neither is known)
    bool in_tx = false;         // "X"
    bool abort = false;         // "A"
    std::uint32_t cycles = 0;   // 0: not recorded
};

struct LbrSample {
    std::uint64_t ip = 0;
    std::vector<BranchRecord> branches;  // as perf prints them: newest first
};

struct PerfScriptStats {
    std::uint64_t lines = 0;          // every line read, blank and comment lines included
    std::uint64_t samples = 0;        // lines handed to on_sample
    std::uint64_t branches = 0;       // branch records in those samples
    std::uint64_t skipped_lines = 0;  // malformed lines (each also counted in lines)
    std::vector<std::string> warnings;  // the first kMaxPerfScriptWarnings: "line N: why"
};

// Bounds on untrusted text. The deepest branch stacks are 64 entries (Arm
// BRBE; Intel's architectural LBR has 32), an entry prints in under 100
// bytes, so a real line is under 7 KB.
inline constexpr std::size_t kMaxPerfScriptLineBytes = 128 * 1024;
inline constexpr std::size_t kMaxBranchesPerSample = 1024;
inline constexpr std::size_t kMaxPerfScriptWarnings = 10;

// Parses the whole text, calling on_sample once per well-formed sample (the
// sample is reused between calls: copy what you keep). A malformed line
// (bad hex, a truncated entry, an unknown flag, more than
// kMaxBranchesPerSample entries, longer than kMaxPerfScriptLineBytes) is
// skipped, counted, and named with its line number in the warnings. The
// caller bounds the total size. Errors: a read error; no well-formed sample;
// samples without a single branch record (perf script without brstack, or a
// recording made without -b). Both errors name the format and the perf
// commands that make it.
[[nodiscard]] Result<PerfScriptStats> parse_perf_script_brstack(
    std::istream& in, const std::function<void(const LbrSample&)>& on_sample);

}  // namespace ecpi::analyze
