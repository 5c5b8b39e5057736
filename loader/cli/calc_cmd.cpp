// ecpi calc: execution counts and CPI per instruction (DCPI's dcpicalc, Figure 2).
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/load_chain.h"
#include "ecpi/store/profile.h"

namespace ecpi::cli {
namespace {

struct CalcArgs {
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
    std::string procedure;
    std::string database = "ecpi.db";
    std::string image;
    std::string epoch;
    std::string event;
    std::string machine = analyze::MachineModel::kAuto;
    std::optional<double> cpu_mhz;
    std::string chase_latency;
    bool all = false;
    bool unsampled = false;
    bool summary = false;
    bool no_lines = false;
    Format format = Format::kText;
    CLI::Option* database_option = nullptr;
};

int run_calc(CalcArgs args) {
    // `ecpi calc --all DB`: the one positional is the database.
    if (args.all && !args.procedure.empty() && args.database_option->count() == 0) {
        args.database = args.procedure;
        args.procedure.clear();
    }
    if (args.all == !args.procedure.empty())
        throw UsageError{args.all ? "give either PROCEDURE or --all, not both" : "give a PROCEDURE or --all"};
    if (args.cpu_mhz && *args.cpu_mhz <= 0) throw UsageError{"--cpu-mhz must be positive"};
    if (args.unsampled && !args.all) throw UsageError{"--unsampled goes with --all"};
    auto [db, contents] = read_database_epoch(args.database, args.epoch);
    analyze::CalcOptions options;
    options.procedure = args.procedure;
    options.all = args.all;
    options.unsampled = args.unsampled;
    options.summary = args.summary;
    if (!args.image.empty()) options.image = args.image;
    options.event = args.event;
    options.cpu_mhz = args.cpu_mhz;
    if (!args.chase_latency.empty()) options.chase_latency = unwrap(analyze::parse_chase_latency(args.chase_latency));
    options.machine = args.machine;
    options.lines = !args.no_lines;
    analyze::Symbolizer symbolizer(symbolizer_options(db.path(), args.symbols));
    auto report = unwrap(analyze::run_calc(contents, options, symbolizer));
    report.database = args.database;
    if (args.format == Format::kJson) {
        analyze::write_calc_json(report, std::cout);
        std::cout << "\n";
    } else {
        std::cout << analyze::render_calc_text(report);
        for (const auto& w : report.warnings) std::fprintf(stderr, "ecpi calc: warning: %s\n", escape_for_terminal(w).c_str());
    }
    return kExitOk;
}

void add_calc_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<CalcArgs>();
    auto* app = root.add_subcommand("calc", "Execution counts and CPI per instruction of a procedure (DCPI's dcpicalc)");
    app->add_option("procedure", args->procedure, "Procedure name (exact, or without parameters/namespace)");
    args->database_option =
        app->add_option("database", args->database, "Profile database directory")->default_str("ecpi.db");
    app->add_flag("--all", args->all, "Every sampled procedure of every image");
    app->add_flag("--unsampled", args->unsampled,
                  "With --all: every procedure of the profiled images, sampled or not (CFG coverage, speed)");
    app->add_option("--image", args->image, "Only procedures of this image (path, path suffix or file name)");
    app->add_option("--epoch", args->epoch, "Epoch to read (default: the newest)");
    app->add_option("-e,--event", args->event, "Event to analyze (default: cycles if recorded, else cpu-clock)");
    app->add_option("--machine", args->machine, "Machine model: a built-in name, a JSON file, or auto (the built-in model matching the CPU recorded with the epoch, else x86_64-generic)")
        ->default_str(analyze::MachineModel::kAuto);
    app->add_option("--cpu-mhz", args->cpu_mhz, "Clock rate turning clock periods into cycles (default: as recorded)");
    app->add_option("--chase-latency", args->chase_latency,
                    "A random pointer chase's ns per step by working set, MIB:NS[:LOW:HIGH],... (default: as recorded)");
    app->add_flag("--summary", args->summary,
                  "Where the cycles went (DCPI Figure 4) instead of the listing; with --all a line per procedure and Figure 4 per image");
    app->add_flag("--no-lines", args->no_lines, "Do not look up source lines");
    add_format_option(*app, args->format);
    add_symbol_search_options(*app, args->symbols);
    app->footer("\nExamples:\n  ecpi calc main ecpi.db\n  ecpi calc main ecpi.db --summary\n  ecpi calc --all ecpi.db --summary --format json\n");
    verbs.push_back({app, [args] { return run_calc(*args); }});
}

const VerbRegistration kRegistration(40, add_calc_verb);
}  // namespace

}  // namespace ecpi::cli
