#include "ecpi/loader/probe_unwind.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <libelf.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include "ecpi/loader/process_table.h"

namespace ecpi::loader {
namespace {

// x86-64 DWARF register numbers.
constexpr int kRegRbp = 6;
constexpr int kRegRsp = 7;
constexpr int kRegRip = 16;  // the return-address column
constexpr int kMaxFrames = 64;

// How one register is recovered in the caller (libdw's dwarf_frame_register).
struct RegisterRule {
    enum class Kind { kUndefined, kSameValue, kExpression } kind = Kind::kSameValue;
    std::vector<Dwarf_Op> ops;  // computes the save address, or the value if it ends in DW_OP_stack_value
};

// The unwind rule at one pc: CFA, return address, caller's rbp.
struct FrameRule {
    std::vector<Dwarf_Op> cfa;
    RegisterRule ra;
    RegisterRule rbp;
};

struct Registers {
    std::uint64_t rip = 0, rsp = 0, rbp = 0;
    bool rbp_known = true;
};

// The stack bytes copied at function entry, addressed as the target's memory.
struct StackCopy {
    std::uint64_t base;
    const std::uint8_t* data;
    std::size_t size;
    std::optional<std::uint64_t> read(std::uint64_t addr) const {
        if (addr < base || addr + 8 > base + size || addr + 8 < addr) return std::nullopt;
        std::uint64_t v;
        std::memcpy(&v, data + (addr - base), 8);
        return v;
    }
};

// A DWARF expression as used in CFI on x86-64 (DW_OP_bregN, call_frame_cfa,
// constants, plus, and the PLT's and/ge/shl). Returns the value, and whether
// it is a value (DW_OP_stack_value) rather than an address.
std::optional<std::pair<std::uint64_t, bool>> evaluate(const std::vector<Dwarf_Op>& ops, const Registers& regs,
                                                       std::optional<std::uint64_t> cfa, const StackCopy& stack) {
    std::vector<std::uint64_t> st;
    bool is_value = false;
    auto reg = [&](int n) -> std::optional<std::uint64_t> {
        if (n == kRegRsp) return regs.rsp;
        if (n == kRegRip) return regs.rip;
        if (n == kRegRbp && regs.rbp_known) return regs.rbp;
        return std::nullopt;
    };
    for (const auto& op : ops) {
        const auto atom = op.atom;
        if (atom >= DW_OP_breg0 && atom <= DW_OP_breg31) {
            auto v = reg(atom - DW_OP_breg0);
            if (!v) return std::nullopt;
            st.push_back(*v + static_cast<std::uint64_t>(static_cast<std::int64_t>(op.number)));
        } else if (atom >= DW_OP_lit0 && atom <= DW_OP_lit31) {
            st.push_back(atom - DW_OP_lit0);
        } else {
            switch (atom) {
            case DW_OP_bregx: {  // libdw's form of a register + offset CFA rule
                auto v = reg(static_cast<int>(op.number));
                if (!v) return std::nullopt;
                st.push_back(*v + op.number2);
                break;
            }
            case DW_OP_call_frame_cfa:
                if (!cfa) return std::nullopt;
                st.push_back(*cfa);
                break;
            case DW_OP_const1u: case DW_OP_const2u: case DW_OP_const4u: case DW_OP_const8u: case DW_OP_constu:
            case DW_OP_const1s: case DW_OP_const2s: case DW_OP_const4s: case DW_OP_const8s: case DW_OP_consts:
                st.push_back(op.number);
                break;
            case DW_OP_plus_uconst:
                if (st.empty()) return std::nullopt;
                st.back() += op.number;
                break;
            case DW_OP_deref: {
                if (st.empty()) return std::nullopt;
                auto v = stack.read(st.back());
                if (!v) return std::nullopt;
                st.back() = *v;
                break;
            }
            case DW_OP_stack_value:
                is_value = true;
                break;
            case DW_OP_plus: case DW_OP_minus: case DW_OP_and: case DW_OP_ge: case DW_OP_shl: {
                if (st.size() < 2) return std::nullopt;
                std::uint64_t b = st.back();
                st.pop_back();
                std::uint64_t& a = st.back();
                if (atom == DW_OP_plus) a += b;
                else if (atom == DW_OP_minus) a -= b;
                else if (atom == DW_OP_and) a &= b;
                else if (atom == DW_OP_ge) a = static_cast<std::int64_t>(a) >= static_cast<std::int64_t>(b);
                else a <<= (b & 63);
                break;
            }
            default:
                return std::nullopt;  // an operation CFI on x86-64 does not use in practice
            }
        }
    }
    if (st.empty()) return std::nullopt;
    return std::make_pair(st.back(), is_value);
}

}  // namespace

struct DwarfUnwinder::Impl {
    ProcessTable& processes;

    struct ImageCfi {
        int fd = -1;
        Elf* elf = nullptr;
        Dwarf_CFI* cfi = nullptr;  // owned by elf's libdw state; freed with dwarf_cfi_end
    };
    std::unordered_map<std::uint32_t, ImageCfi> images;                       // by ProcessTable image index
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::optional<FrameRule>> rules;  // (image, vaddr)

    explicit Impl(ProcessTable& p) : processes(p) {}
    ~Impl() {
        for (auto& [index, image] : images) {
            if (image.cfi) dwarf_cfi_end(image.cfi);
            if (image.elf) elf_end(image.elf);
            if (image.fd >= 0) ::close(image.fd);
        }
    }

    // .eh_frame of one image (loaded once; nullptr when it has none).
    Dwarf_CFI* cfi_of(std::uint32_t index) {
        auto [it, inserted] = images.try_emplace(index);
        if (!inserted) return it->second.cfi;
        const auto& info = processes.images()[index];
        if (info.id.path.starts_with('[') || info.readable_path.empty()) return nullptr;
        elf_version(EV_CURRENT);
        it->second.fd = ::open(info.readable_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (it->second.fd < 0) return nullptr;
        it->second.elf = elf_begin(it->second.fd, ELF_C_READ_MMAP, nullptr);
        if (!it->second.elf) return nullptr;
        it->second.cfi = dwarf_getcfi_elf(it->second.elf);
        return it->second.cfi;
    }

    static RegisterRule register_rule(Dwarf_Frame* frame, int regno) {
        Dwarf_Op mem[3];
        Dwarf_Op* ops = nullptr;
        std::size_t nops = 0;
        RegisterRule rule;
        if (dwarf_frame_register(frame, regno, mem, &ops, &nops) != 0 || (nops == 0 && ops == nullptr)) {
            rule.kind = RegisterRule::Kind::kUndefined;
        } else if (nops == 0) {
            rule.kind = RegisterRule::Kind::kSameValue;
        } else {
            rule.kind = RegisterRule::Kind::kExpression;
            rule.ops.assign(ops, ops + nops);
        }
        return rule;
    }

    // DWARF 6.4: the rule in effect at `vaddr`, cached per (image, vaddr).
    const std::optional<FrameRule>& rule_at(std::uint32_t image, std::uint64_t vaddr) {
        auto key = std::make_pair(image, vaddr);
        auto it = rules.find(key);
        if (it != rules.end()) return it->second;
        std::optional<FrameRule> rule;
        if (Dwarf_CFI* cfi = cfi_of(image)) {
            Dwarf_Frame* frame = nullptr;
            if (dwarf_cfi_addrframe(cfi, vaddr, &frame) == 0 && frame) {
                Dwarf_Op* ops = nullptr;
                std::size_t nops = 0;
                if (dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops > 0) {
                    FrameRule r;
                    r.cfa.assign(ops, ops + nops);
                    r.ra = register_rule(frame, kRegRip);
                    r.rbp = register_rule(frame, kRegRbp);
                    rule = std::move(r);
                }
                std::free(frame);
            }
        }
        return rules.emplace(key, std::move(rule)).first->second;
    }
};

DwarfUnwinder::DwarfUnwinder(ProcessTable& processes) : impl_(std::make_unique<Impl>(processes)) {}
DwarfUnwinder::~DwarfUnwinder() = default;

UnwoundPath DwarfUnwinder::unwind(std::uint32_t pid, std::uint64_t ip, std::uint64_t sp, std::uint64_t bp,
                                  const std::uint8_t* stack, std::size_t size) {
    UnwoundPath path;
    StackCopy memory{sp, stack, size};
    Registers regs{ip, sp, bp, true};
    for (int depth = 0; depth < kMaxFrames; ++depth) {
        // A return address points after its call: look up the call itself.
        std::uint64_t lookup = depth == 0 ? regs.rip : regs.rip - 1;
        auto where = impl_->processes.resolve(pid, lookup);
        const std::optional<FrameRule>* rule = where ? &impl_->rule_at(where->image, where->offset) : nullptr;
        Registers caller;
        if (rule && rule->has_value()) {
            const FrameRule& r = **rule;
            // The outermost frame (_start, a thread start) marks its return
            // address undefined (DW_CFA_undefined rip), which libdw may report
            // as "same value": either way there is no caller.
            if (r.ra.kind != RegisterRule::Kind::kExpression) {
                path.complete = true;
                break;
            }
            auto cfa = evaluate(r.cfa, regs, std::nullopt, memory);
            if (!cfa) break;
            auto ra = evaluate(r.ra.ops, regs, cfa->first, memory);
            if (!ra) break;
            std::optional<std::uint64_t> ra_value = ra->second ? ra->first : memory.read(ra->first);
            if (!ra_value) break;  // beyond the copied stack: truncated
            caller.rip = *ra_value;
            caller.rsp = cfa->first;
            if (r.rbp.kind == RegisterRule::Kind::kSameValue) {
                caller.rbp = regs.rbp;
                caller.rbp_known = regs.rbp_known;
            } else if (r.rbp.kind == RegisterRule::Kind::kExpression) {
                auto v = evaluate(r.rbp.ops, regs, cfa->first, memory);
                std::optional<std::uint64_t> value = v ? (v->second ? std::optional(v->first) : memory.read(v->first))
                                                       : std::nullopt;
                caller.rbp = value.value_or(0);
                caller.rbp_known = value.has_value();
            } else {
                caller.rbp_known = false;
            }
        } else {
            // No CFI here: fall back to the frame pointer (at entry, the
            // return address is at the stack pointer and rbp is the caller's).
            if (depth == 0) {
                auto ra = memory.read(regs.rsp);
                if (!ra) break;
                caller = {*ra, regs.rsp + 8, regs.rbp, regs.rbp_known};
            } else {
                if (!regs.rbp_known) break;
                if (regs.rbp == 0) {  // a zero frame pointer marks the outermost frame (_start clears rbp)
                    path.complete = true;
                    break;
                }
                auto ra = memory.read(regs.rbp + 8);
                auto saved = memory.read(regs.rbp);
                if (!ra || !saved) break;
                caller = {*ra, regs.rbp + 16, *saved, true};
            }
        }
        if (caller.rip == 0) {
            path.complete = true;
            break;
        }
        path.ips.push_back(caller.rip);
        regs = caller;
    }
    return path;
}

std::uint64_t DwarfUnwinder::cached_rules() const { return impl_->rules.size(); }

}  // namespace ecpi::loader
