// `ecpi annotate`: one procedure's source lines (DWARF, the file read from
// disk where present) interleaved with its assembly (Capstone), each with
// samples and percent, hottest lines marked, inlined functions named. Models
// DCPI's annotated source and assembly listings (DCPI sections 3 and 3.2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/result.h"

namespace ecpi::analyze {

struct AnnotateOptions {
    std::string procedure;                   // exact or loose name (see procedure_samples)
    std::optional<std::string> event;        // default: the epoch's first event (cpu-clock first)
    std::optional<std::uint32_t> pid;
    std::size_t hot = 3;                     // how many source lines and instructions are marked hot
};

struct AnnotatedInstruction {
    std::uint64_t address = 0;
    std::string text;                        // disassembly; "" when the code bytes are unavailable
    std::uint64_t samples = 0;
    double percent = 0;                      // of the procedure's samples
    bool hot = false;
};

// Consecutive instructions with the same source position (file, line and
// inline chain): one block of the listing.
struct AnnotatedBlock {
    std::string file;                        // "" without line information
    int line = 0;
    std::vector<std::string> inlined;        // innermost first: functions inlined at this position
    std::vector<AnnotatedInstruction> instructions;
};

// A source line's totals over the whole procedure (a line may own several blocks).
struct AnnotatedLine {
    std::string file;
    int line = 0;
    std::optional<std::string> text;         // the line read from disk; nullopt when the file is missing
    std::uint64_t samples = 0;
    double percent = 0;
    bool hot = false;
    std::string function;                    // the (inlined) function the line belongs to
};

struct AnnotateReport {
    std::string database;
    std::string epoch;
    std::string event;
    std::optional<std::uint32_t> pid;
    std::string procedure;
    std::string image;
    std::string build_id;
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::uint64_t samples = 0;               // the procedure's samples
    std::uint64_t event_total = 0;           // all samples of the event
    bool have_code = false;                  // disassembly available
    bool have_lines = false;                 // DWARF line information available
    std::vector<AnnotatedLine> lines;        // by file, then line
    std::vector<AnnotatedBlock> blocks;      // in address order
    std::vector<std::string> notes;          // what is missing and why (source, DWARF, code)
    std::vector<std::string> warnings;
};

[[nodiscard]] Result<AnnotateReport> build_annotate_report(const LoadedProfile& profile,
                                                           const AnnotateOptions& options, Symbolizer& symbolizer);

// The listing: header, hottest lines, then source lines each followed by
// their instructions. Hot lines and instructions are marked with '>'.
std::string render_annotate_text(const AnnotateReport& report);
// {"schema":"ecpi.annotate","version":1,...}; documented in docs/json-schema.md.
nlohmann::json render_annotate_json(const AnnotateReport& report);

}  // namespace ecpi::analyze
