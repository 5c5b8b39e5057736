// The kernel's own idle time per CPU, from /proc/stat (issue 30). A tickless
// idle CPU takes no timer samples, so idle counted from samples misses the
// CPUs that sleep longest; the kernel accounts their idle time exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::loader {

// Idle + iowait per CPU (index = CPU number) since boot, in ns, from the
// `cpuN` lines of a /proc/stat file (USER_HZ ticks: `ticks_per_second`).
[[nodiscard]] Result<std::vector<std::uint64_t>> read_idle_ns(const std::filesystem::path& proc_stat,
                                                             long ticks_per_second);

// The idle time that passes while a recording runs: start() reads the
// kernel's counters, pending() what has accumulated since the last settle()
// (or start), settle() marks that as written. Never started (a recording of
// chosen processes, where idle means nothing), pending() is empty; a read
// that fails is an error and leaves the epoch without idle time.
class KernelIdleClock {
public:
    explicit KernelIdleClock(std::filesystem::path proc_stat = "/proc/stat");
    [[nodiscard]] Result<void> start();
    [[nodiscard]] Result<std::vector<std::uint64_t>> pending();
    void settle();

private:
    std::filesystem::path proc_stat_;
    long ticks_per_second_ = 100;
    std::vector<std::uint64_t> settled_;  // counters at the last settle()
    std::vector<std::uint64_t> last_;     // counters at the last pending()
    bool started_ = false;
};

}  // namespace ecpi::loader
