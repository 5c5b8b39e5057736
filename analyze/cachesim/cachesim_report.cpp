// The `ecpi cachesim` report (include/ecpi/analyze/cachesim/cachesim_report.h).
#include "ecpi/analyze/cachesim/cachesim_report.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

#include "ecpi/analyze/cachesim/data_symbols.h"
#include "ecpi/analyze/cachesim/set_sampling.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/analyze/text_table.h"

namespace ecpi::analyze {

namespace {

using detail::format;

// The DWARF line table of a whole file, as sorted rows. Read here rather
// than through DebugInfo: clang emits no .debug_aranges, and elfutils
// 0.188's address-to-CU lookup then finds no unit for clang's code.
struct LineRow {
    std::uint64_t address = 0;
    std::uint32_t file = 0;  // index into LineTable::files
    int line = 0;
    bool end_sequence = false;
};
struct LineTable {
    std::vector<LineRow> rows;
    std::vector<std::string> files;
    // The row covering `address`: the last row at or before it, unless that
    // ends a sequence.
    const LineRow* find(std::uint64_t address) const {
        auto it = std::upper_bound(rows.begin(), rows.end(), address,
                                   [](std::uint64_t a, const LineRow& r) { return a < r.address; });
        if (it == rows.begin()) return nullptr;
        --it;
        return it->end_sequence || it->line <= 0 ? nullptr : &*it;
    }
};

LineTable read_line_table(const std::string& path) {
    LineTable t;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return t;
    struct stat st;
    Dwarf* dw = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? dwarf_begin(fd, DWARF_C_READ) : nullptr;
    if (!dw) {
        ::close(fd);
        return t;
    }
    std::map<std::string, std::uint32_t> file_ids;
    Dwarf_Off off = 0, next = 0;
    std::size_t header = 0;
    while (dwarf_nextcu(dw, off, &next, &header, nullptr, nullptr, nullptr) == 0 && t.rows.size() < 50'000'000) {
        Dwarf_Die cu;
        Dwarf_Lines* lines = nullptr;
        std::size_t n = 0;
        if (dwarf_offdie(dw, off + header, &cu) && dwarf_getsrclines(&cu, &lines, &n) == 0) {
            // A unit's rows name their files by the same few pointers (its
            // file table): each pointer is looked up once, not each row's
            // name in the map of strings (SQLite's amalgamation has 214k rows).
            std::unordered_map<const char*, std::uint32_t> unit_files;
            for (std::size_t i = 0; i < n; i++) {
                Dwarf_Line* l = dwarf_onesrcline(lines, i);
                Dwarf_Addr a = 0;
                int line = 0;
                bool end = false;
                if (!l || dwarf_lineaddr(l, &a) != 0) continue;
                dwarf_lineno(l, &line);
                dwarf_lineendsequence(l, &end);
                const char* src = dwarf_linesrc(l, nullptr, nullptr);
                auto [known, unseen] = unit_files.try_emplace(src, 0);
                if (unseen) {
                    auto [it, fresh] = file_ids.try_emplace(src ? src : "", std::uint32_t(t.files.size()));
                    if (fresh) t.files.push_back(it->first);
                    known->second = it->second;
                }
                t.rows.push_back({a, known->second, line, end});
            }
        }
        off = next;
    }
    dwarf_end(dw);
    ::close(fd);
    // Stable: an end_sequence row and the next sequence's first row may share an address; the later one wins.
    // (One unit's rows usually come sorted already: then nothing moves.)
    auto before = [](const LineRow& a, const LineRow& b) {
        return a.address < b.address || (a.address == b.address && a.end_sequence && !b.end_sequence);
    };
    if (!std::is_sorted(t.rows.begin(), t.rows.end(), before)) std::stable_sort(t.rows.begin(), t.rows.end(), before);
    return t;
}

// What one ELF file says about data and code addresses.
struct ModuleInfo {
    std::uint64_t bias = 0;
    std::optional<SymbolTable> functions;
    std::vector<DataSymbol> data;  // STT_OBJECT/STT_TLS with a size, sorted
    LineTable lines;
};

// Address -> module -> procedure, source line, data symbol.
class AddressNames {
public:
    explicit AddressNames(const std::vector<TraceModule>& modules) : modules_(modules) {}

    struct Code {
        std::string procedure = "[unknown]";
        std::string module;
        std::string file;
        int line = 0;
    };
    Code code(std::uint64_t pc) {
        Code c;
        const TraceModule* m = module_of(pc);
        if (!m) return c;
        c.module = m->path;
        ModuleInfo& info = load(*m);
        std::uint64_t vaddr = pc - info.bias;
        if (info.functions) {
            if (const Symbol* s = info.functions->lookup(vaddr)) c.procedure = s->name;
            else c.procedure = format("[%s+0x%llx]", image_label(m->path).c_str(), (unsigned long long)vaddr);
        } else {
            c.procedure = format("[%s+0x%llx]", image_label(m->path).c_str(), (unsigned long long)vaddr);
        }
        if (const LineRow* row = info.lines.find(vaddr)) {
            c.file = info.lines.files[row->file];
            c.line = row->line;
        }
        return c;
    }
    // The global or static variable holding `address`, or "".
    std::string data(std::uint64_t address, std::string* module) {
        const TraceModule* m = module_of(address);
        if (!m) return "";
        *module = m->path;
        ModuleInfo& info = load(*m);
        std::uint64_t vaddr = address - info.bias;
        auto it = std::upper_bound(info.data.begin(), info.data.end(), vaddr,
                                   [](std::uint64_t a, const DataSymbol& s) { return a < s.start; });
        if (it == info.data.begin()) return format("[%s data]", image_label(m->path).c_str());
        --it;
        if (vaddr < it->end) return it->name;
        return format("[%s data]", image_label(m->path).c_str());
    }

private:
    static std::string image_label(const std::string& p) { return detail::image_label(p); }
    const TraceModule* module_of(std::uint64_t a) const {
        for (const auto& m : modules_)
            if (a >= m.start && a < m.end) return &m;
        return nullptr;
    }
    ModuleInfo& load(const TraceModule& m) {
        auto it = info_.find(m.path);
        if (it != info_.end()) return it->second;
        ModuleInfo info;
        std::optional<std::uint64_t> delta;
        read_elf_data(m.path, info.data, delta);
        info.bias = module_bias(m, delta);
        auto table = SymbolTable::from_elf(m.path);
        if (table.ok()) info.functions = std::move(table).value();
        info.lines = read_line_table(m.path);
        return info_.emplace(m.path, std::move(info)).first->second;
    }
    const std::vector<TraceModule>& modules_;
    std::map<std::string, ModuleInfo> info_;
};

const char* allocator_name(std::uint32_t a) {
    switch (a) {
    case ECPI_RT_ALLOC_MALLOC: return "malloc";
    case ECPI_RT_ALLOC_CALLOC: return "calloc";
    case ECPI_RT_ALLOC_REALLOC: return "realloc";
    case ECPI_RT_ALLOC_NEW: return "new";
    case ECPI_RT_ALLOC_NEW_ARRAY: return "new[]";
    case ECPI_RT_ALLOC_ALIGNED: return "aligned_alloc";
    }
    return "?";
}

const char* kind_name(ObjectKind k) {
    switch (k) {
    case ObjectKind::kHeap: return "heap";
    case ObjectKind::kStack: return "stack";
    case ObjectKind::kStatic: return "global";
    case ObjectKind::kUnknown: return "unknown";
    }
    return "unknown";
}

// A row of a table: what it is, and its counts summed over pcs or addresses.
struct Row {
    nlohmann::json identity;
    BinCounts counts;
};

struct Scaling {
    std::vector<double> scale;       // per level: program references per simulated reference (time and set sampling)
    UnknownEstimate estimate;
    std::vector<double> alpha;       // Wood's alpha per level (0.5 when unmeasured)
    std::vector<std::string> names;  // level names
};

nlohmann::json misses_by_level(const BinCounts& c, const Scaling& s) {
    nlohmann::json m = nlohmann::json::object();
    for (std::size_t l = 0; l < s.names.size(); l++) {
        double v = l < c.levels.size() ? estimated_misses(c.levels[l], s.estimate, s.alpha[l]) * s.scale[l] : 0;
        m[s.names[l]] = std::llround(v);
    }
    return m;
}

double first_level_misses(const BinCounts& c, const Scaling& s) {
    return c.levels.empty() ? 0 : estimated_misses(c.levels[0], s.estimate, s.alpha[0]);
}

// Rows sorted by first-level misses, each with its share of all of them
// and the cumulative share (MemSpy 6.5's bottleneck ordering).
nlohmann::json table(std::vector<Row> rows, const Scaling& s, double total_first_misses, bool with_references) {
    std::sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
        return first_level_misses(a.counts, s) > first_level_misses(b.counts, s);
    });
    nlohmann::json out = nlohmann::json::array();
    double cumulative = 0;
    for (auto& r : rows) {
        double m = first_level_misses(r.counts, s);
        if (m <= 0 && !with_references) continue;
        nlohmann::json j = r.identity;
        if (with_references)
            j["references"] = std::llround(double(r.counts.levels.empty() ? 0 : r.counts.levels[0].references) * s.scale[0]);
        j["misses"] = misses_by_level(r.counts, s);
        double share = total_first_misses > 0 ? m / total_first_misses : 0;
        cumulative += share;
        j["share"] = detail::round4(100 * share);
        j["cumulative_share"] = detail::round4(100 * std::min(cumulative, 1.0));
        out.push_back(std::move(j));
    }
    return out;
}

// The level's sets in the sampled groups that references reached (all of
// its sets without set sampling; those of one turn under rotation, which
// reaches every group in turn).
std::uint64_t sampled_sets(const CacheSimulator& sim, std::size_t l) {
    if (sim.totals().set_scale <= 1) return sim.options().levels[l].sets();
    if (!sim.set_turns().empty()) return sim.options().levels[l].sets() / sim.totals().set_scale;
    std::uint64_t groups = 0, reached = 0;
    for (const auto& g : sim.set_groups()) {
        groups++;
        reached += !g.levels.empty() && g.levels[l].references > 0;
    }
    return groups ? sim.options().levels[l].sets() / groups * reached : 0;
}

// How a level was estimated: "full" (every reference), "time" (windows),
// "sets" (every reference to sampled sets, MemSpy 7.3), "time+sets" (the
// sampled sets' references in windows).
std::string level_method(const CacheSimulator& sim, bool from_sets) {
    if (from_sets) return "sets";
    const auto& t = sim.totals();
    bool timed = t.simulated < t.events;
    if (t.set_scale > 1) return timed ? "time+sets" : "sets";
    return timed ? "time" : "full";
}

bool from_sets(const CachesimReportInput& in, std::size_t l) { return in.sets && l < in.set_levels.size() && in.set_levels[l]; }

// The simulator a level's figures come from.
const CacheSimulator& source_of(const CacheSimulator& time_sim, const CachesimReportInput& in, std::size_t l) {
    return from_sets(in, l) ? *in.sets : time_sim;
}

// Under combined sampling, the share of all references that reach level l:
// the product of the levels above's local miss rates, each from its own
// simulator (the sampled sets' own share of references and of first-level
// misses can differ from the program's: tree's sampled groups took 9.9% of
// its references at 1/16, and their L1d miss rate read its L2's global
// rate 5 points off).
double reaching_share(const CacheSimulator& time_sim, const CachesimReportInput& in, std::size_t l, UnknownEstimate e) {
    double share = 1;
    for (std::size_t j = 0; j < l; j++) share *= estimate_miss_rate(source_of(time_sim, in, j), j, e).rate;
    return share;
}

// A set-sampled level below a time-sampled one: its accesses over all sets
// as the windows estimate them (set_regression_estimate).
AccessesAbove accesses_above(const CacheSimulator& time_sim, std::size_t l, const Scaling& s, const CachesimReportInput& in) {
    AccessesAbove a;
    a.references = double(time_sim.totals().events) * reaching_share(time_sim, in, l, s.estimate);
    auto above = estimate_miss_rate(time_sim, l - 1, s.estimate);
    a.relative_error = above.rate > 0 ? above.sampling_error / above.rate : std::nan("");
    const auto& c = time_sim.totals().counts.levels[l - 1];
    double misses = estimated_misses(c, s.estimate, time_sim.wood_alpha(l - 1).value_or(0.5));
    a.unknown_share = misses > 0 ? (misses - double(c.known_misses)) / misses : 1.0;
    return a;
}

SetEstimate level_estimate(const CacheSimulator& time_sim, std::size_t l, const Scaling& s, const CachesimReportInput& in) {
    const CacheSimulator& sim = source_of(time_sim, in, l);
    if (!in.sets || !from_sets(in, l) || l == 0 || from_sets(in, l - 1)) {
        auto e = estimate_miss_rate(sim, l, s.estimate);
        return {e, false, e.rate};
    }
    return set_regression_estimate(sim, l, s.estimate, accesses_above(time_sim, l, s, in));
}

nlohmann::json level_json(const CacheSimulator& time_sim, std::size_t l, const Scaling& s, const CachesimReportInput& in) {
    const CacheSimulator& sim = source_of(time_sim, in, l);
    const auto& g = sim.options().levels[l];
    const auto& c = sim.totals().counts.levels[l];
    auto estimate = level_estimate(time_sim, l, s, in);
    auto& e = estimate.estimate;
    double references = double(c.references) * s.scale[l];
    double misses = estimated_misses(c, s.estimate, s.alpha[l]) * s.scale[l];
    if (in.sets && from_sets(in, l) != from_sets(in, 0)) {
        double all = double(time_sim.totals().events);
        e.global_rate = reaching_share(time_sim, in, l, s.estimate) * e.rate;
        references = all * reaching_share(time_sim, in, l, s.estimate);
        misses = all * e.global_rate;
    }
    auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
    nlohmann::json j{{"name", g.name},
                     {"size", g.size},
                     {"ways", g.ways},
                     {"line", g.line},
                     {"method", level_method(sim, from_sets(in, l))},
                     {"references", std::llround(references)},
                     {"misses", std::llround(misses)},
                     {"miss_rate", e.rate},
                     {"bound", e.bound},
                     {"low", e.low},
                     {"high", e.high},
                     {"global_miss_rate", e.global_rate},
                     {"simulated_references", c.references},
                     {"known_misses", c.known_misses},
                     {"unknown", c.unknown},
                     {"unknown_stale_misses", c.unknown_stale_misses},
                     {"unknown_low", e.unknown_low},
                     {"unknown_high", e.unknown_high},
                     {"sampling_error", num(e.sampling_error)},
                     {"set_spread", num(e.set_spread)},
                     {"sampled_sets", sampled_sets(sim, l)},
                     {"wood_alpha", sim.wood_alpha(l) ? nlohmann::json(*sim.wood_alpha(l)) : nlohmann::json(nullptr)}};
    if (in.sets && from_sets(in, l)) {
        j["set_estimator"] = estimate.regression ? "regression" : "ratio";
        j["set_slope"] = estimate.slope;
    }
    if (sim.options().classes) {
        double misses = double(c.known_misses + c.unknown_stale_misses);
        j["classes"] = {{"compulsory", std::llround(double(c.compulsory) * s.scale[l])},
                        {"capacity", std::llround(double(c.capacity) * s.scale[l])},
                        {"conflict", std::llround(std::max(0.0, misses - double(c.compulsory + c.capacity)) * s.scale[l])}};
    }
    return j;
}

// Per pc or per object, each level's counts from its own simulator: the
// time-sampled levels from `sim`, the set-sampled ones from in.sets (which
// has every level; `sim` may hold only the levels up to its last own).
template <class Map>
Map merged_by_level(const Map& time_counts, const Map* set_counts, const CachesimReportInput& in, std::size_t levels) {
    Map out;
    for (const auto& [key, c] : time_counts) {
        BinCounts& b = out[key];
        b.levels.resize(levels);
        for (std::size_t l = 0; l < c.levels.size() && l < levels; l++)
            if (!from_sets(in, l)) b.levels[l] = c.levels[l];
    }
    if (!set_counts) return out;
    for (const auto& [key, c] : *set_counts) {
        BinCounts& b = out[key];
        b.levels.resize(levels);
        for (std::size_t l = 0; l < c.levels.size() && l < levels; l++)
            if (from_sets(in, l)) b.levels[l] = c.levels[l];
    }
    return out;
}

Scaling scaling_of(const CacheSimulator& sim, const CachesimReportInput& in) {
    Scaling s;
    s.estimate = in.estimate;
    const auto& all = in.sets ? in.sets->options().levels : sim.options().levels;
    for (std::size_t l = 0; l < all.size(); l++) {
        const CacheSimulator& src = source_of(sim, in, l);
        const auto& t = src.totals();
        s.names.push_back(all[l].name);
        s.alpha.push_back(src.wood_alpha(l).value_or(0.5));
        // (References that warmed a turn's groups were simulated, not counted.)
        double warm = t.simulated > t.warming ? double(t.simulated) / double(t.simulated - t.warming) : 1.0;
        s.scale.push_back((t.simulated ? double(t.events) / double(t.simulated) : 1.0) * double(t.set_scale) * warm);
    }
    return s;
}

}  // namespace

nlohmann::json cachesim_report_json(const CacheSimulator& sim, const CachesimReportInput& in) {
    const auto& t = sim.totals();
    Scaling s = scaling_of(sim, in);
    AddressNames names(in.modules);

    // Procedures and lines, from pcs.
    std::map<std::string, Row> procs;
    std::map<std::pair<std::string, int>, Row> lines;
    auto by_pc = merged_by_level(sim.by_pc(), in.sets ? &in.sets->by_pc() : nullptr, in, s.names.size());
    for (const auto& [pc, counts] : by_pc) {
        auto code = names.code(in.pc_is_return_address && pc > 0 ? pc - 1 : pc);
        Row& p = procs[code.procedure];
        p.identity = {{"procedure", code.procedure}, {"module", code.module}};
        p.counts.add(counts);
        // Line 0 is DWARF's "no source line" (code the compiler made up or
        // merged); such references are kept, per procedure, as line 0.
        Row& r = lines[{code.line > 0 ? code.file : code.procedure, code.line}];
        r.identity = {{"file", code.line > 0 ? code.file : ""}, {"line", code.line}, {"procedure", code.procedure}};
        r.counts.add(counts);
    }
    // Data objects: heap by allocation site, globals by symbol, stacks by thread.
    std::map<std::pair<int, std::string>, Row> objects;
    auto by_object = merged_by_level(sim.by_object(), in.sets ? &in.sets->by_object() : nullptr, in, s.names.size());
    for (const auto& [key, counts] : by_object) {
        nlohmann::json id;
        std::string name;
        if (key.kind == ObjectKind::kHeap) {
            auto site = names.code(key.id > 0 ? key.id - 1 : 0);
            name = site.procedure + (site.line > 0 ? format(" (%s:%d)", std::filesystem::path(site.file).filename().c_str(), site.line) : "");
            auto si = sim.sites().find(key.id);
            id = {{"name", "heap from " + name},
                  {"kind", "heap"},
                  {"allocation_site", {{"procedure", site.procedure}, {"file", site.file}, {"line", site.line}}}};
            if (si != sim.sites().end())
                id.update({{"allocator", allocator_name(si->second.allocator)}, {"allocations", si->second.allocations}, {"bytes", si->second.bytes}});
        } else if (key.kind == ObjectKind::kStack) {
            name = format("stack of thread %llu", (unsigned long long)key.id);
            id = {{"name", name}, {"kind", "stack"}, {"allocation_site", nullptr}};
        } else {
            std::string module;
            name = names.data(key.id, &module);
            if (name.empty()) name = in.objects_available ? "[unknown memory]" : "[heap, stack or unmapped: no allocation events from this source]";
            id = {{"name", name}, {"kind", name.front() == '[' ? "unknown" : kind_name(key.kind)}, {"allocation_site", nullptr}};
            if (!module.empty()) id["module"] = module;
        }
        Row& r = objects[{int(key.kind), id["name"].get<std::string>()}];
        r.identity = id;
        r.counts.add(counts);
    }
    const auto& first = source_of(sim, in, 0).totals().counts.levels;
    double total_first = first.empty() ? 0 : estimated_misses(first[0], s.estimate, s.alpha[0]);
    auto values = [](auto& m) {
        std::vector<Row> v;
        for (auto& [k, r] : m) v.push_back(std::move(r));
        return v;
    };

    nlohmann::json doc;
    doc["schema"] = "ecpi.cachesim";
    doc["version"] = 1;
    doc["command"] = in.command;
    doc["source"] = in.source;
    doc["model"] = "per-thread private caches, inclusive, LRU, write-allocate";
    doc["caches_source"] = in.caches_source;
    double fraction = t.events ? double(t.simulated) / double(t.events) : 1.0;
    doc["sampling"] = {{"sample", in.sample},
                       {"window", in.window},
                       {"seed", in.seed},
                       {"set_sample", in.sets ? in.sets->totals().set_scale : t.set_scale},
                       {"windows", t.windows},
                       {"streams", t.streams},
                       {"references", t.events},
                       {"simulated", t.simulated},
                       {"fraction", fraction},
                       {"set_simulated", in.sets ? in.sets->totals().simulated : 0},
                       {"set_settled_hits", in.sets ? in.sets->totals().settled_hits : 0},
                       {"unknown_estimate", std::string(unknown_estimate_name(in.estimate))}};
    nlohmann::json levels = nlohmann::json::array();
    for (std::size_t l = 0; l < s.names.size(); l++) levels.push_back(level_json(sim, l, s, in));
    doc["levels"] = levels;
    doc["procedures"] = table(values(procs), s, total_first, true);
    doc["lines"] = table(values(lines), s, total_first, true);
    doc["objects"] = table(values(objects), s, total_first, false);
    doc["program"] = in.program;
    doc["notes"] = in.notes;
    return doc;
}

// ---------------------------------------------------------------- text

namespace {

std::string human(double v) {
    if (v >= 1e9) return format("%.2fG", v / 1e9);
    if (v >= 1e6) return format("%.2fM", v / 1e6);
    if (v >= 1e4) return format("%.1fk", v / 1e3);
    return format("%.0f", v);
}

std::string pct(double fraction) { return format("%.3f%%", 100 * fraction); }

std::string size_label(std::uint64_t b) {
    if (b % (1024 * 1024) == 0) return format("%lluM", (unsigned long long)(b >> 20));
    if (b % 1024 == 0) return format("%lluK", (unsigned long long)(b >> 10));
    return format("%llu", (unsigned long long)b);
}

}  // namespace

std::string render_cachesim_text(const nlohmann::json& doc, std::size_t limit) {
    std::string out;
    const auto& sm = doc["sampling"];
    std::string cmd;
    for (const auto& a : doc["command"]) cmd += (cmd.empty() ? "" : " ") + escape_for_terminal(a.get<std::string>());
    out += "ecpi cachesim: " + (cmd.empty() ? std::string("(trace)") : cmd) + "\n";
    out += format("source %s; %s\n", doc["source"].get<std::string>().c_str(), doc["model"].get<std::string>().c_str());
    std::string caches;
    for (const auto& l : doc["levels"])
        caches += (caches.empty() ? "" : ", ") + l["name"].get<std::string>() + " " + size_label(l["size"]) + " " +
                  std::to_string(l["ways"].get<int>()) + "-way " + std::to_string(l["line"].get<int>()) + "B";
    out += "caches: " + caches + " (" + doc["caches_source"].get<std::string>() + ")\n";
    out += format("references %s, simulated %s (%.2f%%) in %llu windows of %llu; sample 1/%llu, sets 1/%llu; unknown references estimated as '%s'\n\n",
                  human(sm["references"].get<double>()).c_str(), human(sm["simulated"].get<double>()).c_str(),
                  100 * sm["fraction"].get<double>(), (unsigned long long)sm["windows"].get<std::uint64_t>(),
                  (unsigned long long)sm["window"].get<std::uint64_t>(), (unsigned long long)sm["sample"].get<std::uint64_t>(),
                  (unsigned long long)sm["set_sample"].get<std::uint64_t>(), sm["unknown_estimate"].get<std::string>().c_str());

    detail::TextTable levels;
    for (auto [h, n] : {std::pair{"level", false}, {"method", false}, {"references", true}, {"misses", true}, {"miss rate", true},
                        {"bound", true}, {"range", true}, {"of refs", true}, {"unknown", true}, {"set spread", true}})
        levels.add_column(h, n);
    for (const auto& l : doc["levels"]) {
        double sim_refs = l["simulated_references"].get<double>();
        std::string spread = l["set_spread"].is_number() && l["method"].get<std::string>().find("sets") != std::string::npos
                                 ? format("±%s of %llu sets", pct(l["set_spread"]).c_str(),
                                          (unsigned long long)l["sampled_sets"].get<std::uint64_t>())
                                 : "-";
        levels.add_row({l["name"].get<std::string>(), l["method"].get<std::string>(), human(l["references"].get<double>()),
                        human(l["misses"].get<double>()), pct(l["miss_rate"]), "±" + pct(l["bound"]),
                        "[" + pct(l["low"]) + ", " + pct(l["high"]) + "]", pct(l["global_miss_rate"]),
                        sim_refs > 0 ? pct(l["unknown"].get<double>() / sim_refs) : "-", spread});
    }
    out += levels.render();
    out += "  miss rate: misses / references reaching the level; of refs: misses / all references;\n"
           "  method: time (windows), sets (every reference to a random subset of sets, MemSpy 7.3), full;\n"
           "  bound: the estimate's range for unknown references (alpha 0..1) widened by 1.96 standard errors of the window\n"
           "  rates and, under set sampling, of the sampled sets' rates (set spread: that part alone)\n";
    for (const auto& l : doc["levels"])
        if (l.contains("classes"))
            out += format("  %s misses: compulsory %s, capacity %s, conflict %s\n", l["name"].get<std::string>().c_str(),
                          human(l["classes"]["compulsory"]).c_str(), human(l["classes"]["capacity"]).c_str(),
                          human(l["classes"]["conflict"]).c_str());

    auto rows = [&](const char* title, const nlohmann::json& arr, auto&& name_of, bool refs) {
        if (arr.empty()) return;
        out += std::string("\n") + title + "\n";
        detail::TextTable tt;
        std::vector<std::string> level_names;
        for (const auto& l : doc["levels"]) level_names.push_back(l["name"]);
        if (refs) tt.add_column("references", true);
        for (const auto& n : level_names) tt.add_column(n + " misses", true);
        tt.add_column("share", true);
        tt.add_column("cum.", true);
        tt.add_column("name", false, 80);
        std::size_t shown = 0;
        for (const auto& r : arr) {
            if (limit && shown++ >= limit) break;
            std::vector<std::string> cells;
            if (refs) cells.push_back(human(r["references"].get<double>()));
            for (const auto& n : level_names) cells.push_back(human(r["misses"][n].get<double>()));
            cells.push_back(format("%.1f%%", r["share"].get<double>()));
            cells.push_back(format("%.1f%%", r["cumulative_share"].get<double>()));
            cells.push_back(name_of(r));  // the table escapes names
            tt.add_row(cells);
        }
        out += tt.render();
    };
    rows("Procedures (by first-level misses; cum.: MemSpy's bottleneck view)", doc["procedures"],
         [](const nlohmann::json& r) { return r["procedure"].get<std::string>(); }, true);
    rows("Source lines", doc["lines"],
         [](const nlohmann::json& r) {
             if (r["line"].get<int>() == 0) return "(no line)  " + r["procedure"].get<std::string>();
             return std::filesystem::path(r["file"].get<std::string>()).filename().string() + ":" +
                    std::to_string(r["line"].get<int>()) + "  " + r["procedure"].get<std::string>();
         },
         true);
    rows("Data objects", doc["objects"],
         [](const nlohmann::json& r) {
             std::string s = r["name"].get<std::string>();
             if (r.contains("allocations")) s += format("  [%llu x %s, %s bytes]", (unsigned long long)r["allocations"].get<std::uint64_t>(),
                                                        r["allocator"].get<std::string>().c_str(), human(r["bytes"].get<double>()).c_str());
             return s;
         },
         false);
    for (const auto& n : doc["notes"]) out += "note: " + escape_for_terminal(n.get<std::string>()) + "\n";
    return out;
}

}  // namespace ecpi::analyze
