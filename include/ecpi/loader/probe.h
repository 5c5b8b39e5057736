// `ecpi probe`: targeted call-path profiling of named functions in a running
// process (iPath). Uprobes and uretprobes run probe.bpf.c; this session
// resolves patterns to symbols, attaches and detaches probes while the
// target runs, drains the ring buffer, joins exits to entries and
// aggregates per (function, call path), and symbolizes paths for reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/probe_results.h"

namespace ecpi::loader {

struct ProbeOptions {
    std::uint32_t pid = 0;                  // -p: an already running process
    std::vector<std::string> command;       // or -- COMMAND ARGS... (started stopped, released once probed)
    std::vector<std::string> patterns;      // --func, each must match at least one function
    std::vector<std::string> metrics = {"count", "wall", "cpu", "blocked"};
    std::uint32_t sample_n = 0;             // --sample 1/N: time one call in N (0: all)
    std::uint32_t sample_burst = 8;         // calls timed per burst
    bool dwarf = false;                     // --unwind dwarf: copy the user stack, unwind with CFI
    bool bare = false;                      // benchmarks: attach an empty BPF program (no counts, no paths)
    bool raw_times = false;                 // timers as measured: the probe's own cost is not measured nor subtracted
    std::uint32_t ringbuf_bytes = 32u << 20;
    // Timed sessions with the probe's cost subtracted also sample the
    // target's user-mode stacks every this many ns of its on-CPU time (0:
    // not): rows within the probe's noise take their on-CPU time from them.
    // Each sample's cost is in the target's probed times: at 100 us the
    // 10 us row of docs/PROBE.md read +15% (within 5% at 1 ms).
    std::uint64_t stack_sample_period_ns = 1000000;
    std::function<void(const std::string&)> log;  // progress and warnings, one line each
};

// What one `add` did.
struct ProbeAdded {
    std::vector<std::string> probes;    // "symbol (image+0xaddr)" of each function now probed
    std::vector<std::string> already;   // matched but probed already
};

class ProbeSession {
public:
    // Loads the BPF programs, starts or finds the target, attaches every
    // pattern (an error when one matches nothing: it names near matches),
    // and releases a started command.
    [[nodiscard]] static Result<ProbeSession> start(const ProbeOptions& options);
    ProbeSession(ProbeSession&&) noexcept;
    ProbeSession& operator=(ProbeSession&&) noexcept;
    ~ProbeSession();  // detaches every probe; a started command still running is killed

    // While the target runs (iPath 3: dynamic instrumentation).
    [[nodiscard]] Result<ProbeAdded> add(const std::string& pattern);
    // Detaches every probe the pattern selected (or that matches it); their
    // results are kept. Returns how many were removed.
    [[nodiscard]] Result<std::size_t> remove(const std::string& pattern);
    // One line per probe: "id pattern symbol image+0xaddr calls [removed]".
    std::vector<std::string> list() const;

    // Drains the side-band and the ring buffer and aggregates (bounded work).
    [[nodiscard]] Result<void> poll();
    // False once the target has exited (its results so far are kept).
    bool target_alive();
    // Exit status of a started command (128+signal when killed).
    std::optional<int> command_status() const;
    std::uint32_t pid() const;

    // The results so far, symbolized. `final` turns calls still open into
    // unmatched ones (their return never came).
    store::ProbeReport snapshot(bool final);

private:
    ProbeSession() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A command name as execvp would find it: a name with a slash as it is,
// else the first executable file of that name in a directory of PATH;
// nullopt when none is.
std::optional<std::filesystem::path> find_executable(const std::string& name);

}  // namespace ecpi::loader
