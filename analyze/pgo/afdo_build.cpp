// AutoFDO profiles from a recorded epoch: calc's flow-inferred block counts
// placed on source lines through DWARF's line table and inline tree.
// Contracts: include/ecpi/analyze/pgo/afdo.h.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/layout/layout.h"
#include "ecpi/analyze/pgo/afdo.h"
#include "ecpi/analyze/symbols/debug_info.h"

namespace ecpi::analyze {

namespace {

namespace fs = std::filesystem;

// A name clang could have written: the text format splits on ':' and blanks.
bool usable_name(const std::string& name) {
    if (name.empty() || name == "??") return false;
    return std::none_of(name.begin(), name.end(),
                        [](char c) { return c == ':' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f; });
}

// --image names a file whose build id is none of the recorded ones: a
// profile of another build would put counts on the wrong lines.
Result<void> check_build_id(const std::string& given, const std::set<std::string>& recorded, const std::string& path) {
    std::error_code ec;
    if (recorded.empty() || !fs::is_regular_file(given, ec)) return {};
    auto id = read_build_id(given);
    if (!id.ok() || id.value().empty() || recorded.contains(id.value())) return {};
    return Error(given + " has build id " + id.value() + " but the profile recorded build " + *recorded.begin() +
                 " of " + path + ": record this build again, or export with the recorded binary");
}

// The build ids recorded for the file --image names, by its absolute path
// (checked before calc: a rebuilt file at the recorded path is no longer
// the recorded image, and calc would only say it is gone).
std::set<std::string> recorded_builds(const store::EpochContents& contents, const std::string& given) {
    std::error_code ec;
    const std::string path = fs::absolute(given, ec).lexically_normal().string();
    std::set<std::string> ids;
    for (const store::ImageProfile& p : contents.profiles)
        if (!ec && p.image.path == path && !p.image.build_id.empty()) ids.insert(p.image.build_id);
    return ids;
}

// The run of calc this profile comes from: every sampled procedure of the image.
Result<CalcReport> image_calc(const store::EpochContents& contents, const AfdoOptions& options,
                              Symbolizer& symbolizer) {
    CalcOptions co;
    co.all = true;
    co.image = options.image;
    co.event = options.event;
    co.machine = options.machine;
    co.lines = false;
    co.clock_margin_in_ranges = false;  // counts alone (calc.h)
    ECPI_ASSIGN_OR_RETURN(CalcReport calc, run_calc(contents, co, symbolizer));
    if (!calc.procedures.empty()) return calc;
    if (auto gone = missing_images_note(contents, calc.event, symbolizer); !gone.empty())
        return Error("no procedures of " + options.image + " in the images that could be read: " + gone);
    return Error("no " + (calc.event.empty() ? std::string("") : calc.event + " ") + "samples in " + options.image +
                 " in epoch " + contents.epoch + ": nothing to write (check --image against `ecpi prof --by image`)");
}

// The instructions' source views, outermost frame first.
std::vector<AfdoFrame> afdo_frames(const DebugInfo& debug, std::uint64_t address) {
    std::vector<AfdoFrame> out;
    const std::vector<SourceFrame> frames = debug.frames_at(address);
    for (auto it = frames.rbegin(); it != frames.rend(); ++it)
        out.push_back({it->linkage_name, it->decl_line, it->line, it->discriminator, it->decl_file});
    return out;
}

struct FunctionInput {
    double head = 0;
    std::vector<AfdoInstruction> instructions;
};

class ProfileInputs {
public:
    ProfileInputs(const DebugInfo& debug, Symbolizer& symbolizer, store::ImageId image)
        : debug_(debug), symbolizer_(symbolizer), image_(std::move(image)) {}

    // One procedure's instructions at their blocks' counts, under the
    // DWARF subprogram they belong to (a function's split-off cold part
    // joins the function).
    void add(const CalcProcedure& p, const std::vector<double>& block_counts) {
        for (const CalcBlock& b : p.blocks) {
            const double count = b.index < block_counts.size() ? block_counts[b.index] : 0;
            if (count < 0.5) continue;  // no execution to write (and DWARF look-ups cost)
            for (std::uint32_t k = b.first; k < b.first + b.count && k < p.instructions.size(); ++k)
                add_instruction(p, p.instructions[k], count);
        }
    }

    std::map<std::string, FunctionInput>& functions() { return functions_; }
    std::uint64_t unnamed() const { return unnamed_; }

    // The function (DWARF's outermost frame: a split-off cold part is its
    // function's) an address of the image lies in; "" where none is usable.
    std::string function_at(std::uint64_t address) const {
        const std::vector<AfdoFrame> frames = afdo_frames(debug_, address);
        return !frames.empty() && usable_name(frames.front().function) ? frames.front().function : std::string();
    }

    // The indirect calls' counts (call address -> its block's count).
    std::map<std::uint64_t, double> indirect_call_counts() const {
        std::map<std::uint64_t, double> out;
        for (const IndirectCall& c : indirect_) out[c.address] = c.count;
        return out;
    }

    // Each indirect call's targets (call address -> target -> calls).
    void attach_indirect_targets(const std::map<std::uint64_t, std::map<std::string, double>>& targets) {
        for (const IndirectCall& c : indirect_)
            if (const auto it = targets.find(c.address); it != targets.end())
                functions_[c.function].instructions[c.index].indirect_targets = it->second;
    }

private:
    void add_instruction(const CalcProcedure& p, const CalcInstruction& insn, double count) {
        AfdoInstruction out;
        out.frames = afdo_frames(debug_, insn.address);
        out.count = count;
        if (out.frames.empty()) return;
        if (!std::all_of(out.frames.begin(), out.frames.end(), [](const AfdoFrame& f) { return usable_name(f.function); })) {
            ++unnamed_;
            return;
        }
        out.call_target = call_target(insn.text);
        FunctionInput& f = functions_[out.frames.front().function];
        if (insn.address == p.start && entry_of(p.start, out.frames.front().function)) f.head += count;
        if (insn.text.rfind("call", 0) == 0 && !direct_call_target(insn.text))
            indirect_.push_back({insn.address, count, out.frames.front().function, f.instructions.size()});
        f.instructions.push_back(std::move(out));
    }

    // The procedure at `start` is the function itself, not a part the
    // compiler split off (`name.cold`), whose first block is no entry.
    bool entry_of(std::uint64_t start, const std::string& name) {
        const Symbol* sym = symbolizer_.lookup(image_, start);
        return sym == nullptr || sym->linkage_name.empty() || sym->linkage_name == name;
    }

    // A direct call's callee by its symbol (PLT stubs are not functions clang compiles).
    std::string call_target(const std::string& text) {
        const auto target = direct_call_target(text);
        if (!target) return {};
        const Symbol* sym = symbolizer_.lookup(image_, *target);
        if (sym == nullptr || sym->start != *target || !usable_name(sym->linkage_name)) return {};
        return sym->linkage_name.find('@') == std::string::npos ? sym->linkage_name : std::string();
    }

    // An indirect call instruction: functions_[function].instructions[index].
    struct IndirectCall {
        std::uint64_t address = 0;
        double count = 0;
        std::string function;
        std::size_t index = 0;
    };

    const DebugInfo& debug_;
    Symbolizer& symbolizer_;
    store::ImageId image_;
    std::map<std::string, FunctionInput> functions_;
    std::vector<IndirectCall> indirect_;
    std::uint64_t unnamed_ = 0;
};

// Indirect calls' targets from the epoch's -g stacks of calc's event (none
// without -g): the callee frames above each call, their calls from their entries.
void add_indirect_targets(ProfileInputs& inputs, const store::EpochContents& contents, const CalcReport& calc,
                          const std::string& image) {
    const store::StackProfile* stacks = nullptr;
    for (const store::StackProfile& s : contents.stacks)
        if (s.event == calc.event) stacks = &s;
    if (stacks == nullptr) return;
    const std::vector<AfdoStackCall> calls =
        afdo_stack_calls(*stacks, image, calls_by_return_address(calc, image),
                         [&inputs](std::uint64_t address) { return inputs.function_at(address); });
    std::map<std::string, double> entries;
    for (const auto& [name, input] : inputs.functions()) entries[name] = input.head;
    inputs.attach_indirect_targets(afdo_call_targets(calls, entries, inputs.indirect_call_counts()));
}

// Static functions of different files under one name: clang matches by
// name, so they share one profile (their counts are merged).
std::string shared_names_warning(const std::vector<std::string>& names) {
    std::string list;
    for (std::size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > 5) list += ", ...";
    return std::to_string(names.size()) + " function names shared by static functions of different files or lines (" +
           list + "): clang matches profiles by name, so their counts are merged; build with "
           "-funique-internal-linkage-names to profile them apart";
}

}  // namespace

std::string missing_registers_warning(const store::EpochContents& contents, const std::string& event,
                                      const store::ImageId& image) {
    for (const store::RegisterProfile& r : contents.registers) {
        if (r.event != event) continue;
        for (const store::RegisterSample& s : r.samples)
            if (s.image < r.images.size() && r.images[s.image] == image) return {};
    }
    return "the epoch kept no register snapshots of " + image.path + " for " + event +
           ": its counts come from samples alone, without the loop and branch anchors snapshots give; record "
           "with a command or -p (registers on), or run the daemon with --registers N (e.g. 10)";
}

Result<AfdoProfile> build_afdo_profile(const store::EpochContents& contents, const AfdoOptions& options,
                                       Symbolizer& symbolizer) {
    if (options.image.empty()) return Error("--format afdo needs --image BINARY: the executable or library to profile");
    ECPI_RETURN_IF_ERROR(check_build_id(options.image, recorded_builds(contents, options.image), options.image));
    ECPI_ASSIGN_OR_RETURN(CalcReport calc, image_calc(contents, options, symbolizer));
    AfdoProfile profile;
    profile.epoch = contents.epoch;
    profile.event = calc.event;
    profile.image = calc.procedures.front().image;
    profile.build_id = calc.procedures.front().build_id;
    profile.warnings = calc.warnings;
    const store::ImageId id{profile.image, profile.build_id};
    ECPI_RETURN_IF_ERROR(check_build_id(options.image, {profile.build_id}, profile.image));
    if (std::string w = missing_registers_warning(contents, calc.event, id); !w.empty())
        profile.warnings.push_back(std::move(w));

    DebugInfoCache infos(symbolizer);
    std::string why;
    const DebugInfo* debug = infos.get(id, &why);
    if (debug == nullptr) return Error("cannot read " + profile.image + ": " + why);
    if (!debug->has_lines())
        return Error(profile.image + " has no line table: build it with -g -fdebug-info-for-profiling (clang) "
                     "to export an AutoFDO profile");

    ProfileInputs inputs(*debug, symbolizer, id);
    for (const CalcProcedure& p : calc.procedures) {
        if (p.image != profile.image || p.name.find("@plt") != std::string::npos) continue;
        inputs.add(p, afdo_block_counts(p, calc.period_cycles));
    }
    add_indirect_targets(inputs, contents, calc, profile.image);
    std::vector<std::string> shared;
    for (auto& [name, input] : inputs.functions()) {
        if (afdo_shares_name(input.instructions)) shared.push_back(name);
        AfdoFunction f = afdo_function(name, input.head, input.instructions);
        if (f.total > 0) profile.functions.push_back(std::move(f));
    }
    if (profile.functions.empty())
        return Error("no sampled instruction of " + profile.image +
                     " has a source line: build it with -g -fdebug-info-for-profiling (clang)");
    std::stable_sort(profile.functions.begin(), profile.functions.end(),
                     [](const AfdoFunction& a, const AfdoFunction& b) { return a.total > b.total; });
    if (!shared.empty()) profile.warnings.push_back(shared_names_warning(shared));
    if (inputs.unnamed() > 0)
        profile.warnings.push_back(std::to_string(inputs.unnamed()) +
                                   " instructions left out: a function on their inline stack has no usable name");
    return profile;
}

}  // namespace ecpi::analyze
