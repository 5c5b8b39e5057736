// `ecpi diff`: normalized shares of two profiles and their change, per
// procedure, image, or instruction of one procedure.
#include "ecpi/analyze/reports/diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "ecpi/analyze/symbols/debug_info.h"
#include "ecpi/analyze/text_table.h"

namespace ecpi::analyze {

using detail::format;
using detail::round4;
using detail::u64;

namespace {

void sort_rows(std::vector<DiffRow>& rows) {
    std::sort(rows.begin(), rows.end(), [](const DiffRow& x, const DiffRow& y) {
        double cx = std::fabs(x.change), cy = std::fabs(y.change);
        if (cx != cy) return cx > cy;
        double mx = std::max(x.share_a, x.share_b), my = std::max(y.share_a, y.share_b);
        if (mx != my) return mx > my;
        return std::tie(x.procedure, x.image, x.build_id, x.offset) < std::tie(y.procedure, y.image, y.build_id, y.offset);
    });
}

void set_shares(DiffRow& row, std::uint64_t total_a, std::uint64_t total_b) {
    row.share_a = percent_of(row.samples_a, total_a);
    row.share_b = percent_of(row.samples_b, total_b);
    row.change = row.share_b - row.share_a;
}

const char* by_name(DiffOptions::By by) {
    switch (by) {
        case DiffOptions::By::kImage: return "image";
        case DiffOptions::By::kInstruction: return "instruction";
        default: return "procedure";
    }
}

DiffSide side_of(const LoadedProfile& p) {
    DiffSide side;
    side.label = p.source.spec;
    side.database = p.source.database.string();
    side.epoch = p.source.epoch;
    return side;
}

// Disassembly of one procedure, by offset from its start; empty when the
// code is unavailable (the reason goes to `warnings`).
std::map<std::uint64_t, std::string> instruction_texts(const ProcedureSamples& ps, Symbolizer& symbolizer,
                                                       std::vector<std::string>& warnings) {
    std::map<std::uint64_t, std::string> texts;
    DebugInfoCache infos(symbolizer);
    std::string why;
    const DebugInfo* info = infos.get(ps.image, &why);
    std::uint64_t end = ps.end;
    if (end <= ps.start || end - ps.start > (1u << 20)) end = (ps.counts.empty() ? ps.start : ps.counts.rbegin()->first) + 16;
    if (info == nullptr) {
        warnings.push_back("no disassembly of " + ps.procedure + ": " + why);
        return texts;
    }
    auto bytes = info->code(ps.start, end);
    if (!bytes.ok()) {
        warnings.push_back("no disassembly of " + ps.procedure + ": " + bytes.error().message());
        return texts;
    }
    auto insns = disassemble(info->machine(), ps.start, *bytes);
    if (!insns.ok()) {
        warnings.push_back("no disassembly of " + ps.procedure + ": " + insns.error().message());
        return texts;
    }
    for (const auto& insn : *insns) texts[insn.address - ps.start] = insn.text;
    return texts;
}

}  // namespace

std::vector<DiffRow> diff_flat(const FlatProfile& a, const FlatProfile& b, bool by_image) {
    struct Key {
        std::string image_key;
        std::string procedure;
        auto operator<=>(const Key&) const = default;
    };
    std::map<Key, DiffRow> rows;
    auto add = [&](const FlatProfile& p, bool is_a) {
        for (const auto& flat : p.rows) {
            Key key{image_key({flat.image, flat.build_id}), by_image ? std::string() : flat.procedure};
            auto [it, inserted] = rows.try_emplace(key);
            DiffRow& row = it->second;
            if (inserted) {
                row.procedure = key.procedure;
                row.image = flat.image;
                row.build_id = flat.build_id;
            }
            (is_a ? row.samples_a : row.samples_b) += flat.samples;
        }
    };
    add(a, true);
    add(b, false);
    std::vector<DiffRow> out;
    out.reserve(rows.size());
    for (auto& [key, row] : rows) {
        set_shares(row, a.total, b.total);
        out.push_back(std::move(row));
    }
    sort_rows(out);
    return out;
}

Result<DiffReport> build_diff_report(const LoadedProfile& a, const LoadedProfile& b, const DiffOptions& options,
                                     SymbolizerPool& symbolizers) {
    DiffReport report;
    report.by = options.by;
    report.pid = options.pid;
    report.a = side_of(a);
    report.b = side_of(b);
    ECPI_ASSIGN_OR_RETURN(report.event, common_event({&a, &b}, options.event));
    Symbolizer& sym_a = symbolizers.for_database(a.source.database);
    Symbolizer& sym_b = symbolizers.for_database(b.source.database);

    Grouping grouping = options.by == DiffOptions::By::kImage ? Grouping::kImage : Grouping::kProcedure;
    auto flat_a = flatten_profile(a.contents, {grouping, report.event, options.pid}, sym_a);
    if (!flat_a.ok()) return flat_a.error().with_context(a.source.spec);
    auto flat_b = flatten_profile(b.contents, {grouping, report.event, options.pid}, sym_b);
    if (!flat_b.ok()) return flat_b.error().with_context(b.source.spec);
    for (const auto& [side, flat] : {std::pair{&a, &*flat_a}, std::pair{&b, &*flat_b}}) {
        if (flat->total == 0) {
            return Error(side->source.spec + " has no " + report.event + " samples" +
                         (options.pid ? format(" of process %u", *options.pid) : std::string()));
        }
        for (const auto& w : flat->warnings) report.warnings.push_back(side->source.spec + ": " + w);
    }
    report.a.total = flat_a->total;
    report.a.period = flat_a->period;
    report.b.total = flat_b->total;
    report.b.period = flat_b->period;

    if (options.by != DiffOptions::By::kInstruction) {
        report.rows = diff_flat(*flat_a, *flat_b, options.by == DiffOptions::By::kImage);
    } else {
        if (options.procedure.empty()) return Error("--by instruction needs --procedure NAME");
        auto ps_a = procedure_samples(a.contents, report.event, options.pid, options.procedure, sym_a);
        auto ps_b = procedure_samples(b.contents, report.event, options.pid, options.procedure, sym_b);
        if (!ps_a.ok() && !ps_b.ok()) return ps_a.error().with_context(a.source.spec);
        // Resolve a loose name once, then look for exactly that name in the other.
        if (ps_a.ok() && (!ps_b.ok() || ps_b->procedure != ps_a->procedure))
            ps_b = procedure_samples(b.contents, report.event, options.pid, ps_a->procedure, sym_b);
        else if (!ps_a.ok())
            ps_a = procedure_samples(a.contents, report.event, options.pid, ps_b->procedure, sym_a);
        report.procedure = ps_a.ok() ? ps_a->procedure : ps_b->procedure;

        std::map<std::uint64_t, DiffRow> rows;  // offset from the procedure's start
        auto add = [&](const Result<ProcedureSamples>& ps, DiffSide& side, bool is_a) {
            if (!ps.ok()) {
                report.warnings.push_back(side.label + " has no " + report.event + " samples in " + report.procedure);
                return;
            }
            side.image = ps->image.path;
            side.build_id = ps->image.build_id;
            side.procedure_samples = ps->samples;
            side.procedure_start = ps->start;
            for (const auto& w : ps->warnings) report.warnings.push_back(side.label + ": " + w);
            for (const auto& [address, count] : ps->counts) {
                DiffRow& row = rows[address - ps->start];
                row.offset = address - ps->start;
                row.procedure = report.procedure;
                (is_a ? row.samples_a : row.samples_b) += count;
            }
        };
        add(ps_a, report.a, true);
        add(ps_b, report.b, false);
        if (ps_a.ok() && ps_b.ok() && ps_a->image.build_id != ps_b->image.build_id) {
            report.warnings.push_back("A and B hold different builds of " + report.procedure +
                                      ": instructions are matched by their offset from the procedure's start");
        }
        std::map<std::uint64_t, std::string> texts =
            ps_a.ok() ? instruction_texts(*ps_a, sym_a, report.warnings) : instruction_texts(*ps_b, sym_b, report.warnings);
        for (auto& [offset, row] : rows) {
            row.image = ps_a.ok() ? ps_a->image.path : ps_b->image.path;
            row.build_id = ps_a.ok() ? ps_a->image.build_id : ps_b->image.build_id;
            if (auto it = texts.find(offset); it != texts.end()) row.text = it->second;
            set_shares(row, report.a.total, report.b.total);
            report.rows.push_back(std::move(row));
        }
        sort_rows(report.rows);
    }
    report.rows_total = report.rows.size();
    if (options.limit != 0 && report.rows.size() > options.limit) report.rows.resize(options.limit);
    return report;
}

std::string render_diff_text(const DiffReport& report) {
    std::string out;
    out += "Event: " + report.event + "\n";
    auto side_line = [&](const char* name, const DiffSide& side) {
        out += format("%s: %s (epoch %s): %llu samples", name, side.label.c_str(), side.epoch.c_str(),
                      static_cast<unsigned long long>(side.total));
        if (report.by == DiffOptions::By::kInstruction) {
            out += format(", %llu in the procedure (%.2f%%)", static_cast<unsigned long long>(side.procedure_samples),
                          percent_of(side.procedure_samples, side.total));
        }
        out += "\n";
    };
    side_line("A", report.a);
    side_line("B", report.b);
    if (report.pid) out += format("Process: %u\n", *report.pid);
    if (report.by == DiffOptions::By::kInstruction) {
        out += "Procedure: " + report.procedure + "\n";
        const DiffSide& s = !report.a.image.empty() ? report.a : report.b;
        out += "Image: " + s.image + (s.build_id.empty() ? std::string() : " (build id " + s.build_id + ")") + "\n";
    }
    out += "Shares are percentages of each profile's " + report.event +
           " samples; change = B - A in percentage points, largest first.\n";

    detail::TextTable table;
    for (const char* h : {"A %", "B %", "change", "A samples", "B samples"}) table.add_column(h, true);
    if (report.by == DiffOptions::By::kInstruction) {
        table.add_column("offset", true);
        table.add_column("instruction", false, 80);
    } else {
        if (report.by == DiffOptions::By::kProcedure) table.add_column("procedure", false);
        table.add_column("image", false);
    }
    for (const auto& row : report.rows) {
        std::vector<std::string> cells = {format("%.2f%%", row.share_a), format("%.2f%%", row.share_b),
                                          format("%+.2f", row.change), u64(row.samples_a), u64(row.samples_b)};
        if (report.by == DiffOptions::By::kInstruction) {
            cells.push_back(format("+0x%llx", static_cast<unsigned long long>(row.offset)));
            cells.push_back(row.text);
        } else {
            if (report.by == DiffOptions::By::kProcedure) cells.push_back(row.procedure);
            cells.push_back(detail::image_label(row.image));
        }
        table.add_row(std::move(cells));
    }
    out += table.render();
    if (report.rows.empty()) out += "(no samples)\n";
    if (report.rows.size() < report.rows_total)
        out += format("(%zu more rows; --limit 0 shows all)\n", report.rows_total - report.rows.size());
    return out;
}

nlohmann::json render_diff_json(const DiffReport& report) {
    nlohmann::json doc = nlohmann::json::object();
    doc["schema"] = "ecpi.diff";
    doc["version"] = 1;
    doc["event"] = report.event;
    doc["by"] = by_name(report.by);
    doc["pid"] = report.pid ? nlohmann::json(*report.pid) : nlohmann::json(nullptr);
    const bool by_instruction = report.by == DiffOptions::By::kInstruction;
    auto side = [&](const DiffSide& s) {
        nlohmann::json j = {{"label", s.label},
                            {"database", s.database},
                            {"epoch", s.epoch},
                            {"samples", s.total},
                            {"period", s.period}};
        if (by_instruction) {
            j["image"] = s.image;
            j["build_id"] = s.build_id;
            j["procedure_samples"] = s.procedure_samples;
        }
        return j;
    };
    doc["a"] = side(report.a);
    doc["b"] = side(report.b);
    if (by_instruction) doc["procedure"] = report.procedure;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : report.rows) {
        nlohmann::json r = nlohmann::json::object();
        if (by_instruction) {
            r["offset"] = row.offset;
            r["text"] = row.text;
        } else {
            if (report.by == DiffOptions::By::kProcedure) r["procedure"] = row.procedure;
            r["image"] = row.image;
            r["build_id"] = row.build_id;
        }
        r["samples_a"] = row.samples_a;
        r["samples_b"] = row.samples_b;
        r["share_a"] = round4(row.share_a);
        r["share_b"] = round4(row.share_b);
        r["change"] = round4(row.change);
        rows.push_back(std::move(r));
    }
    doc["rows"] = std::move(rows);
    doc["rows_total"] = report.rows_total;
    doc["warnings"] = report.warnings;
    return doc;
}

}  // namespace ecpi::analyze
