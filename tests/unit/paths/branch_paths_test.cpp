// Branch paths (VPP 4): cutting block-entry streams on hand-made CFGs
// (loops, calls and returns, recursion, merged and unseen blocks, burst
// edges), the cost subtraction, the histogram, the saved document, and the
// report's net variation with long occurrences kept apart.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "ecpi/analyze/paths/branch_paths.h"
#include "ecpi/analyze/paths/branch_paths_report.h"
#include "ecpi/analyze/paths/perf_script.h"
#include "ecpi/store/branch_paths.h"

using namespace ecpi;
using namespace ecpi::analyze;

namespace {

// A procedure whose block i starts at start + 0x10 * i.
struct Shape {
    std::string name;
    std::uint64_t start;
    std::uint32_t blocks;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;     // fall-through or jump
    std::vector<std::array<std::uint32_t, 3>> conditionals;          // block, taken, fall-through
    std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>> loops;  // header, blocks
    std::vector<std::uint32_t> unseen;                               // blocks without a callback
};

PathProcedure make(const Shape& s) {
    PathProcedure p;
    p.name = s.name;
    p.start = s.start;
    p.end = s.start + 0x10 * s.blocks;
    p.successors.resize(s.blocks);
    p.loop_headers.resize(s.blocks);
    p.taken.assign(s.blocks, kNoBlock);
    p.fall_through.assign(s.blocks, kNoBlock);
    p.recorded.assign(s.blocks, true);
    for (std::uint32_t b = 0; b < s.blocks; b++) p.block_starts.push_back(s.start + 0x10 * b);
    for (auto [a, b] : s.edges) p.successors[a].push_back(b);
    for (auto c : s.conditionals) {
        p.successors[c[0]].push_back(c[1]);
        p.successors[c[0]].push_back(c[2]);
        p.taken[c[0]] = c[1];
        p.fall_through[c[0]] = c[2];
    }
    for (const auto& [header, blocks] : s.loops)
        for (auto b : blocks) p.loop_headers[b].push_back(header);
    for (auto b : s.unseen) p.recorded[b] = false;
    return p;
}

class FakeCode : public PathCodeMap {
public:
    void add(PathProcedure p) { procs_.push_back(std::move(p)); }
    const PathProcedure* procedure_at(std::uint64_t a) override {
        lookups++;
        for (const auto& p : procs_)
            if (a >= p.start && a < p.end) return &p;
        return nullptr;
    }

    std::uint64_t lookups = 0;  // procedure_at's calls

private:
    std::vector<PathProcedure> procs_;
};

// A loop: 0 entry; 1 header; 2 tests (taken 3, else 4); 3; 4 latch (back to
// 1, or out to 5); 5 returns. A call from 3 goes to `callee` when given.
Shape looping() {
    return {"loop", 0x1000, 6, {{0, 1}, {1, 2}, {3, 4}}, {{2, 3, 4}, {4, 1, 5}}, {{1, {1, 2, 3, 4}}}, {}};
}

std::uint64_t at(const Shape& s, std::uint32_t block, std::uint64_t offset = 4) { return s.start + 0x10 * block + offset; }

store::BranchPathProfile cut(FakeCode& code, double cost, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& entries) {
    PathCutter cutter(code, cost);
    cutter.begin_burst(0);
    for (auto [address, ticks] : entries) cutter.block(0, address, ticks);
    store::BranchPathProfile profile;
    cutter.finish(profile);
    return profile;
}

const store::BranchPath* find(const store::BranchPathProfile& p, const std::string& proc, std::vector<std::uint64_t> blocks) {
    for (const auto& path : p.paths)
        if (path.procedure == proc && path.blocks == blocks) return &path;
    return nullptr;
}

}  // namespace

TEST_CASE("branch paths: a loop's iterations are paths from the header to the back edge") {
    Shape s = looping();
    FakeCode code;
    code.add(make(s));
    // 0 1 2 3 4 | 1 2 4 | 1 2 3 4 | 1 2 4 5 (then a block elsewhere ends the burst's last path unseen)
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {
        {at(s, 0), 0},   {at(s, 1), 10},  {at(s, 2), 20},  {at(s, 3), 30},  {at(s, 4), 40},
        {at(s, 1), 50},  {at(s, 2), 60},  {at(s, 4), 70},
        {at(s, 1), 100}, {at(s, 2), 110}, {at(s, 3), 120}, {at(s, 4), 150},
        {at(s, 1), 170}, {at(s, 2), 180}, {at(s, 4), 190}, {at(s, 5), 200}};
    auto p = cut(code, 0, e);
    // The burst began inside the procedure: its first path's start is unknown.
    CHECK(p.blocks == 16);
    CHECK(p.blocks_at_edges == 5 + 4);  // 0..4 before the first cut; 1 2 4 5, whose end was not seen
    const auto* short_way = find(p, "loop", {at(s, 1, 0), at(s, 2, 0), at(s, 4, 0)});
    const auto* long_way = find(p, "loop", {at(s, 1, 0), at(s, 2, 0), at(s, 3, 0), at(s, 4, 0)});
    REQUIRE(short_way);
    REQUIRE(long_way);
    CHECK(short_way->occurrences == 1);
    CHECK(short_way->total_ticks == 50);  // 50 -> 100
    CHECK(short_way->start_kind == "loop");
    CHECK(short_way->end_kind == "back-edge");
    CHECK(short_way->decisions == "N");   // block 2 fell through to 4
    CHECK(long_way->occurrences == 1);
    CHECK(long_way->total_ticks == 70);   // 100 -> 170
    CHECK(long_way->decisions == "T");
    CHECK(p.occurrences == 2);
}

TEST_CASE("branch paths: a call ends the caller's path, the callee's path runs to its return, the caller resumes") {
    Shape caller{"caller", 0x1000, 3, {{0, 1}, {1, 2}}, {}, {}, {}};
    Shape callee{"callee", 0x2000, 2, {{0, 1}}, {}, {}, {}};
    FakeCode code;
    code.add(make(caller));
    code.add(make(callee));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {
        {at(callee, 1), 0},                     // a return from somewhere: unseen start
        {at(caller, 0), 5},                      // enters caller (cut: unknown kind, a "return")
        {at(caller, 1), 10},                     // calls callee from block 1
        {at(callee, 0), 20}, {at(callee, 1), 25},  // callee's path: entry to return
        {at(caller, 2), 40},                     // back in the caller after the call
        {at(callee, 0), 60},                     // calls again: ends the resumed path
        {at(callee, 1), 64}, {at(caller, 2), 70}};
    auto p = cut(code, 0, e);
    const auto* callee_path = find(p, "callee", {at(callee, 0, 0), at(callee, 1, 0)});
    REQUIRE(callee_path);
    CHECK(callee_path->occurrences == 2);
    CHECK(callee_path->total_ticks == (40 - 20) + (70 - 60));
    CHECK(callee_path->min_ticks == 10);
    CHECK(callee_path->start_kind == "entry");
    CHECK(callee_path->end_kind == "return");
    const auto* before_call = find(p, "caller", {at(caller, 0, 0), at(caller, 1, 0)});
    REQUIRE(before_call);
    CHECK(before_call->end_kind == "call");
    CHECK(before_call->total_ticks == 15);
    const auto* after_call = find(p, "caller", {at(caller, 2, 0)});
    REQUIRE(after_call);
    CHECK(after_call->start_kind == "return");
    CHECK(after_call->total_ticks == 20);  // 40 -> 60 (the second call)
}

TEST_CASE("branch paths: recursion re-enters the entry; a return into an older frame is a return") {
    Shape f{"f", 0x1000, 3, {{0, 1}, {1, 2}}, {}, {}, {}};
    FakeCode code;
    code.add(make(f));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {
        {at(f, 0), 0}, {at(f, 0), 3},           // unseen start, then f calls itself at once: entry again
        {at(f, 1), 7}, {at(f, 0), 9},           // and again from block 1
        {at(f, 2), 15},                          // innermost returns... into block 2 of its caller: 0 -> 2 does not follow
        {at(f, 0), 30}};
    auto p = cut(code, 0, e);
    const auto* entered = find(p, "f", {at(f, 0, 0), at(f, 1, 0)});
    REQUIRE(entered);
    CHECK(entered->start_kind == "entry");
    CHECK(entered->end_kind == "call");
    CHECK(entered->total_ticks == 6);
    const auto* innermost = find(p, "f", {at(f, 0, 0)});
    REQUIRE(innermost);
    CHECK(innermost->end_kind == "return");
    CHECK(innermost->total_ticks == 6);
    const auto* resumed = find(p, "f", {at(f, 2, 0)});
    REQUIRE(resumed);
    CHECK(resumed->start_kind == "return");
}

TEST_CASE("branch paths: merged IR blocks, unseen blocks and irreducible returns to a block keep paths acyclic") {
    // 0 -> 1 (no callback) -> 2; 2 -> 3; 3 jumps back to 2 without a natural loop (irreducible).
    Shape s{"g", 0x1000, 4, {{0, 1}, {1, 2}, {2, 3}, {3, 2}}, {}, {}, {1}};
    FakeCode code;
    code.add(make(s));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {
        {at(s, 3), 0},                           // unseen start
        {at(s, 0), 10},                          // "return" into g's entry block? block 0 of another... same proc, entry: cut
        {at(s, 0, 8), 12},                       // a second callback in block 0 (merged IR blocks)
        {at(s, 2), 20},                          // 0 -> 1 (unseen) -> 2
        {at(s, 3), 30}, {at(s, 2), 40},          // 3 -> 2: already on the path: cut
        {at(s, 3), 50}, {at(s, 2), 60}};
    auto p = cut(code, 0, e);
    const auto* first = find(p, "g", {at(s, 0, 0), at(s, 2, 0), at(s, 3, 0)});
    REQUIRE(first);
    CHECK(first->total_ticks == 30);
    CHECK(first->decisions == "?");  // 0 -> 2 went through a block without a callback
    const auto* again = find(p, "g", {at(s, 2, 0), at(s, 3, 0)});
    REQUIRE(again);
    CHECK(again->start_kind == "loop");
    CHECK(again->total_ticks == 20);
}

TEST_CASE("branch paths: the recording's cost per entry is subtracted, never below zero") {
    Shape s = looping();
    FakeCode code;
    code.add(make(s));
    // Two iterations of 1 2 4 (3 entries each): 40 and 12 ticks.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {
        {at(s, 4), 0}, {at(s, 1), 10}, {at(s, 2), 20}, {at(s, 4), 30},
        {at(s, 1), 50}, {at(s, 2), 54}, {at(s, 4), 58}, {at(s, 1), 62}};
    auto p = cut(code, 5, e);
    const auto* path = find(p, "loop", {at(s, 1, 0), at(s, 2, 0), at(s, 4, 0)});
    REQUIRE(path);
    CHECK(path->occurrences == 2);
    CHECK(path->total_ticks == (40 - 15) + 0);  // 12 - 15 clamps at 0
    CHECK(path->min_ticks == 0);
}

TEST_CASE("branch paths: the recorder's own pauses come out of the path they fell in") {
    Shape s = looping();
    FakeCode code;
    code.add(make(s));
    PathCutter cutter(code, 0);
    cutter.begin_burst(0);
    cutter.block(0, at(s, 4), 0);
    cutter.pause(0, 7);  // nothing open yet: the burst's first path is unknown
    cutter.block(0, at(s, 1), 10);
    cutter.block(0, at(s, 2), 20);
    cutter.pause(0, 25);  // the stage was copied out after block 2's stamp
    cutter.block(0, at(s, 4), 60);
    cutter.block(0, at(s, 1), 70);  // 1 2 4 took 60 ticks, 25 of them the recorder's
    cutter.block(0, at(s, 2), 80);
    cutter.block(0, at(s, 4), 90);
    cutter.block(0, at(s, 1), 100);  // the next one took 30 and paused nowhere
    store::BranchPathProfile p;
    cutter.finish(p);
    const auto* path = find(p, "loop", {at(s, 1, 0), at(s, 2, 0), at(s, 4, 0)});
    REQUIRE(path);
    CHECK(path->occurrences == 2);
    CHECK(path->total_ticks == 35 + 30);
    CHECK(path->min_ticks == 30);
}

TEST_CASE("branch paths: entries outside every procedure break the stream") {
    Shape s = looping();
    FakeCode code;
    code.add(make(s));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {
        {at(s, 4), 0}, {at(s, 1), 10}, {at(s, 2), 20}, {0x9000, 25}, {at(s, 4), 30}, {at(s, 1), 40}};
    auto p = cut(code, 0, e);
    CHECK(p.blocks_outside == 1);
    CHECK(p.occurrences == 0);  // the path 1 2 ... lost its middle: dropped, not cut short
}

TEST_CASE("branch paths: histogram buckets cover every value with eighth-octave resolution") {
    std::uint32_t last = 0;
    for (std::uint64_t v = 0; v < 100000; v += (v < 100 ? 1 : 37)) {
        auto b = store::tick_bucket(v);
        CHECK(store::tick_bucket_low(b) <= v);
        CHECK(v <= store::tick_bucket_high(b));
        CHECK(b >= last);
        last = b;
        if (v >= 8) CHECK(double(store::tick_bucket_high(b) - store::tick_bucket_low(b) + 1) <= double(v) / 8 + 1);
    }
    CHECK(store::tick_bucket(~0ull) <= 8 * 62 + 7);
}

TEST_CASE("branch paths: the saved document round-trips and rejects what it cannot read") {
    store::BranchPathProfile p;
    p.source = "instrumented";
    p.image = "/bin/x";
    p.tick_unit = "tsc";
    p.ticks_per_ns = 2.1;
    p.sample_every = 10;
    store::BranchPath path;
    path.procedure = "main";
    path.procedure_start = 0x1000;
    path.start_kind = "loop";
    path.end_kind = "back-edge";
    path.blocks = {0x1010, 0x1020};
    path.decisions = "T";
    for (std::uint64_t t : {100u, 100u, 900u}) {
        path.occurrences++;
        path.total_ticks += t;
        auto& b = path.histogram[store::tick_bucket(t)];
        b.occurrences++;
        b.ticks += t;
    }
    path.min_ticks = 100;
    p.paths.push_back(path);
    auto j = store::branch_paths_to_json(p);
    auto back = store::branch_paths_from_json(j);
    REQUIRE(back.ok());
    REQUIRE(back->paths.size() == 1);
    CHECK(back->paths[0].blocks == path.blocks);
    CHECK(back->paths[0].histogram.size() == 2);
    CHECK(back->paths[0].quantile_ticks(0.5) == 100);
    CHECK(back->ticks_per_ns == doctest::Approx(2.1));

    auto bad = j;
    bad["paths"][0]["occurrences"] = 4;  // the histogram holds 3
    CHECK(!store::branch_paths_from_json(bad).ok());
    bad = j;
    bad["version"] = 99;
    auto newer = store::branch_paths_from_json(bad);
    REQUIRE(!newer.ok());
    CHECK(newer.error().message().find("newer") != std::string::npos);
    CHECK(!store::branch_paths_from_json(nlohmann::json{{"schema", "ecpi.probe"}}).ok());
}

TEST_CASE("branch paths report: net variation, rank by time beside it, long occurrences apart") {
    store::BranchPathProfile p;
    p.source = "instrumented";
    p.image = "/nonexistent";
    p.tick_unit = "tsc";
    p.ticks_per_ns = 1;  // ticks are ns
    p.sample_every = 4;
    auto add = [&](const char* proc, std::uint64_t block, std::vector<std::uint64_t> times) {
        store::BranchPath path;
        path.procedure = proc;
        path.procedure_start = block;
        path.start_kind = "loop";
        path.blocks = {block};
        path.min_ticks = ~0ull;
        for (auto t : times) {
            path.occurrences++;
            path.total_ticks += t;
            path.min_ticks = std::min(path.min_ticks, t);
            auto& b = path.histogram[store::tick_bucket(t)];
            b.occurrences++;
            b.ticks += t;
        }
        p.paths.push_back(path);
    };
    // steady: 100 x 100 ns (10 us) plus one interrupted occurrence of 50 us.
    std::vector<std::uint64_t> steady(100, 100);
    steady.push_back(50000);
    add("steady", 0x10, steady);
    // varying: 20 x 50 ns and 20 x 300 ns: 7 us in all, 5 us of variation.
    std::vector<std::uint64_t> varying(20, 50);
    varying.insert(varying.end(), 20, 300);
    add("varying", 0x20, varying);
    BranchPathsReportOptions o;
    auto doc = branch_paths_report_json(p, o, nullptr, {});
    REQUIRE(doc["paths"].size() == 2);
    const auto& first = doc["paths"][0];
    CHECK(first["procedure"] == "varying");
    CHECK(first["net_variation_ns"].get<double>() == doctest::Approx(5000));
    CHECK(first["estimated_net_variation_ns"].get<double>() == doctest::Approx(20000));
    CHECK(first["rank_by_time"] == 2);
    CHECK(first["rank_by_variation"] == 1);
    const auto& second = doc["paths"][1];
    CHECK(second["procedure"] == "steady");
    CHECK(second["occurrences"] == 100);
    CHECK(second["long_occurrences"] == 1);
    CHECK(second["long_time_ns"].get<double>() == doctest::Approx(50000));
    CHECK(second["net_variation_ns"].get<double>() == doctest::Approx(0));
    CHECK(second["net_variation_all_ns"].get<double>() == doctest::Approx(50000 - 100));
    CHECK(second["rank_by_time"] == 1);
    o.rank = BranchPathRank::kTime;
    auto by_time = branch_paths_report_json(p, o, nullptr, {});
    CHECK(by_time["paths"][0]["procedure"] == "steady");
    // Compared with itself, the top set overlaps fully.
    BranchPathsComparison c{&p, "same", 2};
    auto compared = branch_paths_report_json(p, BranchPathsReportOptions{}, nullptr, c);
    CHECK(compared["compare"]["overlap"] == 2);
    CHECK(!render_branch_paths_text(compared).empty());
}

TEST_CASE("branch paths report: an inline build's estimated totals count the spans' occurrences with the bursts'") {
    // --sample 1/10 shared by spans and bursts: A was seen 40 times in
    // bursts and 960 times in spans, B 10 and 240: 1,000 and 250 of the
    // sampled occurrences, 10,000 and 2,500 in the run.
    store::BranchPathProfile p;
    p.source = "instrumented";
    p.image = "/nonexistent";
    p.tick_unit = "tsc";
    p.ticks_per_ns = 1;
    p.sample_every = 10;
    p.spans = 100;
    auto add = [&](const char* proc, std::uint64_t burst, std::uint64_t spans, std::uint64_t stamped, double fitted) {
        store::BranchPath path;
        path.procedure = proc;
        path.procedure_start = 0x10;
        path.start_kind = "loop";
        path.blocks = {0x10};
        path.occurrences = burst;
        path.total_ticks = burst * stamped;
        path.min_ticks = stamped;
        path.histogram[store::tick_bucket(stamped)] = {burst, burst * stamped};
        path.span_occurrences = spans;
        path.fitted = true;
        path.fit_mean_ticks = fitted;
        p.paths.push_back(path);
    };
    add("a", 40, 960, 30, 10);
    add("b", 10, 240, 90, 40);
    auto doc = branch_paths_report_json(p, BranchPathsReportOptions{}, nullptr, {});
    REQUIRE(doc["paths"].size() == 2);
    for (const auto& j : doc["paths"]) {
        const bool a = j["procedure"] == "a";
        CHECK(j["estimated_total_time_ns"].get<double>() == doctest::Approx(a ? 10000 * 10 : 2500 * 40));
        // No variation in the bursts (one duration each): none estimated.
        CHECK(j["estimated_net_variation_ns"].get<double>() == doctest::Approx(0));
    }
}

TEST_CASE("branch paths report: an undetermined path is timed by its range's middle, and says so") {
    store::BranchPathProfile p;
    p.source = "instrumented";
    p.image = "/nonexistent";
    p.tick_unit = "tsc";
    p.ticks_per_ns = 1;
    p.spans = 100;
    auto add = [&](const char* proc, double mean, double low, double high, bool undetermined) {
        store::BranchPath path;
        path.procedure = proc;
        path.procedure_start = 0x10;
        path.start_kind = "loop";
        path.blocks = {0x10};
        path.occurrences = 10;
        path.total_ticks = 10 * 20;
        path.min_ticks = 20;
        path.histogram[store::tick_bucket(20)] = {10, 10 * 20};
        path.span_occurrences = 100;
        path.fitted = true;
        path.fit_mean_ticks = mean;
        path.fit_low_ticks = low;
        path.fit_high_ticks = high;
        path.fit_undetermined = undetermined;
        p.paths.push_back(path);
    };
    add("held", 0, 0, 30, true);     // the fit's point is 0; the spans allow 0-30
    add("pinned", 10, 9, 11, false);
    // The saved document keeps the range.
    auto saved = store::branch_paths_from_json(store::branch_paths_to_json(p));
    REQUIRE(saved.ok());
    CHECK(saved->paths[0].fit_undetermined);
    CHECK(saved->paths[0].fit_high_ticks == 30);
    BranchPathsReportOptions o;
    o.rank = BranchPathRank::kTime;
    auto doc = branch_paths_report_json(*saved, o, nullptr, {});
    REQUIRE(doc["paths"].size() == 2);
    const auto& first = doc["paths"][0];
    CHECK(first["procedure"] == "held");  // 15 a time, not 0: first by time
    CHECK(first["time_method"] == "range");
    CHECK(first["fit"]["undetermined"] == true);
    CHECK(first["fit"]["low_ns"].get<double>() == doctest::Approx(0));
    CHECK(first["fit"]["high_ns"].get<double>() == doctest::Approx(30));
    CHECK(first["time_share"].get<double>() == doctest::Approx(15.0 / 25));
    CHECK(doc["paths"][1]["time_method"] == "fit");
    const std::string text = render_branch_paths_text(doc);
    CHECK(text.find("0.0ns-30.0ns?") != std::string::npos);
}

TEST_CASE("branch paths from LBR stacks: straight runs between records, times from their cycles") {
    // A loop laid out as compilers do: 2 falls through to 3 or jumps to 4;
    // 4 jumps back to the header 1 or falls out to 5.
    Shape s{"lbr", 0x1000, 6, {{0, 1}, {1, 2}, {3, 4}}, {{2, 4, 3}, {4, 1, 5}}, {{1, {1, 2, 3, 4}}}, {}};
    FakeCode code;
    code.add(make(s));
    LbrSample sample;
    sample.ip = 0x1014;
    // Newest first: back edge; taken at 2; back edge (after 1 2 3 4 straight); back edge (oldest).
    sample.branches = {{0x104c, 0x1010, false, true, false, false, 5},
                       {0x102c, 0x1040, false, true, false, false, 6},
                       {0x104c, 0x1010, false, true, false, false, 12},
                       {0x104c, 0x1010, false, true, false, false, 9}};
    PathCutter cutter(code, 0);
    REQUIRE(feed_lbr_sample(cutter, code, sample, 0, 0));
    store::BranchPathProfile p;
    cutter.finish(p);
    // The first iteration's start is the oldest record: unknown how it began.
    REQUIRE(p.paths.size() == 1);
    CHECK(p.paths[0].blocks == std::vector<std::uint64_t>{0x1010, 0x1020, 0x1040});
    CHECK(p.paths[0].decisions == "T");
    CHECK(p.paths[0].total_ticks == 6 + 5);
    CHECK(p.paths[0].start_kind == "loop");

    // A stack without cycle counts cannot time paths.
    for (auto& b : sample.branches) b.cycles = 0;
    PathCutter none(code, 0);
    CHECK(!feed_lbr_sample(none, code, sample, 0, 0));
}

TEST_CASE("branch paths: a transition seen before is not looked up again, and cuts as it did") {
    // A loop whose block 3 calls `callee` on every turn: each turn leaves
    // the loop's procedure and comes back, which looked both procedures up
    // anew at every entry (and each block by a binary search).
    Shape loop = looping();
    Shape callee{"callee", 0x2000, 2, {{0, 1}}, {}, {}, {}};
    FakeCode code;
    code.add(make(loop));
    code.add(make(callee));
    std::vector<std::pair<std::uint64_t, std::uint64_t>> e = {{at(loop, 0), 0}};
    std::uint64_t now = 0;
    for (int turn = 0; turn < 1000; turn++)
        for (auto address : {at(loop, 1), at(loop, 2), at(loop, 3), at(callee, 0), at(callee, 1), at(loop, 4)})
            e.emplace_back(address, now += 10);
    auto p = cut(code, 0, e);
    CHECK(code.lookups <= 4);  // the first entry and the first turn's two crossings (was one per crossing: 2,001)
    const auto* called = find(p, "callee", {at(callee, 0, 0), at(callee, 1, 0)});
    REQUIRE(called);
    CHECK(called->occurrences == 1000);
    CHECK(called->start_kind == "entry");
    CHECK(called->end_kind == "return");
    const auto* turn = find(p, "loop", {at(loop, 1, 0), at(loop, 2, 0), at(loop, 3, 0)});
    REQUIRE(turn);
    CHECK(turn->occurrences == 999);  // the first turn's start is unseen (the burst began at block 0)
    CHECK(turn->end_kind == "call");
    const auto* resumed = find(p, "loop", {at(loop, 4, 0)});
    REQUIRE(resumed);
    CHECK(resumed->occurrences == 999);  // the last turn's stays open
    CHECK(resumed->start_kind == "return");
}
