// The overhead budget's choice of rate (loader/collect/budget.cpp, issues 20
// and 35): pure arithmetic on measured costs (synthetic here): the confidence
// bound of the median, when to stop measuring, the rate from the bound, the
// CPU that decides, and the check while running. The measurement itself is
// tested as root in tests/bpf/budget_calibration.cpp.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "ecpi/loader/budget.h"

using ecpi::loader::choose_rate;
using ecpi::loader::CalibrationOptions;
using ecpi::loader::CpuCost;
using ecpi::loader::median_bound;
using ecpi::loader::SampleCost;

namespace {
SampleCost cost_of(double us) {
    SampleCost c;
    c.median_us = us;
    c.bound_us = us;
    c.low_us = us * 0.9;
    c.high_us = us * 1.1;
    c.pairs = 8;
    c.hz = 4999;
    return c;
}
}  // namespace

TEST_CASE("the rate is the budget over the cost of a sample, two significant digits") {
    // 20 us a sample: 1% of a second is 10 ms, 500 samples.
    auto r = choose_rate(cost_of(20), 1.0, 1);
    CHECK(r.hz == 500);
    CHECK(r.overhead_percent == doctest::Approx(1.0));
    CHECK(!r.floor_over_budget);
    // 7 us: 1428.6 Hz affordable, rounded down to 1400.
    r = choose_rate(cost_of(7), 1.0, 1);
    CHECK(r.hz == 1400);
    CHECK(r.overhead_percent <= 1.0);
    // Two events share the budget: half the rate each.
    CHECK(choose_rate(cost_of(20), 1.0, 2).hz == 250);
    // A larger budget affords more.
    CHECK(choose_rate(cost_of(20), 5.0, 1).hz == 2500);
}

TEST_CASE("the rate stays within 19-4999 Hz and says when even the floor is over budget") {
    // 1 us: 10 kHz affordable, clamped to the top of the range.
    auto cheap = choose_rate(cost_of(1), 1.0, 1);
    CHECK(cheap.hz == 4999);
    CHECK(!cheap.floor_over_budget);
    // 1 ms a sample: 10 Hz would fit, the floor is 19 and over the budget.
    auto dear = choose_rate(cost_of(1000), 1.0, 1);
    CHECK(dear.hz == ecpi::loader::kBudgetMinHz);
    CHECK(dear.floor_over_budget);
    CHECK(dear.overhead_percent == doctest::Approx(1.9));
    // A cost the measurement could not see (0 or negative: noise) takes the top.
    CHECK(choose_rate(cost_of(0), 1.0, 1).hz == 4999);
    CHECK(choose_rate(cost_of(-3), 1.0, 1).hz == 4999);
}

TEST_CASE("the rate is chosen from the upper bound, not the median") {
    SampleCost c = cost_of(40);
    c.bound_us = 50;  // noisy: the median says 250 Hz, the bound 200
    CHECK(choose_rate(c, 1.0, 1).hz == 200);
    CHECK(choose_rate(c, 1.0, 1).overhead_percent == doctest::Approx(1.0));
}

TEST_CASE("the median's bounds are order statistics at the confidence asked") {
    // 8 values: P(Binomial(8, 1/2) <= 1) = 9/256 = 3.5% <= 5% < P(<= 2) = 14.5%:
    // one value may lie beyond each bound, the second largest is the bound.
    auto b = median_bound({8, 1, 7, 2, 6, 3, 5, 4}, 0.95);
    CHECK(b.enough);
    CHECK(b.median == doctest::Approx(4.5));
    CHECK(b.upper == 7);
    CHECK(b.lower == 2);
    // 4 values cannot bound the median at 95% (1/16 > 5%): the extremes, not enough.
    b = median_bound({1, 2, 3, 4}, 0.95);
    CHECK(!b.enough);
    CHECK(b.upper == 4);
    CHECK(b.lower == 1);
    // 5 values: 1/32 = 3.1%, the extremes with confidence.
    CHECK(median_bound({5, 1, 3, 2, 4}, 0.95).enough);
    // An outlier moves the mean but not the bound.
    b = median_bound({10, 10.5, 9.5, 10.2, 9.8, 10.1, 9.9, 10.3, 9.7, 500}, 0.95);
    CHECK(b.upper < 11);
    CHECK(median_bound({}, 0.95).median == 0);
}

TEST_CASE("the bound covers the true median as often as it promises") {
    // 2000 synthetic calibrations of 12 pairs, noise as in a busy VM (cost 45
    // us, sd 8 us, and one pair in ten hit by a 200 us interruption).
    std::mt19937 rng(35);
    std::normal_distribution<double> noise(45, 8);
    std::uniform_real_distribution<double> hit(0, 1);
    int covered = 0, trials = 2000;
    for (int t = 0; t < trials; ++t) {
        std::vector<double> v;
        for (int i = 0; i < 12; ++i) v.push_back(noise(rng) + (hit(rng) < 0.1 ? 200 : 0));
        // The population median with the hits: a little above 45.
        covered += median_bound(v, 0.95).upper >= 46.1;
    }
    CHECK(covered >= trials * 93 / 100);
}

TEST_CASE("measuring stops when the interval is within the precision asked") {
    CalibrationOptions o;  // 10% or 0.25 us
    ecpi::loader::MedianBound b;
    b.enough = true;
    b.median = 40;
    b.lower = 37;
    b.upper = 43;  // half-width 3 < 4
    CHECK(ecpi::loader::precise_enough(b, o));
    b.upper = 49;  // half-width 6 > 4
    CHECK(!ecpi::loader::precise_enough(b, o));
    // A small cost: the absolute precision decides.
    b.median = 1;
    b.lower = 0.9;
    b.upper = 1.3;
    CHECK(ecpi::loader::precise_enough(b, o));
    b.enough = false;
    CHECK(!ecpi::loader::precise_enough(b, o));
}

TEST_CASE("the CPU with the highest bound decides the rate") {
    CpuCost a, b;
    a.cpu = 0;
    a.median_us = 40;
    a.upper_us = 44;
    a.pairs = 10;
    a.precise = true;
    b.cpu = 1;
    b.median_us = 41;
    b.upper_us = 60;
    b.pairs = 30;
    b.precise = false;
    auto s = ecpi::loader::summarize_costs({a, b}, 0.95);
    CHECK(s.cpu == 1);
    CHECK(s.bound_us == 60);
    CHECK(s.median_us == 41);
    CHECK(s.pairs == 40);
    CHECK(!s.precise);
    CHECK(s.per_cpu.size() == 2);
    CHECK(choose_rate(s, 1.0, 1).hz == 160);
}

TEST_CASE("CPUs that agree are pooled: their pairs together give the bound") {
    // Two CPUs with the same cost and 24 pairs each: alone, each bound is
    // the 7th highest of 24 values; pooled, the bound of 48 is lower.
    auto cpu = [](int id, double shift) {
        CpuCost c;
        c.cpu = id;
        for (int i = 0; i < 24; ++i) c.costs_us.push_back(40 + shift + (i % 12));
        auto b = ecpi::loader::median_bound(c.costs_us, 0.95);
        c.median_us = b.median;
        c.lower_us = b.lower;
        c.upper_us = b.upper;
        c.pairs = 24;
        return c;
    };
    auto agree = ecpi::loader::summarize_costs({cpu(0, 0), cpu(1, 0.5)}, 0.95);
    CHECK(agree.pooled);
    std::vector<double> all;
    for (const auto& c : agree.per_cpu) all.insert(all.end(), c.costs_us.begin(), c.costs_us.end());
    CHECK(agree.bound_us == ecpi::loader::median_bound(all, 0.95).upper);
    CHECK(agree.bound_us < cpu(1, 0.5).upper_us);
    CHECK(agree.pairs == 48);
    // A CPU whose median lies outside the other's interval: the dearer
    // decides, by its median where that is above the bound of all pairs.
    auto differ = ecpi::loader::summarize_costs({cpu(0, 0), cpu(1, 30)}, 0.95);
    CHECK(!differ.pooled);
    CHECK(differ.cpu == 1);
    CHECK(differ.median_us == cpu(1, 30).median_us);
    CHECK(differ.bound_us == cpu(1, 30).median_us);
}

TEST_CASE("CPUs that differ: a dearer CPU's few noisy pairs do not decide by their own bound") {
    // CPU 1 has ten pairs, two of them far out: its own upper bound is one
    // of those, which would choose a rate several times too low.
    CpuCost a, b;
    a.cpu = 0;
    for (int i = 0; i < 10; ++i) a.costs_us.push_back(4 + 0.1 * i);
    b.cpu = 1;
    b.costs_us = {5.6, 5.8, 6.0, 6.1, 6.2, 6.3, 6.4, 6.5, 19, 25};
    for (CpuCost* c : {&a, &b}) {
        auto m = ecpi::loader::median_bound(c->costs_us, 0.95);
        c->median_us = m.median;
        c->lower_us = m.lower;
        c->upper_us = m.upper;
        c->pairs = 10;
    }
    REQUIRE(!ecpi::loader::cpus_agree({a, b}));
    REQUIRE(b.upper_us >= 19);
    auto s = ecpi::loader::summarize_costs({a, b}, 0.95);
    CHECK(s.cpu == 1);
    CHECK(s.bound_us >= b.median_us);
    CHECK(s.bound_us < 7);
}

TEST_CASE("the check while running lowers the rate only when the bound drifts over the budget") {
    std::vector<double> steady(20, 45.0), dearer(20, 60.0), slightly(20, 52.0);
    // 220 Hz at 45 us: 0.99%, within.
    auto k = ecpi::loader::check_budget(steady, 220, 1.0, 1);
    CHECK(!k.lower);
    CHECK(k.hz == 220);
    CHECK(k.overhead_percent == doctest::Approx(0.99));
    // 60 us: 1.32%, more than 10% over: down to 160 Hz.
    k = ecpi::loader::check_budget(dearer, 220, 1.0, 1);
    CHECK(k.lower);
    CHECK(k.hz == 160);
    // 52 us: 1.14%, more than 10% over, down to 190 Hz.
    CHECK(ecpi::loader::check_budget(slightly, 220, 1.0, 1).hz == 190);
    // Within the allowance: 48 us is 1.06%.
    CHECK(!ecpi::loader::check_budget(std::vector<double>(20, 48.0), 220, 1.0, 1).lower);
    // Too few pairs for a bound: no verdict.
    CHECK(!ecpi::loader::check_budget({60, 60, 60}, 220, 1.0, 1).lower);
}

TEST_CASE("a step up in the cost drops the pairs before it, and noise does not") {
    using ecpi::loader::pairs_before_cost_step;
    // A calibration's 16 cheap pairs (6-15 us, as on a Zen 3 VM), then dear ones.
    std::vector<double> window{9.4, 6.0, 14.5, 11.2, 8.1, 12.9, 7.3, 10.0, 13.1, 6.6, 9.9, 14.1, 8.8, 11.7, 7.9, 12.2};
    // One dear pair: 1 in 17 by chance, not enough.
    window.push_back(112.0);
    CHECK(pairs_before_cost_step(window) == 0);
    // Two: 1 in 153, still more than 0.5%.
    window.push_back(118.0);
    CHECK(pairs_before_cost_step(window) == 0);
    // Three: 1 in 969: the 16 cheap ones go.
    window.push_back(109.5);
    CHECK(pairs_before_cost_step(window) == 16);
    // A pair among the old ones as dear as the new: no clean step, nothing dropped.
    std::vector<double> mixed = window;
    mixed[5] = 110.0;
    CHECK(pairs_before_cost_step(mixed) == 0);
    // Noise around one cost: the newest pairs not all above the older.
    std::vector<double> steady;
    for (int i = 0; i < 64; ++i) steady.push_back(40.0 + static_cast<double>((i * 37) % 17));
    CHECK(pairs_before_cost_step(steady) == 0);
    // A step down is not a step up.
    std::vector<double> cheaper(window.begin() + 16, window.end());
    cheaper.insert(cheaper.end(), {9.0, 8.0, 10.0, 9.5});
    CHECK(pairs_before_cost_step(cheaper) == 0);
    CHECK(pairs_before_cost_step({}) == 0);
    CHECK(pairs_before_cost_step({5.0}) == 0);
}

TEST_CASE("calibration CPUs: all of a few, four spread over many") {
    CHECK(ecpi::loader::calibration_cpus({0, 1}) == std::vector<int>{0, 1});
    std::vector<int> sixteen;
    for (int i = 0; i < 16; ++i) sixteen.push_back(i);
    CHECK(ecpi::loader::calibration_cpus(sixteen) == std::vector<int>{0, 4, 8, 12});
}
