// ecpi calc: the instruction-level analysis put together (DCPI 6.1). See calc.h.
#include "ecpi/analyze/calc.h"

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

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

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

bool is_clock_event(const std::string& event) { return event == "cpu-clock" || event == "task-clock"; }

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

bool image_matches(const std::string& path, const std::string& wanted) {
    if (path == wanted) return true;
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

Result<CalcProcedure> analyze_procedure(const ProcedureInput& input, const MachineModel& model, double period_cycles,
                                        const EstimatorOptions& options) {
    if (!input.image) return Error(input.name + ": no image bytes");
    if (input.end <= input.start) return Error(input.name + ": empty address range");
    auto bytes = input.image->read(input.start, input.end - input.start);
    if (bytes.empty())
        return Error(input.name + ": code at " + hex(input.start) + "-" + hex(input.end) + " is not in " +
                     input.image->path().string());
    ECPI_ASSIGN_OR_RETURN(auto insns, decode_x86_64(input.start, bytes));
    CfgContext ctx;
    ctx.image = input.image;
    ctx.name_at = input.name_at;
    Cfg cfg = build_cfg(input.start, input.end, std::move(insns), ctx);
    FrequencyClasses fc = frequency_classes(cfg);
    std::vector<BlockTiming> timing = model.time_blocks(cfg);

    // Samples per instruction (a sample inside an instruction counts for it).
    const auto& in = cfg.instructions;
    auto per_instruction = [&in](const std::map<std::uint64_t, std::uint64_t>& by_address) {
        std::vector<std::uint64_t> v(in.size(), 0);
        for (auto [addr, count] : by_address) {
            auto it = std::upper_bound(in.begin(), in.end(), addr,
                                       [](std::uint64_t a, const DecodedInstruction& d) { return a < d.address; });
            if (it == in.begin()) continue;
            --it;
            if (addr < it->address + it->size) v[static_cast<std::size_t>(it - in.begin())] += count;
        }
        return v;
    };
    std::vector<std::uint64_t> samples = per_instruction(input.samples);
    EstimatorOptions est_options = options;
    est_options.whole_block_below = std::max(est_options.whole_block_below, model.whole_block_below());
    if (!input.instruction_samples.empty() && input.instruction_period > 0) {
        est_options.instruction_samples = per_instruction(input.instruction_samples);
        est_options.instruction_period = input.instruction_period;
        est_options.cycle_period = period_cycles;
    }
    FrequencyEstimate est = estimate_frequencies(cfg, fc, timing, samples, est_options);

    CulpritInput ci_in;
    ci_in.cfg = &cfg;
    ci_in.timing = &timing;
    ci_in.estimate = &est;
    ci_in.samples = samples;
    ci_in.period_cycles = period_cycles;
    ci_in.model = &model;
    ci_in.kernel_sampled = input.kernel_sampled;
    auto bounding = [&](const char* event, EventSamples& out) {
        auto it = input.bounding_events.find(event);
        if (it == input.bounding_events.end() || it->second.period <= 0) return;
        out.per_instruction = per_instruction(it->second.samples);
        out.period = it->second.period;
    };
    ci_in.leaf_callee = input.leaf_callee;
    bounding("branch-misses", ci_in.branch_misses);
    bounding("cache-misses", ci_in.cache_misses);
    CulpritAnalysis culprits = find_culprits(ci_in);

    CalcProcedure proc;
    proc.name = input.name;
    proc.start = input.start;
    proc.end = input.end;
    proc.frequency_classes = fc.count;
    proc.missing_edges = cfg.missing_edges;
    proc.unresolved_jumps = cfg.unresolved_jumps;
    proc.jump_tables = static_cast<std::uint32_t>(cfg.jump_tables.size());
    proc.invocations = est.invocations * period_cycles;
    proc.stalls = culprits.summary;
    double weighted_best = 0, weighted_insns = 0, weighted_samples = 0;
    for (std::uint32_t b = 0; b < cfg.blocks.size(); ++b) {
        const auto& blk = cfg.blocks[b];
        CalcBlock cb;
        cb.index = b;
        cb.address = in[blk.first].address;
        cb.first = blk.first;
        cb.count = blk.count;
        cb.frequency_class = fc.block_class[b];
        cb.confidence = est.block_confidence[b];
        cb.source = est.block_source[b];
        cb.steady_state = timing[b].steady_state;
        double f = est.block_frequency[b];
        cb.executions = f * period_cycles;
        cb.best_cycles = timing[b].cycles;
        cb.best_cpi = timing[b].cycles / blk.count;
        for (std::uint32_t i = 0; i < blk.count; ++i) {
            std::uint32_t k = blk.first + i;
            if (!input.details) {
                cb.samples += samples[k];
                continue;
            }
            CalcInstruction ci;
            ci.address = in[k].address;
            ci.text = in[k].text();
            ci.samples = samples[k];
            ci.best_cycles = timing[b].m[i];
            ci.best_known = timing[b].known[i];
            ci.executions = cb.executions;
            if (f > 0) ci.cpi = static_cast<double>(samples[k]) / f;
            ci.confidence = cb.confidence;
            const auto& st = culprits.instructions[k];
            ci.static_cycles = st.static_cycles;
            ci.dynamic_cycles = st.dynamic_cycles;
            for (const auto& c : st.culprits) {
                CalcCulprit cc{c.cause, c.cycles_min, c.cycles_max, std::nullopt};
                if (c.instruction != kNoInstruction) cc.instruction = in[c.instruction].address;
                ci.culprits.push_back(cc);
            }
            cb.samples += samples[k];
            proc.instructions.push_back(std::move(ci));
        }
        if (f > 0) cb.actual_cpi = static_cast<double>(cb.samples) / f / blk.count;
        weighted_best += f * timing[b].cycles;
        weighted_insns += f * blk.count;
        weighted_samples += static_cast<double>(cb.samples);
        proc.samples += cb.samples;
        if (input.details) proc.blocks.push_back(cb);
    }
    if (weighted_insns > 0) {
        proc.best_cpi = weighted_best / weighted_insns;
        proc.actual_cpi = weighted_samples / weighted_insns;
    }
    for (std::uint32_t e = 0; input.details && e < cfg.edges.size(); ++e)
        proc.edges.push_back({cfg.edges[e].from, cfg.edges[e].to, cfg.edges[e].kind, fc.edge_class[e],
                              est.edge_frequency[e] * period_cycles});
    return proc;
}

Result<CalcReport> run_calc(const store::EpochContents& contents, const CalcOptions& options, Symbolizer& symbolizer) {
    auto t0 = std::chrono::steady_clock::now();
    CalcReport report;
    report.epoch = contents.epoch;
    report.summary = options.summary;
    for (const auto& s : contents.skipped) report.warnings.push_back("skipped " + s);

    // The event: cycles when a hardware counter recorded them, else a clock.
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

    // Hardware-counted instructions, when recorded, feed the estimates too.
    const store::EventMeta* meta = nullptr;
    if (auto it = contents.meta.events.find(report.event); it != contents.meta.events.end()) meta = &it->second;
    for (const auto& p : contents.profiles)
        if (p.event == report.event) {
            if (p.period) report.period = p.period;
            for (const auto& oc : p.merged()) report.event_samples += oc.count;
        }
    if (report.period == 0 && meta) report.period = meta->period;
    if (report.period == 0) return Error("no sampling period recorded for " + report.event);

    if (report.event == "cycles") {
        report.period_cycles = static_cast<double>(report.period);
        report.clock_source = "hardware cycle counter: the period is in cycles";
        report.cpu_mhz = contents.meta.cpu_mhz;
    } else {
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
    }
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

    // Hardware-counted retired instructions, when recorded, per image.
    struct InstructionCounts {
        std::vector<store::OffsetCount> counts;  // merged over processes, by offset
        double period = 0;
    };
    std::map<store::ImageId, InstructionCounts> instruction_profiles;
    // Events that bound stall causes (culprits.h), per image.
    std::map<std::pair<store::ImageId, std::string>, InstructionCounts> bounding_profiles;
    bool kernel_sampled = false;
    for (const auto& p : contents.profiles) {
        if (p.event == "instructions" && p.period > 0)
            instruction_profiles[p.image] = {p.merged(), static_cast<double>(p.period)};
        if ((p.event == "branch-misses" || p.event == "cache-misses") && p.period > 0)
            bounding_profiles[{p.image, p.event}] = {p.merged(), static_cast<double>(p.period)};
        if (p.event == report.event && p.image.path == store::kKernelImage) kernel_sampled = true;
    }

    // Samples per procedure.
    std::vector<const store::ImageProfile*> images;
    std::vector<SampledProcedure> procs;
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
        std::size_t image_idx = images.size();
        images.push_back(&p);
        if (options.all && options.unsampled) {
            for (const auto& sym : table->symbols()) {
                if (sym.name.find("@plt") != std::string::npos) continue;
                auto key = std::make_pair(image_idx, sym.start);
                if (proc_index.emplace(key, procs.size()).second)
                    procs.push_back({image_idx, sym.name, sym.start, table->end_of(sym), {}, 0});
            }
        }
        for (const auto& oc : p.merged()) {
            const Symbol* sym = table->lookup(oc.offset);
            if (!sym) continue;
            auto key = std::make_pair(image_idx, sym->start);
            auto [it, inserted] = proc_index.emplace(key, procs.size());
            if (inserted) procs.push_back({image_idx, sym->name, sym->start, table->end_of(*sym), {}, 0});
            auto& sp = procs[it->second];
            sp.samples[oc.offset] += oc.count;
            sp.total += oc.count;
        }
    }

    std::vector<std::size_t> selected;
    if (options.all) {
        for (std::size_t i = 0; i < procs.size(); ++i) selected.push_back(i);
    } else {
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
            std::vector<std::string> near;
            for (const auto& p : procs)
                if (p.name.find(options.procedure) != std::string::npos && near.size() < 8) near.push_back(p.name);
            if (!near.empty()) {
                msg += "; sampled procedures with similar names:";
                for (const auto& n : near) msg += " " + n + ";";
                msg.pop_back();
            }
            return Error(msg);
        }
        if (selected.size() > 1) {
            std::string msg = "procedure name " + options.procedure + " matches " + std::to_string(selected.size()) +
                              " sampled procedures (name one exactly, or add --image):";
            for (std::size_t k = 0; k < selected.size(); ++k) {
                const auto& sp = procs[selected[k]];
                msg += (k ? "; " : " ") + sp.name + " in " + images[sp.image]->image.path + " (" +
                       std::to_string(sp.total) + " samples)";
            }
            return Error(msg);
        }
    }

    // Analyze, reading each image's bytes and lines once.
    std::map<std::size_t, std::unique_ptr<ImageBytes>> bytes_cache;
    std::map<std::size_t, std::unique_ptr<LineTable>> lines_cache;
    std::set<std::size_t> failed_images;
    std::map<std::pair<std::size_t, std::uint64_t>, bool> leaf_cache;  // (image, callee) -> leaf
    for (auto i : selected) {
        const auto& sp = procs[i];
        const store::ImageProfile& ip = *images[sp.image];
        if (failed_images.count(sp.image)) continue;
        if (!bytes_cache.count(sp.image)) {
            auto file = symbolizer.image_file(ip.image);
            if (!file) {
                report.warnings.push_back(ip.image.path + ": no readable copy of the image");
                failed_images.insert(sp.image);
                continue;
            }
            auto ib = ImageBytes::open(*file);
            if (!ib.ok()) {
                report.warnings.push_back(ib.error().message());
                failed_images.insert(sp.image);
                continue;
            }
            if (ib->machine() != 62 /* EM_X86_64 */) {
                report.warnings.push_back(ip.image.path + ": not x86-64 code; not analyzed");
                failed_images.insert(sp.image);
                continue;
            }
            bytes_cache[sp.image] = std::make_unique<ImageBytes>(std::move(ib).value());
            if (options.lines) lines_cache[sp.image] = std::make_unique<LineTable>(*file);
        }
        const auto& table = symbolizer.table(ip.image);
        ProcedureInput input;
        input.name = sp.name;
        input.start = sp.start;
        input.end = sp.end;
        input.image = bytes_cache[sp.image].get();
        input.samples = sp.samples;
        input.details = !options.summary;
        // The samples of [start, end) of a merged per-image profile.
        auto slice = [&sp](const InstructionCounts& ic, std::map<std::uint64_t, std::uint64_t>& out) {
            const auto& merged = ic.counts;
            auto lo = std::lower_bound(merged.begin(), merged.end(), sp.start,
                                       [](const store::OffsetCount& oc, std::uint64_t a) { return oc.offset < a; });
            for (auto it = lo; it != merged.end() && it->offset < sp.end; ++it) out[it->offset] += it->count;
        };
        if (auto ins = instruction_profiles.find(ip.image); ins != instruction_profiles.end()) {
            slice(ins->second, input.instruction_samples);
            input.instruction_period = ins->second.period;
        }
        for (const char* ev : {"branch-misses", "cache-misses"})
            if (auto bp = bounding_profiles.find({ip.image, ev}); bp != bounding_profiles.end()) {
                auto& profile = input.bounding_events[ev];
                slice(bp->second, profile.samples);
                profile.period = bp->second.period;
            }
        input.kernel_sampled = kernel_sampled;
        input.name_at = [&table](std::uint64_t a) -> std::string {
            const Symbol* s = table->lookup(a);
            return s && s->start == a ? s->name : std::string();
        };
        // Decoded once per image and callee, and only for calls that a
        // stall follows.
        input.leaf_callee = [&table, &leaf_cache, image_bytes = input.image, key = sp.image](std::uint64_t a) {
            auto [it, fresh] = leaf_cache.emplace(std::make_pair(key, a), false);
            if (fresh) {
                const Symbol* s = table->lookup(a);
                it->second = s && s->start == a && is_leaf_function(*image_bytes, a, table->end_of(*s));
            }
            return it->second;
        };
        auto proc = analyze_procedure(input, model, report.period_cycles);
        if (!proc.ok()) {
            report.warnings.push_back(proc.error().message());
            continue;
        }
        proc->image = ip.image.path;
        proc->build_id = ip.image.build_id;
        if (options.all) {
            auto it = std::find_if(report.images.begin(), report.images.end(),
                                   [&](const CalcImageSummary& s) { return s.image == ip.image.path && s.build_id == ip.image.build_id; });
            if (it == report.images.end()) {
                report.images.push_back({ip.image.path, ip.image.build_id, 0, {}});
                it = std::prev(report.images.end());
            }
            it->procedures += 1;
            it->stalls.add(proc->stalls);
        }
        if (options.summary) {
            report.analyzed_bytes += sp.end - sp.start;
            report.procedures.push_back(std::move(proc).value());
            continue;
        }
        if (auto lt = lines_cache.find(sp.image); lt != lines_cache.end())
            for (auto& ci : proc->instructions) std::tie(ci.file, ci.line) = lt->second->at(ci.address);
        report.analyzed_bytes += sp.end - sp.start;
        report.procedures.push_back(std::move(proc).value());
    }
    if (report.procedures.empty() && !options.all && !report.warnings.empty())
        return Error(report.warnings.back());
    std::stable_sort(report.procedures.begin(), report.procedures.end(),
                     [](const CalcProcedure& a, const CalcProcedure& b) { return a.samples > b.samples; });
    report.analysis_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return report;
}

// ---------------------------------------------------------------------------
// Output

namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string count_text(double v) {
    if (v >= 1e15) return fmt("%.3g", v);
    return fmt("%.0f", v);
}

// DCPI Figure 4's lines for a tally: (label, min %, max %), with "" labels
// for separators. Percentages are of the cycles tallied.
struct SummaryLine {
    std::string_view label;  // a literal: built per procedure, so no allocation
    double min = 0, max = 0;
    bool range = false;
    const char* key = nullptr;  // JSON key
};

std::vector<SummaryLine> summary_lines(const StallSummary& s) {
    std::vector<SummaryLine> out;
    out.reserve(2 * kStallCauses + 16);
    const double total = s.total_cycles > 0 ? s.total_cycles : 1;
    auto pct = [total](double v) {
        double p = 100.0 * v / total;
        return std::abs(p) < 0.05 ? 0.0 : p;  // no "-0.0%"
    };
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        auto cause = static_cast<StallCause>(c);
        if (!is_dynamic(cause) || cause == StallCause::kUnexplained) continue;
        out.push_back({stall_cause_title(cause), pct(s.min[c]), pct(s.max[c]), true, stall_cause_name(cause)});
    }
    const auto u = static_cast<std::size_t>(StallCause::kUnexplained);
    out.push_back({"", 0, 0, false, nullptr});
    out.push_back({"Unexplained stall", pct(s.min[u]), pct(s.max[u]), true, "unexplained_stall"});
    out.push_back({"Unexplained gain", pct(s.unexplained_gain), pct(s.unexplained_gain), true, "unexplained_gain"});
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Subtotal dynamic", pct(s.dynamic_stall()), 0, false, "subtotal_dynamic"});
    out.push_back({"", 0, 0, false, nullptr});
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        auto cause = static_cast<StallCause>(c);
        if (is_dynamic(cause)) continue;
        out.push_back({stall_cause_title(cause), pct(s.min[c]), 0, false,
                       cause == StallCause::kStaticDivider ? "divider_latency" : stall_cause_name(cause)});
    }
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Subtotal static", pct(s.static_stall()), 0, false, "subtotal_static"});
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Total stall", pct(s.dynamic_stall() + s.static_stall()), 0, false, "total_stall"});
    out.push_back({"Execution", pct(s.execution), 0, false, "execution"});
    out.push_back({"Net sampling error", pct(s.sampling_error), 0, false, "net_sampling_error"});
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Total tallied",
                   pct(s.execution + s.static_stall() + s.dynamic_stall() + s.sampling_error), 0, false,
                   "total_tallied"});
    return out;
}

void render_summary(std::ostringstream& o, const StallSummary& s, std::uint64_t event_samples) {
    char buf[200];
    const double insns = s.executed_instructions;
    auto cpi = [insns](double cycles) { return insns > 0 ? fmt("%.2f", cycles / insns) : std::string("n/a"); };
    std::snprintf(buf, sizeof buf, "*** Best-case %.0f/%.0f = %s CPI\n", s.best_cycles, insns, cpi(s.best_cycles).c_str());
    o << buf;
    std::snprintf(buf, sizeof buf, "*** Actual    %.0f/%.0f = %s CPI\n", s.total_cycles - s.sampling_error, insns,
                  cpi(s.total_cycles - s.sampling_error).c_str());
    o << buf << "***\n";
    for (const auto& l : summary_lines(s)) {
        if (l.label.empty()) {
            o << "***\n";
        } else if (l.label == "-") {
            o << "*** " << std::string(52, '-') << "\n";
        } else if (l.range) {
            std::snprintf(buf, sizeof buf, "*** %-34.*s %6.1f%% to %6.1f%%\n", static_cast<int>(l.label.size()),
                          l.label.data(), l.min, l.max);
            o << buf;
        } else {
            std::snprintf(buf, sizeof buf, "*** %-34.*s %6.1f%%\n", static_cast<int>(l.label.size()), l.label.data(),
                          l.min);
            o << buf;
        }
    }
    double share = event_samples ? 100.0 * static_cast<double>(s.samples) / static_cast<double>(event_samples) : 0;
    std::snprintf(buf, sizeof buf, "*** (%" PRIu64 " samples, %.1f%% of all samples)\n", s.samples, share);
    o << buf;
}

nlohmann::json summary_json(const StallSummary& s, std::uint64_t event_samples) {
    using nlohmann::json;
    const double insns = s.executed_instructions;
    json j = {{"samples", s.samples},
              {"share_of_all_samples", event_samples ? static_cast<double>(s.samples) / static_cast<double>(event_samples) : 0.0},
              {"total_cycles", s.total_cycles},
              {"best_case_cycles", s.best_cycles},
              {"executed_instructions", insns},
              {"best_cpi", insns > 0 ? json(s.best_cycles / insns) : json(nullptr)},
              {"actual_cpi", insns > 0 ? json((s.total_cycles - s.sampling_error) / insns) : json(nullptr)}};
    json dynamic = json::object(), stat = json::object(), totals = json::object();
    bool in_static = false;
    for (const auto& l : summary_lines(s)) {
        if (!l.key) continue;
        std::string key = l.key;
        if (key == "subtotal_dynamic") in_static = true;
        if (l.range)
            dynamic[key] = {{"min_percent", l.min}, {"max_percent", l.max}};
        else if (in_static && key != "subtotal_dynamic" && key.rfind("subtotal", 0) != 0 && key != "total_stall" &&
                 key != "execution" && key != "net_sampling_error" && key != "total_tallied")
            stat[key] = l.min;
        else
            totals[key] = l.min;
    }
    j["dynamic"] = std::move(dynamic);
    j["static"] = std::move(stat);
    for (auto& [k, v] : totals.items()) j[k + "_percent"] = v;
    return j;
}

// Stalls shown in the listing: at least a cycle per execution, on an
// instruction with a visible share of the procedure's samples.
bool shows_stall(const CalcInstruction& ci, std::uint64_t procedure_samples) {
    return ci.samples * 200 >= procedure_samples && ci.samples >= 10 &&
           std::max(ci.dynamic_cycles, 0.0) + ci.static_cycles >= 1.0;
}

// The bubble letters of an instruction's culprits (dynamic first), each once.
std::string culprit_letters(const CalcInstruction& ci) {
    std::string letters;
    for (const auto& c : ci.culprits)
        if (letters.find(stall_cause_letter(c.cause)) == std::string::npos) letters += stall_cause_letter(c.cause);
    return letters;
}

std::string culprit_column(const CalcInstruction& ci) {
    std::string out;
    for (const auto& c : ci.culprits) {
        if (!c.instruction) continue;
        std::string item = std::string(1, stall_cause_letter(c.cause)) + "@" + hex(*c.instruction);
        if (out.find(item) == std::string::npos) out += (out.empty() ? "" : " ") + item;
    }
    return out;
}

std::string source_text(const CalcInstruction& ci) {
    if (ci.file.empty()) return "";
    return std::filesystem::path(ci.file).filename().string() + ":" + std::to_string(ci.line);
}

}  // namespace

std::string render_calc_text(const CalcReport& r) {
    std::ostringstream o;
    o << "Event " << r.event << ", period " << r.period << (is_clock_event(r.event) ? " ns" : "") << " = "
      << fmt("%.0f", r.period_cycles) << " cycles per sample";
    if (is_clock_event(r.event))
        o << " at " << fmt("%.1f", r.cpu_mhz) << " MHz (clock rate from " << r.clock_source
          << ").\nNo hardware cycle counter: cycles are samples x period x clock rate, so executions and CPI\n"
             "scale with that clock rate.";
    o << "\nMachine model " << r.machine << " (" << r.machine_source << ");\nsamples land "
      << (r.sample_skid == 0   ? std::string("on the instruction that")
          : r.sample_skid == 1 ? std::string("one instruction after the one that")
                               : std::to_string(r.sample_skid) + " instructions after the one that")
      << " kept retirement waiting (timer interrupts\non this core), and Min/CPI are charged the same way.\n";
    if (r.summary && r.images.empty()) {
        for (const auto& p : r.procedures) {
            o << "\n" << p.name << "  (" << p.image << ")\n";
            render_summary(o, p.stalls, r.event_samples);
        }
        return o.str();
    }
    if (r.summary) {
        o << "\n" << r.procedures.size() << " procedures, " << r.analyzed_bytes << " bytes of code analyzed in "
          << fmt("%.2f", r.analysis_seconds) << " s\n\n";
        char head[200];
        std::snprintf(head, sizeof head, "%9s %14s %8s %8s %7s  %s\n", "Samples", "Calls (est.)", "Best CPI", "CPI",
                      "Classes", "Procedure (image)");
        o << head;
        for (const auto& p : r.procedures) {
            char line[160];
            std::snprintf(line, sizeof line, "%9" PRIu64 " %14s %8.2f %8s %7u  ", p.samples,
                          count_text(p.invocations).c_str(), p.best_cpi,
                          p.actual_cpi ? fmt("%.2f", *p.actual_cpi).c_str() : "-", p.frequency_classes);
            o << line << p.name << (p.missing_edges ? " [missing edges]" : "") << "  ("
              << std::filesystem::path(p.image).filename().string() << ")\n";
        }
        for (const auto& im : r.images) {
            o << "\nImage " << im.image << " (" << im.procedures << " procedures)\n";
            render_summary(o, im.stalls, r.event_samples);
        }
        return o.str();
    }
    o << "\nBubbles above an instruction show its stall (one line per cycle per execution, at most 8)\n"
         "and every cause not ruled out; the Culprits column names the instructions behind them.\n";
    std::string legend;
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        auto cause = static_cast<StallCause>(c);
        legend += std::string(legend.empty() ? "" : ", ") + stall_cause_letter(cause) + " " + stall_cause_title(cause);
        if (c == static_cast<std::size_t>(StallCause::kUnexplained)) {
            o << "Dynamic: " << legend << "\n";
            legend.clear();
        }
    }
    o << "Static:  " << legend << "\n";
    for (const auto& p : r.procedures) {
        o << "\n" << p.name << "  (" << p.image << ")  " << p.samples << " samples, "
          << count_text(p.invocations) << " calls (est.), " << p.blocks.size() << " blocks, "
          << p.frequency_classes << " frequency classes";
        if (p.jump_tables) o << ", " << p.jump_tables << " jump table" << (p.jump_tables > 1 ? "s" : "");
        o << "\n*** Procedure best-case CPI " << fmt("%.2f", p.best_cpi) << ", actual CPI "
          << (p.actual_cpi ? fmt("%.2f", *p.actual_cpi) : std::string("n/a")) << "\n";
        if (p.missing_edges) {
            o << "*** CFG is missing edges (unresolved indirect jump";
            for (auto a : p.unresolved_jumps) o << " " << hex(a);
            o << "): one frequency class per block, no propagation\n";
        }
        for (const auto& b : p.blocks) {
            if (b.samples == 0 && b.executions == 0) continue;  // never seen running
            o << "\nBlock " << b.index << " at " << hex(b.address) << " (class " << b.frequency_class << ", "
              << estimate_source_name(b.source) << (b.steady_state ? ", loop steady state" : "") << ")\n";
            o << "*** Best-case " << fmt("%.1f", b.best_cycles) << "/" << b.count << " = "
              << fmt("%.2f", b.best_cpi) << " CPI\n";
            if (b.actual_cpi)
                o << "*** Actual    " << fmt("%.1f", *b.actual_cpi * b.count) << "/" << b.count << " = "
                  << fmt("%.2f", *b.actual_cpi) << " CPI  (" << count_text(b.executions) << " executions, "
                  << confidence_name(b.confidence) << " confidence)\n";
            else
                o << "*** Actual    n/a (no executions estimated)\n";
            char head[160];
            std::snprintf(head, sizeof head, "%-18s %-40s %9s %5s %14s %9s %-6s %-16s %s\n", "Address",
                          "Instruction", "Samples", "Min", "Executions", "CPI", "Conf", "Source", "Culprits");
            o << head;
            for (std::uint32_t k = b.first; k < b.first + b.count; ++k) {
                const auto& ci = p.instructions[k];
                std::string text = ci.text.size() > 40 ? ci.text.substr(0, 39) + "~" : ci.text;
                std::string min = ci.best_known ? fmt("%.0f", ci.best_cycles) : "?";
                std::string cpi = ci.cpi ? fmt("%.1fcy", *ci.cpi) : "-";
                bool stalled = shows_stall(ci, p.samples);
                if (stalled) {
                    double stall = std::max(ci.dynamic_cycles, 0.0) + ci.static_cycles;
                    int lines = std::clamp(static_cast<int>(std::lround(stall)), 1, 8);
                    std::string letters = culprit_letters(ci);
                    for (int l = 0; l < lines; ++l) {
                        o << std::string(19, ' ') << letters;
                        if (l + 1 == lines) o << "  " << fmt("%.1f", stall) << " stall cycles per execution";
                        o << "\n";
                    }
                }
                char line[400];
                std::snprintf(line, sizeof line, "%-18s %-40s %9" PRIu64 " %5s %14s %9s %-6s %-16s %s",
                              hex(ci.address).c_str(), text.c_str(), ci.samples, min.c_str(),
                              count_text(ci.executions).c_str(), cpi.c_str(), confidence_name(ci.confidence),
                              source_text(ci).c_str(), stalled ? culprit_column(ci).c_str() : "");
                std::string ls = line;
                while (!ls.empty() && ls.back() == ' ') ls.pop_back();
                o << ls << "\n";
            }
        }
    }
    return o.str();
}

namespace {

// One procedure's object of the ecpi.calc schema.
nlohmann::json procedure_json(const CalcReport& r, const CalcProcedure& p) {
    using nlohmann::json;
    auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    auto block_id = [](std::uint32_t b) -> json {
        if (b == kEntryBlock) return "entry";
        if (b == kExitBlock) return "exit";
        return b;
    };
    json jp = {{"name", p.name},
               {"image", p.image},
               {"build_id", p.build_id},
               {"start", hex(p.start)},
               {"end", hex(p.end)},
               {"samples", p.samples},
               {"invocations", p.invocations},
               {"best_cpi", p.best_cpi},
               {"actual_cpi", opt(p.actual_cpi)},
               {"frequency_classes", p.frequency_classes},
               {"missing_edges", p.missing_edges},
               {"jump_tables", p.jump_tables},
               {"summary", summary_json(p.stalls, r.event_samples)}};
    json unresolved = json::array();
    for (auto a : p.unresolved_jumps) unresolved.push_back(hex(a));
    jp["unresolved_jumps"] = std::move(unresolved);
    json blocks = json::array();
    json insns = json::array();
    for (const auto& b : p.blocks) {
        blocks.push_back({{"index", b.index},
                          {"address", hex(b.address)},
                          {"instructions", b.count},
                          {"frequency_class", b.frequency_class},
                          {"samples", b.samples},
                          {"executions", b.executions},
                          {"best_cycles", b.best_cycles},
                          {"best_cpi", b.best_cpi},
                          {"actual_cpi", opt(b.actual_cpi)},
                          {"confidence", confidence_name(b.confidence)},
                          {"estimate", estimate_source_name(b.source)},
                          {"steady_state", b.steady_state}});
        for (std::uint32_t k = b.first; k < b.first + b.count; ++k) {
            const auto& ci = p.instructions[k];
            json ji = {{"address", hex(ci.address)},
                       {"block", b.index},
                       {"instruction", ci.text},
                       {"samples", ci.samples},
                       {"best_cycles", ci.best_known ? json(ci.best_cycles) : json(nullptr)},
                       {"executions", ci.executions},
                       {"cpi", opt(ci.cpi)},
                       {"confidence", confidence_name(ci.confidence)}};
            if (!ci.file.empty()) ji["source"] = {{"file", ci.file}, {"line", ci.line}};
            ji["static_cycles"] = ci.static_cycles;
            ji["dynamic_cycles"] = ci.dynamic_cycles;
            json culprits = json::array();
            for (const auto& c : ci.culprits) {
                json jc = {{"cause", c.cause == StallCause::kStaticDivider ? "divider" : stall_cause_name(c.cause)},
                           {"kind", is_dynamic(c.cause) ? "dynamic" : "static"},
                           {"cycles_min", c.cycles_min},
                           {"cycles_max", c.cycles_max}};
                if (c.instruction) jc["instruction"] = hex(*c.instruction);
                culprits.push_back(std::move(jc));
            }
            ji["culprits"] = std::move(culprits);
            insns.push_back(std::move(ji));
        }
    }
    jp["blocks"] = std::move(blocks);
    jp["instructions"] = std::move(insns);
    json edges = json::array();
    for (const auto& e : p.edges)
        edges.push_back({{"from", block_id(e.from)},
                         {"to", block_id(e.to)},
                         {"kind", edge_kind_name(e.kind)},
                         {"frequency_class", e.frequency_class},
                         {"executions", e.executions}});
    jp["edges"] = std::move(edges);
    return jp;
}

// Everything of the ecpi.calc document but the procedures (an empty list).
nlohmann::json calc_json_shell(const CalcReport& r) {
    using nlohmann::json;
    json j = {{"schema", "ecpi.calc"},
              {"version", 2},
              {"database", r.database},
              {"epoch", r.epoch},
              {"event", r.event},
              {"period", r.period},
              {"period_cycles", r.period_cycles},
              {"cpu_mhz", r.cpu_mhz},
              {"clock_source", r.clock_source},
              {"hardware_cycles", r.event == "cycles"},
              {"machine", r.machine},
              {"machine_source", r.machine_source},
              {"sample_skid", r.sample_skid},
              {"summary", r.summary},
              {"analysis_seconds", r.analysis_seconds},
              {"analyzed_bytes", r.analyzed_bytes}};
    j["procedures"] = json::array();
    json images = json::array();
    for (const auto& im : r.images)
        images.push_back({{"image", im.image},
                          {"build_id", im.build_id},
                          {"procedures", im.procedures},
                          {"summary", summary_json(im.stalls, r.event_samples)}});
    j["images"] = std::move(images);
    j["event_samples"] = r.event_samples;
    j["warnings"] = r.warnings;
    return j;
}

}  // namespace

nlohmann::json render_calc_json(const CalcReport& r) {
    nlohmann::json j = calc_json_shell(r);
    auto& procs = j["procedures"];
    for (const auto& p : r.procedures) procs.push_back(procedure_json(r, p));
    return j;
}

void write_calc_json(const CalcReport& r, std::ostream& out) {
    // The same text as render_calc_json(r).dump(2), one procedure at a time:
    // a whole image's procedures as one tree took 400 MB and a third of
    // `calc --all`'s time.
    const std::string text = calc_json_shell(r).dump(2);
    const std::string marker = "\n  \"procedures\": []";
    auto at = text.find(marker);
    if (at == std::string::npos || r.procedures.empty()) {
        out << text;
        return;
    }
    out.write(text.data(), static_cast<std::streamsize>(at));
    out << "\n  \"procedures\": [";
    bool first = true;
    for (const auto& p : r.procedures) {
        std::string one = procedure_json(r, p).dump(2);
        out << (first ? "\n    " : ",\n    ");
        first = false;
        std::size_t from = 0;
        for (auto nl = one.find('\n'); nl != std::string::npos; nl = one.find('\n', from)) {
            out.write(one.data() + from, static_cast<std::streamsize>(nl + 1 - from));
            out << "    ";
            from = nl + 1;
        }
        out.write(one.data() + from, static_cast<std::streamsize>(one.size() - from));
    }
    out << "\n  ]";
    const std::size_t rest = at + marker.size();
    out.write(text.data() + rest, static_cast<std::streamsize>(text.size() - rest));
}

}  // namespace ecpi::analyze
