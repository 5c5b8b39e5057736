// Profile names (DB, DB/epochs/N, DB@N), event choice across profiles, flat
// profiles merged by build id, and finding one procedure's samples.
#include "ecpi/analyze/reports/profile_source.h"

#include <doctest/doctest.h>

#include "annotest_fixture.h"

namespace fs = std::filesystem;
using namespace ecpi::analyze;
using namespace ecpi::analyze::testing;
using ecpi::store::Database;
using ecpi::store::EpochContents;
using ecpi::store::ImageId;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

LoadedProfile loaded(const std::string& spec, EpochContents contents) {
    LoadedProfile p;
    p.source.spec = spec;
    p.source.database = "/db/" + spec;
    p.source.epoch = "00001";
    p.contents = std::move(contents);
    return p;
}

EpochContents with_events(std::map<std::string, std::uint64_t> samples) {
    EpochContents c;
    for (const auto& [event, n] : samples) {
        c.profiles.push_back(image_profile({"/bin/x", ""}, event, 1000, {{1, {{0x10, n}}}}));
        c.meta.events[event] = {1000, n, 0, 0};
    }
    return c;
}

}  // namespace

TEST_CASE("resolve_source: database, epoch directory, DB@EPOCH") {
    TempDir tmp;
    const fs::path dir = tmp.path() / "db";
    auto db = Database::open(dir, Database::Mode::kCreate);
    REQUIRE(db.ok());
    REQUIRE(db->new_epoch().ok());
    REQUIRE(db->new_epoch().ok());  // epochs 00001..00003

    auto newest = resolve_source(dir.string());
    REQUIRE_MESSAGE(newest.ok(), newest.error().message());
    CHECK(newest->database == dir);
    CHECK(newest->epoch == "00003");
    CHECK(newest->spec == dir.string());

    auto by_dir = resolve_source((dir / "epochs" / "00002").string());
    REQUIRE_MESSAGE(by_dir.ok(), by_dir.error().message());
    CHECK(by_dir->database == dir);
    CHECK(by_dir->epoch == "00002");
    auto trailing_slash = resolve_source((dir / "epochs" / "00002").string() + "/");
    REQUIRE(trailing_slash.ok());
    CHECK(trailing_slash->epoch == "00002");

    for (const char* suffix : {"@2", "@00002"}) {
        auto at = resolve_source(dir.string() + suffix);
        REQUIRE_MESSAGE(at.ok(), at.error().message());
        CHECK(at->epoch == "00002");
    }
    auto override = resolve_source(dir.string(), "1");
    REQUIRE(override.ok());
    CHECK(override->epoch == "00001");

    auto missing_epoch = resolve_source(dir.string() + "@9");
    REQUIRE_FALSE(missing_epoch.ok());
    CHECK(contains(missing_epoch.error().message(), "no epoch '9'"));
    CHECK(contains(missing_epoch.error().message(), "00001 to 00003"));
    auto conflict = resolve_source(dir.string() + "@2", "3");
    REQUIRE_FALSE(conflict.ok());
    CHECK(contains(conflict.error().message(), "--epoch"));
    auto not_db = resolve_source((tmp.path() / "nothing").string());
    REQUIRE_FALSE(not_db.ok());
    CHECK(contains(not_db.error().message(), "not an ecpi database"));
}

TEST_CASE("common_event: shared, requested, different, empty") {
    LoadedProfile a = loaded("a", with_events({{"cpu-clock", 5}, {"cycles", 7}}));
    LoadedProfile b = loaded("b", with_events({{"cycles", 3}, {"cpu-clock", 2}}));
    LoadedProfile c = loaded("c", with_events({{"cycles", 3}}));
    LoadedProfile d = loaded("d", with_events({{"instructions", 3}}));
    LoadedProfile empty = loaded("empty", EpochContents{});

    CHECK(common_event({&a, &b}, std::nullopt).value() == "cpu-clock");
    CHECK(common_event({&a, &c}, std::nullopt).value() == "cycles");
    CHECK(common_event({&a, &b}, std::string("cycles")).value() == "cycles");

    auto mixed = common_event({&c, &d}, std::nullopt);
    REQUIRE_FALSE(mixed.ok());
    CHECK(contains(mixed.error().message(), "cannot compare profiles of different events"));
    CHECK(contains(mixed.error().message(), "c has cycles"));
    CHECK(contains(mixed.error().message(), "d has instructions"));

    auto requested = common_event({&a, &c}, std::string("cpu-clock"));
    REQUIRE_FALSE(requested.ok());
    CHECK(contains(requested.error().message(), "c has no cpu-clock samples (it has cycles)"));

    auto none = common_event({&a, &empty}, std::nullopt);
    REQUIRE_FALSE(none.ok());
    CHECK(contains(none.error().message(), "empty holds no samples"));
}

TEST_CASE("flatten_profile merges one build id seen under two paths") {
    TempDir tmp;
    auto bid = read_build_id(ECPI_ANNOTEST);
    REQUIRE(bid.ok());
    REQUIRE(bid->size() > 2);
    // The second path exists nowhere: the database's build-id cache serves it.
    auto db = Database::open(tmp.path() / "db", Database::Mode::kCreate);
    REQUIRE(db.ok());
    REQUIRE(db->cache_image(*bid, ECPI_ANNOTEST).ok());
    auto fn = function_addresses(ECPI_ANNOTEST);
    const ImageId here{ECPI_ANNOTEST, *bid};
    const ImageId container{"/containers/7/usr/bin/annotest", *bid};

    EpochContents c;
    c.profiles = {image_profile(here, "cpu-clock", 1000, {{1, {{fn.at("hot_loop"), 30}, {fn.at("leaf_work"), 5}}}}),
                  image_profile(container, "cpu-clock", 1000,
                                {{2, {{fn.at("hot_loop") + 4, 40}, {fn.at("caller_a"), 2}}}})};
    Symbolizer symbolizer = test_symbolizer(tmp.path(), tmp.path() / "db");
    auto flat = flatten_profile(c, {Grouping::kProcedure, "cpu-clock", std::nullopt}, symbolizer);
    REQUIRE_MESSAGE(flat.ok(), flat.error().message());
    CHECK(flat->total == 77);
    REQUIRE(flat->rows.size() == 3);
    CHECK(flat->rows[0].procedure == "hot_loop");
    CHECK(flat->rows[0].samples == 70);
    CHECK(flat->rows[0].image == container.path);  // the path with the most samples names the row
    CHECK(flat->rows[0].build_id == *bid);
    CHECK(flat->rows[1].procedure == "leaf_work");
    CHECK(flat->rows[2].procedure == "caller_a");

    auto by_image = flatten_profile(c, {Grouping::kImage, "cpu-clock", std::nullopt}, symbolizer);
    REQUIRE(by_image.ok());
    REQUIRE(by_image->rows.size() == 1);
    CHECK(by_image->rows[0].samples == 77);

    auto pid2 = flatten_profile(c, {Grouping::kProcedure, "cpu-clock", 2u}, symbolizer);
    REQUIRE(pid2.ok());
    CHECK(pid2->total == 42);

    // One procedure per instruction, over both paths.
    auto ps = procedure_samples(c, "cpu-clock", std::nullopt, "hot_loop", symbolizer);
    REQUIRE_MESSAGE(ps.ok(), ps.error().message());
    CHECK(ps->samples == 70);
    CHECK(ps->event_total == 77);
    CHECK(ps->start == fn.at("hot_loop"));
    CHECK(ps->end > ps->start);
    CHECK(ps->counts == std::map<std::uint64_t, std::uint64_t>{{fn.at("hot_loop"), 30}, {fn.at("hot_loop") + 4, 40}});
}

TEST_CASE("procedure_samples: loose names, ambiguity, close matches") {
    TempDir tmp;
    auto sym = function_addresses(ECPI_SYMTEST);
    const ImageId symtest{ECPI_SYMTEST, readelf_build_id(ECPI_SYMTEST_NOTES)};
    EpochContents c;
    c.profiles = {image_profile(symtest, "cpu-clock", 1000,
                                {{1,
                                  {{sym.at("ecpi_test::compute(int)"), 10},
                                   {sym.at("ecpi_test::compute(double)"), 4},
                                   {sym.at("ecpi_test::Widget::spin(int) const"), 3}}}})};
    Symbolizer symbolizer = test_symbolizer(tmp.path());

    auto spin = procedure_samples(c, "cpu-clock", std::nullopt, "spin", symbolizer);
    REQUIRE_MESSAGE(spin.ok(), spin.error().message());
    CHECK(spin->procedure == "ecpi_test::Widget::spin(int) const");
    CHECK(spin->samples == 3);

    auto ambiguous = procedure_samples(c, "cpu-clock", std::nullopt, "compute", symbolizer);
    REQUIRE_FALSE(ambiguous.ok());
    CHECK(contains(ambiguous.error().message(), "matches several procedures"));
    CHECK(contains(ambiguous.error().message(), "ecpi_test::compute(int)"));

    auto typo = procedure_samples(c, "cpu-clock", std::nullopt, "compte", symbolizer);
    REQUIRE_FALSE(typo.ok());
    CHECK(contains(typo.error().message(), "procedure 'compte' has no cpu-clock samples"));
    CHECK(contains(typo.error().message(), "close matches: ecpi_test::compute("));

    auto unrelated = procedure_samples(c, "cpu-clock", std::nullopt, "zzzzzzzzzz", symbolizer);
    REQUIRE_FALSE(unrelated.ok());
    CHECK(contains(unrelated.error().message(), "the hottest are: ecpi_test::compute(int)"));
}

TEST_CASE("loosely_matches and close_matches") {
    CHECK(loosely_matches("spin", "ecpi_test::Widget::spin(int) const"));
    CHECK(loosely_matches("Widget::spin", "ecpi_test::Widget::spin(int) const"));
    CHECK(loosely_matches("ecpi_test::compute", "ecpi_test::compute(int)"));
    CHECK_FALSE(loosely_matches("pin", "ecpi_test::Widget::spin(int) const"));
    CHECK_FALSE(loosely_matches("", "main"));
    auto close = close_matches("hot_lop", {"hot_loop", "leaf_work", "main", "hot_loop_2"});
    REQUIRE(close.size() >= 1);
    CHECK(close.front() == "hot_loop");
    CHECK(close_matches("work", {"leaf_work", "main"}) == std::vector<std::string>{"leaf_work"});
    CHECK(close_matches("qqqq", {"leaf_work", "main"}).empty());
}
