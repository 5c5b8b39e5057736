// ecpi paths: call-path profiles saved by `ecpi probe -o DB`, ranked by
// time, calls or net variation (variational path profiling 5.1).
#include <cstdio>
#include <iostream>

#include "cli_common.h"
#include "ecpi/store/probe_results.h"
#include "probe_render.h"

namespace ecpi::cli {
namespace {

struct PathsArgs {
    std::string database = "ecpi.db";
    std::string file;
    std::string epoch;
    std::string rank = "time";
    std::string function;
    std::size_t limit = 0;
    bool all = false;
    Format format = Format::kText;
};

int run_paths(const PathsArgs& args) {
    auto rank = parse_path_rank(args.rank);
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
            std::cout << render_probe_text(report, *rank, args.limit);
        }
    }
    if (args.format == Format::kJson) {
        // One document per run; --all wraps them in a list document.
        if (documents.size() == 1) std::cout << documents[0].dump(2) << "\n";
        else std::cout << nlohmann::json{{"schema", "ecpi.probe-list"}, {"version", 1}, {"reports", documents}}.dump(2) << "\n";
    }
    return kExitOk;
}

void add_paths_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<PathsArgs>();
    auto* app = root.add_subcommand("paths", "Call-path profiles saved by 'ecpi probe -o DB'");
    app->add_option("database", args->database, "Profile database directory")->default_str("ecpi.db");
    app->add_option("--file", args->file, "Read this saved probe result (probe-*.json) instead");
    app->add_option("--epoch", args->epoch, "Only results saved in this epoch");
    app->add_flag("--all", args->all, "Every saved result, not only the newest");
    app->add_option("--func", args->function, "Only this function (symbol or demangled name)");
    app->add_option("--rank", args->rank, "Order paths by time, calls or variation")
        ->check(CLI::IsMember({"time", "calls", "variation"}))
        ->default_str("time");
    app->add_option("--limit", args->limit, "Show at most N paths per function (0: all)");
    add_format_option(*app, args->format);
    app->footer("\nExamples:\n  ecpi paths paths.db\n  ecpi paths paths.db --rank variation --limit 10\n");
    verbs.push_back({app, [args] { return run_paths(*args); }});
}

const VerbRegistration kRegistration(45, add_paths_verb);
}  // namespace

}  // namespace ecpi::cli
