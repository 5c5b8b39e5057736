// ecpi paths: call-path profiles saved by `ecpi probe -o DB`, ranked by
// time, calls or net variation (variational path profiling 5.1); with
// --branch, acyclic branch paths saved by `ecpi paths record` or `import`
// (VPP 4; paths_record.cpp).
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli_common.h"
#include "ecpi/store/probe_results.h"
#include "paths_record.h"
#include "probe_render.h"

namespace ecpi::cli {
namespace {

struct PathsArgs {
    std::string database = "ecpi.db";
    std::string file;
    std::string epoch;
    std::string rank;
    std::string function;
    std::optional<std::size_t> limit;  // call paths: all; branch paths: 20
    bool all = false;
    bool branch = false;
    std::string compare;
    std::size_t compare_top = 10;
    Format format = Format::kText;
};

int run_branch_paths(const PathsArgs& args) {
    BranchReportArgs b;
    b.database = args.database;
    b.file = args.file;
    b.epoch = args.epoch;
    b.rank = args.rank.empty() ? "variation" : args.rank;
    b.procedure = args.function;
    b.compare = args.compare;
    b.compare_top = args.compare_top;
    b.limit = args.limit.value_or(20);
    b.format = args.format;
    return run_branch_report(b);
}

int run_paths(const PathsArgs& args) {
    if (args.branch) return run_branch_paths(args);
    if (!args.compare.empty()) throw UsageError{"--compare compares branch paths: add --branch"};
    if (args.rank == "count") throw UsageError{"--rank count ranks branch paths: add --branch (call paths rank by calls)"};
    auto rank = parse_path_rank(args.rank.empty() ? "time" : args.rank);
    if (!rank.ok()) throw UsageError{rank.error().message()};
    std::vector<std::filesystem::path> files;
    if (!args.file.empty()) {
        files.push_back(args.file);
    } else {
        auto db = unwrap(store::Database::open(args.database, store::Database::Mode::kReadOnly));
        auto saved = unwrap(store::list_probe_reports(db));
        if (!args.epoch.empty())
            std::erase_if(saved, [&](const store::SavedProbeReport& s) { return s.epoch != args.epoch; });
        if (saved.empty())
            throw RuntimeError{args.database + " holds no probe results" +
                               (args.epoch.empty() ? "" : " in epoch " + args.epoch) +
                               ": save some with 'ecpi probe ... -o " + args.database + "'"};
        if (args.all) {
            for (const auto& s : saved) files.push_back(s.file);
        } else {
            files.push_back(saved.back().file);
        }
    }
    nlohmann::json documents = nlohmann::json::array();
    for (const auto& file : files) {
        auto report = unwrap(store::read_probe_report(file));
        if (!args.function.empty())
            std::erase_if(report.functions, [&](const store::ProbeFunction& f) {
                return f.symbol != args.function && f.demangled != args.function &&
                       f.demangled.rfind(args.function + "(", 0) != 0;
            });
        rank_paths(report, *rank);
        if (*rank == PathRank::kVariation &&
            std::none_of(report.metrics.begin(), report.metrics.end(), [](const std::string& m) { return m != "count"; }))
            throw RuntimeError{file.string() + " has no timers (probed with --metric count): nothing to rank by variation"};
        if (args.format == Format::kJson) {
            documents.push_back(store::probe_report_to_json(report));
        } else {
            if (files.size() > 1) std::cout << "== " << file.string() << "\n";
            std::cout << render_probe_text(report, *rank, args.limit.value_or(0));
        }
    }
    if (args.format == Format::kJson) {
        // One document per run; --all wraps them in a list document.
        if (documents.size() == 1) std::cout << dump_document(documents[0]) << "\n";
        else std::cout << dump_document(nlohmann::json{{"schema", "ecpi.probe-list"}, {"version", 1}, {"reports", documents}}) << "\n";
    }
    return kExitOk;
}

void add_record_subcommand(CLI::App& paths, const std::shared_ptr<PathsRecordArgs>& args) {
    auto* app = paths.add_subcommand("record", "Run a program built with 'ecpi flags paths' and record its branch paths");
    app->add_option("-o,--output", args->database, "Profile database directory to save into")->default_str("ecpi.db");
    app->add_flag("--no-save", args->no_save, "Only print the report");
    app->add_option("--sample", args->sample, "Record 1/N of the block entries, in bursts separated by random gaps; 1/1: all")
        ->default_str("1/100");
    app->add_option("--burst", args->burst, "Block entries per burst")->default_str("4096")->check(CLI::Range(16, 100000000));
    app->add_option("--seed", args->seed, "Seed of the gaps between bursts (default: random)");
    app->add_option("--pc-hz", args->pc_hz,
                    "Samples of the program's pc a second of its CPU time, which split the paths of a regular mix "
                    "(a loop taking them in a fixed order) where the spans cannot; 0: split by the stamps")
        ->default_str("500")
        ->check(CLI::Range(0, 20000));
    app->add_option("--source", args->source, "instrumented (clang $(ecpi flags paths)) or lbr (last-branch records)")
        ->check(CLI::IsMember({"instrumented", "lbr"}))
        ->default_str("instrumented");
    app->add_option("--limit", args->limit, "Paths in the report (0: all)")->default_str("10");
    add_format_option(*app, args->format);
    app->add_option("command", args->command, "-- COMMAND [ARGS...]: the program to run");
    app->footer("\nBuild the program with clang $(ecpi flags paths). Its output stays on stdout; the report follows it.\n"
                "Example:\n  clang -O2 $(ecpi flags paths) -o orders orders.c\n  ecpi paths record -o paths.db -- ./orders\n"
                "  ecpi paths paths.db --branch --rank variation\n");
}

void add_import_subcommand(CLI::App& paths, const std::shared_ptr<PathsImportArgs>& args) {
    auto* app = paths.add_subcommand("import", "Branch paths from last-branch records printed by 'perf script -F ip,brstack'");
    app->add_option("--perf-script", args->perf_script, "The text perf script printed")->required();
    app->add_option("--image", args->image, "The binary the records come from")->required();
    app->add_option("--cpu-ghz", args->cpu_ghz, "The recording CPU's clock, to turn cycles into ns (default: report cycles)");
    app->add_option("--load-bias", args->load_bias, "Subtract this from every address (a PIE's load address)");
    app->add_option("-o,--output", args->database, "Profile database directory to save into")->default_str("ecpi.db");
    app->add_option("--limit", args->limit, "Paths in the report (0: all)")->default_str("10");
    add_format_option(*app, args->format);
}

void add_paths_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<PathsArgs>();
    auto record = std::make_shared<PathsRecordArgs>();
    auto import = std::make_shared<PathsImportArgs>();
    auto* app = root.add_subcommand("paths", "Call paths saved by 'ecpi probe -o DB'; branch paths (--branch, record)");
    app->add_option("database", args->database, "Profile database directory")->default_str("ecpi.db");
    app->add_option("--file", args->file, "Read this saved result (probe-*.json, branch-paths-*.json) instead");
    app->add_option("--epoch", args->epoch, "Only results saved in this epoch");
    app->add_flag("--all", args->all, "Every saved call-path result, not only the newest");
    app->add_option("--func,--procedure", args->function, "Only this function (symbol or demangled name)");
    app->add_option("--rank", args->rank,
                    "Order call paths by time, calls or variation (default time); branch paths by variation, time or count "
                    "(default variation)")
        ->check(CLI::IsMember({"time", "calls", "variation", "count"}));
    app->add_option("--limit", args->limit, "Show at most N paths per function (0: all; branch paths: default 20)");
    app->add_flag("--branch", args->branch, "Acyclic branch paths (VPP) saved by 'ecpi paths record'");
    app->add_option("--compare", args->compare, "With --branch: another run (database or file): overlap of the top paths");
    app->add_option("--compare-top", args->compare_top, "With --compare: the size of the top set")->default_str("10");
    add_format_option(*app, args->format);
    add_record_subcommand(*app, record);
    auto* record_app = app->get_subcommand("record");
    add_import_subcommand(*app, import);
    auto* import_app = app->get_subcommand("import");
    app->footer("\nExamples:\n  ecpi paths paths.db\n  ecpi paths paths.db --rank variation --limit 10\n"
                "  ecpi paths record -o paths.db -- ./orders\n  ecpi paths paths.db --branch --compare other.db\n");
    verbs.push_back({app, [args, record, record_app, import, import_app] {
                         if (record_app->parsed()) return run_paths_record(*record);
                         if (import_app->parsed()) return run_paths_import(*import);
                         return run_paths(*args);
                     }});
}

const VerbRegistration kRegistration(45, add_paths_verb);
}  // namespace

}  // namespace ecpi::cli
