// `ecpi export`: the symbolized model of one epoch, and the folded,
// speedscope and JSON renderings of it (pprof: pprof.cpp; html:
// flamegraph_html.cpp).
#include "ecpi/analyze/reports/export.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ecpi/analyze/symbols/debug_info.h"
#include "ecpi/analyze/text_table.h"
#include "ecpi/terminal_text.h"

namespace ecpi::analyze {

using detail::format;
using detail::round4;

namespace {

constexpr const char* kSpeedscopeSchema = "https://www.speedscope.app/file-format-schema.json";

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

bool is_clock(const std::string& event) { return event.ends_with("-clock"); }

class ModelBuilder {
public:
    ModelBuilder(ExportModel& model, const ExportOptions& options, Symbolizer& symbolizer)
        : model_(model), options_(options), symbolizer_(symbolizer), infos_(symbolizer) {}

    std::uint32_t image(const store::ImageId& id) {
        auto [it, inserted] = images_.try_emplace(id, static_cast<std::uint32_t>(model_.images.size()));
        if (inserted) model_.images.push_back(id);
        return it->second;
    }

    std::uint32_t location(const store::ImageId& id, std::uint64_t address) {
        std::uint32_t img = image(id);
        auto [it, inserted] =
            locations_.try_emplace({img, address}, static_cast<std::uint32_t>(model_.locations.size()));
        if (!inserted) return it->second;
        ExportLocation loc;
        loc.image = img;
        loc.address = address;
        symbolize(id, img, loc);
        model_.locations.push_back(std::move(loc));
        return it->second;
    }

private:
    std::uint32_t function(const store::ImageId& id, std::uint32_t img, const std::string& name, bool symbolized) {
        auto [it, inserted] =
            functions_.try_emplace({image_key(id), name}, static_cast<std::uint32_t>(model_.functions.size()));
        if (inserted) {
            ExportFunction f;
            f.name = name;
            f.image = img;
            f.kernel = id.path == store::kKernelImage;
            f.symbolized = symbolized;
            model_.functions.push_back(std::move(f));
        }
        return it->second;
    }

    static void set_decl(ExportFunction& f, const SourceFrame& frame) {
        if (f.file.empty() && !frame.decl_file.empty()) {
            f.file = frame.decl_file;
            f.start_line = frame.decl_line;
        }
    }

    void symbolize(const store::ImageId& id, std::uint32_t img, ExportLocation& loc) {
        const Symbol* sym = nullptr;
        if (id.path != store::kUnknownImage) {
            const Result<SymbolTable>& table = symbolizer_.table(id);
            if (table.ok()) {
                sym = table->lookup(loc.address);
            } else if (warned_.insert(id).second) {
                std::string what = id.path;
                if (!id.build_id.empty()) what += " (build id " + id.build_id + ")";
                model_.warnings.push_back("no symbols for " + what + ": " + table.error().message());
            }
        }
        if (sym == nullptr) {
            loc.lines.push_back({function(id, img, unsymbolized_name(id), false), 0});
            return;
        }
        const std::uint32_t outer = function(id, img, sym->name, true);
        std::vector<SourceFrame> frames;
        if (options_.source_lines && id.path != store::kKernelImage) {
            if (const DebugInfo* info = infos_.get(id)) frames = info->frames_at(loc.address);
        }
        // DWARF's outermost frame is the symbol's function: the symbol table
        // names it (as every other report does); DWARF adds lines and inlines.
        int outer_line = 0;
        if (!frames.empty() && !frames.back().inlined) {
            outer_line = frames.back().line;
            set_decl(model_.functions[outer], frames.back());
            frames.pop_back();
        }
        for (const auto& frame : frames) {
            const std::uint32_t fn = function(id, img, frame.function, true);
            set_decl(model_.functions[fn], frame);
            loc.lines.push_back({fn, frame.line});
        }
        loc.lines.push_back({outer, outer_line});
    }

    ExportModel& model_;
    const ExportOptions& options_;
    Symbolizer& symbolizer_;
    DebugInfoCache infos_;
    std::map<store::ImageId, std::uint32_t> images_;
    std::map<std::pair<std::string, std::string>, std::uint32_t> functions_;
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> locations_;
    std::set<store::ImageId> warned_;
};

// Frame i of a stack (leaf first, kernel frames before user frames) is a
// return address unless it is the leaf of its half: index 0, or the first
// user frame after kernel frames (the user pc at the kernel entry).
bool is_return_address(const store::StackProfile& sp, const std::vector<store::StackFrame>& frames,
                       std::size_t i) {
    if (i == 0) return false;
    auto kernel = [&](std::size_t k) {
        std::uint32_t img = frames[k].image;
        return img < sp.images.size() && sp.images[img].path == store::kKernelImage;
    };
    return !(kernel(i - 1) && !kernel(i));
}

std::string process_frame_name(const ExportModel& model, std::uint32_t pid) {
    if (pid == store::kAllProcesses) return "[all processes]";
    auto it = model.meta.processes.find(pid);
    if (it != model.meta.processes.end() && !it->second.comm.empty()) return it->second.comm;
    return format("pid %u", pid);
}

// Folded lines separate frames with ';' and the count with the last space.
// Names are escaped like every text report's (control bytes as \x1b, ...).
std::string folded_name(std::string name) {
    for (auto& c : name) {
        if (c == ';') c = ':';
    }
    return escape_for_terminal(name);
}

bool sample_less(const ExportSample& a, const ExportSample& b) {
    return std::tie(a.pid, a.locations) < std::tie(b.pid, b.locations);
}

// The events to export: --event (each one present), else every event.
Result<std::vector<std::string>> choose_events(const LoadedProfile& profile, const ExportOptions& options) {
    std::vector<std::string> present = events_in(profile.contents);
    if (present.empty()) {
        return Error(profile.source.spec + " holds no samples (epoch " + profile.source.epoch + " of " +
                     profile.source.database.string() + " is empty)");
    }
    std::vector<std::string> events;
    for (const auto& e : options.events) {
        if (std::find(present.begin(), present.end(), e) == present.end())
            return Error(profile.source.spec + " has no " + e + " samples (it has " + join(present, ", ") + ")");
        if (std::find(events.begin(), events.end(), e) == events.end()) events.push_back(e);
    }
    if (events.empty()) events = present;
    return events;
}

bool wanted(const ExportOptions& options, std::uint32_t pid) { return !options.pid || pid == *options.pid; }

// The event's period and lost count, whether it has call stacks, and the
// samples its flat profile holds (for the pid filter).
std::uint64_t start_event(const store::EpochContents& contents, const ExportOptions& options, ExportEvent& ev) {
    if (auto it = contents.meta.events.find(ev.name); it != contents.meta.events.end()) {
        ev.period = it->second.period;
        ev.lost = it->second.lost;
    }
    std::uint64_t flat_total = 0;
    for (const auto& p : contents.profiles) {
        if (p.event != ev.name) continue;
        if (ev.period == 0) ev.period = p.period;
        for (const auto& proc : p.processes)
            if (wanted(options, proc.pid))
                for (const auto& oc : proc.counts) flat_total += oc.count;
    }
    for (const auto& sp : contents.stacks)
        if (sp.event == ev.name && !sp.stacks.empty()) ev.stacks = true;
    return flat_total;
}

// Call stacks (-g): one sample per distinct (pid, stack).
void add_stack_samples(const store::EpochContents& contents, const ExportOptions& options, ModelBuilder& builder,
                       ExportEvent& ev, ExportModel& model) {
    std::uint64_t no_frames = 0;
    for (const auto& sp : contents.stacks) {
        if (sp.event != ev.name) continue;
        if (ev.period == 0) ev.period = sp.period;
        for (const auto& stack : sp.stacks) {
            if (!wanted(options, stack.pid)) continue;
            if (stack.frames.empty()) {
                no_frames += stack.count;
                continue;
            }
            ExportSample sample;
            sample.pid = stack.pid;
            sample.count = stack.count;
            for (std::size_t i = 0; i < stack.frames.size(); ++i) {
                const store::StackFrame& frame = stack.frames[i];
                store::ImageId id = frame.image < sp.images.size() ? sp.images[frame.image]
                                                                   : store::ImageId{store::kUnknownImage, ""};
                std::uint64_t address = frame.offset;
                if (is_return_address(sp, stack.frames, i) && address > 0) --address;
                sample.locations.push_back(builder.location(id, address));
            }
            ev.samples.push_back(std::move(sample));
        }
    }
    if (no_frames > 0) {
        model.warnings.push_back(format("%llu %s samples have an empty call stack and are left out",
                                        static_cast<unsigned long long>(no_frames), ev.name.c_str()));
    }
}

// Flat profiles: one single-frame sample per (pid, image, offset). Returns
// the samples left out because they have no per-process breakdown
// (kAllProcesses sections cannot be split by pid).
std::uint64_t add_flat_samples(const store::EpochContents& contents, const ExportOptions& options,
                               ModelBuilder& builder, ExportEvent& ev) {
    std::uint64_t merged_left_out = 0;
    for (const auto& p : contents.profiles) {
        if (p.event != ev.name) continue;
        for (const auto& proc : p.processes) {
            if (!wanted(options, proc.pid)) {
                if (proc.pid == store::kAllProcesses)
                    for (const auto& oc : proc.counts) merged_left_out += oc.count;
                continue;
            }
            for (const auto& oc : proc.counts) {
                ExportSample sample;
                sample.pid = proc.pid;
                sample.count = oc.count;
                sample.locations.push_back(builder.location(p.image, oc.offset));
                ev.samples.push_back(std::move(sample));
            }
        }
    }
    return merged_left_out;
}

// Sorted samples (files are read in directory order: sort for a
// deterministic output), the event's totals, and a warning when the call
// stacks and the flat profile disagree.
void finish_event(std::uint64_t flat_total, ExportEvent& ev, ExportModel& model) {
    std::sort(ev.samples.begin(), ev.samples.end(), sample_less);
    for (const auto& sample : ev.samples) {
        ev.total += sample.count;
        const ExportLocation& leaf = model.locations[sample.locations.front()];
        if (model.images[leaf.image].path == store::kUnknownImage) ev.unknown += sample.count;
    }
    if (ev.stacks && ev.total != flat_total) {
        model.warnings.push_back(format("%s: the call stacks hold %llu samples but the flat profile %llu",
                                        ev.name.c_str(), static_cast<unsigned long long>(ev.total),
                                        static_cast<unsigned long long>(flat_total)));
    }
}

}  // namespace

Result<ExportModel> build_export_model(const LoadedProfile& profile, const ExportOptions& options,
                                       Symbolizer& symbolizer) {
    const store::EpochContents& contents = profile.contents;
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> events, choose_events(profile, options));

    ExportModel model;
    model.database = profile.source.database.string();
    model.epoch = profile.source.epoch;
    model.meta = contents.meta;
    model.pid = options.pid;
    for (const auto& s : contents.skipped) model.warnings.push_back("skipped " + s);
    ModelBuilder builder(model, options, symbolizer);
    std::uint64_t merged_left_out = 0;
    for (const auto& name : events) {
        ExportEvent ev;
        ev.name = name;
        const std::uint64_t flat_total = start_event(contents, options, ev);
        if (ev.stacks) add_stack_samples(contents, options, builder, ev, model);
        else merged_left_out += add_flat_samples(contents, options, builder, ev);
        finish_event(flat_total, ev, model);
        model.events.push_back(std::move(ev));
    }
    if (merged_left_out > 0) {
        model.warnings.push_back(format("%llu samples recorded without a per-process breakdown are left out by "
                                        "the pid filter",
                                        static_cast<unsigned long long>(merged_left_out)));
    }
    return model;
}

Result<std::size_t> export_event_index(const ExportModel& model, const std::string& event) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < model.events.size(); ++i) {
        if (model.events[i].name == event) return i;
        names.push_back(model.events[i].name);
    }
    return Error("no " + event + " samples in this profile (it has " + join(names, ", ") + ")");
}

FlameGraphData flame_stacks(const ExportModel& model, std::size_t event_index) {
    FlameGraphData data;
    const ExportEvent& ev = model.events.at(event_index);
    data.event = ev.name;
    std::map<std::tuple<int, std::string, std::string>, std::uint32_t> frame_index;  // (kind, name, image)
    auto frame = [&](FlameFrame f) {
        auto key = std::make_tuple(static_cast<int>(f.kind), f.name, f.image);
        auto [it, inserted] = frame_index.try_emplace(key, static_cast<std::uint32_t>(data.frames.size()));
        if (inserted) data.frames.push_back(std::move(f));
        return it->second;
    };
    std::map<std::vector<std::uint32_t>, std::uint64_t> merged;
    for (const auto& sample : ev.samples) {
        std::vector<std::uint32_t> stack;
        stack.push_back(frame({process_frame_name(model, sample.pid), "", FlameFrame::Kind::kProcess, "", 0}));
        for (auto it = sample.locations.rbegin(); it != sample.locations.rend(); ++it) {
            const ExportLocation& loc = model.locations[*it];
            const ExportFunction& fn = model.functions[loc.lines.back().function];
            stack.push_back(frame({fn.name, model.images[loc.image].path,
                                   fn.kernel ? FlameFrame::Kind::kKernel : FlameFrame::Kind::kUser, fn.file,
                                   fn.start_line}));
        }
        merged[std::move(stack)] += sample.count;
    }
    // Sorted by frame names (root first), so outputs do not depend on the
    // order frames were first seen.
    std::vector<std::pair<std::vector<std::string>, FlameStack>> sorted;
    for (auto& [stack, count] : merged) {
        std::vector<std::string> names;
        for (auto f : stack) names.push_back(data.frames[f].name);
        sorted.push_back({std::move(names), FlameStack{stack, count}});
    }
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
        return std::tie(a.first, a.second.frames) < std::tie(b.first, b.second.frames);
    });
    for (auto& [names, stack] : sorted) data.stacks.push_back(std::move(stack));
    return data;
}

std::vector<ProcedureTotals> procedure_totals(const ExportModel& model, std::size_t event_index) {
    const ExportEvent& ev = model.events.at(event_index);
    std::map<std::uint32_t, ProcedureTotals> totals;
    for (const auto& sample : ev.samples) {
        std::set<std::uint32_t> seen;  // recursion counts once in `total`
        for (std::size_t i = 0; i < sample.locations.size(); ++i) {
            std::uint32_t fn = model.locations[sample.locations[i]].lines.back().function;
            ProcedureTotals& t = totals[fn];
            t.function = fn;
            if (i == 0) t.self += sample.count;
            if (seen.insert(fn).second) t.total += sample.count;
        }
    }
    std::vector<ProcedureTotals> out;
    for (const auto& [fn, t] : totals) out.push_back(t);
    std::sort(out.begin(), out.end(), [&](const ProcedureTotals& a, const ProcedureTotals& b) {
        if (a.self != b.self) return a.self > b.self;
        if (a.total != b.total) return a.total > b.total;
        return model.functions[a.function].name < model.functions[b.function].name;
    });
    return out;
}

std::string render_folded(const ExportModel& model, std::size_t event_index) {
    FlameGraphData data = flame_stacks(model, event_index);
    // Frames that differ only by image fold into one line, as FlameGraph would.
    std::map<std::string, std::uint64_t> lines;
    for (const auto& stack : data.stacks) {
        std::string line;
        for (std::size_t i = 0; i < stack.frames.size(); ++i) {
            if (i > 0) line += ';';
            line += folded_name(data.frames[stack.frames[i]].name);
        }
        lines[line] += stack.count;
    }
    std::string out;
    for (const auto& [line, count] : lines) out += line + " " + detail::u64(count) + "\n";
    return out;
}

nlohmann::json render_speedscope(const ExportModel& model) {
    nlohmann::json frames = nlohmann::json::array();
    std::map<std::tuple<int, std::string, std::string>, std::size_t> shared;
    nlohmann::json profiles = nlohmann::json::array();
    for (std::size_t e = 0; e < model.events.size(); ++e) {
        const ExportEvent& ev = model.events[e];
        FlameGraphData data = flame_stacks(model, e);
        std::vector<std::size_t> remap;
        for (const auto& f : data.frames) {
            auto key = std::make_tuple(static_cast<int>(f.kind), f.name, f.image);
            auto [it, inserted] = shared.try_emplace(key, frames.size());
            if (inserted) {
                nlohmann::json frame = {{"name", f.name}};
                if (!f.file.empty()) frame["file"] = f.file;
                if (f.line != 0) frame["line"] = f.line;
                frames.push_back(std::move(frame));
            }
            remap.push_back(it->second);
        }
        // Clock events weigh in nanoseconds (samples x period); others in samples.
        const bool timed = is_clock(ev.name) && ev.period != 0;
        nlohmann::json samples = nlohmann::json::array();
        nlohmann::json weights = nlohmann::json::array();
        std::uint64_t end = 0;
        for (const auto& stack : data.stacks) {
            nlohmann::json s = nlohmann::json::array();
            for (auto f : stack.frames) s.push_back(remap[f]);  // root first, as speedscope wants
            samples.push_back(std::move(s));
            std::uint64_t w = timed ? stack.count * ev.period : stack.count;
            weights.push_back(w);
            end += w;
        }
        profiles.push_back({{"type", "sampled"},
                            {"name", ev.name},
                            {"unit", timed ? "nanoseconds" : "none"},
                            {"startValue", 0},
                            {"endValue", end},
                            {"samples", std::move(samples)},
                            {"weights", std::move(weights)}});
    }
    nlohmann::json doc = nlohmann::json::object();
    doc["$schema"] = kSpeedscopeSchema;
    doc["name"] = "ecpi " + model.database + " epoch " + model.epoch;
    doc["exporter"] = "ecpi";
    doc["activeProfileIndex"] = 0;
    doc["shared"] = {{"frames", std::move(frames)}};
    doc["profiles"] = std::move(profiles);
    return doc;
}

nlohmann::json render_export_json(const ExportModel& model) {
    nlohmann::json doc = nlohmann::json::object();
    doc["schema"] = "ecpi.export";
    doc["version"] = 1;
    doc["database"] = model.database;
    doc["epoch"] = model.epoch;
    doc["pid"] = model.pid ? nlohmann::json(*model.pid) : nlohmann::json(nullptr);
    doc["hostname"] = model.meta.hostname;
    doc["kernel_release"] = model.meta.kernel_release;
    doc["first_sample_unix"] = model.meta.first_sample_unix;
    doc["last_update_unix"] = model.meta.last_update_unix;
    nlohmann::json events = nlohmann::json::array();
    nlohmann::json totals = nlohmann::json::object();
    for (const auto& ev : model.events) {
        events.push_back(ev.name);
        totals[ev.name] = {{"samples", ev.total},
                           {"unknown", ev.unknown},
                           {"lost", ev.lost},
                           {"period", ev.period},
                           {"stacks", ev.stacks}};
    }
    doc["events"] = std::move(events);
    doc["totals"] = std::move(totals);

    nlohmann::json frames = nlohmann::json::array();
    for (const auto& fn : model.functions) {
        const store::ImageId& image = model.images[fn.image];
        nlohmann::json f = {{"procedure", fn.name},
                            {"image", image.path},
                            {"build_id", image.build_id},
                            {"kind", fn.kernel ? "kernel" : "user"},
                            {"symbolized", fn.symbolized}};
        f["file"] = fn.file.empty() ? nlohmann::json(nullptr) : nlohmann::json(fn.file);
        f["line"] = fn.start_line == 0 ? nlohmann::json(nullptr) : nlohmann::json(fn.start_line);
        frames.push_back(std::move(f));
    }
    doc["frames"] = std::move(frames);

    nlohmann::json procedures = nlohmann::json::object();
    nlohmann::json stacks = nlohmann::json::object();
    for (std::size_t e = 0; e < model.events.size(); ++e) {
        const ExportEvent& ev = model.events[e];
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& t : procedure_totals(model, e)) {
            const ExportFunction& fn = model.functions[t.function];
            rows.push_back({{"frame", t.function},
                            {"procedure", fn.name},
                            {"image", model.images[fn.image].path},
                            {"self", t.self},
                            {"self_percent", round4(percent_of(t.self, ev.total))},
                            {"total", t.total},
                            {"total_percent", round4(percent_of(t.total, ev.total))}});
        }
        procedures[ev.name] = std::move(rows);
        if (!ev.stacks) continue;
        // Stacks at procedure level, root first; identical ones merged.
        std::map<std::pair<std::uint32_t, std::vector<std::uint32_t>>, std::uint64_t> merged;
        for (const auto& sample : ev.samples) {
            std::vector<std::uint32_t> fns;
            for (auto it = sample.locations.rbegin(); it != sample.locations.rend(); ++it)
                fns.push_back(model.locations[*it].lines.back().function);
            merged[{sample.pid, std::move(fns)}] += sample.count;
        }
        nlohmann::json list = nlohmann::json::array();
        for (const auto& [key, count] : merged)
            list.push_back({{"pid", key.first}, {"frames", key.second}, {"count", count}});
        stacks[ev.name] = std::move(list);
    }
    doc["procedures"] = std::move(procedures);
    doc["stacks"] = std::move(stacks);

    nlohmann::json processes = nlohmann::json::object();
    for (const auto& [pid, meta] : model.meta.processes) {
        if (model.pid && pid != *model.pid) continue;
        processes[std::to_string(pid)] = {{"comm", meta.comm}, {"cmdline", meta.cmdline}};
    }
    doc["processes"] = std::move(processes);
    doc["warnings"] = model.warnings;
    return doc;
}

}  // namespace ecpi::analyze
