// Reports over the fleet: a ClickHouse URL given where a command takes a
// PROFILE. Every report is answered by GROUP BY queries that run in
// ClickHouse (docs/FLEET.md "Reading"); what comes back is one row per
// procedure (or image, or stack), never one per sample row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/analyze/reports/diff.h"
#include "ecpi/analyze/reports/export.h"
#include "ecpi/analyze/reports/prof_report.h"
#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/analyze/reports/stats.h"
#include "ecpi/fleet/clickhouse.h"
#include "ecpi/result.h"

namespace ecpi::fleet {

// Filters as the command line spells them (--host, --since, --until, --image).
struct FleetFilterArgs {
    std::vector<std::string> hosts;
    std::string since;
    std::string until;
    std::vector<std::string> images;
    std::string password_file;
    bool given() const { return !hosts.empty() || !since.empty() || !until.empty() || !images.empty(); }
};

struct FleetFilter {
    std::vector<std::string> hosts;              // empty: every host
    std::optional<std::int64_t> since, until;    // unix seconds: since <= time < until
    std::vector<std::string> images;             // a path, or a file name matching any directory
    std::string describe() const;                // "hosts web1, web2; since 2026-11-24 00:00:00 UTC"
};

// "2026-11-24", "2026-11-24 10:00", "2026-11-24T10:00:00Z" (UTC), "@1700000000"
// (unix seconds), or an age: "90s", "30m", "6h", "7d" before `now`.
[[nodiscard]] Result<std::int64_t> parse_time(std::string_view text, std::int64_t now);

// The command line's filters, replaced field by field by the URL's own
// (?host=a&host=b&since=...&until=...&image=...), so `diff` can compare two
// windows of one fleet.
[[nodiscard]] Result<FleetFilter> make_filter(const FleetFilterArgs& args, const ClickHouseUrl& url, std::int64_t now);

class FleetSource {
public:
    // `spec` is a ClickHouse URL. Connects and checks the schema version.
    static Result<FleetSource> open(const std::string& spec, const FleetFilterArgs& args);

    const std::string& label() const { return label_; }          // the URL without credentials, plus the filter's query
    const FleetFilter& filter() const { return filter_; }
    ClickHouseClient& client() { return client_; }
    const ClickHouseClient& client() const { return client_; }
    // The same server and filter with only `host` (stats across machines).
    Result<FleetSource> for_host(const std::string& host) const;

    // Events with samples under the filter, cpu-clock first then by name.
    Result<std::vector<std::string>> events();
    // Hosts with samples under the filter, by name.
    Result<std::vector<std::string>> hosts();

    Result<analyze::ProfReport> prof_report(const analyze::ProfOptions& options);
    Result<analyze::FlatProfile> flat_profile(analyze::Grouping by, const std::string& event);
    Result<analyze::ExportModel> export_model(const analyze::ExportOptions& options);

private:
    FleetSource(ClickHouseClient client, FleetFilter filter, std::string label)
        : client_(std::move(client)), filter_(std::move(filter)), label_(std::move(label)) {}
    // "AND ..." conditions for a table with host/date/time columns (and image when `with_image`).
    std::string where(bool with_image) const;
    std::string where_hosts_images(bool with_image) const;
    // Per-procedure questions read the hourly rollup when the time filter
    // falls on whole hours (UTC), the samples otherwise; both give the same sums.
    bool hourly() const;
    std::string procedure_table() const;
    std::string procedure_where() const;
    std::string table(const char* name) const;
    // Period and lost samples per event (the event table) into report.totals.
    Result<void> add_event_meta(analyze::ProfReport& report, const std::string& events_in);

    ClickHouseClient client_;
    FleetFilter filter_;
    std::string label_;
};

// A profile a multi-profile report reads: a local epoch or a fleet query.
struct ReportSource {
    std::optional<analyze::LoadedProfile> local;
    std::optional<FleetSource> fleet;
    std::string label() const;
};
[[nodiscard]] Result<ReportSource> open_report_source(const std::string& spec, const FleetFilterArgs& args);

// `ecpi stats` over sources of which at least one is a fleet. A single
// fleet source is split into one set per host (statistics across machines).
[[nodiscard]] Result<analyze::StatsReport> fleet_stats_report(std::vector<ReportSource>& sources,
                                                              const analyze::StatsOptions& options,
                                                              analyze::SymbolizerPool& symbolizers);
// `ecpi diff` where A or B (or both) is a fleet.
[[nodiscard]] Result<analyze::DiffReport> fleet_diff_report(ReportSource& a, ReportSource& b,
                                                            const analyze::DiffOptions& options,
                                                            analyze::SymbolizerPool& symbolizers);

}  // namespace ecpi::fleet
