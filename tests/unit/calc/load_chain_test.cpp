// Pointer chases timed by the machine's measured chase latency
// (load_chain.h): finding the chain in real compiler output, the latency at
// a working set between measured sizes, and the evidence a loop must show.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "ecpi/analyze/calc/load_chain.h"
#include "ecpi/analyze/calc/loops.h"
#include "hand_code.h"

using namespace ecpi::analyze;
using ecpi::store::ChaseLatency;
using ecpi::store::RegisterSample;

namespace {

constexpr int kRdi = 7;
constexpr std::uint64_t kMiB = 1 << 20;

// GCC 12 -O2's walk_until of bench/accuracy/chase.c at 0x1360:
// `while (p) { s ^= p->value + 1; p = p->next; }`.
std::vector<std::uint8_t> walk_until() {
    return {0x31, 0xd2, 0x48, 0x85, 0xff, 0x74, 0x1c, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x48, 0x8b, 0x47, 0x08, 0x48, 0x8b, 0x3f, 0x48, 0x83, 0xc0, 0x01, 0x48, 0x31, 0xc2, 0x48, 0x85,
            0xff, 0x75, 0xed, 0x48, 0x89, 0xd0, 0xc3};
}

// `do { p = p->next; p += 1; } while (p)` at 0x2000: the chased register
// is also stepped, so its loads are no plain chain.
std::vector<std::uint8_t> chase_and_step() {
    return {0x48, 0x8b, 0x3f, 0x48, 0x83, 0xc7, 0x08, 0x48, 0x85, 0xff, 0x75, 0xf4, 0xc3};
}

const std::vector<ChaseLatency> kSizes = {
    {1 * kMiB, 35, 26, 42}, {4 * kMiB, 227, 140, 256}, {16 * kMiB, 316, 248, 325}, {64 * kMiB, 592, 475, 603}};

// `n` snapshots in the loop with rdi at `distinct` addresses spread evenly over `span` bytes.
std::vector<RegisterSample> snapshots(std::uint32_t n, std::uint32_t distinct, std::uint64_t span) {
    std::vector<RegisterSample> out;
    for (std::uint32_t i = 0; i < n; ++i) {
        RegisterSample s;
        s.tid = 1;
        s.time_ns = 100000ull * i;
        s.offset = 0x1374;
        s.regs[kRdi] = 0x7f0000000000ull + (i % distinct) * (span / distinct) / 64 * 64;
        out.push_back(s);
    }
    return out;
}

bool in_walk_until_loop(std::uint64_t pc) { return pc >= 0x1370 && pc < 0x1383; }

}  // namespace

TEST_CASE("walk_until's loop chases rdi once an iteration") {
    const Cfg cfg = test::hand_assembled(0x1360, walk_until());
    const LoopInfo loops = find_loops(cfg);
    REQUIRE(loops.loops.size() == 1);
    const Loop& loop = loops.loops[0];
    const LoadChain chain = find_load_chain(cfg, loop, loop.blocks);
    CHECK(chain.found);
    CHECK(chain.gp == kRdi);
    CHECK(chain.loads == 1);
}

TEST_CASE("a chased register the loop also steps is no chain") {
    const Cfg cfg = test::hand_assembled(0x2000, chase_and_step());
    const LoopInfo loops = find_loops(cfg);
    REQUIRE(loops.loops.size() == 1);
    const LoadChain chain = find_load_chain(cfg, loops.loops[0], loops.loops[0].blocks);
    CHECK_FALSE(chain.found);
    CHECK(chain.why_not.find("written by other instructions") != std::string::npos);
}

TEST_CASE("the chase latency between measured sizes") {
    SUBCASE("at a measured size: its median, its slowest round, the fastest of the size below") {
        const ChaseTime t = chase_time_at(kSizes, 16.0 * kMiB);
        REQUIRE(t.known);
        CHECK(t.ns == doctest::Approx(316));
        CHECK(t.ns_high == doctest::Approx(325));
        CHECK(t.ns_low == doctest::Approx(140));
    }
    SUBCASE("halfway in log(size) between two sizes") {
        const ChaseTime t = chase_time_at(kSizes, 32.0 * kMiB);
        REQUIRE(t.known);
        CHECK(t.ns == doctest::Approx((316 + 592) / 2.0));
        CHECK(t.ns_low == doctest::Approx(248));
        CHECK(t.ns_high == doctest::Approx(603));
    }
    SUBCASE("below the smallest size the loads may hit a cache: undecided") {
        const ChaseTime t = chase_time_at(kSizes, 256.0 * 1024);
        CHECK_FALSE(t.known);
        CHECK(t.why_not.find("below the smallest") != std::string::npos);
    }
    SUBCASE("beyond the largest size: undecided") { CHECK_FALSE(chase_time_at(kSizes, 256.0 * kMiB).known); }
    SUBCASE("nothing measured") { CHECK_FALSE(chase_time_at({}, 16.0 * kMiB).known); }
}

TEST_CASE("a chase loop's iteration from its snapshots' working set") {
    const Cfg cfg = test::hand_assembled(0x1360, walk_until());
    const LoopInfo loops = find_loops(cfg);
    REQUIRE(loops.loops.size() == 1);
    const LoadChain chain = find_load_chain(cfg, loops.loops[0], loops.loops[0].blocks);
    REQUIRE(chain.found);

    SUBCASE("many distinct nodes over 16 MiB: one step of the 16 MiB chase") {
        const auto stream = snapshots(200, 200, 16 * kMiB);
        const ChainSpan span = chain_span(stream, {}, 0, in_walk_until_loop, chain.gp);
        CHECK(span.snapshots == 200);
        CHECK(span.distinct == 200);
        const ChainIteration it = chain_iteration(chain, span, kSizes, 2.0);
        REQUIRE(it.known);
        CHECK(it.ns > 300);
        CHECK(it.ns < 330);
        CHECK(it.ns_low <= it.ns);
        CHECK(it.ns_high >= it.ns);
    }
    SUBCASE("the range reaches a program slower than record's bare chase") {
        // Record's measurement at 2,500 samples/s (2026-11-28), and chase.c's
        // walk_until in the same recording: 179 ns a step at 16 MiB.
        const std::vector<ecpi::store::ChaseLatency> measured = {{1u << 20, 14.36, 11.29, 19.64},
                                                                 {4u << 20, 23.34, 20.29, 26.04},
                                                                 {16u << 20, 125.26, 124.54, 130.57},
                                                                 {64u << 20, 209.35, 209.22, 209.75}};
        const auto stream = snapshots(200, 200, 16 * kMiB);
        const ChainSpan span = chain_span(stream, {}, 0, in_walk_until_loop, chain.gp);
        const ChainIteration it = chain_iteration(chain, span, measured, 2.0);
        REQUIRE(it.known);
        CHECK(it.ns < 179);
        CHECK(it.ns_high > 179);
    }
    SUBCASE("a body slower than the chase sets the iteration") {
        const auto stream = snapshots(200, 200, 16 * kMiB);
        const ChainSpan span = chain_span(stream, {}, 0, in_walk_until_loop, chain.gp);
        const ChainIteration it = chain_iteration(chain, span, kSizes, 1000.0);
        REQUIRE(it.known);
        CHECK(it.ns == doctest::Approx(1000));
    }
    SUBCASE("a list of 20 nodes scattered over 16 MiB stays in cache: undecided") {
        const auto stream = snapshots(200, 20, 16 * kMiB);
        const ChainIteration it =
            chain_iteration(chain, chain_span(stream, {}, 0, in_walk_until_loop, chain.gp), kSizes, 2.0);
        CHECK_FALSE(it.known);
        CHECK(it.why_not.find("revisit") != std::string::npos);
    }
    SUBCASE("too few snapshots") {
        const auto stream = snapshots(10, 10, 16 * kMiB);
        CHECK_FALSE(
            chain_iteration(chain, chain_span(stream, {}, 0, in_walk_until_loop, chain.gp), kSizes, 2.0).known);
    }
    SUBCASE("snapshots outside the loop do not count") {
        auto stream = snapshots(200, 200, 16 * kMiB);
        for (auto& s : stream) s.offset = 0x1383;
        CHECK(chain_span(stream, {}, 0, in_walk_until_loop, chain.gp).snapshots == 0);
    }
}

TEST_CASE("--chase-latency sizes") {
    auto ok = parse_chase_latency("16:316:248:325,64:592");
    REQUIRE(ok.ok());
    REQUIRE(ok->size() == 2);
    CHECK((*ok)[0].bytes == 16 * kMiB);
    CHECK((*ok)[0].ns_low == doctest::Approx(248));
    CHECK((*ok)[1].ns_low == doctest::Approx(592));
    CHECK_FALSE(parse_chase_latency("").ok());
    CHECK_FALSE(parse_chase_latency("16").ok());
    CHECK_FALSE(parse_chase_latency("16:300:350:320").ok());  // low above the median
    CHECK_FALSE(parse_chase_latency("16:300x").ok());
    CHECK_FALSE(parse_chase_latency("16:300:250:350:9").ok());  // a fifth field
    CHECK_FALSE(parse_chase_latency("-1:300").ok());
}
