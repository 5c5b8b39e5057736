// Shared pieces of the ecpi command line: the verb table, exit codes, and
// the --format option. Verbs live in one file each and only parse options,
// call a library and print.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "ecpi/json_document.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::cli {

// Documented exit codes (README.md): 0 success, 1 runtime error, 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

// A runtime failure: printed as one line "ecpi <verb>: <message>".
struct RuntimeError {
    std::string message;
};
// A usage failure found after parsing (conflicting options, ...).
struct UsageError {
    std::string message;
};

struct Verb {
    CLI::App* app = nullptr;
    std::function<int()> run;  // returns the exit code; may throw RuntimeError/UsageError
};

// Installs SIGINT/SIGTERM handlers that set the returned flag (recording
// verbs stop cleanly, flush, and leave a valid database).
const std::atomic<bool>& stop_requested_by_signal();
// The signal that set that flag (SIGINT or SIGTERM; 0 before one arrived):
// `record -- COMMAND` passes it on to the command, so that `kill -INT` of
// ecpi ends the command as Ctrl-C would (exit 130, not 143; issue 34).
const std::atomic<int>& stop_signal_received();

enum class Format { kText, kJson };
// Adds --format text|json to a verb.
void add_format_option(CLI::App& app, Format& format);
// --include-idle: show the samples that found a CPU idle as "[idle cpu N]"
// rows and count them in the shares (issue 20; by default they are kept
// apart and only counted in the header).
void add_include_idle_option(CLI::App& app, bool& include_idle);
// One line on stderr per event whose idle samples a report leaves out:
// "ecpi VERB: note: [LABEL: ]<event>: N samples found a CPU idle ...".
void note_idle_kept_apart(const char* verb, const store::EpochContents& contents, const std::string& label = {});

// Where a report finds symbols: --symfs DIR (repeatable: copies of images
// that moved or were deleted since recording) and --no-debuginfod (fetch no
// debug files, even with DEBUGINFOD_URLS set).
struct SymbolSearchArgs {
    std::vector<std::string> symfs;
    bool no_debuginfod = false;
};
void add_symbol_search_options(CLI::App& app, SymbolSearchArgs& args);
// The symbolizer options of a report over `database` with those choices:
// debuginfod fetches with DEBUGINFOD_URLS set, progress and failures on
// stderr; --no-debuginfod also clears DEBUGINFOD_URLS for this process, so
// that elfutils does not fetch on its own either.
analyze::Symbolizer::Options symbolizer_options(const std::filesystem::path& database, const SymbolSearchArgs& args);

// Where a verb that runs a COMMAND puts its report: FILE when given (the
// option --report-file), else standard error when the command shares our
// standard output (its own output would otherwise interleave with the
// report, and JSON would not parse; as `perf stat`), else standard output.
void write_report(const std::string& text, const std::string& report_file, bool runs_command);

// --registers N|off (record, daemon): one sample in N keeps its registers;
// "off" or 0 keeps none. Throws UsageError otherwise.
std::uint32_t parse_registers_option(const std::string& value);

// Opens a database read-only and reads one epoch of it: the one the name
// gives (DB@N, DB/epochs/NNNNN) or `epoch` (--epoch; both must agree), else
// the newest (a database without epochs is a runtime error).
struct OpenedEpoch {
    store::Database database;
    store::EpochContents contents;
};
OpenedEpoch read_database_epoch(const std::string& database, const std::string& epoch);

// Throws RuntimeError with the error's message.
template <typename T>
T unwrap(Result<T> r) {
    if (!r.ok()) throw RuntimeError{r.error().message()};
    return std::move(r).value();
}
inline void unwrap(Result<void> r) {
    if (!r.ok()) throw RuntimeError{r.error().message()};
}

// "1/N" or "N" -> N, for sampling options (--sample 1/10, --sets 1/4);
// anything else, or N outside 1..1000000, is a usage error naming `option`.
std::uint64_t parse_ratio(const std::string& text, const char* option);

// Each verb file registers itself with a static VerbRegistration, so adding a
// verb touches no other file. `order` sets the order in --help.
using VerbFactory = void (*)(CLI::App& root, std::vector<Verb>& verbs);
struct VerbRegistration {
    VerbRegistration(int order, VerbFactory factory);
};
// The registered factories, sorted by order.
std::vector<VerbFactory> registered_verbs();

}  // namespace ecpi::cli
