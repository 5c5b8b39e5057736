#include "cli_common.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "ecpi/terminal_text.h"

namespace ecpi::cli {
namespace {
std::vector<std::pair<int, VerbFactory>>& registry() {
    static std::vector<std::pair<int, VerbFactory>> verbs;  // constructed on first use
    return verbs;
}
}  // namespace

const std::atomic<bool>& stop_requested_by_signal() {
    static std::atomic<bool> stop{false};
    struct sigaction sa {};
    sa.sa_handler = [](int) { stop.store(true); };
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

// The newest epoch is empty (a daemon just started one, or `ctl epoch` ran):
// an empty table alone would look like "nothing ran". Say so on stderr, and
// name the newest epoch that has samples.
void say_where_data_is(const store::Database& db, const std::string& database, const std::string& newest) {
    auto epochs = db.epochs();
    std::string with_data;
    if (epochs.ok()) {
        for (auto it = epochs->rbegin(); it != epochs->rend() && with_data.empty(); ++it) {
            if (*it == newest) continue;
            auto older = db.read_epoch(*it);
            if (older.ok() && !older->profiles.empty()) with_data = *it;
        }
    }
    const std::string shown = escape_for_terminal(database);
    if (with_data.empty()) {
        std::fprintf(stderr, "ecpi: the newest epoch %s of %s has no samples, and no older epoch has any\n",
                     newest.c_str(), shown.c_str());
    } else {
        std::fprintf(stderr,
                     "ecpi: the newest epoch %s of %s has no samples yet; epoch %s has data (add --epoch %s)\n",
                     newest.c_str(), shown.c_str(), with_data.c_str(), with_data.c_str());
    }
}

}  // namespace

OpenedEpoch read_database_epoch(const std::string& database, const std::string& epoch) {
    auto db = unwrap(store::Database::open(database, store::Database::Mode::kReadOnly));
    std::string chosen = epoch;
    if (chosen.empty()) {
        auto epochs = unwrap(db.epochs());
        if (epochs.empty()) throw RuntimeError{database + " holds no epochs yet: record into it first"};
        chosen = epochs.back();
    }
    auto contents = unwrap(db.read_epoch(chosen));
    if (epoch.empty() && contents.profiles.empty()) say_where_data_is(db, database, chosen);
    return {std::move(db), std::move(contents)};
}

void add_format_option(CLI::App& app, Format& format) {
    std::map<std::string, Format> names{{"text", Format::kText}, {"json", Format::kJson}};
    app.add_option("--format", format, "Output format: text or json")
        ->transform(CLI::CheckedTransformer(names, CLI::ignore_case))
        ->default_str("text");
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

}  // namespace ecpi::cli
