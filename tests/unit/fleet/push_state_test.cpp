#include <fcntl.h>
#include <sys/stat.h>
#include <fstream>
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "ecpi/store/profile.h"
#include "ecpi/store/push_state.h"

using namespace ecpi::store;
namespace fs = std::filesystem;

namespace {

struct TempDb {
    fs::path dir;
    TempDb() {
        dir = fs::temp_directory_path() / ("ecpi-push-" + std::to_string(::getpid()) + "-" + std::to_string(rand()));
        REQUIRE(Database::open(dir, Database::Mode::kCreate).ok());
    }
    ~TempDb() { fs::remove_all(dir); }
};

PushSnapshot sample_snapshot() {
    PushSnapshot s;
    s.epoch = "00001";
    s.stamp_ns = 123456789012345;
    s.cuts = 2;
    s.profiles.push_back({{"/bin/x", "ab12"}, "cpu-clock", 1000, {{kAllProcesses, {{0x10, 3}, {0x20, 5}}}}});
    s.stacks.push_back({"cpu-clock", 1000, {{"/bin/x", "ab12"}}, {{kAllProcesses, {{0, 0x10}}, 3}}});
    s.events["cpu-clock"] = {1000, 8, 0, 2};
    return s;
}

}  // namespace

TEST_CASE("push snapshots and batches round-trip; damage is refused") {
    PushSnapshot s = sample_snapshot();
    auto bytes = encode_push_snapshot(s);
    auto back = decode_push_snapshot(bytes);
    REQUIRE(back.ok());
    CHECK(back->epoch == s.epoch);
    CHECK(back->stamp_ns == s.stamp_ns);
    CHECK(back->cuts == 2);
    CHECK(back->profiles == s.profiles);
    CHECK(back->stacks == s.stacks);
    CHECK(back->events == s.events);

    PushBatch b{"00001", 3, 0x1234, "web1", 1700000000, 8, {{"samples", {1, 2, 3}}, {"events", {}}}};
    auto bb = encode_push_batch(b);
    auto bback = decode_push_batch(bb);
    REQUIRE(bback.ok());
    CHECK(bback->token == 0x1234);
    CHECK(bback->host == "web1");
    CHECK(bback->sections == b.sections);

    for (std::size_t cut : {std::size_t{0}, std::size_t{5}, bb.size() - 1}) {
        std::vector<std::uint8_t> damaged(bb.begin(), bb.begin() + static_cast<long>(cut));
        CHECK_FALSE(decode_push_batch(damaged).ok());
    }
    bb[10] ^= 0x40;
    CHECK(decode_push_batch(bb).error().message().find("checksum") != std::string::npos);
    bytes[4] = 2;
    CHECK(decode_push_snapshot(bytes).error().message().find("newer") != std::string::npos);
}

TEST_CASE("the push queue: one pusher per target, orphans removed, order kept") {
    TempDb db;
    {
        auto q = PushQueue::open(db.dir, "h_8123_ecpi");
        REQUIRE(q.ok());
        auto second = PushQueue::open(db.dir, "h_8123_ecpi");
        REQUIRE_FALSE(second.ok());
        CHECK(second.error().message().find("another ecpi process") != std::string::npos);
        CHECK_FALSE(PushQueue::open(db.dir, "../x").ok());

        PushSnapshot s = sample_snapshot();
        s.cuts = 1;
        PushBatch b1{"00001", 1, 7, "h", 1, 8, {{"samples", {9}}}};
        REQUIRE(q->enqueue(b1, s).ok());
        s.cuts = 2;
        PushBatch b2{"00001", 2, 8, "h", 2, 1, {{"samples", {9}}}};
        REQUIRE(q->enqueue(b2, s).ok());
        auto pending = q->pending();
        REQUIRE(pending.ok());
        REQUIRE(pending->size() == 2);
        CHECK(q->read_batch(pending->front())->token == 7);
        CHECK(q->pending_bytes() > 0);
        REQUIRE(q->remove_batch(pending->front()).ok());
        CHECK(q->pending()->size() == 1);
        REQUIRE(q->save_counters({3, 30, 1}).ok());
        CHECK(q->counters().value() == PushCounters{3, 30, 1});
        CHECK(q->epoch_stamp("00001").ok());
        CHECK_FALSE(q->epoch_stamp("00002").ok());
        {
            // A daemon's merge appends to a journal segment: the file's time
            // changes, the directory's does not; the stamp must change.
            const auto segment = db.dir / "epochs" / "00001" / "journal.1.ecj";
            { std::ofstream(segment) << "first record"; }
            const auto before = q->epoch_stamp("00001");
            REQUIRE(before.ok());
            struct timespec later[2] = {{0, UTIME_OMIT}, {0, 0}};
            later[1].tv_sec = static_cast<time_t>(*before / 1000000000) + 5;  // an append, seconds later
            { std::ofstream(segment, std::ios::app) << "second record"; }
            REQUIRE(::utimensat(AT_FDCWD, segment.c_str(), later, 0) == 0);
            CHECK(q->epoch_stamp("00001").value() > *before);
            std::filesystem::remove(segment);
        }
        // A crash after the batch was written but before its snapshot: the
        // batch is newer than the snapshot's cuts.
        PushSnapshot stale = sample_snapshot();
        stale.cuts = 2;
        PushBatch orphan{"00001", 3, 9, "h", 3, 1, {{"samples", {9}}}};
        stale.cuts = 3;
        REQUIRE(q->enqueue(orphan, stale).ok());
        stale.cuts = 2;
        REQUIRE(q->save_snapshot(stale).ok());
    }
    auto reopened = PushQueue::open(db.dir, "h_8123_ecpi");
    REQUIRE(reopened.ok());
    auto pending = reopened->pending();
    REQUIRE(pending.ok());
    REQUIRE(pending->size() == 1);  // the orphan (cut 3) is gone, cut 2 stays
    CHECK(reopened->read_batch(pending->front())->cut == 2);
    CHECK(reopened->snapshot("00001").value()->cuts == 2);
    CHECK_FALSE(reopened->snapshot("00002").value().has_value());
}
