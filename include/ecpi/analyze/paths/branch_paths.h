// Acyclic branch paths from sequences of timed block entries (variational
// path profiling, VPP 4; Ball and Larus's path definition).
//
// A path starts at a procedure entry, at a loop header reached by a back
// edge, or where a procedure continues after a callee returned; it ends at
// a back edge, a call (into code whose blocks are seen) or a return. Its
// signature is the procedure, its start and the blocks it entered (with the
// branch decisions they imply). The time of an occurrence is the time stamp
// of the next path's first block minus its own first block's, less the
// recording's own cost per block entry.
//
// Blocks come from the image's own CFG (analyze/calc/cfg.h) and loops
// (analyze/calc/loops.h). The cutter sees the blocks whose entries were recorded:
// with the instrumented source, the machine blocks holding a call to
// __sanitizer_cov_trace_pc_guard (clang's IR blocks; the machine code may
// have a few more); with LBR, every block between two taken branches.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "ecpi/analyze/calc/cfg.h"
#include "ecpi/analyze/calc/loops.h"
#include "ecpi/analyze/paths/span_fit.h"
#include "ecpi/result.h"
#include "ecpi/store/branch_paths.h"
#include "ecpi_rt_abi.h"

namespace ecpi::analyze {

inline constexpr std::uint32_t kNoBlock = 0xffffffffu;

// One procedure as the path cutter sees it.
struct PathProcedure {
    std::string name;
    std::uint64_t start = 0, end = 0;
    std::vector<std::uint64_t> block_starts;              // sorted; block 0 is the entry
    std::vector<std::vector<std::uint32_t>> successors;   // per block, within the procedure
    std::vector<std::vector<std::uint32_t>> loop_headers;  // per block: headers of the loops holding it
    std::vector<std::uint32_t> taken;                     // per block ending in a conditional jump: its taken successor
    std::vector<std::uint32_t> fall_through;              // per block ending in a conditional jump: the other one
    std::vector<bool> recorded;                           // per block: its entries are seen

    std::uint32_t block_at(std::uint64_t address) const;  // kNoBlock outside
    bool is_back_edge(std::uint32_t from, std::uint32_t to) const;
    // Whether `to` follows `from` through blocks whose entries are not seen
    // (remembered: an inline build's blocks are often apart by unseen ones).
    bool follows(std::uint32_t from, std::uint32_t to) const;
    mutable std::map<std::uint64_t, bool> follows_seen;
};

// Builds it from a CFG; `is_recorded(block)` says which blocks' entries the
// source sees.
PathProcedure path_procedure(const Cfg& cfg, const LoopInfo& loops, std::string name,
                             const std::function<bool(std::uint32_t)>& is_recorded);

// Procedures of one image by address, built on first use.
class PathCodeMap {
public:
    virtual ~PathCodeMap() = default;
    // The procedure holding `address` (an ELF virtual address), or nullptr.
    virtual const PathProcedure* procedure_at(std::uint64_t address) = 0;
};

enum class BlockSource {
    kInstrumented,  // blocks calling __sanitizer_cov_trace_pc_guard, or logging inline (`lea r, [rip]`), are seen
    kEveryBlock,    // every block is seen (LBR reconstruction)
};

// An ELF image's procedures from its symbols and code.
[[nodiscard]] Result<std::unique_ptr<PathCodeMap>> open_path_code_map(const std::filesystem::path& image,
                                                                      BlockSource source);

// Cuts block-entry streams (one per thread) into path occurrences and
// aggregates them by signature.
class PathCutter {
public:
    PathCutter(PathCodeMap& code, double block_cost_ticks);
    ~PathCutter();
    PathCutter(const PathCutter&) = delete;
    PathCutter& operator=(const PathCutter&) = delete;
    // The recording's cost per block entry, when the runtime measured it
    // after the cutter was made (before the first entry is fed).
    void set_block_cost(double ticks) { block_cost_ticks_ = ticks; }
    // A new burst of consecutive entries begins (or an LBR stack): whatever
    // was open is incomplete and dropped.
    void begin_burst(std::uint32_t thread);
    // The stream stops being consecutive (a thread begins or ends): the
    // open path is incomplete and dropped.
    void interrupt(std::uint32_t thread);
    // The recorder spent `ticks` of its own after the last entry's stamp
    // (copying its records out): taken out of the open path's time.
    void pause(std::uint32_t thread, std::uint64_t ticks);
    // The entry of the block holding `address` at time `ticks`.
    void block(std::uint32_t thread, std::uint64_t address, std::uint64_t ticks);
    // A span (runtime/rt_spans.c): its start stamp, then `context` block
    // entries before it, its own entries and the entry that ended it
    // (span_block, untimed), then its end stamp. The paths wholly inside
    // it are counted for the fit (span_fit.h); finish() fits them.
    // `blocks`: the block entries the span's SPAN record says it timed
    // (kAnySpanLength: not checked); a span whose entries do not add up
    // lost records on the way and is not fitted.
    static constexpr std::uint64_t kAnySpanLength = ~std::uint64_t{0};
    void begin_span(std::uint32_t thread, std::uint64_t context, std::uint64_t start_ticks,
                    std::uint64_t blocks = kAnySpanLength);
    void span_block(std::uint32_t thread, std::uint64_t address);
    void end_span(std::uint32_t thread, std::uint64_t end_ticks);
    // Records a thread's runtime wrote that never reached the decoder (its
    // END record counts them): noted in the profile.
    void lost_records(std::uint64_t n) { records_lost_ += n; }
    // A thread's ring began (THREAD) or ended (END): a ring that never
    // ended lost its last records (the thread ran at exit, or was killed).
    void ring_began() { rings_begun_++; }
    void ring_ended() { rings_ended_++; }
    // A sample of the program's pc (an ELF virtual address of the image),
    // taken by a clock with no stamp or fence in the program: finish()
    // splits a regular mix's fitted total by these (pc_sample_split).
    void pc_sample(std::uint64_t address) { pc_samples_[address]++; }
    // Moves the aggregated paths and counts into `profile`.
    void finish(store::BranchPathProfile& profile);

private:
    struct Thread;
    enum class Cut { kNone, kEntry, kLoop, kReturn };
    using Key = std::tuple<std::uint64_t, int, std::vector<std::uint64_t>>;  // procedure, start kind, blocks
    // A path already seen, found by a hash of its procedure, start and
    // blocks: a path closes every few block entries, and building its Key
    // (two allocations) and searching two ordered maps of such keys was
    // most of the reader's work per entry, so that at --sample 1/10 ecpi
    // fell behind a program that logs every block (docs/PATHS.md).
    struct KnownPath {
        std::uint64_t procedure = 0;
        int start_kind = 0;
        std::vector<std::uint32_t> blocks;
        store::BranchPath* path = nullptr;
        std::uint32_t span_id = kNoSpanId;
    };
    static constexpr std::uint32_t kNoSpanId = 0xffffffffu;
    // What an entry at `address` means after one at `from` in `from_proc`:
    // its procedure and block, and classify's cut by every rule but the
    // last (a block already on the open path, which reads the path). A
    // loop's few transitions come again and again, and looking each entry
    // up anew (procedure, block by binary search, back edges, successors)
    // was most of the reader's work per entry: ecpi's reader took as much
    // CPU as the program it recorded (docs/PATHS.md).
    struct Step {
        const PathProcedure* from_proc = nullptr;  // nullptr: the slot holds nothing
        std::uint64_t from = 0, address = 0;
        const PathProcedure* proc = nullptr;
        std::uint32_t block = 0;
        Cut cut = Cut::kNone;
        bool last_rule = false;  // no rule but the last cuts: a block already on the open path does
    };
    static constexpr std::size_t kStepSlots = 1024;  // a power of two
    Thread& thread(std::uint32_t id);
    const Step& step(const Thread& t, std::uint64_t address);
    Cut classify_step(const Thread& t, const PathProcedure& proc, std::uint32_t block, std::uint64_t address,
                      bool* last_rule) const;
    KnownPath& known_path(Thread& t, Cut cut);
    void close_path(Thread& t, std::uint64_t ticks, Cut cut);
    void drop_open(Thread& t);
    store::BranchPath& path_of(Thread& t, Cut cut, std::uint32_t* id);
    store::BranchPath& new_path(Thread& t, Cut cut);
    void fit_spans(store::BranchPathProfile& profile);
    SampleSplit pc_sample_split(std::uint64_t* samples);
    std::uint64_t recorded_block_of(std::uint64_t address);

    PathCodeMap& code_;
    double block_cost_ticks_;
    std::map<std::uint64_t, std::uint64_t> pc_samples_;  // pc_sample: by address
    // Per procedure, per machine block: the recorded block whose entry
    // leads to it through unrecorded ones (kNoBlock: none, or several).
    std::map<const PathProcedure*, std::vector<std::uint32_t>> recorded_owner_;
    std::map<std::uint32_t, std::unique_ptr<Thread>> threads_;
    std::uint32_t last_thread_id_ = 0;
    Thread* last_thread_ = nullptr;  // threads_[last_thread_id_]: records come in runs of one ring's
    std::vector<Step> steps_ = std::vector<Step>(kStepSlots);  // by a hash of (from, address)
    std::unordered_map<std::uint64_t, std::vector<KnownPath>> known_;  // by path_hash
    std::map<Key, store::BranchPath> paths_;
    std::vector<store::BranchPath*> span_paths_;
    std::vector<SpanCounts> spans_;
    std::uint64_t spans_rejected_ = 0;  // spans with an entry outside the image
    std::uint64_t rings_begun_ = 0, rings_ended_ = 0;
    std::uint64_t records_lost_ = 0;    // written by the runtime, never decoded (END's count)
    std::uint64_t spans_broken_ = 0;    // spans whose entries do not add up to their SPAN record's count
    std::uint64_t bursts_ = 0, blocks_ = 0, outside_ = 0, at_edges_ = 0, occurrences_ = 0;
};

struct LbrSample;

// Feeds one last-branch-record stack (perf_script.h) to a cutter as a burst
// of block entries: consecutive records are a straight run from one's
// target to the next's source, taking the later record's cycles. The block
// holding a target is entered at the cycle count of its taken branch
// (exact); blocks a run falls through into get times interpolated by their
// address within the run (an estimate). Addresses are the sample's minus
// `bias`. A run whose record has no cycle count (an interrupt's return) or
// that is not straight breaks the stream; a repeated newest record (Skylake
// writes some twice) counts once. Returns false (and feeds nothing) when no
// record has a cycle count.
bool feed_lbr_sample(PathCutter& cutter, PathCodeMap& code, const LbrSample& sample, std::uint64_t bias,
                     std::uint32_t stream);

// Feeds the records of a paths run (runtime/ecpi_rt_abi.h: WINDOW begins a
// burst, BLOCK is one block entry, SPAN ... SPAN_END a span) to a cutter, one stream per ring. Block
// addresses are the callbacks' return addresses in the running program;
// those in the image's mapping [start, end) become ELF addresses (minus
// `bias`), the others count as outside the image.
class PathRecordDecoder {
public:
    explicit PathRecordDecoder(PathCutter& cutter) : cutter_(cutter) {}
    void set_image(std::uint64_t start, std::uint64_t end, std::uint64_t bias);
    [[nodiscard]] Result<void> feed(std::uint32_t ring, std::span<const ecpi_rt_record> records);

private:
    PathCutter& cutter_;
    std::uint64_t start_ = 0, end_ = 0, bias_ = 0;
    std::map<std::uint32_t, std::uint64_t> fed_;  // ring -> records decoded, to check its END's count
    // ring -> the last span entry's address as written (SPAN_DELTA16/28 count from it)
    std::map<std::uint32_t, std::uint64_t> last_entry_;

    void span_entry(std::uint32_t ring, std::uint64_t written, std::uint64_t& last);
    void span_deltas(std::uint32_t ring, const ecpi_rt_record& r, unsigned kind, std::uint64_t& last);
};

}  // namespace ecpi::analyze
