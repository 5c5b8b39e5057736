// ecpi record: one-shot profiling of a command, processes, a cgroup or the
// whole system into a profile database.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/recorder.h"

namespace ecpi::cli {
namespace {


struct RecordArgs {
    loader::RecordOptions options;
    bool system_wide = false;
    bool no_randomize = false;
    bool quiet = false;
    double duration = 0;
    std::vector<std::string> events;
    std::string registers;  // empty: the default for the target
    std::string report_file;
    double overhead_budget = 0;
    bool force_frequency = false;
    Format format = Format::kText;
};

// Above this rate a sample every 50 µs or less: each costs the program
// microseconds (10-45 µs where a sample is a VM exit), so a recording would
// mostly measure its own interruptions (issue 34, defect 6).
constexpr std::uint64_t kFrequencyWithoutForce = 20000;

std::string percent(std::uint64_t part, std::uint64_t whole) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f%%", whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
    return buf;
}

// Checks the arguments and completes the recorder's options from them.
void check_and_complete_options(RecordArgs& args, CLI::App& app) {
    auto& o = args.options;
    int targets = (args.system_wide ? 1 : 0) + (o.pids.empty() ? 0 : 1) + (o.cgroups.empty() ? 0 : 1) +
                  (o.command.empty() ? 0 : 1);
    if (targets > 1) throw UsageError{"choose one target: -a, -p PID, --cgroup PATH or -- COMMAND"};
    if (o.frequency == 0 || o.frequency > 100000) throw UsageError{"-F must be between 1 and 100000 Hz"};
    if (o.frequency > kFrequencyWithoutForce && !args.force_frequency)
        throw UsageError{"-F " + std::to_string(o.frequency) + " samples every " +
                         std::to_string(1000000 / o.frequency) +
                         " microseconds: each sample costs the program microseconds (tens in a VM), so it would run several "
                         "times slower and the profile would mostly show sampling; give -F " +
                         std::to_string(kFrequencyWithoutForce) +
                         " or less, --overhead-budget PERCENT, or --force-frequency"};
    if (app.count("--overhead-budget")) {
        if (app.count("--frequency")) throw UsageError{"give -F (a rate) or --overhead-budget (a rate chosen for you), not both"};
        o.overhead_budget_percent = args.overhead_budget;
    }
    if (app.count("--duration") && args.duration <= 0) throw UsageError{"--duration must be positive"};
    if (app.count("--duration")) o.duration_s = args.duration;
    for (const auto& e : args.events) {
        auto parsed = loader::parse_event(e);
        if (!parsed.ok()) throw UsageError{parsed.error().message()};
    }
    if (!args.events.empty()) o.events = args.events;
    o.randomize = !args.no_randomize;
    // Register snapshots of every sample of a command or processes (what
    // `ecpi calc` needs to anchor its counts); off for the whole system or a
    // cgroup, where their volume (1.7 MB/s at 4999 Hz on 2 CPUs) is paid for
    // every process.
    const bool targeted = !o.command.empty() || !o.pids.empty();
    o.registers_every = args.registers.empty() ? (targeted ? 1 : 0) : parse_registers_option(args.registers);
    if (!args.quiet) o.log = [](const std::string& line) { std::fprintf(stderr, "ecpi record: %s\n", line.c_str()); };
}

// The summary as the ecpi.record JSON document.
nlohmann::json summary_json(const loader::RecordOptions& o, const loader::RecordSummary& summary) {
    nlohmann::json j{{"schema", "ecpi.record"}, {"version", 1}, {"database", o.database.string()},
                     {"epoch", summary.epoch}, {"interrupted", summary.interrupted},
                     {"wall_seconds", summary.wall_s}, {"loader_cpu_seconds", summary.loader_cpu_s},
                     {"drains", summary.drains}, {"sideband_lost", summary.sideband_lost},
                     {"frequency_hz", summary.frequency},
                     {"warnings", summary.warnings}};
    nlohmann::json events = nlohmann::json::array();
    for (const auto& e : summary.events)
        events.push_back({{"event", e.name}, {"period", e.period}, {"samples", e.samples},
                          {"unknown", e.unknown}, {"lost", e.lost}, {"spilled", e.spilled}, {"taken", e.taken},
                          {"registers", e.registers}, {"registers_lost", e.registers_lost}, {"idle", e.idle}});
    j["events"] = events;
    if (summary.command_status) j["command_status"] = *summary.command_status;
    if (summary.stack_samples) {
        j["stack_samples"] = summary.stack_samples;
        j["distinct_stacks_per_drain"] = summary.distinct_stacks_per_drain;
    }
    if (o.overhead_budget_percent)
        j["overhead_budget"] = {{"budget_percent", *o.overhead_budget_percent},
                                {"cost_per_sample_us",
                                 {{"median", summary.sample_cost_us},
                                  {"low", summary.sample_cost_low_us},
                                  {"high", summary.sample_cost_high_us}}},
                                {"estimated_overhead_percent", summary.estimated_overhead_percent}};
    if (summary.bpf_run_count) {
        j["bpf_run_count"] = summary.bpf_run_count;
        j["bpf_run_time_ns"] = summary.bpf_run_time_ns;
    }
    if (!summary.unwind.empty()) j["unwind_tables"] = summary.unwind;
    return j;
}

// The summary as lines on standard error.
void print_summary(const loader::RecordOptions& o, const loader::RecordSummary& summary) {
    if (o.overhead_budget_percent)
        std::fprintf(stderr,
                     "ecpi record: sampled at %llu Hz per CPU (overhead budget %.2f%%: one sample costs %.1f us, "
                     "quartiles %.1f-%.1f; estimated overhead %.2f%%)\n",
                     static_cast<unsigned long long>(summary.frequency), *o.overhead_budget_percent,
                     summary.sample_cost_us, summary.sample_cost_low_us, summary.sample_cost_high_us,
                     summary.estimated_overhead_percent);
    for (const auto& e : summary.events) {
        std::fprintf(stderr,
                     "ecpi record: %s: %llu samples (period %llu%s), unknown %llu (%s), lost %llu\n",
                     e.name.c_str(), static_cast<unsigned long long>(e.samples),
                     static_cast<unsigned long long>(e.period), e.name.find("clock") != std::string::npos ? " ns" : "",
                     static_cast<unsigned long long>(e.unknown), percent(e.unknown, e.samples).c_str(),
                     static_cast<unsigned long long>(e.lost));
        if (e.idle)
            std::fprintf(stderr, "ecpi record: %s: %llu more samples found a CPU idle (kept apart; reports show "
                                 "them with --include-idle)\n",
                         e.name.c_str(), static_cast<unsigned long long>(e.idle));
    }
    for (const auto& e : summary.events) {
        if (o.registers_every == 0) break;
        std::fprintf(stderr, "ecpi record: %s: %llu register snapshots kept (one sample in %u), %llu lost\n",
                     e.name.c_str(), static_cast<unsigned long long>(e.registers), o.registers_every,
                     static_cast<unsigned long long>(e.registers_lost));
    }
    if (summary.stack_samples)
        std::fprintf(stderr, "ecpi record: %llu stack samples, %.1f%% distinct within a drain interval\n",
                     static_cast<unsigned long long>(summary.stack_samples),
                     100.0 * static_cast<double>(summary.distinct_stacks_per_drain) /
                         static_cast<double>(summary.stack_samples));
    std::fprintf(stderr, "ecpi record: wrote %s (epoch %s)%s\n", o.database.c_str(), summary.epoch.c_str(),
                 summary.interrupted ? " after interruption" : "");
}

int run_record(RecordArgs& args, CLI::App& app) {
    check_and_complete_options(args, app);
    const auto& stop = stop_requested_by_signal();
    args.options.stop_signal = &stop_signal_received();
    const auto& o = args.options;
    // With a command, Ctrl-C reaches the command too (same process group);
    // without one, ecpi records until the duration passes or Ctrl-C.
    if (o.command.empty() && !o.duration_s && !args.quiet)
        std::fprintf(stderr, "ecpi record: recording; press Ctrl-C to stop\n");

    auto summary = unwrap(loader::record(o, stop));

    if (args.format == Format::kJson) write_report(dump_document(summary_json(o, summary)) + "\n", args.report_file, !o.command.empty());
    else if (!args.quiet) print_summary(o, summary);
    if (summary.command_status) return *summary.command_status;
    return kExitOk;
}

}  // namespace

namespace {
void add_record_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<RecordArgs>();
    auto* app = root.add_subcommand("record", "Profile a command, processes, a cgroup or the whole system");
    app->footer(
        "Examples:\n"
        "  ecpi record -- ./my-program arg        profile a command and every process it starts\n"
        "  ecpi record -p 1234 --duration 10      profile a running process and its children\n"
        "  ecpi record -a --duration 30 -g        the whole system, with call stacks\n"
        "Then: ecpi prof [DB]");
    auto& o = args->options;
    app->add_option("-o,--output", o.database, "Profile database directory (created if missing; merged into)")
        ->default_str("ecpi.db");
    app->add_option("-F,--frequency", o.frequency, "Mean samples per second per CPU")->default_str("4999");
    app->add_flag("--force-frequency", args->force_frequency,
                  "Accept -F above 20000 Hz (each sample costs the program microseconds)");
    app->add_option("--overhead-budget", args->overhead_budget,
                    "Instead of -F: measure what a sample costs here and sample at the highest rate (19-4999 Hz) "
                    "that costs a program at most this percent of its time")
        ->check(CLI::Range(0.01, 100.0));
    app->add_option_function<std::string>(
           "--calibration-history",
           [&o](const std::string& file) { o.calibration_history = file == "none" ? std::filesystem::path() : std::filesystem::path(file); },
           "File of this boot's budget calibrations that each pools its pairs with and adds to; none: each stands alone")
        ->default_str("/run/ecpi/budget-calibrations");
    app->add_option("-e,--event", args->events,
                    "Event to sample (repeatable): cpu-clock, task-clock, cycles, instructions, cache-misses, "
                    "branch-misses")
        ->delimiter(',');
    app->add_flag("-g", o.call_graph, "Record call stacks (CFI unwinding, frame pointers as the fallback)");
    app->add_option_function<std::string>(
           "--call-graph", [&o](const std::string& mode) { o.call_graph = true; o.call_graph_fp = mode == "fp"; },
           "Record call stacks walked by cfi (the default of -g) or fp (frame pointers only)")
        ->check(CLI::IsMember({"fp", "cfi"}));
    app->add_flag("-a,--all-cpus", args->system_wide, "Profile the whole system (the default without a target)");
    app->add_option("-p,--pid", o.pids, "Profile these processes and their children")->delimiter(',');
    app->add_option("--cgroup", o.cgroups, "Profile a cgroup v2 (path absolute or under /sys/fs/cgroup)")
        ->expected(1);
    app->add_option("--duration", args->duration, "Stop after this many seconds");
    app->add_flag("--no-randomize", args->no_randomize, "Keep the sampling period fixed (DCPI 4.1.1 randomizes it)");
    app->add_option("--drain-interval", o.drain_interval_s, "Seconds between drains of the kernel tables")
        ->default_str("1")
        ->check(CLI::Range(0.05, 3600.0));
    app->add_option("--table-entries", o.table_entries, "Entries per in-kernel aggregation table")
        ->default_str("16384")
        ->check(CLI::Range(64u, 1u << 22));
    app->add_option("--registers", args->registers,
                    "Keep the user-mode registers of one sample in N (per CPU), or off; default 1 (every sample) "
                    "with a command or -p, off otherwise (ecpi calc anchors loop counts on them)");
    app->add_option("--report-file", args->report_file,
                    "Write the --format json report here (default: standard output; standard error when running a "
                    "COMMAND, whose output goes to standard output)");
    app->add_flag("-q,--quiet", args->quiet, "Print nothing but errors");
    add_format_option(*app, args->format);
    app->add_option("command", o.command, "Command to run and profile (after --)");
    verbs.push_back({app, [args, app] { return run_record(*args, *app); }});
}

const VerbRegistration kRegistration(10, add_record_verb);
}  // namespace

}  // namespace ecpi::cli
