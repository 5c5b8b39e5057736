#include "ecpi/loader/stack_copy.h"

#include <cstring>
#include <optional>

#include "ecpi_abi.h"

namespace ecpi::loader {

namespace {

// The 8 bytes at `address`, when they lie inside the copy.
std::optional<std::uint64_t> read_copy(const UserStackCopy& copy, std::uint64_t address) {
    if (address < copy.sp || address - copy.sp > copy.bytes.size() || copy.bytes.size() - (address - copy.sp) < 8)
        return std::nullopt;
    std::uint64_t v = 0;
    std::memcpy(&v, copy.bytes.data() + (address - copy.sp), sizeof v);
    return v;
}

struct Frame {
    std::uint64_t pc, sp, bp;
    bool exact = false;  // an interrupted pc (after a signal frame), not a return address
};

// Through the kernel's signal frame: the interrupted registers from the ucontext at sp.
std::uint32_t signal_step(const UserStackCopy& copy, Frame& f) {
    auto pc = read_copy(copy, f.sp + ECPI_SIGFRAME_RIP);
    auto sp = read_copy(copy, f.sp + ECPI_SIGFRAME_RSP);
    auto bp = read_copy(copy, f.sp + ECPI_SIGFRAME_RBP);
    if (!pc || !sp || !bp || *pc == 0) return ECPI_COUNTER_CUT_UNREADABLE;
    f = {*pc, *sp, *bp, true};
    return 0;
}

// The caller's frame by a CFI row, or the cut reason (0 when the row ends the walk at the root).
std::uint32_t step_by_row(const UserStackCopy& copy, const UnwindRow& row, Frame& f, std::uint64_t& cfa,
                          std::uint64_t& ra, std::uint64_t& bp) {
    if (row.kind == ECPI_UNWIND_CFA_RSP) cfa = f.sp + 8 * std::uint64_t{row.cfa_offset8};
    else if (row.kind == ECPI_UNWIND_CFA_RBP) cfa = f.bp + 8 * std::uint64_t{row.cfa_offset8};
    else cfa = f.sp + 8 + ((f.pc & 15) >= row.cfa_offset8 ? 8 : 0);  // PLT
    auto r = read_copy(copy, cfa - 8);
    if (!r) return ECPI_COUNTER_CUT_UNREADABLE;
    ra = *r;
    if (row.rbp_offset8) {
        auto b = read_copy(copy, cfa + 8 * static_cast<std::int64_t>(row.rbp_offset8));
        if (!b) return ECPI_COUNTER_CUT_UNREADABLE;
        bp = *b;
    }
    return 0;
}

}  // namespace

CopyWalk walk_stack_copy(const UserStackCopy& copy, const UnwindRowLookup& lookup) {
    CopyWalk out;
    Frame f{copy.pc, copy.sp, copy.bp};
    while (true) {
        if (out.ips.size() >= ECPI_MAX_USER_STACK_DEPTH) {
            out.end = ECPI_COUNTER_CUT_DEPTH;
            return out;
        }
        out.ips.push_back(f.pc);
        UnwindRow row;
        std::uint32_t why = lookup(out.ips.size() > 1 && !f.exact ? f.pc - 1 : f.pc, row);
        if (why == 0 && row.kind == ECPI_UNWIND_END) {
            out.end = ECPI_COUNTER_STACK_ROOT;
            return out;
        }
        if (why == 0 && row.kind == ECPI_UNWIND_SIGNAL) {
            if ((out.end = signal_step(copy, f))) return out;
            continue;
        }
        std::uint64_t cfa = 0, ra = 0, bp = f.bp;
        if (why == 0) {
            if (auto cut = step_by_row(copy, row, f, cfa, ra, bp)) {
                out.end = cut;
                return out;
            }
        } else {
            // Frame-pointer fallback: rbp -> (saved rbp, return address).
            auto r = f.bp >= f.sp ? read_copy(copy, f.bp + 8) : std::nullopt;
            auto b = r ? read_copy(copy, f.bp) : std::nullopt;
            if (f.bp == 0 || !r || !b) {
                out.end = why;
                return out;
            }
            ra = *r;
            bp = *b;
            cfa = f.bp + 16;
        }
        if (cfa <= f.sp) {
            out.end = ECPI_COUNTER_CUT_UNREADABLE;
            return out;
        }
        if (ra == 0) {
            out.end = why ? why : std::uint32_t{ECPI_COUNTER_CUT_NO_ROW};
            return out;
        }
        f = {ra, cfa, bp, false};
    }
}

}  // namespace ecpi::loader
