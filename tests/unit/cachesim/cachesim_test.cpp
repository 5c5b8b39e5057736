// The cache simulator against hand-computed hit/miss sequences (LRU,
// associativity, write-allocate, inclusion, straddling references), the
// known/unknown classification of sampled windows (MemSpy 4.2), the
// estimators and the error bounds on synthetic traces with known answers.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "ecpi/analyze/cachesim/cachesim.h"

extern "C" {
#include "ecpi_rt_sampling.h"
}

using namespace ecpi::analyze;

namespace {

CacheSimulator make(std::vector<std::string> specs, std::uint32_t set_sample = 1) {
    SimulatorOptions o;
    for (const auto& s : specs) {
        auto g = parse_cache_geometry(s);
        REQUIRE(g.ok());
        o.levels.push_back(*g);
    }
    o.set_sample = set_sample;
    auto sim = CacheSimulator::create(o);
    REQUIRE(sim.ok());
    return std::move(sim).value();
}

void ref(CacheSimulator& sim, std::uint64_t address, bool write = false, std::uint32_t size = 8, std::uint64_t pc = 0x1000) {
    sim.access(0, MemRef{address, pc, size, write});
}

const LevelCounts& level(const CacheSimulator& sim, std::size_t l) { return sim.totals().counts.levels.at(l); }

// The object a one-byte read at `address` is attributed to: the key whose
// L1 references grew (the simulator's levels must make the read miss).
CacheSimulator::ObjectKey object_read(CacheSimulator& sim, std::uint64_t address) {
    auto before = sim.by_object();
    ref(sim, address, false, 1);
    for (const auto& [key, counts] : sim.by_object()) {
        auto it = before.find(key);
        if (it == before.end() || it->second.levels[0].references != counts.levels[0].references) return key;
    }
    return CacheSimulator::ObjectKey{};
}

}  // namespace

TEST_CASE("geometry: NAME=SIZE:WAYS:LINE with k/m suffixes; bad ones are refused with the reason") {
    auto g = parse_cache_geometry("L1d=32k:8:64");
    REQUIRE(g.ok());
    CHECK(g->name == "L1d");
    CHECK(g->size == 32768);
    CHECK(g->ways == 8);
    CHECK(g->line == 64);
    CHECK(g->sets() == 64);
    CHECK(parse_cache_geometry("L2=1m:16:64")->size == 1048576);
    CHECK(!parse_cache_geometry("L1d=32k:8").ok());
    CHECK(!parse_cache_geometry("=32k:8:64").ok());
    CHECK(parse_cache_geometry("L1=48k:12:60").error().message().find("power of two") != std::string::npos);
    CHECK(parse_cache_geometry("L1=48k:5:64").error().message().find("sets") != std::string::npos);
    CHECK(parse_cache_geometry("L1d=48k:12:64").ok());  // 64 sets of 12 ways
}

TEST_CASE("host geometry: sysfs first, a named fallback otherwise") {
    auto h = host_cache_geometry("/nonexistent/cache");
    CHECK(!h.levels.empty());
    CHECK(h.source.find("/nonexistent/cache") != std::string::npos);
}

TEST_CASE("direct-mapped: conflicting blocks evict each other") {
    auto sim = make({"L1=256:1:64"});  // 4 sets
    ref(sim, 0);    // miss
    ref(sim, 64);   // miss (set 1)
    ref(sim, 256);  // miss, evicts block 0 from set 0
    ref(sim, 0);    // miss, evicts block 4
    ref(sim, 64);   // hit
    ref(sim, 8);    // hit (same line as 0)
    CHECK(level(sim, 0).references == 6);
    CHECK(level(sim, 0).known_misses == 4);
    CHECK(level(sim, 0).unknown == 0);
}

TEST_CASE("two-way LRU: the least recently used block is the victim") {
    auto sim = make({"L1=128:2:64"});  // one set, two ways
    const std::uint64_t A = 0, B = 64, C = 128;
    ref(sim, A);  // miss
    ref(sim, B);  // miss
    ref(sim, A);  // hit; B is now LRU
    ref(sim, C);  // miss, evicts B
    ref(sim, A);  // hit
    ref(sim, B);  // miss, evicts C (LRU after A's use)
    ref(sim, C);  // miss, evicts A
    ref(sim, B);  // hit
    CHECK(level(sim, 0).references == 8);
    CHECK(level(sim, 0).known_misses == 5);
}

TEST_CASE("write-allocate: a store miss brings the line in") {
    auto sim = make({"L1=1k:2:64"});
    ref(sim, 4096, true);  // store miss, allocates
    ref(sim, 4100);        // load hit
    ref(sim, 4160, true);  // another line: miss
    CHECK(level(sim, 0).known_misses == 2);
    CHECK(level(sim, 0).references == 3);
}

TEST_CASE("straddling reference: one reference, two lines, one miss") {
    auto sim = make({"L1=1k:2:64"});
    ref(sim, 60, false, 8);  // bytes 60..67: lines 0 and 1
    CHECK(level(sim, 0).references == 1);
    CHECK(level(sim, 0).known_misses == 1);
    ref(sim, 64);  // line 1 was brought in too
    ref(sim, 0);   // and line 0
    CHECK(level(sim, 0).known_misses == 1);
}

TEST_CASE("two levels: the second sees the first's misses; inclusion back-invalidates") {
    // L1: one set of 4 ways. L2: two sets of 2 ways, so blocks 0, 2, 4
    // (addresses 0, 128, 256) share L2 set 0 and the third evicts the first.
    auto sim = make({"L1=256:4:64", "L2=256:2:64"});
    ref(sim, 0);
    ref(sim, 128);
    ref(sim, 256);  // L2 evicts block 0, and with it L1's copy
    CHECK(level(sim, 1).references == 3);
    CHECK(level(sim, 1).known_misses == 3);
    ref(sim, 0);    // L1 has room for 4 blocks, but inclusion removed block 0
    CHECK(level(sim, 0).known_misses == 4);
    CHECK(level(sim, 1).known_misses == 4);
    ref(sim, 256);  // L1 hit: L2 is not referenced
    CHECK(level(sim, 1).references == 4);
}

TEST_CASE("windows: first references after a gap are unknown unless the set is full of in-window blocks") {
    auto sim = make({"L1=128:2:64"});  // one set, two ways
    const std::uint64_t A = 0, B = 64, C = 128, D = 192;
    sim.begin_window(0, 0);
    ref(sim, A);
    ref(sim, B);
    sim.begin_window(0, 10);  // ten references were skipped
    ref(sim, A);  // stale hit: unknown
    ref(sim, C);  // miss with a stale block in the set: unknown (stale says miss)
    ref(sim, A);  // referenced in this window: known hit
    ref(sim, D);  // the set holds only this window's blocks (A, C): known miss
    sim.end_stream(0, 5);
    REQUIRE(sim.windows().size() == 2);
    const auto& w0 = sim.windows()[0].levels[0];
    CHECK(w0.references == 2);
    CHECK(w0.known_misses == 2);  // nothing skipped before: the cold cache is the true one
    CHECK(w0.unknown == 0);
    const auto& w1 = sim.windows()[1].levels[0];
    CHECK(w1.references == 4);
    CHECK(w1.known_misses == 1);
    CHECK(w1.unknown == 2);
    CHECK(w1.unknown_stale_misses == 1);
    CHECK(sim.totals().events == 6 + 10 + 5);
    CHECK(sim.totals().simulated == 6);
}

TEST_CASE("estimators: MemSpy Eq. 1 with each choice of alpha") {
    LevelCounts c;
    c.references = 100;
    c.known_misses = 10;
    c.unknown = 20;
    c.unknown_stale_misses = 8;
    CHECK(estimated_misses(c, UnknownEstimate::kStale, 0) == 18);
    CHECK(estimated_misses(c, UnknownEstimate::kHalf, 0) == 20);
    CHECK(estimated_misses(c, UnknownEstimate::kMiss, 0) == 30);
    CHECK(estimated_misses(c, UnknownEstimate::kHit, 0) == 10);
    CHECK(estimated_misses(c, UnknownEstimate::kWood, 0.25) == 15);
    CHECK(parse_unknown_estimate("wood").ok());
    CHECK(!parse_unknown_estimate("guess").ok());
}

TEST_CASE("Wood et al.: dead time over generation time of in-window generations") {
    auto sim = make({"L1=64:1:64"});  // one block
    sim.begin_window(0, 0);
    ref(sim, 0);    // t=1: generation of block 0 begins
    ref(sim, 8);    // t=2: last reference
    ref(sim, 64);   // t=3: evicts block 0: generation 2, dead 1
    REQUIRE(sim.wood_alpha(0).has_value());
    CHECK(*sim.wood_alpha(0) == doctest::Approx(0.5));
}

TEST_CASE("set sampling: only the chosen sets are simulated, and scaled") {
    auto sim = make({"L1=1k:2:64"}, 2);  // 8 sets, 4 sampled
    CHECK(sim.totals().set_scale == 2);
    for (std::uint64_t line = 0; line < 8; line++) ref(sim, line * 64);
    CHECK(sim.totals().simulated == 8);
    CHECK(level(sim, 0).references == 4);
    CHECK(level(sim, 0).known_misses == 4);
}

TEST_CASE("set sampling: the bound covers the choice of sets (it held nothing before, so 1/K of the sets looked exact)") {
    // 64 sets, direct-mapped; every third set thrashes between two blocks
    // (always misses), the others hit one block. Which sets a seed picks
    // decides the sampled rate; the full rate is 22/64 of the references.
    auto run = [](std::uint32_t set_sample, std::uint64_t seed) {
        SimulatorOptions o;
        o.levels = {*parse_cache_geometry("L1=4k:1:64")};
        o.set_sample = set_sample;
        o.seed = seed;
        auto sim = std::move(CacheSimulator::create(o)).value();
        for (int round = 0; round < 200; round++)
            for (std::uint64_t set = 0; set < 64; set++) {
                std::uint64_t block = set % 3 == 0 && round % 2 ? set + 64 : set;
                sim.access(0, MemRef{block * 64, 0x1000, 8, false});
            }
        return estimate_miss_rate(sim, 0, UnknownEstimate::kStale);
    };
    auto full = run(1, 1);
    CHECK(full.bound == 0);
    CHECK(full.rate == doctest::Approx(22.0 / 64).epsilon(0.01));
    int contained = 0, inexact = 0;
    for (std::uint64_t seed = 1; seed <= 20; seed++) {
        auto e = run(4, seed);
        CHECK(e.bound > 0);
        inexact += std::abs(e.rate - full.rate) > 0.01;
        contained += std::abs(e.rate - full.rate) <= e.bound;
    }
    CHECK(inexact >= 10);  // the choice of sets matters in this trace
    CHECK(contained >= 17);
}

TEST_CASE("attribution: misses by pc and by heap allocation site") {
    auto sim = make({"L1=1k:2:64"});
    sim.allocate(HeapAllocation{0x10000, 256, 0x4444, 0});
    ref(sim, 0x10000, false, 8, 0xa);
    ref(sim, 0x10040, false, 8, 0xa);
    ref(sim, 0x10000, false, 8, 0xb);  // hit
    ref(sim, 0x90000, false, 8, 0xb);  // not heap
    CHECK(sim.by_pc().at(0xa).levels[0].known_misses == 2);
    CHECK(sim.by_pc().at(0xb).levels[0].references == 2);
    CHECK(sim.by_pc().at(0xb).levels[0].known_misses == 1);
    CacheSimulator::ObjectKey heap{ObjectKind::kHeap, 0x4444};
    CHECK(sim.by_object().at(heap).levels[0].known_misses == 2);
    CacheSimulator::ObjectKey other{ObjectKind::kStatic, 0x90000};
    CHECK(sim.by_object().at(other).levels[0].known_misses == 1);
    sim.release(0x10000);
    ref(sim, 0x10080);
    CHECK(sim.by_object().count(CacheSimulator::ObjectKey{ObjectKind::kStatic, 0x10080}) == 1);
}

TEST_CASE("attribution: a global's misses are counted under the variable holding them, its neighbour's under its own") {
    // Two globals in one line, as a linker lays out .bss: a 4-byte one at
    // 0x20038 and an array from 0x20040 over 64 lines. By line, the array's
    // first line was named by its first byte's variable and each line was an
    // object of its own; by variable, one key each, whatever the line.
    auto sim = make({"L1=1k:2:64"});
    std::vector<std::uint64_t> asked;
    sim.key_statics_by([&asked](std::uint64_t a) -> std::optional<std::pair<std::uint64_t, std::uint64_t>> {
        asked.push_back(a);
        if (a >= 0x20038 && a < 0x2003c) return std::pair<std::uint64_t, std::uint64_t>{0x20038, 0x2003c};
        if (a >= 0x20040 && a < 0x21040) return std::pair<std::uint64_t, std::uint64_t>{0x20040, 0x21040};
        return std::nullopt;
    });
    for (std::uint64_t a = 0x20040; a < 0x21040; a += 64) ref(sim, a);  // 64 misses, each a line of its own
    ref(sim, 0x20038, false, 4);                                         // the neighbour: a miss (evicted)
    ref(sim, 0x30000);                                                   // no variable: its line
    const CacheSimulator::ObjectKey array{ObjectKind::kStatic, 0x20040}, neighbour{ObjectKind::kStatic, 0x20038};
    REQUIRE(sim.by_object().count(array) == 1);
    CHECK(sim.by_object().at(array).levels[0].known_misses == 64);
    REQUIRE(sim.by_object().count(neighbour) == 1);
    CHECK(sim.by_object().at(neighbour).levels[0].known_misses == 1);
    CHECK(sim.by_object().count(CacheSimulator::ObjectKey{ObjectKind::kStatic, 0x30000}) == 1);
    CHECK(sim.by_object().size() == 3);
    // The answer holds for the whole array: it was asked once for its 64 lines.
    CHECK(std::count_if(asked.begin(), asked.end(), [](std::uint64_t a) { return a >= 0x20040 && a < 0x21040; }) == 1);
}

TEST_CASE("attribution: levels left out of bin_levels count no pc or object, and every total stays") {
    auto run = [](std::vector<bool> bins) {
        SimulatorOptions o;
        for (const char* spec : {"L1=1k:2:64", "L2=4k:4:64"}) o.levels.push_back(*parse_cache_geometry(spec));
        o.bin_levels = std::move(bins);
        auto sim = std::move(CacheSimulator::create(o)).value();
        std::mt19937_64 rng(7);
        for (int i = 0; i < 20000; i++) ref(sim, 0x40000 + (rng() % 8192) * 8, false, 8, 0x100 + (rng() % 3));
        return sim;
    };
    auto all = run({});
    auto second = run({false, true});
    for (std::size_t l = 0; l < 2; l++) {
        CHECK(level(second, l).references == level(all, l).references);
        CHECK(level(second, l).known_misses == level(all, l).known_misses);
    }
    REQUIRE(second.by_pc().size() == all.by_pc().size());  // every pc is still listed
    for (const auto& [pc, counts] : all.by_pc()) {
        CHECK(second.by_pc().at(pc).levels[0].references == 0);
        CHECK(second.by_pc().at(pc).levels[1].references == counts.levels[1].references);
        CHECK(second.by_pc().at(pc).levels[1].known_misses == counts.levels[1].known_misses);
    }
    for (const auto& [key, counts] : second.by_object()) {
        CHECK(counts.levels[0].references == 0);
        CHECK(counts.levels[1].known_misses == all.by_object().at(key).levels[1].known_misses);
    }
}

TEST_CASE("attribution: hits of pcs that share a memo slot are all counted; a freed large block's range is forgotten") {
    auto sim = make({"L1=1k:2:64"});
    // 0x400 and 0x1 fall in one slot of the simulator's pc memo: each
    // evicts the other, which must hand its held hits to its counts.
    ref(sim, 0x2000, false, 8, 0x400);  // miss
    for (int i = 0; i < 50; i++) {
        ref(sim, 0x2008, false, 8, 0x400);
        ref(sim, 0x2010, false, 8, 0x1);
    }
    CHECK(sim.by_pc().at(0x400).levels[0].references == 51);
    CHECK(sim.by_pc().at(0x1).levels[0].references == 50);
    ref(sim, 0x2018, false, 8, 0x1);  // counted after the counts were read once
    CHECK(sim.by_pc().at(0x1).levels[0].references == 51);
    CHECK(level(sim, 0).references == 102);

    // A large block's misses name it line after line; once freed, the same
    // addresses are no longer heap.
    sim.allocate(HeapAllocation{0x100000, 65536, 0x5555, 0});
    for (std::uint64_t a = 0x100000; a < 0x100000 + 4096; a += 64) ref(sim, a);
    CacheSimulator::ObjectKey block{ObjectKind::kHeap, 0x5555};
    CHECK(sim.by_object().at(block).levels[0].known_misses == 64);
    sim.release(0x100000);
    ref(sim, 0x108000);
    CHECK(sim.by_object().at(block).levels[0].known_misses == 64);
    CHECK(sim.by_object().count(CacheSimulator::ObjectKey{ObjectKind::kStatic, 0x108000}) == 1);
}

TEST_CASE("full simulation has no error bound; sampled bounds contain the true rate in most seeds") {
    // A trace with a known answer: with probability p a reference touches a
    // line never seen before (a certain miss), else one of 16 hot lines.
    const double p = 0.05;
    auto trace = [&](std::uint64_t seed, std::vector<std::uint64_t>& out) {
        std::mt19937_64 rng(seed);
        std::uniform_real_distribution<double> u(0, 1);
        std::uint64_t fresh = 1 << 20;
        for (int i = 0; i < 2'000'000; i++) out.push_back(u(rng) < p ? (fresh++) * 64 : (rng() % 16) * 64);
    };
    std::vector<std::uint64_t> addresses;
    trace(99, addresses);
    double true_rate = 0;
    {
        auto full = make({"L1=32k:8:64"});
        for (auto a : addresses) ref(full, a);
        auto e = estimate_miss_rate(full, 0, UnknownEstimate::kStale);
        CHECK(e.bound == 0);
        true_rate = e.rate;
        CHECK(true_rate == doctest::Approx(p).epsilon(0.05));
    }
    int contained = 0;
    for (std::uint64_t seed = 1; seed <= 10; seed++) {
        auto sim = make({"L1=32k:8:64"});
        ecpi_rt_sampler s;
        ecpi_rt_sampler_init(&s, 5000, 45000, seed);
        std::uint64_t skipped = 0;
        for (auto a : addresses) {
            if (--s.countdown != 0) {
                skipped++;
                continue;
            }
            if (ecpi_rt_sampler_step(&s)) {
                sim.begin_window(0, skipped);
                skipped = 0;
            }
            ref(sim, a);
        }
        sim.end_stream(0, skipped);
        CHECK(sim.totals().events == addresses.size());
        auto e = estimate_miss_rate(sim, 0, UnknownEstimate::kStale);
        CHECK(std::abs(e.rate - true_rate) < 0.01);
        if (std::abs(e.rate - true_rate) <= e.bound) contained++;
    }
    CHECK(contained >= 9);
}

TEST_CASE("attribution: heap objects stay right through many allocations, frees and reuse") {
    auto sim = make({"L1=64:1:64"});  // one line: a probe misses iff its line differs from the last
    std::mt19937_64 rng(5);
    std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> live;  // start -> (end, site)
    std::uint64_t next = 0x100000;
    for (int i = 0; i < 20000; i++) {
        if (!live.empty() && rng() % 3 == 0) {
            auto it = live.begin();
            std::advance(it, long(rng() % live.size()));
            sim.release(it->first);
            live.erase(it);
            continue;
        }
        std::uint64_t size = rng() % 5 == 0 ? 8192 + rng() % 8192 : 8 + rng() % 200;
        std::uint64_t site = 0x500 + rng() % 7;
        sim.allocate(HeapAllocation{next, size, site, 0});
        live[next] = {next + size, site};
        next += (size + 15) & ~std::uint64_t(15);
    }
    // One probe per live allocation at a random offset: every miss lands on
    // the allocation's own site.
    std::map<std::uint64_t, std::uint64_t> expected;
    std::uint64_t last_line = UINT64_MAX, misses = 0;
    for (const auto& [start, v] : live) {
        std::uint64_t at = start + rng() % (v.first - start);
        ref(sim, at, false, 1);
        if (at / 64 != last_line) {
            expected[v.second]++;
            misses++;
        }
        last_line = at / 64;
    }
    std::uint64_t attributed = 0;
    for (const auto& [key, counts] : sim.by_object()) {
        if (key.kind != ObjectKind::kHeap) continue;
        attributed += counts.levels[0].references;
        CHECK(counts.levels[0].references == expected[key.id]);
    }
    CHECK(attributed == misses);
    CHECK(misses > live.size() / 2);
}

TEST_CASE("attribution: a freed allocation's granules name nothing, across a page boundary and after reuse") {
    auto sim = make({"L1=64:1:64"});  // one line: each probe below touches a new line, so misses
    auto object_at = [&](std::uint64_t address) { return object_read(sim, address); };
    const std::uint64_t start = 0x20000 - 0x80;  // 0x180 bytes, three granules before the page boundary
    sim.allocate(HeapAllocation{start, 0x180, 0x700, 0});
    CHECK(object_at(start + 0x10) == CacheSimulator::ObjectKey{ObjectKind::kHeap, 0x700});
    CHECK(object_at(start + 0x17f) == CacheSimulator::ObjectKey{ObjectKind::kHeap, 0x700});
    CHECK(object_at(start + 0x180) == CacheSimulator::ObjectKey{ObjectKind::kStatic, start + 0x180});
    sim.release(start);
    CHECK(object_at(start + 0x140) == CacheSimulator::ObjectKey{ObjectKind::kStatic, start + 0x140});
    sim.allocate(HeapAllocation{start, 0x40, 0x800, 0});  // the same start, smaller, another site
    CHECK(object_at(start + 0x3f) == CacheSimulator::ObjectKey{ObjectKind::kHeap, 0x800});
    CHECK(object_at(start + 0x100) == CacheSimulator::ObjectKey{ObjectKind::kStatic, start + 0x100});
    sim.release(start);
    sim.release(start);  // twice: nothing left to clear
    CHECK(object_at(start + 0x4) == CacheSimulator::ObjectKey{ObjectKind::kStatic, start});
}

TEST_CASE("attribution: a page of one site's blocks, then of two sites, then emptied and reused") {
    // A page whose allocations all come from one site is answered from its
    // block's head (the granules held and the site), a page of two sites
    // from its slots; the head must follow every allocation and free.
    auto sim = make({"L1=64:1:64"});  // one line: a probe misses unless the line before it was its own
    auto object_at = [&](std::uint64_t address) {
        ref(sim, 0x7000000, false, 1);  // another line first, so that the probe misses
        return object_read(sim, address);
    };
    auto heap = [](std::uint64_t site) { return CacheSimulator::ObjectKey{ObjectKind::kHeap, site}; };
    auto none = [](std::uint64_t address) { return CacheSimulator::ObjectKey{ObjectKind::kStatic, address & ~std::uint64_t(63)}; };
    const std::uint64_t page = 0x40000;
    auto block = [&](std::uint64_t i) { return page + 48 * i; };  // 24-byte blocks 48 bytes apart: granules 0-1 held, 2 not
    for (std::uint64_t i = 0; i < 80; i++) sim.allocate(HeapAllocation{block(i), 24, 0xa00, 0});  // 3,840 bytes of one site
    CHECK(object_at(block(5) + 8) == heap(0xa00));
    CHECK(object_at(block(79) + 23) == heap(0xa00));
    CHECK(object_at(block(7) + 32) == none(block(7) + 32));  // the granule between two blocks
    CHECK(object_at(page + 4000) == none(page + 4000));      // past the last block, same page
    sim.release(block(10));
    CHECK(object_at(block(10)) == none(block(10)));
    sim.allocate(HeapAllocation{block(10), 16, 0xb00, 0});  // a second site on the page
    CHECK(object_at(block(10) + 4) == heap(0xb00));
    CHECK(object_at(block(11) + 4) == heap(0xa00));
    CHECK(object_at(block(10) + 20) == none(block(10) + 20));  // past the smaller block
    for (std::uint64_t i = 0; i < 80; i++) sim.release(block(i));
    CHECK(object_at(block(10) + 8) == none(block(10) + 8));
    CHECK(object_at(block(50)) == none(block(50)));
    sim.allocate(HeapAllocation{block(20), 16, 0xb00, 0});  // the emptied page, one site again
    CHECK(object_at(block(20) + 15) == heap(0xb00));
    CHECK(object_at(block(21)) == none(block(21)));
    CHECK(object_at(block(11) + 4) == none(block(11) + 4));
}

TEST_CASE("attribution: freeing an allocation leaves its neighbour of the same site, which starts in the next granule") {
    auto sim = make({"L1=64:1:64"});  // one line: each probe below touches a new line, so misses
    auto objects_of_site = [&](std::uint64_t site) {
        for (const auto& [key, counts] : sim.by_object())
            if (key.kind == ObjectKind::kHeap && key.id == site) return counts.levels[0].references;
        return std::uint64_t(0);
    };
    const std::uint64_t a = 0x30000, b = a + 0x20;  // two 24-byte blocks as malloc lays them out: granules 0-1 and 2-3
    sim.allocate(HeapAllocation{a, 24, 0x900, 0});
    sim.allocate(HeapAllocation{b, 24, 0x900, 0});
    sim.release(a);
    ref(sim, b + 0x10, false, 1);  // b's second granule
    CHECK(objects_of_site(0x900) == 1);
    ref(sim, a + 0x40, false, 1);  // past b: nothing
    ref(sim, a + 0x10 + 0x80, false, 1);  // a line away, still nothing
    ref(sim, a, false, 1);  // a's first granule, freed
    CHECK(objects_of_site(0x900) == 1);
}
