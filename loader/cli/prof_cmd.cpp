// ecpi prof: samples per procedure or image (DCPI's dcpiprof, Figure 1).
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/reports/prof_report.h"
#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/store/profile.h"
#include "fleet_options.h"

namespace ecpi::cli {
namespace {

struct ProfArgs {
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
    std::string database = "ecpi.db";
    std::string by = "procedure";
    std::vector<std::string> events;
    std::optional<std::uint32_t> pid;
    std::size_t limit = 0;
    std::string epoch;
    bool include_idle = false;
    Format format = Format::kText;
    fleet::FleetFilterArgs fleet;
};

analyze::ProfReport fleet_prof(const ProfArgs& args, const analyze::ProfOptions& options) {
    if (!args.epoch.empty()) throw UsageError{"--epoch reads a local database; a ClickHouse URL takes --since/--until"};
    auto source = unwrap(fleet::FleetSource::open(args.database, args.fleet));
    return unwrap(source.prof_report(options));
}

int run_prof(const ProfArgs& args) {
    check_fleet_filters_used(args.fleet, {args.database});
    if (fleet::is_clickhouse_url(args.database)) {
        analyze::ProfOptions options;
        options.by = args.by == "image" ? analyze::ProfOptions::By::kImage : analyze::ProfOptions::By::kProcedure;
        options.events = args.events;
        options.pid = args.pid;
        options.limit = args.limit;
        auto report = fleet_prof(args, options);
        if (args.format == Format::kJson) {
            std::cout << dump_document(analyze::render_prof_json(report)) << "\n";
        } else {
            std::cout << analyze::render_prof_text(report);
        }
        return kExitOk;
    }
    auto [db, contents] = read_database_epoch(args.database, args.epoch);
    if (args.include_idle) analyze::include_idle_samples(contents);
    analyze::ProfOptions options;
    options.by = args.by == "image" ? analyze::ProfOptions::By::kImage : analyze::ProfOptions::By::kProcedure;
    options.events = args.events;
    options.pid = args.pid;
    options.limit = args.limit;
    analyze::Symbolizer symbolizer(symbolizer_options(db.path(), args.symbols));
    auto report = unwrap(analyze::build_prof_report(contents, options, symbolizer));
    report.database = args.database;
    if (args.format == Format::kJson) {
        std::cout << dump_document(analyze::render_prof_json(report)) << "\n";
    } else {
        std::cout << analyze::render_prof_text(report);
        for (const auto& w : report.warnings) std::fprintf(stderr, "ecpi prof: warning: %s\n", escape_for_terminal(w).c_str());
    }
    return kExitOk;
}

}  // namespace

namespace {
void add_prof_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<ProfArgs>();
    auto* app = root.add_subcommand("prof", "Samples per procedure or image, hottest first");
    app->add_option("database", args->database, "Profile database directory, or a ClickHouse URL (the fleet)")
        ->default_str("ecpi.db");
    app->add_option("--by", args->by, "Group by procedure or image")
        ->check(CLI::IsMember({"procedure", "image"}))
        ->default_str("procedure");
    app->add_option("-e,--event", args->events, "Events to show (repeatable); the first one sorts")->delimiter(',');
    app->add_option("--pid", args->pid, "Only samples of this process");
    app->add_option("--limit", args->limit, "Show at most N rows (0: all)");
    app->add_option("--epoch", args->epoch, "Epoch to read (default: the newest)");
    add_include_idle_option(*app, args->include_idle);
    add_fleet_filter_options(*app, args->fleet);
    add_format_option(*app, args->format);
    add_symbol_search_options(*app, args->symbols);
    app->footer("\nExamples:\n  ecpi prof ecpi.db\n  ecpi prof ecpi.db --by image --epoch 1\n");
    verbs.push_back({app, [args] { return run_prof(*args); }});
}

const VerbRegistration kRegistration(30, add_prof_verb);
}  // namespace

}  // namespace ecpi::cli
