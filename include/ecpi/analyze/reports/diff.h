// `ecpi diff`: where two profiles differ (DCPI section 3: "highlight the
// differences in two separate profiles for the same program"). Counts are
// normalized per profile (share of that profile's samples of the event), so
// runs of different lengths compare; rows sort by the absolute change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/result.h"

namespace ecpi::analyze {

struct DiffOptions {
    enum class By { kProcedure, kImage, kInstruction } by = By::kProcedure;
    std::optional<std::string> event;        // default: common_event()
    std::optional<std::uint32_t> pid;
    std::string procedure;                   // required for kInstruction
    std::size_t limit = 0;                   // 0: all rows
};

struct DiffSide {
    std::string label;
    std::string database;
    std::string epoch;
    std::uint64_t total = 0;                 // samples of the event
    std::uint64_t period = 0;
    // kInstruction: the procedure in this profile (absent: samples 0).
    std::string image;
    std::string build_id;
    std::uint64_t procedure_samples = 0;
    std::uint64_t procedure_start = 0;
};

struct DiffRow {
    std::string procedure;                   // by procedure; by instruction: the procedure
    std::string image;                       // by procedure/image
    std::string build_id;
    std::uint64_t offset = 0;                // by instruction: offset from the procedure's start
    std::string text;                        // by instruction: disassembly ("" when unavailable)
    std::uint64_t samples_a = 0;
    std::uint64_t samples_b = 0;
    double share_a = 0;                      // percent of A's samples of the event
    double share_b = 0;
    double change = 0;                       // share_b - share_a, percentage points
};

struct DiffReport {
    std::string event;
    DiffOptions::By by = DiffOptions::By::kProcedure;
    std::optional<std::uint32_t> pid;
    std::string procedure;                   // kInstruction: the procedure compared
    DiffSide a, b;
    std::vector<DiffRow> rows;               // by decreasing |change|, then decreasing max share, then name/offset
    std::size_t rows_total = 0;              // rows before --limit
    std::vector<std::string> warnings;
};

// The arithmetic over two flat profiles (same event): shares, change, order.
std::vector<DiffRow> diff_flat(const FlatProfile& a, const FlatProfile& b, bool by_image);

[[nodiscard]] Result<DiffReport> build_diff_report(const LoadedProfile& a, const LoadedProfile& b,
                                                   const DiffOptions& options, SymbolizerPool& symbolizers);

std::string render_diff_text(const DiffReport& report);
// {"schema":"ecpi.diff","version":1,...}; documented in docs/json-schema.md.
nlohmann::json render_diff_json(const DiffReport& report);

}  // namespace ecpi::analyze
