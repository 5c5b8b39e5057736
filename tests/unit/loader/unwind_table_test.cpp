// The unwind table builder (loader/unwind/unwind_table.cpp) on hand-made CFI
// (cfi_fixture.S), on real binaries against libdw's own answer for the same
// pcs, and on forged .eh_frame sections.
#include "ecpi/loader/unwind_table.h"

#include <doctest/doctest.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "ecpi_abi.h"

using namespace ecpi::loader;

namespace {

// Symbol name -> value of an ELF file's .symtab.
std::map<std::string, std::uint64_t> symbols(const char* file) {
    std::map<std::string, std::uint64_t> out;
    elf_version(EV_CURRENT);
    int fd = ::open(file, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
    REQUIRE(elf);
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_SYMTAB) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        for (std::size_t i = 0; data && i < shdr.sh_size / shdr.sh_entsize; ++i) {
            GElf_Sym sym;
            if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
            if (const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name)) out[name] = sym.st_value;
        }
    }
    elf_end(elf);
    ::close(fd);
    return out;
}

UnwindRow row_at(const UnwindTable& t, std::uint64_t pc) {
    auto row = find_unwind_row(t.rows, pc);
    REQUIRE(row);
    return *row;
}

// What one frame's unwinding yields with given registers.
struct Step {
    bool end = false;
    std::uint64_t cfa = 0, ra_at = 0;
    std::optional<std::uint64_t> rbp_at;  // where the caller's rbp is saved; none: unchanged
    bool operator==(const Step&) const = default;
};

// The sampler's evaluation of a row (as bpf/sampler.bpf.c does it).
std::optional<Step> step_by_row(const UnwindRow& row, std::uint64_t pc, std::uint64_t rsp, std::uint64_t rbp) {
    Step s;
    switch (row.kind) {
    case ECPI_UNWIND_END: s.end = true; return s;
    case ECPI_UNWIND_CFA_RSP: s.cfa = rsp + 8u * row.cfa_offset8; break;
    case ECPI_UNWIND_CFA_RBP: s.cfa = rbp + 8u * row.cfa_offset8; break;
    case ECPI_UNWIND_PLT: s.cfa = rsp + 8 + ((pc & 15) >= row.cfa_offset8 ? 8 : 0); break;
    default: return std::nullopt;
    }
    s.ra_at = s.cfa - 8;
    if (row.rbp_offset8) s.rbp_at = s.cfa + 8 * static_cast<std::int64_t>(row.rbp_offset8);
    return s;
}

// libdw's own evaluation of the CFI at pc (nullopt where it needs more than
// rsp, rbp and rip, or where libdw finds no CFI).
std::optional<Step> step_by_libdw(Dwarf_CFI* cfi, std::uint64_t pc, std::uint64_t rsp, std::uint64_t rbp) {
    Dwarf_Frame* frame = nullptr;
    if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) return std::nullopt;
    std::optional<Step> out;
    auto eval = [&](const Dwarf_Op* ops, std::size_t n, std::uint64_t cfa) -> std::optional<std::uint64_t> {
        std::vector<std::uint64_t> st;
        for (std::size_t i = 0; i < n; ++i) {
            const Dwarf_Op& op = ops[i];
            if (op.atom == DW_OP_bregx && op.number == 7) st.push_back(rsp + op.number2);
            else if (op.atom == DW_OP_bregx && op.number == 6) st.push_back(rbp + op.number2);
            else if (op.atom == DW_OP_breg7) st.push_back(rsp + op.number);
            else if (op.atom == DW_OP_breg16) st.push_back(pc + op.number);
            else if (op.atom == DW_OP_call_frame_cfa) st.push_back(cfa);
            else if (op.atom >= DW_OP_lit0 && op.atom <= DW_OP_lit31) st.push_back(op.atom - DW_OP_lit0);
            else if (op.atom == DW_OP_plus_uconst && !st.empty()) st.back() += op.number;
            else if (st.size() >= 2 && (op.atom == DW_OP_and || op.atom == DW_OP_ge || op.atom == DW_OP_shl ||
                                        op.atom == DW_OP_plus)) {
                std::uint64_t b = st.back();
                st.pop_back();
                std::uint64_t& a = st.back();
                a = op.atom == DW_OP_and ? a & b
                    : op.atom == DW_OP_ge ? static_cast<std::uint64_t>(static_cast<std::int64_t>(a) >= static_cast<std::int64_t>(b))
                    : op.atom == DW_OP_shl ? a << b
                                            : a + b;
            } else return std::nullopt;
        }
        if (st.size() != 1) return std::nullopt;
        return st.back();
    };
    Dwarf_Op mem[3];
    Dwarf_Op* ops = nullptr;
    std::size_t nops = 0;
    bool signal = false;
    dwarf_frame_info(frame, nullptr, nullptr, &signal);
    if (!signal && dwarf_frame_register(frame, 16, mem, &ops, &nops) == 0) {
        if (nops == 0 && ops == mem) {
            out = Step{true, 0, 0, std::nullopt};
        } else {
            Dwarf_Op* cfa_ops = nullptr;
            std::size_t cfa_n = 0;
            std::optional<std::uint64_t> cfa;
            if (dwarf_frame_cfa(frame, &cfa_ops, &cfa_n) == 0) cfa = eval(cfa_ops, cfa_n, 0);
            std::optional<std::uint64_t> ra = cfa ? eval(ops, nops, *cfa) : std::nullopt;
            Dwarf_Op mem2[3];
            Dwarf_Op* rops = nullptr;
            std::size_t rn = 0;
            bool rbp_ok = dwarf_frame_register(frame, 6, mem2, &rops, &rn) == 0;
            if (cfa && ra && rbp_ok) {
                Step s{false, *cfa, *ra, std::nullopt};
                if (rn != 0) s.rbp_at = eval(rops, rn, *cfa);
                if (rn == 0 || s.rbp_at) out = s;
            }
        }
    }
    std::free(frame);
    return out;
}

// Compares the table with libdw at `pcs` of `file`: wherever libdw's rule
// is one the sampler can evaluate, the table's row gives the same step;
// returns how many pcs matched.
std::size_t compare_with_libdw(const char* file, const UnwindTable& table, const std::vector<std::uint64_t>& pcs) {
    int fd = ::open(file, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
    Dwarf_CFI* cfi = dwarf_getcfi_elf(elf);
    REQUIRE(cfi);
    std::size_t matched = 0;
    const std::uint64_t rsp = 0x7ffc0000, rbp = 0x7ffd0000;
    for (auto pc : pcs) {
        auto expected = step_by_libdw(cfi, pc, rsp, rbp);
        auto row = find_unwind_row(table.rows, pc);
        std::optional<Step> got = row ? step_by_row(*row, pc, rsp, rbp) : std::nullopt;
        if (!expected) {
            // libdw's rule is beyond rsp/rbp/rip: the table must not claim one.
            CHECK_MESSAGE(!got, "pc 0x" << std::hex << pc);
            continue;
        }
        if (got) {
            CHECK_MESSAGE(*got == *expected, "pc 0x" << std::hex << pc);
            if (*got == *expected) ++matched;
        } else {
            // INVALID in the table: only for a rule the sampler cannot express.
            CHECK_MESSAGE((row && row->kind == ECPI_UNWIND_INVALID), "pc 0x" << std::hex << pc);
        }
    }
    dwarf_cfi_end(cfi);
    elf_end(elf);
    ::close(fd);
    return matched;
}

}  // namespace

TEST_CASE("unwind table: hand-made frames") {
    auto sym = symbols(CFI_FIXTURE);
    auto t = build_unwind_table(CFI_FIXTURE);
    REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message()));
    // push rbp; mov rbp, rsp
    CHECK(row_at(*t, sym["cfi_fp_frame"]) == UnwindRow{static_cast<std::uint32_t>(sym["cfi_fp_frame"]), ECPI_UNWIND_CFA_RSP, 0, 1});
    UnwindRow body = row_at(*t, sym["cfi_fp_body"]);
    CHECK(body.kind == ECPI_UNWIND_CFA_RBP);
    CHECK(body.cfa_offset8 == 2);
    CHECK(body.rbp_offset8 == -2);
    UnwindRow ret = row_at(*t, sym["cfi_fp_ret"]);
    CHECK(ret.kind == ECPI_UNWIND_CFA_RSP);
    CHECK(ret.cfa_offset8 == 1);
    CHECK(ret.rbp_offset8 == -2);  // the rule stays "saved at CFA-16" after the pop, as CFI says
    // sub rsp, 40
    UnwindRow sub = row_at(*t, sym["cfi_sub_body"]);
    CHECK(sub.kind == ECPI_UNWIND_CFA_RSP);
    CHECK(sub.cfa_offset8 == 6);
    CHECK(sub.rbp_offset8 == 0);
    // remember/restore state
    UnwindRow early = row_at(*t, sym["cfi_remember_early_ret"]);
    CHECK(early.kind == ECPI_UNWIND_CFA_RSP);
    CHECK(early.cfa_offset8 == 1);
    UnwindRow restored = row_at(*t, sym["cfi_remember_restored"]);
    CHECK(restored.kind == ECPI_UNWIND_CFA_RSP);
    CHECK(restored.cfa_offset8 == 3);
    CHECK(restored.rbp_offset8 == -2);
    // expression CFA, outermost frame, no CFI
    CHECK(row_at(*t, sym["cfi_expression_body"]).kind == ECPI_UNWIND_INVALID);
    CHECK(row_at(*t, sym["cfi_outermost"]).kind == ECPI_UNWIND_END);
    CHECK(row_at(*t, sym["cfi_none"]).kind == ECPI_UNWIND_NONE);
    CHECK(t->invalid_rows >= 1);
    // Every byte of the fixture agrees with libdw.
    std::vector<std::uint64_t> pcs;
    for (std::uint64_t pc = sym["cfi_fp_frame"]; pc < sym["cfi_none"] + 2; ++pc) pcs.push_back(pc);
    CHECK(compare_with_libdw(CFI_FIXTURE, *t, pcs) > pcs.size() / 2);
}

TEST_CASE("unwind table: rows are sorted and compact") {
    auto t = build_unwind_table(CFI_FIXTURE);
    REQUIRE(t.ok());
    for (std::size_t i = 1; i < t->rows.size(); ++i) {
        CHECK(t->rows[i - 1].pc < t->rows[i].pc);
        const auto& a = t->rows[i - 1];
        const auto& b = t->rows[i];
        CHECK_FALSE((a.kind == b.kind && a.cfa_offset8 == b.cfa_offset8 && a.rbp_offset8 == b.rbp_offset8));
    }
}

TEST_CASE("unwind table: real binaries agree with libdw, PLT included") {
    for (const char* file : {TESTPROG_UNWINDME, "/lib/x86_64-linux-gnu/libc.so.6"}) {
        CAPTURE(file);
        auto t = build_unwind_table(file);
        REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message()));
        REQUIRE(t->rows.size() > 10);
        bool plt = false, end = false;
        for (const auto& r : t->rows) {
            plt |= r.kind == ECPI_UNWIND_PLT;
            end |= r.kind == ECPI_UNWIND_END;
        }
        CHECK(plt);  // the PLT's expression is recognized
        if (std::string(file).find("libc") != std::string::npos) CHECK(end);  // clone3, start_thread's caller
        // Random pcs across the table, and every row's first pc.
        std::mt19937_64 rng(29);
        std::vector<std::uint64_t> pcs;
        std::uniform_int_distribution<std::uint64_t> any(t->rows.front().pc, t->rows.back().pc);
        for (int i = 0; i < 20000; ++i) pcs.push_back(any(rng));
        for (const auto& r : t->rows) pcs.push_back(r.pc);
        CHECK(compare_with_libdw(file, *t, pcs) > pcs.size() / 2);
    }
}

// The sampler's search (bpf/sampler.bpf.c find_row): the first row above
// vaddr within the page's range; the row is the one before it.
static std::optional<UnwindRow> indexed_row(const std::vector<UnwindRow>& rows, const UnwindPageIndex& index,
                                            std::uint32_t vaddr, std::uint32_t& span) {
    auto [lo, hi] = page_search_range(index, static_cast<std::uint32_t>(rows.size()), vaddr);
    span = hi - lo;
    while (lo < hi) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        if (rows[mid].pc <= vaddr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return std::nullopt;
    return rows[lo - 1];
}

TEST_CASE("unwind table: the page index narrows the search to the same row") {
    for (const char* file : {CFI_FIXTURE, TESTPROG_UNWINDME, "/lib/x86_64-linux-gnu/libc.so.6"}) {
        CAPTURE(file);
        auto t = build_unwind_table(file);
        REQUIRE(t.ok());
        REQUIRE(!t->rows.empty());
        const UnwindPageIndex index = build_page_index(t->rows);
        const std::uint32_t first = t->rows.front().pc, last = t->rows.back().pc;
        REQUIRE(index.below_page.size() == ((last >> ECPI_UNWIND_PAGE_SHIFT) - (first >> ECPI_UNWIND_PAGE_SHIFT)) + 2);
        CHECK(index.below_page.back() == t->rows.size());
        // Every row's first and last byte, its neighbours, page edges, and
        // addresses below and above the table.
        std::vector<std::uint32_t> pcs = {0, first - 1, last + 1, last + (1u << ECPI_UNWIND_PAGE_SHIFT) * 3};
        for (const auto& r : t->rows) pcs.insert(pcs.end(), {r.pc, r.pc - 1, r.pc + 1});
        for (std::uint32_t page = first >> ECPI_UNWIND_PAGE_SHIFT; page <= (last >> ECPI_UNWIND_PAGE_SHIFT) + 1; ++page)
            pcs.insert(pcs.end(), {page << ECPI_UNWIND_PAGE_SHIFT, (page << ECPI_UNWIND_PAGE_SHIFT) - 1});
        std::uint32_t widest = 0;
        for (std::uint32_t vaddr : pcs) {
            CAPTURE(vaddr);
            std::uint32_t span = 0;
            CHECK(indexed_row(t->rows, index, vaddr, span) == find_unwind_row(t->rows, vaddr));
            widest = std::max(widest, span);
        }
        // A page holds at most one row per byte: the sampler's 13-step bound.
        CHECK(widest <= (1u << ECPI_UNWIND_PAGE_SHIFT));
        if (t->rows.size() >= 64) CHECK(widest < t->rows.size());  // the index narrows the search
    }
}

TEST_CASE("unwind table: forged .eh_frame neither crashes nor hangs") {
    // Copies of the fixture with bytes of .eh_frame overwritten: lengths,
    // CIE pointers, instruction bytes (loops of remember_state, huge advance
    // counts), pointer encodings.
    std::ifstream in(CFI_FIXTURE, std::ios::binary);
    std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    elf_version(EV_CURRENT);
    Elf* elf = elf_memory(image.data(), image.size());
    REQUIRE(elf);
    std::size_t shstrndx = 0;
    REQUIRE(elf_getshdrstrndx(elf, &shstrndx) == 0);
    std::uint64_t eh_off = 0, eh_size = 0;
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        gelf_getshdr(scn, &shdr);
        if (std::strcmp(elf_strptr(elf, shstrndx, shdr.sh_name), ".eh_frame") == 0) {
            eh_off = shdr.sh_offset;
            eh_size = shdr.sh_size;
        }
    }
    elf_end(elf);
    REQUIRE(eh_size > 16);
    std::mt19937 rng(2929);
    const std::string forged = std::string(CFI_FIXTURE) + ".forged";
    const unsigned char patterns[] = {0xff, 0x0a, 0x0b, 0x0c, 0x02, 0x00, 0x7f, 0x80};
    UnwindLimits limits;
    limits.max_seconds = 2;
    auto start = std::chrono::steady_clock::now();
    for (int round = 0; round < 300; ++round) {
        std::vector<char> copy = image;
        int changes = 1 + static_cast<int>(rng() % 8);
        for (int c = 0; c < changes; ++c)
            copy[eh_off + rng() % eh_size] = static_cast<char>(patterns[rng() % sizeof patterns]);
        {
            std::ofstream out(forged, std::ios::binary | std::ios::trunc);
            out.write(copy.data(), static_cast<std::streamsize>(copy.size()));
        }
        auto t = build_unwind_table(forged, limits);
        if (t.ok()) {
            for (std::size_t i = 1; i < t->rows.size(); ++i) CHECK(t->rows[i - 1].pc < t->rows[i].pc);
        }
    }
    std::remove(forged.c_str());
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("unwind table: limits refuse with a reason") {
    UnwindLimits limits;
    limits.max_fdes = 2;
    auto t = build_unwind_table(CFI_FIXTURE, limits);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message().find("FDEs") != std::string::npos);
    limits = {};
    limits.max_rows = 3;
    t = build_unwind_table("/lib/x86_64-linux-gnu/libc.so.6", limits);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message().find("rows") != std::string::npos);
    CHECK_FALSE(build_unwind_table("/dev/null").ok());
    CHECK_FALSE(build_unwind_table("/proc/self/status").ok());
}
