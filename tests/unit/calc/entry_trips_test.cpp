// A loop's trip length from its trips' first iterations (entry_trips.h,
// issue 36): wordfreq's hash probe, whose exit compares a loaded key, and
// the flow that ties such a loop's count to its entries (flow_counts.h,
// TripShare::from_entry).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "ecpi/analyze/calc/entry_trips.h"
#include "ecpi/analyze/calc/flow_counts.h"
#include "hand_cfg.h"
#include "hand_code.h"

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;
using test::hand_assembled;
using test::wordfreq_count_words;

namespace {

// GCC 12 -O2's count_words of tests/testprogs/pgo/wordfreq.c at 0x1590
// (hand_code.h's wordfreq_count_words). Its hash probe:
//   0x1632 sub rdi, 1; mov rsi, rcx; mov r8, [r14]; and rsi, rdi; jmp 0x1654
//   0x1648 cmp rcx, [rax]; je 0x1698            (the key matches: out)
//   0x164d add rsi, 1; and rsi, rdi               (the latch)
//   0x1654 mov rax, rsi; shl rax, 4; add rax, r8; mov r9d, [rax+8]; test r9d, r9d; jne 0x1648

struct Probe {
    Cfg cfg = hand_assembled(0x1590, wordfreq_count_words());
    LoopInfo loops = find_loops(cfg);
    std::uint32_t probe = 0;  // the probe loop's index
    Probe() {
        REQUIRE(loops.loops.size() == 2);
        probe = loops.loops[0].parent == kNoLoop ? 1 : 0;
    }
};

constexpr std::uint64_t kMask = 0x3fff;  // 16,384 slots

// A snapshot at `pc` in the probe loop of the trip for `hash`, k iterations
// into it.
RegisterSample at_probe(std::uint64_t pc, std::uint64_t hash, std::uint64_t k, std::uint64_t time) {
    RegisterSample s;
    s.pid = s.tid = 7;
    s.time_ns = time;
    s.offset = pc;
    s.regs[1] = hash;                          // rcx
    s.regs[7] = kMask;                         // rdi (after the preheader's sub)
    s.regs[6] = ((hash & kMask) + k) & kMask;  // rsi
    s.regs[8] = 0x7f0000000000;                // r8: the slots
    s.regs[0] = s.regs[8] + 16 * s.regs[6];    // rax
    return s;
}

}  // namespace

TEST_CASE("entry_trips: a hash probe's index starts at the hash its preheader masks, which the loop leaves alone") {
    Probe p;
    const auto site = entry_trip_site(p.cfg, p.loops, p.probe);
    REQUIRE(site);
    CHECK(site->gp == 6);  // rsi
    CHECK(site->top_begin == 0x1654);
    CHECK(site->top_end == 0x1667);  // the header never writes rsi
    CHECK(p.cfg.instructions[p.cfg.blocks[site->preheader].first].address == 0x1632);
    CHECK(p.cfg.edges[site->entry_edge].to == p.loops.loops[p.probe].header);
    CHECK(p.cfg.edges[site->back_edge].from == p.loops.loops[p.probe].latches.front());
    const auto start = trip_start(p.cfg, p.loops, *site, at_probe(0x1662, 0x9e3779b97f4a7c15, 3, 0));
    REQUIRE(start);
    CHECK(*start == (0x9e3779b97f4a7c15 & kMask));

    // The outer scan loop steps rbx on every path but calls grow(): no site.
    CHECK_FALSE(entry_trip_site(p.cfg, p.loops, 1 - p.probe));

    // The index moved by a load instead of `add rsi, 1` (mov rsi, [rax];
    // nop) may come back to its start in any iteration: no site.
    auto code = wordfreq_count_words();
    const std::size_t at = 0x164d - 0x1590;
    REQUIRE(code[at + 2] == 0xc6);
    code[at + 1] = 0x8b;
    code[at + 2] = 0x30;
    code[at + 3] = 0x90;
    const Cfg loaded = hand_assembled(0x1590, code);
    const LoopInfo loaded_loops = find_loops(loaded);
    for (std::uint32_t l = 0; l < loaded_loops.loops.size(); ++l) CHECK_FALSE(entry_trip_site(loaded, loaded_loops, l));
}

TEST_CASE("entry_trips: the header's snapshots over those at a trip's start are the trip length") {
    Probe p;
    const auto site = entry_trip_site(p.cfg, p.loops, p.probe);
    REQUIRE(site);
    // 600 trips, of 1 (70%), 2 (20%) and 3 (10%) iterations: 1.4 a trip.
    // One snapshot an iteration at the header's load and one at its shift.
    std::vector<RegisterSample> stream;
    std::uint64_t time = 0, iterations = 0;
    for (std::uint64_t t = 0; t < 600; ++t) {
        const std::uint64_t hash = 0x9e3779b97f4a7c15 * (t + 1);
        const std::uint64_t length = t % 10 < 7 ? 1 : t % 10 < 9 ? 2 : 3;
        for (std::uint64_t k = 0; k < length; ++k, ++iterations) {
            stream.push_back(at_probe(0x1662, hash, k, time += 1000));
            stream.push_back(at_probe(0x1657, hash, k, time += 1000));
        }
    }
    REQUIRE(iterations == 840);
    const EntryTrips even = entry_trips(p.cfg, p.loops, *site, stream, 0, {});
    REQUIRE(even.known);
    CHECK(even.snapshots == 1680);
    CHECK(even.first == 1200);
    CHECK(even.length == doctest::Approx(1.4));
    CHECK(even.low < 1.4);
    CHECK(even.high > 1.4);

    // A first iteration that waits at its load twice as long (its line
    // missed): the load's pc sees first iterations twice. The pooled length
    // is low; the shift's pc, which waits as long in every iteration, keeps
    // the range holding the truth.
    std::vector<RegisterSample> slow = stream;
    for (const auto& s : stream)
        if (s.offset == 0x1662 && s.regs[6] == (s.regs[1] & kMask)) {
            slow.push_back(s);
            slow.back().time_ns += 1;
        }
    const EntryTrips weighted = entry_trips(p.cfg, p.loops, *site, slow, 0, {});
    REQUIRE(weighted.known);
    CHECK(weighted.length < 1.3);
    CHECK(weighted.low <= 1.4);
    CHECK(weighted.high >= 1.4);

    // Snapshots past the header's top, or too few at a trip's start: no length.
    std::vector<RegisterSample> few;
    for (const auto& s : stream)
        if (s.regs[6] != (s.regs[1] & kMask) || few.size() < 4) few.push_back(s);
    CHECK_FALSE(entry_trips(p.cfg, p.loops, *site, few, 0, {}).known);
}

TEST_CASE("a loop's trip length from its trips' starts ties its count to its preheader's, where its samples say 20x") {
    // wordfreq's probe: entry -> P (the preheader);  P -> H;  H -> C (a slot
    // in use) | N (a free one);  C -> X (the key matches) | L;  L -> H (the
    // latch);  N -> X;  X -> exit. 100 entries a period from the callers'
    // measured call sites; the loop's samples over the model's cycles say
    // F 2,000 in the header and the compare, 1,900 in the latch (its load's
    // misses), ranged; its trips' starts say 1.25 iterations a trip.
    test::HandCfg fx;
    const std::uint32_t pre = fx.add_block({1, 1});
    const std::uint32_t h = fx.add_block({1, 1, 1});
    const std::uint32_t c = fx.add_block({1, 1});
    const std::uint32_t l = fx.add_block({1, 1});
    const std::uint32_t n = fx.add_block({1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, pre, EdgeKind::kEntry);
    TripShare trip;
    trip.from_entry = true;
    trip.block = pre;
    trip.exit_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
    fx.edge(pre, h, EdgeKind::kJump);
    fx.edge(h, c, EdgeKind::kBranch);
    fx.edge(h, n, EdgeKind::kFallThrough);
    fx.edge(c, x, EdgeKind::kBranch);
    fx.edge(c, l, EdgeKind::kFallThrough);
    trip.stay_edge = static_cast<std::uint32_t>(fx.cfg.edges.size());
    fx.edge(l, h, EdgeKind::kFallThrough);
    fx.edge(n, x, EdgeKind::kFallThrough);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    trip.length = 1.25;
    trip.weight = 8000;
    std::vector<std::uint64_t> samples(fx.cfg.instructions.size(), 0);
    fx.sample(samples, pre, 100);
    fx.sample(samples, h, 2000);
    fx.sample(samples, c, 2000);
    fx.sample(samples, l, 1900);
    fx.sample(samples, x, 100);
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    FrequencyEstimate est = estimate_frequencies(fx.cfg, fc, fx.timing, samples, EstimatorOptions{});
    std::vector<ClassRange> ranges(fc.count);
    for (std::uint32_t b : {h, c, l}) ranges[fc.block_class[b]] = {true, 20, 4000};
    FlowCountsInput in;
    in.cfg = &fx.cfg;
    in.classes = &fc;
    in.timing = &fx.timing;
    in.samples = samples;
    in.period_cycles = 1000;
    in.entry_executions = 100'000;
    const std::vector<TripShare> trips = {trip};
    in.trips = trips;
    conserve_flow(est, ranges, in);
    CHECK(est.block_frequency[pre] == doctest::Approx(100).epsilon(0.01));
    CHECK(est.block_frequency[h] == doctest::Approx(125).epsilon(0.02));
    CHECK(est.edge_frequency[trip.stay_edge] == doctest::Approx(25).epsilon(0.05));
    CHECK(est.block_frequency[n] < 1);
}

TEST_CASE("entry_trips: a loop's header and latch range over their entries' range times the length's interval") {
    EntryTrips trips;
    trips.known = true;
    trips.length = 1.2;
    trips.low = 1.1;
    trips.high = 1.7;
    // wordfreq's probe: the header's samples allowed 27 to 3,820 (M), its
    // preheader 4.5 to 206: the header 27 to 350, the latch 0.5 to 144.
    ClassRange header{true, 27, 3820};
    CHECK(narrow_by_entry_trips(header, trips, 4.5, 206, 0));
    CHECK(header.min == doctest::Approx(27));
    CHECK(header.max == doctest::Approx(206 * 1.7));
    ClassRange latch{true, 0.1, 3820};
    CHECK(narrow_by_entry_trips(latch, trips, 4.5, 206, 1));
    CHECK(latch.min == doctest::Approx(4.5 * 0.1));
    CHECK(latch.max == doctest::Approx(206 * 0.7));
    // Where they do not overlap the samples' range stands; a point stays one.
    ClassRange apart{true, 1000, 3820};
    CHECK_FALSE(narrow_by_entry_trips(apart, trips, 4.5, 206, 0));
    CHECK(apart.min == 1000);
    ClassRange point{false, 50, 50};
    CHECK_FALSE(narrow_by_entry_trips(point, trips, 4.5, 206, 0));
}

TEST_CASE("entry_trips: a first iteration slower at every pc than the rest: its second iterations widen the range") {
    // GCC 12 -O2's row sum (`for r < rows: n = len[r]; for j < n: s += row[j] * (j + 3)`, rows of
    // 3 to 10 words): the inner loop's preheader `lea r8, [rax+3]; mov eax, 3` starts rax at 3, and
    // its header `mov edx, [rdi+rax*4-0xc]; imul rdx, rax; add rax, 1; ...; cmp rax, r8; jne` steps
    // it by 1 every iteration.
    const Cfg cfg = hand_assembled(
        0x1330, {0x85, 0xd2, 0x7e, 0x49, 0x4c, 0x63, 0xd2, 0x45, 0x31, 0xc9, 0x31, 0xc9, 0x0f, 0x1f, 0x40, 0x00,
                 0x42, 0x0f, 0xb6, 0x04, 0x0e, 0x84, 0xc0, 0x74, 0x23, 0x4c, 0x8d, 0x40, 0x03, 0xb8, 0x03, 0x00,
                 0x00, 0x00, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x8b, 0x54, 0x87, 0xf4, 0x48, 0x0f, 0xaf, 0xd0,
                 0x48, 0x83, 0xc0, 0x01, 0x48, 0x01, 0xd1, 0x4c, 0x39, 0xc0, 0x75, 0xec, 0x49, 0x83, 0xc1, 0x01,
                 0x48, 0x83, 0xc7, 0x40, 0x4d, 0x39, 0xca, 0x75, 0xc7, 0x48, 0x89, 0xc8, 0xc3, 0x31, 0xc9, 0x48,
                 0x89, 0xc8, 0xc3});
    const LoopInfo loops = find_loops(cfg);
    std::optional<EntryTripSite> site;
    for (std::uint32_t l = 0; l < loops.loops.size() && !site; ++l)
        if (loops.loops[l].parent != kNoLoop) site = entry_trip_site(cfg, loops, l);
    REQUIRE(site);
    CHECK(site->gp == 0);  // rax
    CHECK(site->step == 1);
    // 400 rows of 3 to 10 words (6.5 a row), one snapshot an iteration at
    // each of the header's two pcs before the add.
    std::vector<RegisterSample> even, slow;
    std::uint64_t time = 0, iterations = 0;
    for (std::uint64_t row = 0; row < 400; ++row) {
        const std::uint64_t words = 3 + row % 8;
        for (std::uint64_t k = 0; k < words; ++k, ++iterations)
            for (std::uint64_t pc : {0x1358, 0x135c}) {
                RegisterSample s;
                s.pid = s.tid = 7;
                s.time_ns = time += 1000;
                s.offset = pc;
                s.regs[0] = 3 + k;
                s.regs[8] = 3 + words;  // r8: the bound
                even.push_back(s);
                // The first iteration after the previous row's mispredicted
                // exit takes four times as long: three more snapshots.
                for (int extra = 0; k == 0 && extra < 4; ++extra) slow.push_back(s);
                if (k > 0) slow.push_back(s);
            }
    }
    const double truth = static_cast<double>(iterations) / 400;
    REQUIRE(truth == doctest::Approx(6.5));
    const EntryTrips fair = entry_trips(cfg, loops, *site, even, 0, {});
    REQUIRE(fair.known);
    CHECK(fair.length == doctest::Approx(truth));
    CHECK_FALSE(fair.disagree);
    CHECK(fair.later_length == doctest::Approx(truth));
    const EntryTrips biased = entry_trips(cfg, loops, *site, slow, 0, {});
    REQUIRE(biased.known);
    CHECK(biased.length < 0.5 * truth);  // the first iterations' share, four times its own
    CHECK(biased.disagree);
    CHECK(biased.later_length == doctest::Approx(truth));
    CHECK(biased.low <= truth);
    CHECK(biased.high >= truth);
}

TEST_CASE("entry_trips: a header whose top holds only first iterations is read past its step too") {
    // jsonq's key hash (tests/testprogs/pgo/jsonq.c `intern`, GCC 12 -O2):
    //   2316 movabs rsi, 0x100000001b3; mov rcx, [rsp]; mov rax, rcx; lea rdi, [rbp+rcx]; nop
    //   2330 movzx edx, byte [rax]; add rax, 1; xor rdx, r13; imul rdx, rsi; mov r13, rdx; cmp rdi, rax; jne 2330
    //   2346 mov rbx, r13; ret
    const Cfg cfg = hand_assembled(
        0x2316, {0x48, 0xbe, 0xb3, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x48, 0x8b, 0x0c, 0x24, 0x48, 0x89,
                 0xc8, 0x48, 0x8d, 0x7c, 0x0d, 0x00, 0x0f, 0x1f, 0x40, 0x00, 0x0f, 0xb6, 0x10, 0x48, 0x83, 0xc0,
                 0x01, 0x4c, 0x31, 0xea, 0x48, 0x0f, 0xaf, 0xd6, 0x49, 0x89, 0xd5, 0x48, 0x39, 0xc7, 0x75, 0xea,
                 0x4c, 0x89, 0xeb, 0xc3});
    const LoopInfo loops = find_loops(cfg);
    REQUIRE(loops.loops.size() == 1);
    const auto site = entry_trip_site(cfg, loops, 0);
    REQUIRE(site);
    CHECK(site->gp == 0);  // rax
    CHECK(site->top_begin == 0x2330);
    CHECK(site->top_end == 0x2333);
    CHECK(site->after_begin == 0x2337);
    CHECK(site->after_end == 0x2346);
    CHECK(site->after_add == 1);
    // 700 keys of 1 to 7 bytes (4 a key). As recorded on a Zen 5 VM, the
    // top's pc holds a snapshot only in first iterations (the load before
    // the loop waited; its own predicted back edge does not): one there a
    // trip, and one an iteration at the xor, the mov after the imul and
    // the jump.
    std::vector<RegisterSample> stream;
    std::uint64_t time = 0, iterations = 0;
    for (std::uint64_t key = 0; key < 700; ++key) {
        const std::uint64_t bytes = 1 + key % 7, start = 0x5000 + 16 * key;
        for (std::uint64_t k = 0; k < bytes; ++k, ++iterations)
            for (std::uint64_t pc : {0x2330, 0x2337, 0x233e, 0x2344}) {
                if (pc == 0x2330 && k > 0) continue;
                RegisterSample s;
                s.pid = s.tid = 7;
                s.time_ns = time += 1000;
                s.offset = pc;
                s.regs[1] = start;                              // rcx
                s.regs[5] = bytes;                              // rbp
                s.regs[7] = start + bytes;                      // rdi
                s.regs[0] = start + k + (pc == 0x2330 ? 0 : 1);  // rax, past its add
                stream.push_back(s);
            }
    }
    const double truth = static_cast<double>(iterations) / 700;
    REQUIRE(truth == doctest::Approx(4.0));
    const EntryTrips trips = entry_trips(cfg, loops, *site, stream, 0, {});
    REQUIRE(trips.known);
    CHECK(trips.snapshots == stream.size());
    CHECK(trips.first == 4 * 700);
    CHECK(trips.low <= truth);
    CHECK(trips.high >= truth);
    CHECK(trips.length > 2.5);  // the top alone reads 1
    // The top's snapshots alone read one iteration a trip, the range a point.
    std::vector<RegisterSample> top;
    for (const auto& s : stream)
        if (s.offset == 0x2330) top.push_back(s);
    const EntryTrips top_only = entry_trips(cfg, loops, *site, top, 0, {});
    REQUIRE(top_only.known);
    CHECK(top_only.length == doctest::Approx(1.0));
}
