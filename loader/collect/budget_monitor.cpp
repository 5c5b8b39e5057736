#include "budget_monitor.h"

#include <algorithm>

namespace ecpi::loader {

nlohmann::json sample_cost_json(const SampleCost& cost) {
    nlohmann::json per_cpu = nlohmann::json::array();
    for (const auto& c : cost.per_cpu)
        per_cpu.push_back({{"cpu", c.cpu},
                           {"median", c.median_us},
                           {"low", c.low_us},
                           {"high", c.high_us},
                           {"lower_bound", c.lower_us},
                           {"upper_bound", c.upper_us},
                           {"pairs", c.pairs},
                           {"calibration_hz", c.hz},
                           {"precise", c.precise},
                           {"seconds", c.seconds}});
    return {{"median", cost.median_us},  {"low", cost.low_us},           {"high", cost.high_us},
            {"upper_bound", cost.bound_us}, {"confidence", cost.confidence}, {"precise", cost.precise},
            {"pairs", cost.pairs},       {"calibration_hz", cost.hz},   {"cpu", cost.cpu},
            {"pooled", cost.pooled},
            {"earlier_calibrations", cost.earlier_calibrations}, {"earlier_pairs", cost.earlier_pairs},
            {"per_cpu", per_cpu}};
}

void BudgetMonitor::reset(const SampleCost& calibration, Clock::time_point now) {
    window_.clear();
    for (const auto& c : calibration.per_cpu)
        if (c.cpu == calibration.cpu) window_.assign(c.costs_us.begin(), c.costs_us.end());
    while (window_.size() > kBudgetWindowPairs) window_.pop_front();
    next_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kBudgetCheckSeconds));
}

void BudgetMonitor::start_if_due(Sampler& sampler, const std::vector<int>& cpus, Clock::time_point now) {
    if (running_.valid() || now < next_ || cpus.empty()) return;
    CalibrationOptions options;
    options.cpus = {cpus[next_cpu_++ % cpus.size()]};
    options.low_priority = true;
    options.per_cpu_event = false;
    options.max_seconds = 1.0;
    last_cpu_ = options.cpus[0];
    running_ = std::async(std::launch::async, [&sampler, options] { return measure_sample_cost(sampler, options); });
}

std::optional<BudgetCheck> BudgetMonitor::take_result(std::uint64_t hz, double budget_percent, std::size_t events,
                                                      std::string& error) {
    if (!running_.valid() || running_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
    auto measured = running_.get();
    next_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kBudgetCheckSeconds));
    if (!measured.ok()) {
        error = measured.error().message();
        return std::nullopt;
    }
    for (const auto& c : measured->per_cpu) window_.insert(window_.end(), c.costs_us.begin(), c.costs_us.end());
    while (window_.size() > kBudgetWindowPairs) window_.pop_front();
    const bool stepped = drop_pairs_before_step();
    ++checks_;
    last_unix_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    last_ = check_budget(std::vector<double>(window_.begin(), window_.end()), hz, budget_percent, events);
    // After a step the few pairs left may be too few for a bound: the next
    // check runs at once rather than a minute on, so a dearer cost lowers the
    // rate within seconds.
    if (stepped && !last_->cost_us.enough) next_ = Clock::now();
    if (last_->lower) ++lowered_;
    return last_;
}

bool BudgetMonitor::drop_pairs_before_step() {
    const std::size_t stale = pairs_before_cost_step(std::vector<double>(window_.begin(), window_.end()));
    if (stale == 0) return false;
    window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(stale));
    ++steps_;
    return true;
}

void BudgetMonitor::wait() {
    if (running_.valid()) running_.wait();
}

nlohmann::json BudgetMonitor::status_json() const {
    nlohmann::json j{{"interval_seconds", kBudgetCheckSeconds}, {"checks", checks_}, {"rate_lowered", lowered_},
                     {"cost_steps", steps_},
                     {"window_pairs", window_.size()}};
    if (!last_) return j;
    j["last_unix"] = last_unix_;
    j["last_cpu"] = last_cpu_;
    j["median"] = last_->cost_us.median;
    j["upper_bound"] = last_->cost_us.upper;
    j["estimated_overhead_percent"] = last_->overhead_percent;
    return j;
}

}  // namespace ecpi::loader
