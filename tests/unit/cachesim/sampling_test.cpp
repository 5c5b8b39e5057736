// The runtime's sampling core (MemSpy 4.1, 7.2), driven the way the
// callbacks drive it: a fast path that decrements, a slow path on zero.
#include <doctest/doctest.h>

#include <cmath>
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
    // The first window may be one the sampler started inside (a share of it).
    CHECK(r.window_lengths[0] <= 1000);
    for (std::size_t i = 1; i < r.window_lengths.size(); i++) CHECK(r.window_lengths[i] == 1000);
    double on_fraction = double(r.on) / double(r.on + r.off);
    CHECK(on_fraction == doctest::Approx(0.1).epsilon(0.03));
}

TEST_CASE("sampling: gaps are random within off_mean/4 of off_mean, with mean off_mean") {
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
    CHECK(lo >= 375);
    CHECK(hi <= 625);
    CHECK(hi > 615);  // the range is used, not one fixed period
    CHECK(lo < 385);
    CHECK(std::abs(mean - 500) < 5);
}

TEST_CASE("sampling: the share of a stretch of the run that is sampled varies little between seeds") {
    // MemSpy 6.1: the error of non-representative samples comes from how
    // many windows fall in each phase of the program. Over 20 cycles, the
    // sampled events vary by about 3% between seeds; gaps uniform on
    // [1, 2*off_mean - 1] made that about 12%.
    const std::uint64_t window = 10, off_mean = 90, stretch = 2000, seeds = 4000;
    double sum = 0, sum2 = 0;
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        ecpi_rt_sampler s;
        ecpi_rt_sampler_init(&s, window, off_mean, seed * 0x9E3779B97F4A7C15ULL);
        Run r = drive(s, stretch);
        sum += double(r.on);
        sum2 += double(r.on) * double(r.on);
    }
    double mean = sum / double(seeds), sd = std::sqrt(sum2 / double(seeds) - mean * mean);
    CHECK(std::abs(mean - 200) < 4);
    CHECK(sd / mean < 0.06);
}

TEST_CASE("sampling: different seeds give different window positions") {
    ecpi_rt_sampler a, b;
    ecpi_rt_sampler_init(&a, 100, 900, 1);
    ecpi_rt_sampler_init(&b, 100, 900, 2);
    CHECK((a.countdown != b.countdown || a.first_window != b.first_window));
}

TEST_CASE("sampling: the first events are sampled as often as the rest (the phase is stationary)") {
    // Over many seeds, event i is ON with probability window/(window+off_mean)
    // whatever i is. A first gap uniform on [0, 2*off_mean) sampled the first
    // 2*off_mean events at half that rate.
    const std::uint64_t window = 10, off_mean = 90, events = 1000, seeds = 40000;
    std::vector<std::uint64_t> on(events, 0);
    for (std::uint64_t seed = 1; seed <= seeds; seed++) {
        ecpi_rt_sampler s;
        ecpi_rt_sampler_init(&s, window, off_mean, seed * 0x9E3779B97F4A7C15ULL);
        for (std::uint64_t i = 0; i < events; i++) {
            if (--s.countdown != 0) continue;
            ecpi_rt_sampler_step(&s);
            on[i]++;
        }
    }
    auto rate = [&](std::uint64_t from, std::uint64_t to) {
        double n = 0;
        for (std::uint64_t i = from; i < to; i++) n += double(on[i]);
        return n / double(seeds) / double(to - from);
    };
    // (Absolute tolerances: doctest's Approx is relative to 1 + the value.)
    CHECK(std::abs(rate(0, 200) - 0.1) < 0.005);
    CHECK(std::abs(rate(200, 1000) - 0.1) < 0.005);
    for (std::uint64_t i = 0; i < events; i += 50) CHECK(std::abs(rate(i, i + 50) - 0.1) < 0.01);
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
