// The overhead budget while the session runs (issue 35): the rate changes a
// full calibration or the check while running decide, and the check itself.
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "ecpi/loader/budget_history.h"
#include "ecpi/terminal_text.h"

#include "recorder_session.h"

namespace ecpi::loader::detail {

// Samples at `hz` from now on, in a new epoch (counts of the old period stay
// in the old one); the new epoch's name.
Result<std::string> Session::apply_rate(std::uint64_t hz) {
    ECPI_ASSIGN_OR_RETURN(std::string epoch, start_new_epoch());
    set_frequency(hz);
    for (std::size_t i = 0; i < events_.size(); ++i)
        for (int fd : sampler_->event_fds(static_cast<std::uint16_t>(i)))
            if (auto r = set_period(fd, mean_periods_[i]); !r.ok()) warn_once("cannot change the sampling rate: " + r.error().message());
    measure_sampled_clock();
    return epoch;
}

namespace {

// Whose pairs the calibration's bound is of.
std::string whose_bound(const SampleCost& cost) {
    if (cost.pooled) return "the CPUs agree: the bound is of all their pairs";
    return "the bound is CPU " + std::to_string(cost.cpu) + "'s";
}

}  // namespace

// What a calibration's pairs measured, for the history's key: the handler's
// code and what it records, the calibration's rate and runs, the CPUs, the
// kernel.
std::string Session::calibration_key(const SampleCost& fresh, const CalibrationOptions& calibration) const {
    auto stats = sampler_->prog_stats();
    utsname uts{};
    ::uname(&uts);
    return ecpi::loader::calibration_key(
        "handler=" + (stats.ok() ? stats->tag : std::string("?")) + " stacks=" + std::to_string(options_.call_graph) +
        " fp=" + std::to_string(options_.call_graph_fp) + " registers=" + std::to_string(options_.registers_every) +
        " filtered=" + std::to_string(!options_.pids.empty() || !options_.command.empty()) +
        " events=" + std::to_string(events_.size()) + " hz=" + std::to_string(fresh.hz) +
        " run_ms=" + std::to_string(static_cast<long>(calibration.run_seconds * 1000)) +
        " cpus=" + std::to_string(cpus_.size()) + " kernel=" + uts.release);
}

// Issue 35: the fresh calibration pooled with the last few of this boot (a
// restarted daemon no longer re-derives its rate from one calibration alone), and added
// to them. Without the history the fresh calibration stands alone, said once.
SampleCost Session::with_calibration_history(const SampleCost& fresh, const CalibrationOptions& calibration) {
    if (options_.calibration_history.empty()) return fresh;
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string key = calibration_key(fresh, calibration);
    auto all = read_calibration_history(options_.calibration_history);
    if (!all.ok()) {  // one line: adding to the file would fail for the same cause
        warn_once("the overhead budget's calibration history is not used (" + all.error().message() +
                  "); remove the file, or give --calibration-history none");
        return fresh;
    }
    SampleCost pooled = pool_with_earlier(fresh, matching_calibrations(*all, key, now), calibration);
    if (auto saved = append_calibration(options_.calibration_history, calibration_record(fresh, key, now), now); !saved.ok())
        warn_once("the overhead budget's calibration is not kept for the next (" + saved.error().message() + ")");
    return pooled;
}

// One line for the calibration, a second where the CPUs measured differ
// (one's median outside another's interval), and a warning where even the
// lowest rate is over the budget.
void Session::log_calibration(const SampleCost& cost, double budget) {
    char line[480];
    std::snprintf(line, sizeof line,
                  "overhead budget %.2f%%: one sample costs at most %.1f us (%.0f%% upper bound; median %.1f us, quartiles "
                  "%.1f-%.1f us, %d pairs on %zu CPU%s at %llu Hz, %s; %s); %llu Hz per CPU fits, an estimated %.2f%%",
                  budget, cost.bound_us, cost.confidence * 100, cost.median_us, cost.low_us, cost.high_us, cost.pairs,
                  cost.per_cpu.size(), cost.per_cpu.size() == 1 ? "" : "s", static_cast<unsigned long long>(cost.hz),
                  cost.precise ? "within 10%" : "short of 10% in the time allowed", whose_bound(cost).c_str(),
                  static_cast<unsigned long long>(rate_choice_.hz), rate_choice_.overhead_percent);
    log(line);
    if (cost.earlier_calibrations > 0)
        log("the calibration's pairs are pooled with those of " + std::to_string(cost.earlier_calibrations) +
            " earlier calibration" + (cost.earlier_calibrations == 1 ? "" : "s") + " of this boot (" +
            std::to_string(cost.earlier_pairs) + " of the " + std::to_string(cost.pairs) + " pairs; " +
            escape_for_terminal(options_.calibration_history.string()) + ")");
    if (!cpus_agree(cost.per_cpu)) {
        std::string per_cpu = "the CPUs differ:";
        for (const auto& c : cost.per_cpu) {
            std::snprintf(line, sizeof line, " CPU %d median %.1f us [%.1f-%.1f],", c.cpu, c.median_us, c.lower_us, c.upper_us);
            per_cpu += line;
        }
        per_cpu.pop_back();
        log(per_cpu + "; the rate is chosen for the dearest");
    }
    if (!rate_choice_.floor_over_budget) return;
    std::snprintf(line, sizeof line,
                  "even the lowest rate, %llu Hz, costs an estimated %.2f%%, over the budget of %.2f%%: sampling at "
                  "%llu Hz anyway (raise --overhead-budget, or force a rate with -F)",
                  static_cast<unsigned long long>(kBudgetMinHz), rate_choice_.overhead_percent, budget,
                  static_cast<unsigned long long>(kBudgetMinHz));
    warn_once(line);
}

// Every minute the monitor measures a sample's cost again at idle priority;
// when the recent pairs' upper bound puts the rate in force over the budget
// (by more than kBudgetDriftAllowance), the rate is lowered to what fits,
// logged on one line. Raising it again waits for the hourly calibration.
void Session::check_budget_if_due(Clock::time_point now) {
    if (!options_.daemon || !options_.pids.empty() || !options_.command.empty()) return;  // the check runs untracked
    budget_monitor_.start_if_due(*sampler_, calibration_cpus(cpus_), now);
    std::string error;
    const double budget = *options_.overhead_budget_percent;
    auto verdict = budget_monitor_.take_result(frequency_, budget, events_.size(), error);
    if (!error.empty()) warn_once("the overhead budget's check while running measured nothing: " + error);
    if (!verdict || !verdict->lower) return;
    const std::uint64_t before = frequency_;
    auto epoch = apply_rate(verdict->hz);
    if (!epoch.ok()) {
        warn_once("cannot start a new epoch for a lower rate (" + epoch.error().message() + "); keeping " +
                  std::to_string(before) + " Hz");
        return;
    }
    char line[400];
    std::snprintf(line, sizeof line,
                  "overhead budget check: a sample now costs at most %.1f us (median %.1f us, last %zu pairs), "
                  "%.2f%% at %llu Hz, over the budget of %.2f%%; sampling rate lowered to %llu Hz per CPU, epoch %s",
                  verdict->cost_us.upper, verdict->cost_us.median, verdict->window_pairs,
                  verdict->overhead_percent, static_cast<unsigned long long>(before), budget,
                  static_cast<unsigned long long>(frequency_), epoch->c_str());
    log(line);
}

}  // namespace ecpi::loader::detail
