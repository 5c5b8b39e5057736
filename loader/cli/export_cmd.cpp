// ecpi export: one epoch as pprof, JSON, folded stacks, speedscope, html, or
// an AutoFDO sample profile for clang (afdo).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "cli_common.h"
#include "ecpi/terminal_text.h"
#include "ecpi/analyze/pgo/afdo.h"
#include "ecpi/analyze/reports/export.h"
#include "fleet_options.h"

namespace ecpi::cli {
namespace {

struct ExportArgs {
    SymbolSearchArgs symbols;  // --symfs, --no-debuginfod
    bool include_idle = false;
    std::string database = "ecpi.db";
    std::string format;
    std::string output;
    std::string epoch;
    std::vector<std::string> events;
    std::optional<std::uint32_t> pid;
    bool no_source_lines = false;
    fleet::FleetFilterArgs fleet;
};

// --format from the output file's name when not given.
std::string format_from_name(const std::string& path) {
    auto ends = [&](const char* s) { return path.size() >= std::strlen(s) && path.ends_with(s); };
    if (ends(".pb.gz") || ends(".pprof") || ends(".pb")) return "pprof";
    if (ends(".speedscope.json")) return "speedscope";
    if (ends(".json")) return "json";
    if (ends(".folded") || ends(".collapsed")) return "folded";
    if (ends(".html") || ends(".htm")) return "html";
    if (ends(".afdo")) return "afdo";
    return {};
}

void write_output(const std::string& path, const std::string& bytes) {
    if (path.empty() || path == "-") {
        std::fwrite(bytes.data(), 1, bytes.size(), stdout);
        if (std::fflush(stdout) != 0) throw RuntimeError{std::string("writing to stdout: ") + std::strerror(errno)};
        return;
    }
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) throw RuntimeError{"cannot write " + path + ": " + std::strerror(errno)};
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    int err = errno;
    if (std::fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) throw RuntimeError{"cannot write " + path + ": " + std::strerror(err)};
}

analyze::ExportModel build_model(const ExportArgs& args, const analyze::ExportOptions& options) {
    check_fleet_filters_used(args.fleet, {args.database});
    if (fleet::is_clickhouse_url(args.database)) {
        if (!args.epoch.empty()) throw UsageError{"--epoch reads a local database; a ClickHouse URL takes --since/--until"};
        auto source = unwrap(fleet::FleetSource::open(args.database, args.fleet));
        return unwrap(source.export_model(options));
    }
    auto profile = unwrap(analyze::load_profile(unwrap(analyze::resolve_source(args.database, args.epoch)), args.include_idle));
    note_idle_kept_apart("export", profile.contents);
    analyze::Symbolizer symbolizer(symbolizer_options(profile.source.database, args.symbols));
    return unwrap(analyze::build_export_model(profile, options, symbolizer));
}

// --format afdo: clang's sample profile of one image (analyze/pgo/).
std::string afdo_text(const ExportArgs& args) {
    // --image is the fleet filter's option; for afdo it names the one image to profile.
    if (args.fleet.images.size() != 1)
        throw UsageError{"--format afdo needs one --image BINARY: the executable or library to profile"};
    const auto& f = args.fleet;
    if (fleet::is_clickhouse_url(args.database) || !f.hosts.empty() || !f.since.empty() || !f.until.empty() ||
        !f.password_file.empty())
        throw UsageError{"--format afdo reads a local database (DB, DB@EPOCH), not a ClickHouse URL: "
                         "--host, --since, --until and --password-file do not apply"};
    auto [db, contents] = read_database_epoch(args.database, args.epoch);
    analyze::AfdoOptions options;
    options.image = args.fleet.images.front();
    if (!args.events.empty()) options.event = args.events.front();
    analyze::Symbolizer symbolizer(symbolizer_options(db.path(), args.symbols));
    const auto profile = unwrap(analyze::build_afdo_profile(contents, options, symbolizer));
    for (const auto& w : profile.warnings) std::fprintf(stderr, "ecpi export: warning: %s\n", escape_for_terminal(w).c_str());
    return analyze::render_afdo_text(profile);
}

int run_export(const ExportArgs& args) {
    std::string format = args.format.empty() ? format_from_name(args.output) : args.format;
    if (format.empty() && !args.output.empty() && args.output != "-")
        throw UsageError{"the extension of " + args.output +
                         " names no format (.pb.gz, .pprof, .json, .speedscope.json, .folded, .html, .afdo): "
                         "choose one with --format pprof|json|folded|speedscope|html|afdo"};
    if (format.empty())
        throw UsageError{"choose an output format with --format pprof|json|folded|speedscope|html|afdo"};
    const bool one_event = format == "folded" || format == "html";
    if (one_event && args.events.size() > 1) throw UsageError{"--format " + format + " shows one event: give one --event"};
    if (format == "afdo") {
        write_output(args.output, afdo_text(args));
        return kExitOk;
    }
    if (format == "pprof" && args.output.empty() && ::isatty(STDOUT_FILENO))
        throw UsageError{"pprof output is binary (gzip): give -o FILE or redirect stdout"};

    analyze::ExportOptions options;
    options.events = args.events;
    options.pid = args.pid;
    options.source_lines = !args.no_source_lines;
    auto model = build_model(args, options);

    std::string out;
    if (format == "pprof") {
        auto bytes = unwrap(analyze::render_pprof(model));
        out.assign(bytes.begin(), bytes.end());
    } else if (format == "json") {
        out = dump_document(analyze::render_export_json(model)) + "\n";
    } else if (format == "speedscope") {
        out = analyze::render_speedscope(model).dump() + "\n";
    } else {
        // One event: the one asked for, else the first (cpu-clock first).
        std::size_t index = 0;
        if (!args.events.empty()) index = unwrap(analyze::export_event_index(model, args.events.front()));
        out = format == "folded" ? analyze::render_folded(model, index) : analyze::render_flamegraph_html(model, index);
    }
    write_output(args.output, out);
    for (const auto& w : model.warnings) std::fprintf(stderr, "ecpi export: warning: %s\n", escape_for_terminal(w).c_str());
    return kExitOk;
}

void add_export_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<ExportArgs>();
    auto* app = root.add_subcommand("export", "Write a profile for other tools: pprof, json, folded, speedscope, html, afdo");
    app->add_option("database", args->database,
                    "Profile: DB (newest epoch), DB/epochs/NNNNN, DB@EPOCH, or a ClickHouse URL (the fleet)")
        ->default_str("ecpi.db");
    app->add_option("--format", args->format,
                    "pprof (gzipped profile.proto), json (ecpi.export), folded (FlameGraph), speedscope, html "
                    "(flame graph page), or afdo (clang's sample profile for -fprofile-sample-use, from calc's "
                    "flow-inferred block counts; needs --image, an image built with -g "
                    "-fdebug-info-for-profiling); default: from the -o file name")
        ->check(CLI::IsMember({"pprof", "json", "folded", "speedscope", "html", "afdo"}));
    app->add_option("-o,--output", args->output, "Output file (default: stdout)");
    app->add_option("--epoch", args->epoch, "Epoch to read (default: the newest)");
    app->add_option("-e,--event", args->events, "Events to export (repeatable; default: all; folded and html: the first)")
        ->delimiter(',');
    app->add_option("--pid", args->pid, "Only samples of this process");
    add_include_idle_option(*app, args->include_idle);
    add_symbol_search_options(*app, args->symbols);
    app->add_flag("--no-source-lines", args->no_source_lines, "Do not read DWARF for source lines and inlined functions");
    add_fleet_filter_options(*app, args->fleet);
    app->footer("\nExamples:\n  ecpi export ecpi.db --format pprof -o profile.pb.gz\n  ecpi export ecpi.db --format html -o flame.html\n"
                "  ecpi export ecpi.db --format afdo --image ./server -o server.afdo   # clang -fprofile-sample-use=server.afdo\n");
    verbs.push_back({app, [args] { return run_export(*args); }});
}

const VerbRegistration kRegistration(70, add_export_verb);
}  // namespace
}  // namespace ecpi::cli
