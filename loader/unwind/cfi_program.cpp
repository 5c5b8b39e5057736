#include "cfi_program.h"

#include <dwarf.h>

#include <cstring>
#include <optional>

#include "ecpi_abi.h"

namespace ecpi::loader::detail {

namespace {

// x86-64 DWARF register numbers.
constexpr std::uint64_t kRegRbp = 6;
constexpr std::uint64_t kRegRsp = 7;
constexpr std::size_t kMaxRememberedStates = 64;

// A register's rule, as far as the sampler cares.
struct Rule {
    enum Kind : std::uint8_t { kUnspecified, kSame, kUndefined, kOffset, kOther } kind = kUnspecified;
    std::int64_t offset = 0;  // kOffset: saved at CFA + offset
    bool operator==(const Rule&) const = default;
};

struct State {
    std::uint64_t cfa_register = kRegRsp;
    std::int64_t cfa_offset = 8;
    enum CfaKind : std::uint8_t { kRegister, kPlt, kExpression } cfa_kind = kRegister;
    std::uint16_t plt_threshold = 0;
    Rule ra, rbp;
};

// Bounded readers over [p, end).
struct Reader {
    const std::uint8_t* p;
    const std::uint8_t* end;
    bool failed = false;

    std::uint64_t uleb() {
        std::uint64_t v = 0;
        for (unsigned shift = 0;; shift += 7) {
            if (p >= end || shift >= 64) return fail();
            std::uint8_t b = *p++;
            v |= std::uint64_t{b & 0x7fu} << shift;
            if (!(b & 0x80)) return v;
        }
    }
    std::int64_t sleb() {
        std::uint64_t v = 0;
        unsigned shift = 0;
        std::uint8_t b = 0x80;
        while (b & 0x80) {
            if (p >= end || shift >= 64) return static_cast<std::int64_t>(fail());
            b = *p++;
            v |= std::uint64_t{b & 0x7fu} << shift;
            shift += 7;
        }
        if (shift < 64 && (b & 0x40)) v |= ~0ull << shift;
        return static_cast<std::int64_t>(v);
    }
    std::uint64_t fixed(std::size_t n) {
        if (static_cast<std::size_t>(end - p) < n) return fail();
        std::uint64_t v = 0;
        std::memcpy(&v, p, n);  // x86-64: little endian
        p += n;
        return v;
    }
    // Skips a block of `n` bytes; returns where it started.
    const std::uint8_t* block(std::uint64_t n) {
        if (static_cast<std::uint64_t>(end - p) < n) return fail(), nullptr;
        const std::uint8_t* b = p;
        p += n;
        return b;
    }
    std::uint64_t fail() {
        failed = true;
        p = end;
        return 0;
    }
};

// The PLT's CFA expression as ld writes it:
// breg7 8; breg16 0; lit15; and; litK; ge; lit3; shl; plus.
std::optional<std::uint16_t> plt_threshold(const std::uint8_t* b, std::uint64_t n) {
    static const std::uint8_t head[] = {DW_OP_breg7, 8, DW_OP_breg16, 0, DW_OP_lit15, DW_OP_and};
    static const std::uint8_t tail[] = {DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus};
    if (n != sizeof head + 1 + sizeof tail || std::memcmp(b, head, sizeof head) != 0 ||
        std::memcmp(b + sizeof head + 1, tail, sizeof tail) != 0)
        return std::nullopt;
    const std::uint8_t lit = b[sizeof head];
    if (lit < DW_OP_lit0 || lit > DW_OP_lit15) return std::nullopt;
    return static_cast<std::uint16_t>(lit - DW_OP_lit0);
}

// The row for a state, in the sampler's terms.
UnwindRow classify(const State& s, std::uint64_t pc, bool signal_frame) {
    UnwindRow row;
    row.pc = static_cast<std::uint32_t>(pc);
    row.kind = ECPI_UNWIND_INVALID;
    if (signal_frame) {
        row.kind = ECPI_UNWIND_SIGNAL;
        return row;
    }
    if (s.ra.kind == Rule::kUndefined) {
        row.kind = ECPI_UNWIND_END;
        return row;
    }
    if (s.ra.kind != Rule::kOffset || s.ra.offset != -8) return row;
    UnwindRow rule = row;
    if (s.cfa_kind == State::kPlt) {
        rule.kind = ECPI_UNWIND_PLT;
        rule.cfa_offset8 = s.plt_threshold;
    } else if (s.cfa_kind == State::kRegister && (s.cfa_register == kRegRsp || s.cfa_register == kRegRbp)) {
        if (s.cfa_offset < 0 || s.cfa_offset % 8 != 0 || s.cfa_offset / 8 > UINT16_MAX) return row;
        rule.kind = s.cfa_register == kRegRsp ? ECPI_UNWIND_CFA_RSP : ECPI_UNWIND_CFA_RBP;
        rule.cfa_offset8 = static_cast<std::uint16_t>(s.cfa_offset / 8);
    } else {
        return row;
    }
    if (s.rbp.kind == Rule::kOffset) {
        if (s.rbp.offset >= 0 || s.rbp.offset % 8 != 0 || s.rbp.offset / 8 < INT8_MIN) return row;
        rule.rbp_offset8 = static_cast<std::int8_t>(s.rbp.offset / 8);
    } else if (s.rbp.kind == Rule::kOther) {
        return row;
    }
    return rule;
}

// Emits rows for a program position; tracks [lo, hi).
struct Emitter {
    std::uint64_t lo, hi;
    std::vector<UnwindRow>& rows;
    std::uint64_t& invalid_rows;
    bool signal_frame;

    // The state `s` holds from `from` up to `to`.
    void segment(const State& s, std::uint64_t from, std::uint64_t to) {
        if (to <= lo || from >= hi || to <= from) return;
        UnwindRow row = classify(s, from < lo ? lo : from, signal_frame);
        if (row.kind == ECPI_UNWIND_INVALID) ++invalid_rows;
        append_row(rows, row);
    }
};

// The machine: runs instructions over a state, with remembered states.
struct Machine {
    const CfiProgram& prog;
    State state;
    State initial;  // after the CIE's instructions (DW_CFA_restore)
    std::vector<State> remembered;
    std::uint64_t loc = 0;
    std::uint64_t steps = 0;
    bool stopped = false;

    Rule* rule_of(std::uint64_t reg) {
        if (reg == prog.return_register) return &state.ra;
        if (reg == kRegRbp) return &state.rbp;
        return nullptr;  // registers the sampler does not use
    }
    const Rule* initial_rule_of(std::uint64_t reg) const {
        if (reg == prog.return_register) return &initial.ra;
        if (reg == kRegRbp) return &initial.rbp;
        return nullptr;
    }
    void set(std::uint64_t reg, Rule r) {
        if (reg == kRegRsp && r.kind != Rule::kSame && r.kind != Rule::kUnspecified) stopped = true;  // rsp not the CFA: beyond us
        if (Rule* rule = rule_of(reg)) *rule = r;
    }
    void restore(std::uint64_t reg) {
        if (Rule* rule = rule_of(reg)) *rule = *initial_rule_of(reg);
    }
    void def_cfa_expression(const std::uint8_t* b, std::uint64_t n) {
        if (auto k = b ? plt_threshold(b, n) : std::nullopt) {
            state.cfa_kind = State::kPlt;
            state.plt_threshold = *k;
        } else {
            state.cfa_kind = State::kExpression;
        }
    }

    // Runs one instruction; returns the location it advances to (or loc).
    std::uint64_t step(Reader& r);
    // Runs [begin, end), emitting a segment at every advance (emit may be null: the CIE's part).
    void run(const std::uint8_t* begin, const std::uint8_t* end, Emitter* emit, std::uint64_t hi);
};

std::uint64_t Machine::step(Reader& r) {
    const std::uint8_t op = *r.p++;
    const std::int64_t daf = prog.data_alignment;
    switch (op >> 6) {
    case 1: return loc + (op & 0x3f) * prog.code_alignment;
    case 2: set(op & 0x3f, {Rule::kOffset, static_cast<std::int64_t>(r.uleb()) * daf}); return loc;
    case 3: restore(op & 0x3f); return loc;
    default: break;
    }
    switch (op) {
    case DW_CFA_nop: break;
    case DW_CFA_advance_loc1: return loc + r.fixed(1) * prog.code_alignment;
    case DW_CFA_advance_loc2: return loc + r.fixed(2) * prog.code_alignment;
    case DW_CFA_advance_loc4: return loc + r.fixed(4) * prog.code_alignment;
    case DW_CFA_offset_extended: { auto reg = r.uleb(); set(reg, {Rule::kOffset, static_cast<std::int64_t>(r.uleb()) * daf}); break; }
    case DW_CFA_offset_extended_sf: { auto reg = r.uleb(); set(reg, {Rule::kOffset, r.sleb() * daf}); break; }
    case DW_CFA_GNU_negative_offset_extended: { auto reg = r.uleb(); set(reg, {Rule::kOffset, -static_cast<std::int64_t>(r.uleb()) * daf}); break; }
    case DW_CFA_restore_extended: restore(r.uleb()); break;
    case DW_CFA_undefined: set(r.uleb(), {Rule::kUndefined, 0}); break;
    case DW_CFA_same_value: set(r.uleb(), {Rule::kSame, 0}); break;
    case DW_CFA_register: { auto reg = r.uleb(); r.uleb(); set(reg, {Rule::kOther, 0}); break; }
    case DW_CFA_val_offset: { auto reg = r.uleb(); r.uleb(); set(reg, {Rule::kOther, 0}); break; }
    case DW_CFA_val_offset_sf: { auto reg = r.uleb(); r.sleb(); set(reg, {Rule::kOther, 0}); break; }
    case DW_CFA_expression:
    case DW_CFA_val_expression: { auto reg = r.uleb(); r.block(r.uleb()); set(reg, {Rule::kOther, 0}); break; }
    case DW_CFA_remember_state:
        if (remembered.size() >= kMaxRememberedStates) stopped = true;
        else remembered.push_back(state);
        break;
    case DW_CFA_restore_state:
        if (remembered.empty()) stopped = true;
        else {
            // The CFA and the register rules come back; DWARF says the location does not move.
            state = remembered.back();
            remembered.pop_back();
        }
        break;
    case DW_CFA_def_cfa: state.cfa_register = r.uleb(); state.cfa_offset = static_cast<std::int64_t>(r.uleb()); state.cfa_kind = State::kRegister; break;
    case DW_CFA_def_cfa_sf: state.cfa_register = r.uleb(); state.cfa_offset = r.sleb() * daf; state.cfa_kind = State::kRegister; break;
    case DW_CFA_def_cfa_register: state.cfa_register = r.uleb(); state.cfa_kind = State::kRegister; break;
    case DW_CFA_def_cfa_offset: state.cfa_offset = static_cast<std::int64_t>(r.uleb()); break;
    case DW_CFA_def_cfa_offset_sf: state.cfa_offset = r.sleb() * daf; break;
    case DW_CFA_def_cfa_expression: { auto n = r.uleb(); def_cfa_expression(r.block(n), n); break; }
    case DW_CFA_GNU_args_size: r.uleb(); break;
    default: stopped = true; break;  // DW_CFA_set_loc, vendor opcodes: the rest of the FDE is not trusted
    }
    return loc;
}

void Machine::run(const std::uint8_t* begin, const std::uint8_t* end, Emitter* emit, std::uint64_t hi) {
    Reader r{begin, end};
    while (r.p < r.end && !stopped && !r.failed) {
        ++steps;
        std::uint64_t next = step(r);
        if (r.failed || stopped) break;
        if (next == loc) continue;
        if (next < loc) {  // a wrapped advance: the program is broken
            stopped = true;
            break;
        }
        if (emit) emit->segment(state, loc, next);
        loc = next;
        if (loc >= hi) return;
    }
}

}  // namespace

void append_row(std::vector<UnwindRow>& rows, UnwindRow row) {
    if (!rows.empty() && rows.back().pc == row.pc) rows.pop_back();
    if (!rows.empty()) {
        const UnwindRow& last = rows.back();
        if (last.kind == row.kind && last.rbp_offset8 == row.rbp_offset8 && last.cfa_offset8 == row.cfa_offset8)
            return;
    }
    rows.push_back(row);
}

std::uint64_t run_cfi_program(const CfiProgram& program, std::uint64_t start, std::uint64_t lo, std::uint64_t hi,
                              std::vector<UnwindRow>& rows, std::uint64_t& invalid_rows) {
    Machine m{program};
    m.run(program.cie_begin, program.cie_end, nullptr, UINT64_MAX);
    const bool cie_ok = !m.stopped;
    m.initial = m.state;
    m.remembered.clear();
    m.loc = start;
    Emitter emit{lo, hi, rows, invalid_rows, program.signal_frame};
    if (cie_ok) m.run(program.fde_begin, program.fde_end, &emit, hi);
    if (!cie_ok || m.stopped) {
        // From where the program went beyond us, the FDE's rows are INVALID.
        State invalid;
        invalid.cfa_kind = State::kExpression;
        emit.segment(invalid, m.loc, hi);
    } else if (m.loc < hi) {
        emit.segment(m.state, m.loc, hi);
    }
    append_row(rows, {static_cast<std::uint32_t>(hi), ECPI_UNWIND_NONE, 0, 0});
    return m.steps;
}

}  // namespace ecpi::loader::detail
