// Each group of sets' counts from a saved full trace (bench/cachesim.sh
// groups; docs/CACHESIM.md, "Which sets"). Set sampling (MemSpy 7.3) keeps
// whole groups of sets, the line number's low bits; a group's simulation
// depends on its own lines only, so the estimate any choice of groups gives
// is the sum of its groups' counts, and every choice can be scored from one
// replay of the trace.
//
// Usage: ecpi_bench_set_groups TRACE (of --sample 1/1) NAME=SIZE:WAYS:LINE...
// Prints one line per group and level: group level references misses.
#include <bit>
#include <cstdio>
#include <string>
#include <vector>

#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/analyze/cachesim/memtrace_trace.h"

namespace {

int fail(const std::string& message) {
    std::fprintf(stderr, "ecpi_bench_set_groups: %s\n", message.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ecpi::analyze;
    if (argc < 3) return fail("usage: ecpi_bench_set_groups TRACE NAME=SIZE:WAYS:LINE...");
    SimulatorOptions o;
    for (int i = 2; i < argc; i++) {
        auto g = parse_cache_geometry(argv[i]);
        if (!g.ok()) return fail(g.error().message());
        o.levels.push_back(*g);
    }
    o.set_groups = ~0ull;  // every group, each counted apart
    // A full trace is one window per thread: the simulator takes it whole.
    auto sets = CacheSimulator::create(o);
    if (!sets.ok()) return fail(sets.error().message());
    auto info = read_trace_file(argv[1], *sets);
    if (!info.ok()) return fail(info.error().message());
    std::printf("group\tlevel\treferences\tmisses\n");
    const auto& groups = sets->set_groups();
    for (std::size_t g = 0; g < groups.size(); g++)
        for (std::size_t l = 0; l < groups[g].levels.size(); l++)
            std::printf("%zu\t%s\t%llu\t%llu\n", g, o.levels[l].name.c_str(), (unsigned long long)groups[g].levels[l].references,
                        (unsigned long long)groups[g].levels[l].known_misses);
    return 0;
}
