// ecpi diff: normalized shares of two profiles and their change.
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/reports/diff.h"
#include "fleet_options.h"

namespace ecpi::cli {
namespace {

struct DiffArgs {
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
    bool include_idle = false;
    std::string a;
    std::string b;
    std::string by = "procedure";
    std::string procedure;
    std::optional<std::string> event;
    std::optional<std::uint32_t> pid;
    std::size_t limit = 0;
    Format format = Format::kText;
    fleet::FleetFilterArgs fleet;
};

int run_diff(const DiffArgs& args, const CLI::App& app) {
    analyze::DiffOptions options;
    if (args.by == "image") {
        options.by = analyze::DiffOptions::By::kImage;
    } else if (args.by == "instruction") {
        options.by = analyze::DiffOptions::By::kInstruction;
    } else if (!args.procedure.empty() && app.count("--by") == 0) {
        options.by = analyze::DiffOptions::By::kInstruction;  // --procedure alone means per instruction
    }
    if (options.by == analyze::DiffOptions::By::kInstruction && args.procedure.empty())
        throw UsageError{"--by instruction needs --procedure NAME"};
    if (options.by != analyze::DiffOptions::By::kInstruction && !args.procedure.empty())
        throw UsageError{"--procedure goes with --by instruction"};
    options.procedure = args.procedure;
    options.event = args.event;
    options.pid = args.pid;
    options.limit = args.limit;

    check_fleet_filters_used(args.fleet, {args.a, args.b});
    analyze::SymbolizerPool symbolizers(symbolizer_options({}, args.symbols));
    analyze::DiffReport report;
    if (fleet::is_clickhouse_url(args.a) || fleet::is_clickhouse_url(args.b)) {
        auto a = unwrap(fleet::open_report_source(args.a, args.fleet));
        auto b = unwrap(fleet::open_report_source(args.b, args.fleet));
        report = unwrap(fleet::fleet_diff_report(a, b, options, symbolizers));
    } else {
        auto a = unwrap(analyze::load_profile(unwrap(analyze::resolve_source(args.a)), args.include_idle));
        auto b = unwrap(analyze::load_profile(unwrap(analyze::resolve_source(args.b)), args.include_idle));
        note_idle_kept_apart("diff", a.contents, args.a);
        note_idle_kept_apart("diff", b.contents, args.b);
        report = unwrap(analyze::build_diff_report(a, b, options, symbolizers));
    }
    if (args.format == Format::kJson) {
        std::cout << dump_document(analyze::render_diff_json(report)) << "\n";
    } else {
        std::cout << analyze::render_diff_text(report);
        for (const auto& w : report.warnings) std::fprintf(stderr, "ecpi diff: warning: %s\n", escape_for_terminal(w).c_str());
    }
    return kExitOk;
}

void add_diff_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<DiffArgs>();
    auto* app = root.add_subcommand("diff", "Differences between two profiles, largest change first");
    app->add_option("A", args->a,
                    "Baseline profile: DB, DB/epochs/NNNNN, DB@EPOCH, or a ClickHouse URL (its own filters in "
                    "?since=...&until=...&host=...)")
        ->required();
    app->add_option("B", args->b, "Profile compared with it")->required();
    app->add_option("--by", args->by, "Compare per procedure, image, or instruction (of --procedure)")
        ->check(CLI::IsMember({"procedure", "image", "instruction"}))
        ->default_str("procedure");
    app->add_option("--procedure", args->procedure, "The procedure to compare per instruction");
    app->add_option("-e,--event", args->event, "Event to compare (default: the one both share, cpu-clock first)");
    app->add_option("--pid", args->pid, "Only samples of this process");
    app->add_option("--limit", args->limit, "Show at most N rows (0: all)");
    add_fleet_filter_options(*app, args->fleet);
    add_include_idle_option(*app, args->include_idle);
    add_format_option(*app, args->format);
    add_symbol_search_options(*app, args->symbols);
    app->footer("\nExamples:\n  ecpi diff before.db after.db\n  ecpi diff ecpi.db@1 ecpi.db@2 --by image\n");
    verbs.push_back({app, [args, app] { return run_diff(*args, *app); }});
}

const VerbRegistration kRegistration(50, add_diff_verb);
}  // namespace
}  // namespace ecpi::cli
