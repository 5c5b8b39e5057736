// `ecpi export`: one epoch in the formats other tools read. Everything is
// built from one symbolized model (ExportModel) so every format tells the
// same story:
//   pprof       gzipped profile.proto (go tool pprof, Grafana Pyroscope)
//   json        {"schema":"ecpi.export"} for dashboards (docs/json-schema.md)
//   folded      "root;...;leaf count" lines (FlameGraph's flamegraph.pl)
//   speedscope  speedscope's file format (sampled profiles)
//   html        one self-contained page: flame graph and top procedures
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

struct ExportOptions {
    std::vector<std::string> events;         // empty: every event of the epoch
    std::optional<std::uint32_t> pid;        // only this process
    bool source_lines = true;                // read DWARF for lines and inline chains
};

// A procedure: a symbol of an image, or an inlined function (from DWARF).
struct ExportFunction {
    std::string name;                        // demangled; "[libx.so]" for an image's samples without a symbol
    std::uint32_t image = 0;                 // index into ExportModel::images
    bool kernel = false;
    bool symbolized = false;
    std::string file;                        // DWARF declaration, when known
    int start_line = 0;
};

struct ExportLine {
    std::uint32_t function = 0;              // index into ExportModel::functions
    int line = 0;                            // 0: unknown
};

// One instruction address of one image.
struct ExportLocation {
    std::uint32_t image = 0;
    // Store offset (ELF virtual address). Call-stack frames that are return
    // addresses are stored minus 1, so that they fall inside the call.
    std::uint64_t address = 0;
    std::vector<ExportLine> lines;           // innermost first; the last is the symbol; never empty
};

struct ExportSample {
    std::uint32_t pid = 0;                   // store::kAllProcesses: not broken down by process
    std::vector<std::uint32_t> locations;    // leaf first
    std::uint64_t count = 0;
};

struct ExportEvent {
    std::string name;
    std::uint64_t period = 0;
    std::uint64_t total = 0;                 // sum of the samples' counts
    std::uint64_t unknown = 0;               // of those, with the leaf in no image
    std::uint64_t lost = 0;                  // from the epoch metadata
    bool stacks = false;                     // samples are call stacks (recorded with -g)
    std::vector<ExportSample> samples;
};

struct ExportModel {
    std::string database;
    std::string epoch;
    store::EpochMeta meta;
    std::optional<std::uint32_t> pid;
    std::vector<store::ImageId> images;
    std::vector<ExportFunction> functions;
    std::vector<ExportLocation> locations;
    std::vector<ExportEvent> events;         // in the order asked for (default: cpu-clock first, then by name)
    std::vector<std::string> warnings;
};

[[nodiscard]] Result<ExportModel> build_export_model(const LoadedProfile& profile, const ExportOptions& options,
                                                     Symbolizer& symbolizer);

// Call stacks as flame graphs see them: root first, the process (its comm)
// as the root frame, then one frame per symbol (inlined functions folded
// into their caller). Identical stacks are merged; sorted by frame names.
struct FlameFrame {
    std::string name;
    std::string image;                       // "" for the process frame
    enum class Kind { kProcess, kKernel, kUser } kind = Kind::kUser;
    std::string file;
    int line = 0;
};
struct FlameStack {
    std::vector<std::uint32_t> frames;       // root first, indices into FlameGraphData::frames
    std::uint64_t count = 0;
};
struct FlameGraphData {
    std::string event;
    std::vector<FlameFrame> frames;
    std::vector<FlameStack> stacks;
};
FlameGraphData flame_stacks(const ExportModel& model, std::size_t event_index);

// Per procedure (symbol level) of one event: self samples (leaf) and total
// samples (on the stack at all), sorted by self, then total, then name.
struct ProcedureTotals {
    std::uint32_t function = 0;
    std::uint64_t self = 0;
    std::uint64_t total = 0;
};
std::vector<ProcedureTotals> procedure_totals(const ExportModel& model, std::size_t event_index);

// Index of `event` in model.events, or an error naming the events there are.
[[nodiscard]] Result<std::size_t> export_event_index(const ExportModel& model, const std::string& event);

std::string render_folded(const ExportModel& model, std::size_t event_index);
nlohmann::json render_speedscope(const ExportModel& model);
// {"schema":"ecpi.export","version":1,...}; documented in docs/json-schema.md.
nlohmann::json render_export_json(const ExportModel& model);
// profile.proto, gzipped. Sample types per event: ("samples","count") and
// ("cpu","nanoseconds") for cpu-clock; ("<event>_samples","count") and
// ("<event>", "nanoseconds" for clocks else "count") for the others; the
// second value is samples x period.
[[nodiscard]] Result<std::vector<std::uint8_t>> render_pprof(const ExportModel& model);
// The same, not compressed (what the gzip member holds); for tests.
std::vector<std::uint8_t> encode_pprof(const ExportModel& model);
std::string render_flamegraph_html(const ExportModel& model, std::size_t event_index);

}  // namespace ecpi::analyze
