// AutoFDO sample profiles: the profile tree from located instruction counts
// and LLVM's text format. Contracts: include/ecpi/analyze/pgo/afdo.h.
#include <algorithm>
#include <cmath>

#include "ecpi/analyze/pgo/afdo.h"

namespace ecpi::analyze {

std::uint32_t afdo_base_discriminator(std::uint32_t encoded) {
    // llvm/Support/Discriminator.h, getUnsignedFromPrefixEncoding: a set low
    // bit means "no base discriminator"; else 5 bits, or 12 bits with a
    // continuation bit at 0x20.
    if ((encoded & 1) != 0) return 0;
    const std::uint32_t u = encoded >> 1;
    return (u & 0x20) != 0 ? (((u >> 1) & 0xfe0) | (u & 0x1f)) : (u & 0x1f);
}

namespace {

AfdoLocation location_of(const AfdoFrame& frame) {
    // clang's FunctionSamples::getOffset: (line - subprogram line) & 0xffff.
    const auto offset = static_cast<std::uint32_t>(frame.line - frame.decl_line) & 0xffffu;
    return {offset, afdo_base_discriminator(frame.discriminator)};
}

// The profile an instruction's count lands in: the top-level function's,
// or the nested profile of its innermost inlined frame.
AfdoFunction& innermost_profile(AfdoFunction& top, const std::vector<AfdoFrame>& frames) {
    AfdoFunction* at = &top;
    for (std::size_t i = 0; i + 1 < frames.size(); ++i) {
        AfdoFunction& callee = at->inlined[location_of(frames[i])][frames[i + 1].function];
        callee.name = frames[i + 1].function;
        at = &callee;
    }
    return *at;
}

// Totals bottom-up: a function's body counts and its inlined callees' totals.
std::uint64_t sum_totals(AfdoFunction& f) {
    std::uint64_t total = 0;
    for (const auto& [loc, count] : f.body) total += count;
    for (auto& [loc, callees] : f.inlined)
        for (auto& [name, callee] : callees) total += sum_totals(callee);
    f.total = total;
    return total;
}

void render_location(std::string& out, const AfdoLocation& loc, std::size_t depth) {
    out.append(depth, ' ');
    out += std::to_string(loc.offset);
    if (loc.discriminator != 0) out += "." + std::to_string(loc.discriminator);
    out += ": ";
}

void render_body(std::string& out, const AfdoFunction& f, std::size_t depth) {
    for (const auto& [loc, count] : f.body) {
        render_location(out, loc, depth);
        out += std::to_string(count);
        if (auto calls = f.calls.find(loc); calls != f.calls.end())
            for (const auto& [target, n] : calls->second) out += " " + target + ":" + std::to_string(n);
        out += "\n";
    }
    for (const auto& [loc, callees] : f.inlined) {
        for (const auto& [name, callee] : callees) {
            if (callee.total == 0) continue;
            render_location(out, loc, depth);
            out += name + ":" + std::to_string(callee.total) + "\n";
            render_body(out, callee, depth + 1);
        }
    }
}

}  // namespace

AfdoFunction afdo_function(const std::string& name, double head, const std::vector<AfdoInstruction>& instructions) {
    AfdoFunction top;
    top.name = name;
    top.head = head > 0 ? static_cast<std::uint64_t>(std::llround(head)) : 0;
    for (const AfdoInstruction& insn : instructions) {
        // Line 0 is code the compiler made up (no source line): clang gives it no weight.
        if (insn.frames.empty() || insn.frames.back().line <= 0 || insn.count < 0.5) continue;
        const auto count = static_cast<std::uint64_t>(std::llround(insn.count));
        AfdoFunction& f = innermost_profile(top, insn.frames);
        const AfdoLocation loc = location_of(insn.frames.back());
        std::uint64_t& line_count = f.body[loc];
        line_count = std::max(line_count, count);
        // Each call instruction runs apart: copies of one call (unrolled) add up.
        if (!insn.call_target.empty()) f.calls[loc][insn.call_target] += count;
        std::uint64_t indirect = 0;
        for (const auto& [target, n] : insn.indirect_targets) {
            const auto calls = static_cast<std::uint64_t>(std::llround(std::max(n, 0.0)));
            if (calls > 0) f.calls[loc][target] += calls;
            indirect += calls;
        }
        line_count = std::max(line_count, indirect);
    }
    sum_totals(top);
    return top;
}

bool afdo_shares_name(const std::vector<AfdoInstruction>& instructions) {
    const AfdoFrame* first = nullptr;
    for (const AfdoInstruction& insn : instructions) {
        if (insn.frames.empty()) continue;
        const AfdoFrame& f = insn.frames.front();
        if (first == nullptr) first = &f;
        else if (f.decl_file != first->decl_file || f.decl_line != first->decl_line) return true;
    }
    return false;
}

std::string render_afdo_text(const AfdoProfile& profile) {
    std::string out;
    for (const AfdoFunction& f : profile.functions) {
        if (f.total == 0) continue;
        out += f.name + ":" + std::to_string(f.total) + ":" + std::to_string(f.head) + "\n";
        render_body(out, f, 1);
    }
    return out;
}

}  // namespace ecpi::analyze
