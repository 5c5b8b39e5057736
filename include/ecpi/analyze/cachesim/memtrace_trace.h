// Memory-reference traces for the cache simulator: the runtime's ring
// records (runtime/ecpi_rt_abi.h), valgrind lackey's --trace-mem=yes text,
// and ecpi's binary trace file (docs/CACHESIM.md, "Binary trace format").
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/analyze/cachesim/set_sampling.h"
#include "ecpi/result.h"
#include "ecpi_rt_abi.h"

namespace ecpi::analyze {

// Where a traced program's code and data were loaded (for symbols).
struct TraceModule {
    std::string path;
    std::uint64_t base = 0;    // load bias (runtime address - ELF address)
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    bool bias_known = true;    // false: `start` maps file offset 0; the bias comes from the ELF
};

// Decodes runtime records into simulator calls, one state per stream
// (ring). Rejects unknown record kinds and broken pairs by name.
// Combined sampling (MemSpy 7.3): `sets`, when given, is a simulator under
// set sampling that gets every reference to its sampled sets (in a window,
// or a MEMREF_SET record outside one) as one unbroken stream, and the
// streams', heap's and threads' events; `sim` gets the windows as before.
// Where the sampled sets rotate, each WINDOW record turns both the
// decoder's filter and `sets` to that window's turn, as the runtime did.
class RecordDecoder {
public:
    // `sets` reads `sim`'s heap map (CacheSimulator::read_heap_of): the
    // decoder gives `sim` every heap event first.
    explicit RecordDecoder(CacheSimulator& sim, CacheSimulator* sets = nullptr)
        : sim_(sim), sets_(sets), sets_filter_(sets ? sets->set_filter() : std::nullopt) {
        if (sets_) sets_->read_heap_of(sim_);
    }
    Result<void> feed(std::uint32_t stream, std::span<const ecpi_rt_record> records);
    std::uint64_t allocations() const { return allocations_; }
    // Streams that began but never sent END (the program died, or _exit).
    std::vector<std::uint32_t> unfinished() const;

private:
    struct StreamState {
        bool begun = false;
        bool ended = false;
        bool have_first = false;      // the first half of a two-record event
        ecpi_rt_record first{};
        std::uint64_t set_bitmap = 0; // the sampled sets' filter now (it rotates at windows)
    };
    Result<void> reference(std::uint32_t stream, const StreamState& st, const ecpi_rt_record& r, bool in_window);
    CacheSimulator& sim_;
    CacheSimulator* sets_;
    // The sampled sets as address bits, tested inline per reference (the
    // simulator's own test is a call per reference: 11% of crc's samples
    // at the default settings); nullopt: ask sets_.
    std::optional<SetFilter> sets_filter_;
    std::unordered_map<std::uint32_t, StreamState> streams_;
    std::uint64_t allocations_ = 0;
};

// valgrind lackey's --trace-mem=yes text: "I  addr,size" (an instruction:
// the pc of the data references after it), " L addr,size", " S addr,size",
// " M addr,size" (modify: one reference, counted as a write, as cachegrind
// counts it). Lines of valgrind's own ("==pid== ...") are skipped. One
// stream (lackey does not say which thread ran).
class LackeyParser {
public:
    explicit LackeyParser(CacheSimulator& sim) : sim_(sim) {}
    Result<void> feed(std::string_view text);  // any chunking
    Result<void> finish();
    std::uint64_t lines() const { return lines_; }

private:
    Result<void> line(std::string_view l);
    CacheSimulator& sim_;
    std::string partial_;
    std::uint64_t pc_ = 0;
    std::uint64_t lines_ = 0;
    bool started_ = false;
};

// How a trace was sampled (version 2 of the binary trace): the options that
// decide which references it holds, and the set filter the runtime applied
// outside windows. A replay takes them for the options it is not given, and
// refuses to run when its own sets differ from `filter` (a trace under
// combined sampling holds only its sampled sets' references).
struct TraceSampling {
    std::uint64_t sample = 1;           // N of --sample 1/N
    std::uint64_t window = 0;           // --window
    std::uint64_t seed = 0;             // --seed
    std::uint32_t sets = 0;             // K of --sets 1/K; 0: auto
    std::string set_levels = "auto";    // --set-levels
    SetTurns set_turns;                 // --set-turns
    std::vector<CacheGeometry> caches;  // --cache, in order; empty: not recorded (too long)
    std::optional<SetFilter> filter;    // nullopt: no set sampling outside windows
};
// "NAME=SIZE:WAYS:LINE" with SIZE in bytes (what parse_cache_geometry reads back).
std::string cache_geometry_text(const CacheGeometry& g);
// "--sample 1/10 --window 10000 --seed 5 --sets 1/16 --set-levels auto
// --set-turns off --cache L1d=49152:12:64 ...": the options to repeat.
std::string trace_sampling_text(const TraceSampling& s);

// ecpi's binary trace: a header with the module table (and from version 2
// how the trace was sampled), then the runtime's 16-byte records with stream
// switches. Version 2; version 1 files are read too.
inline constexpr char kTraceMagic[8] = {'E', 'C', 'P', 'I', 'T', 'R', 'C', '\0'};
inline constexpr std::uint32_t kTraceVersion = 2;
inline constexpr std::uint32_t kTraceRecStream = 32;  // w0: kind | stream id

class TraceWriter {
public:
    static Result<TraceWriter> create(const std::filesystem::path& path);
    TraceWriter(TraceWriter&&) noexcept;
    TraceWriter& operator=(TraceWriter&&) noexcept;
    ~TraceWriter();
    Result<void> write(std::uint32_t stream, std::span<const ecpi_rt_record> records);
    // Writes the module table and the sampling into the header and closes the file.
    Result<void> finish(const std::vector<TraceModule>& modules, const TraceSampling& sampling);

private:
    TraceWriter() = default;
    std::FILE* file_ = nullptr;
    std::filesystem::path path_;
    std::uint32_t stream_ = UINT32_MAX;
};

// Reads a saved trace (binary or lackey text, told apart by the magic) into
// the simulator. Returns the modules the trace names.
struct TraceFileInfo {
    std::string format;               // "ecpi" or "lackey"
    std::vector<TraceModule> modules;
};
Result<TraceFileInfo> read_trace_file(const std::filesystem::path& path, CacheSimulator& sim, CacheSimulator* sets = nullptr);
// The sampling a binary trace recorded; nullopt for a version 1 trace or
// lackey text (nothing recorded).
Result<std::optional<TraceSampling>> read_trace_sampling(const std::filesystem::path& path);

}  // namespace ecpi::analyze
