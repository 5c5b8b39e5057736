// Culprits (DCPI 6.3) on real machine code with synthetic samples: an
// unstalled profile (S_i = F * M_i) plus stall samples placed where a known
// cause would put them; hardware-event bounds from synthetic event samples
// (this machine has no PMU to record them).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "ecpi/analyze/calc/culprits.h"

using namespace ecpi::analyze;

namespace {

// `as` output (tests/unit/calc/culprits_test.cpp documents the source):
//  chase:  0: mov rsi,[rax]  3: mov rcx,rsi  6: imul rcx,rsi  a: imul rcx,rcx
//          e: imul rcx,rcx  12: imul r8,rcx  16: mov rax,r8  19: and rax,rdx
//          1c: xor rax,rsi  1f: sub rdi,1  23: jae 0  25: ret
const std::vector<std::uint8_t> kChase = {0x48, 0x8b, 0x30, 0x48, 0x89, 0xf1, 0x48, 0x0f, 0xaf, 0xce, 0x48, 0x0f, 0xaf,
                                          0xc9, 0x48, 0x0f, 0xaf, 0xc9, 0x4c, 0x0f, 0xaf, 0xc1, 0x4c, 0x89, 0xc0, 0x48,
                                          0x21, 0xd0, 0x48, 0x31, 0xf0, 0x48, 0x83, 0xef, 0x01, 0x73, 0xdb, 0xc3};
//  branch: 0: xor eax,eax  2: movzx edx,byte [rdi]  5: test dl,1  8: jne 17
//          a: imul rdx,rsi  e: imul rdx,rsi  12: add rax,rdx  15: jmp 22
//          17: imul rdx,rsi  1b: imul rdx,rsi  1f: xor rax,rdx
//          22: add rdi,1  26: cmp rdi,rcx  29: jne 2  2b: ret
const std::vector<std::uint8_t> kBranch = {0x31, 0xc0, 0x0f, 0xb6, 0x17, 0xf6, 0xc2, 0x01, 0x75, 0x0d, 0x48, 0x0f,
                                           0xaf, 0xd6, 0x48, 0x0f, 0xaf, 0xd6, 0x48, 0x01, 0xd0, 0xeb, 0x0b, 0x48,
                                           0x0f, 0xaf, 0xd6, 0x48, 0x0f, 0xaf, 0xd6, 0x48, 0x31, 0xd0, 0x48, 0x83,
                                           0xc7, 0x01, 0x48, 0x39, 0xcf, 0x75, 0xd7, 0xc3};
constexpr std::uint64_t kBase = 0x1000;

struct Analysis {
    Cfg cfg;
    std::vector<BlockTiming> timing;
    FrequencyEstimate estimate;
    CulpritAnalysis culprits;
    std::uint32_t at(std::uint64_t offset) const {
        for (std::uint32_t i = 0; i < cfg.instructions.size(); ++i)
            if (cfg.instructions[i].address == kBase + offset) return i;
        FAIL("no instruction at offset " << offset);
        return 0;
    }
    std::vector<Culprit> dynamic_at(std::uint64_t offset) const {
        std::vector<Culprit> out;
        for (const auto& c : culprits.instructions[at(offset)].culprits)
            if (is_dynamic(c.cause)) out.push_back(c);
        return out;
    }
    bool lists(std::uint64_t offset, StallCause cause) const {
        auto d = dynamic_at(offset);
        return std::any_of(d.begin(), d.end(), [cause](const Culprit& c) { return c.cause == cause; });
    }
};

const MachineModel& model() {
    static MachineModel m = MachineModel::load(MachineModel::kDefault).value();
    return m;
}

// Samples: per block, frequency * M_i (no stalls), plus `stalls` (offset ->
// extra samples). `configure` may set event bounds on the input.
template <class Configure>
Analysis analyze(const std::vector<std::uint8_t>& code, const std::map<std::uint32_t, double>& block_frequency,
                 const std::map<std::uint64_t, std::uint64_t>& stalls, Configure configure) {
    Analysis a;
    auto insns = decode_x86_64(kBase, code);
    REQUIRE(insns.ok());
    a.cfg = build_cfg(kBase, kBase + code.size(), std::move(insns).value(), {});
    auto fc = frequency_classes(a.cfg);
    a.timing = model().time_blocks(a.cfg);
    std::vector<std::uint64_t> samples(a.cfg.instructions.size(), 0);
    for (auto [b, f] : block_frequency)
        for (std::uint32_t i = 0; i < a.cfg.blocks[b].count; ++i)
            samples[a.cfg.blocks[b].first + i] = static_cast<std::uint64_t>(f * a.timing[b].m[i] + 0.5);
    for (auto [offset, s] : stalls) samples[a.at(offset)] += s;
    a.estimate = estimate_frequencies(a.cfg, fc, a.timing, samples);
    CulpritInput in;
    in.cfg = &a.cfg;
    in.timing = &a.timing;
    in.estimate = &a.estimate;
    in.samples = samples;
    in.period_cycles = 1;
    in.model = &model();
    configure(in);
    a.culprits = find_culprits(in);
    return a;
}

std::uint32_t block_at(const std::vector<std::uint8_t>& code, std::uint64_t offset) {
    auto insns = decode_x86_64(kBase, code).value();
    Cfg cfg = build_cfg(kBase, kBase + code.size(), std::move(insns), {});
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b)
        if (cfg.instructions[cfg.blocks[b].first].address == kBase + offset) return b;
    FAIL("no block at offset " << offset);
    return 0;
}

}  // namespace

TEST_CASE("a stall after a load names the load: D-cache and DTLB, nothing else") {
    const auto loop = block_at(kChase, 0);
    // The load's latency beyond the best case lands on the next instruction.
    auto a = analyze(kChase, {{loop, 1000}}, {{0x3, 200000}}, [](CulpritInput&) {});
    auto d = a.dynamic_at(0x3);
    std::string listed;
    for (const auto& c : d) listed += std::string(stall_cause_name(c.cause)) + " ";
    INFO("culprits: " << listed);
    REQUIRE(d.size() == 2);
    CHECK(a.lists(0x3, StallCause::kDCache));
    CHECK(a.lists(0x3, StallCause::kDTlb));
    for (const auto& c : d) {
        CHECK(a.cfg.instructions[c.instruction].address == kBase);  // the load
        CHECK(c.cycles_min == doctest::Approx(0));                  // either could explain it all
        CHECK(c.cycles_max == doctest::Approx(a.culprits.instructions[a.at(0x3)].dynamic_cycles));
    }
    // Not at a line start, and the loop's latch ends in the same line: no
    // I-cache; the loop branch almost never exits: no misprediction.
    CHECK_FALSE(a.lists(0x3, StallCause::kICache));
    CHECK_FALSE(a.lists(0x3, StallCause::kBranchMispredict));

    const auto& s = a.culprits.summary;
    const double tallied = s.execution + s.static_stall() + s.dynamic_stall() + s.sampling_error;
    CHECK(tallied == doctest::Approx(s.total_cycles));
    const auto dc = static_cast<std::size_t>(StallCause::kDCache);
    CHECK(s.max[dc] > 0.8 * s.total_cycles);
    CHECK(s.min[dc] == doctest::Approx(0));
}

TEST_CASE("a stall longer than every bound together: each cause at its bound, the rest unexplained") {
    const auto loop = block_at(kChase, 0);
    // 2,500 stall cycles per execution; the D-cache is bounded by one memory
    // latency, the DTLB by one page walk.
    auto a = analyze(kChase, {{loop, 1000}}, {{0x3, 2500000}}, [](CulpritInput&) {});
    const double D = a.culprits.instructions[a.at(0x3)].dynamic_cycles;
    const double memory = model().memory_latency(), walk = model().page_walk_latency();
    REQUIRE(D > memory + walk);
    double unexplained = 0;
    for (const auto& c : a.dynamic_at(0x3)) {
        INFO(stall_cause_name(c.cause));
        CHECK(c.cycles_min <= c.cycles_max);
        const double bound = c.cause == StallCause::kDCache ? memory : walk;
        if (c.cause == StallCause::kDCache || c.cause == StallCause::kDTlb) {
            CHECK(c.cycles_max == doctest::Approx(bound));
            CHECK(c.cycles_min == doctest::Approx(bound));  // the others cannot explain it without it
        }
        if (c.cause == StallCause::kUnexplained) unexplained = c.cycles_min;
    }
    CHECK(unexplained == doctest::Approx(D - memory - walk));
    const auto& s = a.culprits.summary;
    const auto dc = static_cast<std::size_t>(StallCause::kDCache);
    CHECK(s.min[dc] <= s.max[dc]);
}

TEST_CASE("hardware events bound their causes; without kernel samples faults remain") {
    const auto loop = block_at(kChase, 0);
    auto a = analyze(kChase, {{loop, 1000}}, {{0x3, 200000}}, [](CulpritInput& in) {
        // cache-misses recorded, none at the load: the D-cache is innocent.
        in.cache_misses.per_instruction.assign(in.cfg->instructions.size(), 0);
        in.cache_misses.period = 1000;
        in.kernel_sampled = false;
    });
    CHECK_FALSE(a.lists(0x3, StallCause::kDCache));
    CHECK(a.lists(0x3, StallCause::kDTlb));
    CHECK(a.lists(0x3, StallCause::kPageFault));
    CHECK(a.lists(0x3, StallCause::kContextSwitch));
}

TEST_CASE("stalls at the targets of an unpredictable branch name it") {
    const auto head = block_at(kBranch, 0x2), taken = block_at(kBranch, 0x17), fall = block_at(kBranch, 0xa),
               latch = block_at(kBranch, 0x22);
    std::map<std::uint32_t, double> f = {{head, 1000}, {taken, 500}, {fall, 500}, {latch, 1000}};
    // 20 stall cycles per execution: more than the byte load (one line miss per
    // 64 executions) can explain, so something is left when branches are ruled out.
    std::map<std::uint64_t, std::uint64_t> stalls = {{0x17, 10000}, {0xa, 10000}};
    auto a = analyze(kBranch, f, stalls, [](CulpritInput&) {});
    for (std::uint64_t target : {0x17u, 0xau}) {
        INFO("target " << target);
        CHECK(a.lists(target, StallCause::kBranchMispredict));
        for (const auto& c : a.dynamic_at(target))
            if (c.cause == StallCause::kBranchMispredict)
                CHECK(a.cfg.instructions[c.instruction].address == kBase + 0x8);  // the jne
    }
    // Every entry's minimum within its own bound, also where a cause names
    // several culprit instructions.
    for (const auto& ins : a.culprits.instructions)
        for (const auto& c : ins.culprits) CHECK(c.cycles_min <= c.cycles_max + 1e-9);
    // branch-misses recorded, none at the jne: ruled out, the stall is unexplained.
    auto b = analyze(kBranch, f, stalls, [](CulpritInput& in) {
        in.branch_misses.per_instruction.assign(in.cfg->instructions.size(), 0);
        in.branch_misses.period = 1000;
    });
    CHECK_FALSE(b.lists(0x17, StallCause::kBranchMispredict));
    CHECK(b.lists(0x17, StallCause::kUnexplained));
}

TEST_CASE("after a call to a leaf the return cannot have been mispredicted") {
    //  0: call 9  5: mov rsi,rbx  8: ret  9: ret (the callee)
    const std::vector<std::uint8_t> code = {0xe8, 0x04, 0x00, 0x00, 0x00, 0x48, 0x89, 0xde, 0xc3, 0xc3};
    auto insns = decode_x86_64(kBase, code).value();
    Cfg cfg = build_cfg(kBase, kBase + code.size(), std::move(insns), {});
    std::map<std::uint32_t, double> f;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) f[b] = 1000;
    auto unknown = analyze(code, f, {{0x5, 50000}}, [](CulpritInput&) {});
    CHECK(unknown.lists(0x5, StallCause::kBranchMispredict));  // the callee's return: not ruled out
    auto leaf = analyze(code, f, {{0x5, 50000}}, [](CulpritInput& in) {
        in.leaf_callee = [](std::uint64_t a) { return a == kBase + 9; };  // the callee at 9
    });
    CHECK_FALSE(leaf.lists(0x5, StallCause::kBranchMispredict));
    CHECK(leaf.lists(0x5, StallCause::kICache));  // the callee may still have evicted the line
}

TEST_CASE("cause names, letters and kinds") {
    CHECK(std::string(stall_cause_name(StallCause::kDCache)) == "dcache");
    CHECK(std::string(stall_cause_name(StallCause::kBranchMispredict)) == "branch_mispredict");
    CHECK(std::string(stall_cause_name(StallCause::kStaticDivider)) == "divider");
    CHECK(is_dynamic(StallCause::kUnexplained));
    CHECK_FALSE(is_dynamic(StallCause::kDependency));
    std::map<char, int> letters;
    for (std::size_t c = 0; c < kStallCauses; ++c) letters[stall_cause_letter(static_cast<StallCause>(c))]++;
    CHECK(letters.size() == kStallCauses);  // every letter names one cause
}
