// A seeded mutation fuzzer of the store's decoders: every file a database
// holds is data others write (issue 20), so each decoder must end with a
// value or an Error on any input, never crash, never hang. Mutations start
// from real encodings; half of them get their checksum fixed so that they
// reach the structural checks behind the CRC. `make test` runs a few
// seconds; bench/fuzz_store.sh runs it for longer (ECPI_FUZZ_SECONDS).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::store {
namespace {

using Bytes = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

Bytes mutate(Bytes in, std::mt19937_64& rng) {
    auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
    const int rounds = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
        switch (rng() % 6) {
            case 0:
                if (!in.empty()) in[pick(in.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
                break;
            case 1:
                if (!in.empty()) in[pick(in.size())] = static_cast<std::uint8_t>(rng());
                break;
            case 2: {  // an "interesting" varint byte: continuation, max, zero
                static constexpr std::uint8_t kInteresting[] = {0x00, 0x7f, 0x80, 0xff, 0x01, 0xfe};
                if (!in.empty()) in[pick(in.size())] = kInteresting[rng() % sizeof kInteresting];
                break;
            }
            case 3:
                in.resize(pick(in.size() + 1));
                break;
            case 4: {
                const std::size_t at = pick(in.size() + 1);
                const std::size_t n = 1 + pick(16);
                Bytes junk(n);
                for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
                in.insert(in.begin() + static_cast<std::ptrdiff_t>(at), junk.begin(), junk.end());
                break;
            }
            default: {  // duplicate a chunk (repeated records, overlapping lengths)
                if (in.size() < 2) break;
                const std::size_t from = pick(in.size() - 1);
                const std::size_t n = 1 + pick(std::min<std::size_t>(32, in.size() - from));
                Bytes chunk(in.begin() + static_cast<std::ptrdiff_t>(from),
                            in.begin() + static_cast<std::ptrdiff_t>(from + n));
                in.insert(in.begin() + static_cast<std::ptrdiff_t>(pick(in.size() + 1)), chunk.begin(), chunk.end());
            }
        }
    }
    if (rng() % 2 == 0) testing::fix_checksum(in);
    return in;
}

double budget_seconds() {
    const char* env = std::getenv("ECPI_FUZZ_SECONDS");
    const double s = env != nullptr ? std::atof(env) : 0;
    return s > 0 ? s : 3.0;
}

TEST_CASE("fuzz: the store decoders end with a value or an error on mutated input") {
    const std::uint64_t seed = [] {
        const char* env = std::getenv("ECPI_FUZZ_SEED");
        return env != nullptr ? std::strtoull(env, nullptr, 10) : 20u;
    }();
    std::mt19937_64 rng(seed);
    struct Target {
        const char* name;
        Bytes seed;
        std::function<bool(const Bytes&)> decode;  // true when decoded
    };
    std::vector<Target> targets = {
        {"profile", encode_profile(testing::libc_profile()),
         [](const Bytes& b) { return decode_profile(b).ok(); }},
        {"stacks", encode_stacks(testing::sample_stacks()), [](const Bytes& b) { return decode_stacks(b).ok(); }},
        {"registers", encode_registers(testing::sample_registers()),
         [](const Bytes& b) { return decode_registers(b).ok(); }},
    };
    const auto budget = std::chrono::duration<double>(budget_seconds());
    const auto slowest_allowed = std::chrono::seconds(1);  // a hang, for inputs of a few hundred bytes
    const auto start = Clock::now();
    std::uint64_t runs = 0;
    std::uint64_t decoded = 0;
    while (Clock::now() - start < budget) {
        for (const Target& t : targets) {
            const Bytes input = mutate(t.seed, rng);
            const auto before = Clock::now();
            decoded += t.decode(input) ? 1 : 0;
            ++runs;
            if (Clock::now() - before > slowest_allowed) {
                FAIL("decode_" << t.name << " took over 1 s on a " << input.size() << "-byte input (seed " << seed
                               << ", run " << runs << ")");
            }
        }
    }
    MESSAGE("fuzzed the store decoders: " << runs << " inputs, " << decoded << " decoded, seed " << seed);
    CHECK(runs > 100);
}

TEST_CASE("fuzz: epoch.json read through the database") {
    std::mt19937_64 rng(21);
    testing::TempDir tmp;
    auto db = Database::open(tmp.path(), Database::Mode::kCreate);
    REQUIRE(db.ok());
    const std::string epoch = *db->current_epoch();
    EpochMeta m;
    m.hostname = "h";
    m.cpu_mhz = 2893.4;
    m.events["cpu-clock"] = {1000000, 1234, 5, 0};
    m.processes[42] = {"burn", "./burn 4"};
    REQUIRE(db->merge(epoch, m).ok());
    const auto file = tmp.path() / "epochs" / epoch / "epoch.json";
    const Bytes seed = testing::read_bytes(file);
    const auto start = Clock::now();
    std::uint64_t runs = 0;
    while (Clock::now() - start < std::chrono::duration<double>(budget_seconds() / 3)) {
        Bytes input = mutate(seed, rng);
        if (rng() % 2 == 0) input = seed, input[rng() % input.size()] = "0123456789-e.\"{}[]"[rng() % 18];
        testing::write_bytes(file, input);
        auto c = db->read_epoch(epoch);
        REQUIRE(c.ok());
        CHECK(c->skipped.size() <= 1);
        ++runs;
    }
    CHECK(runs > 10);
}

}  // namespace
}  // namespace ecpi::store
