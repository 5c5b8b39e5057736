// The epoch journal (FORMAT.md §13, issue 37): appended flushes read like
// merged files, a torn record is dropped and counted, compaction keeps every
// sample and writes only when it pays.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>

#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::store {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

Database create(const fs::path& dir) {
    auto db = Database::open(dir, Database::Mode::kCreate);
    REQUIRE_MESSAGE(db.ok(), db.error().message());
    return *db;
}

// Flush number i of a daemon watching a steady program and one short-lived
// process per flush: the same hot pcs every time, a new pid each time.
EpochBatch flush_number(std::uint32_t i) {
    EpochBatch b;
    ImageProfile hot;
    hot.image = {"/usr/bin/server", "aabbccdd"};
    hot.event = "cpu-clock";
    hot.period = 1'000'000;
    hot.processes = {{100, {{0x1000, 5 + i % 3}, {0x1004, 2}, {0x2000 + (i % 7), 1}}}, {1000 + i, {{0x1000, 1}}}};
    b.profiles.push_back(hot);
    ImageProfile kernel;
    kernel.image = {kKernelImage, ""};
    kernel.event = "cpu-clock";
    kernel.period = 1'000'000;
    kernel.processes = {{1000 + i, {{0x40, 1}}}};
    b.profiles.push_back(kernel);
    StackProfile st;
    st.event = "cpu-clock";
    st.period = 1'000'000;
    st.images = {{kKernelImage, ""}, {"/usr/bin/server", "aabbccdd"}};
    st.stacks = {{100, {{1, 0x1000}, {1, 0x3000}}, 5}, {1000 + i, {{0, 0x40}}, 1}};
    b.stacks.push_back(st);
    b.meta.events["cpu-clock"] = {1'000'000, 10 + i % 3, 0, 0, 0, 0, {}, {}};
    b.meta.processes[1000 + i] = {"sh", "sh -c true " + std::to_string(i)};
    b.meta.last_update_unix = 1'700'000'000 + i;
    b.meta.first_sample_unix = 1'700'000'000 + i;
    return b;
}

std::vector<fs::path> journal_files(const fs::path& epoch_dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(epoch_dir))
        if (e.path().extension() == ".ecj") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

std::uint64_t total_samples(const EpochContents& c) {
    std::uint64_t n = 0;
    for (const ImageProfile& p : c.profiles) n += p.total();
    return n;
}

TEST_CASE("appended flushes read the same as merged ones") {
    TempDir a, b;
    Database merged = create(a.path()), appended = create(b.path());
    for (std::uint32_t i = 0; i < 40; ++i) {
        const EpochBatch batch = flush_number(i);
        for (const ImageProfile& p : batch.profiles) REQUIRE(merged.merge("00001", p).ok());
        for (const StackProfile& s : batch.stacks) REQUIRE(merged.merge("00001", s).ok());
        REQUIRE(merged.merge("00001", batch.meta).ok());
        REQUIRE(appended.append("00001", batch).ok());
    }
    auto want = merged.read_epoch("00001");
    auto got = appended.read_epoch("00001");
    REQUIRE(want.ok());
    REQUIRE(got.ok());
    CHECK(got->skipped.empty());
    CHECK(got->torn_bytes == 0);
    CHECK(got->profiles.size() == want->profiles.size());
    for (const ImageProfile& p : want->profiles) {
        auto same = std::find_if(got->profiles.begin(), got->profiles.end(),
                                 [&](const ImageProfile& g) { return g.image == p.image && g.event == p.event; });
        REQUIRE(same != got->profiles.end());
        CHECK(*same == p);
    }
    CHECK(got->stacks == want->stacks);
    CHECK(got->meta == want->meta);
    CHECK(appended.read_epoch_meta("00001").value() == want->meta);
    // The writes are about the new data: each flush is one small record, not
    // a rewrite of every file the epoch holds.
    CHECK(appended.bytes_written() * 3 < merged.bytes_written());
    // An older ecpi would not see the journal: the database says version 2.
    const auto marker = read_bytes(b.path() / "ECPI_DATABASE");
    CHECK(std::string(marker.begin(), marker.end()).find("\"version\": 2") != std::string::npos);
}

TEST_CASE("a torn record is dropped, counted, and cut off before the next append") {
    TempDir tmp;
    Database db = create(tmp.path());
    REQUIRE(db.append("00001", flush_number(0)).ok());
    REQUIRE(db.append("00001", flush_number(1)).ok());
    const fs::path epoch_dir = tmp.path() / "epochs" / "00001";
    const auto files = journal_files(epoch_dir);
    REQUIRE(files.size() == 1);
    const auto whole = read_bytes(files[0]);
    const std::uint64_t two_records = total_samples(db.read_epoch("00001").value());
    REQUIRE(two_records > 0);
    // A crash in the middle of the second record's write, at every length.
    std::uint64_t first_record_samples = 0;
    {
        TempDir one;
        Database single = create(one.path());
        REQUIRE(single.append("00001", flush_number(0)).ok());
        first_record_samples = total_samples(single.read_epoch("00001").value());
    }
    for (std::size_t cut = 1; cut < 40; ++cut) {
        std::vector<std::uint8_t> torn(whole.begin(), whole.end() - static_cast<std::ptrdiff_t>(cut));
        write_bytes(files[0], torn);
        auto r = Database::open(tmp.path(), Database::Mode::kReadOnly).value().read_epoch("00001");
        REQUIRE(r.ok());
        CHECK(r->skipped.empty());
        CHECK(r->torn_bytes > 0);
        CHECK(total_samples(*r) == first_record_samples);
    }
    // A writer that did not write the tail itself checks it first: the torn
    // bytes go, the new record follows the last whole one.
    Database other = create(tmp.path());
    REQUIRE(other.append("00001", flush_number(1)).ok());
    CHECK(other.torn_bytes_dropped() > 0);
    auto r = other.read_epoch("00001");
    REQUIRE(r.ok());
    CHECK(r->torn_bytes == 0);
    CHECK(total_samples(*r) == two_records);
}

TEST_CASE("compaction keeps every sample and is written only when it halves the journal") {
    TempDir tmp;
    Database db = create(tmp.path());
    for (std::uint32_t i = 0; i < 200; ++i) REQUIRE(db.append("00001", flush_number(i)).ok());
    const auto before = db.read_epoch("00001").value();
    // Under the threshold: nothing happens.
    auto early = db.compact("00001", 1u << 30);
    REQUIRE(early.ok());
    CHECK_FALSE(early->done);
    auto c = db.compact("00001", 0);
    REQUIRE(c.ok());
    CHECK(c->done);
    CHECK(c->after * 2 <= c->before);
    const fs::path epoch_dir = tmp.path() / "epochs" / "00001";
    const auto files = journal_files(epoch_dir);
    REQUIRE(files.size() == 1);
    CHECK(files[0].filename().string().starts_with("compact."));
    const auto after = db.read_epoch("00001").value();
    CHECK(after.profiles == before.profiles);
    CHECK(after.stacks == before.stacks);
    CHECK(after.meta == before.meta);
    // Appends go on after it, into a new segment, and read with it.
    REQUIRE(db.append("00001", flush_number(500)).ok());
    CHECK(total_samples(db.read_epoch("00001").value()) > total_samples(after));
}

TEST_CASE("a compaction cut by a crash leaves files readers ignore") {
    TempDir tmp;
    Database db = create(tmp.path());
    for (std::uint32_t i = 0; i < 50; ++i) REQUIRE(db.append("00001", flush_number(i)).ok());
    const fs::path epoch_dir = tmp.path() / "epochs" / "00001";
    const auto segments = journal_files(epoch_dir);
    std::vector<std::vector<std::uint8_t>> kept;
    for (const fs::path& f : segments) kept.push_back(read_bytes(f));
    const auto before = db.read_epoch("00001").value();
    REQUIRE(db.compact("00001", 0).value().done);
    // The crash came after the compacted file's rename, before the removals.
    for (std::size_t i = 0; i < segments.size(); ++i) write_bytes(segments[i], kept[i]);
    const auto after = db.read_epoch("00001").value();
    CHECK(after.profiles == before.profiles);
    CHECK(after.meta == before.meta);
    // The next compaction (or append) removes them and goes on.
    REQUIRE(db.append("00001", flush_number(99)).ok());
    REQUIRE(db.compact("00001", 0).ok());
    for (const fs::path& f : segments) CHECK_FALSE(fs::exists(f));
}

TEST_CASE("a journal that would not shrink is left as it is") {
    TempDir tmp;
    Database db = create(tmp.path());
    // Every flush holds new pids only: nothing for a compaction to fold.
    for (std::uint32_t i = 0; i < 30; ++i) {
        EpochBatch b;
        ImageProfile p;
        p.image = {"/usr/bin/cc1", "ee"};
        p.event = "cpu-clock";
        p.period = 1'000'000;
        for (std::uint32_t k = 0; k < 20; ++k) {
            ProcessCounts pc{i * 100 + k, {}};
            for (std::uint64_t o = 0; o < 10; ++o) pc.counts.push_back({0x1000 + k * 4096 + o * 16, 1 + o});
            p.processes.push_back(std::move(pc));
        }
        b.profiles.push_back(p);
        REQUIRE(db.append("00001", b).ok());
    }
    const std::uint64_t written = db.bytes_written();
    auto c = db.compact("00001", 0);
    REQUIRE(c.ok());
    CHECK_FALSE(c->done);
    CHECK(db.bytes_written() == written);
}

}  // namespace
}  // namespace ecpi::store
