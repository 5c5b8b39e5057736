// The report of `ecpi paths --branch`: saved branch paths ranked by net
// variation (VPP 3: total time minus occurrences times the path's fastest
// time, the time an optimization can win back), by time or by count, with
// each path's rank by time beside it (VPP Figure 11: the top variational
// paths are not the top hot ones), its source lines, its time distribution,
// and the overlap of the top-N set with another run's (VPP 6).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/symbols/debug_info.h"
#include "ecpi/result.h"
#include "ecpi/store/branch_paths.h"

namespace ecpi::analyze {

enum class BranchPathRank { kVariation, kTime, kCount };
[[nodiscard]] Result<BranchPathRank> parse_branch_path_rank(const std::string& name);

struct BranchPathsReportOptions {
    BranchPathRank rank = BranchPathRank::kVariation;
    std::size_t limit = 20;   // 0: all
    std::string procedure;    // only paths of this procedure ("" all)
    double low_quantile = 0.1;  // the robust basetime shown beside the minimum
    double long_floor_ns = store::kLongFloorNs;  // occurrences longer than this and 8x their median are kept apart
};

struct BranchPathsComparison {
    const store::BranchPathProfile* other = nullptr;
    std::string other_name;
    std::size_t top = 10;
};

// `debug` (may be null) gives source lines; `compare.other` (may be null)
// another run of the same program.
nlohmann::json branch_paths_report_json(const store::BranchPathProfile& profile, const BranchPathsReportOptions& options,
                                        const DebugInfo* debug, const BranchPathsComparison& compare);
std::string render_branch_paths_text(const nlohmann::json& report);

}  // namespace ecpi::analyze
