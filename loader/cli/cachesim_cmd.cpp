// ecpi cachesim: trace-sampled cache simulation (MemSpy) of a program built
// with `ecpi flags memtrace`, of an unmodified program under valgrind's
// lackey, or of a saved trace. With a COMMAND the report goes to stderr (or
// -o FILE), never to stdout, which is the program's own; with --trace, to
// stdout.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "ecpi/analyze/cachesim/cachesim.h"
#include "ecpi/analyze/cachesim/cachesim_report.h"
#include "ecpi/analyze/cachesim/data_symbols.h"
#include "ecpi/analyze/cachesim/memtrace_trace.h"
#include "ecpi/analyze/cachesim/set_sampling.h"
#include "ecpi/loader/memtrace.h"
#include "ecpi/loader/progress_line.h"

namespace ecpi::cli {
namespace {

// References per ON window. MemSpy 6.1: phases need many windows; 6.3:
// large caches need long ones. At 1/10 on six programs of 14-76 M
// references and SQLite's 425 M (bench/cachesim.sh windows, docs/CACHESIM.md
// "Window length"), 10k met the 0.3-point L1d target on all seven, 100k on
// three (14-76 windows split phases unevenly); no length that leaves enough
// windows fills a 1 MiB L2, and shorter ones widen the bound.
constexpr std::uint64_t kDefaultWindow = 10000;

struct CachesimArgs {
    std::string sample = "1/10";
    std::uint64_t window = kDefaultWindow;
    std::string sets = "auto";
    std::string set_levels = "auto";
    std::string set_turns = "off";
    std::vector<std::string> caches;
    std::string unknown = "stale";
    std::optional<std::uint64_t> seed;
    bool classes = false;
    bool valgrind = false;
    std::string trace;
    std::string write_trace;
    std::string output;
    std::size_t limit = 10;
    Format format = Format::kText;
    std::vector<std::string> command;
    std::set<std::string> given;  // the options of kSamplingOptions on the command line
};

// The options that decide what a trace holds: a replay takes the ones it is
// not given from the trace (version 2), so it samples as the recording did.
constexpr const char* kSamplingOptions[] = {"--sample", "--window", "--seed", "--sets", "--set-levels", "--set-turns", "--cache"};

// --trace FILE: the sampling its recording used, for the options not given here.
std::optional<analyze::TraceSampling> adopt_recorded_sampling(CachesimArgs& args) {
    auto recorded = unwrap(analyze::read_trace_sampling(args.trace));
    if (!recorded) return recorded;
    const auto& r = *recorded;
    auto take = [&](const char* option, auto& field, auto value) {
        if (!args.given.count(option)) field = value;
    };
    take("--sample", args.sample, "1/" + std::to_string(r.sample));
    take("--window", args.window, r.window);
    take("--seed", args.seed, std::optional<std::uint64_t>(r.seed));
    take("--sets", args.sets, r.sets ? "1/" + std::to_string(r.sets) : std::string("auto"));
    take("--set-levels", args.set_levels, r.set_levels);
    take("--set-turns", args.set_turns,
         r.set_turns.windows ? std::to_string(r.set_turns.windows) + ":" + std::to_string(r.set_turns.warm) : std::string("off"));
    std::vector<std::string> caches;
    for (const auto& g : r.caches) caches.push_back(analyze::cache_geometry_text(g));
    if (!caches.empty()) take("--cache", args.caches, caches);
    return recorded;
}

// A replay whose sets differ from the recording's would read a trace that
// lacks its sets' references outside windows (or holds others'): refused.
void check_replay_sets(const CachesimArgs& args, const std::optional<analyze::TraceSampling>& recorded, const analyze::CacheSimulator* sets) {
    if (!recorded) return;
    auto mine = sets ? sets->set_filter() : std::nullopt;
    if (bool(sets) == bool(recorded->filter) && mine == recorded->filter) return;
    throw UsageError{"trace " + args.trace + " was recorded with " + analyze::trace_sampling_text(*recorded) +
                     ": this replay's options choose other sampled sets; leave out --cache, --sets, --set-levels, --set-turns "
                     "and --seed (the trace's are used) or give the recorded ones"};
}

analyze::TraceSampling recorded_sampling(const CachesimArgs& args, std::uint64_t sample, std::uint64_t seed,
                                         const std::vector<analyze::CacheGeometry>& caches, const analyze::CacheSimulator* sets) {
    analyze::TraceSampling t;
    t.sample = sample;
    t.window = args.window;
    t.seed = seed;
    t.sets = args.sets == "auto" ? 0 : std::uint32_t(parse_ratio(args.sets, "--sets"));
    t.set_levels = args.set_levels;
    t.set_turns = unwrap(analyze::parse_set_turns(args.set_turns));
    t.caches = caches;
    if (sets) t.filter = sets->set_filter();
    return t;
}

// "1/N" or "N": the denominator.
analyze::SimulatorOptions simulator_options(const CachesimArgs& args, std::string& caches_source) {
    analyze::SimulatorOptions o;
    if (args.caches.empty()) {
        auto host = analyze::host_cache_geometry();
        o.levels = host.levels;
        caches_source = host.source;
    } else {
        for (const auto& c : args.caches) {
            auto g = analyze::parse_cache_geometry(c);
            if (!g.ok()) throw UsageError{g.error().message()};
            o.levels.push_back(*g);
        }
        caches_source = "--cache";
    }
    o.classes = args.classes;
    return o;
}

// Time sampling for the levels a window warms, set sampling for the others
// (analyze/cachesim/set_sampling.h); `sets` is made when some level is set-sampled.
analyze::SetSamplingPlan plan_sampling(const CachesimArgs& args, std::uint64_t sample, analyze::SimulatorOptions& time_options,
                                       std::optional<analyze::CacheSimulator>& sets) {
    std::uint32_t k = args.sets == "auto" ? 0 : std::uint32_t(parse_ratio(args.sets, "--sets"));
    auto plan = analyze::plan_set_sampling(time_options.levels, args.window, sample, k, args.valgrind ? "none" : args.set_levels);
    if (!plan.ok()) throw UsageError{plan.error().message()};
    time_options.set_sample = plan->combined() ? 1 : plan->set_sample;
    if (plan->combined()) {
        analyze::SimulatorOptions o = time_options;
        o.set_sample = plan->set_sample;
        auto turns = analyze::parse_set_turns(args.set_turns);
        if (!turns.ok()) throw UsageError{turns.error().message()};
        o.set_rotate_windows = sample > 1 ? turns->windows : 0;
        o.set_warm_windows = turns->warm;
        o.classes = false;
        o.bin_levels = plan->set_levels;  // the report bins the time-sampled levels from the windows
        auto made = analyze::CacheSimulator::create(o);
        if (!made.ok()) throw UsageError{made.error().message()};
        sets.emplace(std::move(made).value());
        // The windows need not simulate the set-sampled levels below the
        // last time-sampled one (the L2's work in windows was a third of
        // bloom's simulation): the report takes those from `sets`.
        std::size_t last_time = 0;
        for (std::size_t l = 0; l < plan->set_levels.size(); l++)
            if (!plan->set_levels[l]) last_time = l;
        time_options.levels.resize(last_time + 1);
    }
    return std::move(plan).value();
}

void note_methods(const analyze::SetSamplingPlan& plan, const analyze::CacheSimulator* sets, analyze::CachesimReportInput& in) {
    if (!plan.combined() || !sets) return;
    const auto& levels = sets->options().levels;
    for (std::size_t l = 0; l < levels.size(); l++)
        in.notes.push_back(levels[l].name + ": " + (plan.set_levels[l] ? "set sampling, 1/" + std::to_string(plan.set_sample) + " of the sets"
                                                                         : std::string("time sampling")) +
                           " (" + plan.reasons[l] + ")");
}

std::vector<analyze::TraceModule> to_trace_modules(const std::vector<loader::LoadedModule>& in) {
    std::vector<analyze::TraceModule> out;
    for (const auto& m : in) out.push_back({m.path, m.base, m.start, m.end, m.bias_known});
    return out;
}

nlohmann::json program_json(const loader::ProgramExit& e) {
    return {{"exit", loader::describe_wait_status(e.wait_status)}, {"exit_code", loader::exit_code_of(e.wait_status)}, {"seconds", e.seconds}};
}

// The instrumented program under the runtime's control, rings drained into the simulator.
void run_runtime_source(const CachesimArgs& args, std::uint64_t sample, std::uint64_t seed, const analyze::SetSamplingPlan& plan,
                        analyze::CacheSimulator& sim, analyze::CacheSimulator* sets, analyze::CachesimReportInput& in,
                        std::optional<analyze::TraceWriter>& writer) {
    loader::MemtraceRunOptions o;
    o.argv = args.command;
    o.window = args.window;
    o.off_mean = sample == 1 ? 0 : args.window * (sample - 1);
    o.seed = seed;
    if (sets) {
        auto filter = sets->set_filter();
        if (!filter) throw UsageError{"--sets 1/K needs K a power of two for set sampling of whole levels"};
        o.set_bitmap = filter->bitmap;
        o.set_shift = filter->shift;
        o.set_rotate_step = filter->rotate_step;
        o.set_rotate_windows = filter->rotate_windows;
        o.set_rotate_warm = filter->rotate_warm;
        // A time-sampled first level takes its counts from the windows: the
        // runtime settles the sampled sets' hits in the most recent way of
        // their first-level set outside windows (ECPI_RT_REC_SET_HITS;
        // docs/CACHESIM.md, "Settled hits").
        if (!filter->rotate_windows && !plan.set_levels.empty() && !plan.set_levels[0])
            o.set_hit_mask = std::uint32_t(sets->set_groups().size() - 1);
    }
    // The program's variables, read once its modules are known, before the
    // first record (CacheSimulator::key_statics_by).
    o.on_runtime_ready = [&](const loader::RuntimeStart& start) -> Result<void> {
        analyze::key_statics_by_symbols(to_trace_modules(start.modules), sim, sets);
        return ok();
    };
    analyze::RecordDecoder decoder(sim, sets);
    auto handler = [&](std::uint32_t ring, std::span<const ecpi_rt_record> recs) -> Result<void> {
        if (writer) ECPI_RETURN_IF_ERROR(writer->write(ring, recs));
        return decoder.feed(ring, recs);
    };
    auto r = unwrap(loader::run_memtrace(o, handler, stop_requested_by_signal()));
    if (!r.runtime_active) {
        if (!r.runtime_error.empty()) throw RuntimeError{r.runtime_error};
        throw RuntimeError{"'" + args.command[0] + "' is not built with ecpi's runtime (no reference was traced): build it with "
                           "'clang $(ecpi flags memtrace) ...', or use --valgrind for an unmodified program"};
    }
    in.modules = to_trace_modules(r.modules);
    in.program = program_json(r.exit);
    in.program["producer_stall_seconds"] = r.producer_stall_seconds;
    in.program["dropped_records"] = r.dropped_records;
    in.program["threads_without_ring"] = r.threads_without_ring;
    if (r.dropped_records) in.notes.push_back(std::to_string(r.dropped_records) + " trace records were dropped (ecpi stopped reading)");
    if (r.threads_without_ring)
        in.notes.push_back(std::to_string(r.threads_without_ring) + " threads were not traced (more threads than rings)");
    if (!decoder.unfinished().empty())
        in.notes.push_back(std::to_string(decoder.unfinished().size()) +
                           " threads did not end normally (the references after their last window are not counted)");
    if (sim.totals().simulated == 0)
        in.notes.push_back("no reference was simulated: the program made fewer references than one OFF gap (try --sample 1/1)");
}

// "ecpi cachesim: 12.3 M references simulated, 45 s (valgrind's lackey)".
std::string lackey_progress_text(const analyze::CacheSimulator& sim, double seconds) {
    char text[128];
    std::snprintf(text, sizeof text, "ecpi cachesim: %.1f M references simulated, %.0f s (valgrind's lackey; the report follows)",
                  double(sim.totals().simulated) / 1e6, seconds);
    return text;
}

void run_lackey_source(const CachesimArgs& args, analyze::CacheSimulator& sim, analyze::CachesimReportInput& in) {
    analyze::LackeyParser parser(sim);
    // A run under lackey takes 50-200x the program's time: a line on stderr
    // says it is alive, once a second, when stderr is a terminal.
    loader::ProgressLine progress(STDERR_FILENO);
    auto on_text = [&](std::string_view text) {
        auto r = parser.feed(text);
        if (progress.due()) progress.show(lackey_progress_text(sim, progress.seconds()));
        return r;
    };
    auto run = loader::run_lackey(args.command, on_text, stop_requested_by_signal());
    progress.clear();
    auto r = unwrap(std::move(run));
    unwrap(parser.finish());
    in.modules = to_trace_modules(r.modules);
    in.program = program_json(r.exit);
    in.pc_is_return_address = false;
    in.objects_available = false;
    in.notes.push_back("lackey traces every reference (no time sampling) and no allocations: data objects are globals only");
}

// -o FILE; else stderr when a COMMAND ran (its stdout is the program's own,
// which a pipe or a redirection may carry: `... -- xz -c f > f.xz`); else
// stdout (a replayed --trace).
void write_report(const std::string& text, const CachesimArgs& args, std::ofstream& out_file) {
    if (out_file.is_open()) {
        out_file << text;
        if (!out_file.flush()) throw RuntimeError{"writing the report to " + args.output + " failed"};
        return;
    }
    std::ostream& out = args.command.empty() ? std::cout : std::cerr;
    out << text;
    out.flush();
}

int run_cachesim(CachesimArgs args) {
    int sources = int(!args.trace.empty()) + int(args.valgrind) + int(args.trace.empty() && !args.valgrind);
    if (!args.trace.empty() && args.valgrind) throw UsageError{"choose --trace FILE or --valgrind, not both"};
    if (args.trace.empty() == args.command.empty())
        throw UsageError{args.command.empty() ? "nothing to simulate: give -- COMMAND or --trace FILE" : "--trace reads a saved trace: drop the COMMAND"};
    (void)sources;
    if (args.window == 0) throw UsageError{"--window must be at least 1"};
    if (!args.write_trace.empty() && (args.valgrind || !args.trace.empty()))
        throw UsageError{"--write-trace saves the runtime's trace of an instrumented program (not with --valgrind or --trace)"};
    std::optional<analyze::TraceSampling> recorded;
    if (!args.trace.empty()) recorded = adopt_recorded_sampling(args);
    if (auto turns = analyze::parse_set_turns(args.set_turns); !turns.ok()) throw UsageError{turns.error().message()};
    auto estimate = analyze::parse_unknown_estimate(args.unknown);
    if (!estimate.ok()) throw UsageError{estimate.error().message()};
    std::uint64_t sample = parse_ratio(args.sample, "--sample");
    std::uint64_t seed = args.seed.value_or(std::random_device{}() | 1);
    std::string caches_source;
    auto options = simulator_options(args, caches_source);
    options.seed = seed;
    auto caches = options.levels;
    std::optional<analyze::CacheSimulator> sets;
    auto plan = plan_sampling(args, args.valgrind ? 1 : sample, options, sets);
    check_replay_sets(args, recorded, sets ? &*sets : nullptr);
    auto simr = analyze::CacheSimulator::create(options);
    if (!simr.ok()) throw UsageError{simr.error().message()};
    auto sim = std::move(simr).value();
    // Open the report file before running, so a bad path fails before a long run.
    std::ofstream out_file;
    if (!args.output.empty()) {
        out_file.open(args.output);
        if (!out_file) throw RuntimeError{"cannot write the report to " + args.output + ": " + std::strerror(errno)};
    }
    std::optional<analyze::TraceWriter> writer;
    if (!args.write_trace.empty()) writer.emplace(unwrap(analyze::TraceWriter::create(args.write_trace)));

    analyze::CachesimReportInput in;
    in.estimate = *estimate;
    in.command = args.command;
    in.caches_source = caches_source;
    in.sample = sample;
    in.window = args.window;
    in.seed = seed;
    if (!args.trace.empty()) {
        auto info = unwrap(analyze::read_trace_file(args.trace, sim, sets ? &*sets : nullptr));
        in.source = "trace (" + info.format + ")";
        in.modules = info.modules;
        in.pc_is_return_address = info.format == "ecpi";
        in.objects_available = info.format == "ecpi";
        in.command = {};
        in.notes.push_back("trace " + args.trace + (recorded ? ", recorded with " + analyze::trace_sampling_text(*recorded) : ""));
    } else if (args.valgrind) {
        in.source = "lackey";
        in.sample = 1;
        run_lackey_source(args, sim, in);
    } else {
        in.source = "runtime";
        run_runtime_source(args, sample, seed, plan, sim, sets ? &*sets : nullptr, in, writer);
    }
    in.sets = sets ? &*sets : nullptr;
    in.set_levels = plan.set_levels;
    note_methods(plan, in.sets, in);
    if (writer) unwrap(writer->finish(in.modules, recorded_sampling(args, sample, seed, caches, in.sets)));

    auto doc = analyze::cachesim_report_json(sim, in);
    std::string text = args.format == Format::kJson ? dump_document(doc) + "\n" : analyze::render_cachesim_text(doc, args.limit);
    write_report(text, args, out_file);
    if (in.program.is_object() && in.program["exit_code"].get<int>() != 0) {
        std::cerr << "ecpi cachesim: the program " << in.program["exit"].get<std::string>() << "\n";
        return kExitRuntimeError;
    }
    return kExitOk;
}

void add_cachesim_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<CachesimArgs>();
    auto* app = root.add_subcommand("cachesim",
                                    "Trace-sampled cache simulation (MemSpy): miss rates with error bounds, by procedure, line and data object");
    app->add_option("--sample", args->sample, "Simulate 1/N of the references (ON windows, random OFF gaps); 1/1: full simulation")
        ->default_str("1/10");
    app->add_option("--window", args->window, "References per ON window (longer: fewer unknown references in large caches, fewer windows)")
        ->default_str(std::to_string(kDefaultWindow));
    app->add_option("--sets", args->sets,
                    "Set sampling (MemSpy 7.3): 1/K of the sets for the set-sampled levels (default: 1/16, fewer on small caches)")
        ->default_str("auto");
    app->add_option("--set-levels", args->set_levels,
                    "Levels set sampling decides, every reference to their sampled sets simulated: auto (those a window cannot warm), "
                    "none (time sampling; --sets then samples sets within windows), all, or NAME[,NAME]")
        ->default_str("auto");
    app->add_option("--set-turns", args->set_turns,
                    "off, or N:W: the set-sampled groups rotate every N windows, the next groups warmed in the last W "
                    "(every group takes its turn; see docs/CACHESIM.md for its warming bias)")
        ->default_str("off");
    // One value per --cache: a vector option would otherwise take the "--"
    // before the COMMAND as the end of its values, and parse the command's
    // own options (xz -c -1) as ecpi's.
    app->add_option("--cache", args->caches, "A cache level NAME=SIZE:WAYS:LINE (repeat, first level first; default: the host's)")
        ->allow_extra_args(false);
    app->add_option("--unknown", args->unknown, "Estimate references of unknown outcome as: stale, half, wood, miss, hit")
        ->check(CLI::IsMember({"stale", "half", "wood", "miss", "hit"}))
        ->default_str("stale");
    app->add_option("--seed", args->seed, "Seed of the OFF gaps and set choice (default: random, printed in the report)");
    app->add_flag("--classes", args->classes, "Split misses into compulsory, capacity and conflict (slower)");
    app->add_flag("--valgrind", args->valgrind, "Run an unmodified COMMAND under valgrind's lackey (full trace, slow)");
    app->add_option("--trace", args->trace, "Simulate a saved trace (ecpi binary or lackey --trace-mem text); a binary trace's recorded --sample, --window, "
                   "--seed, --sets, --set-levels, --set-turns and --cache are used unless given");
    app->add_option("--write-trace", args->write_trace, "Also save the runtime's trace to FILE (ecpi binary format)");
    app->add_option("-o,--output", args->output, "Write the report to FILE (default: stderr with a COMMAND, stdout with --trace)");
    app->add_option("--limit", args->limit, "Rows per table in text (0: all)")->default_str("10");
    add_format_option(*app, args->format);
    app->add_option("command", args->command, "-- COMMAND [ARGS...]: the program to run");
    app->footer(
        "Build the program with clang $(ecpi flags memtrace). The program's stdout is left to it alone:\n"
        "the report goes to stderr (or -o FILE; with --trace, to stdout). --valgrind shows its progress\n"
        "on stderr once a second when stderr is a terminal. Exit: 0, 1 (error, or the program failed), 2 (usage).");
    verbs.push_back({app, [args, app] {
                         for (const char* option : kSamplingOptions)
                             if (app->count(option)) args->given.insert(option);
                         return run_cachesim(*args);
                     }});
}

const VerbRegistration kRegistration(65, add_cachesim_verb);
}  // namespace
}  // namespace ecpi::cli
