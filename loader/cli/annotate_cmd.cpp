// ecpi annotate: one procedure's source and assembly with samples per line.
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/reports/annotate.h"

namespace ecpi::cli {
namespace {

struct AnnotateArgs {
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
    std::string procedure;
    std::string database = "ecpi.db";
    std::string epoch;
    std::optional<std::string> event;
    std::optional<std::uint32_t> pid;
    std::size_t hot = 3;
    Format format = Format::kText;
};

int run_annotate(const AnnotateArgs& args) {
    auto profile = unwrap(analyze::load_profile(unwrap(analyze::resolve_source(args.database, args.epoch))));
    analyze::AnnotateOptions options;
    options.procedure = args.procedure;
    options.event = args.event;
    options.pid = args.pid;
    options.hot = args.hot;
    analyze::Symbolizer symbolizer(symbolizer_options(profile.source.database, args.symbols));
    auto report = unwrap(analyze::build_annotate_report(profile, options, symbolizer));
    if (args.format == Format::kJson) {
        std::cout << dump_document(analyze::render_annotate_json(report)) << "\n";
    } else {
        std::cout << analyze::render_annotate_text(report);
        for (const auto& w : report.warnings) std::fprintf(stderr, "ecpi annotate: warning: %s\n", escape_for_terminal(w).c_str());
    }
    return kExitOk;
}

void add_annotate_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<AnnotateArgs>();
    auto* app = root.add_subcommand("annotate", "Source lines and assembly of one procedure, with samples");
    app->add_option("procedure", args->procedure, "Procedure name (full, or without parameters/namespace)")
        ->required();
    app->add_option("database", args->database, "Profile: DB (newest epoch), DB/epochs/NNNNN or DB@EPOCH")
        ->default_str("ecpi.db");
    app->add_option("--epoch", args->epoch, "Epoch to read (default: the newest)");
    app->add_option("-e,--event", args->event, "Event (default: the epoch's first, cpu-clock first)");
    app->add_option("--pid", args->pid, "Only samples of this process");
    app->add_option("--hot", args->hot, "How many lines and instructions to mark as hottest")->default_str("3");
    add_format_option(*app, args->format);
    add_symbol_search_options(*app, args->symbols);
    app->footer("\nExamples:\n  ecpi annotate main ecpi.db\n  ecpi annotate parse_record ecpi.db --format json\n");
    verbs.push_back({app, [args] { return run_annotate(*args); }});
}

const VerbRegistration kRegistration(60, add_annotate_verb);
}  // namespace
}  // namespace ecpi::cli
