#include "ecpi/analyze/paths/probe_net.h"

#include <algorithm>
#include <cmath>

namespace ecpi::analyze {

// The calibration runs in ecpi, on a function called back to back; in the
// target the same traps run between other work, and cost more or less: on
// the VM of docs/PROBE.md, 3-14% of the probe's cost (a ~100 ns lookup's
// 400 ns probe read 55 ns high, a 5 us single-stepped probe 150 ns).
constexpr double kProbeTransferError = 0.10;

store::ProbeTimer::Net net_of_probe(const store::ProbeTimer& timer, const store::ProbeCost& cost,
                                    const std::string& timer_name, bool entry_stepped) {
    store::ProbeTimer::Net net;
    if (timer.timed_calls == 0) return net;
    const auto calls = static_cast<double>(timer.timed_calls);
    const std::uint64_t stepped = std::min(timer.nested_stepped, timer.nested_calls);
    const double emulated_per_call = static_cast<double>(timer.nested_calls - stepped) / calls;
    const double stepped_per_call = static_cast<double>(stepped) / calls;
    const store::ProbeCostKind& own = entry_stepped ? cost.stepped : cost.emulated;
    const bool cpu = timer_name == "cpu";
    const double self_ns = cpu ? own.self_cpu_ns : own.self_wall_ns;
    const double emulated_pair = cpu ? cost.emulated.pair_cpu_ns : cost.emulated.pair_ns;
    const double stepped_pair = cpu ? cost.stepped.pair_cpu_ns : cost.stepped.pair_ns;
    // Nested calls whose entries walked more (or fewer) frames than the
    // calibration's cost that much more (or less).
    const double frames_per_call = static_cast<double>(timer.nested_frames) / calls;
    const double extra_frames = frames_per_call - emulated_per_call * cost.emulated.pair_depth -
                                stepped_per_call * cost.stepped.pair_depth;
    const double frame_ns = cpu ? cost.frame_cpu_ns : cost.frame_ns;
    net.probe_ns = self_ns + emulated_per_call * emulated_pair + stepped_per_call * stepped_pair +
                   (timer.nested_calls ? extra_frames * frame_ns : 0.0);
    net.mean_ns = timer.mean_ns() - net.probe_ns;
    net.noise_ns = own.self_spread_ns + emulated_per_call * cost.emulated.pair_spread_ns +
                   stepped_per_call * cost.stepped.pair_spread_ns + 1.96 * own.self_sd_ns / std::sqrt(calls) +
                   kProbeTransferError * net.probe_ns;
    net.within_noise = net.mean_ns < 2 * net.noise_ns;
    net.low_ns = std::max(0.0, net.mean_ns - net.noise_ns);
    net.high_ns = std::max(0.0, net.mean_ns + net.noise_ns);
    return net;
}

void use_stack_samples(store::ProbeTimer::Net& net, const store::ProbePath& path, std::uint64_t period_ns) {
    net.from_samples = false;
    net.samples_mean_ns = 0;
    if (!net.within_noise || period_ns == 0 || path.calls == 0) return;
    net.from_samples = true;
    const double per_sample = static_cast<double>(period_ns) / static_cast<double>(path.calls);
    const double n = static_cast<double>(path.stack_samples);
    net.samples_mean_ns = n * per_sample;
    // A count of samples is Poisson: its square root has a standard
    // deviation of about 1/2 whatever its mean, so 1.96 of them either side
    // (n + 1 above: none counted still allows about one).
    net.samples_low_ns = std::pow(std::max(0.0, std::sqrt(n) - 0.98), 2) * per_sample;
    net.samples_high_ns = std::pow(std::sqrt(n + 1) + 0.98, 2) * per_sample;
}

void subtract_probe_cost(store::ProbeReport& report) {
    for (auto& f : report.functions)
        for (auto& p : f.paths)
            for (auto& [name, t] : p.timers) {
                t.net.reset();
                if (!report.probe_cost || (name != "wall" && name != "cpu")) continue;
                t.net = net_of_probe(t, *report.probe_cost, name, f.entry_stepped);
                // The samples count user-mode time on a CPU: the on-CPU
                // timer's figure; a wall time within the noise has no time off
                // the CPU that the probe's noise does not hide, so its figure
                // is the same (its range stays in low_ns..high_ns).
                use_stack_samples(*t.net, p, report.stack_sample_period_ns);
            }
}

}  // namespace ecpi::analyze
