// `ecpi prof` (DCPI section 3.1, Figure 1): samples per procedure or per
// image, sorted by decreasing samples of the first event.
#include "ecpi/analyze/reports/prof_report.h"

#include "ecpi/analyze/reports/call_stacks.h"
#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/analyze/reports/kernel_idle.h"
#include "ecpi/analyze/reports/symbol_hints.h"

#include "ecpi/analyze/text_table.h"
#include "ecpi/terminal_text.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <set>
#include <tuple>
#include <unordered_map>

namespace ecpi::analyze {

namespace {

constexpr const char* kFirstEvent = "cpu-clock";  // listed first when present
constexpr std::size_t kMaxProcedureWidth = 60;   // longer names overflow their column

using detail::format;  // printf into std::string (text_table.h)

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

// Event names in the epoch: sorted, cpu-clock first.
std::vector<std::string> events_present(const store::EpochContents& contents) {
    std::set<std::string> names;
    for (const auto& [name, meta] : contents.meta.events) names.insert(name);
    for (const auto& profile : contents.profiles) names.insert(profile.event);
    std::vector<std::string> events(names.begin(), names.end());
    auto first = std::find(events.begin(), events.end(), kFirstEvent);
    if (first != events.end()) std::rotate(events.begin(), first, first + 1);
    return events;
}

// The image column shows file names; special images ("[kernel]") as they are.
std::string image_label(const std::string& path) {
    if (path.empty() || path.front() == '[') return path;
    std::string name = std::filesystem::path(path).filename().string();
    return name.empty() ? path : name;
}

const char* period_unit(const std::string& event) {
    return event.ends_with("-clock") ? "ns" : "events";
}

struct RowKey {
    std::string image;
    std::string build_id;
    std::string procedure;
    auto operator<=>(const RowKey&) const = default;
};

// An event's totals; zero for an event the report has none of.
store::EventMeta total_of(const ProfReport& report, const std::string& event) {
    auto it = report.totals.find(event);
    return it != report.totals.end() ? it->second : store::EventMeta{};
}

// The events to report (--event, else every event present, cpu-clock
// first); the first is the one rows are sorted by.
Result<void> select_events(const store::EpochContents& contents, const ProfOptions& options, ProfReport& report) {
    std::vector<std::string> present = events_present(contents);
    if (options.events.empty()) {
        report.events = present;
    } else {
        for (const auto& event : options.events) {
            if (std::find(present.begin(), present.end(), event) == present.end()) {
                return Error("event " + event + " is not in this profile (it has: " +
                             (present.empty() ? std::string("no events") : join(present, ", ")) + ")");
            }
            if (std::find(report.events.begin(), report.events.end(), event) == report.events.end())
                report.events.push_back(event);
        }
    }
    if (!report.events.empty()) report.sort_event = report.events.front();
    return ok();
}

// Per event, what the epoch's metadata holds beyond the samples: period,
// lost, idle; and the register snapshots stored.
void take_epoch_totals(const store::EpochContents& contents, const ProfOptions& options,
                       const std::set<std::string>& selected, ProfReport& report) {
    for (const auto& event : report.events) {
        store::EventMeta& total = report.totals[event];
        if (auto it = contents.meta.events.find(event); it != contents.meta.events.end()) {
            total.period = it->second.period;
            total.lost = it->second.lost;  // not attributable to a process: epoch-wide even with a pid filter
            total.registers_lost = it->second.registers_lost;
            total.stack_ends = it->second.stack_ends;  // epoch-wide, like lost
            if (!options.pid) {  // idle is the pid 0 task: no process filter keeps it
                total.idle = it->second.idle;
                total.idle_per_cpu = it->second.idle_per_cpu;
            }
        }
    }
    if (!options.pid) report.idle_ns_per_cpu = contents.meta.idle_ns_per_cpu;
    for (const auto& registers : contents.registers) {
        if (selected.count(registers.event) == 0) continue;
        report.snapshots[registers.event] = {registers.samples.size(), registers.every};
    }
}

// The image's symbol table, or nullptr (warned about once per image).
const SymbolTable* symbols_of(const store::ImageId& image, Symbolizer& symbolizer, std::set<store::ImageId>& warned,
                              ProfReport& report) {
    const Result<SymbolTable>& loaded = symbolizer.table(image);
    if (loaded.ok()) return &loaded.value();
    if (warned.insert(image).second) {
        std::string what = image.path;
        if (!image.build_id.empty()) what += " (build id " + image.build_id + ")";
        report.warnings.push_back("no symbols for " + what + ": " + loaded.error().message());
    }
    return nullptr;
}

using RowCounts = std::map<RowKey, std::map<std::string, std::uint64_t>>;

// Samples per row (procedure or image) and event, the events' totals counted
// on the way; samples without a per-process breakdown that the pid filter
// leaves out are warned about.
RowCounts count_rows(const store::EpochContents& contents, const ProfOptions& options, Symbolizer& symbolizer,
                     const std::set<std::string>& selected, ProfReport& report) {
    const bool by_procedure = options.by == ProfOptions::By::kProcedure;
    RowCounts rows;
    std::set<store::ImageId> warned;
    UnnamedSamples unnamed;
    std::uint64_t merged_left_out = 0;
    for (const auto& profile : contents.profiles) {
        if (selected.count(profile.event) == 0) continue;
        store::EventMeta& total = report.totals[profile.event];
        if (total.period == 0) total.period = profile.period;
        const bool unknown_image = profile.image.path == store::kUnknownImage;
        const SymbolTable* table =
            by_procedure && !unknown_image ? symbols_of(profile.image, symbolizer, warned, report) : nullptr;

        // Count per symbol first (nullptr: no symbol), build the named rows
        // after: one string key per symbol rather than per offset.
        std::unordered_map<const Symbol*, std::uint64_t> per_symbol;
        for (const auto& process : profile.processes) {
            if (options.pid && process.pid != *options.pid) {
                if (process.pid == store::kAllProcesses)
                    for (const auto& oc : process.counts) merged_left_out += oc.count;
                continue;
            }
            for (const auto& oc : process.counts) {
                total.samples += oc.count;
                if (unknown_image) total.unknown += oc.count;
                per_symbol[table != nullptr ? table->lookup(oc.offset) : nullptr] += oc.count;
            }
        }
        for (const auto& [sym, count] : per_symbol) {
            RowKey key{profile.image.path, profile.image.build_id,
                       !by_procedure ? std::string() : sym != nullptr ? sym->name : unsymbolized_name(profile.image)};
            rows[key][profile.event] += count;
            if (by_procedure && profile.event == report.sort_event) unnamed.add(profile.image, sym, count);
        }
    }
    if (merged_left_out > 0) {
        report.warnings.push_back(format("%llu samples recorded without a per-process breakdown are left out by "
                                         "the pid filter",
                                         static_cast<unsigned long long>(merged_left_out)));
    }
    report.hints = unnamed.hints();
    return rows;
}

// Without a pid filter, the profile files must hold what the metadata counts.
void check_totals(const store::EpochContents& contents, const ProfOptions& options, ProfReport& report) {
    if (options.pid) return;
    for (const auto& event : report.events) {
        auto it = contents.meta.events.find(event);
        if (it == contents.meta.events.end()) continue;
        std::uint64_t stored = report.totals[event].samples;
        if (it->second.samples != stored) {
            report.warnings.push_back(format("epoch metadata counts %llu %s samples but the profile files hold %llu",
                                             static_cast<unsigned long long>(it->second.samples), event.c_str(),
                                             static_cast<unsigned long long>(stored)));
        }
    }
}

// The rows, sorted by the sort event's samples, with percent and cumulative
// percent; at most --limit.
void add_sorted_rows(RowCounts& rows, std::size_t limit, ProfReport& report) {
    report.rows.reserve(rows.size());
    for (auto& [key, samples] : rows) {
        ProfRow row;
        row.procedure = key.procedure;
        row.image = key.image;
        row.build_id = key.build_id;
        for (const auto& event : report.events) row.samples[event] = 0;
        for (const auto& [event, count] : samples) row.samples[event] = count;
        report.rows.push_back(std::move(row));
    }
    const std::string& sort_event = report.sort_event;
    std::sort(report.rows.begin(), report.rows.end(), [&](const ProfRow& a, const ProfRow& b) {
        std::uint64_t sa = a.samples.at(sort_event), sb = b.samples.at(sort_event);
        if (sa != sb) return sa > sb;
        return std::tie(a.procedure, a.image, a.build_id) < std::tie(b.procedure, b.image, b.build_id);
    });
    std::uint64_t sort_total = sort_event.empty() ? 0 : report.totals[sort_event].samples;
    std::uint64_t cumulative = 0;
    for (auto& row : report.rows) {
        std::uint64_t count = row.samples.at(sort_event);
        cumulative += count;
        row.percent = percent_of(count, sort_total);
        row.cumulative_percent = percent_of(cumulative, sort_total);
    }
    if (limit != 0 && report.rows.size() > limit) report.rows.resize(limit);
}

std::string render_totals(const ProfReport& report) {
    std::string out;
    for (const auto& event : report.events) {
        store::EventMeta t = total_of(report, event);
        out += format("Total samples for event type %s = %llu, period %llu %s\n", event.c_str(),
                      static_cast<unsigned long long>(t.samples), static_cast<unsigned long long>(t.period),
                      period_unit(event));
        out += format("    Unknown (unmapped) samples: %llu (%.2f%%)\n", static_cast<unsigned long long>(t.unknown),
                      percent_of(t.unknown, t.samples));
        out += format("    Lost samples (ring buffer full): %llu\n", static_cast<unsigned long long>(t.lost));
        if (t.idle) out += "    Idle samples, kept apart: " + idle_note(t) + "\n";
        if (!t.stack_ends.empty()) out += "    " + call_stacks_note(t.stack_ends) + "\n";
        if (auto it = report.snapshots.find(event); it != report.snapshots.end())
            out += format("    Register snapshots: %llu (one sample in %u), lost %llu\n",
                          static_cast<unsigned long long>(it->second.stored), it->second.every,
                          static_cast<unsigned long long>(t.registers_lost));
    }
    return out;
}

struct Column {
    std::string header;
    bool numeric = true;
    std::vector<std::string> cells;
    std::size_t width = 0;
};

// Columns as in DCPI Figure 1: sort event, %, cum%, then samples and %
// of every other event, then procedure and image.
std::vector<Column> prof_columns(const ProfReport& report) {
    std::vector<Column> columns;
    const std::string& sort_event = report.sort_event;
    auto add = [&](std::string header, bool numeric) -> Column& {
        columns.push_back(Column{std::move(header), numeric, {}, 0});
        return columns.back();
    };
    {
        Column& samples = add(sort_event, true);
        for (const auto& row : report.rows) samples.cells.push_back(format("%llu", static_cast<unsigned long long>(row.samples.at(sort_event))));
        Column& pct = add("%", true);
        for (const auto& row : report.rows) pct.cells.push_back(format("%.2f%%", row.percent));
        Column& cum = add("cum%", true);
        for (const auto& row : report.rows) cum.cells.push_back(format("%.2f%%", row.cumulative_percent));
    }
    for (std::size_t e = 1; e < report.events.size(); ++e) {
        const std::string& event = report.events[e];
        std::uint64_t event_total = total_of(report, event).samples;
        Column& samples = add(event, true);
        for (const auto& row : report.rows) {
            auto it = row.samples.find(event);
            samples.cells.push_back(format("%llu", static_cast<unsigned long long>(it != row.samples.end() ? it->second : 0)));
        }
        Column& pct = add("%", true);
        for (const auto& row : report.rows) {
            auto it = row.samples.find(event);
            pct.cells.push_back(format("%.2f%%", percent_of(it != row.samples.end() ? it->second : 0, event_total)));
        }
    }
    if (report.by == ProfOptions::By::kProcedure) {
        Column& procedure = add("procedure", false);
        for (const auto& row : report.rows) procedure.cells.push_back(escape_for_terminal(row.procedure));
    }
    {
        Column& image = add("image", false);
        for (const auto& row : report.rows) image.cells.push_back(escape_for_terminal(image_label(row.image)));
    }
    for (auto& column : columns) {
        column.width = column.header.size();
        for (const auto& cell : column.cells) column.width = std::max(column.width, cell.size());
        if (!column.numeric) column.width = std::min(column.width, std::max(column.header.size(), kMaxProcedureWidth));
    }
    return columns;
}

// The table: a rule, the header line, one line per row; numbers right-aligned.
std::string render_columns(const std::vector<Column>& columns, std::size_t nrows) {
    std::string out;
    auto emit_line = [&](auto&& cell_of) {
        std::string line;
        for (std::size_t c = 0; c < columns.size(); ++c) {
            const Column& column = columns[c];
            std::string cell = cell_of(column);
            bool last = c + 1 == columns.size();
            if (c > 0) line += "  ";
            std::size_t pad = column.width > cell.size() ? column.width - cell.size() : 0;
            if (column.numeric) line.append(pad, ' ');
            line += cell;
            if (!column.numeric && !last) line.append(pad, ' ');
        }
        out += line;
        out += '\n';
    };
    std::size_t rule = 0;  // the full width of the table
    for (const auto& column : columns) rule += column.width + 2;
    out += std::string(rule - 2, '=') + "\n";
    emit_line([](const Column& column) { return column.header; });
    for (std::size_t r = 0; r < nrows; ++r)
        emit_line([r](const Column& column) { return column.cells[r]; });
    return out;
}

}  // namespace

Result<ProfReport> build_prof_report(const store::EpochContents& contents, const ProfOptions& options,
                                     Symbolizer& symbolizer) {
    ProfReport report;
    report.epoch = contents.epoch;
    report.by = options.by;
    report.pid = options.pid;
    ECPI_RETURN_IF_ERROR(select_events(contents, options, report));
    std::set<std::string> selected(report.events.begin(), report.events.end());
    for (const auto& skipped : contents.skipped) report.warnings.push_back("skipped " + skipped);
    take_epoch_totals(contents, options, selected, report);
    RowCounts rows = count_rows(contents, options, symbolizer, selected, report);
    check_totals(contents, options, report);
    add_sorted_rows(rows, options.limit, report);
    return report;
}

std::string render_prof_text(const ProfReport& report) {
    std::string out;
    if (!report.database.empty()) out += "Database: " + escape_for_terminal(report.database) + "\n";
    out += "Epoch: " + report.epoch + "\n";
    if (report.pid) out += format("Process: %u\n", *report.pid);
    if (report.events.empty()) {
        out += "No samples in this epoch.\n";
        return out;
    }
    out += render_totals(report);
    if (!report.idle_ns_per_cpu.empty())
        out += "Idle time per CPU (the kernel's accounting): " + idle_time_per_cpu(report.idle_ns_per_cpu) + "\n";
    for (const auto& hint : report.hints) out += "Without symbols: " + escape_for_terminal(hint) + "\n";
    out += "The counts given below are the number of samples for each listed event type.\n";
    out += render_columns(prof_columns(report), report.rows.size());
    if (report.rows.empty()) out += "(no samples)\n";
    return out;
}

nlohmann::json render_prof_json(const ProfReport& report) {
    // 4 decimals: stable values for golden comparisons, plenty for percentages.
    auto round4 = [](double v) { return std::round(v * 1e4) / 1e4; };
    const bool by_procedure = report.by == ProfOptions::By::kProcedure;
    nlohmann::json doc = nlohmann::json::object();
    doc["schema"] = "ecpi.prof";
    doc["version"] = 1;
    doc["database"] = report.database;
    doc["epoch"] = report.epoch;
    doc["by"] = by_procedure ? "procedure" : "image";
    doc["pid"] = report.pid ? nlohmann::json(*report.pid) : nlohmann::json(nullptr);
    doc["events"] = report.events;
    nlohmann::json totals = nlohmann::json::object();
    for (const auto& event : report.events) {
        auto it = report.totals.find(event);
        store::EventMeta t = it != report.totals.end() ? it->second : store::EventMeta{};
        totals[event] = {{"samples", t.samples}, {"unknown", t.unknown}, {"lost", t.lost}, {"period", t.period},
                         {"idle", t.idle}};
        if (!t.idle_per_cpu.empty()) totals[event]["idle_per_cpu"] = t.idle_per_cpu;
        if (!t.stack_ends.empty()) totals[event]["call_stacks"] = call_stacks_json(t.stack_ends);
        if (auto it = report.snapshots.find(event); it != report.snapshots.end())
            totals[event]["register_snapshots"] = {
                {"stored", it->second.stored}, {"every", it->second.every}, {"lost", t.registers_lost}};
    }
    doc["totals"] = std::move(totals);
    if (!report.idle_ns_per_cpu.empty()) doc["idle_ns_per_cpu"] = report.idle_ns_per_cpu;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : report.rows) {
        nlohmann::json r = nlohmann::json::object();
        if (by_procedure) r["procedure"] = row.procedure;
        r["image"] = row.image;
        r["build_id"] = row.build_id;
        nlohmann::json samples = nlohmann::json::object();
        for (const auto& event : report.events) {
            auto it = row.samples.find(event);
            samples[event] = it != row.samples.end() ? it->second : 0;
        }
        r["samples"] = std::move(samples);
        r["percent"] = round4(row.percent);
        r["cumulative_percent"] = round4(row.cumulative_percent);
        rows.push_back(std::move(r));
    }
    doc["rows"] = std::move(rows);
    doc["warnings"] = report.warnings;
    if (!report.hints.empty()) doc["hints"] = report.hints;
    return doc;
}

}  // namespace ecpi::analyze
