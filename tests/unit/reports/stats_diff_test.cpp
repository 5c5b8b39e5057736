// The arithmetic of `ecpi stats` (DCPI Figure 3) and `ecpi diff` on flat
// profiles with known counts, and both reports end to end on epochs built
// in memory over data/annotest.c.
#include <doctest/doctest.h>

#include <cmath>

#include "annotest_fixture.h"
#include "ecpi/analyze/reports/diff.h"
#include "ecpi/analyze/reports/stats.h"

using namespace ecpi::analyze;
using namespace ecpi::analyze::testing;
using ecpi::store::EpochContents;
using ecpi::store::ImageId;

namespace {

FlatProfile flat(std::uint64_t total, std::vector<FlatRow> rows, const std::string& event = "cpu-clock") {
    FlatProfile p;
    p.event = event;
    p.period = 1000;
    p.total = total;
    p.rows = std::move(rows);
    return p;
}

FlatRow row(const std::string& procedure, std::uint64_t samples, const std::string& image = "/bin/app",
            const std::string& build_id = "aa11") {
    return FlatRow{procedure, image, build_id, samples};
}

const StatsRow& find(const StatsReport& report, const std::string& procedure) {
    for (const auto& r : report.rows)
        if (r.procedure == procedure) return r;
    FAIL("no row " << procedure);
    throw 0;
}

LoadedProfile loaded(const std::string& spec, EpochContents contents) {
    LoadedProfile p;
    p.source.spec = spec;
    p.source.database = "/nonexistent/" + spec;
    p.source.epoch = "00001";
    p.contents = std::move(contents);
    return p;
}

}  // namespace

TEST_CASE("stats: range%, sum%, mean, sample std-dev, absent as zero, order") {
    // smooth varies 10/20/30; steady is 50 everywhere; rare appears once.
    std::vector<FlatProfile> sets = {
        flat(100, {row("steady", 50), row("smooth", 10), row("rare", 40)}),
        flat(70, {row("steady", 50), row("smooth", 20)}),
        flat(80, {row("steady", 50), row("smooth", 30)}),
    };
    StatsReport report = compute_stats({{"run1"}, {"run2"}, {"run3"}}, sets, Grouping::kProcedure);
    CHECK(report.event == "cpu-clock");
    CHECK(report.total == 250);
    REQUIRE(report.sets.size() == 3);
    CHECK(report.sets[1].total == 70);
    REQUIRE(report.rows.size() == 3);

    const StatsRow& smooth = find(report, "smooth");
    CHECK(smooth.samples == std::vector<std::uint64_t>{10, 20, 30});
    CHECK(smooth.sum == 60);
    CHECK(smooth.n == 3);
    CHECK(smooth.mean == doctest::Approx(20.0));
    CHECK(smooth.stddev == doctest::Approx(10.0));  // sqrt((100 + 0 + 100) / 2)
    CHECK(smooth.min == 10);
    CHECK(smooth.max == 30);
    CHECK(smooth.range_percent == doctest::Approx(100.0 * 20 / 60));
    CHECK(smooth.sum_percent == doctest::Approx(100.0 * 60 / 250));

    const StatsRow& rare = find(report, "rare");
    CHECK(rare.samples == std::vector<std::uint64_t>{40, 0, 0});
    CHECK(rare.min == 0);
    CHECK(rare.range_percent == doctest::Approx(100.0));
    CHECK(rare.stddev == doctest::Approx(std::sqrt((26.6667 * 26.6667 + 2 * 13.3333 * 13.3333) / 2)).epsilon(1e-3));

    const StatsRow& steady = find(report, "steady");
    CHECK(steady.range_percent == 0.0);
    CHECK(steady.stddev == 0.0);

    // Sorted by range%: rare (100%), smooth (33%), steady (0%).
    CHECK(report.rows[0].procedure == "rare");
    CHECK(report.rows[1].procedure == "smooth");
    CHECK(report.rows[2].procedure == "steady");
}

TEST_CASE("stats: DCPI Figure 3's row for smooth_") {
    // Eight sets whose min, max and sum are those of Figure 3's first row:
    // range% = (88075 - 38155) / 441040 = 11.32%.
    std::vector<std::uint64_t> counts = {38155, 88075, 50000, 50000, 50000, 50000, 57405, 57405};
    std::vector<FlatProfile> sets;
    std::vector<StatsSet> labels;
    for (auto c : counts) {
        sets.push_back(flat(c * 10, {row("smooth_", c)}));
        labels.push_back({"set"});
    }
    StatsReport report = compute_stats(labels, sets, Grouping::kProcedure);
    REQUIRE(report.rows.size() == 1);
    CHECK(report.rows[0].sum == 441040);
    CHECK(report.rows[0].mean == doctest::Approx(55130.0));
    CHECK(std::round(report.rows[0].range_percent * 100) / 100 == doctest::Approx(11.32));
    std::string text = render_stats_text(report);
    CHECK(text.find("11.32%") != std::string::npos);
    CHECK(text.find("TOTAL 4410400") != std::string::npos);
    CHECK(text.find("from 8 different sample set(s)") != std::string::npos);
}

TEST_CASE("stats: one build id under two paths is one row; by image") {
    std::vector<FlatProfile> sets = {
        flat(10, {row("f", 10, "/host/bin/app", "bid1")}),
        flat(10, {row("f", 6, "/container/bin/app", "bid1"), row("f", 4, "/other/app", "bid2")}),
    };
    StatsReport report = compute_stats({{"a"}, {"b"}}, sets, Grouping::kProcedure);
    REQUIRE(report.rows.size() == 2);
    CHECK(report.rows[0].samples == std::vector<std::uint64_t>{0, 4});  // bid2: range 100%
    CHECK(report.rows[1].samples == std::vector<std::uint64_t>{10, 6});
    CHECK(report.rows[1].image == "/host/bin/app");

    nlohmann::json j = render_stats_json(report);
    CHECK(j["schema"] == "ecpi.stats");
    CHECK(j["version"] == 1);
    CHECK(j["rows"][1]["samples"] == nlohmann::json::array({10, 6}));
    CHECK(j["rows"][1]["range_percent"] == 25.0);
}

TEST_CASE("diff: normalized shares, change, order by |change|") {
    // A: 1000 samples, B: 500 (a shorter run). f's share falls 50% -> 40%,
    // g's rises 30% -> 50%, h vanishes (20% -> 0), i is new in B (10%).
    FlatProfile a = flat(1000, {row("f", 500), row("g", 300), row("h", 200)});
    FlatProfile b = flat(500, {row("f", 200), row("g", 250), row("i", 50)});
    auto rows = diff_flat(a, b, false);
    REQUIRE(rows.size() == 4);
    CHECK(rows[0].procedure == "g");
    CHECK(rows[0].share_a == doctest::Approx(30.0));
    CHECK(rows[0].share_b == doctest::Approx(50.0));
    CHECK(rows[0].change == doctest::Approx(20.0));
    CHECK(rows[1].procedure == "h");  // |-20| ties with g; h's max share (20) is lower
    CHECK(rows[1].change == doctest::Approx(-20.0));
    CHECK(rows[1].samples_b == 0);
    CHECK(rows[2].procedure == "f");
    CHECK(rows[2].change == doctest::Approx(-10.0));
    CHECK(rows[3].procedure == "i");
    CHECK(rows[3].samples_a == 0);
    CHECK(rows[3].share_b == doctest::Approx(10.0));

    auto images = diff_flat(a, b, true);
    REQUIRE(images.size() == 1);
    CHECK(images[0].procedure.empty());
    CHECK(images[0].share_a == doctest::Approx(100.0));
    CHECK(images[0].change == doctest::Approx(0.0));
}

TEST_CASE("stats and diff end to end over annotest epochs") {
    TempDir tmp;
    auto fn = function_addresses(ECPI_ANNOTEST);
    auto bid = read_build_id(ECPI_ANNOTEST).value();
    const ImageId img{ECPI_ANNOTEST, bid};
    auto epoch = [&](std::uint64_t hot, std::uint64_t leaf) {
        EpochContents c;
        c.profiles = {image_profile(img, "cpu-clock", 1000, {{7, {{fn.at("hot_loop") + 0x33, hot}, {fn.at("leaf_work"), leaf}}}})};
        c.meta.events["cpu-clock"] = {1000, hot + leaf, 0, 0};
        return c;
    };
    std::vector<LoadedProfile> profiles = {loaded("one", epoch(60, 40)), loaded("two", epoch(90, 10))};
    SymbolizerPool pool(Symbolizer::Options{.database = std::nullopt, .kallsyms = "/nonexistent", .debug_roots = {}});

    auto stats = build_stats_report(profiles, {}, pool);
    REQUIRE_MESSAGE(stats.ok(), stats.error().message());
    REQUIRE(stats->rows.size() == 2);
    CHECK(stats->rows[0].procedure == "leaf_work");  // range 30/50 = 60% > hot_loop's 30/150
    CHECK(stats->rows[0].range_percent == doctest::Approx(60.0));
    CHECK(stats->rows[1].procedure == "hot_loop");

    DiffOptions options;
    auto diff = build_diff_report(profiles[0], profiles[1], options, pool);
    REQUIRE_MESSAGE(diff.ok(), diff.error().message());
    REQUIRE(diff->rows.size() == 2);
    CHECK(diff->rows[0].change == doctest::Approx(30.0));

    options.by = DiffOptions::By::kInstruction;
    options.procedure = "hot_loop";
    auto insn = build_diff_report(profiles[0], profiles[1], options, pool);
    REQUIRE_MESSAGE(insn.ok(), insn.error().message());
    CHECK(insn->procedure == "hot_loop");
    REQUIRE(insn->rows.size() == 1);
    CHECK(insn->rows[0].offset == 0x33);
    CHECK(insn->rows[0].samples_a == 60);
    CHECK(insn->rows[0].samples_b == 90);
    CHECK(insn->rows[0].change == doctest::Approx(30.0));
    // 0x33 may fall inside an instruction: the text is that of an
    // instruction start or empty, never a wrong one.
    auto starts = objdump_instructions(ECPI_ANNOTEST, "hot_loop");
    bool at_start = std::find(starts.begin(), starts.end(), fn.at("hot_loop") + 0x33) != starts.end();
    CHECK(insn->rows[0].text.empty() != at_start);
    nlohmann::json j = render_diff_json(*insn);
    CHECK(j["schema"] == "ecpi.diff");
    CHECK(j["by"] == "instruction");
    CHECK(j["rows"][0]["offset"] == 0x33);

    // Different events cannot be compared.
    EpochContents cycles = epoch(1, 1);
    cycles.profiles[0].event = "cycles";
    cycles.meta.events = {{"cycles", {1000, 2, 0, 0}}};
    std::vector<LoadedProfile> mixed = {loaded("clock", epoch(1, 1)), loaded("cyc", cycles)};
    auto bad = build_stats_report(mixed, {}, pool);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message().find("different events") != std::string::npos);
}
