#include "ecpi/store/branch_paths.h"

#include <algorithm>

#include "ecpi/store/saved_documents.h"

namespace ecpi::store {

namespace {

constexpr const char* kSchema = "ecpi.branch-paths";
constexpr int kVersion = 1;
constexpr const char* kFilePrefix = "branch-paths-";
// Bounds on what a document may hold (it is read from disk: untrusted).
constexpr std::size_t kMaxPaths = 1u << 20;
constexpr std::size_t kMaxBlocksPerPath = 1u << 16;
constexpr std::uint32_t kMaxBucket = 8 * 62 + 7;

nlohmann::json path_to_json(const BranchPath& p) {
    nlohmann::json histogram = nlohmann::json::array();
    for (const auto& [bucket, b] : p.histogram) histogram.push_back({bucket, b.occurrences, b.ticks});
    nlohmann::json j{{"procedure", p.procedure},   {"procedure_start", p.procedure_start},
                     {"start_kind", p.start_kind}, {"blocks", p.blocks},
                     {"decisions", p.decisions},   {"end_kind", p.end_kind},
                     {"occurrences", p.occurrences}, {"total_ticks", p.total_ticks},
                     {"min_ticks", p.min_ticks},   {"histogram", histogram}};
    if (p.span_occurrences || p.fitted)
        j["fit"] = {{"span_occurrences", p.span_occurrences}, {"fitted", p.fitted},
                    {"mean_ticks", p.fit_mean_ticks},         {"stderr_ticks", p.fit_stderr_ticks},
                    {"noisy", p.fit_noisy},                   {"damped", p.fit_damped},
                    {"low_ticks", p.fit_low_ticks},           {"high_ticks", p.fit_high_ticks},
                    {"undetermined", p.fit_undetermined}};
    return j;
}

void fit_from_json(const nlohmann::json& j, BranchPath& p) {
    if (!j.contains("fit")) return;
    const auto& f = j.at("fit");
    p.span_occurrences = f.value("span_occurrences", std::uint64_t{0});
    p.fitted = f.value("fitted", false);
    p.fit_mean_ticks = std::max(0.0, f.value("mean_ticks", 0.0));
    p.fit_stderr_ticks = std::max(0.0, f.value("stderr_ticks", 0.0));
    p.fit_noisy = f.value("noisy", false);
    p.fit_damped = f.value("damped", false);
    // Documents saved before the ranges: the mean alone.
    p.fit_low_ticks = std::clamp(f.value("low_ticks", p.fit_mean_ticks), 0.0, p.fit_mean_ticks);
    p.fit_high_ticks = std::max(f.value("high_ticks", p.fit_mean_ticks), p.fit_mean_ticks);
    p.fit_undetermined = f.value("undetermined", false);
}

Result<BranchPath> path_from_json(const nlohmann::json& j) {
    BranchPath p;
    p.procedure = j.at("procedure").get<std::string>();
    p.procedure_start = j.at("procedure_start").get<std::uint64_t>();
    p.start_kind = j.at("start_kind").get<std::string>();
    p.end_kind = j.value("end_kind", "");
    p.decisions = j.value("decisions", "");
    const auto& blocks = j.at("blocks");
    if (!blocks.is_array() || blocks.size() > kMaxBlocksPerPath) return Error("a path has too many blocks");
    p.blocks = blocks.get<std::vector<std::uint64_t>>();
    p.occurrences = j.at("occurrences").get<std::uint64_t>();
    p.total_ticks = j.at("total_ticks").get<std::uint64_t>();
    p.min_ticks = j.at("min_ticks").get<std::uint64_t>();
    fit_from_json(j, p);
    std::uint64_t in_histogram = 0;
    for (const auto& e : j.at("histogram")) {
        auto bucket = e.at(0).get<std::uint32_t>();
        auto n = e.at(1).get<std::uint64_t>();
        auto ticks = e.at(2).get<std::uint64_t>();
        if (bucket > kMaxBucket) return Error("histogram bucket " + std::to_string(bucket) + " out of range");
        p.histogram[bucket].occurrences += n;
        p.histogram[bucket].ticks += ticks;
        in_histogram += n;
    }
    if (in_histogram != p.occurrences)
        return Error("a path's histogram holds " + std::to_string(in_histogram) + " occurrences, not " +
                     std::to_string(p.occurrences));
    return p;
}

}  // namespace

std::uint32_t tick_bucket(std::uint64_t ticks) {
    if (ticks < 8) return static_cast<std::uint32_t>(ticks);
    const int e = 63 - __builtin_clzll(ticks);  // >= 3
    const auto mantissa = static_cast<std::uint32_t>((ticks >> (e - 3)) & 7);
    return 8 * static_cast<std::uint32_t>(e - 2) + mantissa;
}

std::uint64_t tick_bucket_low(std::uint32_t bucket) {
    if (bucket < 8) return bucket;
    const int e = static_cast<int>(bucket / 8) + 2;
    return (8ull + bucket % 8) << (e - 3);
}

std::uint64_t tick_bucket_high(std::uint32_t bucket) {
    if (bucket < 8) return bucket;
    const int e = static_cast<int>(bucket / 8) + 2;
    return tick_bucket_low(bucket) + (1ull << (e - 3)) - 1;
}

std::uint64_t BranchPath::quantile_ticks(double p) const {
    if (occurrences == 0) return 0;
    const double want = std::clamp(p, 0.0, 1.0) * static_cast<double>(occurrences);
    std::uint64_t seen = 0;
    for (const auto& [bucket, b] : histogram) {
        seen += b.occurrences;
        if (static_cast<double>(seen) >= want) return std::max(min_ticks, tick_bucket_low(bucket));
    }
    return histogram.empty() ? min_ticks : tick_bucket_high(histogram.rbegin()->first);
}

nlohmann::json branch_paths_to_json(const BranchPathProfile& profile) {
    nlohmann::json paths = nlohmann::json::array();
    for (const auto& p : profile.paths) paths.push_back(path_to_json(p));
    return {{"schema", kSchema},
            {"version", kVersion},
            {"source", profile.source},
            {"image", profile.image},
            {"build_id", profile.build_id},
            {"tick_unit", profile.tick_unit},
            {"ticks_per_ns", profile.ticks_per_ns},
            {"rate_source", profile.rate_source},
            {"block_cost_ticks", profile.block_cost_ticks},
            {"sample_every", profile.sample_every},
            {"burst", profile.burst},
            {"command", profile.command},
            {"bursts", profile.bursts},
            {"blocks", profile.blocks},
            {"blocks_outside", profile.blocks_outside},
            {"blocks_at_edges", profile.blocks_at_edges},
            {"occurrences", profile.occurrences},
            {"spans", profile.spans},
            {"fit_intercept_ticks", profile.fit_intercept_ticks},
            {"fit_residual_ticks", profile.fit_residual_ticks},
            {"notes", profile.notes},
            {"paths", paths}};
}

Result<BranchPathProfile> branch_paths_from_json(const nlohmann::json& j) {
    try {
        if (!j.is_object() || j.value("schema", "") != kSchema)
            return Error(std::string("not an ") + kSchema + " document");
        if (j.value("version", 0) > kVersion)
            return Error(std::string(kSchema) + " version " + std::to_string(j.value("version", 0)) +
                         " is newer than this ecpi reads (" + std::to_string(kVersion) + "): upgrade ecpi");
        BranchPathProfile r;
        r.source = j.at("source").get<std::string>();
        r.image = j.at("image").get<std::string>();
        r.build_id = j.value("build_id", "");
        r.tick_unit = j.value("tick_unit", "ticks");
        r.ticks_per_ns = j.value("ticks_per_ns", 0.0);
        r.rate_source = j.value("rate_source", "");
        r.block_cost_ticks = j.value("block_cost_ticks", 0.0);
        r.sample_every = j.value("sample_every", std::uint64_t{1});
        r.burst = j.value("burst", std::uint64_t{0});
        r.command = j.value("command", std::vector<std::string>{});
        r.bursts = j.value("bursts", std::uint64_t{0});
        r.blocks = j.value("blocks", std::uint64_t{0});
        r.blocks_outside = j.value("blocks_outside", std::uint64_t{0});
        r.blocks_at_edges = j.value("blocks_at_edges", std::uint64_t{0});
        r.occurrences = j.value("occurrences", std::uint64_t{0});
        r.spans = j.value("spans", std::uint64_t{0});
        r.fit_intercept_ticks = j.value("fit_intercept_ticks", 0.0);
        r.fit_residual_ticks = j.value("fit_residual_ticks", 0.0);
        r.notes = j.value("notes", std::vector<std::string>{});
        const auto& paths = j.at("paths");
        if (!paths.is_array() || paths.size() > kMaxPaths) return Error("too many paths");
        for (const auto& jp : paths) {
            ECPI_ASSIGN_OR_RETURN(auto p, path_from_json(jp));
            r.paths.push_back(std::move(p));
        }
        return r;
    } catch (const nlohmann::json::exception& e) {
        return Error(std::string("malformed ") + kSchema + " document: " + e.what());
    }
}

Result<std::filesystem::path> save_branch_paths(Database& db, const BranchPathProfile& profile) {
    return save_document(db, kFilePrefix, branch_paths_to_json(profile));
}

Result<std::vector<std::filesystem::path>> list_branch_paths(const Database& db, const std::string& epoch) {
    ECPI_ASSIGN_OR_RETURN(auto saved, list_documents(db, kFilePrefix));
    std::vector<std::filesystem::path> out;
    for (const auto& s : saved)
        if (epoch.empty() || s.epoch == epoch) out.push_back(s.file);
    return out;
}

Result<BranchPathProfile> read_branch_paths(const std::filesystem::path& file) {
    ECPI_ASSIGN_OR_RETURN(auto j, read_document(file));
    auto r = branch_paths_from_json(j);
    if (!r.ok()) return r.error().with_context(file.string());
    return r;
}

}  // namespace ecpi::store
