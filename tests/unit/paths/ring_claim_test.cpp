// A span's end claims the ring's next cache lines for writing (prefetchw,
// runtime/rt_internal.h: ecpi_rt_ring_claim_ahead), so that the next span's
// records do not wait for them: one claim a line, from the head on, across
// the ring's end, and never a record the consumer may not have read yet.
// Driven through ring_claim_probe.c on a thread state built by hand, with
// the claims recorded instead of prefetched.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "ring_claim_probe.h"

namespace {

std::vector<std::uint64_t> claim(std::uint64_t head, std::uint64_t cached_tail, std::uint32_t ring, std::uint32_t want) {
    std::vector<std::uint64_t> claimed(1024);
    claimed.resize(ring_claim_run(head, cached_tail, ring, want, claimed.data()));
    return claimed;
}

}  // namespace

TEST_CASE("ring claim: a span's end claims each line of the next 32 records once, from the head on") {
    CHECK(claim(100, 90, 1024, 32) == std::vector<std::uint64_t>{100, 104, 108, 112, 116, 120, 124, 128});
}

TEST_CASE("ring claim: the claim goes on across the ring's end at its start") {
    CHECK(claim(250 + 3 * 256, 240 + 3 * 256, 256, 32) == std::vector<std::uint64_t>{250, 254, 2, 6, 10, 14, 18, 22});
}

TEST_CASE("ring claim: no record the consumer may not have read is claimed; a full ring claims nothing") {
    CHECK(claim(1000, 1000 - 250, 256, 32) == std::vector<std::uint64_t>{1000 % 256, 1004 % 256});
    CHECK(claim(1000, 1000 - 256, 256, 32).empty());
    for (std::uint64_t used = 0; used <= 256; used++) {
        const std::uint64_t head = 5000 + used, tail = 5000;
        for (std::uint64_t index : claim(head, tail, 256, 32)) {
            const std::uint64_t position = head + (index - head % 256 + 256) % 256;  // the record's place after the head
            CHECK(position < tail + 256);
        }
    }
}
