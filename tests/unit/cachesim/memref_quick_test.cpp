// The runtime's quick slow path (runtime/rt_internal.h,
// ecpi_rt_memref_quick, driven through memref_quick_probe.c): what the
// callbacks record without the general slow path, on a thread state built
// by hand (no program, no ecpi).
#include <doctest/doctest.h>

#include <cstdint>

#include "ecpi_rt_abi.h"
#include "memref_quick_probe.h"

namespace {

memref_quick_case active_thread(std::uint64_t countdown, std::uint64_t on_left, std::uint64_t w0) {
    memref_quick_case c{};
    c.countdown = countdown;
    c.on_left = on_left;
    c.active = 1;
    c.ring_records = 128;
    c.calls = 1;
    c.w0 = w0;
    c.pc = 0x401234;
    return c;
}

unsigned kind_of(std::uint64_t w0) { return unsigned(w0 >> ECPI_RT_KIND_SHIFT); }

}  // namespace

TEST_CASE("runtime: a sampled set's reference outside a window is recorded as MEMREF_SET without the general slow path") {
    // Outside a window the countdown has not run out.
    auto c = active_thread(7, 0, memref_quick_word(0x7f0012345678, 3, 1));
    memref_quick_run(&c);
    REQUIRE(c.result == 1);
    CHECK(c.head_after == 1);
    CHECK(kind_of(c.record_w0) == ECPI_RT_REC_MEMREF_SET);
    CHECK((c.record_w0 & ECPI_RT_MEMREF_ADDR_MASK) == 0x7f0012345678);
    CHECK((c.record_w0 & ECPI_RT_MEMREF_WRITE) != 0);
    CHECK(((c.record_w0 >> ECPI_RT_MEMREF_SIZE_SHIFT) & 7) == 3);
    CHECK(c.record_w1 == 0x401234);
    CHECK(c.countdown_after == 7);  // the time sampler is untouched
    CHECK(c.on_left_after == 0);
}

TEST_CASE("runtime: a reference inside a window is recorded as MEMREF and keeps the countdown at 1") {
    auto c = active_thread(0, 5, memref_quick_word(0x1000, 2, 0));  // the fast path's decrement ran the countdown out
    memref_quick_run(&c);
    REQUIRE(c.result == 1);
    CHECK(kind_of(c.record_w0) == ECPI_RT_REC_MEMREF);
    CHECK(c.on_left_after == 4);
    CHECK(c.countdown_after == 1);
}

TEST_CASE("runtime: the quick path leaves window edges, a full ring and the runtime's own calls to the general slow path") {
    const std::uint64_t w0 = memref_quick_word(0x2000, 3, 0);
    auto last = active_thread(0, 1, w0);  // a window's last reference
    memref_quick_run(&last);
    CHECK(last.result == 0);
    auto first = active_thread(0, 0, w0);  // a window's first (the sampler's step)
    memref_quick_run(&first);
    CHECK(first.result == 0);
    auto full = active_thread(3, 0, w0);  // a sampled set's reference, but the ring is full (the general path waits)
    full.head = 128;
    memref_quick_run(&full);
    CHECK(full.result == 0);
    CHECK(full.head_after == 128);
    auto own = active_thread(3, 0, w0);  // the runtime's own call into libc
    own.in_runtime = 1;
    memref_quick_run(&own);
    CHECK(own.result == 0);
    auto fresh = active_thread(3, 0, w0);  // no ring claimed yet
    fresh.active = 0;
    memref_quick_run(&fresh);
    CHECK(fresh.result == 0);
    CHECK(fresh.head_after == 0);
}

TEST_CASE("runtime: the quick path publishes every ECPI_RT_PUBLISH_EVERY records") {
    auto c = active_thread(9, 0, memref_quick_word(0x3000, 3, 0));
    c.ring_records = 256;
    c.calls = 63;
    memref_quick_run(&c);
    CHECK(c.head_after == 63);
    CHECK(c.published == 0);
    c.calls = 64;
    memref_quick_run(&c);
    CHECK(c.head_after == 64);
    CHECK(c.published == 64);
}
