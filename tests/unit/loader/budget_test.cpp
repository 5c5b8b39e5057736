// The overhead budget's choice of rate (loader/collect/budget.cpp, issue 20): pure
// arithmetic on a measured cost; the measurement itself is tested as root in
// tests/bpf/budget_calibration.cpp.
#include <doctest/doctest.h>

#include "ecpi/loader/budget.h"

using ecpi::loader::choose_rate;
using ecpi::loader::SampleCost;

namespace {
SampleCost cost_of(double us) {
    SampleCost c;
    c.median_us = us;
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
