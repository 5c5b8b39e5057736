// The kernel's idle time per CPU (contract in include/ecpi/loader/kernel_idle.h).
#include "ecpi/loader/kernel_idle.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ecpi/store/profile.h"

namespace ecpi::loader {

namespace {

constexpr std::uint64_t kNsPerSecond = 1'000'000'000;
// Columns of a cpuN line after its name: user nice system idle iowait ...
constexpr int kIdleColumn = 3;
constexpr int kIowaitColumn = 4;

}  // namespace

Result<std::vector<std::uint64_t>> read_idle_ns(const std::filesystem::path& proc_stat, long ticks_per_second) {
    if (ticks_per_second <= 0) return Error("USER_HZ is " + std::to_string(ticks_per_second) + "; cannot read idle time");
    std::ifstream in(proc_stat);
    if (!in) return Error::from_errno(errno, "reading " + proc_stat.string() + " for the kernel's idle time");
    std::vector<std::uint64_t> idle;
    std::string line;
    while (std::getline(in, line)) {
        // "cpu3 1234 0 567 89012 34 0 5 0 0 0"; the "cpu " line is the sum.
        if (line.size() < 5 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
        std::istringstream fields(line.substr(3));
        unsigned long cpu = 0;
        if (!(fields >> cpu) || cpu >= store::kMaxCpus) continue;
        std::uint64_t ticks = 0;
        std::uint64_t value = 0;
        for (int column = 0; column <= kIowaitColumn && fields >> value; ++column)
            if (column == kIdleColumn || column == kIowaitColumn) ticks += value;
        if (idle.size() <= cpu) idle.resize(cpu + 1, 0);
        // ticks * 1e9 / HZ without overflow for any uptime a machine reaches.
        const auto hz = static_cast<std::uint64_t>(ticks_per_second);
        idle[cpu] = ticks / hz * kNsPerSecond + ticks % hz * kNsPerSecond / hz;
    }
    if (idle.empty()) return Error(proc_stat.string() + " has no per-CPU lines; idle time is not known");
    return idle;
}

KernelIdleClock::KernelIdleClock(std::filesystem::path proc_stat)
    : proc_stat_(std::move(proc_stat)), ticks_per_second_(::sysconf(_SC_CLK_TCK)) {}

Result<void> KernelIdleClock::start() {
    ECPI_ASSIGN_OR_RETURN(settled_, read_idle_ns(proc_stat_, ticks_per_second_));
    last_ = settled_;
    started_ = true;
    return ok();
}

Result<std::vector<std::uint64_t>> KernelIdleClock::pending() {
    if (!started_) return std::vector<std::uint64_t>{};
    ECPI_ASSIGN_OR_RETURN(last_, read_idle_ns(proc_stat_, ticks_per_second_));
    std::vector<std::uint64_t> delta(last_.size(), 0);
    for (std::size_t cpu = 0; cpu < last_.size(); ++cpu) {
        // A CPU that came online since counts from now on; the kernel's
        // counters never go back, so a smaller value (a hotplugged CPU) adds 0.
        std::uint64_t before = cpu < settled_.size() ? settled_[cpu] : last_[cpu];
        delta[cpu] = last_[cpu] > before ? last_[cpu] - before : 0;
    }
    return delta;
}

void KernelIdleClock::settle() { settled_ = last_; }

}  // namespace ecpi::loader
