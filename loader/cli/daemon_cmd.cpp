// ecpi daemon: always-on, system-wide profiling into a database, controlled
// through a socket (`ecpi ctl`). DCPI 4.3: the daemon and its profile database.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>

#include <sys/stat.h>

#include "cli_common.h"
#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/recorder.h"
#include "daemon_push.h"

namespace ecpi::cli {
namespace {


struct DaemonArgs {
    loader::RecordOptions options;
    std::vector<std::string> events;
    std::uint64_t max_memory_mb = 0;
    std::uint64_t max_disk_mb = 0;
    std::string socket;
    bool no_randomize = false;
    std::string registers = "off";
    double overhead_budget = 1.0;
    DaemonPushArgs push;
};

void log_line(const std::string& line) {
    char stamp[32];
    std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::localtime(&now));
    std::fprintf(stderr, "%s ecpi daemon: %s\n", stamp, line.c_str());
    std::fflush(stderr);
}

int run_daemon(DaemonArgs& args, const CLI::App& app) {
    // The database holds every profiled user's command lines and code
    // addresses: everything the daemon creates is its user's alone
    // (directories 0700, files 0600), whatever the caller's umask.
    ::umask(077);
    auto& o = args.options;
    for (const auto& e : args.events) {
        auto parsed = loader::parse_event(e);
        if (!parsed.ok()) throw UsageError{parsed.error().message()};
    }
    if (!args.events.empty()) o.events = args.events;
    if (o.frequency == 0 || o.frequency > 100000) throw UsageError{"-F must be between 1 and 100000 Hz"};
    if (app.count("--frequency") && app.count("--overhead-budget"))
        throw UsageError{"give -F (a rate) or --overhead-budget (a rate chosen for you), not both"};
    // Issue 20: the rate is what the budget affords unless -F forces one.
    if (!app.count("--frequency")) o.overhead_budget_percent = args.overhead_budget;
    o.daemon = true;
    o.flush_interval_s = o.drain_interval_s;  // merge after every drain: kill -9 loses one interval at most
    o.max_memory_bytes = args.max_memory_mb << 20;
    o.max_disk_bytes = args.max_disk_mb << 20;
    o.randomize = !args.no_randomize;
    o.registers_every = parse_registers_option(args.registers);
    o.control_socket = args.socket.empty() ? o.database / "control.sock" : std::filesystem::path(args.socket);
    o.log = log_line;

    const auto& stop = stop_requested_by_signal();
    signal(SIGPIPE, SIG_IGN);

    log_line("profiling the whole system into " + o.database.string() + " (control socket " +
             o.control_socket.string() + "); " +
             (o.overhead_budget_percent ? "calibrating the overhead budget" : std::to_string(o.frequency) + " Hz per CPU (-F)") +
             "; SIGTERM stops");
    auto pusher = start_daemon_push(args.push, o, log_line);  // wakes after each merge (o.merged)
    auto summary = unwrap(loader::record(o, stop));
    stop_daemon_push(pusher, log_line);
    for (const auto& e : summary.events)
        log_line("stopped: " + e.name + ": " + std::to_string(e.samples) + " samples, " + std::to_string(e.unknown) +
                 " unknown, " + std::to_string(e.lost) + " lost, " + std::to_string(e.registers) +
                 " register snapshots (" + std::to_string(e.registers_lost) + " lost); epoch " + summary.epoch);
    return kExitOk;
}

void add_daemon_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<DaemonArgs>();
    auto* app = root.add_subcommand("daemon", "Profile the whole system continuously into a database (until SIGTERM)");
    app->footer("Control it from another shell: ecpi ctl --db DIR status|flush|epoch");
    auto& o = args->options;
    o.drain_interval_s = 5.0;
    app->add_option("--db", o.database, "Profile database directory (created if missing)")->required();
    app->add_option("-F,--frequency", o.frequency,
                    "Force this many samples per second per CPU (default: what --overhead-budget affords)");
    app->add_option("--overhead-budget", args->overhead_budget,
                    "Sample at the highest rate (19-4999 Hz per CPU) whose measured cost stays within this percent "
                    "of a program's time; measured at start, hourly and when the CPU count changes")
        ->default_str("1")
        ->check(CLI::Range(0.01, 100.0));
    app->add_option("--calibration-interval", o.calibration_interval_s,
                    "Seconds between the overhead budget's calibrations")
        ->default_str("3600")
        ->check(CLI::Range(1.0, 86400.0 * 7));
    app->add_option_function<std::string>(
           "--calibration-history",
           [&o](const std::string& file) { o.calibration_history = file == "none" ? std::filesystem::path() : std::filesystem::path(file); },
           "File of this boot's budget calibrations that each pools its pairs with and adds to; none: each stands alone")
        ->default_str("/run/ecpi/budget-calibrations");
    app->add_option("-e,--event", args->events, "Event to sample (repeatable)")->delimiter(',');
    app->add_flag("-g", o.call_graph, "Record call stacks (CFI unwinding, frame pointers as the fallback)");
    app->add_option_function<std::string>(
           "--call-graph", [&o](const std::string& mode) { o.call_graph = true; o.call_graph_fp = mode == "fp"; },
           "Record call stacks walked by cfi (the default of -g) or fp (frame pointers only)")
        ->check(CLI::IsMember({"fp", "cfi"}));
    app->add_option("--cgroup", o.cgroups, "Profile only these cgroups v2 (repeatable)");
    app->add_option("--drain-interval", o.drain_interval_s, "Seconds between drains (each followed by a merge)")
        ->default_str("5")
        ->check(CLI::Range(0.1, 3600.0));
    app->add_option("--epoch-interval", o.epoch_interval_s,
                    "Seconds after which an epoch is closed and a new one started (default 86400, a day; 0: never), "
                    "so that --max-disk can remove old data")
        ->default_str("86400")
        ->check(CLI::Range(0.0, 86400.0 * 366));
    app->add_option_function<std::uint64_t>(
           "--compact-after", [&o](std::uint64_t kb) { o.compact_bytes = kb << 10; },
           "KB the journal grows between compaction attempts (default 4096); a compaction is written only when it "
           "at least halves what it replaces")
        ->default_str("4096");
    app->add_option("--max-memory", args->max_memory_mb, "Warn when resident memory exceeds this many MB");
    app->add_option("--max-disk", args->max_disk_mb, "Remove the oldest epochs to stay under this many MB");
    app->add_flag("--exclude-self", o.exclude_self, "Do not sample the daemon itself");
    app->add_option("--socket", args->socket, "Control socket path (default DB/control.sock)");
    app->add_flag("--no-randomize", args->no_randomize, "Keep the sampling period fixed");
    // Off by default: a snapshot is 168 bytes through the ring and ~30 on
    // disk, for every process on the machine (at 4999 Hz on 2 CPUs, 1.7 MB/s
    // and ~1 GB a day); a small fraction (e.g. 100) is enough for loop rates.
    app->add_option("--registers", args->registers,
                    "Keep the user-mode registers of one sample in N (per CPU), or off (default: off, for volume: "
                    "every sample would write ~1 GB a day at 4999 Hz on 2 CPUs); calc and `export --format afdo` "
                    "anchor loop and branch counts on them (e.g. 10)")
        ->default_str("off");
    app->add_option("--table-entries", o.table_entries, "Entries per in-kernel aggregation table")
        ->default_str("16384")
        ->check(CLI::Range(64u, 1u << 22));
    add_daemon_push_options(*app, args->push);
    app->footer("\nExamples:\n  ecpi daemon --db /var/lib/ecpi --exclude-self   # at most 1% overhead (the default budget)\n  ecpi daemon --db /var/lib/ecpi --overhead-budget 0.5\n  ecpi daemon --db /var/lib/ecpi -F 99 --registers 100\n");
    verbs.push_back({app, [args, app] { return run_daemon(*args, *app); }});
}

const VerbRegistration kRegistration(20, add_daemon_verb);

}  // namespace
}  // namespace ecpi::cli
