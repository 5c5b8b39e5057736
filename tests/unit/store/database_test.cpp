// The database directory: creation, epochs, merges, readers, the image cache.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::store {
namespace {

namespace fs = std::filesystem;
using testing::libc_profile;
using testing::read_bytes;
using testing::sample_stacks;
using testing::TempDir;
using testing::write_bytes;

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

Database create(const fs::path& dir) {
    auto db = Database::open(dir, Database::Mode::kCreate);
    REQUIRE_MESSAGE(db.ok(), db.error().message());
    return *db;
}

std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

ImageProfile kernel_profile() {
    ImageProfile p;
    p.image = {kKernelImage, ""};
    p.event = "cpu-clock";
    p.period = 1'000'000;
    p.processes = {{kAllProcesses, {{0x10, 2}}}};
    return p;
}

TEST_CASE("create, open, epochs") {
    TempDir tmp;
    const fs::path dir = tmp.path() / "db";
    Database db = create(dir);
    CHECK(db.path() == dir);
    CHECK(fs::exists(dir / "ECPI_DATABASE"));
    const auto marker = read_bytes(dir / "ECPI_DATABASE");
    CHECK(contains(std::string(marker.begin(), marker.end()), "\"schema\": \"ecpi.database\""));
    CHECK(db.epochs().value() == std::vector<std::string>{"00001"});
    CHECK(db.current_epoch().value() == "00001");
    CHECK(db.new_epoch().value() == "00002");
    CHECK(db.new_epoch().value() == "00003");
    CHECK(db.current_epoch().value() == "00003");
    CHECK(db.epochs().value() == std::vector<std::string>{"00001", "00002", "00003"});

    // Reopening for writing keeps what is there; opening read-only works.
    Database again = create(dir);
    CHECK(again.epochs().value().size() == 3);
    auto ro = Database::open(dir, Database::Mode::kReadOnly);
    REQUIRE(ro.ok());
    CHECK(ro->current_epoch().value() == "00003");
    auto no = ro->new_epoch();
    REQUIRE_FALSE(no.ok());
    CHECK(contains(no.error().message(), "read-only"));
    CHECK_FALSE(ro->merge("00001", libc_profile()).ok());

    // Stray entries in epochs/ are not epochs.
    fs::create_directory(dir / "epochs" / "notes");
    fs::create_directory(dir / "epochs" / "000004");
    write_bytes(dir / "epochs" / "00009", {1});
    CHECK(db.epochs().value().size() == 3);
}

TEST_CASE("epochs sort by number past 99999") {
    TempDir tmp;
    Database db = create(tmp.path());
    fs::create_directory(tmp.path() / "epochs" / "99999");
    CHECK(db.new_epoch().value() == "100000");
    CHECK(db.current_epoch().value() == "100000");
    CHECK(db.epochs().value().back() == "100000");
}

TEST_CASE("an empty existing directory can become a database") {
    TempDir tmp;
    Database db = create(tmp.path());
    CHECK(db.current_epoch().value() == "00001");
}

TEST_CASE("not a database") {
    TempDir tmp;
    auto r = Database::open(tmp.path(), Database::Mode::kReadOnly);
    REQUIRE_FALSE(r.ok());
    const std::string d = tmp.path().string();
    CHECK(r.error().message() ==
          d + " is not an ecpi database (no ECPI_DATABASE file); record one with `ecpi record -o " + d + "`");

    auto missing = Database::open(tmp.path() / "nope", Database::Mode::kReadOnly);
    REQUIRE_FALSE(missing.ok());
    CHECK(contains(missing.error().message(), "is not an ecpi database"));

    // Never clobber a directory holding something else.
    write_bytes(tmp.path() / "thesis.tex", {'x'});
    auto c = Database::open(tmp.path(), Database::Mode::kCreate);
    REQUIRE_FALSE(c.ok());
    CHECK(contains(c.error().message(), "not empty and is not an ecpi database"));
    CHECK(names_in(tmp.path()) == std::vector<std::string>{"thesis.tex"});

    // A file where the database should be.
    auto f = Database::open(tmp.path() / "thesis.tex", Database::Mode::kCreate);
    CHECK_FALSE(f.ok());
}

TEST_CASE("a newer database version is rejected by name") {
    TempDir tmp;
    const std::string text = R"({"schema": "ecpi.database", "version": 3})";
    write_bytes(tmp.path() / "ECPI_DATABASE", std::vector<std::uint8_t>(text.begin(), text.end()));
    auto r = Database::open(tmp.path(), Database::Mode::kReadOnly);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "database version 3 is newer than this ecpi supports (2); upgrade ecpi"));
    CHECK_FALSE(Database::open(tmp.path(), Database::Mode::kCreate).ok());
}

TEST_CASE("read-only database with no epochs") {
    TempDir tmp;
    const std::string text = R"({"schema": "ecpi.database", "version": 1})";
    write_bytes(tmp.path() / "ECPI_DATABASE", std::vector<std::uint8_t>(text.begin(), text.end()));
    auto db = Database::open(tmp.path(), Database::Mode::kReadOnly);
    REQUIRE(db.ok());
    CHECK(db->epochs().value().empty());
    auto e = db->current_epoch();
    REQUIRE_FALSE(e.ok());
    CHECK(contains(e.error().message(), "has no epochs yet"));
}

TEST_CASE("merge twice adds up; file names follow FORMAT.md") {
    TempDir tmp;
    Database db = create(tmp.path());
    const std::string epoch = db.current_epoch().value();
    REQUIRE(db.merge(epoch, libc_profile()).ok());
    REQUIRE(db.merge(epoch, libc_profile()).ok());
    REQUIRE(db.merge(epoch, kernel_profile()).ok());

    const auto names = names_in(tmp.path() / "epochs" / epoch);
    REQUIRE(names.size() == 2);
    // Pinned: the names are part of the format (FORMAT.md section 1).
    CHECK(names[0] == "kernel-e7a6142c.cpu-clock.prof");
    CHECK(names[1] == "libc.so.6-df90b450.cpu-clock.prof");

    auto contents = db.read_epoch(epoch);
    REQUIRE(contents.ok());
    CHECK(contents->epoch == epoch);
    CHECK(contents->skipped.empty());
    REQUIRE(contents->profiles.size() == 2);
    const ImageProfile& libc = contents->profiles[1];
    CHECK(libc.image == libc_profile().image);
    CHECK(libc.total() == 2 * libc_profile().total());
    CHECK(libc.processes[0].counts[0] == OffsetCount{0x1000, 6});
    CHECK(contents->profiles[0] == kernel_profile());
}

TEST_CASE("merge refuses a period mismatch and a file it cannot read") {
    TempDir tmp;
    Database db = create(tmp.path());
    REQUIRE(db.merge("00001", libc_profile()).ok());
    const fs::path file = tmp.path() / "epochs" / "00001" / names_in(tmp.path() / "epochs" / "00001")[0];
    const auto before = read_bytes(file);

    ImageProfile other = libc_profile();
    other.period = 1;
    auto r = db.merge("00001", other);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), file.string()));
    CHECK(contains(r.error().message(), "new epoch"));
    CHECK(read_bytes(file) == before);

    auto corrupt = before;
    corrupt[corrupt.size() / 2] ^= 0x40;
    write_bytes(file, corrupt);
    r = db.merge("00001", libc_profile());
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "cannot merge into " + file.string()));
    CHECK(read_bytes(file) == corrupt);  // not overwritten

    CHECK_FALSE(db.merge("00002", libc_profile()).ok());  // no such epoch
    auto bad = db.merge("../../etc", libc_profile());
    REQUIRE_FALSE(bad.ok());
    CHECK(contains(bad.error().message(), "invalid epoch name"));
}

TEST_CASE("an epoch is read by its number as well as its name") {
    TempDir tmp;
    Database db = create(tmp.path());
    REQUIRE(db.merge("00001", libc_profile()).ok());
    auto by_number = db.read_epoch("1");
    REQUIRE_MESSAGE(by_number.ok(), by_number.error().message());
    CHECK(by_number->epoch == "00001");
    CHECK(by_number->profiles.size() == 1);
    auto missing = db.read_epoch("2");
    REQUIRE_FALSE(missing.ok());
    CHECK(contains(missing.error().message(), "no epoch 00002"));
    for (const char* bad : {"0", "01", "-1", "1x", "000001"}) {
        auto r = db.read_epoch(bad);
        REQUIRE_FALSE(r.ok());
        CHECK(contains(r.error().message(), "invalid epoch name"));
    }
}

TEST_CASE("a FIFO or a device in an epoch is skipped by name, never read (a FIFO would block forever)") {
    TempDir tmp;
    Database db = create(tmp.path());
    REQUIRE(db.merge("00001", libc_profile()).ok());
    const fs::path edir = tmp.path() / "epochs" / "00001";
    REQUIRE(::mkfifo((edir / "x.cpu-clock.prof").c_str(), 0600) == 0);
    REQUIRE(::mkfifo((edir / "epoch.json.fifo").c_str(), 0600) == 0);  // an unknown name: ignored
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->profiles.size() == 1);
    REQUIRE(c->skipped.size() == 1);
    CHECK(contains(c->skipped[0], (edir / "x.cpu-clock.prof").string()));
    CHECK(contains(c->skipped[0], "a FIFO, not a regular file"));
}

TEST_CASE("symbolic links that leave the database are refused by name; links inside are followed") {
    TempDir tmp;
    const fs::path dir = tmp.path() / "db";
    Database db = create(dir);
    REQUIRE(db.merge("00001", libc_profile()).ok());
    const fs::path edir = dir / "epochs" / "00001";
    // A profile file linked to one outside.
    fs::create_directories(tmp.path() / "outside");
    fs::copy_file(edir / names_in(edir).front(), tmp.path() / "outside" / "x.prof");
    fs::create_symlink(tmp.path() / "outside" / "x.prof", edir / "evil.cpu-clock.prof");
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    REQUIRE(c->skipped.size() == 1);
    CHECK(contains(c->skipped[0], "evil.cpu-clock.prof is a symbolic link to"));
    CHECK(contains(c->skipped[0], "outside the database: refused"));
    fs::remove(edir / "evil.cpu-clock.prof");
    // An epoch directory linked outside: neither read nor written.
    fs::create_symlink(tmp.path() / "outside", dir / "epochs" / "00002");
    auto r = db.read_epoch("00002");
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "outside the database"));
    CHECK_FALSE(db.merge("00002", libc_profile()).ok());
    CHECK(names_in(tmp.path() / "outside") == std::vector<std::string>{"x.prof"});
    // A link that stays inside is followed.
    fs::remove(dir / "epochs" / "00002");
    fs::create_directory_symlink(edir, dir / "epochs" / "00003");
    auto inside = db.read_epoch("00003");
    REQUIRE_MESSAGE(inside.ok(), inside.error().message());
    CHECK(inside->profiles.size() == 1);
}

TEST_CASE("read_epoch skips a corrupted file by name and returns the rest") {
    TempDir tmp;
    Database db = create(tmp.path());
    REQUIRE(db.merge("00001", libc_profile()).ok());
    REQUIRE(db.merge("00001", kernel_profile()).ok());
    REQUIRE(db.merge("00001", sample_stacks()).ok());
    const fs::path edir = tmp.path() / "epochs" / "00001";
    const fs::path kernel_file = edir / names_in(edir)[0];
    auto bytes = read_bytes(kernel_file);
    bytes[bytes.size() - 1] ^= 1;
    write_bytes(kernel_file, bytes);
    fs::create_directory(edir / "dir.prof");           // unreadable
    write_bytes(edir / "bogus.stk", {'E', 'C', 'P'});  // truncated
    write_bytes(edir / "README", {'h', 'i'});          // unknown kind: ignored

    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    REQUIRE(c->profiles.size() == 1);
    CHECK(c->profiles[0].image == libc_profile().image);
    REQUIRE(c->stacks.size() == 1);
    CHECK(c->stacks[0] == sample_stacks());
    REQUIRE(c->skipped.size() == 3);
    CHECK(c->skipped[0] == (edir / "bogus.stk").string() + ": truncated at byte 3 (while reading magic)");
    CHECK(c->skipped[1] == (edir / "dir.prof").string() + ": Is a directory");
    CHECK(c->skipped[2].starts_with(kernel_file.string() + ": checksum mismatch"));

    CHECK_FALSE(db.read_epoch("00007").ok());
}

TEST_CASE("temp files are ignored by readers and never left behind by writers") {
    TempDir tmp;
    Database db = create(tmp.path());
    const fs::path edir = tmp.path() / "epochs" / "00001";
    write_bytes(edir / ".tmp-0123456789abcdef", {'g', 'a', 'r', 'b', 'a', 'g', 'e'});
    REQUIRE(db.merge("00001", libc_profile()).ok());
    REQUIRE(db.merge("00001", libc_profile()).ok());
    EpochMeta meta;
    meta.hostname = "h";
    REQUIRE(db.merge("00001", meta).ok());
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->skipped.empty());
    CHECK(c->profiles.size() == 1);
    int temps = 0;
    for (const auto& n : names_in(edir)) temps += n.starts_with(".tmp-") ? 1 : 0;
    CHECK(temps == 1);  // only the one planted above
    for (const auto& n : names_in(tmp.path())) CHECK_FALSE(n.starts_with(".tmp-"));
}

TEST_CASE("epoch.json round trip and merge") {
    TempDir tmp;
    Database db = create(tmp.path());
    EpochMeta m;
    m.events["cpu-clock"] = {1'000'000, 12345, 7, 2};
    m.events["cycles"] = {kMaxPeriod, 1, 0, 0};
    m.processes[1] = {"systemd", "/sbin/init splash"};
    m.processes[kAllProcesses] = {"", ""};
    m.processes[42] = {"wéird \"name\"", std::string("a\0b\\c\n", 6)};
    m.hostname = "host.example";
    m.kernel_release = "6.1.0-18-amd64";
    m.cpu_mhz = 2893.4371;
    m.cpu_mhz_measured = 3651.25;
    m.cpu_mhz_sampled = 3302.75;
    m.chase_latency = {{16u << 20, 316.5, 247.25, 325.5}, {64u << 20, 591.5, 475, 603.25}};
    m.cpu_vendor = "AuthenticAMD";
    m.cpu_family = 26;
    m.cpu_model = 2;
    m.cpu_name = "AMD EPYC 9R45";
    m.first_sample_unix = -5;
    m.last_update_unix = 1'700'000'000;
    REQUIRE(db.merge("00001", m).ok());
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->skipped.empty());
    CHECK(c->meta == m);

    const auto text = read_bytes(tmp.path() / "epochs" / "00001" / "epoch.json");
    const std::string s(text.begin(), text.end());
    CHECK(contains(s, "\"schema\": \"ecpi.epoch\""));
    CHECK(contains(s, "\"version\": 1"));

    REQUIRE(db.merge("00001", m).ok());
    c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->meta.events["cpu-clock"].samples == 2 * 12345);
    CHECK(c->meta.processes == m.processes);
}

TEST_CASE("epoch.json: invalid UTF-8 is replaced, bad documents are skipped") {
    TempDir tmp;
    Database db = create(tmp.path());
    EpochMeta m;
    m.processes[7] = {"bad\xff", "x\xc3"};
    REQUIRE(db.merge("00001", m).ok());
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->skipped.empty());
    CHECK(c->meta.processes.count(7) == 1);

    const fs::path file = tmp.path() / "epochs" / "00001" / "epoch.json";
    for (const std::string bad : {R"({"schema":"ecpi.epoch","version":1,"events":{"x":{"samples":-1}}})",
                                  R"({"schema":"ecpi.epoch","version":9})", R"([1,2])", "{", R"({"version":1})",
                                  R"({"schema":"ecpi.epoch","version":1,"processes":{"pid1":{}}})"}) {
        write_bytes(file, std::vector<std::uint8_t>(bad.begin(), bad.end()));
        c = db.read_epoch("00001");
        REQUIRE(c.ok());
        CAPTURE(bad);
        REQUIRE(c->skipped.size() == 1);
        CHECK(c->skipped[0].starts_with(file.string() + ": "));
        CHECK_FALSE(db.merge("00001", m).ok());  // never overwritten
    }
    c = db.read_epoch("00001");
    CHECK(contains(c->skipped[0], "not a pid"));
}

TEST_CASE("epoch.json: numbers no recording holds are rejected as damaged (forged totals, clock rates)") {
    TempDir tmp;
    Database db = create(tmp.path());
    const fs::path file = tmp.path() / "epochs" / "00001" / "epoch.json";
    const std::pair<std::string, std::string> forged[] = {
        {R"({"schema":"ecpi.epoch","version":1,"events":{"cpu-clock":{"samples":18446744073709551615}}})",
         "more than any recording holds"},
        {R"({"schema":"ecpi.epoch","version":1,"cpu_mhz":-1})", "not a clock rate"},
        {R"({"schema":"ecpi.epoch","version":1,"cpu_mhz":1e308})", "not a clock rate"},
        {R"({"schema":"ecpi.epoch","version":1,"cpu_mhz_measured":100001})", "not a clock rate"},
        {R"({"schema":"ecpi.epoch","version":1,"events":{"cpu-clock":{"period":18446744073709551615}}})",
         "period"},
        {R"({"schema":"ecpi.epoch","version":1,"events":{"cpu-clock":{"samples":5,"unknown":6}}})",
         "more unknown samples"},
    };
    for (const auto& [bad, why] : forged) {
        write_bytes(file, std::vector<std::uint8_t>(bad.begin(), bad.end()));
        auto c = db.read_epoch("00001");
        REQUIRE(c.ok());
        CAPTURE(bad);
        REQUIRE(c->skipped.size() == 1);
        CHECK(contains(c->skipped[0], why));
        CHECK(c->meta.events.empty());
    }
    // The largest honest values still read.
    const std::string fine =
        R"({"schema":"ecpi.epoch","version":1,"cpu_mhz":5000,"events":{"cpu-clock":{"samples":1125899906842624,"period":1000000}}})";
    write_bytes(file, std::vector<std::uint8_t>(fine.begin(), fine.end()));
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    CHECK(c->skipped.empty());
    CHECK(c->meta.events.at("cpu-clock").samples == kMaxSampleCount);
}

TEST_CASE("stack files merge through the database") {
    TempDir tmp;
    Database db = create(tmp.path());
    REQUIRE(db.merge("00001", sample_stacks()).ok());
    REQUIRE(db.merge("00001", sample_stacks()).ok());
    StackProfile cycles = sample_stacks();
    cycles.event = "cycles";
    REQUIRE(db.merge("00001", cycles).ok());
    const auto names = names_in(tmp.path() / "epochs" / "00001");
    CHECK(names == std::vector<std::string>{"stacks.cpu-clock.stk", "stacks.cycles.stk"});
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    REQUIRE(c->stacks.size() == 2);
    CHECK(c->stacks[0].stacks[0].count == 2 * sample_stacks().stacks[0].count);
    CHECK(c->stacks[1] == cycles);
}

TEST_CASE("events whose names sanitize alike get separate files") {
    TempDir tmp;
    Database db = create(tmp.path());
    ImageProfile a = libc_profile();
    a.event = "raw:0x1";
    ImageProfile b = libc_profile();
    b.event = "raw/0x1";
    REQUIRE(db.merge("00001", a).ok());
    REQUIRE(db.merge("00001", b).ok());
    REQUIRE(db.merge("00001", b).ok());
    const auto names = names_in(tmp.path() / "epochs" / "00001");
    REQUIRE(names.size() == 2);
    CHECK(names[0].ends_with(".raw_0x1.prof"));
    CHECK(names[1].ends_with(".raw_0x1~1.prof"));
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    REQUIRE(c->profiles.size() == 2);
    CHECK(c->profiles[0].total() == a.total());
    CHECK(c->profiles[1].total() == 2 * b.total());
}

TEST_CASE("concurrent writers serialize on the lock") {
    TempDir tmp;
    Database db = create(tmp.path());
    constexpr int kThreads = 4;
    constexpr int kMerges = 25;
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < kMerges; ++i) {
                if (!db.merge("00001", libc_profile()).ok()) ++failures;
            }
        });
    }
    for (auto& t : threads) t.join();
    CHECK(failures == 0);
    auto c = db.read_epoch("00001");
    REQUIRE(c.ok());
    REQUIRE(c->profiles.size() == 1);
    CHECK(c->profiles[0].total() == kThreads * kMerges * libc_profile().total());
}

TEST_CASE("image cache") {
    TempDir tmp;
    Database db = create(tmp.path() / "db");
    const fs::path source = tmp.path() / "libfoo.so";
    std::vector<std::uint8_t> content(200'000);
    for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<std::uint8_t>(i * 7);
    write_bytes(source, content);

    const std::string bid = "3f2a9c1e5d7b";
    CHECK(db.cached_image_path(bid) == tmp.path() / "db" / "images" / "3f" / "2a9c1e5d7b");
    REQUIRE(db.cache_image(bid, source).ok());
    CHECK(read_bytes(db.cached_image_path(bid)) == content);
    // Already cached: not copied again (the source may be gone by now).
    fs::remove(source);
    CHECK(db.cache_image(bid, source).ok());

    auto missing = db.cache_image("abcdef", source);
    REQUIRE_FALSE(missing.ok());
    CHECK(contains(missing.error().message(), source.string()));
    CHECK(names_in(tmp.path() / "db" / "images" / "ab").empty());

    CHECK_FALSE(db.cache_image("../../x", source).ok());
    CHECK_FALSE(db.cache_image("ABCDEF", source).ok());
    auto ro = Database::open(tmp.path() / "db", Database::Mode::kReadOnly);
    REQUIRE(ro.ok());
    CHECK_FALSE(ro->cache_image("abcdef", source).ok());
}

TEST_CASE("how call stacks ended (stack_ends) round-trips, adds up in a merge, and is bounded") {
    TempDir tmp;
    Database db = create(tmp.path() / "db");
    EpochMeta meta;
    meta.events["cpu-clock"] = EventMeta{.period = 1000, .samples = 10, .stack_ends = {{"root", 9}, {"no_table", 1}}};
    REQUIRE(db.merge("00001", meta).ok());
    meta.events["cpu-clock"] = EventMeta{.period = 1000, .samples = 5, .stack_ends = {{"root", 4}, {"no_row", 1}}};
    REQUIRE(db.merge("00001", meta).ok());
    auto contents = db.read_epoch("00001");
    REQUIRE(contents.ok());
    CHECK(contents->meta.events.at("cpu-clock").stack_ends ==
          std::map<std::string, std::uint64_t>{{"no_row", 1}, {"no_table", 1}, {"root", 13}});

    // A count that is not a sample count is damage, named.
    const fs::path json = tmp.path() / "db" / "epochs" / "00001" / "epoch.json";
    std::string text;
    {
        auto bytes = read_bytes(json);
        text.assign(bytes.begin(), bytes.end());
    }
    const auto at = text.find("\"root\": 13");
    REQUIRE(at != std::string::npos);
    text.replace(at, 10, "\"root\": -1");
    write_bytes(json, std::vector<std::uint8_t>(text.begin(), text.end()));
    auto damaged = db.read_epoch("00001");
    REQUIRE(damaged.ok());
    REQUIRE(damaged->skipped.size() == 1);
    CHECK(contains(damaged->skipped[0], "stack_ends"));
}

}  // namespace
}  // namespace ecpi::store

namespace ecpi::store {
namespace {

// Issue 20: databases written before idle was counted apart hold the idle
// task's samples as pid 0 in the kernel's profile (and pid 0 stacks); the
// reader moves them to the event's idle count, so old and new read alike.
TEST_CASE("pid 0 samples of an old database read as idle, kept apart") {
    TempDir tmp;
    Database db = create(tmp.path() / "db");
    ImageProfile kernel = kernel_profile();
    kernel.processes = {{kIdlePid, {{0x10, 70}, {0x20, 5}}}, {42, {{0x30, 25}}}};
    REQUIRE(db.merge("00001", kernel).ok());
    StackProfile stacks;
    stacks.event = "cpu-clock";
    stacks.period = 1'000'000;
    stacks.images = {{kKernelImage, ""}};
    stacks.stacks = {{kIdlePid, {{0, 0x10}}, 75}, {42, {{0, 0x30}}, 25}};
    REQUIRE(db.merge("00001", stacks).ok());
    EpochMeta meta;
    meta.events["cpu-clock"] = EventMeta{.period = 1'000'000, .samples = 100};
    REQUIRE(db.merge("00001", meta).ok());

    auto contents = db.read_epoch("00001");
    REQUIRE(contents.ok());
    REQUIRE(contents->profiles.size() == 1);
    CHECK(contents->profiles[0].processes.size() == 1);
    CHECK(contents->profiles[0].processes[0].pid == 42);
    const EventMeta& e = contents->meta.events.at("cpu-clock");
    CHECK(e.idle == 75);
    CHECK(e.idle_per_cpu.empty());  // the old format did not say which CPU
    CHECK(e.samples == 25);
    REQUIRE(contents->stacks.size() == 1);
    CHECK(contents->stacks[0].stacks.size() == 1);
    CHECK(contents->stacks[0].stacks[0].pid == 42);
}

TEST_CASE("idle counts per CPU round-trip, merge, and are bounded") {
    TempDir tmp;
    Database db = create(tmp.path() / "db");
    EpochMeta meta;
    meta.events["cpu-clock"] = EventMeta{.period = 1000, .samples = 10, .idle = 7, .idle_per_cpu = {3, 4}};
    REQUIRE(db.merge("00001", meta).ok());
    meta.events["cpu-clock"] = EventMeta{.period = 1000, .samples = 1, .idle = 5, .idle_per_cpu = {0, 2, 3}};
    REQUIRE(db.merge("00001", meta).ok());
    auto contents = db.read_epoch("00001");
    REQUIRE(contents.ok());
    const EventMeta& e = contents->meta.events.at("cpu-clock");
    CHECK(e.idle == 12);
    CHECK(e.idle_per_cpu == std::vector<std::uint64_t>{3, 6, 3});

    // A list that does not add up to the total is damage, named.
    const fs::path json = tmp.path() / "db" / "epochs" / "00001" / "epoch.json";
    std::string text;
    {
        auto bytes = read_bytes(json);
        text.assign(bytes.begin(), bytes.end());
    }
    const auto at = text.find("\"idle\": 12");
    REQUIRE(at != std::string::npos);
    text.replace(at, 10, "\"idle\": 13");
    write_bytes(json, std::vector<std::uint8_t>(text.begin(), text.end()));
    auto damaged = db.read_epoch("00001");
    REQUIRE(damaged.ok());
    REQUIRE(damaged->skipped.size() == 1);
    CHECK(contains(damaged->skipped[0], "idle_per_cpu adds up to 12, not idle 13"));
}

TEST_CASE("how call stacks ended (stack_ends) round-trips, adds up in a merge, and is bounded") {
    TempDir tmp;
    Database db = create(tmp.path() / "db");
    EpochMeta meta;
    meta.events["cpu-clock"] = EventMeta{.period = 1000, .samples = 10, .stack_ends = {{"root", 9}, {"no_table", 1}}};
    REQUIRE(db.merge("00001", meta).ok());
    meta.events["cpu-clock"] = EventMeta{.period = 1000, .samples = 5, .stack_ends = {{"root", 4}, {"no_row", 1}}};
    REQUIRE(db.merge("00001", meta).ok());
    auto contents = db.read_epoch("00001");
    REQUIRE(contents.ok());
    CHECK(contents->meta.events.at("cpu-clock").stack_ends ==
          std::map<std::string, std::uint64_t>{{"no_row", 1}, {"no_table", 1}, {"root", 13}});

    // A count that is not a sample count is damage, named.
    const fs::path json = tmp.path() / "db" / "epochs" / "00001" / "epoch.json";
    std::string text;
    {
        auto bytes = read_bytes(json);
        text.assign(bytes.begin(), bytes.end());
    }
    const auto at = text.find("\"root\": 13");
    REQUIRE(at != std::string::npos);
    text.replace(at, 10, "\"root\": -1");
    write_bytes(json, std::vector<std::uint8_t>(text.begin(), text.end()));
    auto damaged = db.read_epoch("00001");
    REQUIRE(damaged.ok());
    REQUIRE(damaged->skipped.size() == 1);
    CHECK(contains(damaged->skipped[0], "stack_ends"));
}

TEST_CASE("the kernel's idle time per CPU round-trips, adds up per CPU, and is bounded") {
    TempDir tmp;
    Database db = create(tmp.path() / "db");
    EpochMeta meta;
    meta.idle_ns_per_cpu = {1'000'000, 3'000'000'000};
    REQUIRE(db.merge("00001", meta).ok());
    meta.idle_ns_per_cpu = {5, 6, 7};
    REQUIRE(db.merge("00001", meta).ok());
    auto contents = db.read_epoch("00001");
    REQUIRE(contents.ok());
    CHECK(contents->meta.idle_ns_per_cpu == std::vector<std::uint64_t>{1'000'005, 3'000'000'006, 7});

    const fs::path json = tmp.path() / "db" / "epochs" / "00001" / "epoch.json";
    auto bytes = read_bytes(json);
    std::string text(bytes.begin(), bytes.end());
    const auto at = text.find("3000000006");
    REQUIRE(at != std::string::npos);
    text.replace(at, 10, "999999999999999999");  // 31 years
    write_bytes(json, std::vector<std::uint8_t>(text.begin(), text.end()));
    auto damaged = db.read_epoch("00001");
    REQUIRE(damaged.ok());
    REQUIRE(damaged->skipped.size() == 1);
    CHECK(contains(damaged->skipped[0], "idle_ns_per_cpu holds 999999999999999999 ns, more than ten years of one CPU"));
}

}  // namespace
}  // namespace ecpi::store
