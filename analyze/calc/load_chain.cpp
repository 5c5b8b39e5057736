// Loops bound by a dependent chain of loads that miss. See load_chain.h.
#include "ecpi/analyze/calc/load_chain.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

namespace ecpi::analyze {

ChaseTime chase_time_at(std::span<const store::ChaseLatency> sizes, double bytes) {
    ChaseTime out;
    std::vector<store::ChaseLatency> s(sizes.begin(), sizes.end());
    std::sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    if (s.empty()) {
        out.why_not = "no chase latency recorded (ecpi record measures it; or calc --chase-latency)";
        return out;
    }
    if (bytes < static_cast<double>(s.front().bytes)) {
        out.why_not = "its working set is below the smallest size measured: its loads may hit a cache";
        return out;
    }
    if (bytes > static_cast<double>(s.back().bytes)) {
        out.why_not = "its working set is beyond the largest size measured";
        return out;
    }
    std::size_t hi = 0;
    while (static_cast<double>(s[hi].bytes) < bytes) ++hi;
    const std::size_t lo = hi == 0 ? hi : hi - 1;  // the working set may be below the span: the size below too
    const auto& a = s[lo];
    const auto& b = s[hi];
    const double t = lo == hi ? 1.0
                              : std::log(bytes / static_cast<double>(a.bytes)) /
                                    std::log(static_cast<double>(b.bytes) / static_cast<double>(a.bytes));
    out.known = true;
    out.ns = a.ns + t * (b.ns - a.ns);
    out.ns_low = std::min({a.ns_low, b.ns_low, out.ns});
    out.ns_high = std::max({a.ns_high, b.ns_high, out.ns});
    return out;
}

Result<std::vector<store::ChaseLatency>> parse_chase_latency(std::string_view spec) {
    std::vector<store::ChaseLatency> out;
    const auto bad = [&](std::string_view item, const char* what) {
        return Error("--chase-latency: \"" + std::string(item) + "\" " + what +
                     "; give sizes as MIB:NS[:LOW:HIGH] separated by commas, e.g. 16:320:300:350");
    };
    while (!spec.empty()) {
        const auto comma = spec.find(',');
        const std::string item(spec.substr(0, comma));
        spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
        double v[4] = {0, 0, 0, 0};
        int n = 0;
        bool ended = false;
        for (const char* at = item.c_str(); n < 4 && !ended;) {
            char* end = nullptr;
            v[n++] = std::strtod(at, &end);
            if (end == at || (*end != ':' && *end != '\0')) return bad(item, "is not MIB:NS or MIB:NS:LOW:HIGH");
            ended = *end == '\0';
            at = end + 1;
        }
        if (!ended || (n != 2 && n != 4)) return bad(item, "is not MIB:NS or MIB:NS:LOW:HIGH");
        if (n == 2) v[2] = v[3] = v[1];
        if (!(v[0] > 0 && v[0] <= 1 << 20)) return bad(item, "has a size outside 0-1 TiB");
        if (!(v[2] > 0 && v[2] <= v[1] && v[1] <= v[3] && v[3] < 1e6)) return bad(item, "is not 0 < LOW <= NS <= HIGH < 1 ms");
        out.push_back({static_cast<std::uint64_t>(v[0] * (1 << 20)), v[1], v[2], v[3]});
    }
    if (out.empty()) return Error("--chase-latency: no sizes given; give MIB:NS[:LOW:HIGH] separated by commas");
    return out;
}

namespace {

// `mov r, [r + d]`: r's next value loaded through r itself.
bool chases(const DecodedInstruction& d, std::uint16_t* reg) {
    if (d.mnemonic != "mov" || !d.loads || d.stores || d.first_size != 8) return false;
    const MemoryOperand& m = d.memory;
    if (m.base == 0 || m.index != 0 || m.segment != 0 || m.base != d.first_register) return false;
    if (gp_register_number(m.base) < 0 || m.base == kStackPointer) return false;
    *reg = m.base;
    return true;
}

}  // namespace

LoadChain find_load_chain(const Cfg& cfg, const Loop& loop, std::span<const std::uint32_t> once_blocks) {
    LoadChain out;
    if (loop.has_call) {
        out.why_not = "the loop calls other code";
        return out;
    }
    std::uint16_t reg = 0;
    for (auto b : once_blocks)
        for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i) {
            std::uint16_t r = 0;
            if (!chases(cfg.instructions[cfg.blocks[b].first + i], &r)) continue;
            if (reg != 0 && r != reg) {
                out.why_not = "it chases more than one register";
                return out;
            }
            reg = r;
            ++out.loads;
        }
    if (reg == 0) {
        out.why_not = "no load `r = [r + d]` runs once an iteration";
        return out;
    }
    std::uint32_t writes = 0;
    for (auto b : loop.blocks)
        for (std::uint32_t i = 0; i < cfg.blocks[b].count; ++i)
            if (cfg.instructions[cfg.blocks[b].first + i].writes.contains(reg)) ++writes;
    if (writes != out.loads) {
        out.why_not = "the chased register is written by other instructions of the loop";
        return out;
    }
    out.found = true;
    out.gp = gp_register_number(reg);
    return out;
}

ChainSpan chain_span(std::span<const store::RegisterSample> stream, std::span<const std::uint32_t> candidates,
                     std::uint32_t image, const std::function<bool(std::uint64_t)>& in_loop, int gp) {
    ChainSpan out;
    if (gp < 0 || gp >= static_cast<int>(store::kGpRegisters)) return out;
    std::unordered_set<std::uint64_t> seen;
    const auto take = [&](const store::RegisterSample& s) {
        if (s.image != image || !in_loop(s.offset)) return;
        const std::uint64_t v = s.regs[static_cast<std::size_t>(gp)];
        if (v == 0) return;
        out.low = out.snapshots ? std::min(out.low, v) : v;
        out.high = out.snapshots ? std::max(out.high, v) : v;
        ++out.snapshots;
        seen.insert(v);
    };
    if (candidates.empty())
        for (const auto& s : stream) take(s);
    else
        for (auto p : candidates)
            if (p < stream.size()) take(stream[p]);
    out.distinct = static_cast<std::uint32_t>(seen.size());
    return out;
}

ChainIteration chain_iteration(const LoadChain& chain, const ChainSpan& span,
                               std::span<const store::ChaseLatency> sizes, double body_ns,
                               const ChainEvidence& evidence) {
    ChainIteration out;
    if (!chain.found) {
        out.why_not = chain.why_not;
        return out;
    }
    if (span.snapshots < evidence.min_snapshots) {
        out.why_not = "too few register snapshots in the loop to show its working set";
        return out;
    }
    if (static_cast<double>(span.distinct) < evidence.min_distinct * span.snapshots) {
        out.why_not = "its snapshots revisit the same addresses: a chain over few nodes, likely cached";
        return out;
    }
    out.span_bytes = span.bytes();
    const ChaseTime step = chase_time_at(sizes, out.span_bytes);
    if (!step.known) {
        out.why_not = step.why_not;
        return out;
    }
    const double k = chain.loads;
    out.known = true;
    out.ns = std::max(k * step.ns, body_ns);
    out.ns_low = std::max(k * step.ns_low, body_ns);
    out.ns_high = k * step.ns_high * evidence.drift + body_ns;
    return out;
}

}  // namespace ecpi::analyze
