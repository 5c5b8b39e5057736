// Round trips and hostile input for the .prof and .stk encodings (FORMAT.md).
#include <doctest/doctest.h>

#include <limits>
#include <random>

#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::store {
namespace {

using testing::fix_checksum;
using testing::forge;
using testing::libc_profile;
using testing::put_string;
using testing::put_varint;
using testing::sample_stacks;

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

ImageProfile round_trip(const ImageProfile& p) {
    auto decoded = decode_profile(encode_profile(p));
    REQUIRE_MESSAGE(decoded.ok(), decoded.error().message());
    return *decoded;
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// Header of a 1.x profile body: path, build id, event, period, extension.
std::vector<std::uint8_t> profile_header(std::vector<std::uint8_t> extension = {}) {
    std::vector<std::uint8_t> b;
    put_string(b, "/bin/x");
    put_string(b, "ab");
    put_string(b, "cycles");
    put_varint(b, 100);
    put_varint(b, extension.size());
    b.insert(b.end(), extension.begin(), extension.end());
    return b;
}

TEST_CASE("profile round trip: empty profile") {
    ImageProfile p;
    p.image = {kUnknownImage, ""};
    p.event = "cycles";
    CHECK(round_trip(p) == p);
    ImageProfile blank;
    CHECK(round_trip(blank) == blank);
}

TEST_CASE("profile round trip: one pair") {
    ImageProfile p;
    p.image = {"/bin/true", ""};
    p.event = "cpu-clock";
    p.period = 10'101'010;
    p.processes = {{1, {{0, 1}}}};
    const auto bytes = encode_profile(p);
    CHECK(round_trip(p) == p);
    // magic+version 6, strings 10+1+10, period 4, ext 1, nprocs 1, pid 1,
    // npairs 1, pair 2, crc 4.
    CHECK(bytes.size() == 41);
}

TEST_CASE("profile round trip: many processes, kAllProcesses, huge values") {
    ImageProfile p = libc_profile();
    p.processes.clear();
    std::mt19937_64 rng(1);
    for (std::uint32_t pid = 1; pid < 3000; pid += 1 + static_cast<std::uint32_t>(rng() % 7)) {
        ProcessCounts pc{pid, {}};
        std::uint64_t offset = rng() % 64;
        for (int i = 0, n = 1 + static_cast<int>(rng() % 40); i < n; ++i) {
            pc.counts.push_back({offset, 1 + rng() % 1000});
            offset += 1 + rng() % 300;
        }
        p.processes.push_back(std::move(pc));
    }
    // Offsets take all 64 bits; counts and periods their bounds (FORMAT.md §8).
    p.processes.push_back({0xfffffffeu, {{0, kMaxSampleCount}, {kMax - 1, 1}, {kMax, kMaxSampleCount - 1}}});
    p.processes.push_back({kAllProcesses, {{kMax, kMaxSampleCount}}});
    p.period = kMaxPeriod;
    CHECK(round_trip(p) == p);
}

TEST_CASE("encode writes canonical form: unsorted input decodes sorted and combined") {
    ImageProfile p = libc_profile();
    p.processes = {
        {400, {{0x20, 1}, {0x10, 2}, {0x20, 3}, {0x30, 0}}},
        {12, {{0x5, 1}}},
        {400, {{0x10, 1}}},
        {77, {}},
    };
    const ImageProfile decoded = round_trip(p);
    const std::vector<ProcessCounts> want = {{12, {{0x5, 1}}}, {400, {{0x10, 3}, {0x20, 4}}}};
    CHECK(decoded.processes == want);
}

TEST_CASE("checksum is CRC-32 of everything before it, little-endian") {
    const auto bytes = encode_profile(libc_profile());
    const std::uint32_t crc = testing::crc_of(bytes, bytes.size() - 4);
    const std::size_t n = bytes.size();
    CHECK(bytes[n - 4] == (crc & 0xff));
    CHECK(bytes[n - 1] == (crc >> 24));
    // The standard check value, so FORMAT.md's claim about the CRC holds.
    const std::vector<std::uint8_t> check = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
    CHECK(testing::crc_of(check, check.size()) == 0xCBF43926u);
}

TEST_CASE("every single-bit flip is rejected cleanly") {
    const auto good = encode_profile(libc_profile());
    for (std::size_t i = 0; i < good.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            auto bad = good;
            bad[i] ^= static_cast<std::uint8_t>(1u << bit);
            auto r = decode_profile(bad);
            CAPTURE(i);
            CAPTURE(bit);
            REQUIRE_FALSE(r.ok());
            CHECK_FALSE(r.error().message().empty());
        }
    }
    auto bad = good;
    bad[bad.size() - 5] ^= 0x02;  // the last count, 1 -> 3: same structure, wrong sum
    auto r = decode_profile(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message().starts_with("checksum mismatch"));
}

TEST_CASE("every byte flipped to its complement is rejected cleanly") {
    const auto good = encode_stacks(sample_stacks());
    for (std::size_t i = 0; i < good.size(); ++i) {
        auto bad = good;
        bad[i] ^= 0xff;
        CAPTURE(i);
        CHECK_FALSE(decode_stacks(bad).ok());
    }
}

TEST_CASE("every truncation is reported as truncated") {
    const auto good = encode_profile(libc_profile());
    for (std::size_t n = 0; n < good.size(); ++n) {
        const std::vector<std::uint8_t> prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        auto r = decode_profile(prefix);
        CAPTURE(n);
        REQUIRE_FALSE(r.ok());
        CHECK_MESSAGE(r.error().message().starts_with("truncated at byte " + std::to_string(n)), r.error().message());
    }
    const auto stacks = encode_stacks(sample_stacks());
    for (std::size_t n = 0; n < stacks.size(); ++n) {
        const std::vector<std::uint8_t> prefix(stacks.begin(), stacks.begin() + static_cast<std::ptrdiff_t>(n));
        auto r = decode_stacks(prefix);
        CAPTURE(n);
        REQUIRE_FALSE(r.ok());
        CHECK_MESSAGE(r.error().message().starts_with("truncated at byte " + std::to_string(n)), r.error().message());
    }
}

TEST_CASE("forged files with a valid checksum never crash the decoder") {
    // Random edits behind a recomputed checksum exercise the structural
    // checks; whatever decodes must be canonical (re-encoding is stable).
    const std::vector<std::vector<std::uint8_t>> seeds = {encode_profile(libc_profile()),
                                                          encode_stacks(sample_stacks())};
    std::mt19937_64 rng(42);
    int decoded = 0;
    for (int iter = 0; iter < 40000; ++iter) {
        const bool stacks = iter % 2 == 1;
        auto f = seeds[stacks ? 1 : 0];
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            const std::size_t at = 6 + rng() % (f.size() - 10);  // keep magic and version
            switch (rng() % 4) {
                case 0: f[at] = static_cast<std::uint8_t>(rng()); break;
                case 1: f[at] = 0xff; break;
                case 2: f.insert(f.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng())); break;
                default:
                    if (f.size() > 12) f.erase(f.begin() + static_cast<std::ptrdiff_t>(at));
                    break;
            }
        }
        fix_checksum(f);
        if (stacks) {
            auto r = decode_stacks(f);
            if (r.ok()) {
                ++decoded;
                CHECK(decode_stacks(encode_stacks(*r)).value() == *r);
            }
        } else {
            auto r = decode_profile(f);
            if (r.ok()) {
                ++decoded;
                CHECK(decode_profile(encode_profile(*r)).value() == *r);
            }
        }
    }
    MESSAGE("forged files that still decoded: " << decoded << " of 40000");
}

TEST_CASE("structural errors behind a valid checksum are named") {
    auto decode_body = [](std::vector<std::uint8_t> body) {
        auto r = decode_profile(forge("ECPP", 1, 0, body));
        REQUIRE_FALSE(r.ok());
        return r.error().message();
    };
    SUBCASE("huge process count") {
        auto b = profile_header();
        put_varint(b, std::uint64_t{1} << 62);
        CHECK(contains(decode_body(b), "process count 4611686018427387904"));
    }
    SUBCASE("varint longer than 64 bits") {
        auto b = profile_header();
        for (int i = 0; i < 10; ++i) b.push_back(0xff);
        b.push_back(0x01);
        CHECK(contains(decode_body(b), "overflows 64 bits"));
    }
    SUBCASE("pid wider than 32 bits") {
        auto b = profile_header();
        put_varint(b, 1);
        put_varint(b, std::uint64_t{1} << 32);
        put_varint(b, 1);
        put_varint(b, 0);
        put_varint(b, 1);
        CHECK(contains(decode_body(b), "does not fit in 32 bits"));
    }
    SUBCASE("offsets not increasing") {
        auto b = profile_header();
        put_varint(b, 1);   // processes
        put_varint(b, 5);   // pid
        put_varint(b, 2);   // pairs
        put_varint(b, 16);  // offset 16
        put_varint(b, 1);
        put_varint(b, 0);  // delta 0: repeated offset
        put_varint(b, 1);
        CHECK(contains(decode_body(b), "offsets must increase"));
    }
    SUBCASE("offset overflow") {
        auto b = profile_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 2);
        put_varint(b, kMax);
        put_varint(b, 1);
        put_varint(b, 1);
        put_varint(b, 1);
        CHECK(contains(decode_body(b), "offset overflows"));
    }
    SUBCASE("zero count") {
        auto b = profile_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_varint(b, 16);
        put_varint(b, 0);
        CHECK(contains(decode_body(b), "zero count at offset 0x10"));
    }
    SUBCASE("pids not increasing") {
        auto b = profile_header();
        put_varint(b, 2);
        for (int i = 0; i < 2; ++i) {
            put_varint(b, 5);
            put_varint(b, 1);
            put_varint(b, 16);
            put_varint(b, 1);
        }
        CHECK(contains(decode_body(b), "pids must increase"));
    }
    SUBCASE("empty process section") {
        auto b = profile_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 0);
        CHECK(contains(decode_body(b), "has no samples"));
    }
    SUBCASE("trailing bytes") {
        auto b = profile_header();
        put_varint(b, 0);
        b.push_back(0);
        CHECK(contains(decode_body(b), "unexpected bytes"));
    }
}

TEST_CASE("format versions") {
    SUBCASE("a newer major version is rejected by name") {
        auto r = decode_profile(forge("ECPP", 2, 3, profile_header()));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message() == "format version 2.3 is newer than this ecpi supports (1.x); upgrade ecpi");
        auto s = decode_stacks(forge("ECPS", 7, 0, {}));
        REQUIRE_FALSE(s.ok());
        CHECK(s.error().message() == "format version 7.0 is newer than this ecpi supports (1.x); upgrade ecpi");
    }
    SUBCASE("major 0 is unknown") {
        auto r = decode_profile(forge("ECPP", 0, 9, profile_header()));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message() == "unknown version 0.9");
    }
    SUBCASE("a newer minor version is read, its header extension skipped") {
        auto b = profile_header({0xde, 0xad, 0xbe, 0xef});
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_varint(b, 16);
        put_varint(b, 2);
        auto r = decode_profile(forge("ECPP", 1, 4, b));
        REQUIRE_MESSAGE(r.ok(), r.error().message());
        CHECK(r->image == ImageId{"/bin/x", "ab"});
        CHECK(r->event == "cycles");
        CHECK(r->period == 100);
        CHECK(r->processes == std::vector<ProcessCounts>{{5, {{16, 2}}}});
    }
}

TEST_CASE("bad magic") {
    const std::vector<std::uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0};
    auto r = decode_profile(elf);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message() == "bad magic: not an ecpi profile file (starts with 7f 45 4c 46)");
    auto s = decode_profile(encode_stacks(sample_stacks()));
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message() == "bad magic: this is an ecpi stack file, not a profile file");
    auto t = decode_stacks(encode_profile(libc_profile()));
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message() == "bad magic: this is an ecpi profile file, not a stack file");
}

TEST_CASE("stack profile round trip") {
    const StackProfile s = sample_stacks();
    auto r = decode_stacks(encode_stacks(s));
    REQUIRE_MESSAGE(r.ok(), r.error().message());
    CHECK(*r == s);

    StackProfile empty;
    CHECK(decode_stacks(encode_stacks(empty)).value() == empty);

    StackProfile huge;
    huge.event = "cycles";
    huge.period = kMax;
    huge.images = {{"/a", ""}};
    huge.stacks = {{kAllProcesses, {{0, kMax}, {0, 0}}, kMaxSampleCount}};
    CHECK(decode_stacks(encode_stacks(huge)).value() == huge);
}

TEST_CASE("stack encode canonicalizes: duplicate images, unsorted stacks, bad indices") {
    StackProfile s;
    s.event = "cpu-clock";
    s.images = {{"/a", "1"}, {"/b", ""}, {"/a", "1"}};
    s.stacks = {
        {2, {{2, 0x10}}, 1},
        {1, {{1, 0x20}}, 1},
        {2, {{0, 0x10}}, 4},   // same key as the first once images are deduplicated
        {3, {{9, 0x30}}, 2},   // index past the table: attributed to [unknown]
        {4, {{0, 0x40}}, 0},   // zero count: dropped
    };
    auto r = decode_stacks(encode_stacks(s));
    REQUIRE_MESSAGE(r.ok(), r.error().message());
    const std::vector<ImageId> images = {{"/a", "1"}, {"/b", ""}, {kUnknownImage, ""}};
    CHECK(r->images == images);
    const std::vector<StackSample> stacks = {
        {1, {{1, 0x20}}, 1},
        {2, {{0, 0x10}}, 5},
        {3, {{2, 0x30}}, 2},
    };
    CHECK(r->stacks == stacks);
}

TEST_CASE("stack structural errors behind a valid checksum are named") {
    std::vector<std::uint8_t> b;
    put_string(b, "cycles");
    put_varint(b, 1);
    put_varint(b, 0);  // extension
    put_varint(b, 1);  // images
    put_string(b, "/a");
    put_string(b, "");
    SUBCASE("frame index outside the image table") {
        put_varint(b, 1);  // stacks
        put_varint(b, 1);  // pid
        put_varint(b, 1);  // depth
        put_varint(b, 1);  // image index 1 of 1
        put_varint(b, 0);
        put_varint(b, 1);
        auto r = decode_stacks(forge("ECPS", 1, 0, b));
        REQUIRE_FALSE(r.ok());
        CHECK(contains(r.error().message(), "outside the 1-entry image table"));
    }
    SUBCASE("repeated stack") {
        put_varint(b, 2);
        for (int i = 0; i < 2; ++i) {
            put_varint(b, 1);
            put_varint(b, 1);
            put_varint(b, 0);
            put_varint(b, 0x10);
            put_varint(b, 1);
        }
        auto r = decode_stacks(forge("ECPS", 1, 0, b));
        REQUIRE_FALSE(r.ok());
        CHECK(contains(r.error().message(), "out of order or repeated"));
    }
    SUBCASE("huge depth") {
        put_varint(b, 1);
        put_varint(b, 1);
        put_varint(b, kMax);
        auto r = decode_stacks(forge("ECPS", 1, 0, b));
        REQUIRE_FALSE(r.ok());
        CHECK(contains(r.error().message(), "stack depth"));
    }
}

}  // namespace
}  // namespace ecpi::store
