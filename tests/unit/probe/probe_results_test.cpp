#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "ecpi/store/probe_results.h"

using namespace ecpi::store;

namespace {

ProbeReport sample_report() {
    ProbeReport r;
    r.pid = 42;
    r.comm = "app";
    r.metrics = {"count", "wall"};
    r.final = true;
    ProbeFunction f;
    f.pattern = "lookup";
    f.symbol = f.demangled = "lookup";
    f.image = "/usr/bin/app";
    f.address = 0x1234;
    f.timed = true;
    ProbePath p;
    p.frames = {{"main", 0x2a, "/usr/bin/app"}, {"caller", 0x11, "/usr/bin/app"}};
    p.calls = 3;
    for (std::uint64_t ns : {100u, 150u, 400u}) p.timers["wall"].add(ns);
    f.paths.push_back(p);
    f.calls = 3;
    r.functions.push_back(f);
    r.counters["ringbuf_lost"] = 0;
    return r;
}

}  // namespace

TEST_CASE("timer: totals, minimum, net variation, histogram") {
    ProbeTimer t;
    for (std::uint64_t ns : {100u, 150u, 400u}) t.add(ns);
    CHECK(t.timed_calls == 3);
    CHECK(t.measured_ns == 650);
    CHECK(t.min_ns == 100);
    CHECK(t.max_ns == 400);
    // Variational path profiling 5.1: total − count × base time.
    CHECK(t.net_variation_ns() == 650 - 3 * 100);
    CHECK(t.total_ns(3) == doctest::Approx(650));
    CHECK(t.error_ns(3) == doctest::Approx(0));
    CHECK(t.histogram[6] == 1);  // 100 in [64, 128)
    CHECK(t.histogram[7] == 1);  // 150 in [128, 256)
    CHECK(t.histogram[8] == 1);  // 400 in [256, 512)
    // Sampled: 3 of 30 calls timed -> the total is an estimate with a bound.
    CHECK(t.total_ns(30) == doctest::Approx(6500));
    CHECK(t.error_ns(30) > 0);
    ProbeTimer u;
    u.add(50);
    t.merge(u);
    CHECK(t.min_ns == 50);
    CHECK(t.timed_calls == 4);
}

TEST_CASE("ecpi.probe round trip and version check") {
    auto r = sample_report();
    auto j = probe_report_to_json(r);
    CHECK(j["schema"] == "ecpi.probe");
    CHECK(j["version"] == 1);
    const auto& path = j["functions"][0]["paths"][0];
    CHECK(path["frames"][0]["symbol"] == "main");
    CHECK(path["frames"][0]["offset"] == 0x2a);
    CHECK(path["timers"]["wall"]["total_ns"] == 650);
    CHECK(path["timers"]["wall"]["mean_ns"] == 217);
    CHECK(path["timers"]["wall"]["min_ns"] == 100);
    CHECK(path["timers"]["wall"]["net_variation_ns"] == 350);
    auto back = probe_report_from_json(j);
    REQUIRE(back.ok());
    CHECK(back->functions[0].paths[0].frames == r.functions[0].paths[0].frames);
    CHECK(back->functions[0].paths[0].timers["wall"].min_ns == 100);
    CHECK(back->functions[0].paths[0].timers["wall"].histogram[8] == 1);
    CHECK(probe_report_to_json(*back) == j);
    j["version"] = 2;
    auto newer = probe_report_from_json(j);
    REQUIRE_FALSE(newer.ok());
    CHECK(newer.error().message().find("newer than this ecpi supports") != std::string::npos);
    CHECK_FALSE(probe_report_from_json(nlohmann::json{{"schema", "ecpi.prof"}, {"version", 1}}).ok());
}

TEST_CASE("probe reports are saved into the current epoch and listed in order") {
    auto dir = std::filesystem::temp_directory_path() / ("ecpi-probe-db-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    auto db = Database::open(dir, Database::Mode::kCreate);
    REQUIRE(db.ok());
    auto first = save_probe_report(*db, sample_report());
    REQUIRE(first.ok());
    auto second = save_probe_report(*db, sample_report());
    REQUIRE(second.ok());
    CHECK(*first != *second);
    CHECK(first->filename().string().rfind("probe-", 0) == 0);
    auto listed = list_probe_reports(*db);
    REQUIRE(listed.ok());
    REQUIRE(listed->size() == 2);
    CHECK((*listed)[0].file == *first);
    CHECK((*listed)[1].file == *second);
    auto read = read_probe_report(*second);
    REQUIRE(read.ok());
    CHECK(read->functions[0].calls == 3);
    // The profile reader ignores probe files (unknown names).
    auto epoch = db->read_epoch((*listed)[0].epoch);
    REQUIRE(epoch.ok());
    CHECK(epoch->skipped.empty());
    std::filesystem::remove_all(dir);
}
