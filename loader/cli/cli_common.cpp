#include "cli_common.h"

#include "ecpi/analyze/reports/kernel_idle.h"
#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/terminal_text.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ecpi::cli {
namespace {
std::vector<std::pair<int, VerbFactory>>& registry() {
    static std::vector<std::pair<int, VerbFactory>> verbs;  // constructed on first use
    return verbs;
}
}  // namespace

namespace {
std::atomic<int> g_stop_signal{0};  // constant-initialized: a signal handler may store to it
}  // namespace

const std::atomic<int>& stop_signal_received() { return g_stop_signal; }

const std::atomic<bool>& stop_requested_by_signal() {
    static std::atomic<bool> stop{false};
    struct sigaction sa {};
    sa.sa_handler = [](int signal_number) {
        g_stop_signal.store(signal_number);  // lock-free atomics: safe in a signal handler
        stop.store(true);
    };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return stop;
}

VerbRegistration::VerbRegistration(int order, VerbFactory factory) { registry().emplace_back(order, factory); }

std::vector<VerbFactory> registered_verbs() {
    auto sorted = registry();
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<VerbFactory> out;
    for (const auto& [order, f] : sorted) out.push_back(f);
    return out;
}

namespace {
// DB@N and DB/epochs/NNNNN name an epoch in the profile's name itself; README
// promises both forms to every report (issue 34, defect 3).
bool names_an_epoch(const std::string& spec) {
    const std::size_t at = spec.rfind('@');
    if (at != std::string::npos && at > 0 && at + 1 < spec.size() &&
        std::all_of(spec.begin() + static_cast<std::ptrdiff_t>(at) + 1, spec.end(), [](unsigned char c) { return std::isdigit(c); }))
        return true;
    std::filesystem::path path = std::filesystem::path(spec).lexically_normal();
    if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
    return path.has_parent_path() && path.parent_path().filename() == "epochs";
}
}  // namespace

OpenedEpoch read_database_epoch(const std::string& spec, const std::string& epoch_option) {
    std::string database = spec;
    std::string epoch = epoch_option;
    if (names_an_epoch(spec)) {
        auto source = unwrap(analyze::resolve_source(spec, epoch_option));
        database = source.database.string();
        epoch = source.epoch;
    }
    auto db = unwrap(store::Database::open(database, store::Database::Mode::kReadOnly));
    std::string chosen = epoch;
    std::vector<std::string> epochs;
    if (chosen.empty()) {
        epochs = unwrap(db.epochs());
        if (epochs.empty()) throw RuntimeError{database + " holds no epochs yet: record into it first"};
        chosen = epochs.back();
    }
    auto contents = unwrap(db.read_epoch(chosen));
    analyze::idle_from_kernel(contents);
    // The newest epoch of a daemon's database is often just started: say so,
    // and where the data is, rather than show an empty report.
    if (epoch.empty() && contents.profiles.empty() && epochs.size() > 1) {
        std::string with_data;
        for (auto it = epochs.rbegin() + 1; it != epochs.rend() && with_data.empty(); ++it) {
            auto older = db.read_epoch(*it);
            if (older.ok() && !older->profiles.empty()) with_data = *it;
        }
        std::fprintf(stderr, "ecpi: note: the newest epoch %s of %s holds no samples yet%s\n", chosen.c_str(),
                     database.c_str(),
                     with_data.empty() ? "; no older epoch has any either"
                                       : ("; epoch " + with_data + " has data (--epoch " +
                                          std::to_string(std::stoull(with_data)) + ")")
                                             .c_str());
    }
    return {std::move(db), std::move(contents)};
}

void add_include_idle_option(CLI::App& app, bool& include_idle) {
    app.add_flag("--include-idle", include_idle,
                 "Count samples that found a CPU idle in the shares, as [idle cpu N] rows (default: kept apart, "
                 "counted in the header)");
}

void add_symbol_search_options(CLI::App& app, SymbolSearchArgs& args) {
    app.add_option("--symfs", args.symfs,
                   "Directory holding copies of images that moved or were deleted: DIR/<recorded path>, "
                   "DIR/<file name> or DIR/.build-id/xx/rest, used only with the recorded build id (repeatable)");
    app.add_flag("--no-debuginfod", args.no_debuginfod,
                 "Fetch no debug files from the servers in DEBUGINFOD_URLS (by default, images without symbols "
                 "get theirs by build id when DEBUGINFOD_URLS is set)");
}

analyze::Symbolizer::Options symbolizer_options(const std::filesystem::path& database, const SymbolSearchArgs& args) {
    analyze::Symbolizer::Options options;
    if (!database.empty()) options.database = database;
    options.symfs.assign(args.symfs.begin(), args.symfs.end());
    if (args.no_debuginfod) ::unsetenv("DEBUGINFOD_URLS");
    options.debuginfod.enabled = !args.no_debuginfod;
    options.debuginfod.report = [](const std::string& line) {
        std::fprintf(stderr, "ecpi: %s\n", escape_for_terminal(line).c_str());
    };
    return options;
}

void note_idle_kept_apart(const char* verb, const store::EpochContents& contents, const std::string& label) {
    for (const auto& [event, meta] : contents.meta.events) {
        const std::string note = analyze::idle_note(meta);
        if (note.empty()) continue;
        std::fprintf(stderr, "ecpi %s: note: %s%s: %s\n", verb, label.empty() ? "" : escape_for_terminal(label + ": ").c_str(),
                     escape_for_terminal(event).c_str(), note.c_str());
    }
}

void add_format_option(CLI::App& app, Format& format) {
    // A plain validator, not CLI11's CheckedTransformer: that one prints its
    // internals in --help ("ENUM:value in {json->1,text->0} OR {1,0}") and in
    // errors ("Check xml value in ... FAILED"); issue 34, defect 8.
    const CLI::Validator text_or_json(
        [](std::string& value) -> std::string {
            std::string lower = value;
            std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
            if (lower != "text" && lower != "json") return "unknown format " + escape_for_terminal(value) + " (text or json)";
            value = lower;
            return {};
        },
        "", "format");
    app.add_option_function<std::string>(
           "--format", [&format](const std::string& value) { format = value == "json" ? Format::kJson : Format::kText; },
           "Output format: text or json")
        ->check(text_or_json)
        ->type_name("text|json")
        ->default_str("text");
}

void write_report(const std::string& text, const std::string& report_file, bool runs_command) {
    if (!report_file.empty()) {
        std::ofstream out(report_file, std::ios::binary | std::ios::trunc);
        if (!out) throw RuntimeError{"cannot write the report to " + report_file + ": " + std::strerror(errno)};
        out << text;
        if (!out.flush()) throw RuntimeError{"writing the report to " + report_file + ": " + std::strerror(errno)};
        return;
    }
    std::FILE* stream = runs_command ? stderr : stdout;
    std::fwrite(text.data(), 1, text.size(), stream);
    std::fflush(stream);
}

std::uint32_t parse_registers_option(const std::string& value) {
    if (value == "off") return 0;
    std::uint32_t every = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), every);
    if (ec != std::errc() || end != value.data() + value.size())
        throw UsageError{"--registers takes N (one sample in N keeps its registers; 1: every sample) or off, not '" +
                         value + "'"};
    return every;
}

std::uint64_t parse_ratio(const std::string& text, const char* option) {
    std::string s = text.rfind("1/", 0) == 0 ? text.substr(2) : text;
    std::uint64_t v = 0;
    try {
        std::size_t used = 0;
        v = std::stoull(s, &used);
        if (used != s.size()) v = 0;
    } catch (const std::exception&) {
        v = 0;
    }
    if (v == 0 || v > 1'000'000)
        throw UsageError{std::string(option) + " '" + text + "' is not 1/N with N from 1 to 1000000"};
    return v;
}

}  // namespace ecpi::cli
