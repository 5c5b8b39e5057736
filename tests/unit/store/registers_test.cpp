// Register snapshot files (.reg, FORMAT.md §5a): round trips, hostile input,
// merging, and the database's handling of the new file kind.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <tuple>

#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::store {
namespace {

namespace fs = std::filesystem;
using testing::fix_checksum;
using testing::forge;
using testing::put_string;
using testing::put_varint;
using testing::read_bytes;
using testing::sample_registers;
using testing::TempDir;
using testing::write_bytes;

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

RegisterProfile round_trip(const RegisterProfile& r) {
    auto decoded = decode_registers(encode_registers(r));
    REQUIRE_MESSAGE(decoded.ok(), decoded.error().message());
    return *decoded;
}

void put_zigzag(std::vector<std::uint8_t>& out, std::int64_t v) {
    put_varint(out, (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

// Header of a 1.x register body up to and including a one-entry image table.
std::vector<std::uint8_t> registers_header(std::uint64_t every = 1, std::vector<std::uint8_t> extension = {}) {
    std::vector<std::uint8_t> b;
    put_string(b, "cpu-clock");
    put_varint(b, 200);
    put_varint(b, every);
    put_varint(b, extension.size());
    b.insert(b.end(), extension.begin(), extension.end());
    put_varint(b, 1);
    put_string(b, "/bin/x");
    put_string(b, "");
    return b;
}

// One snapshot: time delta, pid delta, image, offset delta, 16 register deltas.
void put_snapshot(std::vector<std::uint8_t>& b, std::uint64_t time_delta, std::int64_t pid_delta = 0,
                  std::uint64_t image = 0, std::int64_t offset_delta = 0, std::int64_t reg_delta = 0) {
    put_varint(b, time_delta);
    put_zigzag(b, pid_delta);
    put_varint(b, image);
    put_zigzag(b, offset_delta);
    for (std::size_t i = 0; i < kGpRegisters; ++i) put_zigzag(b, reg_delta);
}

// A 1.1 file of one snapshot whose header extension is `extension`: the error.
std::string one_snapshot_error(std::vector<std::uint8_t> extension) {
    auto b = registers_header(1, std::move(extension));
    put_varint(b, 1);
    put_varint(b, 5);
    put_varint(b, 1);
    put_snapshot(b, 77, 5, 0, 0x40, -2);
    auto r = decode_registers(forge("ECPR", 1, 1, b));
    REQUIRE_FALSE(r.ok());
    return r.error().message();
}

std::string decode_error(const std::vector<std::uint8_t>& body) {
    auto r = decode_registers(forge("ECPR", 1, 0, body));
    REQUIRE_FALSE(r.ok());
    return r.error().message();
}

TEST_CASE("registers round trip: empty, sample, extreme values") {
    RegisterProfile empty;
    empty.event = "cpu-clock";
    CHECK(round_trip(empty) == empty);
    CHECK(round_trip(RegisterProfile{}) == RegisterProfile{});
    CHECK(round_trip(sample_registers()) == sample_registers());

    RegisterProfile r = sample_registers();
    r.every = 0xffffffffu;
    RegisterSample s = r.samples.back();
    s.tid = 0xffffffffu;
    s.pid = 0xffffffffu;
    s.time_ns = kMax;
    s.offset = kMax;
    for (std::size_t i = 0; i < kGpRegisters; ++i) s.regs[i] = i % 2 ? kMax : 0x8000'0000'0000'0000ull;
    r.samples.push_back(s);
    s.pid = 0;  // pid down from 2^32-1 to 0 at the same time: ordered by pid
    s.time_ns = kMax;
    r.samples.insert(r.samples.end() - 1, s);
    auto back = round_trip(r);
    CHECK(back == r);
}

TEST_CASE("registers: FORMAT.md's worked example, byte for byte") {
    RegisterProfile r;
    r.event = "cpu-clock";
    r.period = 200'000;
    r.images = {{"/bin/x", ""}};
    RegisterSample s;
    s.pid = s.tid = 5;
    s.time_ns = 77;
    s.offset = 0x40;
    s.regs.fill(kMax - 1);
    s.flags = 0x8246;  // recorded: ZF, PF and EFLAGS' reserved bit 1
    r.samples = {s};
    std::vector<std::uint8_t> expected = {0x45, 0x43, 0x50, 0x52, 0x01, 0x01, 0x09, 'c',  'p',  'u',  '-',
                                          'c',  'l',  'o',  'c',  'k',  0xc0, 0x9a, 0x0c, 0x01, 0x04, 0x01,
                                          0xc6, 0x84, 0x02, 0x01, 0x06, '/',  'b',  'i',  'n',  '/',  'x',
                                          0x00, 0x01, 0x05, 0x01, 0x4d, 0x0a, 0x00, 0x80, 0x01};
    expected.insert(expected.end(), kGpRegisters, 0x03);
    expected.insert(expected.end(), {0x72, 0x97, 0x87, 0x5f});
    CHECK(encode_registers(r) == expected);
    CHECK(round_trip(r) == r);
}

TEST_CASE("registers round trip: flags recorded on some snapshots, none on others") {
    RegisterProfile r = sample_registers();
    REQUIRE(r.samples.size() >= 2);
    r.samples[0].flags = kFlagsRecorded | 0x0893;  // OF, SF, CF, AF
    r.samples.back().flags = kFlagsRecorded;
    CHECK(round_trip(r) == r);
    RegisterProfile none = sample_registers();
    CHECK(round_trip(none) == none);
    // Without flags the file is as long as 1.0's: an empty extension.
    CHECK(encode_registers(none).size() < encode_registers(r).size());
}

TEST_CASE("registers round trip: random threads, wrapping deltas") {
    std::mt19937_64 rng(7);
    RegisterProfile r;
    r.event = "task-clock";
    r.period = 1'000'000;
    r.every = 3;
    for (int i = 0; i < 20; ++i) r.images.push_back({"/lib/" + std::to_string(i), ""});
    for (std::uint32_t tid = 1; tid < 400; tid += 1 + static_cast<std::uint32_t>(rng() % 9)) {
        std::uint64_t t = rng();
        for (int n = 1 + static_cast<int>(rng() % 30); n > 0; --n) {
            RegisterSample s;
            s.tid = tid;
            s.pid = rng() % 4 ? tid : static_cast<std::uint32_t>(rng());
            s.time_ns = t;
            s.image = static_cast<std::uint32_t>(rng() % r.images.size());
            s.offset = rng();
            for (auto& reg : s.regs) reg = rng() % 2 ? rng() : rng() % 100;
            r.samples.push_back(s);
            const std::uint64_t step = rng() % 3 ? 1 + rng() % 1'000'000 : 0;
            if (step > kMax - t) break;
            t += step;
        }
    }
    std::sort(r.samples.begin(), r.samples.end(), [](const RegisterSample& a, const RegisterSample& b) {
        return std::tie(a.tid, a.time_ns, a.pid, a.image, a.offset, a.regs) <
               std::tie(b.tid, b.time_ns, b.pid, b.image, b.offset, b.regs);
    });
    CHECK(round_trip(r) == r);
}

TEST_CASE("registers: a loop's snapshots take a few bytes each") {
    // One thread in a loop: the counter steps, a pointer strides, the pc
    // moves among a few instructions, samples ~200 us apart with jitter.
    std::mt19937_64 rng(3);
    RegisterProfile r;
    r.event = "cpu-clock";
    r.period = 200'000;
    r.images = {{"/usr/bin/chase", ""}};
    RegisterSample s;
    s.pid = s.tid = 123456;
    s.time_ns = 5'000'000'000'000;
    s.regs.fill(0x7fff'0000'1000);
    s.regs[0] = 20'000'000;
    const int n = 10'000;
    for (int i = 0; i < n; ++i) {
        s.time_ns += 200'000 + rng() % 5'000;
        s.offset = 0x1130 + 4 * (rng() % 4);
        const std::uint64_t iterations = 9'000 + rng() % 2'000;
        s.regs[0] -= iterations;
        s.regs[6] += 4 * iterations;
        s.regs[2] = rng() % (8u << 20);  // the loaded value: random
        r.samples.push_back(s);
    }
    const auto bytes = encode_registers(r);
    const double per_snapshot = static_cast<double>(bytes.size()) / n;
    MESSAGE("bytes per register snapshot (loop): " << per_snapshot << " (raw: 152)");
    CHECK(per_snapshot < 32);
    CHECK(round_trip(r) == r);
}

TEST_CASE("registers encode canonicalizes: order, duplicates, images, every 0") {
    RegisterProfile r = sample_registers();
    r.every = 0;
    r.images.push_back(r.images[0]);  // duplicate of index 0 at index 2
    std::reverse(r.samples.begin(), r.samples.end());
    r.samples.push_back(r.samples.front());  // a duplicate snapshot
    r.samples[1].image = 2;                   // the duplicate image
    r.samples[2].image = 99;                  // past the table
    auto back = round_trip(r);
    CHECK(back.every == 1);
    REQUIRE(back.images.size() == 3);
    CHECK(back.images[2] == ImageId{kUnknownImage, ""});
    REQUIRE(back.samples.size() == sample_registers().samples.size());
    for (std::size_t i = 1; i < back.samples.size(); ++i) {
        CHECK(std::tie(back.samples[i - 1].tid, back.samples[i - 1].time_ns) <
              std::tie(back.samples[i].tid, back.samples[i].time_ns));
    }
    CHECK(std::count_if(back.samples.begin(), back.samples.end(),
                        [](const RegisterSample& s) { return s.image == 2; }) == 1);
}

TEST_CASE("registers: every bit flip, complement and truncation is rejected") {
    const auto good = encode_registers(sample_registers());
    for (std::size_t i = 0; i < good.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            auto bad = good;
            bad[i] ^= static_cast<std::uint8_t>(1u << bit);
            CAPTURE(i);
            CAPTURE(bit);
            auto r = decode_registers(bad);
            REQUIRE_FALSE(r.ok());
            CHECK_FALSE(r.error().message().empty());
        }
        auto bad = good;
        bad[i] ^= 0xff;
        CHECK_FALSE(decode_registers(bad).ok());
    }
    for (std::size_t n = 0; n < good.size(); ++n) {
        const std::vector<std::uint8_t> prefix(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
        auto r = decode_registers(prefix);
        CAPTURE(n);
        REQUIRE_FALSE(r.ok());
        CHECK_MESSAGE(r.error().message().starts_with("truncated at byte " + std::to_string(n)), r.error().message());
    }
}

TEST_CASE("registers: forged files with a valid checksum never crash the decoder") {
    const auto seed = encode_registers(sample_registers());
    std::mt19937_64 rng(42);
    int decoded = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        auto f = seed;
        for (int e = 0, edits = 1 + static_cast<int>(rng() % 4); e < edits; ++e) {
            const std::size_t at = 6 + rng() % (f.size() - 10);
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
        auto r = decode_registers(f);
        if (r.ok()) {
            ++decoded;
            CHECK(decode_registers(encode_registers(*r)).value() == *r);  // whatever decodes is canonical
        }
    }
    MESSAGE("forged register files that still decoded: " << decoded << " of 20000");
}

TEST_CASE("register structural errors behind a valid checksum are named") {
    SUBCASE("every 0") {
        auto b = registers_header(0);
        put_varint(b, 0);
        CHECK(contains(decode_error(b), "snapshot interval 0"));
    }
    SUBCASE("every wider than 32 bits") {
        auto b = registers_header(std::uint64_t{1} << 32);
        put_varint(b, 0);
        CHECK(contains(decode_error(b), "does not fit in 32 bits"));
    }
    SUBCASE("huge image count") {
        std::vector<std::uint8_t> b;
        put_string(b, "cpu-clock");
        put_varint(b, 200);
        put_varint(b, 1);
        put_varint(b, 0);
        put_varint(b, std::uint64_t{1} << 40);
        CHECK(contains(decode_error(b), "image count 1099511627776"));
    }
    SUBCASE("duplicate image") {
        std::vector<std::uint8_t> b;
        put_string(b, "cpu-clock");
        put_varint(b, 200);
        put_varint(b, 1);
        put_varint(b, 0);
        put_varint(b, 2);
        for (int i = 0; i < 2; ++i) {
            put_string(b, "/bin/x");
            put_string(b, "");
        }
        put_varint(b, 0);
        CHECK(contains(decode_error(b), "appears twice"));
    }
    SUBCASE("huge thread count") {
        auto b = registers_header();
        put_varint(b, 1000);
        CHECK(contains(decode_error(b), "thread count 1000"));
    }
    SUBCASE("huge snapshot count") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 2);
        put_snapshot(b, 10);
        CHECK(contains(decode_error(b), "snapshot count 2"));
    }
    SUBCASE("thread without snapshots") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 0);
        put_snapshot(b, 1);  // bytes enough for the thread count to pass its bound
        CHECK(contains(decode_error(b), "thread 5 has no snapshots"));
    }
    SUBCASE("tids not increasing") {
        auto b = registers_header();
        put_varint(b, 2);
        for (int i = 0; i < 2; ++i) {
            put_varint(b, 5);
            put_varint(b, 1);
            put_snapshot(b, 10);
        }
        CHECK(contains(decode_error(b), "tids must increase"));
    }
    SUBCASE("image index outside the table") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_snapshot(b, 10, 0, 1);
        CHECK(contains(decode_error(b), "image index 1 is outside the 1-entry image table"));
    }
    SUBCASE("a repeated snapshot") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 2);
        put_snapshot(b, 10);
        put_snapshot(b, 0);  // same time, nothing else moved
        CHECK(contains(decode_error(b), "out of order or repeated"));
    }
    SUBCASE("same time, smaller pid") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 2);
        put_snapshot(b, 10, 9);
        put_snapshot(b, 0, -1, 0, 0, 1);  // registers larger, but the pid sorts first
        CHECK(contains(decode_error(b), "out of order or repeated"));
    }
    SUBCASE("time overflow") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 2);
        put_snapshot(b, kMax);
        put_snapshot(b, 1);
        CHECK(contains(decode_error(b), "time overflows 64 bits"));
    }
    SUBCASE("negative pid") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_snapshot(b, 1, -1);
        CHECK(contains(decode_error(b), "pid does not fit in 32 bits"));
    }
    SUBCASE("pid past 32 bits") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_snapshot(b, 1, std::int64_t{1} << 32);
        CHECK(contains(decode_error(b), "pid does not fit in 32 bits"));
    }
    SUBCASE("huge pid delta") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_snapshot(b, 1, std::numeric_limits<std::int64_t>::max());
        CHECK(contains(decode_error(b), "pid does not fit in 32 bits"));
    }
    SUBCASE("trailing bytes") {
        auto b = registers_header();
        put_varint(b, 0);
        b.push_back(0);
        CHECK(contains(decode_error(b), "unexpected bytes"));
    }
}

TEST_CASE("register files: versions and magic") {
    SUBCASE("a newer major version is rejected by name") {
        auto r = decode_registers(forge("ECPR", 2, 0, registers_header()));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message() == "format version 2.0 is newer than this ecpi supports (1.x); upgrade ecpi");
    }
    SUBCASE("a newer minor version is read, the extension's bytes past the flags skipped") {
        auto b = registers_header(4, {1, 2, 3});
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 1);
        put_snapshot(b, 77, 5, 0, 0x40, -2);
        auto r = decode_registers(forge("ECPR", 1, 9, b));
        REQUIRE_MESSAGE(r.ok(), r.error().message());
        CHECK(r->every == 4);
        REQUIRE(r->samples.size() == 1);
        CHECK(r->samples[0].pid == 5);
        CHECK(r->samples[0].tid == 5);
        CHECK(r->samples[0].time_ns == 77);
        CHECK(r->samples[0].offset == 0x40);
        CHECK(r->samples[0].regs[15] == kMax - 1);
        CHECK(r->samples[0].flags == 2);
    }
    SUBCASE("a 1.0 file (no extension) reads every snapshot's flags as not recorded") {
        auto b = registers_header();
        put_varint(b, 1);
        put_varint(b, 5);
        put_varint(b, 2);
        put_snapshot(b, 77, 5, 0, 0x40, -2);
        put_snapshot(b, 10);
        auto r = decode_registers(forge("ECPR", 1, 0, b));
        REQUIRE_MESSAGE(r.ok(), r.error().message());
        REQUIRE(r->samples.size() == 2);
        CHECK(r->samples[0].flags == 0);
        CHECK(r->samples[1].flags == 0);
    }
    SUBCASE("flags for another number of snapshots than the file holds are refused") {
        CHECK(contains(one_snapshot_error({2, 0x46, 0x46}), "flags for 2 snapshots, the file holds 1"));
    }
    SUBCASE("flags past 16 bits are refused") {
        CHECK(contains(one_snapshot_error({1, 0x80, 0x80, 0x04}), "past 16 bits"));
    }
    SUBCASE("mix-ups are named") {
        auto p = decode_profile(encode_registers(sample_registers()));
        REQUIRE_FALSE(p.ok());
        CHECK(p.error().message() == "bad magic: this is an ecpi register file, not a profile file");
        auto r = decode_registers(encode_stacks(testing::sample_stacks()));
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().message() == "bad magic: this is an ecpi stack file, not a register file");
    }
}

TEST_CASE("register merge: images re-indexed, snapshots kept once, in order") {
    RegisterProfile into = sample_registers();
    RegisterProfile from;
    from.event = into.event;
    from.period = into.period;
    from.images = {{"/usr/lib/libm.so.6", ""}, into.images[1]};
    RegisterSample s = into.samples[2];  // libc, index 1 in `into`
    s.image = 1;                         // libc, index 1 in `from` too
    from.samples.push_back(s);           // a snapshot `into` already has
    s.time_ns += 1;
    s.image = 0;  // libm
    from.samples.push_back(s);
    REQUIRE(merge_into(into, from).ok());
    REQUIRE(into.images.size() == 3);
    CHECK(into.images[2] == ImageId{"/usr/lib/libm.so.6", ""});
    REQUIRE(into.samples.size() == sample_registers().samples.size() + 1);
    CHECK(into.samples[3].tid == 7);
    CHECK(into.samples[3].image == 2);
    CHECK(into.samples[3].time_ns == s.time_ns);
    CHECK(decode_registers(encode_registers(into)).value() == into);

    RegisterProfile fresh;
    REQUIRE(merge_into(fresh, sample_registers()).ok());
    CHECK(fresh == sample_registers());
}

TEST_CASE("register merge rejects another event, period or interval") {
    RegisterProfile into = sample_registers();
    RegisterProfile other = sample_registers();
    other.event = "task-clock";
    auto r = merge_into(into, other);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "different events"));
    other = sample_registers();
    other.period = 1;
    r = merge_into(into, other);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "record into a new epoch"));
    other = sample_registers();
    other.every = 10;
    r = merge_into(into, other);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "one sample in 10"));
    CHECK(into == sample_registers());
}

TEST_CASE("register files merge through the database; a bad one is skipped") {
    TempDir tmp;
    auto opened = Database::open(tmp.path(), Database::Mode::kCreate);
    REQUIRE(opened.ok());
    Database db = *opened;
    REQUIRE(db.merge("00001", sample_registers()).ok());
    REQUIRE(db.merge("00001", sample_registers()).ok());
    RegisterProfile task = sample_registers();
    task.event = "task-clock";
    REQUIRE(db.merge("00001", task).ok());
    REQUIRE(db.merge("00001", testing::libc_profile()).ok());
    const fs::path edir = tmp.path() / "epochs" / "00001";
    CHECK(fs::exists(edir / "registers.cpu-clock.reg"));
    CHECK(fs::exists(edir / "registers.task-clock.reg"));

    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->skipped.empty());
    REQUIRE(c->registers.size() == 2);
    CHECK(c->registers[0] == sample_registers());
    CHECK(c->registers[1] == task);

    RegisterProfile other_every = sample_registers();
    other_every.every = 2;
    CHECK_FALSE(db.merge("00001", other_every).ok());

    auto bytes = read_bytes(edir / "registers.task-clock.reg");
    bytes[bytes.size() - 1] ^= 1;
    write_bytes(edir / "registers.task-clock.reg", bytes);
    c = db.read_epoch("00001");
    REQUIRE(c.ok());
    REQUIRE(c->registers.size() == 1);
    CHECK(c->registers[0] == sample_registers());
    CHECK(c->profiles.size() == 1);
    REQUIRE(c->skipped.size() == 1);
    CHECK(c->skipped[0].starts_with((edir / "registers.task-clock.reg").string() + ": checksum mismatch"));
    auto refused = db.merge("00001", task);
    REQUIRE_FALSE(refused.ok());
    CHECK(contains(refused.error().message(), "cannot merge into"));
}

TEST_CASE("register files: past 4 MiB a new segment starts, and segments read as one profile") {
    TempDir tmp;
    auto opened = Database::open(tmp.path(), Database::Mode::kCreate);
    REQUIRE(opened.ok());
    Database db = *opened;
    // Registers that change at random between snapshots take about 150
    // bytes each: three batches of 15,000 pass 4 MiB after the second.
    std::mt19937_64 rng(21);
    std::uint64_t t = 1'000'000;
    auto batch = [&] {
        RegisterProfile r;
        r.event = "cpu-clock";
        r.period = 200;
        r.every = 1;
        r.images.push_back({"/bin/x", "ab12"});
        for (int k = 0; k < 15000; ++k) {
            RegisterSample s;
            s.pid = 7;
            s.tid = 7;
            s.time_ns = t += 200'000;
            s.offset = rng() % 4096;
            for (auto& reg : s.regs) reg = rng();
            r.samples.push_back(s);
        }
        return r;
    };
    RegisterProfile all;
    for (int b = 0; b < 3; ++b) {
        RegisterProfile r = batch();
        if (b == 0) all = r;
        else REQUIRE(merge_into(all, r).ok());
        auto merged = db.merge("00001", r);
        REQUIRE_MESSAGE(merged.ok(), merged.error().message());
    }
    const fs::path edir = tmp.path() / "epochs" / "00001";
    CHECK(fs::file_size(edir / "registers.cpu-clock.reg") >= (4u << 20));
    CHECK(fs::exists(edir / "registers.cpu-clock.s1.reg"));
    CHECK_FALSE(fs::exists(edir / "registers.cpu-clock.s2.reg"));
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->skipped.empty());
    REQUIRE(c->registers.size() == 1);
    CHECK(c->registers[0] == all);
    // A new segment is refused when it could not be read with the others.
    RegisterProfile other = batch();
    other.every = 3;
    auto refused = db.merge("00001", other);
    REQUIRE_FALSE(refused.ok());
    CHECK(contains(refused.error().message(), "one sample in 3"));
}

}  // namespace
}  // namespace ecpi::store
