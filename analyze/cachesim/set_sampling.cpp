// Which levels set sampling decides (include/ecpi/analyze/cachesim/set_sampling.h).
#include "ecpi/analyze/cachesim/set_sampling.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>

namespace ecpi::analyze {

bool SetSamplingPlan::combined() const { return std::find(set_levels.begin(), set_levels.end(), true) != set_levels.end(); }

namespace {

// The levels named by --set-levels: auto, none, all or NAME[,NAME...].
Result<std::vector<bool>> chosen_levels(const std::vector<CacheGeometry>& levels, std::uint64_t window, std::uint64_t sample,
                                        std::string_view option, std::vector<std::string>& reasons) {
    std::vector<bool> out(levels.size(), false);
    reasons.assign(levels.size(), "");
    if (option == "none" || option == "all") {
        std::fill(out.begin(), out.end(), option == "all");
        for (auto& r : reasons) r = "--set-levels " + std::string(option);
        return out;
    }
    if (option == "auto") {
        for (std::size_t l = 0; l < levels.size(); l++) {
            std::uint64_t lines = levels[l].size / levels[l].line;
            out[l] = sample > 1 && window < kWarmReferencesPerLine * lines;
            reasons[l] = sample <= 1 ? "no time sampling"
                         : out[l] ? "a window of " + std::to_string(window) + " references cannot warm its " + std::to_string(lines) + " lines"
                                  : "a window of " + std::to_string(window) + " references warms its " + std::to_string(lines) + " lines";
        }
        return out;
    }
    std::size_t at = 0;
    while (at <= option.size()) {
        auto comma = option.find(',', at);
        std::string_view name = option.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
        auto it = std::find_if(levels.begin(), levels.end(), [&](const CacheGeometry& g) { return g.name == name; });
        if (it == levels.end())
            return Error("--set-levels names '" + std::string(name) + "', which is not a simulated level (use auto, none, all or level names)");
        out[std::size_t(it - levels.begin())] = true;
        reasons[std::size_t(it - levels.begin())] = "--set-levels";
        if (comma == std::string_view::npos) break;
        at = comma + 1;
    }
    return out;
}

// The default 1/K: kDefaultSetSample, lowered (in powers of two) until the
// smallest level's sets can hold the groups and, unless the levels were
// named (`forced`), every set-sampled level keeps kMinSampledSets sets.
std::uint32_t default_set_sample(const std::vector<CacheGeometry>& levels, const std::vector<bool>& set_levels, bool forced) {
    std::uint64_t k = kDefaultSetSample;
    for (std::size_t l = 0; l < levels.size(); l++) {
        std::uint64_t sets = levels[l].sets();
        k = std::min(k, std::min(sets, kMaxSetGroups));
        if (set_levels[l] && !forced) k = std::min(k, std::max<std::uint64_t>(1, sets / kMinSampledSets));
    }
    return std::uint32_t(std::bit_floor(std::max<std::uint64_t>(k, 1)));
}

}  // namespace

Result<SetSamplingPlan> plan_set_sampling(const std::vector<CacheGeometry>& levels, std::uint64_t window, std::uint64_t sample,
                                          std::uint32_t sets, std::string_view levels_option) {
    SetSamplingPlan plan;
    auto chosen = chosen_levels(levels, window, sample, levels_option, plan.reasons);
    if (!chosen.ok()) return chosen.error();
    plan.set_levels = *chosen;
    if (!plan.combined()) {
        plan.set_sample = sets == 0 ? 1 : sets;  // --sets 1/K alone: sets sampled within windows
        return plan;
    }
    plan.set_sample = sets == 0 ? default_set_sample(levels, plan.set_levels, levels_option != "auto") : sets;
    if (plan.set_sample <= 1) {
        // Too few sets to sample: time sampling decides every level.
        std::fill(plan.set_levels.begin(), plan.set_levels.end(), false);
        for (auto& r : plan.reasons) r = "too few sets to sample";
        plan.set_sample = 1;
        return plan;
    }
    if (!std::has_single_bit(plan.set_sample))
        return Error("--sets 1/" + std::to_string(plan.set_sample) +
                     ": set sampling of whole levels needs a power of two (the runtime selects sets by address bits); try 1/" +
                     std::to_string(std::bit_floor(plan.set_sample)));
    return plan;
}

Result<SetTurns> parse_set_turns(std::string_view text) {
    if (text == "off") return SetTurns{};
    auto colon = text.find(':');
    SetTurns t;
    auto number = [](std::string_view s, std::uint32_t& out) {
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
        return ec == std::errc() && p == s.data() + s.size();
    };
    if (colon == std::string_view::npos || !number(text.substr(0, colon), t.windows) || !number(text.substr(colon + 1), t.warm) ||
        t.windows == 0 || t.warm >= t.windows)
        return Error("--set-turns '" + std::string(text.substr(0, 40)) +
                     "': give off or N:W, windows per turn and warming windows, W below N (for instance 32:24)");
    return t;
}

namespace {

struct GroupCounts {
    double references = 0, misses = 0;
};

// The sampled groups that references reached at `level`, each one sample.
std::vector<GroupCounts> reached_groups(const CacheSimulator& sets, std::size_t level, UnknownEstimate e) {
    double alpha = sets.wood_alpha(level).value_or(0.5);
    std::vector<GroupCounts> out;
    for (const auto& g : sets.set_groups())
        if (g.levels.size() > level && g.levels[level].references > 0)
            out.push_back({double(g.levels[level].references), estimated_misses(g.levels[level], e, alpha)});
    return out;
}

// The least-squares slope of the groups' misses on their references, kept
// within [0, ratio]: at the ratio the estimate is the ratio estimator's, at
// 0 it expands the misses alone (their count does not follow the accesses).
double clipped_slope(const std::vector<GroupCounts>& groups, double ratio) {
    double mean_n = 0, mean_m = 0, sxx = 0, sxy = 0;
    for (const auto& g : groups) mean_n += g.references / double(groups.size()), mean_m += g.misses / double(groups.size());
    for (const auto& g : groups) {
        sxx += (g.references - mean_n) * (g.references - mean_n);
        sxy += (g.references - mean_n) * (g.misses - mean_m);
    }
    return sxx > 0 ? std::clamp(sxy / sxx, 0.0, ratio) : ratio;
}

// The regression's standard error of the rate: the residuals' spread over
// the k groups (two parameters fitted) with the finite-population
// correction, over the mean accesses of all `groups` groups.
double regression_standard_error(const std::vector<GroupCounts>& groups, double slope, double fraction, double references, double all_groups) {
    double mean_n = 0, mean_m = 0, ss = 0;
    for (const auto& g : groups) mean_n += g.references / double(groups.size()), mean_m += g.misses / double(groups.size());
    for (const auto& g : groups) {
        double d = (g.misses - mean_m) - slope * (g.references - mean_n);
        ss += d * d;
    }
    double k = double(groups.size());
    return std::sqrt(std::max(0.0, 1.0 - fraction) * ss / (k - 2) / k) / (references / all_groups);
}

bool regression_applies(const CacheSimulator& sets, std::size_t groups_reached, const AccessesAbove& above) {
    return sets.totals().set_scale > 1 && sets.set_turns().empty() && groups_reached >= 3 && above.references > 0 &&
           above.unknown_share <= kMaxUnknownShareAbove && std::isfinite(above.relative_error);
}

}  // namespace

SetEstimate set_regression_estimate(const CacheSimulator& sets, std::size_t level, UnknownEstimate e, const AccessesAbove& above) {
    SetEstimate out{estimate_miss_rate(sets, level, e), false, 0};
    out.slope = out.estimate.rate;
    auto groups = reached_groups(sets, level, e);
    if (!regression_applies(sets, groups.size(), above)) return out;
    double sum_n = 0, sum_m = 0;
    for (const auto& g : groups) sum_n += g.references, sum_m += g.misses;
    double ratio = sum_m / sum_n, scale = double(sets.totals().set_scale);
    out.regression = true;
    out.slope = clipped_slope(groups, ratio);
    MissRateEstimate& r = out.estimate;
    double rate = std::clamp((scale * sum_m + out.slope * (above.references - scale * sum_n)) / above.references, 0.0, 1.0);
    r.unknown_low = std::clamp(r.unknown_low + rate - r.rate, 0.0, 1.0);
    r.unknown_high = std::clamp(r.unknown_high + rate - r.rate, 0.0, 1.0);
    r.rate = rate;
    // The windows' error on A moves the estimate by (ratio - b) times the
    // groups' share of A, relative: nothing at b = ratio.
    double share = scale * sum_n / above.references;
    double from_above = (ratio - out.slope) * share * above.relative_error;
    double se = regression_standard_error(groups, out.slope, 1.0 / scale, above.references, double(sets.set_groups().size()));
    r.set_spread = student_t95(groups.size() - 2) * se;
    r.sampling_error = std::hypot(r.set_spread, from_above);
    widen_to_bounds(r);
    return out;
}

}  // namespace ecpi::analyze
