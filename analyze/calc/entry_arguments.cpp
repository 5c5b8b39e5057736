// A procedure's entry branch decided by its callers' constants. See entry_arguments.h.
#include "ecpi/analyze/calc/entry_arguments.h"

#include <algorithm>

#include <capstone/capstone.h>

#include "ecpi/analyze/calc/branch_odds.h"

namespace ecpi::analyze {

namespace {

// The value an instruction that writes only register `gp` leaves there,
// when it is a constant.
std::optional<std::uint64_t> constant_written(const DecodedInstruction& d, int gp) {
    if (d.zero_idiom) return 0;
    if (d.id != X86_INS_MOV || d.loads || !d.has_immediate || gp_register_number(d.first_register) != gp)
        return std::nullopt;
    if (d.first_size == 8) return static_cast<std::uint64_t>(d.immediate);
    if (d.first_size == 4) return static_cast<std::uint64_t>(static_cast<std::uint32_t>(d.immediate));
    return std::nullopt;  // an 8- or 16-bit move keeps the register's upper bits
}

const BasicBlock* block_of(const Cfg& cfg, std::uint32_t instruction) {
    for (const auto& b : cfg.blocks)
        if (instruction >= b.first && instruction < b.first + b.count) return &b;
    return nullptr;
}

// Whether instructions [from, to) write register gp.
bool written(const Cfg& cfg, std::uint32_t from, std::uint32_t to, int gp) {
    for (std::uint32_t k = from; k < to; ++k)
        for (auto r : cfg.instructions[k].writes)
            if (gp_register_number(r) == gp) return true;
    return false;
}

std::optional<std::uint64_t> value_of(std::span<const ArgumentValue> arguments, int gp) {
    for (const auto& a : arguments)
        if (a.gp == gp) return a.value;
    return std::nullopt;
}

}  // namespace

std::vector<ArgumentValue> call_arguments(const Cfg& cfg, std::uint32_t call) {
    std::vector<ArgumentValue> out;
    const BasicBlock* block = block_of(cfg, call);
    if (!block) return out;
    std::vector<int> decided;  // registers whose last write is already seen
    for (std::uint32_t k = call; k-- > block->first;) {
        const DecodedInstruction& d = cfg.instructions[k];
        if (is_call(d.flow)) break;  // an earlier call may leave any caller-saved register changed
        for (auto r : d.writes) {
            const int gp = gp_register_number(r);
            if (gp < 0 || std::find(decided.begin(), decided.end(), gp) != decided.end()) continue;
            decided.push_back(gp);
            if (d.writes.size() > (d.writes.contains(kFlagsRegister) ? 2u : 1u)) continue;
            if (const auto v = constant_written(d, gp)) out.push_back({gp, *v});
        }
    }
    std::sort(out.begin(), out.end(), [](const ArgumentValue& a, const ArgumentValue& b) { return a.gp < b.gp; });
    return out;
}

std::vector<ArgumentValue> common_arguments(std::span<const std::vector<ArgumentValue>> sites) {
    if (sites.empty()) return {};
    std::vector<ArgumentValue> out;
    for (const ArgumentValue& a : sites.front())
        if (std::all_of(sites.begin(), sites.end(), [&a](const std::vector<ArgumentValue>& s) {
                return std::find(s.begin(), s.end(), a) != s.end();
            }))
            out.push_back(a);
    return out;
}

std::optional<std::uint32_t> ruled_out_entry_edge(const Cfg& cfg, std::span<const ArgumentValue> arguments) {
    if (cfg.blocks.empty() || arguments.empty()) return std::nullopt;
    const auto condition = branch_condition(cfg, 0);
    if (!condition) return std::nullopt;
    const std::uint32_t first = cfg.blocks[0].first;
    const auto a = value_of(arguments, condition->a);
    if (!a || written(cfg, first, condition->setter, condition->a)) return std::nullopt;
    std::uint64_t b = static_cast<std::uint64_t>(condition->immediate);
    if (condition->b >= 0) {
        const auto v = value_of(arguments, condition->b);
        if (!v || written(cfg, first, condition->setter, condition->b)) return std::nullopt;
        b = *v;
    }
    const bool taken = evaluate(*condition, *a, b);
    for (auto e : cfg.blocks[0].out_edges) {
        const EdgeKind kind = cfg.edges[e].kind;
        if ((kind == EdgeKind::kBranch && !taken) || (kind == EdgeKind::kFallThrough && taken)) return e;
    }
    return std::nullopt;
}

}  // namespace ecpi::analyze
