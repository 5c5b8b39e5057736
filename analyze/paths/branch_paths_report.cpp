// The report of `ecpi paths --branch`. See branch_paths_report.h.
#include "ecpi/analyze/paths/branch_paths_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ecpi/terminal_text.h"
#include "ecpi/analyze/text_table.h"

namespace ecpi::analyze {

using detail::format;
using detail::TextTable;

namespace {

std::string hex(std::uint64_t v) { return format("0x%llx", static_cast<unsigned long long>(v)); }

struct Ranked {
    const store::BranchPath* path = nullptr;
    double total = 0;            // ticks, long occurrences left out
    std::uint64_t occurrences = 0;  // likewise
    double variation = 0;        // ticks: total - occurrences * min (VPP 3), long occurrences left out
    double long_ticks = 0;       // occurrences longer than the cutoff
    std::uint64_t long_occurrences = 0;
    double variation_all = 0;    // VPP's figure over every occurrence
    double time = 0;             // ticks the rank by time orders: the fit's total where fitted, else `total`
    const char* time_method = "stamped";  // what timed it: time_method()
    std::size_t rank_by_time = 0;
    std::size_t rank_by_variation = 0;
};

// Occurrences far longer than the path usually takes were interrupted
// (timer and other interrupts, preemption, the hypervisor: measured here,
// a VM loses 15% of a busy second in gaps over 5 us) or took a page fault:
// time the path's code did not spend. They are counted apart, not in the
// variation, when they exceed both `long_floor_ticks` and 8x the median.
void split_long(Ranked& r, double long_floor_ticks) {
    const store::BranchPath& p = *r.path;
    const double median = double(p.quantile_ticks(0.5));
    const double cutoff = std::max(long_floor_ticks, 8 * median);
    r.total = double(p.total_ticks);
    r.occurrences = p.occurrences;
    for (const auto& [bucket, b] : p.histogram) {
        if (double(store::tick_bucket_low(bucket)) <= cutoff) continue;
        r.long_ticks += double(b.ticks);
        r.long_occurrences += b.occurrences;
    }
    r.total -= r.long_ticks;
    r.occurrences -= r.long_occurrences;
    r.variation = r.total - double(r.occurrences) * double(p.min_ticks);
    r.variation_all = double(p.total_ticks) - double(p.occurrences) * double(p.min_ticks);
}

using Signature = std::pair<std::string, std::vector<std::uint64_t>>;  // procedure, blocks

Signature signature_of(const store::BranchPath& p) { return {p.procedure, p.blocks}; }

// Spans count occurrences apart from bursts: a fitted path's total is its
// fitted mean times its span occurrences, brought to the bursts' scale.
double span_scale(const store::BranchPathProfile& profile) {
    double in_bursts = 0, in_spans = 0;
    for (const auto& p : profile.paths)
        if (p.fitted) in_bursts += double(p.occurrences), in_spans += double(p.span_occurrences);
    return in_bursts > 0 && in_spans > 0 ? in_bursts / in_spans : 1.0;
}

// The sampled occurrences (bursts' and spans') per occurrence in bursts:
// the sampler's 1 in N block entries are shared by spans and bursts, and
// bursts take a share of them that the runtime lowers over a long run
// (rt_spans.c); 1 where no span was fitted (out-of-line builds).
double sampled_per_burst(const store::BranchPathProfile& profile) {
    double in_bursts = 0, in_spans = 0;
    for (const auto& p : profile.paths)
        if (p.fitted) in_bursts += double(p.occurrences), in_spans += double(p.span_occurrences);
    return in_bursts > 0 ? (in_bursts + in_spans) / in_bursts : 1.0;
}

// Which figure times a path (docs/json-schema.md `time_method`): its
// stamped bursts where no span fitted it ("stamped"); the fit's mean
// ("fit", a regular group's split included); or, where the spans leave it
// undetermined (span_fit.h), the middle of the range they allow ("range"):
// the fit's point there is a vertex of the constraints, often 0, which
// would rank the path last with confidence; the middle errs least against
// either end of what the spans allow.
const char* time_method(const store::BranchPath& p) {
    if (!p.fitted) return "stamped";
    return p.fit_undetermined ? "range" : "fit";
}

double timed_mean(const store::BranchPath& p) {
    return p.fit_undetermined ? (p.fit_low_ticks + p.fit_high_ticks) / 2 : p.fit_mean_ticks;
}

std::vector<Ranked> rank_paths(const store::BranchPathProfile& profile, const std::string& procedure, double long_floor_ticks) {
    std::vector<Ranked> out;
    const double scale = span_scale(profile);
    for (const auto& p : profile.paths) {
        if (!procedure.empty() && p.procedure != procedure) continue;
        Ranked r;
        r.path = &p;
        split_long(r, long_floor_ticks);
        r.time = p.fitted ? timed_mean(p) * double(p.span_occurrences) * scale : r.total;
        r.time_method = time_method(p);
        out.push_back(r);
    }
    auto assign = [&](auto key, std::size_t Ranked::*field) {
        std::vector<Ranked*> order;
        for (auto& r : out) order.push_back(&r);
        std::stable_sort(order.begin(), order.end(), [&](const Ranked* a, const Ranked* b) { return key(*a) > key(*b); });
        for (std::size_t i = 0; i < order.size(); i++) order[i]->*field = i + 1;
    };
    assign([](const Ranked& r) { return r.time; }, &Ranked::rank_by_time);
    assign([](const Ranked& r) { return r.variation; }, &Ranked::rank_by_variation);
    return out;
}

void sort_by(std::vector<Ranked>& paths, BranchPathRank rank) {
    std::stable_sort(paths.begin(), paths.end(), [rank](const Ranked& a, const Ranked& b) {
        switch (rank) {
            case BranchPathRank::kTime: return a.rank_by_time < b.rank_by_time;
            case BranchPathRank::kCount: return a.occurrences > b.occurrences;
            default: return a.rank_by_variation < b.rank_by_variation;
        }
    });
}

nlohmann::json lines_of(const store::BranchPath& p, const DebugInfo* debug) {
    nlohmann::json lines = nlohmann::json::array();
    if (!debug || !debug->has_lines()) return lines;
    std::set<std::pair<std::string, int>> seen;
    for (std::uint64_t block : p.blocks) {
        // The block's first instructions load the callback's guard and
        // have no line of their own: the first line within a few bytes. The
        // procedure's own line (the outermost frame): a block of an inlined
        // helper is shown where the procedure calls it.
        for (std::uint64_t a = block; a < block + 32; a++) {
            auto frames = debug->frames_at(a);
            if (frames.empty() || frames.back().line == 0) continue;
            const SourceFrame& own = frames.back();
            if (seen.insert({own.file, own.line}).second) lines.push_back({{"file", own.file}, {"line", own.line}});
            break;
        }
    }
    return lines;
}

// Ticks to the report's unit: nanoseconds when the rate is known.
struct Units {
    double per_tick = 1;
    bool ns = false;
    double operator()(double ticks) const { return ticks * per_tick; }
};

nlohmann::json histogram_of(const store::BranchPath& p, const Units& u) {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& [bucket, b] : p.histogram)
        h.push_back({{"low", u(double(store::tick_bucket_low(bucket)))},
                     {"high", u(double(store::tick_bucket_high(bucket) + 1))},
                     {"occurrences", b.occurrences},
                     {"time", u(double(b.ticks))}});
    return h;
}

// The span fit's figures for one path (span_fit.h).
nlohmann::json fit_json(const store::BranchPath& p, const Units& u, const std::string& suffix) {
    nlohmann::json f{{"fitted", p.fitted},
                     {"span_occurrences", p.span_occurrences},
                     {"relative_error", p.fit_mean_ticks > 0 ? p.fit_stderr_ticks / p.fit_mean_ticks : 0.0},
                     {"noisy", p.fit_noisy},
                     {"damped", p.fit_damped},
                     {"undetermined", p.fit_undetermined}};
    f["mean" + suffix] = u(p.fit_mean_ticks);
    f["stderr" + suffix] = u(p.fit_stderr_ticks);
    f["low" + suffix] = u(p.fit_low_ticks);
    f["high" + suffix] = u(p.fit_high_ticks);
    return f;
}

nlohmann::json path_json(const Ranked& r, double all_ticks, const Units& u, const BranchPathsReportOptions& o,
                         const DebugInfo* debug, double scale) {
    const store::BranchPath& p = *r.path;
    nlohmann::json blocks = nlohmann::json::array();
    for (auto b : p.blocks) blocks.push_back(hex(b));
    const std::string suffix = u.ns ? "_ns" : "_ticks";
    nlohmann::json j{{"procedure", p.procedure},
                     {"start", hex(p.blocks.empty() ? p.procedure_start : p.blocks.front())},
                     {"start_kind", p.start_kind},
                     {"end_kind", p.end_kind},
                     {"signature", p.start_kind + "@" + hex(p.blocks.empty() ? 0 : p.blocks.front()) + ":" + p.decisions},
                     {"decisions", p.decisions},
                     {"blocks", blocks},
                     {"lines", lines_of(p, debug)},
                     {"occurrences", r.occurrences},
                     {"long_occurrences", r.long_occurrences},
                     {"rank_by_time", r.rank_by_time},
                     {"rank_by_variation", r.rank_by_variation},
                     {"time_share", all_ticks > 0 ? r.time / all_ticks : 0.0},
                     {"time_method", r.time_method}};
    j["total_time" + suffix] = u(r.time);
    j["stamped_total_time" + suffix] = u(r.total);
    if (p.span_occurrences || p.fitted) j["fit"] = fit_json(p, u, suffix);
    j["basetime" + suffix] = u(double(p.min_ticks));
    j["basetime_p" + std::to_string(int(std::lround(o.low_quantile * 100))) + suffix] =
        u(double(p.quantile_ticks(o.low_quantile)));
    j["mean" + suffix] = r.occurrences ? u(r.total / double(r.occurrences)) : 0.0;
    j["net_variation" + suffix] = u(r.variation);
    j["long_time" + suffix] = u(r.long_ticks);
    j["net_variation_all" + suffix] = u(r.variation_all);
    // The whole run's figures, estimated: bursts saw 1 in `scale` path occurrences.
    j["estimated_total_time" + suffix] = u(r.time * scale);
    j["estimated_net_variation" + suffix] = u(r.variation * scale);
    j["histogram"] = histogram_of(p, u);
    return j;
}

nlohmann::json comparison_json(const std::vector<Ranked>& mine, const BranchPathsComparison& c, const std::string& procedure,
                               double long_floor_ticks) {
    auto theirs = rank_paths(*c.other, procedure, long_floor_ticks);
    std::map<Signature, std::size_t> their_rank;
    for (const auto& r : theirs) their_rank[signature_of(*r.path)] = r.rank_by_variation;
    std::size_t overlap = 0, top = 0;
    nlohmann::json ranks = nlohmann::json::array();
    std::vector<const Ranked*> ordered;
    for (const auto& r : mine) ordered.push_back(&r);
    std::sort(ordered.begin(), ordered.end(), [](auto* a, auto* b) { return a->rank_by_variation < b->rank_by_variation; });
    for (const Ranked* r : ordered) {
        if (top == c.top) break;
        top++;
        auto it = their_rank.find(signature_of(*r->path));
        std::size_t other = it == their_rank.end() ? 0 : it->second;
        if (other && other <= c.top) overlap++;
        ranks.push_back({{"rank", r->rank_by_variation}, {"other_rank", other}});
    }
    return {{"other", c.other_name},
            {"top", c.top},
            {"overlap", overlap},
            {"overlap_share", top ? double(overlap) / double(top) : 0.0},
            {"ranks", ranks}};
}

}  // namespace

Result<BranchPathRank> parse_branch_path_rank(const std::string& name) {
    if (name == "variation") return BranchPathRank::kVariation;
    if (name == "time") return BranchPathRank::kTime;
    if (name == "count") return BranchPathRank::kCount;
    return Error("unknown rank '" + name + "' for branch paths: use variation, time or count");
}

nlohmann::json branch_paths_report_json(const store::BranchPathProfile& profile, const BranchPathsReportOptions& options,
                                        const DebugInfo* debug, const BranchPathsComparison& compare) {
    Units u;
    if (profile.ticks_per_ns > 0) {
        u.per_tick = 1.0 / profile.ticks_per_ns;
        u.ns = true;
    }
    // 5 us, in ticks (unknown rate: 5000 ticks, a few microseconds of cycles).
    const double long_floor_ticks = u.ns ? options.long_floor_ns / u.per_tick : options.long_floor_ns;
    auto ranked = rank_paths(profile, options.procedure, long_floor_ticks);
    double all_ticks = 0;
    for (const auto& r : ranked) all_ticks += r.time;
    sort_by(ranked, options.rank);
    nlohmann::json paths = nlohmann::json::array();
    const double scale = double(std::max<std::uint64_t>(1, profile.sample_every)) * sampled_per_burst(profile);
    for (std::size_t i = 0; i < ranked.size() && (options.limit == 0 || i < options.limit); i++)
        paths.push_back(path_json(ranked[i], all_ticks, u, options, debug, scale));
    const char* rank_name = options.rank == BranchPathRank::kTime ? "time" : options.rank == BranchPathRank::kCount ? "count" : "variation";
    nlohmann::json doc{{"schema", "ecpi.paths"},
                       {"version", 1},
                       {"kind", "branch"},
                       {"source", profile.source},
                       {"image", profile.image},
                       {"build_id", profile.build_id},
                       {"command", profile.command},
                       {"time_unit", u.ns ? "ns" : profile.tick_unit},
                       {"ticks_per_ns", profile.ticks_per_ns},
                       {"rate_source", profile.rate_source},
                       {"block_cost" + std::string(u.ns ? "_ns" : "_ticks"), u(profile.block_cost_ticks)},
                       {"sample_every", profile.sample_every},
                       {"burst", profile.burst},
                       {"bursts", profile.bursts},
                       {"blocks", profile.blocks},
                       {"blocks_outside", profile.blocks_outside},
                       {"blocks_at_edges", profile.blocks_at_edges},
                       {"occurrences", profile.occurrences},
                       {"timing", profile.spans ? "span fit" : "stamps"},
                       {"spans", profile.spans},
                       {"distinct_paths", ranked.size()},
                       {"total_time", u(all_ticks)},
                       {"rank", rank_name},
                       {"notes", profile.notes},
                       {"paths", paths}};
    doc["long_floor" + std::string(u.ns ? "_ns" : "_ticks")] = u(long_floor_ticks);
    doc["fit_intercept" + std::string(u.ns ? "_ns" : "_ticks")] = u(profile.fit_intercept_ticks);
    double long_total = 0;
    for (const auto& r : ranked) long_total += r.long_ticks;
    doc["long_time" + std::string(u.ns ? "_ns" : "_ticks")] = u(long_total);
    if (compare.other) doc["compare"] = comparison_json(ranked, compare, options.procedure, long_floor_ticks);
    return doc;
}

namespace {

std::string time_text(double v, bool ns) {
    if (!ns) return format("%.0f", v);
    if (v >= 1e9) return format("%.2fs", v / 1e9);
    if (v >= 1e6) return format("%.2fms", v / 1e6);
    if (v >= 1e3) return format("%.2fus", v / 1e3);
    return format("%.1fns", v);
}

// The fit column: its mean, or for an undetermined path the range the
// spans allow, marked '?' (documents saved before the ranges have none).
std::string fit_text(const nlohmann::json& fit, const std::string& sfx, bool ns) {
    if (!fit.value("undetermined", false)) return time_text(fit["mean" + sfx].get<double>(), ns);
    return time_text(fit["low" + sfx].get<double>(), ns) + "-" + time_text(fit["high" + sfx].get<double>(), ns) + "?";
}

std::string first_line(const nlohmann::json& path) {
    const auto& lines = path["lines"];
    if (lines.empty()) return "";
    std::string file = lines[0]["file"].get<std::string>();
    auto slash = file.rfind('/');
    if (slash != std::string::npos) file = file.substr(slash + 1);
    std::string text = file + ":" + std::to_string(lines[0]["line"].get<int>());
    for (std::size_t i = 1; i < lines.size() && i < 5; i++) text += "," + std::to_string(lines[i]["line"].get<int>());
    if (lines.size() > 5) text += ",...";
    return text;
}

// The distribution of one path's occurrence times by octave: where its
// variation lies (a second mode far from the basetime is a cause to find).
std::string render_histogram(const nlohmann::json& path, std::size_t number, bool ns) {
    std::map<int, std::pair<std::uint64_t, double>> octaves;  // floor(log2(low)) -> occurrences, time
    std::uint64_t all = 0;
    double all_time = 0;
    for (const auto& h : path["histogram"]) {
        const double low = h["low"].get<double>();
        const int octave = low < 1 ? 0 : static_cast<int>(std::floor(std::log2(low)));
        auto& o = octaves[octave];
        o.first += h["occurrences"].get<std::uint64_t>();
        o.second += h["time"].get<double>();
        all += h["occurrences"].get<std::uint64_t>();
        all_time += h["time"].get<double>();
    }
    if (all == 0) return "";
    std::string out = format("\n#%zu %s: occurrences (and their share of its time) by duration\n", number,
                             path["signature"].get<std::string>().c_str());
    std::uint64_t rest = 0;
    double rest_time = 0;
    for (const auto& [octave, o] : octaves) {
        const double share = double(o.first) / double(all);
        if (share < 0.001 && (all_time <= 0 || o.second / all_time < 0.05)) {
            rest += o.first;
            rest_time += o.second;
            continue;
        }
        const auto bar = static_cast<std::size_t>(std::lround(share * 40));
        out += format("  %9s - %-9s %6.2f%% %s%s (%.1f%% of time)\n", time_text(std::ldexp(1.0, octave), ns).c_str(),
                      time_text(std::ldexp(1.0, octave + 1), ns).c_str(), 100 * share, std::string(bar, '#').c_str(),
                      bar == 0 && o.first ? "." : "", all_time > 0 ? 100 * o.second / all_time : 0.0);
    }
    if (rest)
        out += format("  %21s %6.2f%% (%.1f%% of time) in rarer durations\n", "", 100.0 * double(rest) / double(all),
                      all_time > 0 ? 100 * rest_time / all_time : 0.0);
    return out;
}

}  // namespace

std::string render_branch_paths_text(const nlohmann::json& doc) {
    const bool ns = doc["time_unit"] == "ns";
    const std::string sfx = ns ? "_ns" : "_ticks";
    std::string out;
    out += "Branch paths of " + escape_for_terminal(doc["image"].get<std::string>()) + " (" +
           doc["source"].get<std::string>() + ", " + std::to_string(doc["occurrences"].get<std::uint64_t>()) +
           " occurrences of " + std::to_string(doc["distinct_paths"].get<std::size_t>()) + " paths in " +
           std::to_string(doc["bursts"].get<std::uint64_t>()) + " bursts";
    if (doc["sample_every"].get<std::uint64_t>() > 1)
        out += ", 1 in " + std::to_string(doc["sample_every"].get<std::uint64_t>()) + " block entries";
    out += ")\n";
    if (ns) {
        const bool tsc = doc["source"] == "instrumented";
        out += format("Times in ns: %s at %.3f GHz (%s)", tsc ? "TSC" : "cycles", doc["ticks_per_ns"].get<double>(),
                      doc["rate_source"].get<std::string>().c_str());
        if (doc["block_cost_ns"].get<double>() > 0)
            out += format("; recording cost %.1f ns per block entry subtracted", doc["block_cost_ns"].get<double>());
        out += ".\n";
    }
    else
        out += "Times in " + doc["time_unit"].get<std::string>() + " (no rate to convert them to ns).\n";
    out += "Ranked by " + doc["rank"].get<std::string>() +
           "; 'time#' is the rank by total time. net variation = total - occurrences x basetime (VPP 3).\n";
    const bool fitted = doc.value("spans", std::uint64_t{0}) > 0;
    if (fitted)
        out += "Time (time%, time#, 'fit') from " + std::to_string(doc["spans"].get<std::uint64_t>()) +
               " spans timed at their ends: each path's mean fitted over them (NNLS), +-% its standard error, "
               "'!' over 15%, '~' not fitted on its own: the mean leans on the stamped one (a rare path), or is its share of a regular mix's total (split by the stamps or the pc samples: see the notes); "
               "'low-high?' the spans do not pin the mean down (undetermined): the range they allow (95%), and its "
               "middle times the path; base, p10 and net variation from stamped bursts.\n";
    out += "Occurrences over " + time_text(doc["long_floor" + sfx].get<double>(), ns) +
           " and 8x their path's median ('long': interrupts, preemption, page faults) are left out of both: " +
           time_text(doc["long_time" + sfx].get<double>(), ns) + " in all.\n\n";
    TextTable table;
    for (const char* h : {"#", "net var", "time%", "time#", "count", "long", "base", "p10", "mean"}) table.add_column(h, true);
    if (fitted)
        for (const char* h : {"fit", "+-%"}) table.add_column(h, true);
    for (const char* h : {"procedure", "path", "lines"}) table.add_column(h, false);
    std::size_t i = 0;
    for (const auto& p : doc["paths"]) {
        i++;
        std::string p10_key;
        for (const auto& [k, v] : p.items())
            if (k.rfind("basetime_p", 0) == 0) p10_key = k;
        std::vector<std::string> row{std::to_string(i), time_text(p["net_variation" + sfx].get<double>(), ns),
                   format("%.1f", 100 * p["time_share"].get<double>()), std::to_string(p["rank_by_time"].get<std::size_t>()),
                   std::to_string(p["occurrences"].get<std::uint64_t>()),
                   std::to_string(p["long_occurrences"].get<std::uint64_t>()), time_text(p["basetime" + sfx].get<double>(), ns),
                   p10_key.empty() ? "" : time_text(p[p10_key].get<double>(), ns), time_text(p["mean" + sfx].get<double>(), ns)};
        if (fitted) {
            const bool has = p.contains("fit") && p["fit"]["fitted"].get<bool>();
            row.push_back(has ? fit_text(p["fit"], sfx, ns) : "-");
            row.push_back(has ? format("%.0f%s%s", 100 * p["fit"]["relative_error"].get<double>(),
                                       p["fit"]["noisy"].get<bool>() ? "!" : "", p["fit"]["damped"].get<bool>() ? "~" : "")
                              : "");
        }
        row.push_back(p["procedure"].get<std::string>());
        row.push_back(p["start_kind"].get<std::string>() + "@" + p["start"].get<std::string>() + " " +
                      (p["decisions"].get<std::string>().empty() ? "-" : p["decisions"].get<std::string>()));
        row.push_back(first_line(p));
        table.add_row(row);
    }
    out += table.render();
    for (std::size_t k = 0; k < doc["paths"].size() && k < 3; k++) out += render_histogram(doc["paths"][k], k + 1, ns);
    if (doc.contains("compare")) {
        const auto& c = doc["compare"];
        out += format("\nTop %zu by variation shared with %s: %zu (%.0f%%)\n", c["top"].get<std::size_t>(),
                   escape_for_terminal(c["other"].get<std::string>()).c_str(), c["overlap"].get<std::size_t>(),
                   100 * c["overlap_share"].get<double>());
    }
    for (const auto& n : doc["notes"]) out += "Note: " + escape_for_terminal(n.get<std::string>()) + "\n";
    return out;
}

}  // namespace ecpi::analyze
