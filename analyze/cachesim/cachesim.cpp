// Trace-sampled cache simulation (include/ecpi/analyze/cachesim/cachesim.h; MemSpy).
#include "ecpi/analyze/cachesim/cachesim.h"

#include "ecpi_rt_abi.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <list>
#include <memory>
#include <random>
#include <unordered_set>

namespace ecpi::analyze {

// ---------------------------------------------------------------- geometry

namespace {

std::optional<std::uint64_t> parse_size(std::string_view s) {
    std::uint64_t mult = 1;
    if (!s.empty()) {
        char c = s.back();
        if (c == 'k' || c == 'K') mult = 1024;
        if (c == 'm' || c == 'M') mult = 1024 * 1024;
        if (c == 'g' || c == 'G') mult = 1024ull * 1024 * 1024;
        if (mult != 1) s.remove_suffix(1);
    }
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v == 0 || v > (1ull << 40) / mult) return std::nullopt;
    return v * mult;
}

}  // namespace

Result<void> check_geometry(const CacheGeometry& g) {
    if (g.size == 0 || g.ways == 0 || g.line == 0) return Error("cache " + g.name + ": size, ways and line must be positive");
    if (!std::has_single_bit(g.line) || g.line < 8 || g.line > 4096)
        return Error("cache " + g.name + ": line size " + std::to_string(g.line) + " is not a power of two between 8 and 4096");
    if (g.ways > 64) return Error("cache " + g.name + ": at most 64 ways are simulated (" + std::to_string(g.ways) + " asked)");
    if (g.size % (std::uint64_t(g.ways) * g.line) != 0 || !std::has_single_bit(g.sets()))
        return Error("cache " + g.name + ": size / (ways * line) = " + std::to_string(double(g.size) / (double(g.ways) * g.line)) +
                     " sets is not a power of two");
    return ok();
}

Result<CacheGeometry> parse_cache_geometry(std::string_view text) {
    auto eq = text.find('=');
    std::string bad = "cache '" + std::string(text) + "' is not NAME=SIZE:WAYS:LINE (e.g. L1d=32k:8:64)";
    if (eq == std::string_view::npos || eq == 0) return Error(bad);
    CacheGeometry g;
    g.name = std::string(text.substr(0, eq));
    auto rest = text.substr(eq + 1);
    auto c1 = rest.find(':');
    auto c2 = c1 == std::string_view::npos ? c1 : rest.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return Error(bad);
    auto size = parse_size(rest.substr(0, c1));
    auto ways = parse_size(rest.substr(c1 + 1, c2 - c1 - 1));
    auto line = parse_size(rest.substr(c2 + 1));
    if (!size || !ways || !line || *ways > 1024 || *line > 65536) return Error(bad);
    g.size = *size;
    g.ways = std::uint32_t(*ways);
    g.line = std::uint32_t(*line);
    ECPI_RETURN_IF_ERROR(check_geometry(g));
    return g;
}

namespace {

std::optional<std::string> read_small_file(const std::string& path) {
    std::ifstream in(path);
    std::string s;
    if (!in || !std::getline(in, s)) return std::nullopt;
    return s;
}

std::vector<CacheGeometry> sysfs_caches(const std::string& root) {
    std::vector<CacheGeometry> out;
    for (int i = 0; i < 16; i++) {
        std::string dir = root + "/index" + std::to_string(i) + "/";
        auto type = read_small_file(dir + "type");
        if (!type) break;
        if (*type == "Instruction") continue;
        auto level = read_small_file(dir + "level");
        auto size = read_small_file(dir + "size");
        auto ways = read_small_file(dir + "ways_of_associativity");
        auto line = read_small_file(dir + "coherency_line_size");
        if (!level || !size || !ways || !line) continue;
        CacheGeometry g;
        g.name = "L" + *level + (*type == "Data" ? "d" : "");
        auto sz = parse_size(*size);
        auto w = parse_size(*ways);
        auto l = parse_size(*line);
        if (!sz || !w || !l) continue;
        g.size = *sz;
        g.ways = std::uint32_t(*w);
        g.line = std::uint32_t(*l);
        if (check_geometry(g).ok()) out.push_back(g);
    }
    return out;
}

}  // namespace

HostCaches host_cache_geometry(const std::string& sysfs_root) {
    HostCaches h;
    h.levels = sysfs_caches(sysfs_root);
    if (!h.levels.empty()) {
        h.source = sysfs_root;
        return h;
    }
    struct Conf {
        const char* name;
        int size, ways, line;
    };
    const Conf confs[] = {{"L1d", _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL1_DCACHE_ASSOC, _SC_LEVEL1_DCACHE_LINESIZE},
                          {"L2", _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL2_CACHE_ASSOC, _SC_LEVEL2_CACHE_LINESIZE},
                          {"L3", _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL3_CACHE_ASSOC, _SC_LEVEL3_CACHE_LINESIZE}};
    for (const auto& c : confs) {
        long size = sysconf(c.size), ways = sysconf(c.ways), line = sysconf(c.line);
        if (size <= 0 || ways <= 0 || line <= 0) continue;
        CacheGeometry g{c.name, std::uint64_t(size), std::uint32_t(ways), std::uint32_t(line)};
        if (check_geometry(g).ok()) h.levels.push_back(g);
    }
    if (!h.levels.empty()) {
        h.source = "sysconf (CPUID; " + sysfs_root + " absent)";
        return h;
    }
    h.levels = {{"L1d", 32 * 1024, 8, 64}, {"L2", 1024 * 1024, 16, 64}};
    h.source = "built-in default (neither " + sysfs_root + " nor sysconf describe the caches)";
    return h;
}

Result<UnknownEstimate> parse_unknown_estimate(std::string_view text) {
    if (text == "stale") return UnknownEstimate::kStale;
    if (text == "half") return UnknownEstimate::kHalf;
    if (text == "wood") return UnknownEstimate::kWood;
    if (text == "miss") return UnknownEstimate::kMiss;
    if (text == "hit") return UnknownEstimate::kHit;
    return Error("unknown estimate '" + std::string(text) + "' (choose stale, half, wood, miss or hit)");
}

std::string_view unknown_estimate_name(UnknownEstimate e) {
    switch (e) {
    case UnknownEstimate::kStale: return "stale";
    case UnknownEstimate::kHalf: return "half";
    case UnknownEstimate::kWood: return "wood";
    case UnknownEstimate::kMiss: return "miss";
    case UnknownEstimate::kHit: return "hit";
    }
    return "?";
}

void LevelCounts::add(const LevelCounts& o) {
    references += o.references;
    known_misses += o.known_misses;
    unknown += o.unknown;
    unknown_stale_misses += o.unknown_stale_misses;
    compulsory += o.compulsory;
    capacity += o.capacity;
}

void BinCounts::add(const BinCounts& o) {
    if (levels.size() < o.levels.size()) levels.resize(o.levels.size());
    for (std::size_t i = 0; i < o.levels.size(); i++) levels[i].add(o.levels[i]);
}

// ---------------------------------------------------------------- simulator

namespace {

// One way of a set. Sets keep their ways in LRU order, most recent first,
// so the blocks referenced in the current window are always a prefix. A
// way is 32 bytes, so that moving ways is one aligned copy (tags kept apart
// from the rest made lookups cheaper but the shifts of a miss dearer: 15-40%
// slower on bloom's misses, 2026-11-26).
struct Way {
    std::uint64_t block = 0;       // block number + 1; 0: invalid
    std::uint64_t fill_time = 0;   // when this generation began (Wood et al.)
    std::uint64_t last_time = 0;   // last reference
    std::uint32_t stamp = 0;       // window of the last reference
    std::uint32_t fill_window = 0; // window the generation began in
};

// Ordered so that a two-line reference takes the larger outcome: any known
// miss makes it a known miss; else any unknown line makes it unknown.
enum class Outcome : std::uint8_t { kKnownHit = 0, kUnknownHit = 1, kUnknownMiss = 2, kKnownMiss = 3 };

// A fully associative LRU shadow and the set of blocks ever seen (--classes).
struct Shadow {
    std::size_t capacity = 0;
    std::list<std::uint64_t> lru;
    std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> where;
    std::unordered_set<std::uint64_t> seen;
    // Returns (first reference ever, missed in the fully associative cache).
    std::pair<bool, bool> access(std::uint64_t block) {
        bool first = seen.insert(block).second;
        auto it = where.find(block);
        if (it != where.end()) {
            lru.splice(lru.begin(), lru, it->second);
            return {first, false};
        }
        lru.push_front(block);
        where[block] = lru.begin();
        if (lru.size() > capacity) {
            where.erase(lru.back());
            lru.pop_back();
        }
        return {first, true};
    }
};

struct Level {
    CacheGeometry geometry;
    unsigned line_shift = 0;
    std::uint64_t set_mask = 0;
    std::uint32_t ways = 0;
    double dead_time = 0, generation_time = 0;  // summed over streams
};

struct LevelState {
    std::vector<Way> ways;  // sets * ways
    Shadow shadow;
};

struct Stream {
    std::uint32_t tid = 0;
    std::vector<LevelState> levels;
    std::uint32_t window = 0;     // current window id (1-based; 0: none yet)
    bool exact = true;            // nothing skipped yet: the cache state is the true one
    bool in_window = false;
    std::uint64_t time = 0;       // simulated references so far
    std::uint64_t stack_low = 0, stack_high = 0;
    BinCounts window_counts;
    // Rotating set sampling: the turn (window / set_rotate_windows), the
    // groups it shifts the drawn choice by, and its groups' counts so far.
    std::uint64_t turn = 0;
    std::uint64_t set_offset = 0;
    std::vector<BinCounts> turn_groups;
    std::uint64_t next_offset = 0; // the next turn's
    bool warming = false;          // the next turn's groups are being warmed: simulated, not counted
};

struct Allocation {
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::uint64_t site = 0;
};

// An open-addressing hash map from 64-bit keys (never 0) to 64-bit values:
// one probe sequence in one flat array, backward-shift deletion.
class FlatMap {
public:
    FlatMap() { slots_.resize(1024); }
    const std::uint64_t* find(std::uint64_t key) const {
        for (std::size_t i = hash(key);; i = (i + 1) & mask()) {
            if (slots_[i].key == key) return &slots_[i].value;
            if (slots_[i].key == 0) return nullptr;
        }
    }
    void insert(std::uint64_t key, std::uint64_t value) {
        if ((count_ + 1) * 2 > slots_.size()) grow();
        std::size_t i = hash(key);
        while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask();
        if (slots_[i].key == 0) count_++;
        slots_[i] = {key, value};
    }
    void erase(std::uint64_t key) {
        std::size_t i = hash(key);
        while (slots_[i].key != key) {
            if (slots_[i].key == 0) return;
            i = (i + 1) & mask();
        }
        // Backward shift: move later entries of the cluster into the hole
        // when their home slot does not lie cyclically in (hole, j].
        std::size_t hole = i;
        for (std::size_t j = (i + 1) & mask(); slots_[j].key != 0; j = (j + 1) & mask()) {
            std::size_t home = hash(slots_[j].key);
            bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (stays) continue;
            slots_[hole] = slots_[j];
            hole = j;
        }
        slots_[hole] = {};
        count_--;
    }

private:
    struct Slot {
        std::uint64_t key = 0;
        std::uint64_t value = 0;
    };
    std::size_t mask() const { return slots_.size() - 1; }
    std::size_t hash(std::uint64_t key) const { return std::size_t((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask(); }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        count_ = 0;
        for (const auto& s : old)
            if (s.key) insert(s.key, s.value);
    }
    std::vector<Slot> slots_;
    std::size_t count_ = 0;
};

// Dense ids for two-word keys, numbered from 0 in order of first sight:
// one probe sequence in one flat array of (key, id) slots. Per-pc and
// per-object counts live in flat vectors indexed by these ids: a reference
// costs one probe instead of a node-based hash map's lookup and the
// pointer chase into the bin's own vector of levels.
class DenseIds {
public:
    DenseIds() { slots_.resize(1024); }
    // The id of (a, b); `fresh` says whether it was new.
    std::uint32_t id(std::uint64_t a, std::uint64_t b, bool& fresh) {
        std::size_t i = hash(a, b);
        for (;; i = (i + 1) & mask()) {
            const Slot& s = slots_[i];
            if (s.id_plus_1 == 0) break;
            if (s.a == a && s.b == b) {
                fresh = false;
                return s.id_plus_1 - 1;
            }
        }
        fresh = true;
        std::uint32_t id = count_++;
        slots_[i] = {a, b, id + 1};
        if (std::size_t(count_) * 2 > slots_.size()) grow();
        return id;
    }
    std::uint32_t size() const { return count_; }

private:
    struct Slot {
        std::uint64_t a = 0;
        std::uint64_t b = 0;
        std::uint32_t id_plus_1 = 0;  // 0: empty
    };
    std::size_t mask() const { return slots_.size() - 1; }
    std::size_t hash(std::uint64_t a, std::uint64_t b) const {
        std::uint64_t h = a * 0x9E3779B97F4A7C15ULL ^ b * 0xC2B2AE3D27D4EB4FULL;
        return std::size_t(h ^ (h >> 32)) & mask();
    }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        for (const auto& s : old) {
            if (s.id_plus_1 == 0) continue;
            std::size_t i = hash(s.a, s.b);
            while (slots_[i].id_plus_1 != 0) i = (i + 1) & mask();
            slots_[i] = s;
        }
    }
    std::vector<Slot> slots_;
    std::uint32_t count_ = 0;
};

// Live heap allocations by address. Every simulated miss asks which object
// it touched, so the answer must cost about one host cache miss: small
// allocations are found through their 16-byte granules (malloc's
// alignment, so a granule belongs to one allocation), large ones (over
// kLargeBytes) in an ordered map of their own. The granules of a 4 KiB
// page sit side by side in one block of 256 slots (found through a small
// hash of pages), so that recording an allocation writes adjacent slots
// instead of probing a hash table once per granule: every allocation and
// free of the program is recorded, sampled or not (a per-granule hash
// took 12% of ecpi's time at 1/10 on the tree program; docs/CACHESIM.md).
// A small allocation's first granule carries kFirstGranule: a free clears
// it and the granules after it that name the same site without the mark
// (the next allocation's first granule has it), so no map from start to
// end is kept. That map (a probe of a 16 MiB table per allocation on
// hashtable's 300,000) took 15-18% of ecpi's samples at --sets 1/8 and
// with time sampling alone (docs/CACHESIM.md, "The heap map without ends").
class HeapMap {
public:
    static constexpr std::uint64_t kGranuleShift = 4;
    static constexpr std::uint64_t kLargeBytes = 4096;

    void insert(const Allocation& a) {
        remove(a.start);
        if (a.end - a.start > kLargeBytes) {
            large_[a.start] = a;
            return;
        }
        bool fresh = false;
        std::uint32_t site = site_ids_.id(a.site, 0, fresh);
        if (fresh) site_pcs_.push_back(a.site);
        // A granule belongs to one allocation, so its slot alone names the site.
        set_granules(a.start, a.end, site + 1);
        *slot(a.start >> kGranuleShift) |= kFirstGranule;
    }
    void remove(std::uint64_t start) {
        std::uint64_t g = start >> kGranuleShift;
        std::uint32_t* first = slot(g);
        if (first && (*first & kFirstGranule)) {
            clear_from(g, *first & ~kFirstGranule);
            return;
        }
        if (!large_.empty()) large_.erase(start);
    }
    // The allocation site of the allocation holding `address`, if any; for
    // a large allocation also its range (`range` is left alone for small
    // ones, whose extent a granule does not know).
    std::optional<std::uint64_t> find(std::uint64_t address, std::pair<std::uint64_t, std::uint64_t>* range = nullptr) const {
        std::uint64_t g = address >> kGranuleShift;
        if (const std::uint64_t* page = pages_.find((g >> kPageGranuleBits) + 1)) {
            const std::uint32_t* head = block_at(*page);
            unsigned i = unsigned(g & kPageGranuleMask);
            if (head[kUniform] != kMixed) {
                // One site (or none) on this page: its 64-byte head answers.
                if ((head[i >> 5] >> (i & 31)) & 1) return site_pcs_[head[kUniform] - 1];
            } else if (std::uint32_t site = head[kHeadWords + i] & ~kFirstGranule; site != 0) {
                return site_pcs_[site - 1];
            }
        }
        if (large_.empty()) return std::nullopt;
        auto it = large_.upper_bound(address);
        if (it == large_.begin()) return std::nullopt;
        --it;
        if (address >= it->second.end) return std::nullopt;
        if (range) *range = {it->second.start, it->second.end};
        return it->second.site;
    }

private:
    static constexpr unsigned kPageGranuleBits = 8;  // 256 granules of 16 bytes: 4 KiB
    static constexpr std::uint64_t kPageGranuleMask = (1u << kPageGranuleBits) - 1;
    static constexpr std::uint32_t kFirstGranule = 1u << 31;  // in a slot: an allocation's first granule

    // The slot of granule g, or nullptr when its page holds no allocation.
    std::uint32_t* slot(std::uint64_t g) {
        const std::uint64_t* page = pages_.find((g >> kPageGranuleBits) + 1);
        return page ? &block_at(*page)[kHeadWords + (g & kPageGranuleMask)] : nullptr;
    }

    // Clears the allocation whose first granule is g and whose slots hold
    // `value` (its site id + 1): g, then the granules after it that hold
    // `value` without kFirstGranule, at most those of kLargeBytes. (An
    // allocation freed without a record and overlapped by a later one of
    // the same site loses its granules past the later one's end too; the
    // start-to-end map it replaces mishandled that case as well.)
    void clear_from(std::uint64_t g, std::uint32_t value) {
        std::uint32_t* head = head_of(g);
        set_slot(head, unsigned(g & kPageGranuleMask), 0);
        for (std::uint64_t n = 0; n < (kLargeBytes >> kGranuleShift); n++) {
            ++g;
            if ((g & kPageGranuleMask) == 0) head = head_of(g);
            if (!head || head[kHeadWords + (g & kPageGranuleMask)] != value) return;
            set_slot(head, unsigned(g & kPageGranuleMask), 0);
        }
    }

    // Sets the slots of the granules of [start, end) to `value` (a site
    // id + 1, or 0), making the pages' blocks as needed.
    void set_granules(std::uint64_t start, std::uint64_t end, std::uint32_t value) {
        std::uint64_t first = start >> kGranuleShift, last = (end - 1) >> kGranuleShift;
        for (std::uint64_t g = first; g <= last;) {
            std::uint64_t page = g >> kPageGranuleBits;
            std::uint32_t* head;
            if (const std::uint64_t* at = pages_.find(page + 1)) {
                head = block_at(*at);
            } else {
                if (value == 0) {  // nothing recorded in this page: nothing to clear
                    g = (page + 1) << kPageGranuleBits;
                    continue;
                }
                head = new_block();
                pages_.insert(page + 1, std::uint64_t(reinterpret_cast<std::uintptr_t>(head)));
            }
            std::uint64_t page_last = std::min(last, (page << kPageGranuleBits) | kPageGranuleMask);
            for (; g <= page_last; g++) set_slot(head, unsigned(g & kPageGranuleMask), value);
        }
    }

    // A page's block of slots, zeroed, in chunks that never move: one
    // vector of every block, grown by doubling, copied and zero-filled all
    // of them again at each growth (hashtable's 10 MiB heap: 2.4 MiB of
    // slots; the copies, fills and their page faults were 8% of ecpi's
    // samples at --sets 1/8; docs/CACHESIM.md, "Fixed costs at 1/8").
    //
    // Each block begins with a 64-byte head: which granules hold an
    // allocation (256 bits) and, while they all name one site, that site
    // (kUniform). Every simulated miss asks which object it touched, and
    // a miss into a 10 MiB heap lands on a random slot of 2.4 MiB: a host
    // cache miss, 37% of ecpi's samples at --sets 1/8 on hashtable. Its
    // 300,000 entries come from one site, so the heads (one line a page,
    // 160 KiB) answer instead. A page whose granules name two sites stays
    // kMixed, and its slots answer, until it holds no allocation.
    static constexpr unsigned kHeadWords = 16;   // the head: 8 words of bits, kUniform, padding
    static constexpr unsigned kUniform = 8;      // head word: site id + 1 of every granule held; 0: none held
    static constexpr std::uint32_t kMixed = ~0u; // ... or: two sites or more
    static constexpr std::size_t kBlockWords = kHeadWords + (kPageGranuleMask + 1);
    static constexpr std::size_t kChunkBlocks = 64;
    static std::uint32_t* block_at(std::uint64_t value) { return reinterpret_cast<std::uint32_t*>(std::uintptr_t(value)); }
    std::uint32_t* new_block() {
        if (chunk_used_ == kChunkBlocks) {
            chunks_.push_back(std::make_unique<std::uint32_t[]>(kChunkBlocks * kBlockWords));
            chunk_used_ = 0;
        }
        return chunks_.back().get() + (chunk_used_++) * kBlockWords;
    }
    std::uint32_t* head_of(std::uint64_t g) {
        const std::uint64_t* page = pages_.find((g >> kPageGranuleBits) + 1);
        return page ? block_at(*page) : nullptr;
    }
    // Writes slot i of a page's block (a site id + 1, or 0) and keeps its head.
    static void set_slot(std::uint32_t* head, unsigned i, std::uint32_t value) {
        head[kHeadWords + i] = value;
        if (value != 0) {
            head[i >> 5] |= 1u << (i & 31);
            std::uint32_t site = value & ~kFirstGranule;
            if (head[kUniform] == 0) head[kUniform] = site;
            else if (head[kUniform] != site) head[kUniform] = kMixed;
            return;
        }
        head[i >> 5] &= ~(1u << (i & 31));
        if ((head[0] | head[1] | head[2] | head[3] | head[4] | head[5] | head[6] | head[7]) == 0) head[kUniform] = 0;
    }

    FlatMap pages_;  // page + 1 -> its block: a head, then 256 slots (per granule: site id + 1, 0: none)
    std::vector<std::unique_ptr<std::uint32_t[]>> chunks_;
    std::size_t chunk_used_ = kChunkBlocks;
    DenseIds site_ids_;                       // site pc -> site id
    std::vector<std::uint64_t> site_pcs_;     // site id -> site pc
    std::map<std::uint64_t, Allocation> large_;
};

}  // namespace

struct CacheSimulator::Impl {
    SimulatorOptions options;
    std::vector<Level> levels;
    std::uint64_t sample_mask = 0;              // set sampling: lines whose (line & mask) is in `sampled`
    std::vector<std::uint8_t> sampled;
    std::optional<SetFilter> filter;            // the sampled sets as address bits (1/K with K a power of two)
    std::unordered_map<std::uint32_t, Stream> streams;
    Totals totals;
    std::vector<BinCounts> windows;
    std::vector<BinCounts> set_groups;          // set sampling: per group of sets (index: line & sample_mask)
    std::uint64_t rotate_step = 0;              // rotating set sampling: groups per turn's shift (0: fixed)
    std::vector<std::vector<BinCounts>> set_turns;  // each closed turn's groups' counts
    // Per pc and per data object: dense ids, and counts at [id * levels + level].
    DenseIds pc_ids;
    std::vector<std::uint64_t> pc_of_id;
    std::vector<LevelCounts> pc_counts;
    DenseIds object_ids;
    std::vector<ObjectKey> object_of_id;
    std::vector<LevelCounts> object_counts;
    mutable std::unordered_map<std::uint64_t, BinCounts> pcs_view;  // by_pc()'s view
    mutable std::map<ObjectKey, BinCounts> objects_view;            // by_object()'s view
    struct PcMemo {
        std::uint64_t pc = 0;
        std::uint32_t id_plus_1 = 0;  // 0: empty
        std::uint32_t recent_hits = 0;  // known L1 hits not yet added to pc_counts
    };
    std::array<PcMemo, 1024> pc_memo{};  // 16 KiB
    std::uint32_t last_stream_id = 0;
    Stream* last_stream = nullptr;  // streams' nodes do not move
    HeapMap heap;                       // this simulator's own (empty while it reads another's)
    const HeapMap* read_heap = nullptr; // read_heap_of: another simulator's, kept by it
    CacheSimulator::StaticObjectRange static_range;  // key_statics_by
    // Whether level l keeps per-pc and per-object counts (SimulatorOptions::bin_levels).
    bool binned(std::size_t l) const { return options.bin_levels.empty() || (l < options.bin_levels.size() && options.bin_levels[l]); }
    std::uint64_t heap_updates = 0;
    const HeapMap& heap_map() const { return read_heap ? *read_heap : heap; }
    std::map<std::uint64_t, SiteInfo> sites;
    std::vector<Outcome> outcome_scratch;

    Stream& stream(std::uint32_t id) {
        if (last_stream && last_stream_id == id) [[likely]]
            return *last_stream;
        return find_stream(id);
    }

    [[gnu::noinline]] Stream& find_stream(std::uint32_t id) {
        auto it = streams.find(id);
        if (it != streams.end()) {
            last_stream_id = id;
            last_stream = &it->second;
            return it->second;
        }
        Stream s;
        for (const auto& l : levels) {
            LevelState st;
            st.ways.resize(l.geometry.sets() * l.ways);
            st.shadow.capacity = l.geometry.size / l.geometry.line;
            s.levels.push_back(std::move(st));
        }
        s.window_counts.levels.resize(levels.size());
        if (rotate_step) s.turn_groups.resize(set_groups.size());
        totals.streams++;
        Stream& made = streams.emplace(id, std::move(s)).first->second;
        last_stream_id = id;
        last_stream = &made;
        return made;
    }

    // The memo entry of a pc: a direct-mapped memo of recent pcs' ids in
    // front of the table, since a loop's references come back to the same
    // few pcs (the table's probe was 17% of ecpi's samples at 1/1 on
    // SQLite). An entry also holds its pc's known L1 hits until it is
    // replaced (or the counts are read): most references are such hits,
    // and adding each to the pc's counts cost a host cache miss per
    // reference on a program with many pcs.
    PcMemo& pc_memo_entry(std::uint64_t pc) {
        PcMemo& memo = pc_memo[(pc ^ (pc >> 10)) & (pc_memo.size() - 1)];
        if (memo.id_plus_1 != 0 && memo.pc == pc) return memo;
        flush_recent_hits(memo);
        bool fresh = false;
        std::uint32_t id = pc_ids.id(pc, 0, fresh);
        if (fresh) {
            pc_of_id.push_back(pc);
            pc_counts.resize(pc_counts.size() + levels.size());
        }
        memo = {pc, id + 1, 0};
        return memo;
    }
    void flush_recent_hits(PcMemo& memo) {
        if (memo.recent_hits == 0) return;
        pc_counts[std::size_t(memo.id_plus_1 - 1) * levels.size()].references += memo.recent_hits;
        memo.recent_hits = 0;
    }
    void flush_all_recent_hits() {
        for (auto& memo : pc_memo) flush_recent_hits(memo);
    }
    void count_recent_hit(std::uint64_t pc) {
        PcMemo& memo = pc_memo_entry(pc);  // listed in by_pc, binned or not
        if (!binned(0)) return;
        if (++memo.recent_hits == UINT32_MAX) flush_recent_hits(memo);
    }

    // The counts of a pc's bin (made at first sight).
    LevelCounts* pc_bin(std::uint64_t pc) {
        return &pc_counts[std::size_t(pc_memo_entry(pc).id_plus_1 - 1) * levels.size()];
    }

    void close_window(Stream& s) {
        if (!s.in_window) return;
        windows.push_back(s.window_counts);
        for (auto& l : s.window_counts.levels) l = LevelCounts{};
        s.in_window = false;
    }

    // The way of `set` (of `ways` ways) holding block `key`, or `ways`. No
    // branch per way: which way hits is unpredictable, and a mispredicted
    // scan cost more than comparing every tag.
    static std::uint32_t find_way(const Way* set, std::uint32_t ways, std::uint64_t key) {
        std::uint32_t found = ways;
        for (std::uint32_t i = ways; i-- > 0;) found = set[i].block == key ? i : found;
        return found;
    }

    // Invalidate a block (given as a byte address range) in levels above `level` (inclusion).
    void back_invalidate(Stream& s, std::size_t level, std::uint64_t first_byte, std::uint64_t bytes) {
        for (std::size_t u = 0; u < level; u++) {
            const Level& L = levels[u];
            for (std::uint64_t a = first_byte; a < first_byte + bytes; a += L.geometry.line) {
                std::uint64_t block = a >> L.line_shift;
                Way* set = &s.levels[u].ways[(block & L.set_mask) * L.ways];
                std::uint32_t i = find_way(set, L.ways, block + 1);
                if (i == L.ways) continue;
                std::memmove(set + i, set + i + 1, (L.ways - 1 - i) * sizeof(Way));
                set[L.ways - 1] = Way{};
            }
        }
    }

    // One block at one level (MemSpy 4.2's known/unknown classification).
    Outcome access_block(Stream& s, std::size_t level, std::uint64_t block) {
        Level& L = levels[level];
        Way* set = &s.levels[level].ways[(block & L.set_mask) * L.ways];
        const std::uint32_t w = s.window;
        const std::uint64_t key = block + 1;
        // The most recent way first: most references touch the line the
        // previous one at this set touched, and then nothing moves.
        std::uint32_t i = set[0].block == key ? 0 : find_way(set, L.ways, key);
        if (i < L.ways) {
            bool known = s.exact || set[i].stamp == w;
            if (i != 0) {
                Way hit = set[i];
                std::memmove(set + 1, set, i * sizeof(Way));
                set[0] = hit;
            }
            set[0].stamp = w;
            set[0].last_time = s.time;
            return known ? Outcome::kKnownHit : Outcome::kUnknownHit;
        }
        // Miss: known when the set is full of blocks of this window (or nothing was ever skipped).
        Way& victim = set[L.ways - 1];
        bool known = s.exact || (victim.block != 0 && victim.stamp == w);
        if (victim.block != 0) {
            if (victim.fill_window == w) {  // a generation inside one window (Wood et al.)
                L.generation_time += double(s.time - victim.fill_time);
                L.dead_time += double(s.time - victim.last_time);
            }
            if (level > 0) back_invalidate(s, level, (victim.block - 1) << L.line_shift, L.geometry.line);
        }
        std::memmove(set + 1, set, (L.ways - 1) * sizeof(Way));
        set[0] = Way{key, s.time, s.time, w, w};
        return known ? Outcome::kKnownMiss : Outcome::kUnknownMiss;
    }

    static void count(LevelCounts& c, Outcome o) {  // no branches: outcomes vary unpredictably
        c.references++;
        c.known_misses += o == Outcome::kKnownMiss;
        c.unknown += o == Outcome::kUnknownHit || o == Outcome::kUnknownMiss;
        c.unknown_stale_misses += o == Outcome::kUnknownMiss;
    }

    // The object holding `address`, and the address range over which that
    // answer holds (empty when it is not known: a small heap block).
    ObjectKey object_of(const Stream& s, std::uint64_t address, std::pair<std::uint64_t, std::uint64_t>& range) const {
        range = {0, 0};
        if (auto site = heap_map().find(address, &range)) return {ObjectKind::kHeap, *site};
        if (address >= s.stack_low && address < s.stack_high) {
            range = {s.stack_low, s.stack_high};
            return {ObjectKind::kStack, s.tid};
        }
        for (const auto& [id, o] : streams)
            if (address >= o.stack_low && address < o.stack_high) {
                range = {o.stack_low, o.stack_high};
                return {ObjectKind::kStack, o.tid};
            }
        if (static_range)
            if (auto variable = static_range(address)) {
                range = *variable;
                return {ObjectKind::kStatic, variable->first};
            }
        std::uint64_t line = address & ~std::uint64_t(levels[0].geometry.line - 1);
        range = {line, line + levels[0].geometry.line};
        return {ObjectKind::kStatic, line};
    }

    // The object bin of a missing reference. The last answer is kept with
    // the range it holds for: a stream over a large block or a stack misses
    // line after line in one object, and each lookup walked the ordered map
    // of large blocks (or the stacks of every thread). Allocations, frees
    // and stack changes forget it.
    struct ObjectMemo {
        std::uint64_t low = 0, span = 0;  // span 0: nothing kept
        std::uint32_t id = 0;
    };
    ObjectMemo object_memo;
    std::uint32_t object_id_of(const Stream& s, std::uint64_t address) {
        if (address - object_memo.low < object_memo.span) return object_memo.id;
        std::pair<std::uint64_t, std::uint64_t> range;
        ObjectKey key = object_of(s, address, range);
        bool fresh = false;
        std::uint32_t id = object_ids.id(key.id, std::uint64_t(key.kind), fresh);
        if (fresh) {
            object_of_id.push_back(key);
            object_counts.resize(object_counts.size() + levels.size());
        }
        object_memo = {range.first, range.second - range.first, id};
        return id;
    }

    bool in_sampled_sets(std::uint64_t address) const {
        return sample_mask == 0 || sampled[(address >> levels[0].line_shift) & sample_mask];
    }
    // The stream's turn: group g is sampled when g - offset was drawn.
    bool in_sampled_sets(const Stream& s, std::uint64_t address) const {
        return sample_mask == 0 || sampled[((address >> levels[0].line_shift) - s.set_offset) & sample_mask];
    }
    // Where a sampled line's counts go: its group's (the turn's, under rotation).
    BinCounts& group_of(Stream& s, std::uint64_t block) {
        BinCounts& g = rotate_step ? s.turn_groups[block & sample_mask] : set_groups[block & sample_mask];
        if (g.levels.empty()) g.levels.resize(levels.size());
        return g;
    }
    // Closes the stream's turn: its groups' counts join the groups' totals
    // and, as one stratum, the turns.
    void close_turn(Stream& s) {
        std::vector<BinCounts> reached;
        for (std::size_t g = 0; g < s.turn_groups.size(); g++) {
            BinCounts& b = s.turn_groups[g];
            if (b.levels.empty()) continue;
            if (set_groups[g].levels.empty()) set_groups[g].levels.resize(levels.size());
            set_groups[g].add(b);
            reached.push_back(std::move(b));
            b = BinCounts{};
        }
        if (!reached.empty()) set_turns.push_back(std::move(reached));
    }

    // MemSpy 7.3: a fixed random subset of sets. Sets are chosen by the low
    // bits of the line number (at most six: kMaxSetGroups groups), which
    // index the sets of every level alike when all levels share the line
    // size: a chosen line's sets at every level hold chosen lines only, so
    // the hierarchy restricted to them is exact. A random 1/K of the groups
    // is kept (or the groups options.set_groups names); as a 64-bit map over
    // the line number's low six bits it is what the runtime tests inline
    // (SetFilter).
    Result<void> choose_sets(const SimulatorOptions& o) {
        std::uint64_t min_sets = UINT64_MAX;
        for (const auto& g : o.levels) {
            if (g.line != o.levels[0].line)
                return Error("set sampling needs one line size at every level (" + g.name + " has " + std::to_string(g.line) + ")");
            min_sets = std::min(min_sets, g.sets());
        }
        std::uint64_t groups = std::min<std::uint64_t>(min_sets, kMaxSetGroups);
        if (o.set_sample > groups)
            return Error("--sets 1/" + std::to_string(o.set_sample) + " is sparser than the " + std::to_string(groups) +
                         " groups of sets the smallest level allows");
        sample_mask = groups - 1;
        sampled = o.set_groups ? named_groups(o.set_groups, groups) : draw_groups(groups, o.set_sample, o.seed);
        std::uint64_t kept = std::uint64_t(std::count(sampled.begin(), sampled.end(), 1));
        if (kept == 0) return Error("the chosen groups of sets name none of the " + std::to_string(groups) + " groups");
        if (groups % kept == 0) {
            SetFilter f;
            f.shift = levels[0].line_shift;
            for (unsigned bit = 0; bit < 64; bit++)
                if (sampled[bit & sample_mask]) f.bitmap |= 1ull << bit;
            // Turns shift the choice by `kept` groups: drawn one per residue
            // modulo kept, the groups of K turns are every group once.
            if (o.set_rotate_windows && !o.set_groups && kept < groups) {
                if (o.set_warm_windows >= o.set_rotate_windows)
                    return Error("set sampling: " + std::to_string(o.set_warm_windows) + " warming windows in turns of " +
                                 std::to_string(o.set_rotate_windows) + " (warming must be shorter than a turn)");
                rotate_step = kept;
                f.rotate_step = std::uint32_t(kept);
                f.rotate_windows = o.set_rotate_windows;
                f.rotate_warm = o.set_warm_windows;
            }
            filter = f;
        }
        set_groups.assign(groups, BinCounts{});
        totals.set_scale = groups / kept;
        return ok();
    }

    static std::vector<std::uint8_t> named_groups(std::uint64_t map, std::uint64_t groups) {
        std::vector<std::uint8_t> out(groups, 0);
        for (std::uint64_t g = 0; g < groups; g++) out[g] = (map >> g) & 1;
        return out;
    }

    // The high part (group / keep, below `sample`) of each residue's group:
    // every bit of it set in exactly half of the kept groups (random which
    // half), so the choice is balanced along each bit of the line number
    // that it spans, not only along the residue's bits. hashtable's 64
    // groups' L2 local rates differ along bit 5 (the 2 KiB half of a page:
    // 82.3% in groups 0-31 against 83.2% in 32-63, from a full trace), and
    // scored over every choice from its full trace (docs/CACHESIM.md "Which
    // sets, balanced"), the median worst of 5 seeds fell from 0.336 to
    // 0.287 points, the largest error from 0.890 to 0.667. One kept group
    // (nothing to balance): a random high part.
    static std::vector<std::uint64_t> balanced_high_bits(std::uint64_t keep, std::uint64_t sample, std::mt19937_64& rng) {
        std::vector<std::uint64_t> high(keep, 0);
        std::vector<std::uint8_t> half(keep, 0);
        for (std::uint64_t bit = 1; bit < sample; bit <<= 1) {
            std::fill(half.begin(), half.end(), 0);
            if (keep == 1) half[0] = rng() & 1;
            else std::fill_n(half.begin(), keep / 2, 1);
            std::shuffle(half.begin(), half.end(), rng);
            for (std::uint64_t i = 0; i < keep; i++)
                if (half[i]) high[i] |= bit;
        }
        return high;
    }

    // MemSpy 7.3's caveat, non-representative sets: one group drawn from
    // each residue of the group number modulo the number kept (at 1/16, one
    // of groups 0, 4, 8, ..., one of 1, 5, 9, ...), so the chosen lines
    // spread over the line number's lowest bits. Scored against every
    // choice from full traces (bench/cachesim.sh groups, docs/CACHESIM.md
    // "Which sets"): transpose's L2 local error at 1/16 fell from up to 0.78
    // points (any 4 of 64) to 0.016, hashtable's median worst of 5 seeds
    // from 0.51 to 0.35; tree's stayed about 1.0. A K that does not divide
    // the groups keeps any 1/K of them.
    static std::vector<std::uint8_t> draw_groups(std::uint64_t groups, std::uint64_t sample, std::uint64_t seed) {
        std::vector<std::uint8_t> out(groups, 0);
        std::mt19937_64 rng(seed);
        std::uint64_t keep = groups / sample;
        if (groups % sample == 0) {
            auto high = balanced_high_bits(keep, sample, rng);
            for (std::uint64_t residue = 0; residue < keep; residue++) out[high[residue] * keep + residue] = 1;
            return out;
        }
        std::vector<std::uint64_t> order(groups);
        for (std::uint64_t i = 0; i < groups; i++) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        for (std::uint64_t i = 0; i < keep; i++) out[order[i]] = 1;
        return out;
    }

    // A reference that warms the next turn's groups: simulated, not counted.
    void warm_access(Stream& s, const MemRef& ref) {
        s.time++;
        totals.warming++;
        std::uint64_t pending[2] = {ref.address, ref.address + (ref.size ? ref.size - 1 : 0)};
        std::size_t npending = (pending[0] >> levels[0].line_shift) == (pending[1] >> levels[0].line_shift) ? 1 : 2;
        for (std::size_t l = 0; l < levels.size() && npending > 0; l++) {
            std::size_t nmissed = 0;
            std::uint64_t prev_block = UINT64_MAX;
            for (std::size_t i = 0; i < npending; i++) {
                std::uint64_t block = pending[i] >> levels[l].line_shift;
                if (block == prev_block) continue;
                prev_block = block;
                Outcome o = access_block(s, l, block);
                if (o == Outcome::kKnownMiss || o == Outcome::kUnknownMiss) pending[nmissed++] = pending[i];
            }
            npending = nmissed;
        }
    }

    bool plain = false;  // no miss classes: known_recent_hit may settle a reference (of a sampled set)
    bool known_recent_hit(Stream& s, const MemRef& ref);
    void access(Stream& s, const MemRef& ref);
};

CacheSimulator::CacheSimulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CacheSimulator::CacheSimulator(CacheSimulator&&) noexcept = default;
CacheSimulator& CacheSimulator::operator=(CacheSimulator&&) noexcept = default;
CacheSimulator::~CacheSimulator() = default;

Result<CacheSimulator> CacheSimulator::create(SimulatorOptions options) {
    if (options.levels.empty()) return Error("no cache levels to simulate");
    auto impl = std::make_unique<Impl>();
    for (const auto& g : options.levels) {
        ECPI_RETURN_IF_ERROR(check_geometry(g));
        Level l;
        l.geometry = g;
        l.line_shift = unsigned(std::countr_zero(g.line));
        l.set_mask = g.sets() - 1;
        l.ways = g.ways;
        impl->levels.push_back(l);
    }
    if (options.set_sample > 1 || options.set_groups) ECPI_RETURN_IF_ERROR(impl->choose_sets(options));
    impl->totals.counts.levels.resize(options.levels.size());
    impl->plain = !options.classes;
    impl->options = std::move(options);
    return CacheSimulator(std::move(impl));
}

void CacheSimulator::begin_stream(std::uint32_t stream, std::uint32_t tid) { impl_->stream(stream).tid = tid; }

void CacheSimulator::set_stack(std::uint32_t stream, std::uint64_t low, std::uint64_t high) {
    auto& s = impl_->stream(stream);
    s.stack_low = low;
    s.stack_high = high;
    impl_->object_memo = {};
}

void CacheSimulator::begin_window(std::uint32_t stream, std::uint64_t skipped) {
    auto& s = impl_->stream(stream);
    impl_->close_window(s);
    impl_->totals.events += skipped;
    if (skipped > 0) s.exact = false;
    s.window++;
    s.in_window = true;
    impl_->totals.windows++;
}

void CacheSimulator::rotate_sets(std::uint32_t stream, std::uint64_t window) {
    auto& I = *impl_;
    if (!I.rotate_step) return;
    auto& s = I.stream(stream);
    std::uint64_t turn = window / I.options.set_rotate_windows;
    if (turn != s.turn) {
        I.close_turn(s);
        s.turn = turn;
        s.set_offset = (turn * I.rotate_step) & I.sample_mask;
        s.next_offset = ((turn + 1) * I.rotate_step) & I.sample_mask;
    }
    s.warming = window % I.options.set_rotate_windows + I.options.set_warm_windows >= I.options.set_rotate_windows;
}

std::uint64_t SetFilter::bitmap_at(std::uint64_t window) const {
    return ecpi_rt_set_bitmap_at(bitmap, rotate_step, rotate_windows, rotate_warm, window);
}

void CacheSimulator::end_stream(std::uint32_t stream, std::uint64_t skipped) {
    auto& s = impl_->stream(stream);
    impl_->close_window(s);
    if (impl_->rotate_step) impl_->close_turn(s);
    impl_->totals.events += skipped;
}

void CacheSimulator::count_settled_hits(std::uint32_t stream, std::uint64_t hits) {
    impl_->stream(stream);
    auto& t = impl_->totals;
    t.events += hits;
    t.simulated += hits;
    t.settled_hits += hits;
    t.counts.levels[0].references += hits;
}

void CacheSimulator::access(std::uint32_t stream, const MemRef& ref) {
    auto& s = impl_->stream(stream);
    if (!s.in_window) begin_window(stream, 0);
    impl_->access(s, ref);
}

// The common reference, settled before the general path: one line that
// the previous reference to its L1 set already touched in this window (a
// known hit in the most recent way), with no miss classes asked for (under
// set sampling, of a sampled set, counted in its group too). Nothing moves; only the counts of references grow.
// Most of SQLite's references are these, and the general path's loop over
// levels and pending lines cost them as much as a miss (docs/CACHESIM.md).
bool CacheSimulator::Impl::known_recent_hit(Stream& s, const MemRef& ref) {
    const Level& L = levels[0];
    const std::uint64_t block = ref.address >> L.line_shift;
    if (((ref.address + (ref.size ? ref.size - 1 : 0)) >> L.line_shift) != block) return false;
    Way& way = s.levels[0].ways[(block & L.set_mask) * L.ways];
    if (way.block != block + 1) return false;
    if (!s.exact && way.stamp != s.window) return false;
    s.time++;
    way.last_time = s.time;
    totals.counts.levels[0].references++;
    s.window_counts.levels[0].references++;
    if (sample_mask != 0) group_of(s, block).levels[0].references++;
    count_recent_hit(ref.pc);
    return true;
}

void CacheSimulator::Impl::access(Stream& s, const MemRef& ref) {
    totals.events++;
    totals.simulated++;
    if (!in_sampled_sets(s, ref.address)) {
        if (s.warming && sampled[((ref.address >> levels[0].line_shift) - s.next_offset) & sample_mask]) warm_access(s, ref);
        return;
    }
    if (plain && known_recent_hit(s, ref)) return;
    s.time++;
    LevelCounts* pc_levels = pc_bin(ref.pc);
    BinCounts* group = sample_mask != 0 ? &group_of(s, ref.address >> levels[0].line_shift) : nullptr;
    // The bytes this reference needs from the current level: one or two
    // lines of the first level; after a miss, the missed blocks.
    std::uint64_t first = ref.address, last = ref.address + (ref.size ? ref.size - 1 : 0);
    std::uint64_t pending[2] = {first, last};
    std::size_t npending = (first >> levels[0].line_shift) == (last >> levels[0].line_shift) ? 1 : 2;
    constexpr std::uint32_t kNoObject = UINT32_MAX;
    std::uint32_t object = kNoObject;
    for (std::size_t l = 0; l < levels.size() && npending > 0; l++) {
        const Level& L = levels[l];
        Outcome worst = Outcome::kKnownHit;
        std::uint64_t missed[2];
        std::size_t nmissed = 0;
        std::uint64_t prev_block = UINT64_MAX;
        for (std::size_t i = 0; i < npending; i++) {
            std::uint64_t block = pending[i] >> L.line_shift;
            if (block == prev_block) continue;  // both bytes in one block of this (larger) line
            prev_block = block;
            Outcome o = access_block(s, l, block);
            if (o == Outcome::kKnownMiss || o == Outcome::kUnknownMiss) missed[nmissed++] = pending[i];
            worst = std::max(worst, o);
            if (options.classes) {
                auto [first_ref, fa_miss] = s.levels[l].shadow.access(block);
                if (o == Outcome::kKnownMiss || o == Outcome::kUnknownMiss) {
                    if (first_ref) totals.counts.levels[l].compulsory++;
                    else if (fa_miss) totals.counts.levels[l].capacity++;
                }
            }
        }
        count(totals.counts.levels[l], worst);
        count(s.window_counts.levels[l], worst);
        if (group) count(group->levels[l], worst);
        if (binned(l)) {
            count(pc_levels[l], worst);
            if (worst != Outcome::kKnownHit) {
                if (object == kNoObject) object = object_id_of(s, ref.address);
                count(object_counts[std::size_t(object) * levels.size() + l], worst);
            }
        }
        for (std::size_t i = 0; i < nmissed; i++) pending[i] = missed[i];
        npending = nmissed;
    }
}

void CacheSimulator::allocate(const HeapAllocation& a) {
    if (a.size == 0) return;
    if (!impl_->read_heap) {
        impl_->heap.insert(Allocation{a.address, a.address + a.size, a.site});
        impl_->heap_updates++;
    }
    impl_->object_memo = {};
    auto& site = impl_->sites[a.site];
    site.allocations++;
    site.bytes += a.size;
    site.allocator = a.allocator;
}

void CacheSimulator::release(std::uint64_t address) {
    if (!impl_->read_heap) {
        impl_->heap.remove(address);
        impl_->heap_updates++;
    }
    impl_->object_memo = {};
}

void CacheSimulator::read_heap_of(const CacheSimulator& keeper) {
    if (&keeper == this) return;
    impl_->read_heap = &keeper.impl_->heap_map();
    impl_->heap = HeapMap{};
    impl_->object_memo = {};
}

void CacheSimulator::key_statics_by(StaticObjectRange range_of) {
    impl_->static_range = std::move(range_of);
    impl_->object_memo = {};
}

std::uint64_t CacheSimulator::heap_updates() const { return impl_->heap_updates; }

const CacheSimulator::Totals& CacheSimulator::totals() const { return impl_->totals; }
const std::vector<BinCounts>& CacheSimulator::windows() const { return impl_->windows; }
const std::vector<BinCounts>& CacheSimulator::set_groups() const { return impl_->set_groups; }
const std::vector<std::vector<BinCounts>>& CacheSimulator::set_turns() const { return impl_->set_turns; }
bool CacheSimulator::in_sampled_sets(std::uint64_t address) const { return impl_->in_sampled_sets(address); }
std::optional<SetFilter> CacheSimulator::set_filter() const { return impl_->filter; }

namespace {

// A view keyed as the caller's map, from dense ids' keys and their counts
// at [id * levels + level].
template <class View, class Key>
const View& fill_view(View& view, const std::vector<Key>& keys, const std::vector<LevelCounts>& counts, std::size_t levels) {
    view.clear();
    for (std::size_t id = 0; id < keys.size(); id++) {
        BinCounts b;
        b.levels.assign(counts.begin() + std::ptrdiff_t(id * levels), counts.begin() + std::ptrdiff_t((id + 1) * levels));
        view.emplace(keys[id], std::move(b));
    }
    return view;
}

}  // namespace

const std::unordered_map<std::uint64_t, BinCounts>& CacheSimulator::by_pc() const {
    impl_->flush_all_recent_hits();
    return fill_view(impl_->pcs_view, impl_->pc_of_id, impl_->pc_counts, impl_->levels.size());
}
const std::map<CacheSimulator::ObjectKey, BinCounts>& CacheSimulator::by_object() const {
    return fill_view(impl_->objects_view, impl_->object_of_id, impl_->object_counts, impl_->levels.size());
}
const std::map<std::uint64_t, CacheSimulator::SiteInfo>& CacheSimulator::sites() const { return impl_->sites; }
const SimulatorOptions& CacheSimulator::options() const { return impl_->options; }

std::optional<double> CacheSimulator::wood_alpha(std::size_t level) const {
    const Level& L = impl_->levels.at(level);
    if (L.generation_time <= 0) return std::nullopt;
    return L.dead_time / L.generation_time;
}

// ---------------------------------------------------------------- estimates

double estimated_misses(const LevelCounts& c, UnknownEstimate e, double wood_alpha) {
    double known = double(c.known_misses), u = double(c.unknown);
    switch (e) {
    case UnknownEstimate::kStale: return known + double(c.unknown_stale_misses);
    case UnknownEstimate::kHalf: return known + 0.5 * u;
    case UnknownEstimate::kWood: return known + wood_alpha * u;
    case UnknownEstimate::kMiss: return known + u;
    case UnknownEstimate::kHit: return known;
    }
    return known;
}

namespace {

// The standard error of the ratio estimator sum(m_i) / sum(n_i) over
// samples i (windows, set groups) that hold `fraction` of the population;
// nullopt with fewer than two samples that reached the level.
std::optional<double> ratio_standard_error(const std::vector<BinCounts>& samples, std::size_t level, UnknownEstimate e,
                                           double alpha, double fraction) {
    std::size_t k = 0;
    double sum_n = 0, sum_m = 0;
    for (const auto& w : samples) {
        if (w.levels.size() <= level || w.levels[level].references == 0) continue;
        k++;
        sum_n += double(w.levels[level].references);
        sum_m += estimated_misses(w.levels[level], e, alpha);
    }
    if (k < 2 || sum_n <= 0) return std::nullopt;
    double ratio = sum_m / sum_n, ss = 0;
    for (const auto& w : samples) {
        if (w.levels.size() <= level || w.levels[level].references == 0) continue;
        double d = estimated_misses(w.levels[level], e, alpha) - ratio * double(w.levels[level].references);
        ss += d * d;
    }
    double mean_n = sum_n / double(k);
    return std::sqrt(ss / double(k - 1) / double(k)) / mean_n * std::sqrt(std::max(0.0, 1.0 - fraction));
}

// The standard error of the same ratio estimator under rotating set
// sampling: the samples are each turn's groups, a stratified sample (each
// turn one stratum, its groups `fraction` of that turn's groups), so only
// the spread between the groups within a turn counts, not the turns'
// differences in time (a phase with more misses is in every estimate
// alike). Linearized: Var = (1 - f) sum over turns of n_t s_t^2, over
// (sum n)^2, s_t^2 the variance of m_i - R n_i within turn t. `df`: the
// degrees of freedom, sum of (n_t - 1); nullopt when none.
std::optional<double> stratified_ratio_standard_error(const std::vector<std::vector<BinCounts>>& turns, std::size_t level, UnknownEstimate e,
                                                      double alpha, double fraction, std::size_t& df) {
    auto reaches = [level](const BinCounts& b) { return b.levels.size() > level && b.levels[level].references > 0; };
    double sum_n = 0, sum_m = 0;
    for (const auto& turn : turns)
        for (const auto& b : turn)
            if (reaches(b)) {
                sum_n += double(b.levels[level].references);
                sum_m += estimated_misses(b.levels[level], e, alpha);
            }
    df = 0;
    if (sum_n <= 0) return std::nullopt;
    double ratio = sum_m / sum_n, var = 0;
    for (const auto& turn : turns) {
        std::vector<double> d;
        for (const auto& b : turn)
            if (reaches(b)) d.push_back(estimated_misses(b.levels[level], e, alpha) - ratio * double(b.levels[level].references));
        if (d.size() < 2) continue;
        double mean = 0, ss = 0;
        for (double x : d) mean += x / double(d.size());
        for (double x : d) ss += (x - mean) * (x - mean);
        var += double(d.size()) * ss / double(d.size() - 1);
        df += d.size() - 1;
    }
    if (df == 0) return std::nullopt;
    return std::sqrt(std::max(0.0, 1.0 - fraction) * var) / sum_n;
}

std::size_t samples_reaching(const std::vector<BinCounts>& samples, std::size_t level) {
    std::size_t k = 0;
    for (const auto& w : samples) k += w.levels.size() > level && w.levels[level].references > 0;
    return k;
}

}  // namespace

// The two-sided 95% quantile of Student's t with `df` degrees of freedom
// (1.96 from 30 on; df 0 gives the df-1 value, unused: one sample has no spread).
double student_t95(std::size_t df) {
    static constexpr double kT[] = {12.71, 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
                                    2.12,  2.11,  2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05};
    return df < std::size(kT) ? kT[df] : 1.96;
}

void widen_to_bounds(MissRateEstimate& r) {
    double se = std::isnan(r.sampling_error) ? 1.0 : r.sampling_error;
    r.low = std::clamp(std::min(r.unknown_low, r.rate) - se, 0.0, 1.0);
    r.high = std::clamp(std::max(r.unknown_high, r.rate) + se, 0.0, 1.0);
    r.bound = std::max(r.rate - r.low, r.high - r.rate);
}

MissRateEstimate estimate_miss_rate(const CacheSimulator& sim, std::size_t level, UnknownEstimate e) {
    MissRateEstimate r;
    const auto& t = sim.totals();
    const LevelCounts& c = t.counts.levels.at(level);
    double alpha = sim.wood_alpha(level).value_or(0.5);
    double first_refs = double(t.counts.levels.at(0).references);
    if (c.references == 0) return r;
    double refs = double(c.references);
    double misses = estimated_misses(c, e, alpha);
    r.rate = misses / refs;
    r.global_rate = first_refs > 0 ? misses / first_refs : 0;
    r.unknown_low = double(c.known_misses) / refs;
    r.unknown_high = double(c.known_misses + c.unknown) / refs;
    // MemSpy 6.1: windows as samples; MemSpy 7.3: the chosen set groups
    // as samples of all groups. Each gives the standard error of a ratio
    // estimator with its finite-population correction; the two choices are
    // independent, so their variances add.
    double time_fraction = t.events ? double(t.simulated) / double(t.events) : 1.0;
    double set_fraction = 1.0 / double(t.set_scale);
    std::optional<double> time_se = 0, set_se = 0;
    if (time_fraction < 1.0) time_se = ratio_standard_error(sim.windows(), level, e, alpha, time_fraction);
    // The sampled groups of sets are few (4 of 64 at 1/16): their spread
    // is widened by Student's t for their count rather than 1.96; under
    // rotation, for the degrees of freedom of the spread within turns.
    double set_z = 1.96;
    if (set_fraction < 1.0 && !sim.set_turns().empty()) {
        std::size_t df = 0;
        set_se = stratified_ratio_standard_error(sim.set_turns(), level, e, alpha, set_fraction, df);
        set_z = student_t95(df);
    } else if (set_fraction < 1.0) {
        set_se = ratio_standard_error(sim.set_groups(), level, e, alpha, set_fraction);
        set_z = student_t95(samples_reaching(sim.set_groups(), level) - 1);
    }
    r.set_spread = set_se ? set_z * *set_se : std::nan("");
    if (time_se && set_se) {
        if (time_fraction < 1.0 || set_fraction < 1.0) r.sampling_error = std::hypot(1.96 * *time_se, set_z * *set_se);
    } else {
        r.sampling_error = std::nan("");  // one window or one set group: the sampling error cannot be estimated
    }
    widen_to_bounds(r);
    return r;
}

}  // namespace ecpi::analyze
