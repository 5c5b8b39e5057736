// merge_into, total and merged for profiles, stacks and epoch metadata.
#include <doctest/doctest.h>

#include <limits>

#include "ecpi/store/profile.h"
#include "test_util.h"

namespace ecpi::store {
namespace {

using testing::libc_profile;
using testing::sample_stacks;

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

TEST_CASE("merge: overlapping and disjoint offsets and pids") {
    ImageProfile into = libc_profile();  // pids 12, 400
    ImageProfile from = libc_profile();
    from.processes = {
        {5, {{0x1, 1}}},                              // new pid before
        {12, {{0x0, 2}, {0x1004, 10}, {0x3000, 1}}},  // overlap + disjoint offsets
        {401, {{0x10, 4}}},                           // new pid after
    };
    REQUIRE(merge_into(into, from).ok());
    const std::vector<ProcessCounts> want = {
        {5, {{0x1, 1}}},
        {12, {{0x0, 2}, {0x1000, 3}, {0x1004, 11}, {0x2000, 7}, {0x3000, 1}}},
        {400, {{0x10, 1}}},
        {401, {{0x10, 4}}},
    };
    CHECK(into.processes == want);
    CHECK(into.image == libc_profile().image);
    CHECK(into.total() == 1 + 2 + 3 + 11 + 7 + 1 + 1 + 4);
}

TEST_CASE("merge into itself doubles every count") {
    ImageProfile p = libc_profile();
    const ImageProfile copy = p;
    REQUIRE(merge_into(p, copy).ok());
    CHECK(p.total() == 2 * copy.total());
    CHECK(p.processes[0].counts[2] == OffsetCount{0x2000, 14});
}

TEST_CASE("merge into a default-constructed profile adopts the other") {
    ImageProfile acc;
    REQUIRE(merge_into(acc, libc_profile()).ok());
    CHECK(acc == libc_profile());
    REQUIRE(merge_into(acc, libc_profile()).ok());
    CHECK(acc.total() == 2 * libc_profile().total());
}

TEST_CASE("merge rejects a different period, image or event with a way forward") {
    ImageProfile into = libc_profile();
    ImageProfile from = libc_profile();
    from.period = 500'000;
    auto r = merge_into(into, from);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "period 500000"));
    CHECK(contains(r.error().message(), "period 1000000"));
    CHECK(contains(r.error().message(), "new epoch"));
    CHECK(into == libc_profile());  // untouched on failure

    from = libc_profile();
    from.image.build_id = "ffff";
    r = merge_into(into, from);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "different images"));

    from = libc_profile();
    from.event = "cycles";
    r = merge_into(into, from);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "different events"));
}

TEST_CASE("merge saturates instead of wrapping") {
    constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
    ImageProfile into = libc_profile();
    into.processes = {{1, {{0, kMax - 1}}}};
    ImageProfile from = into;
    REQUIRE(merge_into(into, from).ok());
    CHECK(into.processes[0].counts[0].count == kMax);
    CHECK(into.total() == kMax);
}

TEST_CASE("merged() sums over processes by offset") {
    const ImageProfile p = libc_profile();
    ImageProfile q = p;
    q.processes.push_back({kAllProcesses, {{0x10, 5}, {0x1004, 1}}});
    const std::vector<OffsetCount> want = {{0x10, 6}, {0x1000, 3}, {0x1004, 2}, {0x2000, 7}};
    CHECK(q.merged() == want);
    CHECK(ImageProfile{}.merged().empty());
    CHECK(ImageProfile{}.total() == 0);
}

TEST_CASE("stack merge: images deduplicated, stacks keyed by (pid, frames)") {
    StackProfile into = sample_stacks();
    StackProfile from;
    from.event = into.event;
    from.period = into.period;
    // Same images in another order, plus a new one.
    from.images = {{"/usr/lib/libc.so.6", "3f2a"}, {"/usr/bin/new", "01"}, {"/usr/bin/burn", "aabbcc"}};
    from.stacks = {
        {7, {{2, 0x1130}, {0, 0x29d90}}, 10},  // = into's second stack
        {7, {{1, 0x5}}, 1},                     // new image
        {9, {}, 2},                             // = into's empty stack
    };
    REQUIRE(merge_into(into, from).ok());
    REQUIRE(into.images.size() == 4);
    CHECK(into.images[3] == ImageId{"/usr/bin/new", "01"});
    auto count_of = [&](std::uint32_t pid, std::vector<StackFrame> frames) -> std::uint64_t {
        for (const StackSample& s : into.stacks) {
            if (s.pid == pid && s.frames == frames) return s.count;
        }
        return 0;
    };
    CHECK(count_of(7, {{1, 0x1130}, {2, 0x29d90}}) == 12);
    CHECK(count_of(7, {{3, 0x5}}) == 1);
    CHECK(count_of(9, {}) == 3);
    CHECK(count_of(7, {{0, 0xffff}, {1, 0x1130}, {2, 0x29d90}}) == 5);
    CHECK(into.stacks.size() == 5);
    // The result is canonical, so it round trips unchanged.
    CHECK(decode_stacks(encode_stacks(into)).value() == into);

    StackProfile other = sample_stacks();
    other.period = 1;
    auto r = merge_into(into, other);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "new epoch"));

    StackProfile acc;
    REQUIRE(merge_into(acc, sample_stacks()).ok());
    CHECK(acc == sample_stacks());
}

TEST_CASE("epoch meta merge") {
    EpochMeta into;
    into.events["cpu-clock"] = {1000, 10, 1, 0};
    into.processes[1] = {"init", "/sbin/init"};
    into.hostname = "a";
    into.kernel_release = "6.1.0";
    into.cpu_mhz = 2000;
    into.cpu_mhz_measured = 2500;
    into.cpu_mhz_sampled = 2300;
    into.first_sample_unix = 100;
    into.last_update_unix = 200;

    EpochMeta from;
    from.events["cpu-clock"] = {0, 5, 2, 3};  // period 0: keep ours
    from.events["cycles"] = {7, 1, 0, 0};
    from.processes[1] = {"", "/sbin/init splash"};  // empty comm: keep ours
    from.processes[2] = {"kthreadd", ""};
    from.first_sample_unix = 50;
    from.last_update_unix = 300;
    merge_into(into, from);

    CHECK(into.events["cpu-clock"] == EventMeta{1000, 15, 3, 3});
    CHECK(into.events["cycles"] == EventMeta{7, 1, 0, 0});
    CHECK(into.processes[1] == ProcessMeta{"init", "/sbin/init splash"});
    CHECK(into.processes[2] == ProcessMeta{"kthreadd", ""});
    CHECK(into.hostname == "a");        // empty in `from`
    CHECK(into.kernel_release == "6.1.0");
    CHECK(into.cpu_mhz == 2000);        // zero in `from`
    CHECK(into.cpu_mhz_measured == 2500);
    CHECK(into.cpu_mhz_sampled == 2300);
    CHECK(into.first_sample_unix == 50);  // the earlier first sample
    CHECK(into.last_update_unix == 300);  // the later update

    EpochMeta later;
    later.hostname = "b";
    later.cpu_mhz = 3000.5;
    later.cpu_mhz_measured = 3600;
    later.cpu_mhz_sampled = 3310.5;
    later.cpu_vendor = "GenuineIntel";
    later.cpu_family = 6;
    later.cpu_model = 143;
    later.events["cpu-clock"].period = 2000;
    later.first_sample_unix = 400;
    merge_into(into, later);
    CHECK(into.hostname == "b");
    CHECK(into.cpu_mhz == 3000.5);
    CHECK(into.cpu_mhz_measured == 3600);
    CHECK(into.cpu_mhz_sampled == 3310.5);
    CHECK(into.cpu_vendor == "GenuineIntel");
    CHECK(into.cpu_family == 6);
    CHECK(into.cpu_model == 143);
    CHECK(into.events["cpu-clock"].period == 2000);
    CHECK(into.first_sample_unix == 50);
}

}  // namespace
}  // namespace ecpi::store
