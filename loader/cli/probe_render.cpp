#include "probe_render.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "ecpi/loader/probe_calibration.h"

namespace ecpi::cli {

Result<PathRank> parse_path_rank(const std::string& name) {
    if (name == "time") return PathRank::kTime;
    if (name == "calls") return PathRank::kCalls;
    if (name == "variation") return PathRank::kVariation;
    return Error("unknown --rank '" + name + "' (time, calls or variation)");
}

std::string format_ns(double ns) {
    char buf[32];
    if (ns < 1e3) std::snprintf(buf, sizeof buf, "%.0f ns", ns);
    else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
    else if (ns < 1e9) std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
    else std::snprintf(buf, sizeof buf, "%.3g s", ns / 1e9);
    return buf;
}

namespace {

std::string percent(double part, double whole) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
    return buf;
}

const store::ProbeTimer* timer_of(const store::ProbePath& p, const std::string& name) {
    auto it = p.timers.find(name);
    return it == p.timers.end() ? nullptr : &it->second;
}

std::string first_timer(const store::ProbeReport& r, const std::string& preferred) {
    for (const auto& m : r.metrics)
        if (m == preferred) return m;
    for (const auto& m : r.metrics)
        if (m != "count") return m;
    return "";
}

std::string path_text(const store::ProbePath& p, const store::ProbeFunction& f) {
    std::string s = p.truncated ? "... > " : "";
    for (const auto& fr : p.frames) {
        char off[32];
        std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(fr.offset));
        if (fr.symbol == "[unknown]" && !fr.image.empty())
            s += std::filesystem::path(fr.image).filename().string() + off + " > ";
        else
            s += fr.symbol + off + " > ";
    }
    return s + f.demangled;
}

// Eight-level bar per histogram bucket from the first to the last non-empty one.
std::string sparkline(const store::ProbeTimer& t) {
    static const char* const kLevels[] = {" ", "\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    std::size_t lo = t.histogram.size(), hi = 0;
    std::uint64_t peak = 0;
    for (std::size_t i = 0; i < t.histogram.size(); ++i) {
        if (!t.histogram[i]) continue;
        lo = std::min(lo, i);
        hi = i;
        peak = std::max(peak, t.histogram[i]);
    }
    if (peak == 0) return "";
    std::string s = format_ns(lo == 0 ? 0.0 : static_cast<double>(std::uint64_t{1} << lo)) + " ";
    for (std::size_t i = lo; i <= hi; ++i) {
        std::size_t level = t.histogram[i] ? 1 + (t.histogram[i] * 7) / peak : 0;
        s += kLevels[std::min<std::size_t>(level, 8)];
    }
    return s;
}

// How the times were measured: net of the probe (and what it costs), or raw.
std::string probe_cost_line(const store::ProbeReport& r) {
    if (r.probe_cost)
        return "  times are net of the probe; " + loader::describe_probe_cost(*r.probe_cost) +
               "; * marks a mean within the probe's noise" +
               (r.stack_sample_period_ns ? ", s a mean within it taken from stack samples instead (on-CPU time)" : "") + "\n";
    const bool timed = std::any_of(r.metrics.begin(), r.metrics.end(), [](const std::string& m) { return m != "count"; });
    return timed ? "  times are as measured: each includes the probe's own cost (--raw-times, or a report without it)\n" : "";
}

// A path's mean for one timer: net of the probe, marked where within its
// noise ("*", with the range in `notes`) or taken from stack samples ("s").
std::string mean_cell(const store::ProbeTimer& t, const std::string& name, const store::ProbePath& p,
                      std::string& notes) {
    if (t.net && t.net->from_samples) {
        notes += " [s" + name + " from " + std::to_string(p.stack_samples) + " stack samples, " +
                 format_ns(t.net->samples_low_ns) + " to " + format_ns(t.net->samples_high_ns) + " by their count (95%)" +
                 (name == "cpu" ? "" : " (on-CPU time; time off the CPU is within the probe's noise)") +
                 " (the subtraction, within the probe's noise: " + format_ns(t.net->low_ns) + " to " +
                 format_ns(t.net->high_ns) + ")]";
        return "s" + format_ns(t.net->samples_mean_ns);
    }
    if (t.net && t.net->within_noise) {
        // The range, not the net mean: within the noise the mean is no figure.
        notes += " [*" + name + " within the probe's noise: " + format_ns(t.net->low_ns) + " to " +
                 format_ns(t.net->high_ns) + " per call]";
        return t.net->low_ns > 0 ? "*" + format_ns(t.net->low_ns) + "-" + format_ns(t.net->high_ns)
                                 : "*<=" + format_ns(t.net->high_ns);
    }
    return format_ns(t.reported_mean_ns());
}

// A path's total: its range where its mean is one (within the noise, no samples).
std::string total_cell(const store::ProbeTimer& t, std::uint64_t calls) {
    if (!t.net || !t.net->within_noise || t.net->from_samples) return format_ns(t.reported_total_ns(calls));
    const double n = static_cast<double>(std::max(calls, t.timed_calls));
    return t.net->low_ns > 0 ? "*" + format_ns(t.net->low_ns * n) + "-" + format_ns(t.net->high_ns * n)
                             : "*<=" + format_ns(t.net->high_ns * n);
}

}  // namespace

void rank_paths(store::ProbeReport& report, PathRank rank, const std::string& timer_name) {
    const std::string timer = first_timer(report, timer_name);
    for (auto& f : report.functions) {
        if (rank == PathRank::kVariation) {
            std::erase_if(f.paths, [&](const store::ProbePath& p) {
                const auto* t = timer_of(p, timer);
                return !t || t->timed_calls < 2;
            });
        }
        std::stable_sort(f.paths.begin(), f.paths.end(), [&](const store::ProbePath& a, const store::ProbePath& b) {
            const auto* ta = timer_of(a, timer);
            const auto* tb = timer_of(b, timer);
            if (rank == PathRank::kVariation && ta && tb) return ta->net_variation_ns() > tb->net_variation_ns();
            if (rank == PathRank::kTime && ta && tb && ta->reported_total_ns(a.calls) != tb->reported_total_ns(b.calls))
                return ta->reported_total_ns(a.calls) > tb->reported_total_ns(b.calls);
            return a.calls > b.calls;
        });
    }
}

std::string render_probe_text(const store::ProbeReport& r, PathRank rank, std::size_t limit,
                              const std::string& timer_name) {
    std::string out;
    char line[512];
    std::snprintf(line, sizeof line, "Probe of pid %u (%s), %.1f s%s%s\n", r.pid, r.comm.c_str(), r.duration_s,
                  r.final ? "" : ", running", r.target_exited ? ", target exited" : "");
    out += line;
    if (r.sample_n)
        out += "  timers sampled: 1 call in " + std::to_string(r.sample_n) + " (bursts of " +
               std::to_string(r.sample_burst) + "); calls are exact, times are estimates ± 95% bound\n";
    out += probe_cost_line(r);
    std::vector<std::string> timers;
    for (const auto& m : r.metrics)
        if (m != "count") timers.push_back(m);
    const std::string ranked = first_timer(r, timer_name);

    for (const auto& f : r.functions) {
        std::snprintf(line, sizeof line, "\n%s  (%s+0x%llx)%s  %llu calls", f.demangled.c_str(), f.image.c_str(),
                      static_cast<unsigned long long>(f.address), f.removed ? " [removed]" : "",
                      static_cast<unsigned long long>(f.calls));
        out += line;
        std::map<std::string, double> fn_total;
        for (const auto& p : f.paths)
            for (const auto& [name, t] : p.timers) fn_total[name] += t.reported_total_ns(p.calls);
        for (const auto& t : timers) out += "  " + t + " " + format_ns(fn_total[t]);
        if (f.unmatched) out += "  (" + std::to_string(f.unmatched) + " calls never returned)";
        out += "\n";
        if (f.paths.empty()) {
            out += rank == PathRank::kVariation ? "  (no path with two or more timed calls)\n" : "  (no calls yet)\n";
            continue;
        }
        if (rank == PathRank::kVariation) {
            std::snprintf(line, sizeof line, "  %10s %10s %11s %11s %11s %12s %7s  %s\n", "calls", "timed",
                          (ranked + " total").c_str(), "min", "mean", "net var.", "%var", "histogram / path");
            out += line;
            double fn_var = 0;
            for (const auto& p : f.paths)
                if (const auto* t = timer_of(p, ranked)) fn_var += static_cast<double>(t->net_variation_ns());
            std::size_t shown = 0;
            for (const auto& p : f.paths) {
                if (limit && shown++ >= limit) break;
                const auto* t = timer_of(p, ranked);
                if (!t) continue;
                std::snprintf(line, sizeof line, "  %10llu %10llu %11s %11s %11s %12s %7s  %s\n",
                              static_cast<unsigned long long>(p.calls), static_cast<unsigned long long>(t->timed_calls),
                              format_ns(t->reported_total_ns(p.calls)).c_str(), format_ns(static_cast<double>(t->min_ns)).c_str(),
                              format_ns(t->reported_mean_ns()).c_str(),
                              format_ns(static_cast<double>(t->net_variation_ns())).c_str(),
                              percent(static_cast<double>(t->net_variation_ns()), fn_var).c_str(),
                              sparkline(*t).c_str());
                out += line;
                out += "  " + std::string(84, ' ') + path_text(p, f) + "\n";
            }
            continue;
        }
        out += "  " + std::string("     calls  %calls");
        for (const auto& t : timers) {
            std::snprintf(line, sizeof line, " %11s %10s %6s", (t + " total").c_str(), "mean", ("%" + t).substr(0, 6).c_str());
            out += line;
        }
        out += "  path (outermost first)\n";
        std::size_t shown = 0;
        for (const auto& p : f.paths) {
            if (limit && shown++ >= limit) {
                out += "  ... " + std::to_string(f.paths.size() - limit) + " more paths\n";
                break;
            }
            std::snprintf(line, sizeof line, "  %10llu %7s", static_cast<unsigned long long>(p.calls),
                          percent(static_cast<double>(p.calls), static_cast<double>(f.calls)).c_str());
            out += line;
            std::string notes;
            for (const auto& name : timers) {
                const auto* t = timer_of(p, name);
                if (!t || t->timed_calls == 0) {
                    std::snprintf(line, sizeof line, " %11s %10s %6s", "-", "-", "-");
                } else {
                    std::string total = total_cell(*t, p.calls);
                    if (r.sample_n && t->timed_calls < p.calls) total = "~" + total;
                    const std::string mean = mean_cell(*t, name, p, notes);
                    std::snprintf(line, sizeof line, " %11s %10s %6s", total.c_str(), mean.c_str(),
                                  percent(t->reported_total_ns(p.calls), fn_total[name]).c_str());
                }
                out += line;
            }
            out += "  " + path_text(p, f);
            if (p.unmatched) out += "  [" + std::to_string(p.unmatched) + " never returned]";
            out += notes;
            out += "\n";
        }
    }
    for (const auto& w : r.warnings) out += "warning: " + w + "\n";
    return out;
}

}  // namespace ecpi::cli
