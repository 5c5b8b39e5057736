#include "ecpi/store/probe_results.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ecpi/store/saved_documents.h"

namespace ecpi::store {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSchema = "ecpi.probe";
constexpr const char* kFilePrefix = "probe-";

int bucket_of(std::uint64_t ns) {
    if (ns < 2) return 0;
    return 63 - __builtin_clzll(ns);
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

nlohmann::json timer_to_json(const ProbeTimer& t, std::uint64_t calls, std::uint32_t sample_n) {
    nlohmann::json j;
    const bool estimated = sample_n != 0 && t.timed_calls < calls;
    j["total_ns"] = static_cast<std::uint64_t>(std::llround(t.total_ns(calls)));
    j["mean_ns"] = static_cast<std::uint64_t>(std::llround(t.mean_ns()));
    j["min_ns"] = t.min_ns;
    j["max_ns"] = t.max_ns;
    j["timed_calls"] = t.timed_calls;
    j["measured_ns"] = t.measured_ns;
    j["net_variation_ns"] = t.net_variation_ns();
    j["estimated"] = estimated;
    j["error_ns"] = estimated ? static_cast<std::uint64_t>(std::llround(t.error_ns(calls))) : 0;
    j["sum_squares"] = t.sum_squares;
    j["nested_calls"] = t.nested_calls;
    j["nested_stepped"] = t.nested_stepped;
    j["nested_frames"] = t.nested_frames;
    if (t.net)
        j["net"] = {{"probe_ns", t.net->probe_ns}, {"mean_ns", t.net->mean_ns},   {"total_ns", t.reported_total_ns(calls)},
                    {"noise_ns", t.net->noise_ns}, {"within_noise", t.net->within_noise},
                    {"low_ns", t.net->low_ns},     {"high_ns", t.net->high_ns},
                    {"method", t.net->method()},   {"samples_mean_ns", t.net->samples_mean_ns},
                    {"samples_low_ns", t.net->samples_low_ns}, {"samples_high_ns", t.net->samples_high_ns}};
    nlohmann::json hist = nlohmann::json::array();
    for (std::size_t i = 0; i < t.histogram.size(); ++i)
        if (t.histogram[i]) hist.push_back({{"ge_ns", i == 0 ? 0 : (std::uint64_t{1} << i)}, {"calls", t.histogram[i]}});
    j["histogram"] = hist;
    return j;
}

ProbeTimer timer_from_json(const nlohmann::json& j) {
    ProbeTimer t;
    t.timed_calls = j.value("timed_calls", std::uint64_t{0});
    t.measured_ns = j.value("measured_ns", j.value("total_ns", std::uint64_t{0}));
    t.min_ns = j.value("min_ns", std::uint64_t{0});
    t.max_ns = j.value("max_ns", std::uint64_t{0});
    t.sum_squares = j.value("sum_squares", 0.0);
    t.nested_calls = j.value("nested_calls", std::uint64_t{0});
    t.nested_stepped = j.value("nested_stepped", std::uint64_t{0});
    t.nested_frames = j.value("nested_frames", std::uint64_t{0});
    if (j.contains("net") && j["net"].is_object()) {
        const auto& n = j["net"];
        t.net = ProbeTimer::Net{n.value("probe_ns", 0.0), n.value("mean_ns", 0.0),     n.value("noise_ns", 0.0),
                                n.value("within_noise", false), n.value("low_ns", 0.0), n.value("high_ns", 0.0)};
        t.net->from_samples = n.value("method", "") == "stack samples";
        t.net->samples_mean_ns = n.value("samples_mean_ns", 0.0);
        t.net->samples_low_ns = n.value("samples_low_ns", 0.0);
        t.net->samples_high_ns = n.value("samples_high_ns", 0.0);
    }
    if (j.contains("histogram")) {
        t.histogram.assign(kProbeHistogramBuckets, 0);
        for (const auto& b : j["histogram"]) {
            std::uint64_t ge = b.value("ge_ns", std::uint64_t{0});
            t.histogram[static_cast<std::size_t>(bucket_of(ge))] += b.value("calls", std::uint64_t{0});
        }
    }
    return t;
}

nlohmann::json cost_kind_to_json(const ProbeCostKind& k) {
    return {{"self_wall_ns", k.self_wall_ns}, {"self_cpu_ns", k.self_cpu_ns}, {"self_spread_ns", k.self_spread_ns},
            {"self_sd_ns", k.self_sd_ns},     {"pair_ns", k.pair_ns},         {"pair_spread_ns", k.pair_spread_ns},
            {"pair_cpu_ns", k.pair_cpu_ns},   {"pair_depth", k.pair_depth}};
}

ProbeCostKind cost_kind_from_json(const nlohmann::json& j) {
    ProbeCostKind k;
    if (!j.is_object()) return k;
    k.self_wall_ns = j.value("self_wall_ns", 0.0);
    k.self_cpu_ns = j.value("self_cpu_ns", 0.0);
    k.self_spread_ns = j.value("self_spread_ns", 0.0);
    k.self_sd_ns = j.value("self_sd_ns", 0.0);
    k.pair_ns = j.value("pair_ns", 0.0);
    k.pair_spread_ns = j.value("pair_spread_ns", 0.0);
    k.pair_cpu_ns = j.value("pair_cpu_ns", k.pair_ns);
    k.pair_depth = j.value("pair_depth", 0.0);
    return k;
}

nlohmann::json probe_cost_to_json(const ProbeCost& c) {
    return {{"method", c.method},
            {"rounds", c.rounds},
            {"calls", c.calls},
            {"unprobed_ns", c.unprobed_ns},
            {"emulated", cost_kind_to_json(c.emulated)},
            {"stepped", cost_kind_to_json(c.stepped)},
            {"frame_ns", c.frame_ns},
            {"frame_cpu_ns", c.frame_cpu_ns}};
}

ProbeCost probe_cost_from_json(const nlohmann::json& j) {
    ProbeCost c;
    c.method = j.value("method", "");
    c.rounds = j.value("rounds", 0u);
    c.calls = j.value("calls", std::uint64_t{0});
    c.unprobed_ns = j.value("unprobed_ns", 0.0);
    c.emulated = cost_kind_from_json(j.value("emulated", nlohmann::json::object()));
    c.stepped = cost_kind_from_json(j.value("stepped", nlohmann::json::object()));
    c.frame_ns = j.value("frame_ns", 0.0);
    c.frame_cpu_ns = j.value("frame_cpu_ns", 0.0);
    return c;
}

}  // namespace

void ProbeTimer::add(std::uint64_t ns) {
    if (timed_calls == 0 || ns < min_ns) min_ns = ns;
    if (ns > max_ns) max_ns = ns;
    ++timed_calls;
    measured_ns = saturating_add(measured_ns, ns);
    sum_squares += static_cast<double>(ns) * static_cast<double>(ns);
    if (histogram.empty()) histogram.assign(kProbeHistogramBuckets, 0);
    ++histogram[static_cast<std::size_t>(bucket_of(ns))];
}

void ProbeTimer::merge(const ProbeTimer& o) {
    if (o.timed_calls == 0) return;
    if (timed_calls == 0 || o.min_ns < min_ns) min_ns = o.min_ns;
    max_ns = std::max(max_ns, o.max_ns);
    timed_calls += o.timed_calls;
    measured_ns = saturating_add(measured_ns, o.measured_ns);
    sum_squares += o.sum_squares;
    nested_calls += o.nested_calls;
    nested_stepped += o.nested_stepped;
    nested_frames += o.nested_frames;
    if (histogram.empty()) histogram.assign(kProbeHistogramBuckets, 0);
    for (std::size_t i = 0; i < o.histogram.size() && i < histogram.size(); ++i) histogram[i] += o.histogram[i];
}

double ProbeTimer::mean_ns() const {
    return timed_calls ? static_cast<double>(measured_ns) / static_cast<double>(timed_calls) : 0.0;
}

double ProbeTimer::total_ns(std::uint64_t calls) const {
    if (timed_calls >= calls) return static_cast<double>(measured_ns);
    return mean_ns() * static_cast<double>(calls);
}

double ProbeTimer::reported_mean_ns() const {
    if (!net) return mean_ns();
    return net->from_samples ? net->samples_mean_ns : net->mean_ns;
}

double ProbeTimer::reported_total_ns(std::uint64_t calls) const {
    if (!net) return total_ns(calls);
    return std::max(0.0, reported_mean_ns()) * static_cast<double>(std::max(calls, timed_calls));
}

double ProbeTimer::error_ns(std::uint64_t calls) const {
    if (timed_calls >= calls || timed_calls < 2) return timed_calls >= calls ? 0.0 : total_ns(calls);
    const double n = static_cast<double>(timed_calls);
    const double mean = mean_ns();
    const double variance = std::max(0.0, (sum_squares - n * mean * mean) / (n - 1));
    // Finite population: the untimed calls are what is estimated.
    const double fpc = 1.0 - n / static_cast<double>(calls);
    return 1.96 * std::sqrt(variance / n * fpc) * static_cast<double>(calls);
}

std::uint64_t ProbeTimer::net_variation_ns() const {
    if (timed_calls == 0) return 0;
    const double base = static_cast<double>(timed_calls) * static_cast<double>(min_ns);
    return measured_ns > base ? measured_ns - static_cast<std::uint64_t>(base) : 0;
}

nlohmann::json probe_report_to_json(const ProbeReport& r) {
    nlohmann::json j;
    j["schema"] = kSchema;
    j["version"] = kProbeReportVersion;
    j["pid"] = r.pid;
    j["comm"] = r.comm;
    j["command"] = r.command;
    j["started_unix"] = r.started_unix;
    j["duration_s"] = r.duration_s;
    j["final"] = r.final;
    j["target_exited"] = r.target_exited;
    j["metrics"] = r.metrics;
    j["sample"] = r.sample_n ? nlohmann::json{{"n", r.sample_n}, {"burst", r.sample_burst}} : nlohmann::json(nullptr);
    j["counters"] = r.counters;
    j["warnings"] = r.warnings;
    if (r.probe_cost) j["probe_cost"] = probe_cost_to_json(*r.probe_cost);
    j["stack_sample_period_ns"] = r.stack_sample_period_ns;
    nlohmann::json functions = nlohmann::json::array();
    for (const auto& f : r.functions) {
        nlohmann::json jf{{"pattern", f.pattern},   {"symbol", f.symbol},   {"demangled", f.demangled},
                          {"image", f.image},       {"build_id", f.build_id}, {"address", f.address},
                          {"timed", f.timed},       {"removed", f.removed}, {"calls", f.calls},
                          {"unmatched", f.unmatched}, {"entry_stepped", f.entry_stepped}};
        nlohmann::json paths = nlohmann::json::array();
        for (const auto& p : f.paths) {
            nlohmann::json frames = nlohmann::json::array();
            for (const auto& fr : p.frames)
                frames.push_back({{"symbol", fr.symbol}, {"offset", fr.offset}, {"image", fr.image}});
            nlohmann::json timers = nlohmann::json::object();
            for (const auto& [name, t] : p.timers) timers[name] = timer_to_json(t, p.calls, r.sample_n);
            paths.push_back({{"frames", frames},
                             {"calls", p.calls},
                             {"truncated", p.truncated},
                             {"unmatched", p.unmatched},
                             {"stack_samples", p.stack_samples},
                             {"timers", timers}});
        }
        jf["paths"] = paths;
        functions.push_back(std::move(jf));
    }
    j["functions"] = functions;
    return j;
}

Result<ProbeReport> probe_report_from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("schema", "") != kSchema) return Error("not an ecpi.probe document");
    const int version = j.value("version", 0);
    if (version > kProbeReportVersion)
        return Error("ecpi.probe version " + std::to_string(version) + " is newer than this ecpi supports (" +
                     std::to_string(kProbeReportVersion) + "); upgrade ecpi");
    if (version < 1) return Error("ecpi.probe document without a valid version");
    try {
        ProbeReport r;
        r.pid = j.value("pid", 0u);
        r.comm = j.value("comm", "");
        r.command = j.value("command", std::vector<std::string>{});
        r.started_unix = j.value("started_unix", std::int64_t{0});
        r.duration_s = j.value("duration_s", 0.0);
        r.final = j.value("final", false);
        r.target_exited = j.value("target_exited", false);
        r.metrics = j.value("metrics", std::vector<std::string>{});
        if (j.contains("sample") && j["sample"].is_object()) {
            r.sample_n = j["sample"].value("n", 0u);
            r.sample_burst = j["sample"].value("burst", 0u);
        }
        r.counters = j.value("counters", std::map<std::string, std::uint64_t>{});
        r.warnings = j.value("warnings", std::vector<std::string>{});
        if (j.contains("probe_cost") && j["probe_cost"].is_object()) r.probe_cost = probe_cost_from_json(j["probe_cost"]);
        r.stack_sample_period_ns = j.value("stack_sample_period_ns", std::uint64_t{0});
        for (const auto& jf : j.value("functions", nlohmann::json::array())) {
            ProbeFunction f;
            f.pattern = jf.value("pattern", "");
            f.symbol = jf.value("symbol", "");
            f.demangled = jf.value("demangled", f.symbol);
            f.image = jf.value("image", "");
            f.build_id = jf.value("build_id", "");
            f.address = jf.value("address", std::uint64_t{0});
            f.timed = jf.value("timed", false);
            f.removed = jf.value("removed", false);
            f.calls = jf.value("calls", std::uint64_t{0});
            f.unmatched = jf.value("unmatched", std::uint64_t{0});
            f.entry_stepped = jf.value("entry_stepped", false);
            for (const auto& jp : jf.value("paths", nlohmann::json::array())) {
                ProbePath p;
                for (const auto& fr : jp.value("frames", nlohmann::json::array()))
                    p.frames.push_back({fr.value("symbol", ""), fr.value("offset", std::uint64_t{0}), fr.value("image", "")});
                p.calls = jp.value("calls", std::uint64_t{0});
                p.truncated = jp.value("truncated", false);
                p.unmatched = jp.value("unmatched", std::uint64_t{0});
                p.stack_samples = jp.value("stack_samples", std::uint64_t{0});
                if (jp.contains("timers"))
                    for (const auto& [name, jt] : jp["timers"].items()) p.timers[name] = timer_from_json(jt);
                f.paths.push_back(std::move(p));
            }
            r.functions.push_back(std::move(f));
        }
        return r;
    } catch (const nlohmann::json::exception& e) {
        return Error(std::string("malformed ecpi.probe document: ") + e.what());
    }
}

Result<fs::path> save_probe_report(Database& db, const ProbeReport& report) {
    return save_document(db, kFilePrefix, probe_report_to_json(report));
}

Result<std::vector<SavedProbeReport>> list_probe_reports(const Database& db) {
    ECPI_ASSIGN_OR_RETURN(auto saved, list_documents(db, kFilePrefix));
    std::vector<SavedProbeReport> out;
    for (auto& s : saved) out.push_back({std::move(s.epoch), std::move(s.file)});
    return out;
}

Result<ProbeReport> read_probe_report(const fs::path& file) {
    ECPI_ASSIGN_OR_RETURN(auto j, read_document(file));
    auto r = probe_report_from_json(j);
    if (!r.ok()) return r.error().with_context(file.string());
    return r;
}

}  // namespace ecpi::store
