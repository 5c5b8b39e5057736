// Bytes per distinct sampled pc of the .prof encoding, on a synthetic profile
// (the "Size" figure in store/FORMAT.md). Deterministic: mt19937_64's output
// is fixed by the standard and no <random> distributions are used.
#include <doctest/doctest.h>

#include <cstdio>
#include <random>
#include <set>

#include "ecpi/store/profile.h"

namespace ecpi::store {
namespace {

constexpr std::size_t kDistinctPcs = 10'000;

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Geometric on {1, 2, ...} with the given mean.
std::uint64_t geometric(std::mt19937_64& rng, double mean) {
    const double p = 1.0 / mean;
    std::uint64_t k = 1;
    while (uniform01(rng) >= p) ++k;
    return k;
}

// Hot code is a few hundred functions scattered over the text segment; in
// each, a run of consecutive x86 instructions (1..7 bytes, mean 4), of which
// 70% were sampled.
std::set<std::uint64_t> code_like_offsets(std::mt19937_64& rng) {
    constexpr std::uint64_t kTextStart = 0x401000;
    constexpr std::uint64_t kTextSize = 8u << 20;
    std::set<std::uint64_t> offsets;
    while (offsets.size() < kDistinctPcs) {
        std::uint64_t pc = kTextStart + rng() % kTextSize;
        const std::uint64_t instructions = geometric(rng, 45);
        for (std::uint64_t i = 0; i < instructions && offsets.size() < kDistinctPcs; ++i) {
            if (uniform01(rng) < 0.7) offsets.insert(pc);
            pc += 1 + rng() % 7;
        }
    }
    return offsets;
}

ImageProfile synthetic(double mean_count, std::uint32_t processes) {
    std::mt19937_64 rng(20240601);
    ImageProfile p;
    p.image = {"/usr/lib/x86_64-linux-gnu/libxul.so", "5d1c2b0f8a9e7d6c5b4a39281706f5e4d3c2b1a0"};
    p.event = "cpu-clock";
    p.period = 10'101'010;
    p.processes.resize(processes);
    for (std::uint32_t i = 0; i < processes; ++i) p.processes[i].pid = 1000 + 17 * i;
    for (const std::uint64_t offset : code_like_offsets(rng)) {
        p.processes[rng() % processes].counts.push_back({offset, geometric(rng, mean_count)});
    }
    return p;
}

TEST_CASE("size: bytes per distinct sampled pc") {
    for (const std::uint32_t processes : {1u, 8u}) {
        for (const double mean : {4.0, 20.0, 100.0, 1000.0}) {
            const ImageProfile p = synthetic(mean, processes);
            const std::size_t bytes = encode_profile(p).size();
            const double per_pc = static_cast<double>(bytes) / kDistinctPcs;
            char line[160];
            std::snprintf(line, sizeof line,
                          "%zu distinct pcs, %u process(es), geometric counts mean %6.0f: %7zu bytes, %.2f bytes/pc",
                          kDistinctPcs, processes, mean, bytes, per_pc);
            MESSAGE(line);
            // A raw (u64 offset, u64 count) pair is 16 bytes; the varint and
            // delta encoding must stay far below that.
            CHECK(per_pc < 5.0);
        }
    }
}

}  // namespace
}  // namespace ecpi::store
