// ecpi probe: targeted call-path profiles of named functions in a running
// process (iPath), refreshed while it runs; probes are added and removed
// through standard input or a control socket without restarting it.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "ecpi/analyze/paths/probe_net.h"
#include "ecpi/loader/control.h"
#include "ecpi/loader/probe.h"
#include "ecpi/store/probe_results.h"
#include "probe_render.h"

namespace ecpi::cli {
namespace {

struct ProbeArgs {
    std::uint32_t pid = 0;
    std::vector<std::string> command;
    std::vector<std::string> patterns;
    std::vector<std::string> metrics;
    double interval = 1.0;
    double duration = 0;
    std::string database;
    std::string rank = "time";
    std::string sample;
    std::uint32_t burst = 8;
    std::string unwind = "fp";
    std::string control_socket;
    std::string report_file;
    std::size_t limit = 0;
    bool quiet = false;
    bool no_stdin = false;
    bool bare = false;
    bool raw_times = false;
    Format format = Format::kText;
};

// "1/100" or "100" -> 100.
std::uint32_t parse_sample(const std::string& text) {
    std::string n = text;
    if (auto slash = text.find('/'); slash != std::string::npos) {
        if (text.substr(0, slash) != "1") throw UsageError{"--sample takes 1/N (e.g. 1/100)"};
        n = text.substr(slash + 1);
    }
    try {
        std::size_t used = 0;
        unsigned long v = std::stoul(n, &used);
        if (used != n.size() || v < 2 || v > 1000000000ul) throw std::invalid_argument("range");
        return static_cast<std::uint32_t>(v);
    } catch (const std::exception&) {
        throw UsageError{"--sample takes 1/N with N from 2 to 10^9, not '" + text + "'"};
    }
}

// One control line ("add PATTERN", "remove PATTERN", "list") -> reply lines.
struct ControlReply {
    bool ok = true;
    std::vector<std::string> lines;
};
ControlReply control(loader::ProbeSession& session, const std::string& raw) {
    std::string line = raw;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    line.erase(0, line.find_first_not_of(" \t"));
    ControlReply reply;
    if (line.empty()) return reply;
    std::string verb = line.substr(0, line.find(' '));
    std::string arg = verb.size() < line.size() ? line.substr(verb.size() + 1) : "";
    arg.erase(0, arg.find_first_not_of(" \t"));
    if (verb == "add" && !arg.empty()) {
        auto added = session.add(arg);
        if (!added.ok()) return {false, {added.error().message()}};
        for (const auto& p : added->probes) reply.lines.push_back("added " + p);
        for (const auto& p : added->already) reply.lines.push_back("already probed " + p);
    } else if (verb == "remove" && !arg.empty()) {
        auto removed = session.remove(arg);
        if (!removed.ok()) return {false, {removed.error().message()}};
        reply.lines.push_back("removed " + std::to_string(*removed) + " probe" + (*removed == 1 ? "" : "s") + " of '" +
                              arg + "'");
    } else if (verb == "list") {
        reply.lines = session.list();
        if (reply.lines.empty()) reply.lines.push_back("no probes");
    } else {
        return {false, {"unknown control line '" + line + "' (add PATTERN, remove PATTERN, list)"}};
    }
    return reply;
}

// Checks the arguments and turns them into the session's options and the
// paths' rank.
loader::ProbeOptions probe_options(const ProbeArgs& args, CLI::App& app, PathRank& rank) {
    if ((args.pid != 0) == !args.command.empty()) throw UsageError{"choose one target: -p PID or -- COMMAND"};
    if (args.patterns.empty()) throw UsageError{"name at least one function with --func PATTERN"};
    if (args.interval <= 0) throw UsageError{"--interval must be positive"};
    if (app.count("--duration") && args.duration <= 0) throw UsageError{"--duration must be positive"};
    auto parsed_rank = parse_path_rank(args.rank);
    if (!parsed_rank.ok()) throw UsageError{parsed_rank.error().message()};
    rank = *parsed_rank;

    loader::ProbeOptions o;
    o.pid = args.pid;
    o.command = args.command;
    o.patterns = args.patterns;
    if (!args.metrics.empty()) {
        o.metrics = {"count"};
        for (const auto& m : args.metrics)
            if (m != "count" && std::find(o.metrics.begin(), o.metrics.end(), m) == o.metrics.end()) o.metrics.push_back(m);
    }
    if (rank == PathRank::kVariation && o.metrics.size() == 1)
        throw UsageError{"--rank variation needs a timer (--metric wall, cpu or blocked)"};
    if (!args.sample.empty()) {
        o.sample_n = parse_sample(args.sample);
        o.sample_burst = args.burst;
        if (o.metrics.size() == 1) throw UsageError{"--sample samples timers: add --metric wall, cpu or blocked"};
    }
    o.dwarf = args.unwind == "dwarf";
    o.bare = args.bare;
    o.raw_times = args.raw_times;
    if (!args.quiet) o.log = [](const std::string& line) { std::fprintf(stderr, "ecpi probe: %s\n", line.c_str()); };
    return o;
}

// Control lines from standard input, once it is readable: each complete
// line is applied and answered on standard error. EOF stops reading.
void read_stdin_controls(loader::ProbeSession& session, bool& read_stdin, std::string& stdin_buffer) {
    pollfd pfd{STDIN_FILENO, POLLIN, 0};
    int ready = ::poll(&pfd, read_stdin ? 1 : 0, 20);
    if (!read_stdin || ready <= 0) return;
    char buf[4096];
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n <= 0) {
        read_stdin = false;  // EOF: keep probing
        return;
    }
    stdin_buffer.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = stdin_buffer.find('\n')) != std::string::npos) {
        std::string line = stdin_buffer.substr(0, nl);
        stdin_buffer.erase(0, nl + 1);
        unwrap(session.poll());  // results of removed probes complete up to now
        auto reply = control(session, line);
        for (const auto& l : reply.lines)
            std::fprintf(stderr, "ecpi probe: %s%s\n", reply.ok ? "" : "error: ", l.c_str());
    }
}

// The probing loop: control lines, the live text every --interval, until a
// signal, --duration or the target's exit. True when the target exited.
bool probe_until_done(loader::ProbeSession& session, std::optional<loader::ControlServer>& server,
                      const std::atomic<bool>& stop, const ProbeArgs& args, PathRank rank) {
    const bool text = args.format == Format::kText;
    // Standard input carries control lines, except when it belongs to the command.
    bool read_stdin = !args.no_stdin && args.command.empty();
    std::string stdin_buffer;
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    auto next_print = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.interval));
    std::optional<Clock::time_point> deadline;
    if (args.duration > 0)
        deadline = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.duration));

    while (!stop.load()) {
        read_stdin_controls(session, read_stdin, stdin_buffer);
        if (server) {
            server->serve([&](const std::string& request) {
                (void)session.poll();
                auto reply = control(session, request);
                return nlohmann::json{{"ok", reply.ok}, {"lines", reply.lines}}.dump();
            });
        }
        unwrap(session.poll());
        if (!session.target_alive()) return true;
        const auto now = Clock::now();
        if (deadline && now >= *deadline) break;
        if (text && !args.quiet && now >= next_print) {
            auto live = session.snapshot(false);
            analyze::subtract_probe_cost(live);
            rank_paths(live, rank);
            std::cout << render_probe_text(live, rank, args.limit) << std::flush;
            next_print += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(args.interval));
            if (next_print < now) next_print = now;
        }
    }
    return false;
}

int run_probe(ProbeArgs& args, CLI::App& app) {
    PathRank rank{};
    const loader::ProbeOptions o = probe_options(args, app, rank);
    const auto& stop = stop_requested_by_signal();
    auto session = unwrap(loader::ProbeSession::start(o));
    std::optional<loader::ControlServer> server;
    if (!args.control_socket.empty()) server.emplace(unwrap(loader::ControlServer::listen(args.control_socket)));
    const bool exited = probe_until_done(session, server, stop, args, rank);

    unwrap(session.poll());
    auto report = session.snapshot(true);
    analyze::subtract_probe_cost(report);
    if (exited && args.command.empty() && !args.quiet)
        std::fprintf(stderr, "ecpi probe: process %u exited; its results so far follow\n", session.pid());

    if (!args.database.empty()) {
        auto db = unwrap(store::Database::open(args.database, store::Database::Mode::kCreate));
        auto file = unwrap(store::save_probe_report(db, report));
        if (!args.quiet) std::fprintf(stderr, "ecpi probe: saved %s\n", file.c_str());
    }
    rank_paths(report, rank);
    const std::string rendered = args.format == Format::kText ? render_probe_text(report, rank, args.limit)
                                                              : dump_document(store::probe_report_to_json(report)) + "\n";
    write_report(rendered, args.report_file, !args.command.empty());
    if (auto status = session.command_status()) return *status;
    return kExitOk;
}

void add_probe_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<ProbeArgs>();
    auto* app = root.add_subcommand("probe", "Call-path profiles of named functions in a running process (uprobes)");
    app->footer(
        "PATTERN is [IMAGE:]FUNCTION: a name, a demangled C++ name or a glob, optionally in one image\n"
        "(libc.so.6:malloc, libc:read*). Every matching function is probed and kept apart.\n"
        "With -p, standard input takes control lines while the target runs:\n"
        "  add PATTERN | remove PATTERN | list\n"
        "(with -- COMMAND, standard input stays the command's; use --control SOCKET).\n"
        "Examples:\n"
        "  ecpi probe -p 1234 --func ledger_lookup --interval 2\n"
        "  ecpi probe --func 'libc.so.6:write' --metric count,wall,blocked -o ecpi.db -- ./server\n"
        "  ecpi probe -p 1234 --func 'Parser::*' --rank variation --duration 10\n"
        "Saved results: ecpi paths [DB]");
    app->add_option("-p,--pid", args->pid, "Probe this running process");
    app->add_option("-f,--func", args->patterns, "Function pattern to probe (repeatable)");
    app->add_option("-m,--metric", args->metrics, "Metrics: count, wall, cpu, blocked (default: all)")
        ->delimiter(',')
        ->check(CLI::IsMember({"count", "wall", "cpu", "blocked"}));
    app->add_option("--interval", args->interval, "Seconds between live tables")->default_str("1");
    app->add_option("--duration", args->duration, "Stop after this many seconds");
    app->add_option("-o,--output", args->database, "Save the final results into this profile database");
    app->add_option("--rank", args->rank, "Order paths by time, calls or variation (net variation = total - calls x min)")
        ->check(CLI::IsMember({"time", "calls", "variation"}))
        ->default_str("time");
    app->add_option("--limit", args->limit, "Show at most N paths per function (0: all)");
    app->add_option("--sample", args->sample, "Time one call in N (1/N), in bursts with random starts");
    app->add_option("--burst", args->burst, "Calls timed per burst with --sample")->default_str("8")->check(CLI::Range(1, 1000000));
    app->add_option("--unwind", args->unwind, "Call paths from frame pointers (fp) or DWARF call frame information (dwarf: through code without frame pointers)")
        ->check(CLI::IsMember({"fp", "dwarf"}))
        ->default_str("fp");
    app->add_option("--control", args->control_socket, "Also take control lines on this Unix socket");
    app->add_option("--report-file", args->report_file,
                    "Write the final result here (default: standard output; standard error when running a COMMAND, whose output goes to standard output)");
    app->add_flag("--no-stdin", args->no_stdin, "Do not read control lines from standard input");
    app->add_flag("--bare", args->bare, "Benchmarks: attach empty BPF programs (the uprobe cost alone; no results)")
        ->group("");
    app->add_flag("--raw-times", args->raw_times,
                  "Report times as measured, with the probe's own cost inside them (default: measure it at start and subtract it)");
    app->add_flag("-q,--quiet", args->quiet, "No live tables or progress; only the final result");
    add_format_option(*app, args->format);
    app->add_option("command", args->command, "Command to run and probe (after --)");
    verbs.push_back({app, [args, app] { return run_probe(*args, *app); }});
}

const VerbRegistration kRegistration(40, add_probe_verb);
}  // namespace

}  // namespace ecpi::cli
