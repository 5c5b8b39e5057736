// The runtime's quick slow path (runtime/rt_internal.h,
// ecpi_rt_memref_quick, driven through memref_quick_probe.c): what the
// callbacks record without the general slow path, on a thread state built
// by hand (no program, no ecpi).
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/analyze/cachesim/memtrace_trace.h"
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

namespace {

memref_set_step set_step(std::uint64_t addr, unsigned size_log2, bool in_window, std::uint64_t pc = 0x401000) {
    return {memref_quick_word(addr, size_log2, 0), pc, in_window ? 1u : 0u, -1};
}

std::vector<ecpi_rt_record> run_steps(std::vector<memref_set_step>& steps, std::uint64_t bitmap, std::uint32_t hit_mask) {
    std::vector<ecpi_rt_record> out(steps.size() + 1);
    out.resize(memref_set_run(steps.data(), std::uint32_t(steps.size()), bitmap, hit_mask, out.data(), std::uint32_t(out.size())));
    return out;
}

}  // namespace

TEST_CASE("runtime: outside windows a sampled set's reference to its entry's last line is counted as SET_HITS, not recorded") {
    // Lines 0x40 and 0x80 apart: line 1 and line 2 (entries 1 and 2 of mask 63).
    std::vector<memref_set_step> steps = {
        set_step(0x1040, 3, false),  // line 0x41: recorded (the entry knew nothing)
        set_step(0x1048, 3, false),  // the same line: settled
        set_step(0x1050, 2, false),  // again: settled
        set_step(0x2041, 3, false),  // line 0x81, the same entry (0x81 & 63 == 0x41 & 63): recorded
        set_step(0x1040, 3, false),  // line 0x41 again, no longer its entry's last: recorded
        set_step(0x1078, 4, false),  // over two lines (0x41 and 0x42): recorded, never settled
        set_step(0x1080, 3, false),  // line 0x42: its entry forgot it (the reference above touched it): recorded
        set_step(0x1080, 3, true),   // in a window: always recorded
        set_step(0x1080, 3, false),  // outside again, the window's line: settled
    };
    auto recs = run_steps(steps, ~0ull, 63);
    REQUIRE(recs.size() == 7);  // 5 references outside windows and 1 in one, then SET_HITS
    CHECK(steps[1].result == 1);
    CHECK(steps[2].result == 1);
    CHECK(steps[8].result == 1);
    CHECK(unsigned(recs[0].w0 >> ECPI_RT_KIND_SHIFT) == ECPI_RT_REC_MEMREF_SET);
    CHECK((recs[1].w0 & ECPI_RT_MEMREF_ADDR_MASK) == 0x2041);
    CHECK((recs[2].w0 & ECPI_RT_MEMREF_ADDR_MASK) == 0x1040);
    CHECK((recs[3].w0 & ECPI_RT_MEMREF_ADDR_MASK) == 0x1078);
    CHECK((recs[4].w0 & ECPI_RT_MEMREF_ADDR_MASK) == 0x1080);
    CHECK(unsigned(recs[5].w0 >> ECPI_RT_KIND_SHIFT) == ECPI_RT_REC_MEMREF);
    CHECK(unsigned(recs[6].w0 >> ECPI_RT_KIND_SHIFT) == ECPI_RT_REC_SET_HITS);
    CHECK(recs[6].w1 == 3);
    // Off (mask 0): every reference recorded, no SET_HITS.
    for (auto& s : steps) s.result = -1;
    auto all = run_steps(steps, ~0ull, 0);
    CHECK(all.size() == steps.size());
}

// The runtime's settled hits leave the set-sampled levels exactly as
// recording every reference does: the same references, misses, groups,
// procedures and objects below the first level, and the first level's
// reference count once the SET_HITS are added.
TEST_CASE("cachesim: settled first-level hits change no set-sampled figure") {
    using namespace ecpi::analyze;
    SimulatorOptions o;
    o.levels = {{"L1d", 2048, 2, 64}, {"L2", 16384, 4, 64}};  // 16 and 64 sets: 16 groups
    o.set_sample = 4;
    o.seed = 3;
    auto made = CacheSimulator::create(o);
    REQUIRE(made.ok());
    auto filter = made->set_filter();
    REQUIRE(filter.has_value());
    REQUIRE(filter->shift == 6);
    // References over 48 KiB (L2 misses), a hot 1 KiB (L1 hits), lines
    // straddled; windows of 50 every 400.
    std::mt19937_64 rng(11);
    std::vector<memref_set_step> steps;
    for (int i = 0; i < 40000; i++) {
        bool in_window = i % 400 < 50;
        std::uint64_t addr = rng() % 4 == 0 ? 0x100000 + rng() % 49152 : 0x200000 + rng() % 1024;
        unsigned size_log2 = unsigned(rng() % 4);
        if (!in_window && !filter->contains(addr)) continue;  // the fast path returns: no slow path
        steps.push_back(set_step(addr, size_log2, in_window, 0x401000 + (rng() % 8) * 4));
    }
    auto settle = run_steps(steps, filter->bitmap, 15);
    auto record_all = run_steps(steps, filter->bitmap, 0);
    CHECK(settle.size() < record_all.size() * 9 / 10);
    auto decode = [&](const std::vector<ecpi_rt_record>& recs) {
        SimulatorOptions t = o;
        t.set_sample = 1;
        t.levels.resize(1);
        auto sim = std::make_unique<CacheSimulator>(std::move(CacheSimulator::create(t)).value());
        auto sets = std::make_unique<CacheSimulator>(std::move(CacheSimulator::create(o)).value());
        RecordDecoder decoder(*sim, sets.get());
        std::vector<ecpi_rt_record> all = {{std::uint64_t(ECPI_RT_REC_THREAD) << ECPI_RT_KIND_SHIFT | 7, 0x7000000},
                                           {std::uint64_t(ECPI_RT_REC_THREAD_STACK_END) << ECPI_RT_KIND_SHIFT, 0x7100000}};
        all.insert(all.end(), recs.begin(), recs.end());
        all.push_back({std::uint64_t(ECPI_RT_REC_END) << ECPI_RT_KIND_SHIFT, 0});
        REQUIRE(decoder.feed(0, all).ok());
        return std::make_pair(std::move(sim), std::move(sets));
    };
    auto [sim_a, sets_a] = decode(settle);
    auto [sim_b, sets_b] = decode(record_all);
    const auto& a = sets_a->totals();
    const auto& b = sets_b->totals();
    CHECK(a.settled_hits > 0);
    CHECK(b.settled_hits == 0);
    CHECK(a.events == b.events);
    CHECK(a.counts.levels[0].references == b.counts.levels[0].references);
    CHECK(a.counts.levels[0].known_misses == b.counts.levels[0].known_misses);
    CHECK(a.counts.levels[1].references == b.counts.levels[1].references);
    CHECK(a.counts.levels[1].known_misses == b.counts.levels[1].known_misses);
    CHECK(b.counts.levels[1].known_misses > 0);
    REQUIRE(sets_a->set_groups().size() == sets_b->set_groups().size());
    for (std::size_t g = 0; g < sets_a->set_groups().size(); g++) {
        const auto& ga = sets_a->set_groups()[g];
        const auto& gb = sets_b->set_groups()[g];
        REQUIRE(ga.levels.size() == gb.levels.size());
        if (ga.levels.size() < 2) continue;
        CHECK(ga.levels[1].references == gb.levels[1].references);
        CHECK(ga.levels[1].known_misses == gb.levels[1].known_misses);
    }
    const auto& pcs_a = sets_a->by_pc();
    const auto& pcs_b = sets_b->by_pc();
    for (const auto& [pc, c] : pcs_b) {
        auto it = pcs_a.find(pc);
        REQUIRE(it != pcs_a.end());
        CHECK(it->second.levels[1].references == c.levels[1].references);
        CHECK(it->second.levels[1].known_misses == c.levels[1].known_misses);
    }
    const auto& objects_a = sets_a->by_object();
    for (const auto& [key, c] : sets_b->by_object()) {
        auto it = objects_a.find(key);
        REQUIRE(it != objects_a.end());
        CHECK(it->second.levels[1].known_misses == c.levels[1].known_misses);
    }
    // The windows' simulator saw the same references.
    CHECK(sim_a->totals().counts.levels[0].references == sim_b->totals().counts.levels[0].references);
    CHECK(sim_a->totals().counts.levels[0].known_misses == sim_b->totals().counts.levels[0].known_misses);
}
