// A jump table's odds from register snapshots. See switch_odds.h.
#include "ecpi/analyze/calc/switch_odds.h"

#include <algorithm>
#include <map>

#include <capstone/capstone.h>

namespace ecpi::analyze {

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;

std::optional<std::uint64_t> read_gp(const KnownRegisters& r, std::uint16_t canonical, std::uint8_t width) {
    const int n = gp_register_number(canonical);
    if (n < 0 || !r.known[static_cast<std::size_t>(n)]) return std::nullopt;
    const std::uint64_t v = r.value[static_cast<std::size_t>(n)];
    return width == 4 ? v & 0xffffffffULL : v;
}

// The second operand's value: the immediate, else the second register.
std::optional<std::uint64_t> source(const DecodedInstruction& d, const KnownRegisters& r) {
    if (d.has_immediate) return static_cast<std::uint64_t>(d.immediate);
    if (d.second_register != 0) return read_gp(r, d.second_register, d.first_size);
    return std::nullopt;
}

std::optional<std::uint64_t> shifted(unsigned id, std::uint64_t a, std::uint64_t by, std::uint8_t width) {
    const unsigned count = static_cast<unsigned>(by & (width == 8 ? 63 : 31));
    switch (id) {
        case X86_INS_SHL: return a << count;
        case X86_INS_SHR: return a >> count;
        case X86_INS_SAR:
            if (width == 4) return static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(a)) >> count);
            return static_cast<std::uint64_t>(static_cast<std::int64_t>(a) >> count);
        default: return std::nullopt;
    }
}

std::optional<std::uint64_t> lea_value(const DecodedInstruction& d, const KnownRegisters& r) {
    std::uint64_t v = static_cast<std::uint64_t>(d.memory.disp);
    if (d.memory.segment != 0) return std::nullopt;
    if (d.memory.base != 0) {
        auto b = read_gp(r, d.memory.base, 8);  // rip-relative: not a gp register, unknown
        if (!b) return std::nullopt;
        v += *b;
    }
    if (d.memory.index != 0) {
        auto i = read_gp(r, d.memory.index, 8);
        if (!i) return std::nullopt;
        v += *i * static_cast<std::uint64_t>(d.memory.scale);
    }
    return v;
}

// The value a modelled instruction writes to its first operand register.
std::optional<std::uint64_t> result(const DecodedInstruction& d, const KnownRegisters& r) {
    if (d.zero_idiom) return 0;
    if (d.id == X86_INS_LEA) return lea_value(d, r);
    if (d.loads || d.stores) return std::nullopt;
    const auto a = read_gp(r, d.first_register, d.first_size);
    switch (d.id) {
        case X86_INS_MOV: case X86_INS_MOVABS: return source(d, r);
        case X86_INS_IMUL: {
            // imul r, r2, imm / imul r, r2 (the one-operand form writes rdx:rax: not modelled)
            if (d.second_register == 0) return std::nullopt;
            auto b = read_gp(r, d.second_register, d.first_size);
            if (!b) return std::nullopt;
            if (d.has_immediate) return *b * static_cast<std::uint64_t>(d.immediate);
            if (!a) return std::nullopt;
            return *a * *b;
        }
        default: break;
    }
    const auto b = source(d, r);
    if (!a || !b) return std::nullopt;
    switch (d.id) {
        case X86_INS_ADD: return *a + *b;
        case X86_INS_SUB: return *a - *b;
        case X86_INS_AND: return *a & *b;
        case X86_INS_OR: return *a | *b;
        case X86_INS_XOR: return *a ^ *b;
        default: return shifted(d.id, *a, *b, d.first_size);
    }
}

// The table's load in block b: the instruction reading an entry through an
// index register (movsxd reg, [base + idx*4] for a relative table; jmp or
// mov through [idx*8 + table] for an absolute one); no table: none.
std::optional<SwitchSite> table_load(const Cfg& cfg, std::uint32_t b, const JumpTable& t) {
    const auto& blk = cfg.blocks[b];
    for (std::uint32_t k = blk.first + blk.count; k-- > blk.first;) {
        const auto& d = cfg.instructions[k];
        if (!d.loads || d.memory.index == 0) continue;
        const bool relative = t.relative && d.memory.scale == 4 && d.memory.disp == 0;
        const bool absolute = !t.relative && d.memory.scale == 8 && d.memory.base == 0 &&
                              static_cast<std::uint64_t>(d.memory.disp) == t.table;
        if (relative || absolute) return SwitchSite{&t, k, d.memory.index};
        return std::nullopt;
    }
    return std::nullopt;
}

// The table entry a snapshot at instruction k will select, if the replay
// from k to the load knows the index.
std::optional<std::uint64_t> entry_from(const Cfg& cfg, const SwitchSite& site, std::uint32_t k,
                                        const store::RegisterSample& snap) {
    if (k > site.load) return std::nullopt;
    KnownRegisters r;
    for (std::size_t n = 0; n < r.value.size() && n < snap.regs.size(); ++n) {
        r.value[n] = snap.regs[n];
        r.known[n] = true;
    }
    for (std::uint32_t x = k; x < site.load; ++x) replay(cfg.instructions[x], r);
    return read_gp(r, site.index, 8);
}

// Whether the index the table's load reads was loaded from memory on the
// way to it: in block b, or in its only predecessor (a bounds check that
// loaded the index and compared it: Clang's `movzx eax, byte [rdi]; cmp;
// ja`), through register moves.
bool index_loaded_in_block(const Cfg& cfg, std::uint32_t b, const SwitchSite& site) {
    std::uint16_t reg = site.index;
    std::uint32_t block = b, end = site.load;
    for (int hops = 0; hops < 2; ++hops) {
        for (std::uint32_t k = end; k-- > cfg.blocks[block].first;) {
            const auto& d = cfg.instructions[k];
            if (!d.writes.contains(reg)) continue;
            if (d.loads) return true;
            const bool moves = d.id == X86_INS_MOV || d.id == X86_INS_MOVSXD || d.id == X86_INS_MOVZX ||
                               d.id == X86_INS_MOVSX;
            if (!moves || d.has_immediate || d.second_register == 0) return false;
            reg = d.second_register;
        }
        const auto& in = cfg.blocks[block].in_edges;
        if (in.size() != 1 || cfg.edges[in[0]].from >= cfg.blocks.size()) return false;
        block = cfg.edges[in[0]].from;
        end = cfg.blocks[block].first + cfg.blocks[block].count;
    }
    return false;
}

SwitchOdds odds_of(const Cfg& cfg, std::uint32_t b, const SwitchSite& site, const std::vector<std::uint32_t>& entries) {
    SwitchOdds o;
    o.block = b;
    o.index_from_memory = index_loaded_in_block(cfg, b, site);
    for (auto e : cfg.blocks[b].out_edges)
        if (cfg.edges[e].kind == EdgeKind::kSwitch) {
            o.edges.push_back(e);
            o.counts.push_back(0);
        }
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (entries[i] == 0) continue;
        const std::uint32_t edge = switch_edge(cfg, b, site, i);
        for (std::size_t j = 0; j < o.edges.size(); ++j)
            if (o.edges[j] == edge) {
                o.counts[j] += entries[i];
                o.total += entries[i];
                break;
            }
    }
    return o;
}

}  // namespace

const char* switch_undecided(const SwitchOdds& o) {
    if (o.index_from_memory)
        return "its index is loaded from memory just before the table: the snapshots that decide it wait after the "
               "case before, so their shares are of time, not of executions; each case they chose is held to at least a quarter "
               "of its share's lower bound, and the cases' counts come from their samples";
    return nullptr;
}

std::map<std::uint32_t, SwitchSite> switch_sites(const Cfg& cfg) {
    std::map<std::uint32_t, SwitchSite> sites;
    for (const auto& t : cfg.jump_tables) {
        const auto jump = instruction_at(cfg, t.jump);
        if (!jump) continue;
        const std::uint32_t b = cfg.instruction_block[*jump];
        if (const auto site = table_load(cfg, b, t)) sites[b] = *site;
    }
    return sites;
}

std::uint32_t switch_edge(const Cfg& cfg, std::uint32_t block, const SwitchSite& site, std::uint64_t entry) {
    if (entry >= site.table->targets.size()) return kNone;
    const auto target = instruction_at(cfg, site.table->targets[static_cast<std::size_t>(entry)]);
    if (!target) return kNone;
    const std::uint32_t to = cfg.instruction_block[*target];
    for (auto e : cfg.blocks[block].out_edges)
        if (cfg.edges[e].kind == EdgeKind::kSwitch && cfg.edges[e].to == to) return e;
    return kNone;
}

std::optional<std::uint32_t> instruction_at(const Cfg& cfg, std::uint64_t address) {
    auto it = std::lower_bound(cfg.instructions.begin(), cfg.instructions.end(), address,
                               [](const DecodedInstruction& d, std::uint64_t a) { return d.address < a; });
    if (it == cfg.instructions.end() || it->address != address) return std::nullopt;
    return static_cast<std::uint32_t>(it - cfg.instructions.begin());
}

std::optional<std::uint64_t> known_value(const KnownRegisters& r, std::uint16_t canonical) {
    return read_gp(r, canonical, 8);
}

void replay(const DecodedInstruction& d, KnownRegisters& r) {
    const int dst = gp_register_number(d.first_register);
    const bool plain = dst >= 0 && (d.first_size == 4 || d.first_size == 8) && d.writes.contains(d.first_register);
    std::optional<std::uint64_t> v = plain ? result(d, r) : std::nullopt;
    for (auto w : d.writes)
        if (int n = gp_register_number(w); n >= 0) r.known[static_cast<std::size_t>(n)] = false;
    if (!v) return;
    // A 32-bit result zero-extends into the 64-bit register.
    r.value[static_cast<std::size_t>(dst)] = d.first_size == 4 ? *v & 0xffffffffULL : *v;
    r.known[static_cast<std::size_t>(dst)] = true;
}

std::vector<SwitchOdds> switch_odds(const Cfg& cfg, std::span<const store::RegisterSample> stream, std::uint32_t image,
                                    std::span<const std::uint32_t> candidates) {
    const auto sites = switch_sites(cfg);
    if (sites.empty()) return {};
    std::map<std::uint32_t, std::vector<std::uint32_t>> entries;  // per block: snapshots per table entry
    for (auto p : candidates) {
        if (p >= stream.size() || stream[p].image != image) continue;
        const auto& snap = stream[p];
        const auto k = instruction_at(cfg, snap.offset);
        if (!k) continue;
        auto site = sites.find(cfg.instruction_block[*k]);
        if (site == sites.end()) continue;
        const auto entry = entry_from(cfg, site->second, *k, snap);
        if (!entry || *entry >= site->second.table->targets.size()) continue;
        auto& v = entries[site->first];
        v.resize(site->second.table->targets.size(), 0);
        ++v[static_cast<std::size_t>(*entry)];
    }
    std::vector<SwitchOdds> out;
    for (const auto& [b, v] : entries) {
        SwitchOdds o = odds_of(cfg, b, sites.at(b), v);
        if (o.total > 0) out.push_back(std::move(o));
    }
    return out;
}

}  // namespace ecpi::analyze
