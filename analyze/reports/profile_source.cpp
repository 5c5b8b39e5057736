// Profile names, event choice, flat profiles keyed by build id, and one
// procedure's per-instruction samples. Contracts: include/ecpi/analyze/reports/profile_source.h.
#include "ecpi/analyze/reports/profile_source.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>
#include <tuple>
#include <unordered_map>

#include "ecpi/analyze/reports/kernel_idle.h"
#include "ecpi/analyze/reports/prof_report.h"

namespace ecpi::analyze {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPreferredEvent = "cpu-clock";

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& item : items) {
        if (!out.empty()) out += sep;
        out += item;
    }
    return out;
}

bool all_digits(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// Epoch names as store/FORMAT.md §1 spells them: 5 digits zero padded, wider
// numbers as they are. "7" and "00007" both name epoch 7.
std::optional<std::string> canonical_epoch(const std::string& text) {
    if (!all_digits(text) || text.size() > 18) return std::nullopt;
    unsigned long long n = std::stoull(text);
    if (n == 0) return std::nullopt;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%05llu", n);
    return std::string(buf);
}

bool is_database_dir(const fs::path& dir) {
    std::error_code ec;
    return fs::is_regular_file(dir / "ECPI_DATABASE", ec);
}

}  // namespace

double percent_of(std::uint64_t part, std::uint64_t total) {
    return total == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(total);
}

Result<ProfileSource> resolve_source(const std::string& spec, const std::string& epoch_override) {
    if (spec.empty()) return Error("empty profile name");
    ProfileSource source;
    source.spec = spec;
    std::string epoch;

    std::size_t at = spec.rfind('@');
    fs::path path;
    if (at != std::string::npos && at > 0 && all_digits(spec.substr(at + 1))) {
        path = spec.substr(0, at);
        epoch = spec.substr(at + 1);
    } else {
        path = spec;
    }
    path = path.lexically_normal();
    if (path.has_filename() == false && path.has_parent_path()) path = path.parent_path();

    // DB/epochs/NNNNN: an epoch directory given directly.
    if (epoch.empty() && path.has_parent_path() && path.parent_path().filename() == "epochs" &&
        is_database_dir(path.parent_path().parent_path())) {
        epoch = path.filename().string();
        path = path.parent_path().parent_path();
        if (path.empty()) path = ".";
    }
    if (!epoch_override.empty()) {
        if (!epoch.empty() && canonical_epoch(epoch) != canonical_epoch(epoch_override))
            return Error(spec + " names epoch " + epoch + " but --epoch says " + epoch_override + ": give one");
        epoch = epoch_override;
    }

    auto db = store::Database::open(path, store::Database::Mode::kReadOnly);
    if (!db.ok()) return db.error();
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> epochs, db->epochs());
    if (epochs.empty()) return Error(path.string() + " holds no epochs yet: record into it first");
    if (epoch.empty()) {
        epoch = epochs.back();
    } else {
        auto canonical = canonical_epoch(epoch);
        if (!canonical || std::find(epochs.begin(), epochs.end(), *canonical) == epochs.end()) {
            return Error(path.string() + " has no epoch '" + epoch + "' (it has " +
                         (epochs.size() == 1 ? epochs.front() : epochs.front() + " to " + epochs.back()) + ")");
        }
        epoch = *canonical;
    }
    source.database = path;
    source.epoch = epoch;
    return source;
}

Result<LoadedProfile> load_profile(const ProfileSource& source, bool include_idle) {
    ECPI_ASSIGN_OR_RETURN(store::Database db, store::Database::open(source.database, store::Database::Mode::kReadOnly));
    ECPI_ASSIGN_OR_RETURN(store::EpochContents contents, db.read_epoch(source.epoch));
    idle_from_kernel(contents);
    if (include_idle) include_idle_samples(contents);
    return LoadedProfile{source, std::move(contents)};
}

void include_idle_samples(store::EpochContents& contents) {
    for (auto& [event, meta] : contents.meta.events) {
        if (meta.idle == 0) continue;
        store::ImageProfile idle;
        idle.image = {store::kIdleImage, ""};
        idle.event = event;
        idle.period = meta.period;
        store::ProcessCounts counts;
        counts.pid = store::kIdlePid;
        std::uint64_t per_cpu_sum = 0;
        for (std::size_t cpu = 0; cpu < meta.idle_per_cpu.size(); ++cpu) {
            if (meta.idle_per_cpu[cpu] == 0) continue;
            counts.counts.push_back({cpu, meta.idle_per_cpu[cpu]});
            per_cpu_sum += meta.idle_per_cpu[cpu];
        }
        if (per_cpu_sum < meta.idle) counts.counts.push_back({SymbolTable::kIdleAnyCpu, meta.idle - per_cpu_sum});
        // With call stacks, each CPU's idle samples are a one-frame stack, so
        // flame graphs show them beside the rest.
        for (store::StackProfile& stacks : contents.stacks) {
            if (stacks.event != event) continue;
            const auto image = static_cast<std::uint32_t>(stacks.images.size());
            stacks.images.push_back(idle.image);
            for (const store::OffsetCount& oc : counts.counts)
                stacks.stacks.push_back({store::kIdlePid, {{image, oc.offset}}, oc.count});
        }
        idle.processes.push_back(std::move(counts));
        contents.profiles.push_back(std::move(idle));
        meta.samples += meta.idle;
        meta.idle = 0;
        meta.idle_per_cpu.clear();
    }
}

std::string idle_note(const store::EventMeta& event) {
    if (event.idle == 0) return "";
    std::string note = std::to_string(event.idle) + (event.idle == 1 ? " sample" : " samples") + " found a CPU idle";
    std::string cpus;
    for (std::size_t cpu = 0; cpu < event.idle_per_cpu.size(); ++cpu) {
        if (event.idle_per_cpu[cpu] == 0) continue;
        if (!cpus.empty()) cpus += ", ";
        cpus += "cpu" + std::to_string(cpu) + " " + std::to_string(event.idle_per_cpu[cpu]);
    }
    if (!cpus.empty()) note += " (" + cpus + ")";
    return note + "; not in the shares (--include-idle shows them)";
}

std::vector<std::string> events_in(const store::EpochContents& contents) {
    std::set<std::string> names;
    for (const auto& profile : contents.profiles)
        if (profile.total() > 0) names.insert(profile.event);
    for (const auto& stacks : contents.stacks)
        if (!stacks.stacks.empty()) names.insert(stacks.event);
    for (const auto& [name, meta] : contents.meta.events)
        if (meta.samples > 0) names.insert(name);
    std::vector<std::string> events(names.begin(), names.end());
    auto first = std::find(events.begin(), events.end(), kPreferredEvent);
    if (first != events.end()) std::rotate(events.begin(), first, first + 1);
    return events;
}

Result<std::string> common_event(const std::vector<const LoadedProfile*>& profiles,
                                 const std::optional<std::string>& requested) {
    if (profiles.empty()) return Error("no profiles given");
    std::vector<std::vector<std::string>> per_profile;
    for (const LoadedProfile* p : profiles) {
        auto events = events_in(p->contents);
        if (events.empty()) {
            return Error(p->source.spec + " holds no samples (epoch " + p->source.epoch + " of " +
                         p->source.database.string() + " is empty)");
        }
        per_profile.push_back(std::move(events));
    }
    if (requested) {
        for (std::size_t i = 0; i < profiles.size(); ++i) {
            const auto& events = per_profile[i];
            if (std::find(events.begin(), events.end(), *requested) == events.end()) {
                return Error(profiles[i]->source.spec + " has no " + *requested + " samples (it has " +
                             join(events, ", ") + ")");
            }
        }
        return *requested;
    }
    std::set<std::string> shared(per_profile[0].begin(), per_profile[0].end());
    for (std::size_t i = 1; i < per_profile.size(); ++i) {
        std::set<std::string> next;
        for (const auto& e : per_profile[i])
            if (shared.count(e) != 0) next.insert(e);
        shared = std::move(next);
    }
    if (shared.empty()) {
        std::vector<std::string> parts;
        for (std::size_t i = 0; i < profiles.size(); ++i)
            parts.push_back(profiles[i]->source.spec + " has " + join(per_profile[i], ", "));
        return Error("cannot compare profiles of different events: " + join(parts, "; "));
    }
    if (shared.count(kPreferredEvent) != 0) return std::string(kPreferredEvent);
    return *shared.begin();
}

SymbolizerPool::SymbolizerPool(Symbolizer::Options base) : base_(std::move(base)) {}

Symbolizer& SymbolizerPool::for_database(const fs::path& database) {
    auto it = symbolizers_.find(database);
    if (it == symbolizers_.end()) {
        Symbolizer::Options options = base_;
        options.database = database;
        it = symbolizers_.emplace(database, std::make_unique<Symbolizer>(std::move(options))).first;
    }
    return *it->second;
}

std::string image_key(const store::ImageId& image) {
    return image.build_id.empty() ? image.path : image.build_id;
}

Result<FlatProfile> flatten_profile(const store::EpochContents& contents, const FlattenOptions& options,
                                    Symbolizer& symbolizer) {
    if (options.event.empty()) return Error("flatten_profile: no event given");
    ProfOptions prof;
    prof.by = options.by == Grouping::kImage ? ProfOptions::By::kImage : ProfOptions::By::kProcedure;
    prof.events = {options.event};
    prof.pid = options.pid;
    ECPI_ASSIGN_OR_RETURN(ProfReport report, build_prof_report(contents, prof, symbolizer));

    FlatProfile flat;
    flat.event = options.event;
    flat.period = report.totals[options.event].period;
    flat.total = report.totals[options.event].samples;
    flat.warnings = std::move(report.warnings);

    // Rows of prof are per (path, build id); merge those with one build id.
    struct Merged {
        FlatRow row;
        std::map<std::string, std::uint64_t> per_path;
    };
    std::map<std::pair<std::string, std::string>, Merged> merged;  // (image key, procedure)
    for (const auto& row : report.rows) {
        std::uint64_t n = row.samples.at(options.event);
        if (n == 0) continue;
        Merged& m = merged[{image_key({row.image, row.build_id}), row.procedure}];
        m.row.procedure = row.procedure;
        m.row.build_id = row.build_id;
        m.row.samples += n;
        m.per_path[row.image] += n;
    }
    for (auto& [key, m] : merged) {
        // The path with the most samples names the row (ties: the first by name).
        std::uint64_t best = 0;
        for (const auto& [path, n] : m.per_path) {
            if (n > best) {
                best = n;
                m.row.image = path;
            }
        }
        flat.rows.push_back(std::move(m.row));
    }
    std::sort(flat.rows.begin(), flat.rows.end(), [](const FlatRow& a, const FlatRow& b) {
        if (a.samples != b.samples) return a.samples > b.samples;
        return std::tie(a.procedure, a.image, a.build_id) < std::tie(b.procedure, b.image, b.build_id);
    });
    return flat;
}

Result<ProcedureSamples> procedure_samples(const store::EpochContents& contents, const std::string& event,
                                           std::optional<std::uint32_t> pid, const std::string& name,
                                           Symbolizer& symbolizer) {
    ECPI_ASSIGN_OR_RETURN(FlatProfile flat, flatten_profile(contents, {Grouping::kProcedure, event, pid}, symbolizer));

    // 1. Which name: exact, else a unique loose match.
    std::set<std::string> names;
    for (const auto& row : flat.rows)
        if (!row.procedure.starts_with('[')) names.insert(row.procedure);  // not unsymbolized_name's
    std::string target;
    if (names.count(name) != 0) {
        target = name;
    } else {
        std::vector<std::string> loose;
        for (const auto& n : names)
            if (loosely_matches(name, n)) loose.push_back(n);
        if (loose.size() == 1) {
            target = loose.front();
        } else if (loose.size() > 1) {
            return Error("'" + name + "' matches several procedures with " + event + " samples: " + join(loose, ", ") +
                         "; give the full name");
        } else {
            std::vector<std::string> all(names.begin(), names.end());
            auto close = close_matches(name, all);
            std::string msg = "procedure '" + name + "' has no " + event + " samples in this profile";
            std::string gone = close.empty() ? missing_images_note(contents, event, symbolizer) : "";
            if (!close.empty()) {
                msg += "; close matches: " + join(close, ", ");
            } else if (!gone.empty()) {  // a moved image's procedures cannot be named: say so, not "no samples"
                msg = "procedure '" + name + "' is not in the images that could be read: " + gone;
            } else if (!flat.rows.empty()) {
                std::vector<std::string> hottest;
                for (const auto& row : flat.rows) {
                    if (row.procedure.starts_with('[')) continue;
                    hottest.push_back(row.procedure);
                    if (hottest.size() == 5) break;
                }
                if (!hottest.empty()) msg += "; the hottest are: " + join(hottest, ", ");
            }
            return Error(msg);
        }
    }

    // 2. Which image: the one with the most samples of that name.
    const FlatRow* chosen = nullptr;
    std::vector<std::string> others;
    for (const auto& row : flat.rows) {  // sorted by samples: the first match is the hottest
        if (row.procedure != target) continue;
        if (chosen == nullptr) {
            chosen = &row;
        } else {
            others.push_back(row.image);
        }
    }
    ProcedureSamples out;
    out.procedure = target;
    out.event_total = flat.total;
    if (!others.empty())
        out.warnings.push_back(target + " also has samples in " + join(others, ", ") + "; showing " + chosen->image);
    const std::string key = image_key({chosen->image, chosen->build_id});

    // 3. Per-address counts of that symbol, over every path of the image.
    std::map<std::string, std::uint64_t> per_path;
    for (const auto& profile : contents.profiles) {
        if (profile.event != event || image_key(profile.image) != key) continue;
        const Result<SymbolTable>& table = symbolizer.table(profile.image);
        if (!table.ok()) continue;
        for (const auto& process : profile.processes) {
            if (pid && process.pid != *pid) continue;
            for (const auto& oc : process.counts) {
                const Symbol* sym = table->lookup(oc.offset);
                if (sym == nullptr || sym->name != target) continue;
                out.counts[oc.offset] += oc.count;
                out.samples += oc.count;
                per_path[profile.image.path] += oc.count;
                if (out.end == 0) {
                    out.start = sym->start;
                    out.end = table->end_of(*sym);
                }
            }
        }
    }
    std::uint64_t best = 0;
    for (const auto& [path, n] : per_path) {
        if (n > best) {
            best = n;
            out.image = {path, chosen->build_id};
        }
    }
    if (out.samples == 0) return Error("procedure '" + target + "' has no " + event + " samples in this profile");
    return out;
}

}  // namespace ecpi::analyze
