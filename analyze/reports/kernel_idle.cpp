// Idle from the kernel's accounting (contract in include/ecpi/analyze/reports/kernel_idle.h).
#include "ecpi/analyze/reports/kernel_idle.h"

#include <cstdio>

namespace ecpi::analyze {

namespace {

constexpr const char* kIdleSampledEvent = "cpu-clock";

}  // namespace

void idle_from_kernel(store::EpochContents& contents) {
    const auto& idle_ns = contents.meta.idle_ns_per_cpu;
    if (idle_ns.empty()) return;
    auto it = contents.meta.events.find(kIdleSampledEvent);
    if (it == contents.meta.events.end() || it->second.period == 0) return;
    store::EventMeta& event = it->second;
    event.idle_per_cpu.assign(idle_ns.size(), 0);
    event.idle = 0;
    for (std::size_t cpu = 0; cpu < idle_ns.size(); ++cpu) {
        event.idle_per_cpu[cpu] = (idle_ns[cpu] + event.period / 2) / event.period;
        event.idle += event.idle_per_cpu[cpu];
    }
}

std::string idle_time_per_cpu(const std::vector<std::uint64_t>& idle_ns_per_cpu) {
    std::string out;
    for (std::size_t cpu = 0; cpu < idle_ns_per_cpu.size(); ++cpu) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%scpu%zu %.2f s", out.empty() ? "" : ", ", cpu,
                      static_cast<double>(idle_ns_per_cpu[cpu]) / 1e9);
        out += buf;
    }
    return out;
}

}  // namespace ecpi::analyze
