// ecpi layout: BOLT branch records and lld ordering files from calc's
// execution estimates (Spike, on today's post-link optimizer).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "cli_common.h"
#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/layout/layout.h"

namespace ecpi::cli {
namespace {

struct LayoutArgs {
    std::string database = "ecpi.db";
    std::string image;
    std::string epoch;
    std::string event;
    std::string format = "bolt";
    std::string output;
    std::string order = "c3";
    std::string counts = "flow";
    std::string machine = analyze::MachineModel::kAuto;
    std::optional<double> cpu_mhz;
    std::uint64_t min_samples = 1;
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
};

std::string render(const analyze::LayoutReport& report, const std::string& format) {
    if (format == "bolt") return analyze::render_bolt_fdata(report);
    if (format == "bolt-blocks") return analyze::render_bolt_block_counts(report);
    if (format == "lld-order") return analyze::render_lld_order(report);
    if (format == "lld-call-graph") return analyze::render_lld_call_graph(report);
    return dump_document(analyze::render_layout_json(report), 1) + "\n";
}

void write_output(const std::string& text, const std::string& path) {
    if (path.empty() || path == "-") {
        std::cout << text;
        return;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeError{"cannot write " + path + ": " + std::strerror(errno)};
    out << text;
    out.close();
    if (!out) throw RuntimeError{"writing " + path + " failed: " + std::strerror(errno) + " (disk full?)"};
}

int run_layout(const LayoutArgs& args) {
    if (args.image.empty()) throw UsageError{"give --image BINARY: the executable or library to lay out"};
    if (args.cpu_mhz && *args.cpu_mhz <= 0) throw UsageError{"--cpu-mhz must be positive"};
    auto [db, contents] = read_database_epoch(args.database, args.epoch);
    analyze::LayoutOptions options;
    options.image = args.image;
    options.event = args.event;
    options.cpu_mhz = args.cpu_mhz;
    options.machine = args.machine;
    options.min_samples = args.min_samples;
    options.counts = args.counts == "flow" ? analyze::LayoutCountSource::kFlow : analyze::LayoutCountSource::kRules;
    options.order = args.order == "pettis-hansen" ? analyze::FunctionOrder::kPettisHansen : analyze::FunctionOrder::kC3;
    analyze::Symbolizer symbolizer(symbolizer_options(db.path(), args.symbols));
    const auto report = unwrap(analyze::build_layout(contents, options, symbolizer));
    write_output(render(report, args.format), args.output);
    for (const auto& w : report.warnings) std::fprintf(stderr, "ecpi layout: warning: %s\n", w.c_str());
    std::size_t records = 0;
    for (const auto& b : report.branches) records += b.count >= 0.5;
    std::fprintf(stderr, "ecpi layout: %s: %zu functions, %zu branch and call records, call graph from %s\n",
                 report.image.c_str(), report.functions.size(), records, report.call_source.c_str());
    return kExitOk;
}

void add_layout_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<LayoutArgs>();
    auto* app = root.add_subcommand(
        "layout", "Code layout for BOLT or lld from estimated execution counts (Spike: hot code together, cold apart)");
    app->add_option("database", args->database, "Profile database directory")->default_str("ecpi.db");
    app->add_option("--image", args->image, "The executable or library to lay out (path, path suffix or file name)");
    app->add_option("--format", args->format,
                    "bolt (branch records for llvm-bolt -data), bolt-blocks (block counts in BOLT's no-LBR "
                    "format; BOLT infers the edges), lld-order (--symbol-ordering-file), lld-call-graph "
                    "(--call-graph-ordering-file) or json")
        ->check(CLI::IsMember({"bolt", "bolt-blocks", "lld-order", "lld-call-graph", "json"}))
        ->default_str("bolt");
    app->add_option("-o,--output", args->output, "Write to this file instead of standard output");
    app->add_option("--order", args->order, "Function order: c3 (default) or pettis-hansen")
        ->check(CLI::IsMember({"c3", "pettis-hansen"}))
        ->default_str("c3");
    app->add_option("--counts", args->counts,
                    "Where the counts come from: flow (default: flow inference over each CFG, counts that conserve "
                    "flow with the samples as soft constraints) or rules (calc's estimates, each branch split by "
                    "the layout rules; blocks no sample reached stay at 0)")
        ->check(CLI::IsMember({"flow", "rules"}))
        ->default_str("flow");
    app->add_option("--epoch", args->epoch, "Epoch to read (default: the newest)");
    app->add_option("-e,--event", args->event, "Event whose samples estimate the counts (default: as ecpi calc)");
    app->add_option("--min-samples", args->min_samples, "Procedures with fewer samples get no branch records")
        ->default_str("1");
    app->add_option("--machine", args->machine, "Machine model, as for ecpi calc")->default_str(analyze::MachineModel::kAuto);
    app->add_option("--cpu-mhz", args->cpu_mhz, "Clock rate turning clock periods into cycles (default: as recorded)");
    add_symbol_search_options(*app, args->symbols);
    app->footer(
        "\nExamples:\n  ecpi layout ecpi.db --image ./server -o server.fdata\n"
        "  llvm-bolt ./server -o server.bolt -data server.fdata -reorder-blocks=ext-tsp -reorder-functions=hfsort "
        "-split-functions -split-all-cold\n"
        "  ecpi layout ecpi.db --image ./server --format lld-order -o order.txt   # ld.lld --symbol-ordering-file\n");
    verbs.push_back({app, [args] { return run_layout(*args); }});
}

const VerbRegistration kRegistration(45, add_layout_verb);
}  // namespace

}  // namespace ecpi::cli
