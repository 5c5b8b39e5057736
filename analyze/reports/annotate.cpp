// `ecpi annotate`: per-instruction samples of one procedure, its disassembly
// and its DWARF source positions, grouped into source blocks.
#include "ecpi/analyze/reports/annotate.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "ecpi/analyze/symbols/debug_info.h"
#include "ecpi/analyze/text_table.h"

namespace ecpi::analyze {

using detail::format;
using detail::round4;

namespace {

// A procedure whose symbol has no size and no following symbol would reach
// to the end of the address space; beyond this, the listing stops after the
// last sampled instruction.
constexpr std::uint64_t kMaxProcedureBytes = 1 << 20;

struct Position {
    std::string file;
    int line = 0;
    std::vector<std::string> inlined;
    std::string function;
    bool operator==(const Position& o) const {
        return file == o.file && line == o.line && inlined == o.inlined;
    }
};

std::string hex(std::uint64_t v) { return format("%llx", static_cast<unsigned long long>(v)); }

// Marks the `n` entries with the most samples (ties: the earlier), never a zero.
template <typename T>
void mark_hottest(std::vector<T>& items, std::size_t n) {
    std::vector<std::size_t> order(items.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return items[a].samples > items[b].samples; });
    for (std::size_t k = 0; k < order.size() && k < n; ++k)
        if (items[order[k]].samples > 0) items[order[k]].hot = true;
}

std::string file_label(const std::string& file) {
    std::string name = std::filesystem::path(file).filename().string();
    return name.empty() ? file : name;
}

// The event to annotate: --event, or the epoch's first; one it holds.
Result<std::string> choose_event(const LoadedProfile& profile, const AnnotateOptions& options) {
    std::vector<std::string> events = events_in(profile.contents);
    if (events.empty()) {
        return Error(profile.source.spec + " holds no samples (epoch " + profile.source.epoch + " is empty)");
    }
    std::string event = options.event.value_or(events.front());
    if (std::find(events.begin(), events.end(), event) == events.end()) {
        std::string have;
        for (const auto& e : events) have += (have.empty() ? "" : ", ") + e;
        return Error(profile.source.spec + " has no " + event + " samples (it has " + have + ")");
    }
    return event;
}

// The report's header: what was annotated, where, and its address range.
AnnotateReport start_report(const LoadedProfile& profile, const AnnotateOptions& options, const std::string& event,
                            const ProcedureSamples& ps) {
    AnnotateReport report;
    report.database = profile.source.database.string();
    report.epoch = profile.source.epoch;
    report.event = event;
    report.pid = options.pid;
    report.procedure = ps.procedure;
    report.image = ps.image.path;
    report.build_id = ps.image.build_id;
    report.samples = ps.samples;
    report.event_total = ps.event_total;
    report.warnings = ps.warnings;
    report.start = ps.start;
    report.end = ps.end;
    const std::uint64_t last_sampled = ps.counts.empty() ? ps.start : ps.counts.rbegin()->first;
    if (report.end <= report.start || report.end - report.start > kMaxProcedureBytes) {
        report.end = last_sampled + 16;
        report.notes.push_back("the symbol has no size: the listing stops after the last sampled instruction");
    }
    return report;
}

// Code and its disassembly; without them, one row per sampled address, so
// the counts are still shown.
std::vector<Instruction> read_instructions(const DebugInfo* info, const std::string& why, const ProcedureSamples& ps,
                                           AnnotateReport& report) {
    std::vector<Instruction> instructions;
    if (info == nullptr) {
        report.notes.push_back("no code or line information for " + ps.image.path + ": " + why);
    } else {
        auto bytes = info->code(report.start, report.end);
        if (!bytes.ok()) {
            report.notes.push_back("no code bytes: " + bytes.error().message());
        } else {
            auto decoded = disassemble(info->machine(), report.start, *bytes);
            if (!decoded.ok()) {
                report.notes.push_back("no disassembly: " + decoded.error().message());
            } else {
                instructions = std::move(*decoded);
                report.have_code = !instructions.empty();
            }
        }
    }
    if (!report.have_code) {
        for (const auto& [address, count] : ps.counts) instructions.push_back({address, 0, ""});
    }
    return instructions;
}

// "call 0x1070" -> "call 0x1070 <malloc@plt>", as objdump and perf name a
// direct call's or jump's target (issue 34, defect 11): calls everywhere,
// jumps only when they leave the procedure (tail calls); an offset into the
// target is shown as <name+0x10>.
void name_branch_targets(std::vector<Instruction>& instructions, const SymbolTable& table, std::uint64_t start,
                         std::uint64_t end) {
    for (auto& insn : instructions) {
        const bool call = insn.text.starts_with("call ");
        const bool jump = insn.text.starts_with("j");
        if (!call && !jump) continue;
        const std::size_t space = insn.text.find(' ');
        if (space == std::string::npos || insn.text.compare(space + 1, 2, "0x") != 0) continue;
        const std::string operand = insn.text.substr(space + 3);
        if (operand.empty() || operand.size() > 16 || operand.find_first_not_of("0123456789abcdef") != std::string::npos)
            continue;
        const std::uint64_t target = std::stoull(operand, nullptr, 16);
        if (!call && target >= start && target < end) continue;  // a jump within the procedure
        const Symbol* sym = table.lookup(target);
        if (sym == nullptr) continue;
        insn.text += " <" + sym->name + (target == sym->start ? "" : "+0x" + hex(target - sym->start)) + ">";
    }
}

// Samples per instruction: a sample between instruction starts (should
// not happen for precise pcs) counts for the instruction containing it.
std::vector<AnnotatedInstruction> count_per_instruction(const std::vector<Instruction>& instructions,
                                                        const ProcedureSamples& ps, const AnnotateReport& report,
                                                        std::size_t hot) {
    std::vector<AnnotatedInstruction> annotated;
    annotated.reserve(instructions.size());
    for (const auto& insn : instructions) annotated.push_back({insn.address, insn.text, 0, 0, false});
    for (const auto& [address, count] : ps.counts) {
        auto it = std::upper_bound(annotated.begin(), annotated.end(), address,
                                   [](std::uint64_t a, const AnnotatedInstruction& i) { return a < i.address; });
        if (it == annotated.begin()) continue;
        (it - 1)->samples += count;
    }
    for (auto& insn : annotated) insn.percent = percent_of(insn.samples, report.samples);
    mark_hottest(annotated, hot);
    return annotated;
}

// Source positions of each instruction, from DWARF.
std::vector<Position> source_positions(const DebugInfo* info, const std::vector<AnnotatedInstruction>& annotated,
                                       const ProcedureSamples& ps, AnnotateReport& report) {
    std::vector<Position> positions(annotated.size());
    if (info != nullptr && info->has_lines()) {
        for (std::size_t i = 0; i < annotated.size(); ++i) {
            auto frames = info->frames_at(annotated[i].address);
            if (frames.empty()) continue;
            Position& pos = positions[i];
            pos.file = frames.front().file;
            pos.line = frames.front().line;
            pos.function = frames.front().function;
            for (const auto& f : frames)
                if (f.inlined) pos.inlined.push_back(f.function);
            if (pos.line != 0) report.have_lines = true;
        }
    }
    if (info != nullptr && !report.have_lines) {
        report.notes.push_back("no DWARF line information for " + ps.image.path +
                               " (built without -g, or its debug file is not installed): assembly only");
    }
    return positions;
}

// Blocks of consecutive instructions at one position.
void group_blocks(const std::vector<AnnotatedInstruction>& annotated, const std::vector<Position>& positions,
                  AnnotateReport& report) {
    for (std::size_t i = 0; i < annotated.size(); ++i) {
        if (report.blocks.empty() || !(positions[i] == positions[i - 1])) {
            AnnotatedBlock block;
            block.file = positions[i].file;
            block.line = positions[i].line;
            block.inlined = positions[i].inlined;
            report.blocks.push_back(std::move(block));
        }
        report.blocks.back().instructions.push_back(annotated[i]);
    }
}

// Source lines over the whole procedure, with their text where the source
// file is found.
void add_source_lines(const std::vector<AnnotatedInstruction>& annotated, const std::vector<Position>& positions,
                      std::size_t hot, AnnotateReport& report) {
    std::map<std::pair<std::string, int>, AnnotatedLine> lines;
    for (std::size_t i = 0; i < annotated.size(); ++i) {
        const Position& pos = positions[i];
        if (pos.line == 0) continue;
        AnnotatedLine& line = lines[{pos.file, pos.line}];
        line.file = pos.file;
        line.line = pos.line;
        if (line.function.empty()) line.function = pos.function;
        line.samples += annotated[i].samples;
    }
    SourceFiles sources;
    std::set<std::string> missing;
    for (auto& [key, line] : lines) {
        line.percent = percent_of(line.samples, report.samples);
        if (const auto* text = sources.lines(line.file)) {
            if (line.line >= 1 && static_cast<std::size_t>(line.line) <= text->size())
                line.text = (*text)[static_cast<std::size_t>(line.line - 1)];
        } else {
            missing.insert(line.file);
        }
        report.lines.push_back(std::move(line));
    }
    mark_hottest(report.lines, hot);
    for (const auto& file : missing)
        report.notes.push_back("source file " + file + " not found: its lines are shown as file:line only");
}

}  // namespace

Result<AnnotateReport> build_annotate_report(const LoadedProfile& profile, const AnnotateOptions& options,
                                             Symbolizer& symbolizer) {
    ECPI_ASSIGN_OR_RETURN(std::string event, choose_event(profile, options));
    ECPI_ASSIGN_OR_RETURN(ProcedureSamples ps,
                          procedure_samples(profile.contents, event, options.pid, options.procedure, symbolizer));
    AnnotateReport report = start_report(profile, options, event, ps);
    DebugInfoCache infos(symbolizer);
    std::string why;
    const DebugInfo* info = infos.get(ps.image, &why);
    std::vector<Instruction> instructions = read_instructions(info, why, ps, report);
    if (const auto& table = symbolizer.table(ps.image); table.ok())
        name_branch_targets(instructions, *table, report.start, report.end);
    const std::vector<AnnotatedInstruction> annotated = count_per_instruction(instructions, ps, report, options.hot);
    const std::vector<Position> positions = source_positions(info, annotated, ps, report);
    group_blocks(annotated, positions, report);
    if (report.have_lines) add_source_lines(annotated, positions, options.hot, report);
    return report;
}

std::string render_annotate_text(const AnnotateReport& report) {
    std::string out;
    out += "Procedure: " + escape_for_terminal(report.procedure) + "\n";
    out += "Image: " + report.image;
    if (!report.build_id.empty()) out += " (build id " + report.build_id + ")";
    out += "\n";
    out += format("Event: %s, %llu samples = %.2f%% of %llu (epoch %s)\n", report.event.c_str(),
                  static_cast<unsigned long long>(report.samples), percent_of(report.samples, report.event_total),
                  static_cast<unsigned long long>(report.event_total), report.epoch.c_str());
    if (report.pid) out += format("Process: %u\n", *report.pid);
    out += "Address range: 0x" + hex(report.start) + "-0x" + hex(report.end) + "\n";
    for (const auto& note : report.notes) out += "Note: " + note + "\n";

    auto counts = [](bool hot, std::uint64_t samples, double percent) {
        if (samples == 0) return format("%c %8s %7s", hot ? '>' : ' ', "", "");
        return format("%c %8llu %6.2f%%", hot ? '>' : ' ', static_cast<unsigned long long>(samples), percent);
    };

    std::map<std::pair<std::string, int>, const AnnotatedLine*> by_position;
    for (const auto& line : report.lines) by_position[{line.file, line.line}] = &line;

    if (!report.lines.empty()) {
        std::vector<const AnnotatedLine*> hottest;
        for (const auto& line : report.lines)
            if (line.samples > 0) hottest.push_back(&line);
        std::stable_sort(hottest.begin(), hottest.end(),
                         [](const AnnotatedLine* a, const AnnotatedLine* b) { return a->samples > b->samples; });
        if (hottest.size() > 10) hottest.resize(10);
        out += "\nHottest source lines:\n";
        for (const AnnotatedLine* line : hottest) {
            out += counts(line->hot, line->samples, line->percent) + "  " + file_label(line->file) +
                   format(":%d", line->line);
            if (line->text) out += "  " + *line->text;
            out += "\n";
        }
    }

    out += "\n";
    out += report.have_lines ? "Source and assembly" : "Assembly";
    out += format(" ('>' marks the hottest %s; percentages of the procedure's samples):\n",
                  report.have_lines ? "lines and instructions" : "instructions");
    out += format("  %8s %7s\n", "samples", "%");
    for (const auto& block : report.blocks) {
        if (block.line != 0) {
            auto it = by_position.find({block.file, block.line});
            const AnnotatedLine* line = it != by_position.end() ? it->second : nullptr;
            std::string head = line != nullptr ? counts(line->hot, line->samples, line->percent) : counts(false, 0, 0);
            head += "  " + file_label(block.file) + format(":%d", block.line);
            if (line != nullptr && line->text) head += "  " + *line->text;
            if (!block.inlined.empty()) {
                head += "    [inlined: ";
                for (std::size_t i = 0; i < block.inlined.size(); ++i)
                    head += (i == 0 ? "" : " <- ") + block.inlined[i];
                head += "]";
            }
            out += head + "\n";
        } else if (report.have_lines) {
            out += counts(false, 0, 0) + "  (no line information)\n";
        }
        for (const auto& insn : block.instructions) {
            out += counts(insn.hot, insn.samples, insn.percent) + "      " + hex(insn.address) + ":  " +
                   (insn.text.empty() ? std::string("(code not available)") : escape_for_terminal(insn.text)) + "\n";
        }
    }
    return out;
}

nlohmann::json render_annotate_json(const AnnotateReport& report) {
    nlohmann::json doc = nlohmann::json::object();
    doc["schema"] = "ecpi.annotate";
    doc["version"] = 1;
    doc["database"] = report.database;
    doc["epoch"] = report.epoch;
    doc["event"] = report.event;
    doc["pid"] = report.pid ? nlohmann::json(*report.pid) : nlohmann::json(nullptr);
    doc["procedure"] = report.procedure;
    doc["image"] = report.image;
    doc["build_id"] = report.build_id;
    doc["start"] = report.start;
    doc["end"] = report.end;
    doc["samples"] = report.samples;
    doc["event_total"] = report.event_total;
    doc["percent_of_event"] = round4(percent_of(report.samples, report.event_total));
    doc["have_code"] = report.have_code;
    doc["have_lines"] = report.have_lines;
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& line : report.lines) {
        lines.push_back({{"file", line.file},
                         {"line", line.line},
                         {"text", line.text ? nlohmann::json(*line.text) : nlohmann::json(nullptr)},
                         {"function", line.function},
                         {"samples", line.samples},
                         {"percent", round4(line.percent)},
                         {"hot", line.hot}});
    }
    doc["lines"] = std::move(lines);
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& block : report.blocks) {
        nlohmann::json insns = nlohmann::json::array();
        for (const auto& insn : block.instructions) {
            insns.push_back({{"address", insn.address},
                             {"text", insn.text},
                             {"samples", insn.samples},
                             {"percent", round4(insn.percent)},
                             {"hot", insn.hot}});
        }
        blocks.push_back({{"file", block.file},
                          {"line", block.line},
                          {"inlined", block.inlined},
                          {"instructions", std::move(insns)}});
    }
    doc["blocks"] = std::move(blocks);
    doc["notes"] = report.notes;
    doc["warnings"] = report.warnings;
    return doc;
}

}  // namespace ecpi::analyze
