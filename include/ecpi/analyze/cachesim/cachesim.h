// Trace-sampled cache simulation (MemSpy; Martonosi, Gupta, Anderson,
// SIGMETRICS 1993): set-associative LRU caches, several levels in one pass,
// fed by streams of memory references that arrive in sampled ON windows.
//
// Model: each stream (a program thread) has its own private hierarchy, as
// if every thread ran on its own core; levels are inclusive (an eviction
// from level i invalidates the block in the levels above), write-allocate,
// LRU. A reference that straddles a line touches both lines and counts as
// one reference, missed when either line missed (cachegrind does the same).
//
// Sampling (MemSpy 2, 4.2): at the start of a window the cache holds what
// the last window left, not what the program's skipped references would
// have left. A reference is *known* when the references of its own window
// decide it: its block was referenced earlier in the window (the LRU order
// of in-window blocks is exact), or its set already holds `ways` distinct
// in-window blocks (then it certainly misses). Other first references are
// *unknown*: counted apart, and estimated as the report's `--unknown`
// choice says (stale cache contents, alpha = 0.5, or the dead-time estimate
// of Wood, Hill and Kessler). Set sampling (MemSpy 7.3) simulates only a
// random subset of sets and scales.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::analyze {

struct CacheGeometry {
    std::string name;       // "L1d", "L2", ...
    std::uint64_t size = 0; // bytes
    std::uint32_t ways = 0;
    std::uint32_t line = 0; // bytes, a power of two
    std::uint64_t sets() const { return size / (std::uint64_t(ways) * line); }
};

// "NAME=SIZE:WAYS:LINE" with SIZE as bytes or with a k/m/g suffix
// ("L1d=32k:8:64"). Checks that sets and line are powers of two.
Result<CacheGeometry> parse_cache_geometry(std::string_view text);
Result<void> check_geometry(const CacheGeometry& g);

// The host's data caches: /sys/devices/system/cpu/cpu0/cache first, then
// glibc's sysconf (CPUID); levels whose geometry is unknown or not a power
// of two in sets are left out. `source` says where they came from.
struct HostCaches {
    std::vector<CacheGeometry> levels;
    std::string source;
};
HostCaches host_cache_geometry(const std::string& sysfs_root = "/sys/devices/system/cpu/cpu0/cache");

// How references whose outcome is unknown (MemSpy 4.2) are estimated.
enum class UnknownEstimate {
    kStale,   // the outcome the stale cache gives (the simulator's own state)
    kHalf,    // alpha = 0.5: half of them miss (the paper's default)
    kWood,    // alpha = dead time / generation time of in-window generations
    kMiss,    // alpha = 1 (the pessimistic end of the bound)
    kHit,     // alpha = 0 (the optimistic end)
};
Result<UnknownEstimate> parse_unknown_estimate(std::string_view text);
std::string_view unknown_estimate_name(UnknownEstimate e);

// Counts at one level of one bin (a window, a pc, a data object, a run).
struct LevelCounts {
    std::uint64_t references = 0;   // references that reached this level
    std::uint64_t known_misses = 0;
    std::uint64_t unknown = 0;      // references whose outcome is unknown
    std::uint64_t unknown_stale_misses = 0;  // of those, misses in the stale cache
    std::uint64_t compulsory = 0;   // misses to blocks never seen before (--classes)
    std::uint64_t capacity = 0;     // misses a fully associative LRU cache also takes (--classes)
    void add(const LevelCounts& o);
};

struct BinCounts {
    std::vector<LevelCounts> levels;
    void add(const BinCounts& o);
};

struct SimulatorOptions {
    std::vector<CacheGeometry> levels;
    std::uint32_t set_sample = 1;   // simulate 1 in set_sample sets (MemSpy 7.3); 1: all
    // The sampled groups of sets as a map over the line number's low bits
    // (bit g: group g, see SetFilter), instead of 1/set_sample of them drawn
    // from the seed; 0: drawn. Every group of a full map is counted apart
    // (bench/cachesim/set_groups.cpp: each group's rates, for comparing choices).
    std::uint64_t set_groups = 0;
    // Rotate the drawn groups every this many windows of a stream (0: a
    // fixed choice): from window k on, group g is sampled when group
    // g - (k / set_rotate_windows) * kept (mod the groups) was drawn, kept
    // being the number of groups drawn (one per residue modulo kept, so the
    // turns cover every group). The caller says when windows begin
    // (rotate_sets); references between windows keep the last turn.
    std::uint32_t set_rotate_windows = 0;
    // In the last this many windows of a turn the next turn's groups are
    // sampled too, to warm them (their sets hold what their last turn left,
    // long ago, or nothing): simulated, not counted (Totals::warming). Less
    // than set_rotate_windows.
    std::uint32_t set_warm_windows = 0;
    std::uint64_t seed = 1;
    bool classes = false;           // compulsory/capacity/conflict from a fully associative shadow
    // Per level, whether its misses are counted per pc and per data object
    // (empty: every level). Under combined sampling the set-sampled
    // simulator bins only its own levels: the report takes the others' bins
    // from the windows (by_pc and by_object still list every pc and object
    // it met), and an object looked up for a first-level miss that the L2
    // then hit was half of bloom's objects' look-ups (docs/CACHESIM.md).
    std::vector<bool> bin_levels;
};

// One memory reference of a stream.
struct MemRef {
    std::uint64_t address = 0;
    std::uint64_t pc = 0;
    std::uint32_t size = 0;
    bool write = false;
};

// A heap allocation seen in a stream (runtime interception).
struct HeapAllocation {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t site = 0;        // call-site pc
    std::uint32_t allocator = 0;   // enum ecpi_rt_allocator
};

// The sampled sets as address bits (MemSpy 7.3; what the runtime tests
// inline): a reference is in them when bit ((address >> shift) & 63) of
// `bitmap` is set. Set sampling chooses among at most kMaxSetGroups groups
// of sets (the line number's low bits), a random 1/K of them.
inline constexpr std::uint64_t kMaxSetGroups = 64;
struct SetFilter {
    std::uint64_t bitmap = 0;
    unsigned shift = 0;
    std::uint32_t rotate_step = 0;     // bits the bitmap rotates left per turn
    std::uint32_t rotate_windows = 0;  // windows per turn (0: no rotation)
    std::uint32_t rotate_warm = 0;     // last windows of a turn that add the next turn's groups
    bool contains(std::uint64_t address) const { return (bitmap >> ((address >> shift) & 63)) & 1; }
    // The filter from the start of window `window` on (ecpi_rt_set_bitmap_at).
    std::uint64_t bitmap_at(std::uint64_t window) const;
    bool operator==(const SetFilter&) const = default;
};

// What a data address belongs to, for MemSpy's data-object view.
enum class ObjectKind { kHeap, kStack, kStatic, kUnknown };

class CacheSimulator {
public:
    static Result<CacheSimulator> create(SimulatorOptions options);
    CacheSimulator(CacheSimulator&&) noexcept;
    CacheSimulator& operator=(CacheSimulator&&) noexcept;
    ~CacheSimulator();

    // Streams: one per thread; ids are the caller's (tids, ring indices).
    void begin_stream(std::uint32_t stream, std::uint32_t tid);
    void set_stack(std::uint32_t stream, std::uint64_t low, std::uint64_t high);
    // A window begins after `skipped` references that were not simulated.
    void begin_window(std::uint32_t stream, std::uint64_t skipped);
    // Under rotating set sampling: the stream's window `window` (its index
    // among the stream's windows, from 0) begins, and with it the turn of
    // groups that window's period samples (SimulatorOptions::
    // set_rotate_windows). Nothing without rotation.
    void rotate_sets(std::uint32_t stream, std::uint64_t window);
    void access(std::uint32_t stream, const MemRef& ref);
    // The stream ends after `skipped` more references that were not simulated.
    void end_stream(std::uint32_t stream, std::uint64_t skipped);
    // `hits` references of the stream that the runtime settled as hits in
    // the most recent way of their first-level set (SET_HITS records):
    // counted at the first level, in the totals only.
    void count_settled_hits(std::uint32_t stream, std::uint64_t hits);
    void allocate(const HeapAllocation& allocation);
    void release(std::uint64_t address);
    // From now on, the objects of misses come from `keeper`'s map of live
    // heap blocks, and allocate/release only count sites and forget the
    // last answer: the caller gives `keeper` every allocation and release,
    // each before this simulator's, and keeps it alive as long as this one.
    // Two simulators fed one trace (RecordDecoder's) keep one map: every
    // allocation and free of the program cost each map's update (on
    // hashtable, 300,000 allocations: the heap map's updates were 7% of
    // the samples of a default run, half of them the second map's).
    void read_heap_of(const CacheSimulator& keeper);
    // The runtime range [start, end) of the global or static variable
    // holding an address, if one is known (DataSymbolIndex::range_of).
    using StaticObjectRange = std::function<std::optional<std::pair<std::uint64_t, std::uint64_t>>(std::uint64_t)>;
    // From now on, a miss into a variable `range_of` knows is counted under
    // that variable (ObjectKey::id its start) instead of under its line, and
    // the answer holds for the whole variable: a random walk over a large
    // array (bloom's bit array, 4,096 lines) cost one look-up of the
    // objects' ids and one scattered count per line missed (the run's CPU
    // at the default 1.31 s against 0.94; docs/CACHESIM.md). The report names both
    // kinds of key by the variable holding them, so its rows are the same.
    void key_statics_by(StaticObjectRange range_of);
    // Updates this simulator made to its own heap map (0 after read_heap_of).
    std::uint64_t heap_updates() const;

    // Results (valid at any time; final after every stream ended).
    struct Totals {
        std::uint64_t events = 0;      // references the program made (simulated + skipped)
        std::uint64_t simulated = 0;   // references simulated (in windows, in sampled sets or not)
        std::uint64_t windows = 0;
        std::uint64_t streams = 0;
        std::uint64_t set_scale = 1;   // references and misses in sampled sets times this
        std::uint64_t warming = 0;     // of `simulated`, references that warmed the next turn's groups, not counted
        std::uint64_t settled_hits = 0; // of `simulated`, first-level hits the runtime settled (count_settled_hits)
        BinCounts counts;              // in sampled sets
    };
    const Totals& totals() const;
    // Per closed window (for the sampling error of MemSpy 6.1).
    const std::vector<BinCounts>& windows() const;
    // Per sampled set group under set sampling (MemSpy 7.3; empty without
    // it): the counts of the references to each group of sets (index: the
    // line number's low bits, at most kMaxSetGroups groups, common to all
    // levels; empty entries are unsampled), the samples of the spread over
    // sampled sets.
    const std::vector<BinCounts>& set_groups() const;
    // Under rotation: each turn's sampled groups' counts (one entry per
    // turn of a stream, each a vector of the groups' counts that its
    // references reached), the samples of the spread over sets; the
    // groups of a turn are a stratum (one choice among the groups, for one
    // stretch of time). Empty without rotation.
    const std::vector<std::vector<BinCounts>>& set_turns() const;
    // Under set sampling: whether an address lies in a sampled set, and the
    // choice as address bits (nullopt when K does not divide the groups, or
    // without set sampling).
    bool in_sampled_sets(std::uint64_t address) const;
    std::optional<SetFilter> set_filter() const;
    // Per pc (references and misses by level). Built from the simulator's
    // flat tables at each call (for reports, not per reference); the
    // reference stays valid until the next call.
    const std::unordered_map<std::uint64_t, BinCounts>& by_pc() const;
    // Per data object.
    struct ObjectKey {
        ObjectKind kind = ObjectKind::kUnknown;
        std::uint64_t id = 0;          // heap: allocation site; stack: tid; static: its variable's start, or its line address
        auto operator<=>(const ObjectKey&) const = default;
    };
    const std::map<ObjectKey, BinCounts>& by_object() const;  // likewise built at each call
    // Heap allocation sites seen: site pc -> (allocations, bytes, allocator).
    struct SiteInfo {
        std::uint64_t allocations = 0;
        std::uint64_t bytes = 0;
        std::uint32_t allocator = 0;
    };
    const std::map<std::uint64_t, SiteInfo>& sites() const;
    // Wood et al.'s alpha per level: dead time / generation time of
    // generations that began and ended inside one window (nullopt: none).
    std::optional<double> wood_alpha(std::size_t level) const;
    const SimulatorOptions& options() const;

private:
    struct Impl;
    explicit CacheSimulator(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The estimate of one level's misses in a bin under an estimator
// (MemSpy Eq. 1: known misses plus alpha times the unknown references).
double estimated_misses(const LevelCounts& c, UnknownEstimate e, double wood_alpha);

// A miss rate with its error bound (MemSpy 4.2 Eq. 2 and 6.1): the
// estimate, the interval that alpha in [0, 1] allows, and the sampling
// error: 1.96 standard errors of the ratio estimator over windows (time
// sampling) and Student's t for their count times the standard error over
// the chosen set groups (set sampling, few of them), combined in quadrature. `low`/`high` combine the interval and the sampling error.
struct MissRateEstimate {
    double rate = 0;          // misses / references at this level
    double global_rate = 0;   // misses / references at the first level
    double unknown_low = 0;   // rate with alpha = 0
    double unknown_high = 0;  // rate with alpha = 1
    double sampling_error = 0;
    double set_spread = 0;    // its set-sampling part: t(95%, groups - 1) standard errors over the sampled groups of sets, or over the turns' groups within turns under rotation (NaN: under two)
    double low = 0;
    double high = 0;
    double bound = 0;         // max(rate - low, high - rate)
};
MissRateEstimate estimate_miss_rate(const CacheSimulator& sim, std::size_t level, UnknownEstimate e);
// low, high and bound from rate, the unknown range and sampling_error (1.0 when NaN).
void widen_to_bounds(MissRateEstimate& r);
// The two-sided 95% quantile of Student's t with `df` degrees of freedom.
double student_t95(std::size_t df);

}  // namespace ecpi::analyze
