// Odds from the executions after a snapshot's own (later_odds.h): the
// replay through a loop, the skipped first execution, the fall-back to the
// own-block odds where the replay sees too few executions.
#include <doctest/doctest.h>

#include <vector>

#include "ecpi/analyze/calc/later_odds.h"

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;

namespace {

Cfg cfg_of(const std::vector<std::uint8_t>& code) {
    auto insns = decode_x86_64(0x1000, code);
    REQUIRE(insns.ok());
    return build_cfg(0x1000, 0x1000 + code.size(), std::move(*insns), {});
}

RegisterSample snap(std::uint64_t pc, std::initializer_list<std::pair<int, std::uint64_t>> regs) {
    RegisterSample s;
    s.offset = pc;
    for (auto [r, v] : regs) s.regs[static_cast<std::size_t>(r)] = v;
    return s;
}

std::vector<std::uint32_t> all(const std::vector<RegisterSample>& stream) {
    std::vector<std::uint32_t> v;
    for (std::uint32_t k = 0; k < stream.size(); ++k) v.push_back(k);
    return v;
}

// What calc uses (calc_procedure.cpp): the later odds where they decide.
std::vector<BranchOdds> calc_odds(const Cfg& cfg, const std::vector<RegisterSample>& stream) {
    return prefer_later(branch_odds(cfg, stream, 0, all(stream)), later_odds(cfg, stream, 0, all(stream)).branches);
}

constexpr int kRsi = 6, kRax = 0, kRdx = 2;

}  // namespace

TEST_CASE("later odds: a branch whose snapshots before it all went one way is split by the executions after") {
    // chain's first branch (bench/accuracy/chain.c, gcc -O2), in a loop:
    // 0x1000 imul esi, esi, 0x19660d; 0x1006 add esi, 0x3c6ef35f;
    // 0x100c test esi, 0x2000; 0x1012 jne 0x1016; 0x1014 nop; nop; 0x1016 jmp 0x1000
    Cfg cfg = cfg_of({0x69, 0xf6, 0x0d, 0x66, 0x19, 0x00, 0x81, 0xc6, 0x5f, 0xf3, 0x6e, 0x3c, 0xf7, 0xc6, 0x00,
                      0x20, 0x00, 0x00, 0x75, 0x02, 0x90, 0x90, 0xeb, 0xe8});
    // 200 snapshots at the test, every one in an execution that goes the
    // odd way (as time-weighted snapshots favour the slower way): the
    // generator's next executions go it half of the time.
    std::vector<RegisterSample> stream;
    for (std::uint64_t j = 1; stream.size() < 200; ++j) {
        const std::uint32_t seed = static_cast<std::uint32_t>(j * 2654435761u);
        if (seed & 0x2000) stream.push_back(snap(0x100c, {{kRsi, seed}}));
    }
    const auto own = branch_odds(cfg, stream, 0, all(stream));
    REQUIRE(own.size() == 1);
    CHECK(own[0].taken == 200);
    const auto later = later_odds(cfg, stream, 0, all(stream));
    REQUIRE(later.branches.size() == 1);
    CHECK(later.branches[0].block == own[0].block);
    CHECK(later.branches[0].total == 200);
    CHECK(later.branches[0].taken == 100);  // 1,598 of the 3,200 executions counted
    const auto used = calc_odds(cfg, stream);
    REQUIRE(used.size() == 1);
    CHECK(used[0].taken == 100);
    CHECK(used[0].total == 200);
}

TEST_CASE("later odds: the first execution after a snapshot is not counted") {
    // 0x1000 test eax, eax; 0x1002 jne 0x1008; 0x1004 xor eax, eax; 0x1006 jmp 0x1000;
    // 0x1008 xor eax, eax; 0x100a jmp 0x1000: taken at most once, the first time.
    Cfg cfg = cfg_of({0x85, 0xc0, 0x75, 0x04, 0x31, 0xc0, 0xeb, 0xf8, 0x31, 0xc0, 0xeb, 0xf4});
    std::vector<RegisterSample> stream(20, snap(0x1000, {{kRax, 1}}));
    const auto later = later_odds(cfg, stream, 0, all(stream));
    REQUIRE(later.branches.size() == 1);
    CHECK(later.branches[0].total == 20);
    CHECK(later.branches[0].taken == 0);  // counting the first: 20 x 1/17, rounded, is 1
}

TEST_CASE("later odds: a state known for one execution after the skipped one keeps the own-block odds") {
    // A state machine: 0x1000 mov eax, [rdi]; 0x1002 test edx, edx; 0x1004 jne 0x100a;
    // 0x1006 mov edx, eax; 0x1008 jmp 0x1000; 0x100a mov edx, eax; 0x100c jmp 0x1000.
    // From a snapshot after the load, the next state is the loaded value:
    // one later execution per snapshot, a function of the skipped one.
    Cfg cfg = cfg_of({0x8b, 0x07, 0x85, 0xd2, 0x75, 0x04, 0x89, 0xc2, 0xeb, 0xf6, 0x89, 0xc2, 0xeb, 0xf2});
    std::vector<RegisterSample> stream;
    for (int k = 0; k < 40; ++k) stream.push_back(snap(0x1002, {{kRdx, k % 4 ? 1u : 0u}, {kRax, 0}}));
    CHECK(later_odds(cfg, stream, 0, all(stream)).branches.empty());
    const auto used = calc_odds(cfg, stream);
    REQUIRE(used.size() == 1);
    CHECK(used[0].total == 40);
    CHECK(used[0].taken == 30);  // the own-block odds
}
