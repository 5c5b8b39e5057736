// `ecpi stats` (DCPI section 3.3, Figure 3): per procedure over N sets,
// range% = (max - min) / sum, sum, sum% of all samples, N, mean, standard
// deviation, min and max, sorted by range% so that the procedures whose cost
// varies most between runs come first.
#include "ecpi/analyze/reports/stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "ecpi/analyze/text_table.h"

namespace ecpi::analyze {

using detail::format;
using detail::round4;
using detail::u64;

StatsReport compute_stats(std::vector<StatsSet> sets, const std::vector<FlatProfile>& profiles, Grouping by) {
    StatsReport report;
    report.by = by;
    const std::size_t n = profiles.size();
    for (std::size_t i = 0; i < n && i < sets.size(); ++i) {
        sets[i].total = profiles[i].total;
        sets[i].period = profiles[i].period;
        report.total += profiles[i].total;
    }
    report.sets = std::move(sets);
    if (!profiles.empty()) report.event = profiles.front().event;

    // Rows keyed as flatten_profile keys them (image key, procedure): the
    // same build id under different paths is one row. Absent = 0.
    struct Key {
        std::string image_key;
        std::string procedure;
        auto operator<=>(const Key&) const = default;
    };
    std::map<Key, StatsRow> rows;
    for (std::size_t i = 0; i < n; ++i) {
        for (const auto& flat : profiles[i].rows) {
            Key key{image_key({flat.image, flat.build_id}), flat.procedure};
            auto [it, inserted] = rows.try_emplace(key);
            StatsRow& row = it->second;
            if (inserted) {
                row.procedure = flat.procedure;
                row.image = flat.image;
                row.build_id = flat.build_id;
                row.samples.assign(n, 0);
            }
            row.samples[i] += flat.samples;
        }
    }

    for (auto& [key, row] : rows) {
        row.n = n;
        row.min = *std::min_element(row.samples.begin(), row.samples.end());
        row.max = *std::max_element(row.samples.begin(), row.samples.end());
        for (auto v : row.samples) row.sum += v;
        row.mean = static_cast<double>(row.sum) / static_cast<double>(n);
        double squares = 0;
        for (auto v : row.samples) {
            double d = static_cast<double>(v) - row.mean;
            squares += d * d;
        }
        row.stddev = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
        row.range_percent = percent_of(row.max - row.min, row.sum);
        row.sum_percent = percent_of(row.sum, report.total);
        report.rows.push_back(std::move(row));
    }
    std::sort(report.rows.begin(), report.rows.end(), [](const StatsRow& a, const StatsRow& b) {
        if (a.range_percent != b.range_percent) return a.range_percent > b.range_percent;
        if (a.sum != b.sum) return a.sum > b.sum;
        return std::tie(a.procedure, a.image, a.build_id) < std::tie(b.procedure, b.image, b.build_id);
    });
    report.rows_total = report.rows.size();
    return report;
}

void hide_rows_below(StatsReport& report, std::uint64_t min_samples) {
    report.min_samples = min_samples;
    if (min_samples == 0 || report.sets.empty()) return;
    const std::uint64_t min_sum = min_samples * report.sets.size();
    const auto kept = std::stable_partition(report.rows.begin(), report.rows.end(),
                                            [&](const StatsRow& row) { return row.sum >= min_sum; });
    report.rows_below_min_samples = static_cast<std::size_t>(report.rows.end() - kept);
    report.rows.erase(kept, report.rows.end());
    report.rows_total = report.rows.size();
}

Result<StatsReport> build_stats_report(const std::vector<LoadedProfile>& profiles, const StatsOptions& options,
                                       SymbolizerPool& symbolizers) {
    if (profiles.empty()) return Error("no profiles given");
    std::vector<const LoadedProfile*> pointers;
    for (const auto& p : profiles) pointers.push_back(&p);
    ECPI_ASSIGN_OR_RETURN(std::string event, common_event(pointers, options.event));

    std::vector<FlatProfile> flats;
    std::vector<StatsSet> sets;
    std::vector<std::string> warnings;
    for (const auto& p : profiles) {
        Symbolizer& symbolizer = symbolizers.for_database(p.source.database);
        auto flat = flatten_profile(p.contents, {options.by, event, options.pid}, symbolizer);
        if (!flat.ok()) return flat.error().with_context(p.source.spec);
        if (flat->total == 0) {
            return Error(p.source.spec + " has no " + event + " samples" +
                         (options.pid ? format(" of process %u", *options.pid) : std::string()));
        }
        for (const auto& w : flat->warnings) {
            std::string line = p.source.spec + ": " + w;
            if (std::find(warnings.begin(), warnings.end(), line) == warnings.end()) warnings.push_back(line);
        }
        sets.push_back({p.source.spec, p.source.database.string(), p.source.epoch, 0, 0});
        flats.push_back(std::move(*flat));
    }
    StatsReport report = compute_stats(std::move(sets), flats, options.by);
    hide_rows_below(report, options.min_samples);
    if (options.limit != 0 && report.rows.size() > options.limit) report.rows.resize(options.limit);
    report.event = event;
    report.pid = options.pid;
    report.warnings = std::move(warnings);
    return report;
}

std::string render_stats_text(const StatsReport& report) {
    std::string out;
    out += format("Number of samples of type %s\n", report.event.c_str());
    for (std::size_t i = 0; i < report.sets.size(); ++i) {
        const StatsSet& set = report.sets[i];
        out += format("  set %zu = %llu  (%s, epoch %s)\n", i + 1, static_cast<unsigned long long>(set.total),
                      set.label.c_str(), set.epoch.c_str());
    }
    out += format("  TOTAL %llu\n", static_cast<unsigned long long>(report.total));
    if (report.pid) out += format("Process: %u\n", *report.pid);
    out += format("Statistics calculated using the sample counts for each %s from %zu different sample set(s)\n",
                  report.by == Grouping::kImage ? "image" : "procedure", report.sets.size());

    detail::TextTable table;
    for (const char* h : {"range%", "sum", "sum%", "N", "mean", "std-dev", "min", "max"}) table.add_column(h, true);
    if (report.by == Grouping::kProcedure) table.add_column("procedure", false);
    table.add_column("image", false);
    for (const auto& row : report.rows) {
        std::vector<std::string> cells = {
            format("%.2f%%", row.range_percent), u64(row.sum),          format("%.2f%%", row.sum_percent),
            format("%zu", row.n),                format("%.2f", row.mean), format("%.2f", row.stddev),
            u64(row.min),                        u64(row.max)};
        if (report.by == Grouping::kProcedure) cells.push_back(row.procedure);
        cells.push_back(detail::image_label(row.image));
        table.add_row(std::move(cells));
    }
    out += table.render();
    if (report.rows.empty()) out += report.rows_below_min_samples ? "(no rows above --min-samples)\n" : "(no samples)\n";
    if (report.rows_below_min_samples != 0)
        out += format("(%zu rows with fewer than %llu samples per set hidden; --min-samples 0 shows them)\n",
                      report.rows_below_min_samples, static_cast<unsigned long long>(report.min_samples));
    if (report.rows.size() < report.rows_total)
        out += format("(%zu more rows; --limit 0 shows all)\n", report.rows_total - report.rows.size());
    return out;
}

nlohmann::json render_stats_json(const StatsReport& report) {
    const bool by_procedure = report.by == Grouping::kProcedure;
    nlohmann::json doc = nlohmann::json::object();
    doc["schema"] = "ecpi.stats";
    doc["version"] = 1;
    doc["event"] = report.event;
    doc["by"] = by_procedure ? "procedure" : "image";
    doc["pid"] = report.pid ? nlohmann::json(*report.pid) : nlohmann::json(nullptr);
    nlohmann::json sets = nlohmann::json::array();
    for (const auto& set : report.sets) {
        sets.push_back({{"label", set.label},
                        {"database", set.database},
                        {"epoch", set.epoch},
                        {"samples", set.total},
                        {"period", set.period}});
    }
    doc["sets"] = std::move(sets);
    doc["total"] = report.total;
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : report.rows) {
        nlohmann::json r = nlohmann::json::object();
        if (by_procedure) r["procedure"] = row.procedure;
        r["image"] = row.image;
        r["build_id"] = row.build_id;
        r["samples"] = row.samples;
        r["range_percent"] = round4(row.range_percent);
        r["sum"] = row.sum;
        r["sum_percent"] = round4(row.sum_percent);
        r["n"] = row.n;
        r["mean"] = round4(row.mean);
        r["stddev"] = round4(row.stddev);
        r["min"] = row.min;
        r["max"] = row.max;
        rows.push_back(std::move(r));
    }
    doc["rows"] = std::move(rows);
    doc["rows_total"] = report.rows_total;
    doc["min_samples"] = report.min_samples;
    doc["rows_below_min_samples"] = report.rows_below_min_samples;
    doc["warnings"] = report.warnings;
    return doc;
}

}  // namespace ecpi::analyze
