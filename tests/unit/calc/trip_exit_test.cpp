// The way out of a loop with several latches (trip_exit.h): branchy's state
// machine as gcc -O2 compiles it, its trip length from snapshots, and
// latches that disagree.
#include <doctest/doctest.h>

#include <vector>

#include "ecpi/analyze/calc/trip_exit.h"
#include "hand_cfg.h"

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;

namespace {

// bench/accuracy/branchy.c's `machine` (gcc 12 -O2), at its address 0x13a0:
// 13a0 test esi, esi; jle 13f0; movsxd rsi, esi; xor edx, edx;
// lea rcx, [rdi + rsi*4]; xor esi, esi; jmp 13c3; (nop)
// 13b8 mov edx, eax
// 13ba add rdi, 4; cmp rdi, rcx; je 13e2          <- latch 1
// 13c3 mov eax, [rdi]; shr eax, 5; and eax, 1; test edx, edx; je 13b8
// 13cf cmp edx, 1; je 13e8
// 13d4 add rdi, 4; add esi, eax; lea edx, [rax + 1]; cmp rdi, rcx; jne 13c3   <- latch 2
// 13e2 mov eax, esi; ret; (nop)
// 13e8 lea edx, [rax + rax]; jmp 13ba; (nop)
// 13f0 xor esi, esi; mov eax, esi; ret
std::vector<std::uint8_t> machine_code() {
    return {0x85, 0xf6, 0x7e, 0x4c, 0x48, 0x63, 0xf6, 0x31, 0xd2, 0x48, 0x8d, 0x0c, 0xb7, 0x31, 0xf6, 0xeb, 0x12,
            0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00, 0x89, 0xc2, 0x48, 0x83, 0xc7, 0x04, 0x48, 0x39, 0xcf, 0x74,
            0x1f, 0x8b, 0x07, 0xc1, 0xe8, 0x05, 0x83, 0xe0, 0x01, 0x85, 0xd2, 0x74, 0xe9, 0x83, 0xfa, 0x01, 0x74,
            0x14, 0x48, 0x83, 0xc7, 0x04, 0x01, 0xc6, 0x8d, 0x50, 0x01, 0x48, 0x39, 0xcf, 0x75, 0xe1, 0x89, 0xf0,
            0xc3, 0x0f, 0x1f, 0x00, 0x8d, 0x14, 0x00, 0xeb, 0xcd, 0x0f, 0x1f, 0x00, 0x31, 0xf6, 0x89, 0xf0, 0xc3};
}

constexpr std::uint64_t kBase = 0x13a0;
constexpr int kRcx = 1, kRdi = 7;

Cfg cfg_of(const std::vector<std::uint8_t>& code) {
    auto insns = decode_x86_64(kBase, code);
    REQUIRE(insns.ok());
    return build_cfg(kBase, kBase + code.size(), std::move(*insns), {});
}

std::uint32_t loop_at(const Cfg& cfg, const LoopInfo& loops, std::uint64_t header) {
    for (std::uint32_t l = 0; l < loops.loops.size(); ++l)
        if (cfg.instructions[cfg.blocks[loops.loops[l].header].first].address == header) return l;
    FAIL("no loop at the header");
    return 0;
}

// entry -> P (0) -> H (1);  H -> H (stay) | X (2);  X -> exit, with P and
// X measured at 16 a period and H at 2,048 times that (a trip of 2,048).
struct PreheaderLoop {
    test::HandCfg fx;
    LoopInfo loops;
    FrequencyEstimate est;
};

PreheaderLoop preheader_loop() {
    PreheaderLoop out;
    test::HandCfg& fx = out.fx;
    const std::uint32_t p = fx.add_block({1});
    const std::uint32_t h = fx.add_block({1, 1});
    const std::uint32_t x = fx.add_block({1});
    fx.edge(kEntryBlock, p, EdgeKind::kEntry);
    fx.edge(p, h, EdgeKind::kFallThrough);
    fx.edge(h, h, EdgeKind::kBranch);
    fx.edge(h, x, EdgeKind::kFallThrough);
    fx.edge(x, kExitBlock, EdgeKind::kReturn);
    out.loops = find_loops(fx.cfg);
    out.est.block_frequency = {16, 16 * 2048, 16};
    out.est.block_confidence = {Confidence::kMeasured, Confidence::kLow, Confidence::kMeasured};
    out.est.edge_frequency = {16, 16, 16 * 2047, 16, 16};
    return out;
}

}  // namespace

TEST_CASE("trip exit: a loop closed by two latches that step and compare the same register") {
    Cfg cfg = cfg_of(machine_code());
    LoopInfo loops = find_loops(cfg);
    const std::uint32_t l = loop_at(cfg, loops, 0x13c3);
    REQUIRE(loops.loops[l].latches.size() == 2);
    const auto exit = trip_exit(cfg, loops, l);
    REQUIRE(exit.has_value());
    CHECK(exit->second->gp == kRdi);
    CHECK(exit->second->step == 4);
    CHECK(exit->first.induction_first);
    CHECK(exit->first.condition.b == kRcx);
    // Past either latch's step the register holds what the compare reads.
    CHECK(exit->first.after_step(0x13be));
    CHECK(exit->first.after_step(0x13dd));
    CHECK(exit->first.after_step(0x13d8));
    CHECK_FALSE(exit->first.after_step(0x13ba));
    CHECK_FALSE(exit->first.after_step(0x13c5));
    CHECK_FALSE(exit->first.after_step(0x13d4));

    // One trip over 8,192 words, 256 snapshots spread over it: its length.
    const std::uint64_t start = 0x7f0000000000, words = 8192;
    std::vector<RegisterSample> stream;
    const std::uint64_t pcs[] = {0x13c5, 0x13cf, 0x13d8, 0x13be, 0x13c8};
    for (std::uint64_t k = 0; k < 256; ++k) {
        RegisterSample s;
        s.tid = s.pid = 1;
        s.time_ns = k * 100'000;
        s.offset = pcs[k % 5];
        const std::uint64_t word = (k * words) / 256;
        // After a latch's step rdi already points at the next word.
        s.regs[kRdi] = start + 4 * (word + (exit->first.after_step(s.offset) ? 1 : 0));
        s.regs[kRcx] = start + 4 * words;
        stream.push_back(s);
    }
    ProgressQuery q;
    q.stream = stream;
    q.in_loop = [](std::uint64_t pc) { return (pc >= 0x13b8 && pc < 0x13e2) || (pc >= 0x13e8 && pc < 0x13ed); };
    q.gp = kRdi;
    q.step = 4;
    q.invariant = loops.invariant[l];
    const TripLength trip = trip_length(q, exit->first);
    REQUIRE(trip.known);
    CHECK(trip.length == doctest::Approx(words).epsilon(0.02));
}

TEST_CASE("trip exit: latches comparing with different bounds give none") {
    // The second latch compares rdi with rsi (`cmp rdi, rsi`), which the loop
    // writes: no one bound ends every trip.
    auto code = machine_code();
    REQUIRE(code[0x13dd - kBase + 2] == 0xcf);
    code[0x13dd - kBase + 2] = 0xf7;
    Cfg cfg = cfg_of(code);
    LoopInfo loops = find_loops(cfg);
    CHECK_FALSE(trip_exit(cfg, loops, loop_at(cfg, loops, 0x13c3)).has_value());
}

TEST_CASE("trip exit: a loop around a call that leaves its register and bound alone") {
    // branchy.c's main, its loop over the 2,048 keys (gcc -O2), at 0x10c8:
    // mov edx, [r9]; mov esi, 0x2000; mov rdi, r11; add r9, 0x10;
    // and edx, 0xffffff; call search (0x1320); cdqe; add r10, rax;
    // cmp r9, rbx; jne 0x10c8; then a ret.
    constexpr std::uint64_t base = 0x10c8;
    std::vector<std::uint8_t> code = {0x41, 0x8b, 0x11, 0xbe, 0x00, 0x20, 0x00, 0x00, 0x4c, 0x89, 0xdf, 0x49, 0x83,
                                      0xc1, 0x10, 0x81, 0xe2, 0xff, 0xff, 0xff, 0x00, 0xe8, 0x3e, 0x02, 0x00, 0x00,
                                      0x48, 0x98, 0x49, 0x01, 0xc2, 0x49, 0x39, 0xd9, 0x75, 0xdc, 0xc3};
    auto insns = decode_x86_64(base, code);
    REQUIRE(insns.ok());
    Cfg cfg = build_cfg(base, base + code.size(), std::move(*insns), {});
    constexpr int kRbx = 3, kR9 = 9;
    // A callee whose code is not known may change every caller-saved register, r9 among them.
    LoopInfo unknown = find_loops(cfg);
    REQUIRE(unknown.loops.size() == 1);
    CHECK_FALSE(trip_exit(cfg, unknown, 0).has_value());
    // search writes eax, ecx, esi and r8d only (callee_code.h reads that off its code).
    const std::uint16_t search_writes = (1u << 0) | (1u << 1) | (1u << 6) | (1u << 8);
    LoopInfo known = find_loops(cfg, [&](std::uint64_t target) -> std::uint16_t {
        return target == 0x1320 ? search_writes : 0xffff;
    });
    REQUIRE(known.loops.size() == 1);
    const auto exit = trip_exit(cfg, known, 0);
    REQUIRE(exit.has_value());
    CHECK(exit->second->gp == kR9);
    CHECK(exit->second->step == 16);
    CHECK(exit->first.condition.b == kRbx);

    // Snapshots in the loop, each after one in the callee: the callee's are
    // not entries into the loop, so the fewest iterations stay one trip's.
    std::vector<RegisterSample> stream;
    const std::uint64_t keys = 0x555555560040, words = 2048;
    for (std::uint64_t k = 0; k < 64; ++k) {
        RegisterSample in_search;
        in_search.tid = in_search.pid = 1;
        in_search.offset = 0x1343;
        stream.push_back(in_search);
        RegisterSample s = in_search;
        s.offset = 0x10e4;  // add r10, rax: after the step
        s.regs[kR9] = keys + 16 * (1 + (k * words) / 64);
        s.regs[kRbx] = keys + 16 * words;
        stream.push_back(s);
    }
    ProgressQuery q;
    q.stream = stream;
    q.in_loop = [&](std::uint64_t pc) { return pc >= base && pc < base + code.size() - 1; };
    q.gp = kR9;
    q.step = 16;
    q.invariant = known.invariant[0];
    q.through_calls = true;
    const TripLength trip = trip_length(q, exit->first);
    REQUIRE(trip.known);
    CHECK(trip.length == doctest::Approx(words).epsilon(0.05));
    CHECK(trip.fewest <= words);
}

TEST_CASE("trip measured: a header at its measured entries times its trip length passes its count on as measured") {
    // P measured at 16 a period, the trip 2,048 long: H runs 32,768 a period.
    PreheaderLoop fixture = preheader_loop();
    const test::HandCfg& fx = fixture.fx;
    const LoopInfo& loops = fixture.loops;
    REQUIRE(loops.loops.size() == 1);
    FrequencyEstimate& est = fixture.est;
    constexpr std::uint32_t p = 0, h = 1;
    const FrequencyClasses fc = frequency_classes(fx.cfg);
    std::vector<TripLength> trips(1);
    trips[0].known = true;
    trips[0].length = 2048;
    std::vector<double> anchor(1, 0);
    const auto measured = [&] { return trip_measured_blocks(fx.cfg, loops, trips, anchor, fc, est); };
    CHECK(measured()[h]);
    CHECK_FALSE(measured()[p]);  // measured already, not by the trip
    // Entries from a block not measured: no.
    est.block_confidence[p] = Confidence::kLow;
    CHECK_FALSE(measured()[h]);
    est.block_confidence[p] = Confidence::kMeasured;
    // The flow left the header 30% off entries x length: no.
    est.block_frequency[h] = 0.7 * 16 * 2048;
    CHECK_FALSE(measured()[h]);
    est.block_frequency[h] = 16 * 2048;
    // No trip length: no.
    trips[0].known = false;
    CHECK_FALSE(measured()[h]);
}

TEST_CASE("trip recount: measured entries times one trip length replace a register-progress count that leaves it out") {
    // branchy's main on one recording: its loop around `search` at 0.74x by
    // register progress (bounds 0.73-0.76x), its entries measured at 16.24 k
    // a run's worth, its trips 2,048 keys long.
    TripLength trip;
    trip.known = true;
    trip.length = trip.low = trip.high = 2048;
    const double entries = 16241, truth = 16000 * 2048.0;
    const auto f = trip_recount(trip, entries, 0.73 * truth, 0.76 * truth);
    REQUIRE(f.has_value());
    CHECK(*f == doctest::Approx(entries * 2048));
    // Inside the rate's bounds: register progress stands.
    CHECK_FALSE(trip_recount(trip, entries, 0.95 * truth, 1.05 * truth).has_value());
    // Entries not measured: nothing to multiply.
    CHECK_FALSE(trip_recount(trip, std::nullopt, 0.73 * truth, 0.76 * truth).has_value());
    // Groups of different lengths (a data-dependent bound): no one length.
    trip.low = 1024;
    CHECK_FALSE(trip_recount(trip, entries, 0.73 * truth, 0.76 * truth).has_value());
    trip.low = 2048;
    trip.known = false;
    CHECK_FALSE(trip_recount(trip, entries, 0.73 * truth, 0.76 * truth).has_value());
}

TEST_CASE("measured loop entries: the flow's count on a header's edges from outside, where each comes from a measured block") {
    // The one entry edge P (block 0) -> H.
    PreheaderLoop fx = preheader_loop();
    REQUIRE(fx.loops.loops.size() == 1);
    const auto entries = [&] { return measured_loop_entries(fx.fx.cfg, fx.loops.loops[0], fx.est); };
    REQUIRE(entries().has_value());
    CHECK(*entries() == doctest::Approx(16));  // the back edge is not an entry
    fx.est.block_confidence[0] = Confidence::kLow;
    CHECK_FALSE(entries().has_value());
    fx.est.block_confidence[0] = Confidence::kMeasured;
    fx.est.edge_frequency[1] = 0;
    CHECK_FALSE(entries().has_value());
}
