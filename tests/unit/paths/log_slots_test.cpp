// The inline build's block log (runtime/rt_internal.h): one counter is the
// path countdown and the log's cursor, and the slow path moves the last
// entries whenever it sets the countdown, so a span's blocks and the
// context before them read back in order whatever countdowns came before
// (bursts of 1, spans of 48-176, gaps of any length, and the countdowns
// whose moved entries wrap around the log). Driven through
// log_slots_probe.c on a thread state built by hand (no program, no ecpi).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "log_slots_probe.h"

namespace {

log_slots_result run(const std::vector<std::uint64_t>& countdowns, std::uint32_t run_outs) {
    log_slots_result r{};
    log_slots_run(countdowns.data(), std::uint32_t(countdowns.size()), run_outs, &r);
    return r;
}

}  // namespace

TEST_CASE("runtime log: a burst's countdowns of 1 to 5 keep the entries before them in order") {
    const auto r = run({1, 1, 1, 2, 3, 4, 5, 1, 48, 1, 1}, 200);
    CHECK(r.wrong == 0);
    CHECK(r.last_run_out_slot_1 == 1);
    CHECK(r.checked > 1000);
}

TEST_CASE("runtime log: countdowns about the log's length (the moved entries wrap around it) keep the entries the log must hold") {
    const auto r = run({252, 1, 253, 2, 254, 3, 255, 4, 256, 5, 251, 257, 176}, 130);
    CHECK(r.wrong == 0);
    if (r.wrong) MESSAGE("position ", r.first_wrong_position, " wrong after a countdown of ", r.first_wrong_countdown);
    CHECK(r.checked > 15000);
}

TEST_CASE("runtime log: spans of 48-176 between gaps of any length read back with their context") {
    std::vector<std::uint64_t> countdowns;
    std::uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 64; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        countdowns.push_back(48 + x % 129);        // a span
        countdowns.push_back(1 + (x >> 20) % 3000);  // a gap (or a burst's 1)
    }
    const auto r = run(countdowns, 128);
    CHECK(r.wrong == 0);
    CHECK(r.checked > 128 * 48);
}
