// ecpi stats: statistics of procedures across profiles (DCPI's dcpistats, Figure 3).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/reports/stats.h"
#include "fleet_options.h"

namespace ecpi::cli {
namespace {

struct StatsArgs {
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
    bool include_idle = false;
    std::vector<std::string> profiles;
    std::string by = "procedure";
    std::optional<std::string> event;
    std::optional<std::uint32_t> pid;
    std::size_t limit = 0;
    std::uint64_t min_samples = analyze::kDefaultStatsMinSamples;
    Format format = Format::kText;
    fleet::FleetFilterArgs fleet;
};

analyze::StatsReport build_report(const StatsArgs& args, const analyze::StatsOptions& options) {
    analyze::SymbolizerPool symbolizers(symbolizer_options({}, args.symbols));
    check_fleet_filters_used(args.fleet, args.profiles);
    if (std::any_of(args.profiles.begin(), args.profiles.end(), [](const auto& p) { return fleet::is_clickhouse_url(p); })) {
        std::vector<fleet::ReportSource> sources;
        for (const auto& spec : args.profiles) sources.push_back(unwrap(fleet::open_report_source(spec, args.fleet)));
        return unwrap(fleet::fleet_stats_report(sources, options, symbolizers));
    }
    std::vector<analyze::LoadedProfile> loaded;
    for (const auto& spec : args.profiles) {
        loaded.push_back(unwrap(analyze::load_profile(unwrap(analyze::resolve_source(spec)), args.include_idle)));
        note_idle_kept_apart("stats", loaded.back().contents, spec);
    }
    return unwrap(analyze::build_stats_report(loaded, options, symbolizers));
}

int run_stats(const StatsArgs& args) {
    analyze::StatsOptions options;
    options.by = args.by == "image" ? analyze::Grouping::kImage : analyze::Grouping::kProcedure;
    options.event = args.event;
    options.pid = args.pid;
    options.limit = args.limit;
    options.min_samples = args.min_samples;
    auto report = build_report(args, options);
    if (args.format == Format::kJson) {
        std::cout << dump_document(analyze::render_stats_json(report)) << "\n";
    } else {
        std::cout << analyze::render_stats_text(report);
        for (const auto& w : report.warnings) std::fprintf(stderr, "ecpi stats: warning: %s\n", escape_for_terminal(w).c_str());
    }
    return kExitOk;
}

void add_stats_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<StatsArgs>();
    auto* app = root.add_subcommand("stats", "Statistics of each procedure across profiles (runs, epochs, machines)");
    app->add_option("profiles", args->profiles,
                    "Profiles: DB (its newest epoch), DB/epochs/NNNNN, DB@EPOCH, or a ClickHouse URL (one URL "
                    "alone: one set per host)")
        ->required();
    app->add_option("--by", args->by, "Group by procedure or image")
        ->check(CLI::IsMember({"procedure", "image"}))
        ->default_str("procedure");
    app->add_option("-e,--event", args->event, "Event to compare (default: the one all profiles share, cpu-clock first)");
    app->add_option("--pid", args->pid, "Only samples of this process");
    app->add_option("--limit", args->limit, "Show at most N rows (0: all)");
    app->add_option("--min-samples", args->min_samples,
                    "Hide rows with fewer than N samples per set on average: their range is noise (0: show all)")
        ->default_str(std::to_string(analyze::kDefaultStatsMinSamples));
    add_fleet_filter_options(*app, args->fleet);
    add_include_idle_option(*app, args->include_idle);
    add_format_option(*app, args->format);
    add_symbol_search_options(*app, args->symbols);
    app->footer("\nExamples:\n  ecpi stats run1.db run2.db run3.db\n  ecpi stats ecpi.db@1 ecpi.db@2 --limit 20\n");
    verbs.push_back({app, [args] { return run_stats(*args); }});
}

const VerbRegistration kRegistration(40, add_stats_verb);
}  // namespace
}  // namespace ecpi::cli
