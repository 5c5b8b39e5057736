// ecpi stats: statistics of procedures across profiles (DCPI's dcpistats, Figure 3).
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/stats.h"

namespace ecpi::cli {
namespace {

struct StatsArgs {
    std::vector<std::string> profiles;
    std::string by = "procedure";
    std::optional<std::string> event;
    std::optional<std::uint32_t> pid;
    std::size_t limit = 0;
    Format format = Format::kText;
};

int run_stats(const StatsArgs& args) {
    std::vector<analyze::LoadedProfile> loaded;
    for (const auto& spec : args.profiles)
        loaded.push_back(unwrap(analyze::load_profile(unwrap(analyze::resolve_source(spec)))));
    analyze::StatsOptions options;
    options.by = args.by == "image" ? analyze::Grouping::kImage : analyze::Grouping::kProcedure;
    options.event = args.event;
    options.pid = args.pid;
    options.limit = args.limit;
    analyze::SymbolizerPool symbolizers;
    auto report = unwrap(analyze::build_stats_report(loaded, options, symbolizers));
    if (args.format == Format::kJson) {
        std::cout << analyze::render_stats_json(report).dump(2) << "\n";
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
                    "Profiles: DB (its newest epoch), DB/epochs/NNNNN, or DB@EPOCH")
        ->required();
    app->add_option("--by", args->by, "Group by procedure or image")
        ->check(CLI::IsMember({"procedure", "image"}))
        ->default_str("procedure");
    app->add_option("-e,--event", args->event, "Event to compare (default: the one all profiles share, cpu-clock first)");
    app->add_option("--pid", args->pid, "Only samples of this process");
    app->add_option("--limit", args->limit, "Show at most N rows (0: all)");
    add_format_option(*app, args->format);
    verbs.push_back({app, [args] { return run_stats(*args); }});
}

const VerbRegistration kRegistration(40, add_stats_verb);
}  // namespace
}  // namespace ecpi::cli
