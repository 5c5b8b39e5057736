// ecpi paths record / import / --branch. See paths_record.h.
#include "paths_record.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>

#include "ecpi/analyze/paths/branch_paths.h"
#include "ecpi/analyze/paths/branch_paths_report.h"
#include "ecpi/analyze/symbols/debug_info.h"
#include "ecpi/analyze/paths/perf_script.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/loader/memtrace.h"
#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/probe_stack_samples.h"
#include "ecpi/store/branch_paths.h"

namespace ecpi::cli {
namespace {

namespace fs = std::filesystem;

// The code map of the program's own image, opened once the runtime says
// where it was loaded (its first module is the main program).
struct MainImage {
    std::unique_ptr<analyze::PathCodeMap> code;
    std::string path;
    std::string build_id;
    std::uint64_t start = 0, end = 0, base = 0;  // where it was loaded (LoadedModule)
};

Result<void> open_main_image(const std::vector<loader::LoadedModule>& modules, MainImage& image,
                             analyze::PathRecordDecoder& decoder) {
    if (modules.empty() || modules[0].path.empty())
        return Error("the runtime did not say where the program was loaded (no module 0)");
    const auto& m = modules[0];
    ECPI_ASSIGN_OR_RETURN(image.code, analyze::open_path_code_map(m.path, analyze::BlockSource::kInstrumented));
    image.path = m.path;
    image.start = m.start, image.end = m.end, image.base = m.base;
    auto id = analyze::read_build_id(m.path);
    image.build_id = id.ok() ? *id : "";
    decoder.set_image(m.start, m.end, m.base);
    return ok();
}

// Forwards to the code map once it exists (the cutter is made before the run).
class LateCodeMap : public analyze::PathCodeMap {
public:
    explicit LateCodeMap(MainImage& image) : image_(image) {}
    const analyze::PathProcedure* procedure_at(std::uint64_t address) override {
        return image_.code && address ? image_.code->procedure_at(address) : nullptr;
    }

private:
    MainImage& image_;
};

void print_report(const store::BranchPathProfile& profile, std::size_t limit, Format format, const std::string& saved) {
    analyze::BranchPathsReportOptions options;
    options.limit = limit;
    auto debug = analyze::DebugInfo::open(profile.image);
    auto doc = analyze::branch_paths_report_json(profile, options, debug.ok() ? &*debug : nullptr, {});
    if (!saved.empty()) doc["saved"] = saved;
    std::cout.flush();
    if (format == Format::kJson) {
        std::cout << dump_document(doc) << "\n";
    } else {
        std::cout << analyze::render_branch_paths_text(doc);
        if (!saved.empty()) std::cout << "Saved to " << saved << " (ecpi paths --branch to read it again)\n";
    }
}

std::string save(const std::string& database, const store::BranchPathProfile& profile) {
    auto db = unwrap(store::Database::open(database, store::Database::Mode::kCreate));
    return unwrap(store::save_branch_paths(db, profile)).string();
}

void add_recording_notes(store::BranchPathProfile& profile, const loader::MemtraceRunResult& r) {
    if (r.dropped_records)
        profile.notes.push_back(std::to_string(r.dropped_records) + " block records were dropped (ecpi stopped reading)");
    if (r.threads_without_ring)
        profile.notes.push_back(std::to_string(r.threads_without_ring) + " threads were not recorded (more threads than rings)");
    if (r.producer_stall_seconds > 0.01)
        profile.notes.push_back("the program waited " + std::to_string(r.producer_stall_seconds) +
                                " s for ring space (taken out of the paths' times, but the run took that much longer, and a program "
                                "with several threads runs differently; try a smaller --sample)");
    if (profile.occurrences == 0)
        profile.notes.push_back("no complete path was recorded: the program ran fewer block entries than one gap "
                                "between bursts, or its bursts were too short (try --sample 1/1 or a longer --burst)");
}

// The program's pc samples (--pc-hz): a cpu-clock event per CPU, pc only,
// for the program and the threads it starts; the cutter gets those that
// fall in its image (PathCutter::pc_sample). Without them (perf events not
// allowed here) the regular mixes are split by their stamps, and a note
// says why.
class PcSamples {
public:
    void open(std::uint32_t pid, std::uint64_t hz, std::vector<std::string>& notes) {
        if (hz == 0) return;
        auto cpus = loader::online_cpus();
        auto sampler = cpus.ok() ? loader::StackSampler::open(pid, *cpus, 1'000'000'000 / hz, 64, false)
                                 : Result<loader::StackSampler>(cpus.error());
        if (!sampler.ok()) {
            notes.push_back("the program's pc was not sampled (" + sampler.error().message() +
                            "): a regular mix's paths are split by their stamps; allow perf events "
                            "(kernel.perf_event_paranoid) or run as root");
            return;
        }
        sampler_.emplace(std::move(*sampler));
    }
    void drain(const MainImage& image, analyze::PathCutter& cutter) {
        if (!sampler_) return;
        sampler_->drain([&](const std::vector<std::uint64_t>& chain) {
            const std::uint64_t pc = chain[0];
            if (image.code && pc >= image.start && pc < image.end) cutter.pc_sample(pc - image.base);
        });
    }
    void note_lost(std::vector<std::string>& notes) const {
        if (sampler_ && sampler_->lost_records())
            notes.push_back(std::to_string(sampler_->lost_records()) + " of the program's pc samples were lost (ring full)");
    }

private:
    std::optional<loader::StackSampler> sampler_;
};

}  // namespace

int run_paths_record(const PathsRecordArgs& args) {
    if (args.command.empty()) throw UsageError{"paths record needs a command: ecpi paths record [OPTIONS] -- COMMAND [ARGS...]"};
    if (args.source == "lbr") {
        unwrap(loader::check_lbr_support());
        // This machine has last-branch records: perf records them (ecpi
        // does not drive the PMU's branch stack itself), ecpi imports them.
        throw RuntimeError{"last-branch records are recorded with perf: 'perf record -j any,u -e cycles:u -o lbr.data -- COMMAND', "
                           "'perf script -i lbr.data -F ip,brstack > lbr.txt', then 'ecpi paths import --perf-script lbr.txt --image BINARY'"};
    }
    const std::uint64_t sample = parse_ratio(args.sample, "--sample");
    loader::MemtraceRunOptions o;
    o.argv = args.command;
    o.features = ECPI_RT_FEATURE_PATHS;
    o.window = args.burst;
    o.off_mean = sample == 1 ? 0 : args.burst * (sample - 1);
    o.seed = args.seed.value_or(std::random_device{}() | 1);

    MainImage image;
    LateCodeMap code(image);
    analyze::PathCutter cutter(code, 0);
    analyze::PathRecordDecoder decoder(cutter);
    PcSamples pc_samples;
    std::vector<std::string> sampling_notes;
    o.on_runtime_ready = [&](const loader::RuntimeStart& start) -> Result<void> {
        cutter.set_block_cost(double(start.block_cost_ticks));
        ECPI_RETURN_IF_ERROR(open_main_image(start.modules, image, decoder));
        pc_samples.open(start.pid, args.pc_hz, sampling_notes);
        return ok();
    };
    auto r = unwrap(loader::run_memtrace(o, [&](std::uint32_t ring, std::span<const ecpi_rt_record> recs) {
        pc_samples.drain(image, cutter);
        return decoder.feed(ring, recs);
    }, stop_requested_by_signal()));
    pc_samples.drain(image, cutter);
    if (!r.runtime_active) {
        if (!r.runtime_error.empty()) throw RuntimeError{r.runtime_error};
        throw RuntimeError{"'" + args.command[0] + "' is not built with ecpi's runtime (no block entry was recorded): build it with "
                           "'clang $(ecpi flags paths) ...'"};
    }
    store::BranchPathProfile profile;
    profile.source = "instrumented";
    profile.image = image.path;
    profile.build_id = image.build_id;
    profile.tick_unit = "tsc";
    profile.ticks_per_ns = r.tsc_ticks_per_ns;
    profile.rate_source = "TSC against CLOCK_MONOTONIC over the run";
    profile.block_cost_ticks = double(r.block_cost_ticks);
    profile.sample_every = sample;
    profile.burst = args.burst;
    profile.command = args.command;
    cutter.finish(profile);
    add_recording_notes(profile, r);
    pc_samples.note_lost(sampling_notes);
    profile.notes.insert(profile.notes.end(), sampling_notes.begin(), sampling_notes.end());
    const std::string saved = args.no_save ? "" : save(args.database, profile);
    print_report(profile, args.limit, args.format, saved);
    if (int code = loader::exit_code_of(r.exit.wait_status); code != 0) {
        std::cerr << "ecpi paths record: the program " << loader::describe_wait_status(r.exit.wait_status) << "\n";
        return kExitRuntimeError;
    }
    return kExitOk;
}

int run_paths_import(const PathsImportArgs& args) {
    if (args.perf_script.empty() || args.image.empty())
        throw UsageError{"paths import needs --perf-script FILE and --image BINARY"};
    if (args.cpu_ghz < 0 || args.cpu_ghz > 100) throw UsageError{"--cpu-ghz takes the recording machine's clock in GHz (0: unknown)"};
    struct stat st {};
    if (::stat(args.perf_script.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        throw RuntimeError{args.perf_script + " is not a regular file: give the text 'perf script -F ip,brstack' printed"};
    constexpr std::uint64_t kMaxScriptBytes = 4ull << 30;
    if (std::uint64_t(st.st_size) > kMaxScriptBytes)
        throw RuntimeError{args.perf_script + " is larger than 4 GiB: cut it (perf script --time) and import the parts"};
    std::ifstream in(args.perf_script);
    if (!in) throw RuntimeError{"cannot open " + args.perf_script + ": " + std::strerror(errno)};
    auto code = unwrap(analyze::open_path_code_map(args.image, analyze::BlockSource::kEveryBlock));
    analyze::PathCutter cutter(*code, 0);
    std::uint64_t without_cycles = 0, stacks = 0;
    auto stats = unwrap(analyze::parse_perf_script_brstack(in, [&](const analyze::LbrSample& s) {
        if (analyze::feed_lbr_sample(cutter, *code, s, args.load_bias, 0)) stacks++;
        else without_cycles++;
    }));
    store::BranchPathProfile profile;
    profile.source = "lbr";
    profile.image = fs::absolute(args.image).string();
    auto id = analyze::read_build_id(args.image);
    profile.build_id = id.ok() ? *id : "";
    profile.tick_unit = "cycles";
    profile.ticks_per_ns = args.cpu_ghz;
    profile.rate_source = args.cpu_ghz > 0 ? "--cpu-ghz" : "";
    profile.command = {"perf script", args.perf_script};
    cutter.finish(profile);
    for (const auto& w : stats.warnings) profile.notes.push_back(args.perf_script + ": " + w);
    if (without_cycles)
        profile.notes.push_back(std::to_string(without_cycles) + " of " + std::to_string(stats.samples) +
                                " branch stacks had no cycle counts and were left out (the CPU did not record them)");
    if (stacks == 0)
        throw RuntimeError{args.perf_script + ": no branch stack with cycle counts (" + std::to_string(stats.samples) +
                           " samples): these records cannot time paths"};
    const std::string saved = save(args.database, profile);
    print_report(profile, args.limit, args.format, saved);
    return kExitOk;
}

int run_branch_report(const BranchReportArgs& args) {
    auto rank = analyze::parse_branch_path_rank(args.rank);
    if (!rank.ok()) throw UsageError{rank.error().message()};
    auto latest = [&](const std::string& database, const std::string& epoch) {
        auto db = unwrap(store::Database::open(database, store::Database::Mode::kReadOnly));
        auto files = unwrap(store::list_branch_paths(db, epoch));
        if (files.empty())
            throw RuntimeError{database + " holds no branch paths" + (epoch.empty() ? "" : " in epoch " + epoch) +
                               ": record some with 'ecpi paths record -o " + database + " -- COMMAND'"};
        return files.back();
    };
    const fs::path file = args.file.empty() ? latest(args.database, args.epoch) : fs::path(args.file);
    auto profile = unwrap(store::read_branch_paths(file));
    std::optional<store::BranchPathProfile> other;
    analyze::BranchPathsComparison compare;
    if (!args.compare.empty()) {
        std::error_code ec;
        fs::path other_file = fs::is_directory(args.compare, ec) ? latest(args.compare, "") : fs::path(args.compare);
        other = unwrap(store::read_branch_paths(other_file));
        compare.other = &*other;
        compare.other_name = other_file.string();
        compare.top = args.compare_top;
    }
    analyze::BranchPathsReportOptions options;
    options.rank = *rank;
    options.limit = args.limit;
    options.procedure = args.procedure;
    // Source lines only from the very binary that was recorded.
    std::optional<analyze::DebugInfo> debug;
    auto id = analyze::read_build_id(profile.image);
    if (id.ok() && *id == profile.build_id) {
        auto d = analyze::DebugInfo::open(profile.image);
        if (d.ok()) debug.emplace(std::move(*d));
    } else {
        profile.notes.push_back(profile.image + " is gone or was rebuilt since the recording: no source lines");
    }
    auto doc = analyze::branch_paths_report_json(profile, options, debug ? &*debug : nullptr, compare);
    doc["file"] = file.string();
    if (args.format == Format::kJson) std::cout << dump_document(doc) << "\n";
    else std::cout << analyze::render_branch_paths_text(doc);
    return kExitOk;
}

}  // namespace ecpi::cli
