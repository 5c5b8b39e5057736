// Indirect call targets for AutoFDO profiles from -g stacks: which function
// each call site's frames called, and each target's share of the call's
// executions. Contracts: include/ecpi/analyze/pgo/afdo.h.
#include <set>

#include "ecpi/analyze/pgo/afdo.h"

namespace ecpi::analyze {

namespace {

// Frame k of a stack (leaf first, kernel frames before user frames) holds a
// pc inside its function when it is the leaf of its half (index 0, or the
// first user frame below kernel frames); any other frame holds a return
// address, which may sit one past its function's last byte.
std::uint64_t address_inside(const store::StackProfile& stacks, const std::vector<store::StackFrame>& frames,
                             std::size_t k) {
    auto kernel = [&](std::size_t i) {
        return frames[i].image < stacks.images.size() && stacks.images[frames[i].image].path == store::kKernelImage;
    };
    const bool leaf = k == 0 || (kernel(k - 1) && !kernel(k));
    return leaf ? frames[k].offset : frames[k].offset - 1;
}

}  // namespace

std::vector<AfdoStackCall> afdo_stack_calls(const store::StackProfile& stacks, const std::string& image,
                                            const std::map<std::uint64_t, std::uint64_t>& call_at_return,
                                            const std::function<std::string(std::uint64_t)>& function_at) {
    auto in_image = [&](const store::StackFrame& f) {
        return f.image < stacks.images.size() && stacks.images[f.image].path == image;
    };
    std::map<std::pair<std::uint64_t, std::string>, double> samples;
    std::map<std::uint64_t, std::string> names;  // callee address -> function (DWARF look-ups cost)
    for (const store::StackSample& sample : stacks.stacks) {
        std::set<std::pair<std::uint64_t, std::string>> seen;  // recursion repeats a call: once per sample
        for (std::size_t k = 0; k + 1 < sample.frames.size(); ++k) {
            const store::StackFrame& callee = sample.frames[k];
            const store::StackFrame& caller = sample.frames[k + 1];
            if (!in_image(callee) || !in_image(caller)) continue;
            const auto call = call_at_return.find(caller.offset);
            if (call == call_at_return.end()) continue;
            const std::uint64_t inside = address_inside(stacks, sample.frames, k);
            auto name = names.find(inside);
            if (name == names.end()) name = names.emplace(inside, function_at(inside)).first;
            if (name->second.empty() || !seen.insert({call->second, name->second}).second) continue;
            samples[{call->second, name->second}] += static_cast<double>(sample.count);
        }
    }
    std::vector<AfdoStackCall> out;
    for (const auto& [key, n] : samples) out.push_back({key.first, key.second, n});
    return out;
}

std::map<std::uint64_t, std::map<std::string, double>> afdo_call_targets(
    const std::vector<AfdoStackCall>& calls, const std::map<std::string, double>& entries,
    const std::map<std::uint64_t, double>& call_counts) {
    // Every call a target was seen under, its samples added up.
    std::map<std::string, double> seen_under;
    for (const AfdoStackCall& c : calls) seen_under[c.target] += c.samples;
    auto entries_of = [&](const std::string& target) {
        const auto it = entries.find(target);
        return it == entries.end() ? 0.0 : it->second;
    };
    std::map<std::uint64_t, std::vector<const AfdoStackCall*>> by_call;
    for (const AfdoStackCall& c : calls)
        if (c.samples > 0) by_call[c.call].push_back(&c);

    std::map<std::uint64_t, std::map<std::string, double>> out;
    for (const auto& [call, targets] : by_call) {
        // The targets' entries that came through this call (by its share of
        // each target's samples), and the calls per sample they make.
        double known_calls = 0, known_samples = 0, samples = 0;
        for (const AfdoStackCall* c : targets) {
            samples += c->samples;
            if (entries_of(c->target) <= 0) continue;
            const double n = entries_of(c->target) * c->samples / seen_under[c->target];
            out[call][c->target] += n;
            known_calls += n;
            known_samples += c->samples;
        }
        const auto count = call_counts.find(call);
        const double per_sample = known_samples > 0                  ? known_calls / known_samples
                                  : count != call_counts.end() ? count->second / samples
                                                               : 0;
        for (const AfdoStackCall* c : targets)
            if (entries_of(c->target) <= 0) out[call][c->target] += per_sample * c->samples;
    }
    return out;
}

}  // namespace ecpi::analyze
