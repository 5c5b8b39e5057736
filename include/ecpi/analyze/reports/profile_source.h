// Naming the profiles a command reads, and the pieces every multi-profile
// report shares: which event to compare, one flat profile per (image,
// procedure) whose images merge by build id, and one procedure's samples
// per instruction. Used by `ecpi stats`, `ecpi diff`, `ecpi annotate` and
// `ecpi export`; the CLI only passes its arguments through.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/analyze/symbols/name_match.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

// One epoch of one database.
struct ProfileSource {
    std::string spec;                  // as the user wrote it (used as the label in reports)
    std::filesystem::path database;
    std::string epoch;                 // canonical name ("00007")
};

// Resolves a command-line profile name:
//   DB                 the database's newest epoch
//   DB/epochs/NNNNN    that epoch (any path whose parent is an `epochs` dir of a database)
//   DB@EPOCH           that epoch; EPOCH is a name ("00007") or a number ("7")
// `epoch_override` (export --epoch) replaces the epoch part; it is an error
// together with an explicit one. Errors name the spec and say what to do.
[[nodiscard]] Result<ProfileSource> resolve_source(const std::string& spec,
                                                   const std::string& epoch_override = {});

struct LoadedProfile {
    ProfileSource source;
    store::EpochContents contents;
};
// `include_idle`: include_idle_samples (below) on the epoch read.
[[nodiscard]] Result<LoadedProfile> load_profile(const ProfileSource& source, bool include_idle = false);

// Idle samples (a CPU in its idle task) are kept apart from every share by
// default (issue 20); --include-idle calls this to put them back as the
// pseudo-image store::kIdleImage, one procedure per CPU ("[idle cpu N]"),
// added to each event's samples. The events' idle counts become 0.
void include_idle_samples(store::EpochContents& contents);

// "N samples found a CPU idle (cpu0 a, cpu1 b); not in the shares below
// (--include-idle shows them)", or "" when the event has none.
std::string idle_note(const store::EventMeta& event);

// Events that have samples in an epoch (profile files, stack files or
// metadata counts), sorted by name with cpu-clock first.
std::vector<std::string> events_in(const store::EpochContents& contents);

// The one event a report over several profiles uses. With `requested`, every
// profile must hold it. Without, the events all profiles share: cpu-clock
// if among them, else the first by name. Profiles that share no event are
// "profiles of different events" (an error naming each profile's events);
// a profile with no samples at all is an error naming it.
[[nodiscard]] Result<std::string> common_event(const std::vector<const LoadedProfile*>& profiles,
                                               const std::optional<std::string>& requested);

// One Symbolizer per database (each has its own build-id image cache), so
// N epochs of one database read each binary's symbols once.
class SymbolizerPool {
public:
    // Options for every symbolizer; `database` is filled in per database.
    explicit SymbolizerPool(Symbolizer::Options base = {});
    Symbolizer& for_database(const std::filesystem::path& database);

private:
    Symbolizer::Options base_;
    std::map<std::filesystem::path, std::unique_ptr<Symbolizer>> symbolizers_;
};

// Key of an image across profiles: its build id, or its path when it has
// none. The same binary seen under two paths (two containers) is one image.
std::string image_key(const store::ImageId& image);

enum class Grouping { kProcedure, kImage };

// One row of a flat profile: samples per (image key, procedure).
struct FlatRow {
    std::string procedure;             // "" when grouped by image; unsymbolized_name ("[gzip]") for samples without a symbol
    std::string image;                 // a path the image was recorded under (the one with most samples)
    std::string build_id;
    std::uint64_t samples = 0;
};

struct FlatProfile {
    std::string event;
    std::uint64_t period = 0;
    std::uint64_t total = 0;           // all samples of the event (with pid: that process's)
    std::vector<FlatRow> rows;         // by decreasing samples, then procedure, image
    std::vector<std::string> warnings; // skipped files, images without symbols
};

struct FlattenOptions {
    Grouping by = Grouping::kProcedure;
    std::string event;                 // required
    std::optional<std::uint32_t> pid;
};

// Samples of one event per procedure (or image), images keyed by image_key.
[[nodiscard]] Result<FlatProfile> flatten_profile(const store::EpochContents& contents,
                                                  const FlattenOptions& options, Symbolizer& symbolizer);

// Samples of one procedure per instruction address.
struct ProcedureSamples {
    std::string procedure;             // the symbol's full name
    store::ImageId image;              // the recorded image (path with most samples of the procedure)
    std::uint64_t start = 0;           // symbol start and end (ELF virtual addresses)
    std::uint64_t end = 0;
    std::map<std::uint64_t, std::uint64_t> counts;  // address -> samples
    std::uint64_t samples = 0;         // sum of counts
    std::uint64_t event_total = 0;     // all samples of the event in the profile
    std::vector<std::string> warnings; // e.g. the name also exists in other images
};

// Finds `name` among the procedures with samples of `event`: an exact name,
// else a unique loose match ("compute" for "ns::compute(int)"). When several
// images hold the name, the one with the most samples wins (a warning names
// the others). Not found: an error listing close matches.
[[nodiscard]] Result<ProcedureSamples> procedure_samples(const store::EpochContents& contents,
                                                         const std::string& event,
                                                         std::optional<std::uint32_t> pid,
                                                         const std::string& name, Symbolizer& symbolizer);

// Percent helper shared by the reports: 0 when the total is 0.
double percent_of(std::uint64_t part, std::uint64_t total);

}  // namespace ecpi::analyze
