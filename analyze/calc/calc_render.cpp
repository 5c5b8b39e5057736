// ecpi calc's text and JSON output (DCPI Figures 2 and 4). See calc.h.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/text_table.h"
#include "ecpi/json_document.h"

namespace ecpi::analyze {

// ---------------------------------------------------------------------------
// Output

namespace {

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string count_text(double v) {
    if (v >= 1e15) return fmt("%.3g", v);
    return fmt("%.0f", v);
}

// A procedure that took samples ran at least once: an estimate that rounds to
// no calls (its entry took no samples) is shown as unknown, never as a
// confident 0 (issue 34, defect 5).
std::string calls_text(const CalcProcedure& p) {
    if (p.samples > 0 && p.invocations < 0.5) return "-";
    return count_text(p.invocations);
}

// DCPI Figure 4's lines for a tally: (label, min %, max %), with "" labels
// for separators. Percentages are of the cycles tallied.
struct SummaryLine {
    std::string_view label;  // a literal: built per procedure, so no allocation
    double min = 0, max = 0;
    bool range = false;
    const char* key = nullptr;  // JSON key
};

std::vector<SummaryLine> summary_lines(const StallSummary& s) {
    std::vector<SummaryLine> out;
    out.reserve(2 * kStallCauses + 16);
    const double total = s.total_cycles > 0 ? s.total_cycles : 1;
    auto pct = [total](double v) {
        double p = 100.0 * v / total;
        return std::abs(p) < 0.05 ? 0.0 : p;  // no "-0.0%"
    };
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        auto cause = static_cast<StallCause>(c);
        if (!is_dynamic(cause) || cause == StallCause::kUnexplained) continue;
        out.push_back({stall_cause_title(cause), pct(s.min[c]), pct(s.max[c]), true, stall_cause_name(cause)});
    }
    const auto u = static_cast<std::size_t>(StallCause::kUnexplained);
    out.push_back({"", 0, 0, false, nullptr});
    out.push_back({"Unexplained stall", pct(s.min[u]), pct(s.max[u]), true, "unexplained_stall"});
    out.push_back({"Unexplained gain", pct(s.unexplained_gain), pct(s.unexplained_gain), true, "unexplained_gain"});
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Subtotal dynamic", pct(s.dynamic_stall()), 0, false, "subtotal_dynamic"});
    out.push_back({"", 0, 0, false, nullptr});
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        auto cause = static_cast<StallCause>(c);
        if (is_dynamic(cause)) continue;
        out.push_back({stall_cause_title(cause), pct(s.min[c]), 0, false,
                       cause == StallCause::kStaticDivider ? "divider_latency" : stall_cause_name(cause)});
    }
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Subtotal static", pct(s.static_stall()), 0, false, "subtotal_static"});
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Total stall", pct(s.dynamic_stall() + s.static_stall()), 0, false, "total_stall"});
    out.push_back({"Execution", pct(s.execution), 0, false, "execution"});
    out.push_back({"Net sampling error", pct(s.sampling_error), 0, false, "net_sampling_error"});
    out.push_back({"-", 0, 0, false, nullptr});
    out.push_back({"Total tallied",
                   pct(s.execution + s.static_stall() + s.dynamic_stall() + s.sampling_error), 0, false,
                   "total_tallied"});
    return out;
}

void render_summary(std::ostringstream& o, const StallSummary& s, std::uint64_t event_samples) {
    char buf[200];
    const double insns = s.executed_instructions;
    auto cpi = [insns](double cycles) { return insns > 0 ? fmt("%.2f", cycles / insns) : std::string("n/a"); };
    std::snprintf(buf, sizeof buf, "*** Best-case %.0f/%.0f = %s CPI\n", s.best_cycles, insns, cpi(s.best_cycles).c_str());
    o << buf;
    std::snprintf(buf, sizeof buf, "*** Actual    %.0f/%.0f = %s CPI\n", s.total_cycles - s.sampling_error, insns,
                  cpi(s.total_cycles - s.sampling_error).c_str());
    o << buf << "***\n";
    for (const auto& l : summary_lines(s)) {
        if (l.label.empty()) {
            o << "***\n";
        } else if (l.label == "-") {
            o << "*** " << std::string(52, '-') << "\n";
        } else if (l.range) {
            std::snprintf(buf, sizeof buf, "*** %-34.*s %6.1f%% to %6.1f%%\n", static_cast<int>(l.label.size()),
                          l.label.data(), l.min, l.max);
            o << buf;
        } else {
            std::snprintf(buf, sizeof buf, "*** %-34.*s %6.1f%%\n", static_cast<int>(l.label.size()), l.label.data(),
                          l.min);
            o << buf;
        }
    }
    double share = event_samples ? 100.0 * static_cast<double>(s.samples) / static_cast<double>(event_samples) : 0;
    std::snprintf(buf, sizeof buf, "*** (%" PRIu64 " samples, %.1f%% of all samples)\n", s.samples, share);
    o << buf;
}

nlohmann::json summary_json(const StallSummary& s, std::uint64_t event_samples) {
    using nlohmann::json;
    const double insns = s.executed_instructions;
    json j = {{"samples", s.samples},
              {"share_of_all_samples", event_samples ? static_cast<double>(s.samples) / static_cast<double>(event_samples) : 0.0},
              {"total_cycles", s.total_cycles},
              {"best_case_cycles", s.best_cycles},
              {"executed_instructions", insns},
              {"best_cpi", insns > 0 ? json(s.best_cycles / insns) : json(nullptr)},
              {"actual_cpi", insns > 0 ? json((s.total_cycles - s.sampling_error) / insns) : json(nullptr)}};
    json dynamic = json::object(), stat = json::object(), totals = json::object();
    bool in_static = false;
    for (const auto& l : summary_lines(s)) {
        if (!l.key) continue;
        std::string key = l.key;
        if (key == "subtotal_dynamic") in_static = true;
        if (l.range)
            dynamic[key] = {{"min_percent", l.min}, {"max_percent", l.max}};
        else if (in_static && key != "subtotal_dynamic" && key.rfind("subtotal", 0) != 0 && key != "total_stall" &&
                 key != "execution" && key != "net_sampling_error" && key != "total_tallied")
            stat[key] = l.min;
        else
            totals[key] = l.min;
    }
    j["dynamic"] = std::move(dynamic);
    j["static"] = std::move(stat);
    for (auto& [k, v] : totals.items()) j[k + "_percent"] = v;
    return j;
}

// Stalls shown in the listing: at least a cycle per execution, on an
// instruction with a visible share of the procedure's samples.
bool shows_stall(const CalcInstruction& ci, std::uint64_t procedure_samples) {
    return ci.samples * 200 >= procedure_samples && ci.samples >= 10 &&
           std::max(ci.dynamic_cycles, 0.0) + ci.static_cycles >= 1.0;
}

// The bubble letters of an instruction's culprits (dynamic first), each once.
std::string culprit_letters(const CalcInstruction& ci) {
    std::string letters;
    for (const auto& c : ci.culprits)
        if (letters.find(stall_cause_letter(c.cause)) == std::string::npos) letters += stall_cause_letter(c.cause);
    return letters;
}

std::string culprit_column(const CalcInstruction& ci) {
    std::string out;
    for (const auto& c : ci.culprits) {
        if (!c.instruction) continue;
        std::string item = std::string(1, stall_cause_letter(c.cause)) + "@" + hex(*c.instruction);
        if (out.find(item) == std::string::npos) out += (out.empty() ? "" : " ") + item;
    }
    return out;
}

// "1.2M" or, for a range, "0.8M-3.5M".
std::string executions_text(double point, double lo, double hi, bool ranged) {
    if (!ranged) return count_text(point);
    return count_text(lo) + "-" + count_text(hi);
}

std::string share(std::uint64_t part, std::uint64_t whole) {
    return whole ? fmt("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : std::string("0%");
}

void render_loops(std::ostringstream& o, const CalcProcedure& p) {
    for (const auto& b : p.branches)
        if (b.anchored)
            o << "*** Branch at " << hex(b.jump) << ": taken in " << b.taken << " of " << b.snapshots
              << " register snapshots (" << fmt("%.1f%%", 100.0 * b.taken / b.snapshots)
              << (b.median_of_positions ? ", the median of its pcs' shares: they disagree" : "")
              << "): its edges' counts are measured\n";
    for (const auto& w : p.switches)
        if (w.anchored)
            o << "*** Jump table at " << hex(w.jump) << ": " << w.cases.size() << " cases split by the index on "
              << w.snapshots << " register snapshots: their counts are measured\n";
        else if (!w.undecided.empty())
            o << "*** Jump table at " << hex(w.jump) << ": " << w.snapshots << " register snapshots cannot decide its "
              << w.cases.size() << " cases: " << w.undecided << "\n";
    for (const auto& l : p.loops) {
        if (l.samples == 0) continue;
        o << "*** Loop at " << hex(l.header) << " (depth " << l.depth << ", " << l.blocks << " blocks, " << l.samples
          << " samples): ";
        if (l.anchored && l.per_outer_iteration > 0) {
            o << count_text(l.iterations) << " iterations (" << count_text(l.iterations_min) << "-"
              << count_text(l.iterations_max) << "), measured through its outer loop: " << l.induction
              << " steps " << l.step << " at " << hex(l.step_address) << " and nothing else in the outer loop "
              << "writes it, " << count_text(l.per_outer_iteration) << " iterations per outer iteration\n";
        } else if (l.anchored && !l.recounted.empty()) {
            o << count_text(l.iterations) << " iterations, measured: " << l.recounted << "\n";
        } else if (l.anchored) {
            o << count_text(l.iterations) << " iterations (" << count_text(l.iterations_min) << "-"
              << count_text(l.iterations_max) << "), measured: " << l.induction << " steps " << l.step << " at "
              << hex(l.step_address) << ", " << count_text(l.iterations_per_second) << " iterations/s over "
              << l.pairs.used << " pairs of register snapshots\n";
        } else {
            o << "not measured: " << l.why_not;
            if (!l.induction.empty()) o << " (induction register " << l.induction << ", step " << l.step << ")";
            if (!l.load_chain.empty()) o << "; load chain: " << l.load_chain;
            if (!l.trip_starts.empty()) o << "; " << l.trip_starts;
            else if (l.trip_length > 0)
                o << "; its trips run " << count_text(l.trip_length) << " iterations to the bound its exit compares "
                  << l.induction << " with: its count is its entries times that";
            if (l.from_region)
                o << "; estimated with the leaves it calls as one region: their samples and its over "
                  << fmt("%.1f", l.region_best_cycles) << " best-case cycles an iteration";
            o << "\n";
        }
        for (const auto& c : l.counters)
            o << "***   Block at " << hex(c.block) << ": " << count_text(c.executions) << " executions ("
              << count_text(c.executions_min) << "-" << count_text(c.executions_max) << "): " << c.reg
              << " steps " << c.step << " at " << hex(c.step_address)
              << " and nothing else in the loop writes it, so its snapshots measure "
              << fmt("%.4f", c.per_iteration) << " executions per iteration of the loop\n";
    }
}

std::string source_text(const CalcInstruction& ci) {
    if (ci.file.empty()) return "";
    return std::filesystem::path(ci.file).filename().string() + ":" + std::to_string(ci.line);
}

// The event, its period in cycles, the machine model and the skid.
void render_header(std::ostringstream& o, const CalcReport& r) {
    o << "Event " << r.event << ", period " << r.period << (is_clock_event(r.event) ? " ns" : "") << " = "
      << fmt("%.0f", r.period_cycles) << " cycles per sample";
    if (is_clock_event(r.event))
        o << " at " << fmt("%.1f", r.cpu_mhz) << " MHz (clock rate from " << r.clock_source
          << ").\nNo hardware cycle counter: cycles are samples x period x clock rate, so executions and CPI\n"
             "scale with that clock rate; ranges allow it " << fmt("%.1f", kClockMargin) << "x either way.";
    o << "\nMachine model " << r.machine << " (" << r.machine_source << ");\nsamples land "
      << (r.sample_skid == 0   ? std::string("on the instruction that")
          : r.sample_skid == 1 ? std::string("one instruction after the one that")
                               : std::to_string(r.sample_skid) + " instructions after the one that")
      << " kept retirement waiting (timer interrupts\non this core), and Min/CPI are charged the same way.\n";
}

// --summary of named procedures: Figure 4 for each.
void render_procedure_summaries(std::ostringstream& o, const CalcReport& r) {
    for (const auto& p : r.procedures) {
        o << "\n" << escape_for_terminal(p.name) << "  (" << escape_for_terminal(p.image) << ")\n";
        o << "*** Counts: " << share(p.anchored_samples, p.samples) << " of the samples measured by register "
          << "progress, " << share(p.ranged_samples, p.samples) << " on ranges (the samples cannot decide)\n";
        render_summary(o, p.stalls, r.event_samples);
    }
}

// --summary --all: a line per procedure, then Figure 4 per image.
void render_summary_table(std::ostringstream& o, const CalcReport& r) {
    o << "\n" << r.procedures.size() << " procedures, " << r.analyzed_bytes << " bytes of code analyzed in "
      << fmt("%.2f", r.analysis_seconds) << " s\n\n";
    char head[200];
    std::snprintf(head, sizeof head, "%9s %14s %8s %8s %7s  %s\n", "Samples", "Calls (est.)", "Best CPI", "CPI",
                  "Classes", "Procedure (image)");
    o << head;
    for (const auto& p : r.procedures) {
        char line[160];
        std::snprintf(line, sizeof line, "%9" PRIu64 " %14s %8.2f %8s %7u  ", p.samples,
                      calls_text(p).c_str(), p.best_cpi,
                      p.actual_cpi ? fmt("%.2f", *p.actual_cpi).c_str() : "-", p.frequency_classes);
        o << line << escape_for_terminal(p.name) << (p.missing_edges ? " [missing edges]" : "") << "  ("
          << escape_for_terminal(std::filesystem::path(p.image).filename().string()) << ")\n";
    }
    for (const auto& im : r.images) {
        o << "\nImage " << escape_for_terminal(im.image) << " (" << im.procedures << " procedures)\n";
        render_summary(o, im.stalls, r.event_samples);
    }
}

// What the bubbles and their letters mean.
void render_legend(std::ostringstream& o) {
    o << "\nBubbles above an instruction show its stall (one line per cycle per execution, at most 8)\n"
         "and every cause not ruled out; the Culprits column names the instructions behind them.\n";
    std::string legend;
    for (std::size_t c = 0; c < kStallCauses; ++c) {
        auto cause = static_cast<StallCause>(c);
        legend += std::string(legend.empty() ? "" : ", ") + stall_cause_letter(cause) + " " + stall_cause_title(cause);
        if (c == static_cast<std::size_t>(StallCause::kUnexplained)) {
            o << "Dynamic: " << legend << "\n";
            legend.clear();
        }
    }
    o << "Static:  " << legend << "\n";
}

// One instruction's line of the listing, with its stall's bubbles above it.
void render_instruction(std::ostringstream& o, const CalcInstruction& ci, std::uint64_t procedure_samples) {
    std::string text = ci.text.size() > 40 ? ci.text.substr(0, 39) + "~" : ci.text;
    std::string min = ci.best_known ? fmt("%.0f", ci.best_cycles) : "?";
    std::string cpi = ci.cpi ? fmt("%.1fcy", *ci.cpi) : "-";
    bool stalled = shows_stall(ci, procedure_samples);
    if (stalled) {
        double stall = std::max(ci.dynamic_cycles, 0.0) + ci.static_cycles;
        int lines = std::clamp(static_cast<int>(std::lround(stall)), 1, 8);
        std::string letters = culprit_letters(ci);
        for (int l = 0; l < lines; ++l) {
            o << std::string(19, ' ') << letters;
            if (l + 1 == lines) o << "  " << fmt("%.1f", stall) << " stall cycles per execution";
            o << "\n";
        }
    }
    char line[400];
    std::snprintf(line, sizeof line, "%-18s %-40s %9" PRIu64 " %5s %14s %9s %-8s %-16s %s",
                  hex(ci.address).c_str(), text.c_str(), ci.samples, min.c_str(),
                  executions_text(ci.executions, ci.executions_min, ci.executions_max,
                                  ci.executions_min != ci.executions_max).c_str(),
                  cpi.c_str(), confidence_name(ci.confidence),
                  source_text(ci).c_str(), stalled ? culprit_column(ci).c_str() : "");
    std::string ls = line;
    while (!ls.empty() && ls.back() == ' ') ls.pop_back();
    o << ls << "\n";
}

// A block's head (best case and actual CPI) and its instructions.
void render_block(std::ostringstream& o, const CalcProcedure& p, const CalcBlock& b) {
    o << "\nBlock " << b.index << " at " << hex(b.address) << " (class " << b.frequency_class << ", "
      << estimate_source_name(b.source) << (b.steady_state ? ", loop steady state" : "") << ")\n";
    o << "*** Best-case " << fmt("%.1f", b.best_cycles) << "/" << b.count << " = "
      << fmt("%.2f", b.best_cpi) << " CPI\n";
    if (b.actual_cpi)
        o << "*** Actual    " << fmt("%.1f", *b.actual_cpi * b.count) << "/" << b.count << " = "
          << fmt("%.2f", *b.actual_cpi) << " CPI  ("
          << executions_text(b.executions, b.executions_min, b.executions_max, b.ranged) << " executions, "
          << (!b.point_reason.empty() ? "a range that is a point: " + b.point_reason
              : b.ranged              ? std::string("a range: the samples cannot decide") :
                         std::string(confidence_name(b.confidence)) + " confidence")
          << ")\n";
    else
        o << "*** Actual    n/a (no executions estimated)\n";
    char head[160];
    std::snprintf(head, sizeof head, "%-18s %-40s %9s %5s %14s %9s %-8s %-16s %s\n", "Address",
                  "Instruction", "Samples", "Min", "Executions", "CPI", "Conf", "Source", "Culprits");
    o << head;
    for (std::uint32_t k = b.first; k < b.first + b.count; ++k) render_instruction(o, p.instructions[k], p.samples);
}

// DCPI Figure 2 for one procedure: its head, loops, and every block seen running.
void render_procedure(std::ostringstream& o, const CalcProcedure& p) {
    o << "\n" << escape_for_terminal(p.name) << "  (" << escape_for_terminal(p.image) << ")  " << p.samples << " samples, "
      << (calls_text(p) == "-" ? std::string("calls not estimated (its entry took no samples)")
                               : calls_text(p) + " calls (est.)")
      << ", " << p.blocks.size() << " blocks, "
      << p.frequency_classes << " frequency classes";
    if (p.jump_tables) o << ", " << p.jump_tables << " jump table" << (p.jump_tables > 1 ? "s" : "");
    o << "\n*** Procedure best-case CPI " << fmt("%.2f", p.best_cpi) << ", actual CPI "
      << (p.actual_cpi ? fmt("%.2f", *p.actual_cpi) : std::string("n/a")) << "\n";
    o << "*** Counts: " << share(p.anchored_samples, p.samples) << " of the samples measured by register progress, "
      << share(p.ranged_samples, p.samples) << " on ranges (the samples cannot decide)\n";
    if (p.entry_from_region)
        o << "*** Calls: from a loop estimated together with the leaves it calls (its samples and theirs over "
             "their best case an iteration: cycles move between a caller and its callees)\n";
    if (!p.entry_guard.empty()) o << "*** Entry: " << escape_for_terminal(p.entry_guard) << "\n";
    if (p.best_case_scale && p.best_case_excess)
        o << "*** Counts scaled by " << fmt("%.3g", *p.best_case_scale) << ": at the flow's counts its blocks' best-case "
          << "cycles were " << fmt("%.2f", *p.best_case_excess)
          << "x what its samples hold, so every count is what the samples pay for with no stall (an upper end)\n";
    render_loops(o, p);
    if (p.missing_edges) {
        o << "*** CFG is missing edges (unresolved indirect jump";
        for (auto a : p.unresolved_jumps) o << " " << hex(a);
        o << "): one frequency class per block, no propagation\n";
    }
    for (const auto& b : p.blocks) {
        if (b.samples == 0 && b.executions == 0) continue;  // never seen running
        render_block(o, p, b);
    }
}

}  // namespace

std::string render_calc_text(const CalcReport& r) {
    std::ostringstream o;
    render_header(o, r);
    if (r.summary && r.images.empty()) {
        render_procedure_summaries(o, r);
        return o.str();
    }
    if (r.summary) {
        render_summary_table(o, r);
        return o.str();
    }
    render_legend(o);
    for (const auto& p : r.procedures) render_procedure(o, p);
    return o.str();
}

namespace {

using nlohmann::json;

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json block_id_json(std::uint32_t b) {
    if (b == kEntryBlock) return "entry";
    if (b == kExitBlock) return "exit";
    return b;
}

json loop_json(const CalcLoop& l) {
    json jl = {{"header", hex(l.header)},
               {"depth", l.depth},
               {"blocks", l.blocks},
               {"samples", l.samples},
               {"induction", l.induction.empty() ? json(nullptr) : json(l.induction)},
               {"step", l.step},
               {"anchored", l.anchored}};
    if (!l.induction.empty()) jl["step_address"] = hex(l.step_address);
    if (l.anchored) {
        jl["iterations"] = l.iterations;
        jl["iterations_min"] = l.iterations_min;
        jl["iterations_max"] = l.iterations_max;
        jl["iterations_per_second"] = l.iterations_per_second;
        if (l.per_outer_iteration > 0) jl["per_outer_iteration"] = l.per_outer_iteration;
        if (!l.recounted.empty()) {
            jl["recounted"] = l.recounted;
            jl["trip_length"] = l.trip_length;
        }
    } else {
        jl["why_not"] = l.why_not;
        if (!l.load_chain.empty()) jl["load_chain"] = l.load_chain;
        if (l.trip_length > 0) jl["trip_length"] = l.trip_length;
        if (l.from_region) jl["region_best_cycles"] = l.region_best_cycles;
    }
    if (!l.counters.empty()) {
        json counters = json::array();
        for (const auto& c : l.counters)
            counters.push_back({{"block", hex(c.block)},
                                {"register", c.reg},
                                {"step", c.step},
                                {"step_address", hex(c.step_address)},
                                {"per_iteration", c.per_iteration},
                                {"executions", c.executions},
                                {"executions_min", c.executions_min},
                                {"executions_max", c.executions_max}});
        jl["counters"] = std::move(counters);
    }
    jl["pairs"] = {{"used", l.pairs.used},
                   {"other_thread", l.pairs.other_thread},
                   {"left_loop", l.pairs.left_loop},
                   {"invariant_changed", l.pairs.invariant_changed},
                   {"wrong_direction", l.pairs.wrong_direction},
                   {"too_far", l.pairs.too_far},
                   {"gap", l.pairs.gap},
                   {"outlier", l.pairs.outlier}};
    return jl;
}

json block_json(const CalcBlock& b) {
    return {{"index", b.index},
            {"address", hex(b.address)},
            {"instructions", b.count},
            {"frequency_class", b.frequency_class},
            {"samples", b.samples},
            {"executions", b.executions},
            {"executions_min", b.executions_min},
            {"executions_max", b.executions_max},
            {"ranged", b.ranged},
            {"range_point_reason", b.point_reason.empty() ? json(nullptr) : json(b.point_reason)},
            {"best_cycles", b.best_cycles},
            {"best_cpi", b.best_cpi},
            {"actual_cpi", optional_json(b.actual_cpi)},
            {"confidence", confidence_name(b.confidence)},
            {"estimate", estimate_source_name(b.source)},
            {"steady_state", b.steady_state}};
}

json culprits_json(const CalcInstruction& ci) {
    json culprits = json::array();
    for (const auto& c : ci.culprits) {
        json jc = {{"cause", c.cause == StallCause::kStaticDivider ? "divider" : stall_cause_name(c.cause)},
                   {"kind", is_dynamic(c.cause) ? "dynamic" : "static"},
                   {"cycles_min", c.cycles_min},
                   {"cycles_max", c.cycles_max}};
        if (c.instruction) jc["instruction"] = hex(*c.instruction);
        culprits.push_back(std::move(jc));
    }
    return culprits;
}

json instruction_json(const CalcInstruction& ci, std::uint32_t block) {
    json ji = {{"address", hex(ci.address)},
               {"block", block},
               {"instruction", ci.text},
               {"samples", ci.samples},
               {"best_cycles", ci.best_known ? json(ci.best_cycles) : json(nullptr)},
               {"executions", ci.executions},
               {"executions_min", ci.executions_min},
               {"executions_max", ci.executions_max},
               {"cpi", optional_json(ci.cpi)},
               {"confidence", confidence_name(ci.confidence)}};
    if (!ci.file.empty()) ji["source"] = {{"file", ci.file}, {"line", ci.line}};
    ji["static_cycles"] = ci.static_cycles;
    ji["dynamic_cycles"] = ci.dynamic_cycles;
    ji["culprits"] = culprits_json(ci);
    return ji;
}

json edges_json(const CalcProcedure& p) {
    json edges = json::array();
    for (const auto& e : p.edges)
        edges.push_back({{"from", block_id_json(e.from)},
                         {"to", block_id_json(e.to)},
                         {"kind", edge_kind_name(e.kind)},
                         {"frequency_class", e.frequency_class},
                         {"executions", e.executions}});
    return edges;
}

// One procedure's object of the ecpi.calc schema.
json procedure_json(const CalcReport& r, const CalcProcedure& p) {
    json jp = {{"name", p.name},
               {"image", p.image},
               {"build_id", p.build_id},
               {"start", hex(p.start)},
               {"end", hex(p.end)},
               {"samples", p.samples},
               {"invocations", calls_text(p) == "-" ? json(nullptr) : json(p.invocations)},
               {"best_cpi", p.best_cpi},
               {"actual_cpi", optional_json(p.actual_cpi)},
               {"frequency_classes", p.frequency_classes},
               {"missing_edges", p.missing_edges},
               {"jump_tables", p.jump_tables},
               {"anchored_samples", p.anchored_samples},
               {"ranged_samples", p.ranged_samples},
               {"best_case_scale", optional_json(p.best_case_scale)},
               {"best_case_excess", optional_json(p.best_case_excess)},
               {"summary", summary_json(p.stalls, r.event_samples)}};
    json loops = json::array();
    for (const auto& l : p.loops) loops.push_back(loop_json(l));
    jp["loops"] = std::move(loops);
    json branches = json::array();
    for (const auto& b : p.branches)
        branches.push_back({{"jump", hex(b.jump)}, {"taken", b.taken}, {"snapshots", b.snapshots}, {"anchored", b.anchored},
                            {"median_of_positions", b.median_of_positions}});
    jp["branches"] = std::move(branches);
    json timed = json::array();
    for (const auto& b : p.timed_branches)
        timed.push_back({{"jump", hex(b.jump)}, {"taken", b.taken}, {"snapshots", b.snapshots}});
    jp["timed_branches"] = std::move(timed);
    json switches = json::array();
    for (const auto& w : p.switches) {
        json cases = json::array();
        for (const auto& c : w.cases) cases.push_back({{"target", hex(c.target)}, {"snapshots", c.snapshots}});
        switches.push_back({{"jump", hex(w.jump)}, {"cases", std::move(cases)}, {"snapshots", w.snapshots},
                            {"anchored", w.anchored},
                            {"undecided", w.undecided.empty() ? json(nullptr) : json(w.undecided)}});
    }
    jp["switches"] = std::move(switches);
    json unresolved = json::array();
    for (auto a : p.unresolved_jumps) unresolved.push_back(hex(a));
    jp["unresolved_jumps"] = std::move(unresolved);
    json blocks = json::array();
    json insns = json::array();
    for (const auto& b : p.blocks) {
        blocks.push_back(block_json(b));
        for (std::uint32_t k = b.first; k < b.first + b.count; ++k) insns.push_back(instruction_json(p.instructions[k], b.index));
    }
    jp["blocks"] = std::move(blocks);
    jp["instructions"] = std::move(insns);
    jp["edges"] = edges_json(p);
    return jp;
}

// Everything of the ecpi.calc document but the procedures (an empty list).
nlohmann::json calc_json_shell(const CalcReport& r) {
    using nlohmann::json;
    json j = {{"schema", "ecpi.calc"},
              {"version", 2},
              {"database", r.database},
              {"epoch", r.epoch},
              {"event", r.event},
              {"period", r.period},
              {"period_cycles", r.period_cycles},
              {"cpu_mhz", r.cpu_mhz},
              {"clock_source", r.clock_source},
              {"hardware_cycles", r.event == "cycles"},
              {"machine", r.machine},
              {"machine_source", r.machine_source},
              {"sample_skid", r.sample_skid},
              {"summary", r.summary},
              {"analysis_seconds", r.analysis_seconds},
              {"analyzed_bytes", r.analyzed_bytes}};
    j["procedures"] = json::array();
    json images = json::array();
    for (const auto& im : r.images)
        images.push_back({{"image", im.image},
                          {"build_id", im.build_id},
                          {"procedures", im.procedures},
                          {"summary", summary_json(im.stalls, r.event_samples)}});
    j["images"] = std::move(images);
    j["event_samples"] = r.event_samples;
    j["warnings"] = r.warnings;
    return j;
}

}  // namespace

nlohmann::json render_calc_json(const CalcReport& r) {
    nlohmann::json j = calc_json_shell(r);
    auto& procs = j["procedures"];
    for (const auto& p : r.procedures) procs.push_back(procedure_json(r, p));
    return j;
}

void write_calc_json(const CalcReport& r, std::ostream& out) {
    // The same text as dump_document(render_calc_json(r)), one procedure at a time:
    // a whole image's procedures as one tree took 400 MB and a third of
    // `calc --all`'s time.
    const std::string text = dump_document(calc_json_shell(r));
    const std::string marker = "\n  \"procedures\": []";
    auto at = text.find(marker);
    if (at == std::string::npos || r.procedures.empty()) {
        out << text;
        return;
    }
    out.write(text.data(), static_cast<std::streamsize>(at));
    out << "\n  \"procedures\": [";
    bool first = true;
    for (const auto& p : r.procedures) {
        std::string one = procedure_json(r, p).dump(2);
        out << (first ? "\n    " : ",\n    ");
        first = false;
        std::size_t from = 0;
        for (auto nl = one.find('\n'); nl != std::string::npos; nl = one.find('\n', from)) {
            out.write(one.data() + from, static_cast<std::streamsize>(nl + 1 - from));
            out << "    ";
            from = nl + 1;
        }
        out.write(one.data() + from, static_cast<std::streamsize>(one.size() - from));
    }
    out << "\n  ]";
    const std::size_t rest = at + marker.size();
    out.write(text.data() + rest, static_cast<std::streamsize>(text.size() - rest));
}

}  // namespace ecpi::analyze
