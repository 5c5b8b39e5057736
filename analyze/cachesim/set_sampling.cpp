// Which levels set sampling decides (include/ecpi/analyze/cachesim/set_sampling.h).
#include "ecpi/analyze/cachesim/set_sampling.h"

#include <algorithm>
#include <bit>
#include <charconv>

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

}  // namespace ecpi::analyze
