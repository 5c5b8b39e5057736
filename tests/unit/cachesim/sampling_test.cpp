// The runtime's sampling core (MemSpy 4.1, 7.2), driven the way the
// callbacks drive it: a fast path that decrements, a slow path on zero.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

extern "C" {
#include "ecpi_rt_sampling.h"
}

namespace {

struct Run {
    std::uint64_t on = 0, off = 0, windows = 0;
    std::vector<std::uint64_t> window_lengths, gaps;
};

// Feeds n events through the sampler exactly as rt_memtrace.c does.
Run drive(ecpi_rt_sampler& s, std::uint64_t n) {
    Run r;
    std::uint64_t current = 0;
    for (std::uint64_t i = 0; i < n; i++) {
        if (--s.countdown != 0) {
            r.off++;
            continue;
        }
        if (ecpi_rt_sampler_step(&s)) {
            if (current) r.window_lengths.push_back(current);
            current = 0;
            r.windows++;
            r.gaps.push_back(s.gap);
        }
        current++;
        r.on++;
    }
    return r;
}

}  // namespace

TEST_CASE("sampling: ON windows have exactly `window` events and the ON fraction is window/(window+off_mean)") {
    ecpi_rt_sampler s;
    ecpi_rt_sampler_init(&s, 1000, 9000, 42);
    Run r = drive(s, 20'000'000);
    REQUIRE(r.windows > 1000);
    for (auto len : r.window_lengths) CHECK(len == 1000);
    double on_fraction = double(r.on) / double(r.on + r.off);
    CHECK(on_fraction == doctest::Approx(0.1).epsilon(0.03));
}

TEST_CASE("sampling: gaps are random in [1, 2*off_mean - 1] with mean off_mean") {
    ecpi_rt_sampler s;
    ecpi_rt_sampler_init(&s, 10, 500, 7);
    Run r = drive(s, 5'000'000);
    std::uint64_t lo = UINT64_MAX, hi = 0;
    double sum = 0;
    // gaps[0] is the random first phase; later ones are drawn at window ends.
    for (std::size_t i = 1; i < r.gaps.size(); i++) {
        lo = std::min(lo, r.gaps[i]);
        hi = std::max(hi, r.gaps[i]);
        sum += double(r.gaps[i]);
    }
    double mean = sum / double(r.gaps.size() - 1);
    CHECK(lo >= 1);
    CHECK(hi <= 999);
    CHECK(hi > 900);   // the range is used, not one fixed period
    CHECK(lo < 100);
    CHECK(mean == doctest::Approx(500).epsilon(0.03));
}

TEST_CASE("sampling: different seeds give different window positions") {
    ecpi_rt_sampler a, b;
    ecpi_rt_sampler_init(&a, 100, 900, 1);
    ecpi_rt_sampler_init(&b, 100, 900, 2);
    CHECK(a.countdown != b.countdown);
}

TEST_CASE("sampling: off_mean 0 is full simulation (one window, every event ON)") {
    ecpi_rt_sampler s;
    ecpi_rt_sampler_init(&s, 1000, 0, 3);
    Run r = drive(s, 100'000);
    CHECK(r.on == 100'000);
    CHECK(r.off == 0);
    CHECK(r.windows == 1);
    CHECK(r.gaps[0] == 0);
}

TEST_CASE("sampling: skipped_now counts the events of the current gap") {
    ecpi_rt_sampler s;
    ecpi_rt_sampler_init(&s, 5, 50, 11);
    std::uint64_t gap = s.gap;
    REQUIRE(gap > 3);
    for (int i = 0; i < 3; i++) --s.countdown;
    CHECK(ecpi_rt_sampler_skipped_now(&s) == 3);
}

TEST_CASE("sampling: the never-sampling countdown takes 2^63 events to expire") {
    CHECK(ECPI_RT_COUNTDOWN_NEVER == INT64_MAX);
}
