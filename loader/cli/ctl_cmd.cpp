// ecpi ctl: talk to a running daemon (status, flush, epoch).
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "ecpi/loader/control.h"
#include "ecpi/loader/unwinder.h"

namespace ecpi::cli {
namespace {

struct CtlArgs {
    std::string database;
    std::string socket;
    std::string request;
    double timeout_s = 120;
    Format format = Format::kText;
};

// Each CPU the calibration measured, where it measured more than one.
void print_budget_cpus_text(const nlohmann::json& cost) {
    const auto per_cpu = cost.value("per_cpu", nlohmann::json::array());
    if (per_cpu.size() < 2) return;
    for (const auto& c : per_cpu)
        std::printf("  CPU %-4d   median %.1f us, 95%% interval %.1f-%.1f us, %d pairs at %llu Hz\n", c.value("cpu", -1),
                    c.value("median", 0.0), c.value("lower_bound", 0.0), c.value("upper_bound", 0.0), c.value("pairs", 0),
                    static_cast<unsigned long long>(c.value("calibration_hz", 0ull)));
}

// The check while running: its last verdict.
void print_budget_check_text(const nlohmann::json& sampling) {
    if (!sampling.contains("check")) return;
    const auto& k = sampling["check"];
    if (!k.contains("upper_bound")) {
        std::printf("check:       every %.0f s, none yet\n", k.value("interval_seconds", 0.0));
        return;
    }
    std::printf("check:       every %.0f s; last on CPU %d: at most %.1f us (median %.1f, %llu pairs), an estimated %.2f%%; "
                "rate lowered %llu times, cost stepped up %llu times\n",
                k.value("interval_seconds", 0.0), k.value("last_cpu", -1), k.value("upper_bound", 0.0), k.value("median", 0.0),
                static_cast<unsigned long long>(k.value("window_pairs", 0ull)), k.value("estimated_overhead_percent", 0.0),
                static_cast<unsigned long long>(k.value("rate_lowered", 0ull)), static_cast<unsigned long long>(k.value("cost_steps", 0ull)));
}

// The rate in force and, under an overhead budget, what it costs.
void print_sampling_text(const nlohmann::json& j) {
    if (!j.contains("frequency_hz")) return;
    std::printf("sampling:    %llu Hz per CPU (%s%s)\n", static_cast<unsigned long long>(j.value("frequency_hz", 0ull)),
                j.value("chosen_by", "").c_str(), j.value("randomized", true) ? ", period randomized +-10%" : "");
    if (!j.contains("cost_per_sample_us")) return;
    const auto& c = j["cost_per_sample_us"];
    std::printf("budget:      %.2f%%; one sample costs at most %.1f us (%.0f%% upper bound; median %.1f us, quartiles "
                "%.1f-%.1f us, %d pairs); estimated overhead %.2f%%%s\n",
                j.value("overhead_budget_percent", 0.0), c.value("upper_bound", 0.0), c.value("confidence", 0.0) * 100,
                c.value("median", 0.0), c.value("low", 0.0), c.value("high", 0.0), c.value("pairs", 0),
                j.value("estimated_overhead_percent", 0.0),
                j.value("floor_over_budget", false) ? " (even the lowest rate is over the budget)" : "");
    print_budget_cpus_text(c);
    print_budget_check_text(j);
    if (j.contains("next_calibration_seconds"))
        std::printf("calibration: next in %.0f s\n", j.value("next_calibration_seconds", 0.0));
}

void print_status_text(const nlohmann::json& s) {
    std::printf("database:    %s\n", s.value("database", "").c_str());
    std::printf("epoch:       %s\n", s.value("epoch", "").c_str());
    std::printf("uptime:      %.0f s\n", s.value("uptime_seconds", 0.0));
    std::printf("daemon CPU:  %.2f%% (the overhead budget's calibrations apart: %.1f CPU s)\n", s.value("cpu_percent", 0.0),
                s.value("calibration_cpu_seconds", 0.0));
    std::printf("daemon RSS:  %.1f MB\n", static_cast<double>(s.value("rss_bytes", 0ull)) / (1 << 20));
    std::printf("on disk:     %.1f MB\n", static_cast<double>(s.value("disk_bytes", 0ull)) / (1 << 20));
    const auto amp = s.value("write_amplification", nlohmann::json());
    std::printf("written:     %.1f MB since start, %s bytes written per byte the database grew\n",
                static_cast<double>(s.value("disk_written_bytes", 0ull)) / (1 << 20),
                amp.is_number() ? std::to_string(amp.get<double>()).substr(0, 5).c_str() : "-");
    std::printf("processes:   %llu tracked\n", static_cast<unsigned long long>(s.value("processes_tracked", 0ull)));
    print_sampling_text(s.value("sampling", nlohmann::json::object()));
    if (s.contains("unwind") && s["unwind"].is_object()) std::printf("%s\n", loader::unwind_status_line(s["unwind"]).c_str());
    for (const auto& e : s.value("events", nlohmann::json::array())) {
        std::printf("%s: %.0f samples/s, %llu samples drained of %llu taken, unknown %.3f%%, table evictions %llu, "
                    "ring-buffer losses %llu\n",
                    e.value("event", "").c_str(), e.value("samples_per_second", 0.0),
                    static_cast<unsigned long long>(e.value("samples", 0ull)),
                    static_cast<unsigned long long>(e.value("samples_taken", 0ull)), e.value("unknown_percent", 0.0),
                    static_cast<unsigned long long>(e.value("table_evictions", 0ull)),
                    static_cast<unsigned long long>(e.value("ringbuf_lost", 0ull)));
        if (e.value("registers", 0ull) || e.value("registers_lost", 0ull))
            std::printf("%s: %llu register snapshots kept, %llu lost\n", e.value("event", "").c_str(),
                        static_cast<unsigned long long>(e.value("registers", 0ull)),
                        static_cast<unsigned long long>(e.value("registers_lost", 0ull)));
    }
}

int run_ctl(const CtlArgs& args) {
    std::filesystem::path socket =
        args.socket.empty() ? std::filesystem::path(args.database) / "control.sock" : std::filesystem::path(args.socket);
    auto reply_text = unwrap(loader::control_request(
        socket, args.request, std::chrono::milliseconds(static_cast<long>(args.timeout_s * 1000))));
    auto reply = nlohmann::json::parse(reply_text, nullptr, false);
    if (reply.is_discarded()) throw RuntimeError{"the daemon sent a reply that is not JSON: " + reply_text};
    if (reply.contains("error")) throw RuntimeError{"the daemon refused: " + reply["error"].get<std::string>()};
    if (args.format == Format::kJson) {
        std::cout << dump_document(reply) << "\n";
    } else if (args.request == "status") {
        print_status_text(reply);
    } else if (args.request == "flush") {
        std::printf("flushed: data is on disk in epoch %s\n", reply.value("epoch", "").c_str());
    } else {
        std::printf("closed epoch %s; now recording into epoch %s\n", reply.value("closed_epoch", "").c_str(),
                    reply.value("epoch", "").c_str());
    }
    return kExitOk;
}

void add_ctl_verb(CLI::App& root, std::vector<Verb>& verbs) {
    auto args = std::make_shared<CtlArgs>();
    auto* app = root.add_subcommand("ctl", "Control a running daemon: status, flush (merge now), epoch (start a new one)");
    app->add_option("--db", args->database, "The daemon's database directory");
    app->add_option("--socket", args->socket, "Control socket path (default DB/control.sock)");
    app->add_option("request", args->request, "status | flush | epoch")
        ->required()
        ->check(CLI::IsMember({"status", "flush", "epoch"}));
    app->add_option("--timeout", args->timeout_s, "Seconds to wait for the reply")->default_str("120");
    add_format_option(*app, args->format);
    app->footer("\nExamples:\n  ecpi ctl status --db /var/lib/ecpi\n  ecpi ctl epoch --db /var/lib/ecpi   # start a new epoch\n");
    verbs.push_back({app, [args, app] {
                         if (args->database.empty() && args->socket.empty())
                             throw UsageError{"give the daemon's database with --db DIR (or --socket PATH)"};
                         return run_ctl(*args);
                     }});
}

const VerbRegistration kRegistration(25, add_ctl_verb);

}  // namespace
}  // namespace ecpi::cli
