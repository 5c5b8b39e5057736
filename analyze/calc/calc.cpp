// ecpi calc: the instruction-level analysis put together (DCPI 6.1). See calc.h.
#include "ecpi/analyze/calc/calc.h"

#include "ecpi/analyze/calc/call_regions.h"
#include "ecpi/analyze/symbols/name_match.h"

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace ecpi::analyze {

namespace {

// Source lines of an image (libdwfl, offline): the file itself, separate
// debug files by build id or .gnu_debuglink under the debug roots.
class LineTable {
public:
    explicit LineTable(const std::filesystem::path& elf_file) {
        debuginfo_path_ = ":.debug:/usr/lib/debug";
        debuginfo_path_ptr_ = debuginfo_path_.data();
        callbacks_.find_elf = dwfl_build_id_find_elf;
        callbacks_.find_debuginfo = dwfl_standard_find_debuginfo;
        callbacks_.section_address = dwfl_offline_section_address;
        callbacks_.debuginfo_path = &debuginfo_path_ptr_;
        dwfl_ = dwfl_begin(&callbacks_);
        if (!dwfl_) return;
        module_ = dwfl_report_offline(dwfl_, elf_file.filename().c_str(), elf_file.c_str(), -1);
        dwfl_report_end(dwfl_, nullptr, nullptr);
        if (!module_) return;
        if (!dwfl_module_getelf(module_, &bias_)) module_ = nullptr;
    }
    ~LineTable() {
        if (dwfl_) dwfl_end(dwfl_);
    }
    LineTable(const LineTable&) = delete;
    LineTable& operator=(const LineTable&) = delete;

    // (file, line) of an ELF virtual address; ("", 0) when unknown.
    std::pair<std::string, int> at(std::uint64_t address) const {
        if (!module_) return {"", 0};
        Dwfl_Line* line = dwfl_module_getsrc(module_, address + bias_);
        if (!line) return {"", 0};
        int lineno = 0;
        const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
        return {file ? file : "", lineno};
    }

private:
    std::string debuginfo_path_;
    char* debuginfo_path_ptr_ = nullptr;
    Dwfl_Callbacks callbacks_{};
    Dwfl* dwfl_ = nullptr;
    Dwfl_Module* module_ = nullptr;
    GElf_Addr bias_ = 0;
};

// The name without its parameter list and, optionally, its qualification.
std::string base_name(std::string name, bool strip_scope) {
    if (auto at = name.find("@plt"); at != std::string::npos) name.resize(at);
    int depth = 0;
    for (std::size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '<') ++depth;
        if (name[i] == '>') --depth;
        if (name[i] == '(' && depth == 0 && i > 0) {
            name.resize(i);
            break;
        }
    }
    if (strip_scope) {
        depth = 0;
        std::size_t cut = std::string::npos;
        for (std::size_t i = 0; i + 1 < name.size(); ++i) {
            if (name[i] == '<') ++depth;
            if (name[i] == '>') --depth;
            if (depth == 0 && name[i] == ':' && name[i + 1] == ':') cut = i + 2;
        }
        if (cut != std::string::npos) name = name.substr(cut);
    }
    return name;
}

// --image names an image as the user sees it: the recorded path, a file name,
// a path suffix ("bin/server"), or a path relative to where the user stands
// ("./server", "../build/server"), which is made absolute first (issue 34,
// defect 4: "./hot" matched nothing while "hot" matched).
bool image_matches(const std::string& path, const std::string& given) {
    if (path == given) return true;
    std::string wanted = std::filesystem::path(given).lexically_normal().string();
    if (wanted.rfind("../", 0) == 0 || given.rfind("./", 0) == 0) {
        std::error_code ec;
        const auto absolute = std::filesystem::absolute(given, ec).lexically_normal();
        if (!ec && absolute.string() == path) return true;
        if (wanted.rfind("../", 0) == 0) return false;
    }
    if (wanted == path) return true;
    if (wanted.find('/') == std::string::npos)
        return std::filesystem::path(path).filename() == wanted;
    return path.size() > wanted.size() && path.compare(path.size() - wanted.size(), wanted.size(), wanted) == 0 &&
           path[path.size() - wanted.size() - 1] == '/';
}

struct SampledProcedure {
    std::size_t image = 0;  // index into the image list
    std::string name;
    std::uint64_t start = 0, end = 0;
    std::map<std::uint64_t, std::uint64_t> samples;
    std::uint64_t total = 0;
};

}  // namespace

bool is_clock_event(const std::string& event) { return event == "cpu-clock" || event == "task-clock"; }

namespace {

// The event: cycles when a hardware counter recorded them, else a clock.
Result<void> choose_event(const store::EpochContents& contents, const CalcOptions& options, CalcReport& report) {
    std::set<std::string> events;
    for (const auto& p : contents.profiles) events.insert(p.event);
    if (events.empty()) return Error("epoch " + contents.epoch + " holds no samples");
    if (!options.event.empty()) {
        if (!events.count(options.event)) return Error("epoch " + contents.epoch + " has no " + options.event + " samples");
        report.event = options.event;
    } else if (events.count("cycles")) {
        report.event = "cycles";
    } else if (events.count("cpu-clock")) {
        report.event = "cpu-clock";
    } else {
        report.event = *events.begin();
    }
    if (report.event != "cycles" && !is_clock_event(report.event))
        return Error("ecpi calc needs a cycles or clock event (cycles, cpu-clock, task-clock); epoch " +
                     contents.epoch + " has " + report.event);
    const store::EventMeta* meta = nullptr;
    if (auto it = contents.meta.events.find(report.event); it != contents.meta.events.end()) meta = &it->second;
    for (const auto& p : contents.profiles)
        if (p.event == report.event) {
            if (p.period) report.period = p.period;
            for (const auto& oc : p.merged()) report.event_samples += oc.count;
        }
    if (report.period == 0 && meta) report.period = meta->period;
    if (report.period == 0) return Error("no sampling period recorded for " + report.event);
    return {};
}

// P in cycles: the period itself for a cycle counter; for a clock, the
// period times the clock rate the sampled program kept.
Result<void> choose_clock(const store::EpochContents& contents, const CalcOptions& options, CalcReport& report) {
    if (report.event == "cycles") {
        report.period_cycles = static_cast<double>(report.period);
        report.clock_source = "hardware cycle counter: the period is in cycles";
        report.cpu_mhz = contents.meta.cpu_mhz;
        return {};
    }
    if (options.cpu_mhz) {
        report.cpu_mhz = *options.cpu_mhz;
        report.clock_source = "--cpu-mhz";
    } else if (contents.meta.cpu_mhz_sampled > 0) {
        report.cpu_mhz = contents.meta.cpu_mhz_sampled;
        std::ostringstream why;
        why << std::fixed << std::setprecision(0)
            << "a measurement at record time under sampling at the same period (a dependent add chain: the cycles a "
               "sampled program keeps, turbo included, sampling's own cost excluded; "
            << contents.meta.cpu_mhz_measured << " MHz unsampled)";
        report.clock_source = why.str();
    } else if (contents.meta.cpu_mhz_measured > 0) {
        report.cpu_mhz = contents.meta.cpu_mhz_measured;
        report.clock_source = "a measurement at record time (a dependent add chain: the core's effective clock, turbo included)";
    } else if (contents.meta.cpu_mhz > 0) {
        report.cpu_mhz = contents.meta.cpu_mhz;
        report.clock_source = "the epoch's metadata (/proc/cpuinfo at record time; the core may run faster under turbo)";
    } else {
        return Error("the epoch records no CPU clock rate: give --cpu-mhz");
    }
    report.period_cycles = static_cast<double>(report.period) * report.cpu_mhz / 1000.0;
    return {};
}

Result<MachineModel> choose_model(const store::EpochContents& contents, const CalcOptions& options, CalcReport& report) {
    std::string machine = options.machine;
    if (machine == MachineModel::kAuto) {
        const auto& m = contents.meta;
        std::string cpu = m.cpu_vendor + " family " + std::to_string(m.cpu_family) + " model " +
                          std::to_string(m.cpu_model) + (m.cpu_name.empty() ? "" : " (" + m.cpu_name + ")");
        if (auto name = MachineModel::builtin_for_cpu(m.cpu_vendor, m.cpu_family, m.cpu_model)) {
            machine = *name;
            report.machine_source = "matches the CPU recorded with the epoch, " + cpu;
        } else {
            machine = MachineModel::kDefault;
            report.machine_source = m.cpu_vendor.empty()
                                        ? "default: the epoch does not record its CPU (recorded by an older ecpi)"
                                        : "default: no built-in model matches the recorded CPU, " + cpu;
        }
    } else {
        report.machine_source = "--machine";
    }
    ECPI_ASSIGN_OR_RETURN(auto model, MachineModel::load(machine));
    report.machine = model.name();
    report.sample_skid = model.sample_skid();
    return model;
}

// Samples of events other than the cycle event, per image, that feed the
// analysis: hardware-counted retired instructions (estimates) and the events
// that bound stall causes (culprits.h).
struct InstructionCounts {
    std::vector<store::OffsetCount> counts;  // merged over processes, by offset
    double period = 0;
};
struct OtherEvents {
    std::map<store::ImageId, InstructionCounts> instructions;
    std::map<std::pair<store::ImageId, std::string>, InstructionCounts> bounding;
    bool kernel_sampled = false;
};

OtherEvents other_events(const store::EpochContents& contents, const std::string& event) {
    OtherEvents o;
    for (const auto& p : contents.profiles) {
        if (p.event == "instructions" && p.period > 0)
            o.instructions[p.image] = {p.merged(), static_cast<double>(p.period)};
        if ((p.event == "branch-misses" || p.event == "cache-misses") && p.period > 0)
            o.bounding[{p.image, p.event}] = {p.merged(), static_cast<double>(p.period)};
        if (p.event == event && p.image.path == store::kKernelImage) o.kernel_sampled = true;
    }
    return o;
}

struct SampledProcedures {
    std::vector<const store::ImageProfile*> images;
    std::vector<SampledProcedure> procs;
};

// Samples per procedure (and, with --unsampled, every procedure of the images).
SampledProcedures sampled_procedures(const store::EpochContents& contents, const CalcOptions& options,
                                     Symbolizer& symbolizer, CalcReport& report) {
    SampledProcedures out;
    std::map<std::pair<std::size_t, std::uint64_t>, std::size_t> proc_index;
    for (const auto& p : contents.profiles) {
        if (p.event != report.event) continue;
        if (p.image.path == store::kUnknownImage) continue;
        if (options.image && !image_matches(p.image.path, *options.image)) continue;
        if (p.image.path == store::kKernelImage) {
            if (options.all) report.warnings.push_back("[kernel]: kernel code is not analyzed (no vmlinux)");
            continue;
        }
        const auto& table = symbolizer.table(p.image);
        if (!table.ok()) {
            report.warnings.push_back(p.image.path + ": " + table.error().message());
            continue;
        }
        std::size_t image_idx = out.images.size();
        out.images.push_back(&p);
        auto add = [&](const Symbol& sym) -> SampledProcedure& {
            auto [it, inserted] = proc_index.emplace(std::make_pair(image_idx, sym.start), out.procs.size());
            if (inserted) out.procs.push_back({image_idx, sym.name, sym.start, table->end_of(sym), {}, 0});
            return out.procs[it->second];
        };
        if (options.all && options.unsampled)
            for (const auto& sym : table->symbols())
                if (sym.name.find("@plt") == std::string::npos) add(sym);
        for (const auto& oc : p.merged()) {
            const Symbol* sym = table->lookup(oc.offset);
            if (!sym) continue;
            auto& sp = add(*sym);
            sp.samples[oc.offset] += oc.count;
            sp.total += oc.count;
        }
    }
    return out;
}

// The procedures to analyze: all, or the one named (exactly, then loosely).
Result<std::vector<std::size_t>> select_procedures(const SampledProcedures& sampled, const CalcOptions& options,
                                                   const store::EpochContents& contents, const CalcReport& report,
                                                   Symbolizer& symbolizer) {
    const auto& procs = sampled.procs;
    std::vector<std::size_t> selected;
    if (options.all) {
        for (std::size_t i = 0; i < procs.size(); ++i) selected.push_back(i);
        return selected;
    }
    for (int pass = 0; pass < 3 && selected.empty(); ++pass)
        for (std::size_t i = 0; i < procs.size(); ++i) {
            const auto& n = procs[i].name;
            bool match = pass == 0   ? n == options.procedure
                         : pass == 1 ? base_name(n, false) == options.procedure
                                     : base_name(n, true) == base_name(options.procedure, true);
            if (match) selected.push_back(i);
        }
    if (selected.empty()) {
        std::string msg = "procedure " + options.procedure + " has no " + report.event + " samples in epoch " +
                          contents.epoch;
        if (options.image) msg += " (image " + *options.image + ")";
        std::vector<std::string> names;
        for (const auto& p : procs) names.push_back(p.name);
        // Substrings and typos both, as annotate and prof answer (issue 34).
        const std::vector<std::string> near = close_matches(options.procedure, names, 8);
        if (!near.empty()) {
            msg += "; sampled procedures with similar names:";
            for (const auto& n : near) msg += " " + n + ";";
            msg.pop_back();
        } else if (auto gone = missing_images_note(contents, report.event, symbolizer); !gone.empty()) {
            // A moved image's procedures cannot be named: say so, not "no samples".
            msg = "procedure " + options.procedure + " is not in the images that could be read: " + gone;
        }
        return Error(msg);
    }
    if (selected.size() > 1) {
        std::string msg = "procedure name " + options.procedure + " matches " + std::to_string(selected.size()) +
                          " sampled procedures (name one exactly, or add --image):";
        for (std::size_t k = 0; k < selected.size(); ++k) {
            const auto& sp = procs[selected[k]];
            msg += (k ? "; " : " ") + sp.name + " in " + sampled.images[sp.image]->image.path + " (" +
                   std::to_string(sp.total) + " samples)";
        }
        return Error(msg);
    }
    return selected;
}

// Register snapshots of the cycle event (register_progress.h), indexed by
// image: per image, the positions of its snapshots sorted by offset.
struct RegisterIndex {
    const store::RegisterProfile* profile = nullptr;
    std::map<store::ImageId, std::uint32_t> image_index;
    std::vector<std::vector<std::pair<std::uint64_t, std::uint32_t>>> by_offset;  // per image: (offset, position)
};

RegisterIndex register_index(const store::EpochContents& contents, const std::string& event) {
    RegisterIndex r;
    for (const auto& rp : contents.registers)
        if (rp.event == event && !rp.samples.empty()) r.profile = &rp;
    if (!r.profile) return r;
    r.by_offset.resize(r.profile->images.size());
    for (std::uint32_t i = 0; i < r.profile->images.size(); ++i) r.image_index[r.profile->images[i]] = i;
    for (std::uint32_t k = 0; k < r.profile->samples.size(); ++k) {
        const auto& s = r.profile->samples[k];
        if (s.image < r.by_offset.size()) r.by_offset[s.image].push_back({s.offset, k});
    }
    for (auto& v : r.by_offset) std::sort(v.begin(), v.end());
    return r;
}

std::optional<ProcedureInput::Registers> registers_for(const RegisterIndex& index, const store::ImageId& image,
                                                       std::uint64_t start, std::uint64_t end,
                                                       const CalcReport& report) {
    if (!index.profile) return std::nullopt;
    auto it = index.image_index.find(image);
    if (it == index.image_index.end()) return std::nullopt;
    ProcedureInput::Registers r;
    r.stream = index.profile->samples;
    r.image = it->second;
    const auto& v = index.by_offset[it->second];
    for (auto p = std::lower_bound(v.begin(), v.end(), std::make_pair(start, std::uint32_t{0}));
         p != v.end() && p->first < end; ++p)
        r.candidates.push_back(p->second);
    // The wall-clock time one sample stands for: the clock period itself,
    // or a cycle period at the recorded clock rate.
    r.period_ns = is_clock_event(report.event) ? static_cast<double>(report.period)
                                               : report.period_cycles / std::max(report.cpu_mhz, 1.0) * 1000.0;
    // Consecutive snapshots of a thread that ran throughout are one period
    // (+-10% randomization) times the snapshot fraction apart. A pair
    // further apart had a sample in between that kept no registers: the
    // thread was in the kernel (a page fault: seen to make a loop's pairs
    // 100x slow while its samples count only its user time) or off the CPU.
    // Half a period of slack admits the jitter and nothing more.
    const double every = std::max<std::uint32_t>(index.profile->every, 1);
    r.max_gap_ns = (1.1 * every + 0.5) * r.period_ns;
    return r;
}

// Reads each image's bytes and lines once, for every procedure in it.
class ImageCache {
public:
    ImageCache(Symbolizer& symbolizer, bool lines) : symbolizer_(symbolizer), lines_(lines) {}

    // The image's bytes, or null (with a warning, once) when they cannot be read.
    const ImageBytes* bytes(std::size_t index, const store::ImageId& image, CalcReport& report) {
        if (failed_.count(index)) return nullptr;
        if (auto it = bytes_.find(index); it != bytes_.end()) return it->second.get();
        auto fail = [&](std::string why) -> const ImageBytes* {
            report.warnings.push_back(std::move(why));
            failed_.insert(index);
            return nullptr;
        };
        auto file = symbolizer_.image_file(image);
        if (!file) return fail(image.path + ": no readable copy of the image");
        auto ib = ImageBytes::open(*file);
        if (!ib.ok()) return fail(ib.error().message());
        if (ib->machine() != 62 /* EM_X86_64 */) return fail(image.path + ": not x86-64 code; not analyzed");
        if (lines_) lines_by_image_[index] = std::make_unique<LineTable>(*file);
        return (bytes_[index] = std::make_unique<ImageBytes>(std::move(ib).value())).get();
    }
    const LineTable* lines(std::size_t index) const {
        auto it = lines_by_image_.find(index);
        return it == lines_by_image_.end() ? nullptr : it->second.get();
    }

private:
    Symbolizer& symbolizer_;
    bool lines_;
    std::map<std::size_t, std::unique_ptr<ImageBytes>> bytes_;
    std::map<std::size_t, std::unique_ptr<LineTable>> lines_by_image_;
    std::set<std::size_t> failed_;
};

// The samples of [start, end) of a merged per-image profile.
void slice(const InstructionCounts& ic, std::uint64_t start, std::uint64_t end, std::map<std::uint64_t, std::uint64_t>& out) {
    auto lo = std::lower_bound(ic.counts.begin(), ic.counts.end(), start,
                               [](const store::OffsetCount& oc, std::uint64_t a) { return oc.offset < a; });
    for (auto it = lo; it != ic.counts.end() && it->offset < end; ++it) out[it->offset] += it->count;
}

struct InputContext {
    const SampledProcedures& sampled;
    const OtherEvents& others;
    const RegisterIndex& registers;
    const CalcReport& report;
    bool details;
    std::map<std::pair<std::size_t, std::uint64_t>, bool>& leaf_cache;  // (image, callee) -> leaf
    std::map<std::pair<std::size_t, std::uint64_t>, CalleeCode>& callee_cache;  // (image, callee) -> its code
};

ProcedureInput procedure_input(const SampledProcedure& sp, const ImageBytes* bytes, const SymbolTable& table,
                               const InputContext& ctx) {
    const store::ImageProfile& ip = *ctx.sampled.images[sp.image];
    ProcedureInput input;
    input.name = sp.name;
    input.start = sp.start;
    input.end = sp.end;
    input.image = bytes;
    input.samples = sp.samples;
    input.details = ctx.details;
    if (auto ins = ctx.others.instructions.find(ip.image); ins != ctx.others.instructions.end()) {
        slice(ins->second, sp.start, sp.end, input.instruction_samples);
        input.instruction_period = ins->second.period;
    }
    for (const char* ev : {"branch-misses", "cache-misses"})
        if (auto bp = ctx.others.bounding.find({ip.image, ev}); bp != ctx.others.bounding.end()) {
            auto& profile = input.bounding_events[ev];
            slice(bp->second, sp.start, sp.end, profile.samples);
            profile.period = bp->second.period;
        }
    input.kernel_sampled = ctx.others.kernel_sampled;
    input.name_at = [&table](std::uint64_t a) -> std::string {
        const Symbol* s = table.lookup(a);
        return s && s->start == a ? s->name : std::string();
    };
    // Decoded once per image and callee, and only for calls that a stall follows.
    input.leaf_callee = [&table, &cache = ctx.leaf_cache, bytes, key = sp.image](std::uint64_t a) {
        auto [it, fresh] = cache.emplace(std::make_pair(key, a), false);
        if (fresh) {
            const Symbol* s = table.lookup(a);
            it->second = s && s->start == a && is_leaf_function(*bytes, a, table.end_of(*s));
        }
        return it->second;
    };
    // Read once per image and callee, for calls in loops.
    input.callee_code = [&table, &cache = ctx.callee_cache, bytes, key = sp.image](std::uint64_t a) {
        auto [it, fresh] = cache.emplace(std::make_pair(key, a), CalleeCode{});
        if (fresh) {
            const FunctionExtent extent = [&table](std::uint64_t f) -> std::pair<std::uint64_t, std::uint64_t> {
                const Symbol* s = table.lookup(f);
                if (!s || s->start != f) return {0, 0};
                return {s->start, table.end_of(*s)};
            };
            it->second = callee_code(*bytes, extent, a);
        }
        return &it->second;
    };
    input.registers = registers_for(ctx.registers, ip.image, sp.start, sp.end, ctx.report);
    return input;
}

void add_to_image_summary(CalcReport& report, const store::ImageId& image, const CalcProcedure& proc) {
    auto it = std::find_if(report.images.begin(), report.images.end(), [&](const CalcImageSummary& s) {
        return s.image == image.path && s.build_id == image.build_id;
    });
    if (it == report.images.end()) {
        report.images.push_back({image.path, image.build_id, 0, {}});
        it = std::prev(report.images.end());
    }
    it->procedures += 1;
    it->stalls.add(proc.stalls);
}

// Entry counts carried from callers (issue 36): a procedure whose direct
// callers among those analyzed call it from blocks whose counts are
// measured gets their sum as its entry count. Exact (a hard constraint
// within the measured tolerance) where no caller's count is unknown: no
// direct call to it from an unmeasured block and no indirect call in the
// analyzed procedures of its image that may stay in it (a call through a
// slot the loader fills with another image's symbol leaves it: _start's
// call of __libc_start_main made every entry count of branchy a lower
// bound); else a lower bound. A call through a table whose snapshots
// decided its targets is a known caller of each (add_table_call). Callers with no samples at all are not
// analyzed and count as never run. Where exact, and no analyzed procedure
// of the image jumps to other code (a tail call passes registers no call
// site shows), the constants every call site passes go with it
// (entry_arguments.h).
struct Callers {
    double measured = 0;
    bool unknown = false;
    std::vector<std::vector<ArgumentValue>> arguments;  // per call site
};
using CallersByCallee = std::map<std::pair<std::size_t, std::uint64_t>, Callers>;  // (image, start)

// A call through a table from a measured block whose register snapshots
// decided its targets (call_odds.h) gives each target its share of the
// block's count (calls.c's `table[i % 3](i)` once its loop is measured:
// a third each); a target no deciding snapshot chose runs below about 1%
// of the calls. False where it decides nothing: the call may then reach
// any procedure of the image.
bool add_table_call(const CalcCallSite& c, std::size_t image, CallersByCallee& by_callee) {
    if (!c.decided || !c.measured || c.targets_seen.empty()) return false;
    double total = 0;
    for (const auto& [target, snapshots] : c.targets_seen) total += snapshots;
    if (!(total > 0)) return false;
    for (const auto& [target, snapshots] : c.targets_seen)
        by_callee[{image, target}].measured += c.executions * snapshots / total;
    return true;
}

std::vector<std::pair<std::size_t, ProcedureInput::EntryCount>> entries_from_callers(
    const SampledProcedures& sampled, const std::vector<std::pair<std::size_t, CalcProcedure>>& analyzed) {
    CallersByCallee by_callee;
    std::set<std::size_t> indirect;                                        // images with an indirect call
    std::set<std::size_t> tail_jumps;                                      // images with a jump to other code
    for (const auto& [i, proc] : analyzed) {
        const std::size_t image = sampled.procs[i].image;
        if (proc.tail_jumps) tail_jumps.insert(image);
        for (const CalcCallSite& c : proc.call_sites) {
            if (c.target == 0) {
                if (!c.imported && !add_table_call(c, image, by_callee)) indirect.insert(image);
                continue;
            }
            Callers& callers = by_callee[{image, c.target}];
            callers.arguments.push_back(c.arguments);
            if (c.measured)
                callers.measured += c.executions;
            else
                callers.unknown = true;
        }
    }
    std::vector<std::pair<std::size_t, ProcedureInput::EntryCount>> out;
    for (const auto& [i, proc] : analyzed) {
        const SampledProcedure& sp = sampled.procs[i];
        auto it = by_callee.find({sp.image, sp.start});
        if (it == by_callee.end() || !(it->second.measured > 0)) continue;
        ProcedureInput::EntryCount entry{it->second.measured, it->second.unknown || indirect.count(sp.image) > 0, {}};
        if (!entry.lower_bound && !tail_jumps.count(sp.image)) entry.arguments = common_arguments(it->second.arguments);
        out.push_back({i, std::move(entry)});
    }
    return out;
}

// The analyzed procedures as call regions see them (call_regions.h).
std::vector<RegionProcedure> region_procedures(const SampledProcedures& sampled,
                                               const std::vector<std::pair<std::size_t, CalcProcedure>>& analyzed) {
    std::vector<RegionProcedure> out;
    for (const auto& [i, proc] : analyzed) out.push_back({sampled.procs[i].image, &proc});
    return out;
}

}  // namespace

Result<CalcReport> run_calc(const store::EpochContents& contents, const CalcOptions& options, Symbolizer& symbolizer) {
    auto t0 = std::chrono::steady_clock::now();
    CalcReport report;
    report.epoch = contents.epoch;
    report.summary = options.summary;
    for (const auto& s : contents.skipped) report.warnings.push_back("skipped " + s);
    ECPI_RETURN_IF_ERROR(choose_event(contents, options, report));
    ECPI_RETURN_IF_ERROR(choose_clock(contents, options, report));
    ECPI_ASSIGN_OR_RETURN(auto model, choose_model(contents, options, report));
    const OtherEvents others = other_events(contents, report.event);
    const RegisterIndex registers = register_index(contents, report.event);
    const SampledProcedures sampled = sampled_procedures(contents, options, symbolizer, report);
    auto selected = select_procedures(sampled, options, contents, report, symbolizer);
    if (!selected.ok()) return selected.error();

    ImageCache images(symbolizer, options.lines);
    std::map<std::pair<std::size_t, std::uint64_t>, bool> leaf_cache;
    std::map<std::pair<std::size_t, std::uint64_t>, CalleeCode> callee_cache;
    const InputContext ctx{sampled, others, registers, report, !options.summary, leaf_cache, callee_cache};
    const auto analyze = [&](std::size_t i, std::optional<ProcedureInput::EntryCount> entry,
                             const ProcedureRegion* region) -> std::optional<CalcProcedure> {
        const auto& sp = sampled.procs[i];
        const store::ImageProfile& ip = *sampled.images[sp.image];
        const ImageBytes* bytes = images.bytes(sp.image, ip.image, report);
        if (!bytes) return std::nullopt;
        ProcedureInput input = procedure_input(sp, bytes, *symbolizer.table(ip.image), ctx);
        input.chase_latency = options.chase_latency.empty() ? contents.meta.chase_latency : options.chase_latency;
        input.entry = entry;
        if (!is_clock_event(report.event)) input.clock_margin = 1;  // a cycle counter: no clock rate between
        input.widen_ranges_by_clock = options.clock_margin_in_ranges;
        if (region) {
            input.region = region->counts;
            input.region_loop = region->loop;
        }
        auto proc = analyze_procedure(input, model, report.period_cycles);
        if (!proc.ok()) {
            report.warnings.push_back(proc.error().message());
            return std::nullopt;
        }
        return std::move(proc).value();
    };
    std::vector<std::pair<std::size_t, CalcProcedure>> analyzed;
    for (auto i : *selected)
        if (auto proc = analyze(i, std::nullopt, nullptr)) analyzed.emplace_back(i, std::move(*proc));
    // Across procedures: entry counts from measured call sites, and loops
    // estimated with the leaves they call; each procedure analyzed again
    // once with what it got.
    std::map<std::size_t, std::optional<ProcedureInput::EntryCount>> entries;
    for (const auto& [i, entry] : entries_from_callers(sampled, analyzed)) entries[i] = entry;
    std::map<std::size_t, ProcedureRegion> regions;
    for (auto& [k, region] : call_region_counts(region_procedures(sampled, analyzed),
                                                {model.call_return_cycles(), model.indirect_call_return_cycles()},
                                                report.period_cycles))
        regions[analyzed[k].first] = std::move(region);
    for (const auto& [i, region] : regions) entries.emplace(i, std::nullopt);
    for (const auto& [i, entry] : entries)
        for (auto& [j, proc] : analyzed) {
            if (j != i) continue;
            const auto region = regions.find(i);
            auto again = analyze(i, entry, region == regions.end() ? nullptr : &region->second);
            if (!again) continue;
            proc = std::move(*again);
            if (region == regions.end()) continue;
            for (CalcLoop& loop : proc.loops)
                if (auto b = region->second.best_cycles.find(loop.header); b != region->second.best_cycles.end())
                    loop.region_best_cycles = b->second;
        }
    for (auto& [i, proc] : analyzed) {
        const auto& sp = sampled.procs[i];
        const store::ImageProfile& ip = *sampled.images[sp.image];
        proc.image = ip.image.path;
        proc.build_id = ip.image.build_id;
        if (!proc.entry_conflict.empty()) report.warnings.push_back(proc.entry_conflict);
        if (options.all) add_to_image_summary(report, ip.image, proc);
        if (const LineTable* lines = images.lines(sp.image); lines && !options.summary)
            for (auto& ci : proc.instructions) std::tie(ci.file, ci.line) = lines->at(ci.address);
        report.analyzed_bytes += sp.end - sp.start;
        report.procedures.push_back(std::move(proc));
    }
    if (report.procedures.empty() && !options.all && !report.warnings.empty())
        return Error(report.warnings.back());
    std::stable_sort(report.procedures.begin(), report.procedures.end(),
                     [](const CalcProcedure& a, const CalcProcedure& b) { return a.samples > b.samples; });
    report.analysis_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return report;
}

}  // namespace ecpi::analyze
