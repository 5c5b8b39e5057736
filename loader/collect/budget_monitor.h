// The overhead budget while the daemon runs (issue 35): every minute a short
// measurement of what a sample costs, on one CPU in turn, at idle priority
// on a thread of its own (it takes only time no program wants and never holds
// up the drain), folded into a window of the most recent pairs (those before a
// step up in the cost dropped); the session lowers the rate when the window's
// upper bound puts it over the budget.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/loader/budget.h"

namespace ecpi::loader {

inline constexpr double kBudgetCheckSeconds = 60;

// The calibration's summary for `ctl status`: median, quartiles, the upper
// bound the rate was chosen from, and each CPU measured.
nlohmann::json sample_cost_json(const SampleCost& cost);

class BudgetMonitor {
public:
    using Clock = std::chrono::steady_clock;
    BudgetMonitor() = default;
    BudgetMonitor(const BudgetMonitor&) = delete;
    BudgetMonitor& operator=(const BudgetMonitor&) = delete;
    ~BudgetMonitor() { wait(); }

    // A full calibration happened: its pairs on the CPU of the bound start
    // the window, and the next check is a minute away.
    void reset(const SampleCost& calibration, Clock::time_point now);
    // Starts a check on its own thread when one is due and none is running.
    void start_if_due(Sampler& sampler, const std::vector<int>& cpus, Clock::time_point now);
    // When a check has finished: its pairs join the window and the verdict
    // for the rate in force. `error` says why a check measured nothing.
    std::optional<BudgetCheck> take_result(std::uint64_t hz, double budget_percent, std::size_t events, std::string& error);
    // Waits for a running check (before a full calibration, at the end).
    void wait();
    nlohmann::json status_json() const;

private:
    // Drops the pairs older than a step up in the cost (pairs_before_cost_step); whether it did.
    bool drop_pairs_before_step();
    std::deque<double> window_;
    std::future<Result<SampleCost>> running_;
    Clock::time_point next_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kBudgetCheckSeconds));
    std::size_t next_cpu_ = 0;
    std::optional<BudgetCheck> last_;
    int last_cpu_ = -1;
    std::int64_t last_unix_ = 0;
    std::uint64_t checks_ = 0, lowered_ = 0, steps_ = 0;
};

}  // namespace ecpi::loader
