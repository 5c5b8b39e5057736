// A span's block entries on their way from the runtime to the cutter: the
// runtime packs them as differences from the entry before (seven to a
// record within 32 KiB, four within 128 MiB, else two addresses to a
// record; runtime/rt_internal.h, through span_pack_probe.c), and
// PathRecordDecoder must hand the cutter exactly the entries logged: the
// same paths and counts as entries given to the cutter one by one.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "ecpi/analyze/paths/branch_paths.h"
#include "ecpi/store/branch_paths.h"
#include "loop_code.h"
#include "span_pack_probe.h"

using namespace ecpi;
using namespace ecpi::analyze;

namespace {

// A loop whose blocks lie as far apart as a test needs.
using SpreadLoop = test::LoopCode;

ecpi_rt_record record(ecpi_rt_record_kind k, std::uint64_t payload, std::uint64_t w1) {
    return ecpi_rt_record{std::uint64_t(k) << ECPI_RT_KIND_SHIFT | payload, w1};
}

struct Packed {
    store::BranchPathProfile from_records, from_entries;
    std::map<unsigned, std::size_t> kinds;  // record kind -> records of it between SPAN and SPAN_END
    std::size_t entries = 0, records = 0;
};

// 60 spans of the loop's blocks 1 2 4, 1 2 3 4, ... (an address 1 byte
// into each block, as the runtime logs it), 4 of context + 48..176 + 1
// entries each, packed by the runtime's code and decoded, against the same
// entries given to a second cutter directly.
Packed pack_spans(const std::vector<std::uint64_t>& starts) {
    const std::uint32_t pattern[] = {1, 2, 4, 1, 2, 3, 4};
    SpreadLoop packed_code(starts), direct_code(starts);
    PathCutter packed(packed_code, 0), direct(direct_code, 0);
    PathRecordDecoder decoder(packed);
    decoder.set_image(starts.front(), starts.back() + 0x10, 0);
    Packed out;
    std::uint64_t now = 0;
    std::vector<ecpi_rt_record> ring(256);
    for (std::uint32_t s = 0; s < 60; s++) {
        const std::uint32_t entries = 4 + 48 + (s * 37) % 129 + 1;
        std::vector<std::uint64_t> logged;
        for (std::uint32_t i = 0; i < entries; i++) logged.push_back(starts[pattern[(s * 3 + i) % 7]] + 1);
        const std::uint32_t n = span_pack_run(logged.data(), entries, ring.data(), ring.size() - 1);
        REQUIRE(n > 0);
        std::vector<ecpi_rt_record> recs{record(ECPI_RT_REC_SPAN, 4 << 16 | (entries - 5), now)};
        for (std::uint32_t i = 0; i < n; i++) {
            recs.push_back(ring[i]);
            out.kinds[unsigned(ring[i].w0 >> ECPI_RT_KIND_SHIFT)]++;
        }
        recs.push_back(record(ECPI_RT_REC_SPAN_END, 0, now + 100 + 10 * entries));
        REQUIRE(decoder.feed(0, recs).ok());
        direct.begin_span(0, 4, now);
        for (const auto e : logged) direct.span_block(0, e - 1);
        direct.end_span(0, now + 100 + 10 * entries);
        out.entries += entries;
        out.records += n;
        now += 10000;
    }
    packed.finish(out.from_records);
    direct.finish(out.from_entries);
    return out;
}

void check_same_paths(const Packed& p) {
    CHECK(p.from_records.spans == 60);
    CHECK(p.from_entries.spans == 60);
    REQUIRE(p.from_records.paths.size() == 2);
    REQUIRE(p.from_records.paths.size() == p.from_entries.paths.size());
    for (std::size_t i = 0; i < p.from_records.paths.size(); i++) {
        CHECK(p.from_records.paths[i].blocks == p.from_entries.paths[i].blocks);
        CHECK(p.from_records.paths[i].span_occurrences == p.from_entries.paths[i].span_occurrences);
        CHECK(p.from_records.paths[i].span_occurrences > 60);
    }
}

}  // namespace

TEST_CASE("span records: a loop's entries go seven to a record and read back as the same paths") {
    const auto p = pack_spans({0x401000, 0x401010, 0x401020, 0x401030, 0x401040, 0x401050});
    check_same_paths(p);
    INFO(p.records << " records for " << p.entries << " entries");
    // Two entries to a record before: (entries + 1) / 2 per span.
    CHECK(p.records * 3 < p.entries);
    CHECK(p.kinds.count(ECPI_RT_REC_SPAN_DELTA16) == 1);
}

TEST_CASE("span records: entries 32 KiB to 128 MiB apart go four to a record, farther ones two, and read back the same") {
    // The taken side 36 KiB past the test, the latch 1 MiB past that.
    auto medium = pack_spans({0x401000, 0x401010, 0x401020, 0x40a020, 0x50a020, 0x50a030});
    check_same_paths(medium);
    CHECK(medium.kinds[ECPI_RT_REC_SPAN_DELTA28] > medium.kinds[ECPI_RT_REC_SPAN_BLOCK]);
    CHECK(medium.records * 2 < medium.entries);
    // The latch 256 MiB away: no four in a row fit, every record holds two addresses.
    auto far = pack_spans({0x401000, 0x401010, 0x401020, 0x401030, 0x10401030, 0x10401040});
    check_same_paths(far);
    CHECK(far.kinds.count(ECPI_RT_REC_SPAN_DELTA28) == 0);
    CHECK(far.kinds[ECPI_RT_REC_SPAN_BLOCK] == far.records);
}
