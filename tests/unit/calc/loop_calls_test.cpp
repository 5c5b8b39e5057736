// A loop that calls other code (calc_procedure.cpp, register_progress.h's
// CalleeShare): append() in data/cfgtest.c steps a callee-saved register and
// calls grow() when its array is full. Its count is measured by register
// progress, its pairs running through the calls, and its time is its own
// samples' and the calls' within its trips, however much the calls took.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/symbols/symbolizer.h"

using namespace ecpi::analyze;
using ecpi::store::RegisterSample;

namespace {

constexpr double kPeriodNs = 100'000;       // one snapshot per sample, 100 us apart
constexpr std::uint64_t kPerSample = 1000;  // iterations between two snapshots in the loop

// The snapshots of `stream` as calc's input has them, 100 us apart, every
// one a candidate (in the procedure) when `all_candidates`.
ProcedureInput::Registers snapshot_registers(const std::vector<RegisterSample>& stream, bool all_candidates) {
    ProcedureInput::Registers regs;
    regs.stream = stream;
    if (all_candidates)
        for (std::uint32_t p = 0; p < stream.size(); ++p) regs.candidates.push_back(p);
    regs.period_ns = kPeriodNs;
    regs.max_gap_ns = 1.6 * kPeriodNs;
    return regs;
}

int gp_of(const std::string& name) {
    static const std::array<const char*, 16> k64 = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                                    "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
    static const std::array<const char*, 16> k32 = {"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi",
                                                    "r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"};
    for (std::size_t n = 0; n < k64.size(); ++n)
        if (name == k64[n] || name == k32[n]) return static_cast<int>(n);
    return -1;
}

struct Append {
    ecpi::analyze::SymbolTable table;
    ImageBytes image;
    MachineModel model;
    const Symbol* append = nullptr;
    const Symbol* grow = nullptr;

    static Append open() {
        auto table = SymbolTable::from_elf(ECPI_CFGTEST_GCC);
        REQUIRE(table.ok());
        auto image = ImageBytes::open(ECPI_CFGTEST_GCC);
        REQUIRE(image.ok());
        auto model = MachineModel::load(MachineModel::kDefault);
        REQUIRE(model.ok());
        return {std::move(*table), std::move(*image), std::move(*model)};
    }

    // The fixture with append() and grow() found in it.
    static Append with_append() {
        Append fx = open();
        fx.append = fx.symbol("append");
        fx.grow = fx.symbol("grow");
        REQUIRE(fx.append != nullptr);
        REQUIRE(fx.grow != nullptr);
        return fx;
    }

    const Symbol* symbol(const std::string& name) const {
        for (const auto& s : table.symbols())
            if (s.name == name) return &s;
        return nullptr;
    }

    ProcedureInput input() const {
        ProcedureInput in;
        in.name = "append";
        in.start = append->start;
        in.end = table.end_of(*append);
        in.image = &image;
        return in;
    }
};

// One thread in append's loop: `snapshots` at its header, 100 us apart, the
// induction register moving kPerSample steps each; after every `every`-th
// the thread is sampled once in grow() (the call took one period, in which
// the loop did not step) and comes back to the same trip. Returns the
// stream; `in_loop` gets the loop's snapshot count, which is also the
// loop's time in periods (kPerSample iterations each).
std::vector<RegisterSample> stream(const CalcLoop& loop, std::uint64_t grow_pc, int snapshots, int every,
                                   std::uint64_t& in_loop) {
    std::vector<RegisterSample> v;
    const int gp = gp_of(loop.induction);
    REQUIRE(gp >= 0);
    std::uint64_t t = 1'000'000'000, reg = 0;
    in_loop = 0;
    for (int k = 0; k < snapshots; ++k) {
        RegisterSample s;
        s.pid = 10;
        s.tid = 10;
        s.time_ns = t;
        s.offset = loop.header;
        s.regs[static_cast<std::size_t>(gp)] = reg;
        v.push_back(s);
        ++in_loop;
        t += static_cast<std::uint64_t>(kPeriodNs);
        reg += kPerSample * static_cast<std::uint64_t>(loop.step);
        if (every > 0 && k % every == every - 1 && k + 1 < snapshots) {
            RegisterSample away = s;
            away.time_ns = t;
            away.offset = grow_pc;
            away.regs[static_cast<std::size_t>(gp)] = 77;  // grow's own use of the register, restored on return
            v.push_back(away);
            t += static_cast<std::uint64_t>(kPeriodNs);
        }
    }
    return v;
}

// Short trips: `trips` trips of `per_trip` snapshots in the loop (the
// register from 0 each trip), each followed by one in grow(); between trips
// two more snapshots outside the loop (the caller's other work). The loop's
// own time is `in_loop` periods.
std::vector<RegisterSample> short_trips(const CalcLoop& loop, std::uint64_t grow_pc, int trips, int per_trip,
                                        std::uint64_t& in_loop) {
    std::vector<RegisterSample> v;
    const auto gp = static_cast<std::size_t>(gp_of(loop.induction));
    std::uint64_t t = 1'000'000'000;
    in_loop = 0;
    auto add = [&](std::uint64_t pc, std::uint64_t reg) {
        RegisterSample s;
        s.pid = s.tid = 10;
        s.time_ns = t;
        s.offset = pc;
        s.regs[gp] = reg;
        v.push_back(s);
        t += static_cast<std::uint64_t>(kPeriodNs);
    };
    for (int trip = 0; trip < trips; ++trip) {
        for (int k = 0; k < per_trip; ++k) {
            add(loop.header, static_cast<std::uint64_t>(k) * kPerSample * static_cast<std::uint64_t>(loop.step));
            ++in_loop;
            add(grow_pc, 77);
        }
        add(grow_pc, 5);
        add(grow_pc, 6);
    }
    return v;
}

// The loop's report with the snapshots of `stream` (in_loop samples at the header).
CalcLoop measured(const Append& fx, const CalcLoop& loop, const std::vector<RegisterSample>& v, std::uint64_t in_loop) {
    ProcedureInput in = fx.input();
    in.samples = {{loop.header, in_loop}};
    in.registers = snapshot_registers(v, false);
    auto proc = analyze_procedure(in, fx.model, 1000);
    REQUIRE(proc.ok());
    REQUIRE(proc->loops.size() == 1);
    return proc->loops.front();
}

}  // namespace

TEST_CASE("a loop that calls other code is measured by a callee-saved induction register, through the calls") {
    Append fx = Append::with_append();
    ProcedureInput plain = fx.input();
    plain.samples = {{fx.append->start, 1}};  // loops are found in sampled procedures
    auto first = analyze_procedure(plain, fx.model, 1000);
    REQUIRE(first.ok());
    REQUIRE(first->loops.size() == 1);
    const CalcLoop loop = first->loops.front();
    // The register that survives the call: callee-saved by the ABI.
    REQUIRE(!loop.induction.empty());
    const int gp = gp_of(loop.induction);
    CHECK((gp == 3 || gp == 5 || gp >= 12));
    CHECK_FALSE(loop.anchored);

    SUBCASE("one call sampled in 100 snapshots of the loop: measured") {
        std::uint64_t in_loop = 0;
        const auto v = stream(loop, fx.grow->start, 400, 100, in_loop);
        const CalcLoop r = measured(fx, loop, v, in_loop);
        CAPTURE(r.why_not);
        REQUIRE(r.anchored);
        // The loop's own samples, at the rate of its own time.
        CHECK(r.iterations == doctest::Approx(static_cast<double>(in_loop * kPerSample)).epsilon(0.01));
        CHECK(r.iterations_max >= r.iterations * 1.01);  // widened by the calls' possible share
    }
    SUBCASE("a call sampled after every fourth snapshot: measured, the calls' time not counted as the loop's") {
        // Before the pairs ran through the calls this loop was refused (the
        // calls took 25% of its thread's time); counted at its pairs' rate
        // over their time, calls included, times its own time alone, it
        // would be 20% low.
        std::uint64_t in_loop = 0;
        const auto v = stream(loop, fx.grow->start, 400, 4, in_loop);
        const CalcLoop r = measured(fx, loop, v, in_loop);
        CAPTURE(r.why_not);
        REQUIRE(r.anchored);
        CHECK(r.iterations == doctest::Approx(static_cast<double>(in_loop * kPerSample)).epsilon(0.01));
        CHECK(r.iterations_min <= static_cast<double>(in_loop * kPerSample));
        CHECK(r.iterations_max >= static_cast<double>(in_loop * kPerSample));
        CHECK(r.pairs.used >= 390);  // the pairs over a call are used, not left
    }
    SUBCASE("short trips with calls: which snapshots in calls were the loop's is unknown, and it says so") {
        // 12 snapshots in the loop a trip, each followed by one in a call;
        // the last one's call and the caller's work between trips cannot be
        // told apart: the calls took 83% to 138% of the loop's own time.
        std::uint64_t in_loop = 0;
        const auto v = short_trips(loop, fx.grow->start, 40, 12, in_loop);
        const CalcLoop r = measured(fx, loop, v, in_loop);
        CHECK_FALSE(r.anchored);
        CAPTURE(r.why_not);
        CHECK(r.why_not.find("trips are too short for the snapshots to tell which") != std::string::npos);
    }
}

// found() in data/cfgtest.c looks each key up with find(), a binary search
// of the same file; GCC keeps found's pointer into the keys in r9, a
// caller-saved register, because find's code never writes it (-fipa-ra).
namespace {

struct Found {
    Append fx = Append::open();
    const Symbol* found = nullptr;
    const Symbol* find = nullptr;
    const Symbol* counted = nullptr;
    std::map<std::uint64_t, CalleeCode> callees;

    Found() {
        found = fx.symbol("found");
        find = fx.symbol("find");
        counted = fx.symbol("counted");
        REQUIRE(found != nullptr);
        REQUIRE(find != nullptr);
        REQUIRE(counted != nullptr);
    }

    // As run_calc gives it: the callee's code from the image and its symbols.
    ProcedureInput input(bool with_callees) {
        ProcedureInput in;
        in.name = "found";
        in.start = found->start;
        in.end = fx.table.end_of(*found);
        in.image = &fx.image;
        if (with_callees)
            in.callee_code = [this](std::uint64_t a) {
                auto [it, fresh] = callees.emplace(a, CalleeCode{});
                if (fresh) {
                    const FunctionExtent extent = [this](std::uint64_t f) -> std::pair<std::uint64_t, std::uint64_t> {
                        const Symbol* s = fx.table.lookup(f);
                        if (!s || s->start != f) return {0, 0};
                        return {s->start, fx.table.end_of(*s)};
                    };
                    it->second = callee_code(fx.image, extent, a);
                }
                return &it->second;
            };
        return in;
    }
};

// Trips of found's loop as branchy's `main` runs them: each a few
// snapshots long (the register from `base` each trip), nearly all of them
// in find(), one in `own_every` trips in found itself; an outer loop's
// counter (r12) changes from trip to trip; between trips the thread runs
// other code and find() for another caller (other values in found's
// invariants), except after every fifth trip, whose next snapshot is in
// the next trip. Every snapshot is kPerSample iterations of the loop after the
// one before it in its trip. `own` gets the snapshots in found's code.
std::vector<RegisterSample> lookups(const CalcLoop& loop, const Found& f, int trips, int own_every, std::uint64_t& own) {
    std::vector<RegisterSample> v;
    const auto gp = static_cast<std::size_t>(gp_of(loop.induction));
    std::uint64_t t = 1'000'000'000;
    own = 0;
    auto add = [&](std::uint64_t pc, std::uint64_t reg, std::uint64_t caller, std::uint64_t trip) {
        RegisterSample s;
        s.pid = s.tid = 10;
        s.time_ns = t;
        s.offset = pc;
        for (std::size_t r = 0; r < s.regs.size(); ++r) s.regs[r] = caller * 0x1000 + r;  // the caller's values
        s.regs[12] = trip;
        s.regs[gp] = reg;
        v.push_back(s);
        t += static_cast<std::uint64_t>(kPeriodNs);
    };
    const std::uint64_t base = 0x7f0000;
    const auto step = static_cast<std::uint64_t>(loop.step) * kPerSample;
    for (int trip = 0; trip < trips; ++trip) {
        for (std::uint64_t k = 0; k < 3; ++k) {
            const bool in_found = k == 0 && trip % own_every == 0;
            add(in_found ? loop.header : f.find->start, base + k * step, 1, static_cast<std::uint64_t>(trip));
            own += in_found;
        }
        if (trip % 5 == 4) continue;
        add(f.counted->start, 5, 2, static_cast<std::uint64_t>(trip));
        add(f.find->start, base + step, 3, static_cast<std::uint64_t>(trip));  // another caller's call
    }
    return v;
}

}  // namespace

TEST_CASE("a loop measured through a caller-saved register that its callee's code never writes") {
    Found f;
    ProcedureInput plain = f.input(true);
    plain.samples = {{f.found->start, 1}};
    auto first = analyze_procedure(plain, f.fx.model, 1000);
    REQUIRE(first.ok());
    REQUIRE(first->loops.size() == 1);
    const CalcLoop loop = first->loops.front();
    CAPTURE(loop.why_not);
    // Without the callee's code every caller-saved register may change in the call.
    ProcedureInput blind = f.input(false);
    blind.samples = plain.samples;
    auto unknown = analyze_procedure(blind, f.fx.model, 1000);
    REQUIRE(unknown.ok());
    REQUIRE(unknown->loops.size() == 1);
    CHECK(unknown->loops.front().induction.empty());
    // With it, the register GCC chose, caller-saved.
    REQUIRE(!loop.induction.empty());
    const int gp = gp_of(loop.induction);
    CHECK((gp == 0 || gp == 1 || gp == 2 || gp == 6 || gp == 7 || (gp >= 8 && gp <= 11)));

    // 1,000 trips of 3 snapshots (3,000 periods of the loop and its call),
    // one trip in 4 with a snapshot in found itself: the pairs are the
    // snapshots in find() of a trip, and the loop's time its own and find's.
    std::uint64_t own = 0;
    const auto v = lookups(loop, f, 1000, 4, own);
    ProcedureInput in = f.input(true);
    in.samples = {{loop.header, own}};
    in.registers = snapshot_registers(v, false);
    auto proc = analyze_procedure(in, f.fx.model, 1000);
    REQUIRE(proc.ok());
    REQUIRE(proc->loops.size() == 1);
    const CalcLoop r = proc->loops.front();
    CAPTURE(r.why_not);
    REQUIRE(r.anchored);
    const double truth = 1000.0 * 3 * kPerSample;
    CHECK(r.iterations == doctest::Approx(truth).epsilon(0.01));
    CHECK(r.iterations_min <= truth);
    CHECK(r.iterations_max >= truth);
    CHECK(r.iterations_max <= truth * 1.1);
    // Trips are shorter than 8 pairs' moves, but the outer loop's counter
    // tells them apart: the 199 pairs from one trip into the next are not
    // used, and none moved backwards.
    CHECK(r.pairs.used == 1000 * 2);
    CHECK(r.pairs.invariant_changed == 199);
    CHECK(r.pairs.wrong_direction == 0);

    SUBCASE("without the callee's code: not measured, and it says why") {
        ProcedureInput b = f.input(false);
        b.samples = in.samples;
        b.registers = in.registers;
        auto p = analyze_procedure(b, f.fx.model, 1000);
        REQUIRE(p.ok());
        CHECK_FALSE(p->loops.front().anchored);
        CHECK(p->loops.front().why_not.find("no register its calls leave alone") != std::string::npos);
    }
}

TEST_CASE("callee_code: the registers a call's code may write, following its direct calls") {
    Found f;
    ProcedureInput in = f.input(true);
    const CalleeCode* find = in.callee_code(f.find->start);
    REQUIRE(find != nullptr);
    CHECK(find->known);
    CHECK((find->writes & (1u << 9)) == 0);          // never r9
    CHECK((find->writes & kCallerSavedGp) != 0);     // but some caller-saved ones
    CHECK(in_callee(*find, f.find->start));
    CHECK_FALSE(in_callee(*find, f.found->start));
    // grow() calls realloc through the PLT: code out of the image, unknown.
    const Symbol* grow = f.fx.symbol("grow");
    REQUIRE(grow != nullptr);
    const CalleeCode* g = in.callee_code(grow->start);
    CHECK_FALSE(g->known);
    CHECK(g->writes == kAllGp);
    // tail() jumps to leaf(): both functions' code.
    const Symbol* tail = f.fx.symbol("tail");
    const Symbol* leaf = f.fx.symbol("leaf");
    REQUIRE(tail != nullptr);
    REQUIRE(leaf != nullptr);
    const CalleeCode* t = in.callee_code(tail->start);
    CHECK(t->known);
    CHECK(in_callee(*t, leaf->start));
}

// found_rounds(): found's loop (r13 here, callee-saved) inside a
// repetition loop (ebx), both measured through find()'s snapshots: 1,000
// trips of three snapshots each, one at the compare before the inner loop's
// jne (its end is a register: `cmp r13, r11`), none leaving.
struct FoundRounds {
    Found f;
    CalcLoop inner, outer;
    ecpi::Result<CalcProcedure> proc = ecpi::Error("found_rounds: not analysed");
};

void run_found_rounds(FoundRounds& r) {
    Found& f = r.f;
    const Symbol* rounds = f.fx.symbol("found_rounds");
    REQUIRE(rounds != nullptr);
    ProcedureInput plain = f.input(true);
    plain.name = "found_rounds";
    plain.start = rounds->start;
    plain.end = f.fx.table.end_of(*rounds);
    plain.samples = {{rounds->start, 1}};
    auto first = analyze_procedure(plain, f.fx.model, 1000);
    REQUIRE(first.ok());
    const CalcLoop* inner = nullptr;
    for (const auto& l : first->loops)
        if (l.depth == 2) inner = &l;
    REQUIRE(inner != nullptr);
    REQUIRE(!inner->induction.empty());
    const CalcLoop* outer = nullptr;  // the repetition loop: the depth-1 loop nearest above the inner one
    for (const auto& l : first->loops)
        if (l.depth == 1 && l.header < inner->header && (!outer || l.header > outer->header)) outer = &l;
    REQUIRE(outer != nullptr);
    REQUIRE(!outer->induction.empty());
    // Its own snapshots at the compare before the jne (found_rounds' `cmp
    // r13, r11`: the loop's end is a register), where the odds read it.
    std::uint64_t compare = 0;
    for (const auto& ci : first->instructions)
        if (!compare && ci.address > inner->header && ci.text.rfind("cmp", 0) == 0) compare = ci.address;
    REQUIRE(compare != 0);
    const auto gi = static_cast<std::size_t>(gp_of(inner->induction));
    const auto go = static_cast<std::size_t>(gp_of(outer->induction));
    const auto step = static_cast<std::uint64_t>(inner->step) * kPerSample;
    std::vector<RegisterSample> v;
    std::uint64_t t = 1'000'000'000, own = 0;
    for (std::uint64_t trip = 0; trip < 1000; ++trip)
        for (std::uint64_t k = 0; k < 3; ++k) {
            RegisterSample s;
            s.pid = s.tid = 10;
            s.time_ns = t;
            s.offset = k == 0 ? compare : f.find->start;
            own += k == 0;
            for (std::size_t r = 0; r < s.regs.size(); ++r) s.regs[r] = 0x1000 + r;
            s.regs[go] = trip;
            s.regs[gi] = 0x7f0000 + k * step;
            v.push_back(s);
            t += static_cast<std::uint64_t>(kPeriodNs);
        }
    ProcedureInput in = plain;
    in.samples = {{compare, own}};
    ProcedureInput::Registers regs;
    regs.stream = v;
    for (std::uint32_t p = 0; p < v.size(); ++p)  // the snapshots in the procedure, as run_calc indexes them
        if (v[p].offset >= in.start && v[p].offset < in.end) regs.candidates.push_back(p);
    regs.period_ns = kPeriodNs;
    regs.max_gap_ns = 1.6 * kPeriodNs;
    in.registers = regs;
    r.inner = *inner;
    r.outer = *outer;
    r.proc = analyze_procedure(in, f.fx.model, 1000);
}

TEST_CASE("a measured inner loop's branch odds leave its outer loop's measured count alone") {
    // found_rounds(): found's loop (r13 here, callee-saved) inside a
    // repetition loop (ebx). Both are measured through find()'s snapshots;
    // the inner loop's jne was never seen leaving in its 1,000 snapshots,
    // and its odds once anchored the exit edge, the outer loop's class, at
    // 0: the outer loop, measured at 1,000, came out 0.
    FoundRounds r;
    run_found_rounds(r);
    auto& proc = r.proc;
    const CalcLoop* inner = &r.inner;
    const CalcLoop* outer = &r.outer;
    REQUIRE(proc.ok());
    REQUIRE(proc->branches.size() >= 1);
    CHECK(std::any_of(proc->branches.begin(), proc->branches.end(),
                      [](const CalcBranch& b) { return b.snapshots >= 1000 && b.taken == b.snapshots && b.anchored; }));
    for (const auto& l : proc->loops) {
        if (l.header != inner->header && l.header != outer->header) continue;
        CAPTURE(l.why_not);
        CHECK(l.anchored);
    }
    for (const auto& b : proc->blocks) {
        if (b.address == outer->header) CHECK(b.executions == doctest::Approx(1000).epsilon(0.05));
        if (b.address == inner->header) CHECK(b.executions == doctest::Approx(3000.0 * kPerSample).epsilon(0.05));
    }
}

TEST_CASE("a loop's exit its odds never saw taken ranges up to the odds' interval, not a measured 0") {
    // append()'s loop, measured by register progress, closes its body with
    // `cmp r12, rbp; je` (the end is a register): never taken in 400
    // snapshots, its odds anchor the exit at 0. A share known to 400
    // snapshots, not exactly: Wilson's interval at two standard errors
    // allows up to 4 / 404 of the loop's count. Before, the exit and the
    // way into the loop (one class) were a measured 0, exact: a confident
    // wrong answer for a loop that ran.
    Append fx = Append::with_append();
    ProcedureInput plain = fx.input();
    plain.samples = {{fx.append->start, 1}};
    auto first = analyze_procedure(plain, fx.model, 1000);
    REQUIRE(first.ok());
    REQUIRE(first->loops.size() == 1);
    CalcLoop loop = first->loops.front();
    std::uint64_t compare = 0;  // the body's last compare, of two registers
    for (const auto& ci : first->instructions)
        if (ci.address < loop.header && ci.text.rfind("cmp", 0) == 0 && ci.text.find("ptr") == std::string::npos)
            compare = ci.address;
    REQUIRE(compare != 0);
    loop.header = compare;  // the stream's snapshots there
    std::uint64_t in_loop = 0;
    auto v = stream(loop, fx.grow->start, 400, 0, in_loop);
    for (auto& s : v) s.regs[12] = 1ULL << 40;  // the end, never reached
    ProcedureInput in = fx.input();
    in.samples = {{compare, in_loop}};
    in.registers = snapshot_registers(v, true);
    auto proc = analyze_procedure(in, fx.model, 1000);
    REQUIRE(proc.ok());
    REQUIRE(std::any_of(proc->branches.begin(), proc->branches.end(),
                        [](const CalcBranch& b) { return b.snapshots == 400 && b.taken == 0 && b.anchored; }));
    const double count = static_cast<double>(in_loop * kPerSample);
    int exits = 0;
    for (const auto& b : proc->blocks) {
        if (b.confidence != Confidence::kMeasured || b.executions >= 0.5 * count) continue;
        CAPTURE(b.address);
        CHECK(b.ranged);
        CHECK(b.executions_min <= b.executions);
        CHECK(b.executions_max == doctest::Approx(4.0 / 404 * count).epsilon(0.02));
        ++exits;
    }
    CHECK(exits >= 1);
}

namespace {

// set_bits() analyzed once without snapshots, to find its loops: the
// outer one over the words (stepping a pointer), the inner popcount.
struct SetBits {
    Append fx = Append::open();
    const Symbol* fn = nullptr;
    ProcedureInput plain;
    CalcProcedure first;
    const CalcLoop* outer = nullptr;
    const CalcLoop* inner = nullptr;
    int outer_gp = -1, inner_gp = -1;

    SetBits() {
        fn = fx.symbol("set_bits");
        REQUIRE(fn != nullptr);
        plain.name = "set_bits";
        plain.start = fn->start;
        plain.end = fx.table.end_of(*fn);
        plain.image = &fx.image;
        plain.samples = {{fn->start, 1}};
        auto analyzed = analyze_procedure(plain, fx.model, 1000);
        REQUIRE(analyzed.ok());
        first = std::move(*analyzed);
        for (const auto& l : first.loops) (l.depth == 1 ? outer : inner) = &l;
        REQUIRE(outer != nullptr);
        REQUIRE(inner != nullptr);
        outer_gp = gp_of(outer->induction);
        inner_gp = gp_of(inner->induction);
        REQUIRE(outer_gp >= 0);
        REQUIRE(inner_gp >= 0);
    }
    SetBits(const SetBits&) = delete;
    SetBits& operator=(const SetBits&) = delete;
};

struct XorShift {
    std::uint64_t x;
    std::uint64_t operator()() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    }
};

// Set bits per word: 8 to 24, drawn once (the same array every call).
std::vector<int> set_bits_per_word(XorShift& next, int words) {
    std::vector<int> bits(static_cast<std::size_t>(words));
    for (auto& b : bits) b = 8 + static_cast<int>(next() % 17);
    return bits;
}

// A snapshot at the inner loop's header, at a random iteration of a trip
// over `bits` (the array at `base`; each iteration as likely as another, as
// a timer's snapshots fall: a word with more bits holds more of them): the
// word pointer, the end pointer (rsi), the set bits counted so far, part of
// the word's own, and the word (rax, gcc's build) with the bits it has left
// (at least one: the header runs only while the word is not 0), which the
// inner loop's `and rax, rdx; jne` reads.
void snapshot_in_trip(RegisterSample& s, const SetBits& sb, XorShift& next, const std::vector<int>& bits,
                      std::uint64_t base) {
    const auto words = static_cast<std::uint64_t>(bits.size());
    long total = 0;
    for (int b : bits) total += b;
    long iteration = static_cast<long>(next() % static_cast<std::uint64_t>(total));
    std::size_t word = 0;
    long done = 0;
    while (iteration >= bits[word]) {
        iteration -= bits[word];
        done += bits[word];
        ++word;
    }
    const auto counted = static_cast<int>(iteration);
    s.offset = sb.inner->header;
    s.regs[static_cast<std::size_t>(sb.outer_gp)] = base + 8 * word;
    s.regs[6] = base + 8 * words;  // rsi: the end
    s.regs[static_cast<std::size_t>(sb.inner_gp)] = static_cast<std::uint64_t>(done + counted);
    s.regs[0] = (std::uint64_t{1} << (bits[word] - counted)) - 1;
}

}  // namespace

TEST_CASE("an inner loop too short for pairs is measured through its outer loop, by a counter the outer loop leaves alone") {
    // set_bits(): per word (rdi, step 8), `while (w) { w &= w - 1; total++; }`
    // with total (ecx) running on across the words. One snapshot per call,
    // 100 us apart, at a random place of a 1,024-word trip: no two in one
    // trip, so neither loop's pairs measure it (short trips). Against the
    // word pointer, total rises by the set bits per word on every snapshot:
    // the inner loop's count is the outer loop's times that ratio. Before,
    // the inner loop was not measured, and its count was its samples' over
    // the model's cycles (bits in bench/accuracy: -47%).
    SetBits sb;
    const Append& fx = sb.fx;
    const ProcedureInput& plain = sb.plain;
    const CalcLoop* outer = sb.outer;
    const CalcLoop* inner = sb.inner;
    REQUIRE(inner->step == 1);
    constexpr int kWords = 1024, kCalls = 3000;
    XorShift next{88172645463325252ull};
    const std::vector<int> bits = set_bits_per_word(next, kWords);
    long total = 0;
    for (int b : bits) total += b;
    const double per_word = static_cast<double>(total) / kWords;
    std::vector<RegisterSample> v;
    const std::uint64_t base = 0x5555'0000'0000;
    for (int call = 0; call < kCalls; ++call) {
        RegisterSample s;
        s.pid = s.tid = 10;
        s.time_ns = 1'000'000'000 + static_cast<std::uint64_t>(call) * static_cast<std::uint64_t>(kPeriodNs);
        snapshot_in_trip(s, sb, next, bits, base);
        v.push_back(s);
    }
    ProcedureInput in = plain;
    in.samples = {{inner->header, 2800}, {outer->header, 100}, {outer->step_address, 200}};
    in.registers = snapshot_registers(v, true);
    auto proc = analyze_procedure(in, fx.model, 1000);
    REQUIRE(proc.ok());
    const CalcLoop* measured_inner = nullptr;
    for (const auto& l : proc->loops)
        if (l.header == inner->header) measured_inner = &l;
    REQUIRE(measured_inner != nullptr);
    CAPTURE(measured_inner->why_not);
    REQUIRE(measured_inner->anchored);
    CHECK(measured_inner->per_outer_iteration == doctest::Approx(per_word).epsilon(0.03));
    double outer_count = 0, inner_count = 0;
    const CalcBlock* inner_block = nullptr;
    for (const auto& b : proc->blocks) {
        if (b.address <= outer->step_address && outer->step_address < b.address + 16 && b.address > inner->header)
            outer_count = b.executions;
        if (b.address == inner->header) {
            inner_count = b.executions;
            inner_block = &b;
        }
    }
    REQUIRE(inner_block != nullptr);
    REQUIRE(outer_count > 0);
    CHECK(inner_block->confidence == Confidence::kMeasured);
    CHECK(inner_count == doctest::Approx(measured_inner->per_outer_iteration * outer_count).epsilon(0.02));
    CHECK(inner_block->executions_min <= inner_count);
    CHECK(inner_block->executions_max >= inner_count);
}

TEST_CASE("an outer loop too short for pairs runs its entries times the trip its exit's bound gives") {
    // set_bits() again, called 3,000 times (the callers' measured count)
    // over the same 1,024 words: one snapshot per call in the loop, none
    // two in one trip. `add rdi, 8; cmp rdi, rsi; jne` leaves the loop when
    // the word pointer meets the end pointer, which the loop never writes:
    // from each snapshot the words left are (rsi - rdi) / 8, and the one
    // nearest a trip's start gives the trip, 1,024 words. A few snapshots
    // at the guard (`test esi, esi; jle`, n = 1,024) say the calls enter the
    // loop. Before, the outer loop's count was its 300 samples over the
    // model's cycles, and the inner loop's count that times its ratio.
    SetBits sb;
    const Append& fx = sb.fx;
    const Symbol* fn = sb.fn;
    const ProcedureInput& plain = sb.plain;
    const CalcLoop* outer = sb.outer;
    const CalcLoop* inner = sb.inner;
    constexpr int kWords = 1024, kCalls = 3000;
    XorShift next{0x2545F4914F6CDD1Dull};
    const std::vector<int> bits = set_bits_per_word(next, kWords);
    long total = 0;
    for (int b : bits) total += b;
    const double per_word = static_cast<double>(total) / kWords;
    std::vector<RegisterSample> v;
    const std::uint64_t base = 0x5555'0000'0000;
    std::uint64_t t = 1'000'000'000;
    for (int call = 0; call < kCalls; ++call) {
        RegisterSample s;
        s.pid = s.tid = 10;
        s.time_ns = t += static_cast<std::uint64_t>(kPeriodNs);
        if (call % 300 == 0) {  // at the guard: rdi the words, esi their number
            s.offset = fn->start;
            s.regs[7] = base;
            s.regs[6] = kWords;
            v.push_back(s);
            continue;
        }
        snapshot_in_trip(s, sb, next, bits, base);
        v.push_back(s);
    }
    ProcedureInput in = plain;
    in.samples = {{inner->header, 2800}, {outer->header, 100}, {outer->step_address, 200}};
    in.registers = snapshot_registers(v, true);
    in.entry = ProcedureInput::EntryCount{kCalls, false};
    auto proc = analyze_procedure(in, fx.model, 1000);
    REQUIRE(proc.ok());
    const CalcLoop* outer_report = nullptr;
    for (const auto& l : proc->loops)
        if (l.header == outer->header) outer_report = &l;
    REQUIRE(outer_report != nullptr);
    CHECK(outer_report->trip_length == doctest::Approx(kWords).epsilon(0.01));
    const CalcBlock* step_block = nullptr;
    const CalcBlock* inner_block = nullptr;
    for (const auto& b : proc->blocks) {
        if (b.address <= outer->step_address && outer->step_address < b.address + 16 && b.address > inner->header)
            step_block = &b;
        if (b.address == inner->header) inner_block = &b;
    }
    REQUIRE(step_block != nullptr);
    REQUIRE(inner_block != nullptr);
    const double trips = static_cast<double>(kCalls) * kWords;
    CHECK(step_block->executions == doctest::Approx(trips).epsilon(0.03));
    CHECK(step_block->executions_min <= trips);
    CHECK(step_block->executions_max >= trips);
    CHECK(inner_block->executions == doctest::Approx(per_word * trips).epsilon(0.05));
}
