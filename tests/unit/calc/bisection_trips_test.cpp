// A bisection's trip length from its bounds at its snapshots
// (bisection_trips.h, issue 36): bench/accuracy/branchy.c's `search` as GCC
// 12 and Clang 14 build it at -O2, and the flow that ties its header to its
// entries with its exits' time-weighted odds scaled to the length
// (flow_counts.h, TripShare::header).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "ecpi/analyze/calc/bisection_trips.h"
#include "ecpi/analyze/calc/branch_odds.h"
#include "ecpi/analyze/calc/flow_counts.h"
#include "ecpi/analyze/calc/frequency.h"
#include "ecpi/analyze/calc/ranges.h"
#include "hand_cfg.h"
#include "hand_code.h"

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;
using test::hand_assembled;

namespace {

// `int search(const uint32_t *keys, int n, uint32_t key)`: lo = 0, hi = n - 1;
// while (lo <= hi) { mid = (lo + hi) >> 1; if (keys[mid] < key) lo = mid + 1;
// else if (keys[mid] > key) hi = mid - 1; else return mid; } return -1.
// GCC 12 -O2 at 0xd0:
//   d0 sub esi, 1; js 104 | d5 xor ecx, ecx; jmp e7
//   e0 lea ecx, [rax+1]; cmp esi, ecx; jl 104          (lo = mid + 1; lo > hi: out)
//   e7 lea eax, [rsi+rcx]; sar eax, 1; movsxd r8, eax; mov r8d, [rdi+r8*4]; cmp r8d, edx; jb e0
//   f8 cmp edx, r8d; jae 109                            (found)
//   fd lea esi, [rax-1]; cmp esi, ecx; jge e7           (hi = mid - 1)
//   104 mov eax, -1 | 109 ret
std::vector<std::uint8_t> gcc_search() {
    return {0x83, 0xee, 0x01, 0x78, 0x2f, 0x31, 0xc9, 0xeb, 0x0e, 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00,
            0x8d, 0x48, 0x01, 0x39, 0xce, 0x7c, 0x1d, 0x8d, 0x04, 0x0e, 0xd1, 0xf8, 0x4c, 0x63, 0xc0, 0x46,
            0x8b, 0x04, 0x87, 0x41, 0x39, 0xd0, 0x72, 0xe8, 0x44, 0x39, 0xc2, 0x73, 0x0c, 0x8d, 0x70, 0xff,
            0x39, 0xce, 0x7d, 0xe3, 0xb8, 0xff, 0xff, 0xff, 0xff, 0xc3};
}

// Clang 14 -O2 at 0xf0: the bounds through the midpoint's register,
//   f9 add esi, -1; xor r8d, r8d; jmp 11c
//   110 add r9d, 1; mov r8d, r9d; cmp r8d, esi; jg 139   (lo = mid + 1)
//   11c lea r9d, [rsi+r8]; sar r9d, 1; movsxd rcx, r9d; cmp [rdi+rcx*4], edx; jb 110
//   12b jbe 13a                                          (found)
//   12d add r9d, -1; mov esi, r9d; cmp r8d, esi; jle 11c (hi = mid - 1)
std::vector<std::uint8_t> clang_search() {
    return {0xb8, 0xff, 0xff, 0xff, 0xff, 0x85, 0xf6, 0x7e, 0x40, 0x83, 0xc6, 0xff, 0x45, 0x31, 0xc0, 0xeb,
            0x1b, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0x00, 0x00,
            0x41, 0x83, 0xc1, 0x01, 0x45, 0x89, 0xc8, 0x41, 0x39, 0xf0, 0x7f, 0x1d, 0x46, 0x8d, 0x0c, 0x06,
            0x41, 0xd1, 0xf9, 0x49, 0x63, 0xc9, 0x39, 0x14, 0x8f, 0x72, 0xe5, 0x76, 0x0d, 0x41, 0x83, 0xc1,
            0xff, 0x44, 0x89, 0xce, 0x41, 0x39, 0xf0, 0x7e, 0xe3, 0xc3, 0x44, 0x89, 0xc8, 0xc3};
}

std::optional<BisectionSite> only_site(const Cfg& cfg) {
    const LoopInfo loops = find_loops(cfg);
    REQUIRE(loops.loops.size() == 1);
    return bisection_site(cfg, loops, 0);
}

std::uint64_t block_address(const Cfg& cfg, std::uint32_t b) { return cfg.instructions[cfg.blocks[b].first].address; }

constexpr int kRcx = 1, kRsi = 6, kR8 = 8;

// branchy's searches (sorted[i] = 2048 i, 8,192 of them) run for real, one
// snapshot an iteration at GCC's load-and-compare (0xf3), its registers
// the iteration's own. The keys: `key(t)` for trip t. Returns the
// iterations; `found` counts the trips that found their key.
template <typename Key>
std::uint64_t searches(std::vector<RegisterSample>& stream, std::uint64_t trips, Key key, std::uint64_t* found = nullptr,
                       std::int32_t n = 8192, std::uint64_t* low_moves = nullptr) {
    std::uint64_t iterations = 0, time = 0;
    for (std::uint64_t t = 0; t < trips; ++t) {
        const std::uint32_t k = key(t);
        std::int32_t lo = 0, hi = n - 1;
        while (lo <= hi) {
            const std::int32_t mid = (lo + hi) >> 1;
            const std::uint32_t value = static_cast<std::uint32_t>(mid) * 2048u;
            RegisterSample s;
            s.pid = s.tid = 9;
            s.time_ns = time += 100'000;
            s.offset = 0xf3;
            s.regs[0] = static_cast<std::uint32_t>(mid);
            s.regs[kRcx] = static_cast<std::uint32_t>(lo);
            s.regs[kRsi] = static_cast<std::uint32_t>(hi);
            s.regs[2] = k;
            s.regs[kR8] = value;
            stream.push_back(s);
            ++iterations;
            if (value < k) {
                lo = mid + 1;
                if (low_moves) ++*low_moves;
            } else if (value > k) {
                hi = mid - 1;
            } else {
                if (found) ++*found;
                break;
            }
        }
    }
    return iterations;
}

}  // namespace

TEST_CASE("bisection_site: GCC's and Clang's binary search, the bounds moved only to the midpoint plus or minus one") {
    const Cfg gcc = hand_assembled(0xd0, gcc_search());
    const auto site = only_site(gcc);
    REQUIRE(site);
    CHECK(site->low == kRcx);
    CHECK(site->high == kRsi);
    CHECK(site->inclusive);
    CHECK(site->width == 4);
    CHECK(block_address(gcc, site->preheader) == 0xd5);
    // The header and the found test see the iteration's bounds; the two
    // blocks that write one start with the write.
    REQUIRE(site->pcs.size() == 2);
    CHECK(site->pcs[0] == std::pair<std::uint64_t, std::uint64_t>{0xe7, 0xf8});
    CHECK(site->pcs[1] == std::pair<std::uint64_t, std::uint64_t>{0xf8, 0xfd});
    REQUIRE(site->exit_tests.size() == 2);
    CHECK(block_address(gcc, site->exit_tests[0]) == 0xe0);
    CHECK(block_address(gcc, site->exit_tests[1]) == 0xfd);

    const Cfg clang = hand_assembled(0xf0, clang_search());
    const auto other = only_site(clang);
    REQUIRE(other);
    CHECK(other->low == kR8);
    CHECK(other->high == kRsi);
    CHECK(other->inclusive);
    CHECK(block_address(clang, other->preheader) == 0xf9);
    REQUIRE(other->exit_tests.size() == 2);
    CHECK(block_address(clang, other->exit_tests[0]) == 0x110);
    CHECK(block_address(clang, other->exit_tests[1]) == 0x12d);

    // hi = mid - 2 (`lea esi, [rax-2]`) no longer halves: no site.
    auto skip = gcc_search();
    REQUIRE(skip[0xff - 0xd0] == 0xff);
    skip[0xff - 0xd0] = 0xfe;
    CHECK_FALSE(only_site(hand_assembled(0xd0, skip)));
    // The sum shifted left (`shl eax, 1`): no midpoint, no site.
    auto doubled = gcc_search();
    REQUIRE(doubled[0xeb - 0xd0] == 0xf8);
    doubled[0xeb - 0xd0] = 0xe0;
    CHECK_FALSE(only_site(hand_assembled(0xd0, doubled)));
}

TEST_CASE("bisection_trips: the bounds' log2(candidates + 1) at the snapshots averages half a trip") {
    const Cfg gcc = hand_assembled(0xd0, gcc_search());
    const auto site = only_site(gcc);
    REQUIRE(site);
    // branchy's keys: an LCG's bits, almost never one of the table's.
    std::vector<RegisterSample> stream;
    std::uint32_t seed = 12345;
    std::uint64_t found = 0, lows = 0;
    const std::uint64_t iterations = searches(
        stream, 2000, [&](std::uint64_t) { return (seed = seed * 1103515245u + 12345u) >> 8 & 0xffffffu; }, &found, 8192,
        &lows);
    const double truth = static_cast<double>(iterations) / 2000;
    CHECK(found < 10);
    const BisectionTrips trips = bisection_trips(*site, stream, 0, {});
    REQUIRE(trips.known);
    CHECK(trips.snapshots == iterations);
    CHECK(trips.length == doctest::Approx(truth).epsilon(0.03));
    CHECK(trips.low < trips.length);
    CHECK(trips.high > trips.length);
    CHECK_FALSE(trips.uneven);
    CHECK(trips.top == 13);  // 8,192 keys: 13 levels, each within 40% of their median

    CHECK_FALSE(trips.equal_trips);

    // A first iteration that takes three times as long (a cold table):
    // its top level holds three times its share, so the snapshots' mean
    // reads short; every trip starts at 8,192 keys and runs to the bottom,
    // so the length is its levels' (log2 8,193).
    std::vector<RegisterSample> cold = stream;
    for (const auto& s : stream)
        if (s.regs[kRcx] == 0 && s.regs[kRsi] == 8191)
            for (int extra = 0; extra < 2; ++extra) cold.push_back(s);
    const BisectionTrips slow = bisection_trips(*site, cold, 0, {});
    CHECK(slow.uneven);
    CHECK(slow.uneven_level == 13);
    REQUIRE(slow.known);
    CHECK(slow.equal_trips);
    CHECK(slow.start_width == 8192);
    CHECK(slow.length == doctest::Approx(truth).epsilon(0.03));
    CHECK(slow.low <= truth);
    CHECK(slow.high >= truth);
    // Its bounds spell the way each earlier iteration went: the low side's
    // share of the moves is its share of the iterations (the compare's own
    // snapshots hold its time, not its executions).
    REQUIRE(slow.low_moves + slow.high_moves > 10'000);
    CHECK(static_cast<double>(slow.low_moves) / static_cast<double>(slow.low_moves + slow.high_moves) ==
          doctest::Approx(static_cast<double>(lows) / static_cast<double>(iterations)).epsilon(0.03));
    CHECK(trips.low_moves + trips.high_moves == 0);  // even levels: the mean's length, no moves read
    // The same with a second table of 6,000 keys searched as often: no
    // one width starts the trips, so no length is read.
    std::vector<RegisterSample> mixed = cold;
    (void)searches(
        mixed, 2000, [&](std::uint64_t) { return (seed = seed * 1103515245u + 12345u) >> 8 & 0xffffffu; }, nullptr, 6000);
    const BisectionTrips two = bisection_trips(*site, mixed, 0, {});
    CHECK(two.uneven_level > 1);  // what stops it is the widths, not the bottom
    CHECK_FALSE(two.equal_trips);
    CHECK_FALSE(two.known);

    // Snapshots elsewhere (another image, or the writes' pcs) are not read.
    std::vector<RegisterSample> other = stream;
    for (auto& s : other) s.offset = 0xe0;
    CHECK(bisection_trips(*site, other, 0, {}).snapshots == 0);
    CHECK_FALSE(bisection_trips(*site, stream, 1, {}).known);
}

TEST_CASE("bisection_trips: searches that find their key before the bounds meet are not read as a length") {
    const Cfg gcc = hand_assembled(0xd0, gcc_search());
    const auto site = only_site(gcc);
    REQUIRE(site);
    // Every key is one of the first three levels' midpoints: 1 to 3
    // iterations a trip, none with one or two candidates left.
    const std::uint32_t levels[] = {4095, 2047, 6143, 1023, 3071, 5119, 7167};
    std::vector<RegisterSample> stream;
    std::uint64_t found = 0;
    (void)searches(stream, 700, [&](std::uint64_t t) { return levels[t % 7] * 2048u; }, &found);
    CHECK(found == 700);
    const BisectionTrips trips = bisection_trips(*site, stream, 0, {});
    CHECK(trips.uneven);
    CHECK_FALSE(trips.known);
    CHECK(trips.uneven_level == 1);  // no trip reaches its last level
    CHECK(trips.levels[1] == 0);
}

// glibc 2.36's `re_node_set_contains` (regex_internal.c; Debian's libc.so.6
// at 0xdcd30, here at 0x30), a lower bound: idx = 0, right = nelem - 1;
// while (idx < right) { mid = (idx + right) / 2; if (elems[mid] < elem) idx =
// mid + 1; else right = mid; }
//   30 mov edx, [rdi+4]; xor eax, eax; test edx, edx; jle 65
//   39 mov r8, [rdi+8]; sub edx, 1; xor ecx, ecx; jmp 57
//   48 lea eax, [rcx+rdx]; shr eax, 1; mov edi, eax; cmp [r8+rdi*4], esi; jl 70
//   55 mov edx, eax                                     (right = mid)
//   57 cmp ecx, edx; jb 48                              (the header: its last test sees idx == right)
//   5b mov edx, ecx; xor eax, eax; cmp [r8+rdx*4], esi; je 78 | 65 ret
//   70 lea ecx, [rax+1]; jmp 57                         (idx = mid + 1)
std::vector<std::uint8_t> glibc_lower_bound() {
    return {0x8b, 0x57, 0x04, 0x31, 0xc0, 0x85, 0xd2, 0x7e, 0x2c, 0x4c, 0x8b, 0x47, 0x08, 0x83, 0xea, 0x01,
            0x31, 0xc9, 0xeb, 0x13, 0x0f, 0x1f, 0x40, 0x00, 0x8d, 0x04, 0x11, 0xd1, 0xe8, 0x89, 0xc7, 0x41,
            0x39, 0x34, 0xb8, 0x7c, 0x1b, 0x89, 0xc2, 0x39, 0xd1, 0x72, 0xed, 0x89, 0xca, 0x31, 0xc0, 0x41,
            0x39, 0x34, 0x90, 0x74, 0x13, 0xc3, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x8d, 0x48, 0x01, 0xeb, 0xe2, 0x0f, 0x1f, 0x00, 0x8d, 0x41, 0x01, 0xc3};
}

TEST_CASE("bisection_trips: a lower bound's last test, its bounds met, is no level and no unknown") {
    const Cfg cfg = hand_assembled(0x30, glibc_lower_bound());
    const auto site = only_site(cfg);
    REQUIRE(site);
    CHECK(site->low == kRcx);
    CHECK(site->high == 2);  // edx
    CHECK_FALSE(site->inclusive);
    REQUIRE(site->pcs.size() == 2);
    REQUIRE(site->exit_tests.size() == 1);
    CHECK(block_address(cfg, site->exit_tests[0]) == 0x57);
    // Lookups of random elements in sets of 16 run for real: a snapshot at
    // every execution of the header (0x57) and of the compare (0x4f), so
    // each trip's last header test (idx == right) is one snapshot in nine.
    constexpr std::uint32_t kElems = 16;
    std::vector<RegisterSample> stream;
    std::uint64_t time = 0, iterations = 0, trips = 0;
    std::uint32_t seed = 777;
    const auto snapshot = [&](std::uint64_t pc, std::uint32_t idx, std::uint32_t right) {
        RegisterSample s;
        s.pid = s.tid = 9;
        s.time_ns = time += 100'000;
        s.offset = pc;
        s.regs[kRcx] = idx;
        s.regs[2] = right;
        stream.push_back(s);
    };
    for (; trips < 3000; ++trips) {
        const std::uint32_t elem = (seed = seed * 1103515245u + 12345u) >> 16 & 63u;  // elems are 0, 4, ..., 60
        std::uint32_t idx = 0, right = kElems - 1;
        for (;;) {
            snapshot(0x57, idx, right);
            if (!(idx < right)) break;
            snapshot(0x4f, idx, right);
            ++iterations;
            const std::uint32_t mid = (idx + right) / 2;
            if (mid * 4 < elem)
                idx = mid + 1;
            else
                right = mid;
        }
    }
    const BisectionTrips found = bisection_trips(*site, stream, 0, {});
    CHECK(found.at_exit == trips);
    CHECK(found.unknown == 0);
    REQUIRE(found.known);
    CHECK(found.length == doctest::Approx(static_cast<double>(iterations) / trips).epsilon(0.03));
    CHECK(found.top == 4);
}

TEST_CASE("a bisection's header runs its entries times its length; its exits' odds scaled to it, its halves' stand") {
    // branchy's `search` as GCC builds it, as recorded (/tmp/cf29, docs/ACCURACY.md): 32.9 M calls
    // from its callers' measured sites; the header's snapshots 5,947 of 11,942 taken (the halves);
    // the lo side's exit test left in 452 of 4,916, the hi side's in 140 of 1,505 (a trip of 10.8
    // where the length says 13.1); the found test never, nor `n <= 0` (100). The samples are ranged.
    test::HandCfg fx;
    const std::uint32_t b0 = fx.add_block({1, 1});        // sub esi, 1; js
    const std::uint32_t pre = fx.add_block({1, 1});       // xor ecx, ecx; jmp
    const std::uint32_t lo = fx.add_block({1, 1, 1});     // lea ecx; cmp; jl out
    const std::uint32_t h = fx.add_block({1, 1, 1, 1, 1, 1});
    const std::uint32_t eq = fx.add_block({1, 1});        // cmp; jae found
    const std::uint32_t hi = fx.add_block({1, 1, 1});     // lea esi; cmp; jge header
    const std::uint32_t none = fx.add_block({1});         // mov eax, -1
    const std::uint32_t ret = fx.add_block({1});
    fx.edge(kEntryBlock, b0, EdgeKind::kEntry);
    const auto next_edge = [&] { return static_cast<std::uint32_t>(fx.cfg.edges.size()); };
    const std::uint32_t b0_none = next_edge();
    fx.edge(b0, none, EdgeKind::kBranch);
    fx.edge(b0, pre, EdgeKind::kFallThrough);
    const std::uint32_t entry_edge = next_edge();
    fx.edge(pre, h, EdgeKind::kJump);
    const std::uint32_t lo_out = next_edge();
    fx.edge(lo, none, EdgeKind::kBranch);
    const std::uint32_t lo_stay = next_edge();
    fx.edge(lo, h, EdgeKind::kFallThrough);
    const std::uint32_t h_lo = next_edge();
    fx.edge(h, lo, EdgeKind::kBranch);
    const std::uint32_t h_eq = next_edge();
    fx.edge(h, eq, EdgeKind::kFallThrough);
    const std::uint32_t eq_found = next_edge();
    fx.edge(eq, ret, EdgeKind::kBranch);
    const std::uint32_t eq_hi = next_edge();
    fx.edge(eq, hi, EdgeKind::kFallThrough);
    const std::uint32_t hi_stay = next_edge();
    fx.edge(hi, h, EdgeKind::kBranch);
    const std::uint32_t hi_out = next_edge();
    fx.edge(hi, none, EdgeKind::kFallThrough);
    fx.edge(none, ret, EdgeKind::kFallThrough);
    fx.edge(ret, kExitBlock, EdgeKind::kReturn);
    const LoopInfo loops = find_loops(fx.cfg);
    REQUIRE(loops.loops.size() == 1);
    REQUIRE(loops.loops[0].header == h);

    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, b0, 50);
    fx.sample(samples, pre, 50);
    fx.sample(samples, lo, 1600);
    fx.sample(samples, h, 2400);
    fx.sample(samples, eq, 2500);
    fx.sample(samples, hi, 500);
    fx.sample(samples, ret, 700);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
    std::vector<ClassRange> ranges(fc.count);
    for (std::uint32_t b = 0; b < fx.cfg.blocks.size(); ++b) ranges[fc.block_class[b]] = {true, 20, 8500};

    std::vector<BranchOdds> odds(5);
    odds[4] = {.block = b0, .taken_edge = b0_none, .fall_edge = b0_none + 1, .taken = 0, .total = 100};
    odds[0] = {.block = h, .taken_edge = h_lo, .fall_edge = h_eq, .taken = 5947, .total = 11942};
    odds[1] = {.block = lo, .taken_edge = lo_out, .fall_edge = lo_stay, .taken = 452, .total = 4916};
    odds[2] = {.block = hi, .taken_edge = hi_stay, .fall_edge = hi_out, .taken = 1365, .total = 1505};
    odds[3] = {.block = eq, .taken_edge = eq_found, .fall_edge = eq_hi, .taken = 0, .total = 5014};
    TripShare trip;
    trip.from_entry = true;
    trip.block = pre;
    trip.exit_edge = entry_edge;
    trip.header = h;
    trip.exit_tests = {lo, hi};
    trip.length = 13.13;
    trip.weight = 19892;
    const std::vector<TripShare> trips = {trip};

    FlowCountsInput in;
    in.cfg = &fx.cfg;
    in.classes = &fc;
    in.timing = &fx.timing;
    in.samples = samples;
    in.odds = odds;
    in.period_cycles = 227'800;  // 100 us at 2,278 MHz
    in.entry_executions = 32.93e6;
    in.loops = &loops;
    in.trips = trips;
    conserve_flow(est, ranges, in);
    const double p = in.period_cycles;
    const double header = est.block_frequency[h] * p;
    CHECK(est.block_frequency[pre] * p == doctest::Approx(32.93e6).epsilon(0.01));
    CHECK(header == doctest::Approx(32.93e6 * 13.13).epsilon(0.02));
    // The halves split as the header's odds (callgrind: 213.5 M and 212.5 M of 426 M); the exits
    // add up to the entries.
    CHECK(est.block_frequency[lo] * p == doctest::Approx(header * 5948 / 11944).epsilon(0.03));
    CHECK(est.block_frequency[eq] * p == doctest::Approx(header * 5996 / 11944).epsilon(0.03));
    CHECK((est.edge_frequency[lo_out] + est.edge_frequency[hi_out]) * p == doctest::Approx(32.93e6).epsilon(0.03));
    CHECK(est.edge_frequency[eq_found] * p < 0.01 * 32.93e6);
}
