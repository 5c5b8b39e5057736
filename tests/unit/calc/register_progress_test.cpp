// Pairing register snapshots into loop rates, on synthetic sample streams:
// one thread at a known rate, thread switches, a loop re-entered between
// samples, a 32-bit counter that wraps, a thread that leaves the loop.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ecpi/analyze/calc/register_progress.h"

#include <capstone/capstone.h>

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;

namespace {

constexpr int kRax = 0, kRbp = 5, kRsi = 6;
constexpr std::uint64_t kLoopStart = 0x1000, kLoopEnd = 0x1010;

RegisterSample snap(std::uint32_t tid, std::uint64_t t_ns, std::uint64_t pc, std::uint64_t rax, std::uint64_t rbp = 7) {
    RegisterSample s;
    s.pid = 100;
    s.tid = tid;
    s.time_ns = t_ns;
    s.image = 0;
    s.offset = pc;
    s.regs[kRax] = rax;
    s.regs[kRbp] = rbp;
    return s;
}

ProgressQuery query(const std::vector<RegisterSample>& stream, int gp = kRax, std::int64_t step = -1, std::uint8_t width = 8) {
    ProgressQuery q;
    q.stream = stream;
    q.image = 0;
    q.in_loop = [](std::uint64_t pc) { return pc >= kLoopStart && pc < kLoopEnd; };
    q.gp = gp;
    q.step = step;
    q.width = width;
    q.invariant = {kRbp};
    return q;
}

void sort_stream(std::vector<RegisterSample>& v) { std::sort(v.begin(), v.end()); }

}  // namespace

TEST_CASE("register progress: one thread counting down at 10 iterations per microsecond") {
    std::vector<RegisterSample> v;
    // 200 us apart, +-10% (randomized periods), 10 iterations per us.
    std::uint64_t t = 1'000'000, rax = 100'000'000;
    for (int k = 0; k < 50; ++k) {
        v.push_back(snap(1, t, kLoopStart + (k % 3) * 4, rax));
        std::uint64_t dt = 180'000 + static_cast<std::uint64_t>(k % 5) * 10'000;
        t += dt;
        rax -= dt / 100;
    }
    LoopRate r = loop_rate(query(v));
    REQUIRE(r.known);
    CHECK(r.iterations_per_ns == doctest::Approx(0.01).epsilon(1e-9));
    CHECK(r.pairs.used == 49);
    CHECK(r.low <= r.iterations_per_ns);
    CHECK(r.high >= r.iterations_per_ns);
}

TEST_CASE("register progress: pairs never cross threads") {
    std::vector<RegisterSample> v;
    for (int k = 0; k < 20; ++k) {
        v.push_back(snap(1, 1000 + k * 1000, kLoopStart, 1'000'000 - k * 10));     // 0.01/ns
        v.push_back(snap(2, 1500 + k * 1000, kLoopStart, 5'000'000 - k * 1000));   // 1/ns
    }
    sort_stream(v);
    LoopRate r = loop_rate(query(v));
    REQUIRE(r.known);
    CHECK(r.pairs.used == 38);
    CHECK(r.pairs.other_thread == 1);
    // Both threads' pairs: total iterations over total time.
    CHECK(r.iterations_per_ns == doctest::Approx((19 * 10 + 19 * 1000) / (38.0 * 1000)));
}

TEST_CASE("register progress: a loop re-entered between samples is not paired") {
    std::vector<RegisterSample> v;
    std::uint64_t t = 0;
    for (int invocation = 0; invocation < 4; ++invocation) {
        // A new invocation: another base pointer (rbp), the counter restarts.
        std::uint64_t rax = 10'000;
        for (int k = 0; k < 10; ++k) {
            v.push_back(snap(1, t, kLoopStart, rax, 0x5000 + static_cast<std::uint64_t>(invocation) * 0x100));
            t += 1000;
            rax -= 100;
        }
    }
    LoopRate r = loop_rate(query(v));
    CHECK(r.pairs.invariant_changed == 3);
    CHECK(r.pairs.used == 36);
    REQUIRE(r.known);
    CHECK(r.iterations_per_ns == doctest::Approx(0.1));

    // Same base pointer each time: the restart moves the counter against its
    // step and is refused.
    for (auto& s : v) s.regs[kRbp] = 0x5000;
    LoopRate same = loop_rate(query(v));
    CHECK(same.pairs.wrong_direction == 3);
    CHECK(same.iterations_per_ns == doctest::Approx(0.1));
}

// A loop of `trip` iterations called over and over (the same invariants
// every call) at `rate` iterations per ns, snapshotted every `every_ns`.
static std::vector<RegisterSample> repeated_trips(double rate, double trip, double every_ns, int count) {
    std::vector<RegisterSample> v;
    for (int k = 0; k < count; ++k) {
        const double t = every_ns * k;
        const auto done = static_cast<std::uint64_t>(std::fmod(t * rate, trip));
        v.push_back(snap(1, static_cast<std::uint64_t>(t), kLoopStart, static_cast<std::uint64_t>(trip) - done));
    }
    return v;
}

TEST_CASE("register progress: trips shorter than the time between samples are not measured") {
    // A loop of 1000 iterations called over and over (the same invariants
    // every call), 0.05 iterations per ns, sampled every 13 us (650
    // iterations): most pairs cross one or more calls, and those whose
    // counter happens to be further along look like progress.
    const double rate = 0.05, trip = 1000;
    LoopRate r = loop_rate(query(repeated_trips(rate, trip, 13'000.0, 200)));
    CHECK(r.short_trips);
    CHECK(!r.known);
    CHECK(r.span_iterations <= trip);
    CHECK(r.median_iterations * kMinSpanPerMove > r.span_iterations);

    // The same loop sampled every 1 us (50 iterations): a crossing moves the
    // counter back and is refused; the rate is measured.
    LoopRate f = loop_rate(query(repeated_trips(rate, trip, 1'000.0, 200)));
    REQUIRE(f.known);
    CHECK(!f.short_trips);
    CHECK(f.iterations_per_ns == doctest::Approx(rate).epsilon(0.01));

    // Sampled every 2.54 us (127 iterations, a median under kMinSpanPerMove
    // of the trip's span): no pair moves half a trip, so every crossing
    // moves the counter back and is refused; the rate is measured.
    LoopRate n = loop_rate(query(repeated_trips(rate, trip, 2'540.0, 400)));
    CHECK(n.median_iterations * kMinSpanPerMove > n.span_iterations);
    CHECK(n.most_iterations * kMaxMoveInSpan <= n.span_iterations);
    REQUIRE(n.known);
    CHECK(!n.short_trips);
    CHECK(n.iterations_per_ns == doctest::Approx(rate).epsilon(0.01));

    // Trips of 3 iterations, one a snapshot's period: every pair moves 0
    // and the counter spans nothing, so nothing shows the trips are long
    // (too few pairs to tell crossings caught)
    // (no pair moving half a span is no evidence where the span is none).
    LoopRate still = loop_rate(query(repeated_trips(rate, 3, 60.0, 60)));
    CHECK(still.most_iterations == 0);
    CHECK(still.short_trips);
    CHECK(!still.known);
}

TEST_CASE("register progress: a 32-bit counter that wraps past 2^32") {
    std::vector<RegisterSample> v;
    std::uint32_t esi = 0xffffff00u;
    for (int k = 0; k < 12; ++k) {
        RegisterSample s = snap(1, 1000 + static_cast<std::uint64_t>(k) * 1000, kLoopStart, 0);
        // Written as a 32-bit register: the upper half is zero.
        s.regs[kRsi] = esi;
        v.push_back(s);
        esi += 0x40;  // 64 iterations of step 1 per microsecond, crossing 2^32 after 4
    }
    LoopRate wide = loop_rate(query(v, kRsi, 1, 8));
    // As a 64-bit register the wrap looks like a move of almost -2^32.
    CHECK(wide.pairs.wrong_direction == 1);
    LoopRate r = loop_rate(query(v, kRsi, 1, 4));
    REQUIRE(r.known);
    CHECK(r.pairs.used == 11);
    CHECK(r.iterations_per_ns == doctest::Approx(0.064));
}

TEST_CASE("register progress: a thread that leaves the loop between two samples") {
    std::vector<RegisterSample> v;
    std::uint64_t rax = 1'000'000;
    for (int k = 0; k < 30; ++k) {
        std::uint64_t pc = (k % 10 == 5) ? 0x2000 : kLoopStart;  // a sample in other code
        v.push_back(snap(1, static_cast<std::uint64_t>(k) * 1000, pc, rax));
        rax -= 50;
    }
    LoopRate r = loop_rate(query(v));
    CHECK(r.pairs.left_loop == 3);
    REQUIRE(r.known);
    CHECK(r.iterations_per_ns == doctest::Approx(0.05));
}

TEST_CASE("loop entries seen: a snapshot in the loop after its thread's last one elsewhere") {
    // Thread 1: outside, in, in, outside, outside, in (two entries seen);
    // thread 2 starts in the loop (no earlier snapshot: none seen), then
    // another process's thread 2 is outside before this one's in the loop
    // (not the same thread: none seen).
    std::vector<RegisterSample> v;
    const std::uint64_t out = kLoopEnd + 0x40;
    const std::uint64_t pcs[] = {out, kLoopStart, kLoopStart + 4, out, out, kLoopStart + 8};
    for (int k = 0; k < 6; ++k) v.push_back(snap(1, 1000 + k * 1000, pcs[k], 0));
    v.push_back(snap(2, 1000, kLoopStart, 0));
    RegisterSample other = snap(2, 1500, out, 0);
    other.pid = 101;
    v.push_back(other);
    v.push_back(snap(2, 2000, kLoopStart, 0));
    // (In the store's order: thread, time, process.)
    CHECK(loop_entries_seen(query(v)) == 2);
    // A snapshot in another image at the loop's offset is outside it.
    std::vector<RegisterSample> w = {snap(3, 1000, kLoopStart, 0), snap(3, 2000, kLoopStart, 0)};
    w[0].image = 1;
    CHECK(loop_entries_seen(query(w)) == 1);
}

TEST_CASE("register progress: a loop the thread is seldom still in at its next snapshot is not measured") {
    // 40 pairs stay in the loop and move steadily, 160 leave it: the few
    // that stayed are no fair sample of the loop's trips.
    std::vector<RegisterSample> v;
    std::uint64_t rax = 10'000'000;
    for (int k = 0; k < 400; ++k) {
        const int at = k % 10;
        const bool elsewhere = !(at == 0 || at == 1 || at == 3 || at == 5 || at == 7);
        v.push_back(snap(1, static_cast<std::uint64_t>(k) * 1000, elsewhere ? 0x2000 : kLoopStart, rax));
        rax -= 100;
    }
    LoopRate r = loop_rate(query(v));
    CHECK(r.pairs.used * 4 < r.pairs.used + r.pairs.left_loop);
    CHECK(r.few_usable);
    CHECK(!r.known);
}

TEST_CASE("register progress: too few pairs give no rate, and a long gap is not used") {
    std::vector<RegisterSample> v;
    for (int k = 0; k < 5; ++k) v.push_back(snap(1, static_cast<std::uint64_t>(k) * 1000, kLoopStart, 1000 - static_cast<std::uint64_t>(k)));
    CHECK(!loop_rate(query(v)).known);
    std::vector<RegisterSample> g;
    for (int k = 0; k < 20; ++k)
        g.push_back(snap(1, static_cast<std::uint64_t>(k) * 1000 + (k >= 10 ? 1'000'000 : 0), kLoopStart,
                         100'000 - static_cast<std::uint64_t>(k) * 10));
    ProgressQuery q = query(g);
    q.max_gap_ns = 4000;
    LoopRate r = loop_rate(q);
    CHECK(r.pairs.gap == 1);
    REQUIRE(r.known);
    CHECK(r.iterations_per_ns == doctest::Approx(0.01));
}

namespace {

// bits()'s shape (bench/accuracy/loops.c): an outer loop over `words`
// words (rdi, step 8, up to the invariant end in rsi) and, per word, an
// inner loop of 8 to 24 iterations (a popcount) whose counter (ecx, step
// 1) runs on across words: `reset` restarts it every word instead
// (matrix_sum's column). One snapshot per call at a word drawn from a
// fixed sequence, in many calls over the same array.
std::vector<RegisterSample> nested_stream(int calls, int words, bool reset, double& per_outer) {
    constexpr int kRcx = 1, kRdi = 7;
    std::vector<int> inner(static_cast<std::size_t>(words));
    std::uint64_t x = 88172645463325252ull;
    long total = 0;
    for (auto& n : inner) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        n = 8 + static_cast<int>(x % 17);
        total += n;
    }
    per_outer = static_cast<double>(total) / words;
    std::vector<RegisterSample> v;
    const std::uint64_t base = 0x5555'0000'0000;
    for (int call = 0; call < calls; ++call) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const int word = static_cast<int>(x % static_cast<std::uint64_t>(words));
        const int within = static_cast<int>((x >> 32) % static_cast<std::uint64_t>(inner[static_cast<std::size_t>(word)]));
        long done = 0;
        for (int w = 0; w < word; ++w) done += inner[static_cast<std::size_t>(w)];
        RegisterSample s = snap(1, 1'000'000 + static_cast<std::uint64_t>(call) * 100'000, kLoopStart + 4, 0);
        s.regs[kRdi] = base + 8 * static_cast<std::uint64_t>(word);
        s.regs[kRsi] = base + 8 * static_cast<std::uint64_t>(words);
        s.regs[kRcx] = static_cast<std::uint64_t>(reset ? within : done + within);
        v.push_back(s);
    }
    return v;
}

}  // namespace

TEST_CASE("nested ratio: an inner counter the outer loop never resets gives the inner iterations per outer one") {
    double truth = 0;
    auto v = nested_stream(2000, 1024, false, truth);
    ProgressQuery q = query(v, 7, 8, 8);
    q.invariant = {kRsi};
    const NestedRatio r = nested_ratio(q, 1, 1, 4);
    REQUIRE(r.known);
    CHECK(r.snapshots == 2000);
    CHECK(r.per_outer == doctest::Approx(truth).epsilon(0.02));
    // The range is the slopes' spread and the chord between the snapshots
    // furthest apart, not the trip's exact ends: it holds the count within
    // 1% (here it ends 0.05% above it).
    CHECK(r.low <= truth * 1.01);
    CHECK(r.high >= truth * 0.99);
    CHECK(r.low <= r.per_outer);
    CHECK(r.high >= r.per_outer);
    // Fewer snapshots than kMinNestedSnapshots decide nothing.
    v.resize(kMinNestedSnapshots - 1);
    ProgressQuery few = query(v, 7, 8, 8);
    few.invariant = {kRsi};
    CHECK_FALSE(nested_ratio(few, 1, 1, 4).known);
}

TEST_CASE("nested ratio: a counter that restarts every outer iteration gives no ratio") {
    double truth = 0;
    const auto v = nested_stream(2000, 1024, true, truth);
    ProgressQuery q = query(v, 7, 8, 8);
    q.invariant = {kRsi};
    CHECK_FALSE(nested_ratio(q, 1, 1, 4).known);
}

namespace {

constexpr int kRdi = 7;

// A rotated `for` over words: `add rdi, 8; cmp rdi, rsi; jne header`, the
// step at kLoopStart + 8, so a snapshot at kLoopStart + 12 or later is past it.
TripExit words_exit() {
    TripExit e;
    e.condition.a = kRdi;
    e.condition.b = kRsi;
    e.condition.width = 8;
    e.condition.jcc = X86_INS_JNE;
    e.induction_first = true;
    e.stay_when_taken = true;
    e.after_step = [](std::uint64_t pc) { return pc >= kLoopStart + 12 && pc < kLoopEnd; };
    return e;
}

ProgressQuery words_query(const std::vector<RegisterSample>& stream) {
    ProgressQuery q = query(stream, kRdi, 8);
    q.invariant = {kRsi};
    return q;
}

// One snapshot per call of a walk over `words` words starting at `base`,
// at word `at` (a pc before the step, or past it with the pointer one on).
RegisterSample word_snap(std::uint64_t t, std::uint64_t base, std::uint64_t words, std::uint64_t at, bool past_step) {
    RegisterSample s = snap(1, t, past_step ? kLoopStart + 12 : kLoopStart, 0);
    s.regs[kRdi] = base + 8 * (at + (past_step ? 1 : 0));
    s.regs[kRsi] = base + 8 * words;
    return s;
}

}  // namespace

TEST_CASE("iterations left: an equality, an ordered compare, a count to zero, a bound the register steps past") {
    TripExit e = words_exit();
    // At the compare rdi is 8 past the word: the last word compares equal.
    CHECK(iterations_left(e, 8, 0x1008, 0x1008) == 1);
    CHECK(iterations_left(e, 8, 0x1008, 0x2000) == (0x2000 - 0x1008) / 8 + 1);
    CHECK(iterations_left(e, 8, 0x1004, 0x2000) == 0);  // never equal: steps past it
    e.condition.jcc = X86_INS_JB;                        // cmp rdi, rsi; jb: while below
    CHECK(iterations_left(e, 8, 0x1004, 0x2000) == (0x2000 - 0x1004 + 7) / 8 + 1);
    CHECK(iterations_left(e, 8, 0x3000, 0x2000) == 1);
    // `sub ecx, 1; test ecx, ecx; jne` (32 bits): ecx at the compare 5 -> 5 more.
    TripExit down;
    down.condition.is_test = true;
    down.condition.a = down.condition.b = 1;
    down.condition.width = 4;
    down.condition.jcc = X86_INS_JNE;
    down.stay_when_taken = true;
    CHECK(iterations_left(down, -1, 5, 5) == 6);
    CHECK(iterations_left(down, -1, 0xffffffff00000005ull, 0xffffffff00000005ull) == 6);  // upper half ignored
    // A loop left when the jump is taken (`cmp; je out`): the same trip.
    TripExit out = words_exit();
    out.condition.jcc = X86_INS_JE;
    out.stay_when_taken = false;
    CHECK(iterations_left(out, 8, 0x1008, 0x2000) == (0x2000 - 0x1008) / 8 + 1);
}

TEST_CASE("trip length: calls too short for pairs, each over the same 1,024 words, give the trip from the end pointer") {
    // One snapshot per 100 us, at a random word of a call: no two in one
    // trip (loop_rate refuses), but every trip runs to the same end, and
    // the snapshot nearest its start says how far that is.
    std::vector<RegisterSample> v;
    std::uint64_t x = 88172645463325252ull;
    for (int k = 0; k < 2000; ++k) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push_back(word_snap(1'000'000 + 100'000ull * k, 0x5555'0000'0000, 1024, x % 1024, (x >> 20) % 2 == 0));
    }
    const ProgressQuery q = words_query(v);
    CHECK_FALSE(loop_rate(q).known);
    const TripLength trip = trip_length(q, words_exit());
    REQUIRE(trip.known);
    CHECK(trip.groups == 1);
    CHECK(trip.snapshots == 2000);
    CHECK(trip.length == doctest::Approx(1024).epsilon(0.005));
    CHECK(trip.low <= 1024);
    CHECK(trip.high >= 1024);
    CHECK(trip.high <= 1024 * 1.01);
}

TEST_CASE("trip length: two arrays weigh by their entries, not by their snapshots") {
    // 1,000 calls over 100 words and 1,000 over 900 (the same cost a word):
    // the snapshots fall 1:9, the entries 1:1, the mean trip is 500.
    std::vector<RegisterSample> v;
    std::uint64_t t = 1'000'000;
    for (int k = 0; k < 100; ++k) v.push_back(word_snap(t += 100'000, 0x1000'0000, 100, k, false));
    for (int k = 0; k < 900; ++k) v.push_back(word_snap(t += 100'000, 0x2000'0000, 900, k, false));
    const TripLength trip = trip_length(words_query(v), words_exit());
    REQUIRE(trip.known);
    CHECK(trip.groups == 2);
    CHECK(trip.length == doctest::Approx(1000.0 / (100.0 / 100 + 900.0 / 900)).epsilon(1e-9));
    CHECK(trip.low == 100);
    CHECK(trip.high >= 900);
    // One thread, never outside the loop between snapshots: no entry seen,
    // so each array ran at least one trip of its length.
    CHECK(trip.fewest == 100 + 900);
}

TEST_CASE("trip length: the fewest iterations count the entries seen per array, a rarely seen one included") {
    // 40 calls over 1,024 words, each entered between two snapshots (the
    // thread's previous snapshot outside the loop), and 3 snapshots of a
    // 10-word array: that group is too small for a length, but its trip
    // still ran. The fewest iterations: 40 x 1,024 + 1 x 10.
    std::vector<RegisterSample> v;
    std::uint64_t t = 1'000'000;
    for (std::uint64_t k = 0; k < 40; ++k) {
        v.push_back(snap(1, t += 100'000, 0x9000, 0));  // elsewhere
        v.push_back(word_snap(t += 100'000, 0x5555'0000'0000, 1024, (k * 397) % 1024, false));
    }
    for (std::uint64_t k = 0; k < 3; ++k) v.push_back(word_snap(t += 100'000, 0x7777'0000'0000, 10, k, false));
    const TripLength trip = trip_length(words_query(v), words_exit());
    REQUIRE(trip.known);
    CHECK(trip.groups == 1);
    CHECK(trip.fewest == 40 * 1024 + 10);
    CHECK(trip.high >= 1024);
}

TEST_CASE("trip length: trips that start anywhere and run to one end are refused") {
    // A suffix walk: each call starts at a random word and runs to the end.
    // The snapshots crowd the end (a quarter in the first half), and the
    // one furthest back says only how long the longest trip was.
    std::vector<RegisterSample> v;
    std::uint64_t x = 88172645463325252ull, t = 1'000'000;
    for (int k = 0; k < 4000; ++k) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const std::uint64_t start = x % 1024;
        const std::uint64_t at = start + (x >> 20) % (1024 - start);
        v.push_back(word_snap(t += 100'000, 0x5555'0000'0000, 1024, at, false));
    }
    const TripLength trip = trip_length(words_query(v), words_exit());
    CHECK(trip.late);
    CHECK_FALSE(trip.known);
}

TEST_CASE("trip length: arrays each seen a few times find no starts") {
    // Every call walks another array (another end): groups of one or two
    // snapshots cannot tell where their trips began.
    std::vector<RegisterSample> v;
    std::uint64_t t = 1'000'000;
    for (std::uint64_t k = 0; k < 500; ++k) v.push_back(word_snap(t += 100'000, 0x1000'0000 + k * 0x10000, 1024, k % 1000, false));
    const TripLength trip = trip_length(words_query(v), words_exit());
    CHECK(trip.groups == 0);
    CHECK_FALSE(trip.known);
}
