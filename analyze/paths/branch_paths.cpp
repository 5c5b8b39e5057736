// Acyclic branch paths from timed block entries. See branch_paths.h.
#include "ecpi/analyze/paths/branch_paths.h"

#include <algorithm>
#include <cmath>

#include "ecpi/analyze/paths/perf_script.h"
#include "ecpi/analyze/symbols/symbolizer.h"

namespace ecpi::analyze {

// ------------------------------------------------------------ PathProcedure

std::uint32_t PathProcedure::block_at(std::uint64_t address) const {
    if (address < start || address >= end || block_starts.empty()) return kNoBlock;
    auto it = std::upper_bound(block_starts.begin(), block_starts.end(), address);
    if (it == block_starts.begin()) return kNoBlock;
    return static_cast<std::uint32_t>(it - block_starts.begin() - 1);
}

bool PathProcedure::is_back_edge(std::uint32_t from, std::uint32_t to) const {
    // Inside a natural loop the header is entered only by a back edge.
    const auto& headers = loop_headers[from];
    return std::find(headers.begin(), headers.end(), to) != headers.end();
}

bool PathProcedure::follows(std::uint32_t from, std::uint32_t to) const {
    const auto& direct = successors[from];
    if (std::find(direct.begin(), direct.end(), to) != direct.end()) return true;
    const std::uint64_t key = std::uint64_t(from) << 32 | to;
    if (auto it = follows_seen.find(key); it != follows_seen.end()) return it->second;
    // Breadth-first through blocks whose entries are not seen: the machine
    // code may hold blocks the IR (and so the callbacks) did not.
    bool found = false;
    std::vector<std::uint32_t> work{from};
    std::vector<bool> seen(block_starts.size(), false);
    seen[from] = true;
    while (!work.empty()) {
        std::uint32_t b = work.back();
        work.pop_back();
        for (std::uint32_t s : successors[b]) {
            if (s == to) found = true;
            if (found) break;
            if (seen[s] || recorded[s]) continue;
            seen[s] = true;
            work.push_back(s);
        }
        if (found) break;
    }
    follows_seen[key] = found;
    return found;
}

PathProcedure path_procedure(const Cfg& cfg, const LoopInfo& loops, std::string name,
                             const std::function<bool(std::uint32_t)>& is_recorded) {
    PathProcedure p;
    p.name = std::move(name);
    p.start = cfg.start;
    p.end = cfg.end;
    const auto n = static_cast<std::uint32_t>(cfg.blocks.size());
    p.successors.resize(n);
    p.loop_headers.resize(n);
    p.taken.assign(n, kNoBlock);
    p.fall_through.assign(n, kNoBlock);
    p.recorded.resize(n);
    for (std::uint32_t b = 0; b < n; b++) {
        p.block_starts.push_back(cfg.instructions[cfg.blocks[b].first].address);
        p.recorded[b] = is_recorded(b);
    }
    for (const auto& e : cfg.edges) {
        if (e.from >= n || e.to >= n) continue;
        p.successors[e.from].push_back(e.to);
        if (e.kind == EdgeKind::kBranch) p.taken[e.from] = e.to;
        if (e.kind == EdgeKind::kFallThrough) p.fall_through[e.from] = e.to;
    }
    for (std::uint32_t b = 0; b < n; b++)
        if (p.taken[b] == kNoBlock) p.fall_through[b] = kNoBlock;  // only conditional blocks decide
    for (const auto& loop : loops.loops)
        for (std::uint32_t b : loop.blocks)
            if (b < n) p.loop_headers[b].push_back(loop.header);
    return p;
}

// ------------------------------------------------------------ ELF code map

namespace {

constexpr const char* kBlockCallback = "__sanitizer_cov_trace_pc_guard";

// The inlined callback of `ecpi flags paths --inline` takes its block's
// address with `lea r, [rip]` (runtime/rt_paths_inline.c), an instruction
// compilers do not otherwise emit.
bool logs_inline(const DecodedInstruction& insn) {
    return insn.mnemonic == "lea" && insn.operands.size() > 7 &&
           insn.operands.compare(insn.operands.size() - 7, 7, ", [rip]") == 0;
}

class ElfPathCodeMap : public PathCodeMap {
public:
    ElfPathCodeMap(SymbolTable table, ImageBytes bytes, BlockSource source)
        : table_(std::move(table)), bytes_(std::move(bytes)), source_(source) {
        for (const auto& s : table_.symbols())
            if (s.name == kBlockCallback) callback_ = s.start;
    }

    const PathProcedure* procedure_at(std::uint64_t address) override {
        const Symbol* sym = table_.lookup(address);
        if (!sym) return nullptr;
        auto [it, fresh] = procedures_.try_emplace(sym->start);
        if (fresh) it->second = build(*sym);
        return it->second.get();
    }

private:
    std::unique_ptr<PathProcedure> build(const Symbol& sym) {
        const std::uint64_t end = table_.end_of(sym);
        if (end <= sym.start || end - sym.start > (16u << 20)) return nullptr;
        auto code = bytes_.read(sym.start, end - sym.start);
        if (code.empty()) return nullptr;
        auto insns = decode_x86_64(sym.start, code);
        if (!insns.ok()) return nullptr;
        CfgContext ctx;
        ctx.image = &bytes_;
        ctx.name_at = [this](std::uint64_t a) -> std::string {
            const Symbol* s = table_.lookup(a);
            return s && s->start == a ? s->name : std::string();
        };
        Cfg cfg = build_cfg(sym.start, end, std::move(*insns), ctx);
        LoopInfo loops = find_loops(cfg);
        auto recorded = [&](std::uint32_t b) {
            if (source_ == BlockSource::kEveryBlock) return true;
            const BasicBlock& block = cfg.blocks[b];
            for (std::uint32_t i = block.first; i < block.first + block.count; i++) {
                const auto& insn = cfg.instructions[i];
                if (insn.flow == FlowKind::kCall && callback_ && insn.target == callback_) return true;
                if (logs_inline(insn)) return true;
            }
            return false;
        };
        return std::make_unique<PathProcedure>(path_procedure(cfg, loops, sym.name, recorded));
    }

    SymbolTable table_;
    ImageBytes bytes_;
    BlockSource source_;
    std::uint64_t callback_ = 0;
    std::map<std::uint64_t, std::unique_ptr<PathProcedure>> procedures_;
};

}  // namespace

Result<std::unique_ptr<PathCodeMap>> open_path_code_map(const std::filesystem::path& image, BlockSource source) {
    ECPI_ASSIGN_OR_RETURN(auto table, SymbolTable::from_elf(image));
    ECPI_ASSIGN_OR_RETURN(auto bytes, ImageBytes::open(image));
    auto map = std::make_unique<ElfPathCodeMap>(std::move(table), std::move(bytes), source);
    return std::unique_ptr<PathCodeMap>(std::move(map));
}

// ------------------------------------------------------------ PathCutter

struct PathCutter::Thread {
    // The last block entry seen.
    const PathProcedure* proc = nullptr;
    std::uint32_t block = kNoBlock;
    std::uint64_t address = 0;
    // The open path (when `open`): everything since its first block.
    bool open = false;
    Cut start_kind = Cut::kNone;
    std::vector<std::uint32_t> blocks;
    std::uint64_t start_ticks = 0;
    std::uint64_t entries = 0;          // recorded entries, for the cost subtraction
    std::uint64_t paused_ticks = 0;     // the recorder's own pauses inside the open path
    std::uint64_t entries_unsynced = 0; // entries before the burst's first path start
    // An open span: entries are numbered from its first context entry;
    // paths that start at or after `span_first` lie wholly inside it.
    bool span = false;
    bool span_valid = true;
    std::uint64_t span_index = 0, span_first = 0, span_start = 0, span_blocks = 0;
    std::vector<std::uint32_t> span_paths;  // span ids of the paths closed inside it, counted at its end
};

PathCutter::PathCutter(PathCodeMap& code, double block_cost_ticks) : code_(code), block_cost_ticks_(block_cost_ticks) {}
PathCutter::~PathCutter() = default;

void PathCutter::drop_open(Thread& t) {
    at_edges_ += t.open ? t.entries : 0;
    at_edges_ += t.entries_unsynced;
    t.open = false;
    t.entries = t.entries_unsynced = 0;
    t.blocks.clear();
}

PathCutter::Thread& PathCutter::thread(std::uint32_t id) {
    if (last_thread_ && last_thread_id_ == id) return *last_thread_;
    auto& t = threads_[id];
    if (!t) t = std::make_unique<Thread>();
    last_thread_id_ = id;
    last_thread_ = t.get();
    return *t;
}

void PathCutter::interrupt(std::uint32_t thread_id) {
    Thread& t = thread(thread_id);
    drop_open(t);
    t.proc = nullptr;
    t.span = false;
}

void PathCutter::pause(std::uint32_t thread_id, std::uint64_t ticks) {
    Thread& t = thread(thread_id);
    if (t.open) t.paused_ticks += ticks;
}

void PathCutter::begin_burst(std::uint32_t thread) {
    interrupt(thread);
    bursts_++;
}

// classify's rules in order, but the last: *last_rule is set where none
// of them cuts and only the last (a block already on the open path) may.
PathCutter::Cut PathCutter::classify_step(const Thread& t, const PathProcedure& proc, std::uint32_t block,
                                          std::uint64_t address, bool* last_rule) const {
    *last_rule = false;
    if (t.proc != &proc) return block == 0 ? Cut::kEntry : Cut::kReturn;  // a call (or tail call), or a return
    // Two callbacks in one machine block: IR blocks the code generator merged.
    if (block == t.block && address > t.address) return Cut::kNone;
    if (proc.is_back_edge(t.block, block)) return Cut::kLoop;
    if (block == 0) return Cut::kEntry;  // the entry again without a back edge: recursion
    if (!proc.follows(t.block, block)) return Cut::kReturn;  // a recursive call returned into an older frame
    // The last rule (block()): a block already on the path without a back
    // edge of a natural loop (irreducible control flow) cuts there, so the
    // path stays acyclic.
    *last_rule = true;
    return Cut::kNone;
}

// The entry at `address` after the thread's last one (t.proc set): from
// steps_ where this transition was seen, else looked up and kept there. A
// transition into no procedure is not kept (the code map may learn one).
const PathCutter::Step& PathCutter::step(const Thread& t, std::uint64_t address) {
    const std::uint64_t hash = t.address * 0x9E3779B97F4A7C15ull ^ address * 0xC2B2AE3D27D4EB4Full;
    Step& s = steps_[(hash >> 32) & (kStepSlots - 1)];
    if (s.from_proc == t.proc && s.from == t.address && s.address == address) return s;
    s.proc = address >= t.proc->start && address < t.proc->end ? t.proc : code_.procedure_at(address);
    s.block = s.proc ? s.proc->block_at(address) : kNoBlock;
    s.last_rule = false;
    s.cut = s.block == kNoBlock ? Cut::kNone : classify_step(t, *s.proc, s.block, address, &s.last_rule);
    s.from_proc = s.proc ? t.proc : nullptr;
    s.from = t.address;
    s.address = address;
    return s;
}

namespace {

const char* start_kind_name(int cut) {
    switch (cut) {
        case 1: return "entry";
        case 2: return "loop";
        default: return "return";
    }
}

const char* end_kind_name(int cut) {
    switch (cut) {
        case 1: return "call";
        case 2: return "back-edge";
        default: return "return";
    }
}

std::string decisions_of(const PathProcedure& proc, const std::vector<std::uint32_t>& blocks) {
    std::string out;
    for (std::size_t i = 0; i + 1 < blocks.size(); i++) {
        std::uint32_t a = blocks[i], b = blocks[i + 1];
        if (a == b) continue;  // merged IR blocks
        if (proc.taken[a] != kNoBlock) out += b == proc.taken[a] ? 'T' : b == proc.fall_through[a] ? 'N' : '?';
        else if (std::find(proc.successors[a].begin(), proc.successors[a].end(), b) == proc.successors[a].end()) out += '?';
    }
    return out;
}

}  // namespace

namespace {

std::uint64_t path_hash(std::uint64_t procedure, int start_kind, const std::vector<std::uint32_t>& blocks) {
    std::uint64_t h = procedure * 0x9E3779B97F4A7C15ull ^ std::uint64_t(start_kind);
    for (std::uint32_t b : blocks) h = (h ^ b) * 0x100000001B3ull;
    return h;
}

}  // namespace

store::BranchPath& PathCutter::new_path(Thread& t, Cut cut) {
    std::vector<std::uint64_t> addresses;
    for (std::uint32_t b : t.blocks) addresses.push_back(t.proc->block_starts[b]);
    auto [it, fresh] = paths_.try_emplace(Key{t.proc->start, static_cast<int>(t.start_kind), std::move(addresses)});
    store::BranchPath& p = it->second;
    if (fresh) {
        p.procedure = t.proc->name;
        p.procedure_start = t.proc->start;
        p.start_kind = start_kind_name(static_cast<int>(t.start_kind));
        p.end_kind = end_kind_name(static_cast<int>(cut));
        p.blocks = std::get<2>(it->first);
        p.decisions = decisions_of(*t.proc, t.blocks);
    }
    return p;
}

PathCutter::KnownPath& PathCutter::known_path(Thread& t, Cut cut) {
    const int start = static_cast<int>(t.start_kind);
    auto& bucket = known_[path_hash(t.proc->start, start, t.blocks)];
    for (auto& k : bucket)
        if (k.procedure == t.proc->start && k.start_kind == start && k.blocks == t.blocks) return k;
    return bucket.emplace_back(KnownPath{t.proc->start, start, t.blocks, &new_path(t, cut)});
}

store::BranchPath& PathCutter::path_of(Thread& t, Cut cut, std::uint32_t* id) {
    KnownPath& k = known_path(t, cut);
    if (id) {
        if (k.span_id == kNoSpanId) {
            k.span_id = static_cast<std::uint32_t>(span_paths_.size());
            span_paths_.push_back(k.path);
        }
        *id = k.span_id;
    }
    return *k.path;
}

void PathCutter::close_path(Thread& t, std::uint64_t ticks, Cut cut) {
    if (t.span) {  // ticks: the entry's number in the span
        std::uint32_t id = 0;
        if (t.start_ticks >= t.span_first) {
            path_of(t, cut, &id);
            t.span_paths.push_back(id);
        }
        return;
    }
    const double cost = block_cost_ticks_ * static_cast<double>(t.entries) + static_cast<double>(t.paused_ticks);
    const double raw = ticks >= t.start_ticks ? static_cast<double>(ticks - t.start_ticks) : 0.0;
    const auto time = static_cast<std::uint64_t>(std::llround(std::max(0.0, raw - cost)));
    store::BranchPath& p = path_of(t, cut, nullptr);
    p.min_ticks = p.occurrences ? std::min(p.min_ticks, time) : time;
    p.occurrences++;
    p.total_ticks += time;
    auto& bucket = p.histogram[store::tick_bucket(time)];
    bucket.occurrences++;
    bucket.ticks += time;
    occurrences_++;
}

void PathCutter::block(std::uint32_t thread_id, std::uint64_t address, std::uint64_t ticks) {
    Thread& t = thread(thread_id);
    blocks_++;
    const Step* s = t.proc ? &step(t, address) : nullptr;
    const PathProcedure* proc = s ? s->proc : code_.procedure_at(address);
    const std::uint32_t block = s ? s->block : proc ? proc->block_at(address) : kNoBlock;
    if (block == kNoBlock) {
        outside_++;
        if (t.span) t.span_valid = false;
        drop_open(t);
        t.proc = nullptr;
        return;
    }
    if (!t.proc) {  // the first entry of a burst: how it was reached is unknown
        t.entries_unsynced++;
    } else if (Cut cut = s->last_rule && t.open && std::find(t.blocks.begin(), t.blocks.end(), block) != t.blocks.end()
                             ? Cut::kLoop
                             : s->cut;
               cut != Cut::kNone) {
        if (t.open) close_path(t, ticks, cut);
        at_edges_ += t.entries_unsynced;
        t.entries_unsynced = 0;
        t.open = true;
        t.start_kind = cut;
        t.blocks.assign(1, block);
        t.start_ticks = ticks;
        t.entries = 1;
        t.paused_ticks = 0;
    } else if (t.open) {
        if (block != t.block || address <= t.address) t.blocks.push_back(block);
        t.entries++;
    } else {
        t.entries_unsynced++;
    }
    t.proc = proc;
    t.block = block;
    t.address = address;
}

void PathCutter::begin_span(std::uint32_t thread_id, std::uint64_t context, std::uint64_t start_ticks, std::uint64_t blocks) {
    interrupt(thread_id);
    Thread& t = thread(thread_id);
    t.span = true;
    t.span_valid = true;
    t.span_index = 0;
    t.span_first = context;
    t.span_start = start_ticks;
    t.span_blocks = blocks;
    t.span_paths.clear();
}

void PathCutter::span_block(std::uint32_t thread_id, std::uint64_t address) {
    Thread& t = thread(thread_id);
    if (!t.span) return;  // no SPAN record before it: not a span's
    block(thread_id, address, t.span_index++);
}

namespace {

// (path, occurrences) from the ids of the paths closed in a span.
std::vector<std::pair<std::uint32_t, std::uint32_t>> count_ids(std::vector<std::uint32_t>& ids) {
    std::sort(ids.begin(), ids.end());
    std::vector<std::pair<std::uint32_t, std::uint32_t>> counts;
    for (std::uint32_t id : ids) {
        if (counts.empty() || counts.back().first != id) counts.emplace_back(id, 0);
        counts.back().second++;
    }
    return counts;
}

}  // namespace

void PathCutter::end_span(std::uint32_t thread_id, std::uint64_t end_ticks) {
    Thread& t = thread(thread_id);
    if (!t.span) return;
    // Its context, its timed entries and its end block.
    const bool whole = t.span_blocks == kAnySpanLength || t.span_index == t.span_first + t.span_blocks + 1;
    if (!whole) {
        spans_broken_++;
    } else if (t.span_valid && end_ticks > t.span_start) {
        SpanCounts s;
        s.ticks = static_cast<double>(end_ticks - t.span_start);
        s.blocks = static_cast<std::uint32_t>(t.span_index > t.span_first ? t.span_index - t.span_first - 1 : 0);
        s.counts = count_ids(t.span_paths);
        spans_.push_back(std::move(s));
    } else {
        spans_rejected_++;
    }
    t.span = false;
    interrupt(thread_id);
}

namespace {

// A path's stamped mean for the span fit, or -1 without occurrences: its
// occurrences over both `long_floor` (0: none) and 8x its median left out,
// as the report leaves them out (branch_paths_report.cpp: split_long): an
// interrupt inside one would otherwise weigh on the fit's prior.
double stamped_mean(const store::BranchPath& p, double long_floor) {
    if (!p.occurrences) return -1;
    if (long_floor <= 0) return double(p.total_ticks) / double(p.occurrences);
    const double cutoff = std::max(long_floor, 8 * double(p.quantile_ticks(0.5)));
    double ticks = double(p.total_ticks), occurrences = double(p.occurrences);
    for (const auto& [bucket, b] : p.histogram)
        if (double(store::tick_bucket_low(bucket)) > cutoff) ticks -= double(b.ticks), occurrences -= double(b.occurrences);
    return occurrences > 0 ? ticks / occurrences : -1;
}

}  // namespace

// The recorded block whose entry leads to the code at `address` through
// unrecorded machine blocks (an inline build's IR block is several machine
// blocks: its log's `je` to the runtime's stub splits it); 0 where none or
// several do.
std::uint64_t PathCutter::recorded_block_of(std::uint64_t address) {
    const PathProcedure* proc = code_.procedure_at(address);
    if (!proc) return 0;
    const std::uint32_t m = proc->block_at(address);
    if (m == kNoBlock) return 0;
    auto [at, fresh] = recorded_owner_.try_emplace(proc);
    std::vector<std::uint32_t>& owner = at->second;
    if (fresh) {
        constexpr std::uint32_t kSeveral = kNoBlock - 1;
        owner.assign(proc->block_starts.size(), kNoBlock);
        for (std::uint32_t r = 0; r < owner.size(); r++) {
            if (!proc->recorded[r]) continue;
            owner[r] = r;
            std::vector<std::uint32_t> todo{r};
            std::vector<bool> seen(owner.size(), false);
            while (!todo.empty()) {
                const std::uint32_t b = todo.back();
                todo.pop_back();
                for (std::uint32_t next : proc->successors[b]) {
                    if (next >= owner.size() || proc->recorded[next] || seen[next]) continue;
                    seen[next] = true;
                    owner[next] = owner[next] == kNoBlock ? r : kSeveral;
                    todo.push_back(next);
                }
            }
        }
        for (auto& o : owner)
            if (o == kSeveral) o = kNoBlock;
    }
    return owner[m] == kNoBlock ? 0 : proc->block_starts[owner[m]];
}

// Each span path's cost per occurrence as the program's pc samples say, up
// to one factor common to all (-1: none of its blocks holds a sample): a
// block's samples over its entries (every path's occurrences through it),
// summed over the path's blocks. DCPI's reading of samples, with exact
// counts: no stamp or fence runs where these samples are taken, so a load's
// miss and a chain's latency land in their own blocks (issue 31: a fenced
// stamp waits for the work in flight and moves it between the paths of a
// regular mix, docs/PATHS.md "Calibration across runs"). `samples`: those
// that fell in a recorded block.
SampleSplit PathCutter::pc_sample_split(std::uint64_t* samples) {
    SampleSplit split;
    split.cost.assign(span_paths_.size(), -1.0);
    split.samples.assign(span_paths_.size(), 0);
    *samples = 0;
    std::map<std::uint64_t, double> block_samples;
    for (const auto& [address, n] : pc_samples_)
        if (const std::uint64_t block = recorded_block_of(address)) block_samples[block] += double(n), *samples += n;
    if (block_samples.empty()) return split;
    std::map<std::uint64_t, double> entries;  // every path's, not only those in spans
    for (const auto& [hash, bucket] : known_)
        for (const auto& k : bucket)
            for (auto b : k.path->blocks) entries[b] += double(k.path->occurrences);
    for (std::size_t i = 0; i < span_paths_.size(); i++) {
        double cost = 0, held = 0;
        for (auto b : span_paths_[i]->blocks) {
            auto it = block_samples.find(b);
            if (it == block_samples.end() || !(entries[b] > 0)) continue;
            cost += it->second / entries[b];
            held += it->second;
        }
        if (held > 0) split.cost[i] = cost, split.samples[i] = std::uint64_t(held);
    }
    return split;
}

// Each path's mean over the spans, damped toward its stamped mean.
void PathCutter::fit_spans(store::BranchPathProfile& profile) {
    if (records_lost_)
        profile.notes.push_back(std::to_string(records_lost_) +
                                " records the program's runtime wrote never reached ecpi (lost records): its paths' counts are short");
    if (rings_begun_ > rings_ended_)
        profile.notes.push_back(std::to_string(rings_begun_ - rings_ended_) +
                                " threads' last records never reached ecpi (lost records: the thread ran on at the program's exit, "
                                "or the program was killed): their paths' counts are short");
    if (spans_.empty()) return;
    std::vector<double> prior(span_paths_.size(), -1.0);
    const double long_floor = profile.ticks_per_ns > 0 ? store::kLongFloorNs * profile.ticks_per_ns : 0;
    for (std::size_t i = 0; i < span_paths_.size(); i++) prior[i] = stamped_mean(*span_paths_[i], long_floor);
    std::uint64_t pc_samples = 0;
    const SampleSplit split = pc_sample_split(&pc_samples);
    const SpanFit fit = fit_span_costs(spans_, prior, {}, split);
    for (std::size_t i = 0; i < span_paths_.size(); i++) {
        store::BranchPath& p = *span_paths_[i];
        const SpanFitPath& f = fit.paths[i];
        p.span_occurrences = f.span_occurrences;
        p.fitted = f.fitted;
        p.fit_mean_ticks = f.mean;
        p.fit_stderr_ticks = f.standard_error;
        p.fit_noisy = f.noisy;
        p.fit_damped = f.damped;
        p.fit_low_ticks = f.low;
        p.fit_high_ticks = f.high;
        p.fit_undetermined = f.undetermined;
    }
    profile.spans += fit.spans;
    profile.fit_intercept_ticks = fit.intercept;
    profile.fit_residual_ticks = fit.residual;
    if (fit.interrupted || fit.outliers)
        profile.notes.push_back(std::to_string(fit.interrupted) + " spans took over 8x the usual time per block entry "
                                "(interrupts, page faults) and " + std::to_string(fit.outliers) +
                                " fitted worst; both were left out of the fit");
    if (fit.regular && fit.split_by_samples)
        profile.notes.push_back(std::to_string(fit.regular) +
                                " paths come in a regular mix (a loop that takes them in a fixed order): the spans time their "
                                "total, which is split between them as the program's pc samples in their blocks are (" +
                                std::to_string(pc_samples) +
                                " samples in the image, at least " + std::to_string(fit.split_samples) + " in each path's blocks; marked '~')");
    else if (fit.regular)
        profile.notes.push_back(std::to_string(fit.regular) +
                                " paths come in a regular mix (a loop that takes them in a fixed order): the spans time their "
                                "total, which is split between them as their stamped means are (marked '~')" +
                                (pc_samples ? std::string(": too few of the program's pc samples fell in their blocks") : ""));
    if (fit.undetermined)
        profile.notes.push_back(std::to_string(fit.undetermined) +
                                " fitted paths are undetermined ('?'): the spans allow each a wide range of means (95%, "
                                "profiled), so their time is the range's middle, not the fit's point");
    if (spans_rejected_)
        profile.notes.push_back(std::to_string(spans_rejected_) + " spans entered blocks outside the program's image and were not fitted");
    if (spans_broken_)
        profile.notes.push_back(std::to_string(spans_broken_) +
                                " spans lost records between the program and ecpi (their block entries do not add up to their "
                                "count): not fitted, and their paths' counts are short; a runtime of another ecpi version?");
    spans_.clear();
    span_paths_.clear();
    for (auto& [hash, bucket] : known_)
        for (auto& k : bucket) k.span_id = kNoSpanId;
}

void PathCutter::finish(store::BranchPathProfile& profile) {
    for (auto& [id, t] : threads_) drop_open(*t);
    fit_spans(profile);
    profile.bursts += bursts_;
    profile.blocks += blocks_;
    profile.blocks_outside += outside_;
    profile.blocks_at_edges += at_edges_;
    profile.occurrences += occurrences_;
    for (auto& [key, path] : paths_) profile.paths.push_back(std::move(path));
    paths_.clear();
    known_.clear();
}

// ------------------------------------------------------------ PathRecordDecoder

void PathRecordDecoder::set_image(std::uint64_t start, std::uint64_t end, std::uint64_t bias) {
    start_ = start;
    end_ = end;
    bias_ = bias;
}

// One block entry of a span, as the runtime wrote it: an address in the
// block, after its first instruction (read as BLOCK's).
void PathRecordDecoder::span_entry(std::uint32_t ring, std::uint64_t written, std::uint64_t& last) {
    last = written;
    const std::uint64_t pc = written - 1;
    cutter_.span_block(ring, pc >= start_ && pc < end_ ? pc - bias_ : 0);
}

// SPAN_DELTA16 (seven signed 16-bit fields) or SPAN_DELTA28 (four signed
// 28-bit fields, the last two stored in 32 bits): each entry's address
// minus the one before it (runtime/ecpi_rt_abi.h).
void PathRecordDecoder::span_deltas(std::uint32_t ring, const ecpi_rt_record& r, unsigned kind, std::uint64_t& last) {
    auto signed_field = [](std::uint64_t word, unsigned shift, unsigned bits) {  // two's complement, wrapping
        const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
        return (((word >> shift) & (2 * sign - 1)) ^ sign) - sign;
    };
    std::uint64_t d[7];
    unsigned count = 0;
    if (kind == ECPI_RT_REC_SPAN_DELTA16) {
        for (unsigned k = 0; k < 3; k++) d[count++] = signed_field(r.w0, 32 - 16 * k, 16);
        for (unsigned k = 0; k < 4; k++) d[count++] = signed_field(r.w1, 48 - 16 * k, 16);
    } else {
        d[count++] = signed_field(r.w0, 28, 28);
        d[count++] = signed_field(r.w0, 0, 28);
        d[count++] = signed_field(r.w1, 32, 32);
        d[count++] = signed_field(r.w1, 0, 32);
    }
    for (unsigned k = 0; k < count; k++) span_entry(ring, last + d[k], last);
}

Result<void> PathRecordDecoder::feed(std::uint32_t ring, std::span<const ecpi_rt_record> records) {
    std::uint64_t& fed = fed_[ring];
    std::uint64_t& last = last_entry_[ring];
    for (const auto& r : records) {
        const auto kind = static_cast<unsigned>(r.w0 >> ECPI_RT_KIND_SHIFT);
        // END counts the records before it (0 from a runtime that did not).
        if (kind == ECPI_RT_REC_END && (r.w0 & ECPI_RT_PAYLOAD_MASK) > fed) cutter_.lost_records((r.w0 & ECPI_RT_PAYLOAD_MASK) - fed);
        fed++;
        switch (kind) {
            case ECPI_RT_REC_BLOCK: {
                // The return address follows the callback's call, which is
                // in the block: step back into it (a callback that ends its
                // block would otherwise name the next one).
                const std::uint64_t pc = (r.w0 & ECPI_RT_PAYLOAD_MASK) - 1;
                cutter_.block(ring, pc >= start_ && pc < end_ ? pc - bias_ : 0, r.w1);
                break;
            }
            case ECPI_RT_REC_PAUSE: cutter_.pause(ring, r.w1); break;
            case ECPI_RT_REC_SPAN: cutter_.begin_span(ring, (r.w0 >> 16) & 0xffff, r.w1, r.w0 & 0xffff); break;
            case ECPI_RT_REC_SPAN_BLOCK:  // two entries; a second of 0: none
                span_entry(ring, r.w0 & ECPI_RT_PAYLOAD_MASK, last);
                if (r.w1) span_entry(ring, r.w1 & ECPI_RT_PAYLOAD_MASK, last);
                break;
            case ECPI_RT_REC_SPAN_DELTA16:
            case ECPI_RT_REC_SPAN_DELTA28: span_deltas(ring, r, kind, last); break;
            case ECPI_RT_REC_SPAN_END: cutter_.end_span(ring, r.w1); break;
            case ECPI_RT_REC_WINDOW: cutter_.begin_burst(ring); break;
            case ECPI_RT_REC_THREAD:
                cutter_.ring_began();
                cutter_.interrupt(ring);
                break;
            case ECPI_RT_REC_END:
                cutter_.ring_ended();
                cutter_.interrupt(ring);
                break;
            case ECPI_RT_REC_THREAD_STACK_END:
            case ECPI_RT_REC_ALLOC:
            case ECPI_RT_REC_ALLOC_SITE:
            case ECPI_RT_REC_FREE:
            case ECPI_RT_REC_MEMREF: break;  // a program built for both features: not ours
            default: return Error("ring " + std::to_string(ring) + " holds a record of unknown kind " + std::to_string(kind) +
                                  " (the program's runtime is not this ecpi's: rebuild it with 'ecpi flags paths')");
        }
    }
    return ok();
}

// ------------------------------------------------------------ LBR stacks

namespace {

// A run between two records that cannot be timed or is not a straight line
// breaks the stream: the path it was in is dropped.
bool runs_straight(const BranchRecord& older, const BranchRecord& newer) {
    return newer.cycles != 0 && newer.from >= older.to;
}

}  // namespace

bool feed_lbr_sample(PathCutter& cutter, PathCodeMap& code, const LbrSample& sample, std::uint64_t bias,
                     std::uint32_t stream) {
    std::vector<BranchRecord> b = sample.branches;  // newest first
    // Skylake repeats the newest record in about a quarter of its stacks
    // (measured on AutoFDO's propeller_sample_1 recording): one branch, not two.
    if (b.size() >= 2 && b[0].from == b[1].from && b[0].to == b[1].to) b.erase(b.begin());
    if (b.size() < 2) return false;
    if (std::none_of(b.begin(), b.end() - 1, [](const BranchRecord& r) { return r.cycles != 0; })) return false;
    cutter.begin_burst(stream);
    std::uint64_t now = 0;
    // Oldest first: record k's target starts a run that ends at record k-1's source.
    for (std::size_t k = b.size() - 1; k > 0; k--) {
        const std::uint64_t from = b[k].to - bias, to = b[k - 1].from - bias;
        const std::uint64_t cycles = b[k - 1].cycles;
        const PathProcedure* proc = code.procedure_at(from);
        const std::uint32_t first = proc ? proc->block_at(from) : kNoBlock;
        const std::uint32_t last = proc ? proc->block_at(to) : kNoBlock;
        if (!proc) {
            cutter.block(stream, 0, now);  // outside the image: counted, and the stream breaks
            now += cycles;
            continue;
        }
        if (!runs_straight(b[k], b[k - 1]) || first == kNoBlock || last == kNoBlock || last < first) {
            // An interrupt's return (no cycles), or not a straight run.
            cutter.interrupt(stream);
            now += cycles;
            continue;
        }
        cutter.block(stream, from, now);
        const double span = double(to - from) + 1;
        for (std::uint32_t blk = first + 1; blk <= last; blk++) {
            const std::uint64_t start = proc->block_starts[blk];
            cutter.block(stream, start, now + std::uint64_t(double(cycles) * double(start - from) / span));
        }
        now += cycles;
    }
    // The newest target, entered at the newest record's time, ends the last run's path.
    cutter.block(stream, b[0].to - bias, now);
    cutter.interrupt(stream);
    return true;
}

}  // namespace ecpi::analyze
