// The overhead budget's calibrations of this boot (loader/collect/budget_history.cpp,
// issue 35): the history file's records, which earlier calibrations a new one
// pools with, what pooling does to the rate, and the file's upkeep.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ecpi/loader/budget.h"
#include "ecpi/loader/budget_history.h"

using namespace ecpi::loader;

namespace {

CalibrationRecord record_at(std::int64_t when, const std::string& key, std::vector<double> cpu0, std::vector<double> cpu1 = {}) {
    CalibrationRecord r;
    r.unix_seconds = when;
    r.key = key;
    r.per_cpu.emplace_back(0, std::move(cpu0));
    if (!cpu1.empty()) r.per_cpu.emplace_back(1, std::move(cpu1));
    return r;
}

// A calibration of two CPUs whose pairs scatter around `cost_us` (spread as
// measured on the 2-CPU VM: quartiles about +-2.5 us).
SampleCost fresh_calibration(std::mt19937_64& rng, double cost_us, int pairs_per_cpu = 21) {
    std::normal_distribution<double> pair(cost_us, 3.7);
    CalibrationOptions options;
    std::vector<CpuCost> per_cpu;
    for (int cpu = 0; cpu < 2; ++cpu) {
        std::vector<double> costs;
        for (int i = 0; i < pairs_per_cpu; ++i) costs.push_back(pair(rng));
        per_cpu.push_back(summarize_cpu(cpu, 4999, std::move(costs), options));
    }
    return summarize_costs(std::move(per_cpu), options.confidence);
}

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        char tmpl[] = "/tmp/ecpi-budget-history-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("a calibration record reads back as written; lines that are not records are skipped") {
    const auto r = record_at(1700000000, calibration_key("handler=ab hz=4999"), {3.5, -1.25, 12.0}, {4.0});
    const std::string text = "garbage line\n" + format_calibration_record(r) + "\n" +
                             "ecpi-calibration-v1 1700000001 k 0:1,nan\n"      // not finite
                             "ecpi-calibration-v1 1700000001 k 0:1,,2\n"       // an empty value
                             "ecpi-calibration-v1 1700000001 k -1:1\n"         // no such CPU
                             "ecpi-calibration-v1 1700000001 k 0:1e9\n"        // beyond any cost
                             "ecpi-calibration-v1 x k 0:1\n"                   // no time
                             "ecpi-calibration-v2 1700000001 k 0:1\n";         // another format
    const auto back = parse_calibration_history(text);
    REQUIRE(back.size() == 1);
    CHECK(back[0].unix_seconds == r.unix_seconds);
    CHECK(back[0].key == r.key);
    REQUIRE(back[0].per_cpu.size() == 2);
    CHECK(back[0].per_cpu[0].first == 0);
    CHECK(back[0].per_cpu[0].second == std::vector<double>{3.5, -1.25, 12.0});
    CHECK(back[0].per_cpu[1].second == std::vector<double>{4.0});
    CHECK(calibration_key("a") != calibration_key("b"));
    CHECK(calibration_key("a").size() == 16);
}

TEST_CASE("only calibrations of the same key and at most two hours old are pooled, newest first, three at most") {
    const std::int64_t now = 1700010000;
    std::vector<CalibrationRecord> all = {
        record_at(now - 100, "k", {1}),  record_at(now - 7300, "k", {2}), record_at(now - 50, "other", {3}),
        record_at(now - 10, "k", {4}),   record_at(now - 3000, "k", {5}), record_at(now - 4000, "k", {6}),
        record_at(now + 500, "k", {7}),  // from the future: a clock set back
    };
    const auto m = matching_calibrations(all, "k", now);
    REQUIRE(m.size() == 3);
    CHECK(m[0].per_cpu[0].second[0] == 4);
    CHECK(m[1].per_cpu[0].second[0] == 1);
    CHECK(m[2].per_cpu[0].second[0] == 5);
}

TEST_CASE("pooling adds the earlier pairs CPU by CPU and the bound follows all of them") {
    std::mt19937_64 rng(7);
    const SampleCost fresh = fresh_calibration(rng, 3.5);
    std::vector<CalibrationRecord> earlier;
    for (int i = 0; i < 3; ++i) earlier.push_back(calibration_record(fresh_calibration(rng, 7.0), "k", 1000 + i));
    earlier[0].per_cpu.emplace_back(5, std::vector<double>{100, 100});  // a CPU the fresh calibration did not measure
    const SampleCost pooled = pool_with_earlier(fresh, earlier, CalibrationOptions{});
    CHECK(pooled.earlier_calibrations == 3);
    CHECK(pooled.earlier_pairs == 3 * 42);
    CHECK(pooled.pairs == fresh.pairs + 3 * 42);
    REQUIRE(pooled.per_cpu.size() == 2);
    CHECK(pooled.per_cpu[0].pairs == 21 + 3 * 21);
    CHECK(pooled.bound_us > fresh.bound_us + 1.5);  // three calibrations at 7 us outweigh one at 3.5
    CHECK(pooled.bound_us < 7.5);
    CHECK(pool_with_earlier(fresh, {}, CalibrationOptions{}).bound_us == fresh.bound_us);
}

TEST_CASE("restarts whose cost moves between minutes choose rates closer together when pooled") {
    // Eight restarts; the true cost drifts between 3.5 and 7 us from one to the
    // next (as on the 2-CPU VM, 2026-11-27), pairs scatter around it.
    std::mt19937_64 rng(11);
    const std::vector<double> drift = {3.5, 6.0, 3.8, 3.5, 4.0, 3.6, 5.0, 7.0};
    std::vector<CalibrationRecord> history;
    std::vector<std::uint64_t> alone, pooled;
    for (std::size_t k = 0; k < drift.size(); ++k) {
        const SampleCost fresh = fresh_calibration(rng, drift[k]);
        std::vector<CalibrationRecord> last(history.rbegin(), history.rbegin() + std::min<std::size_t>(history.size(), kCalibrationHistoryPooled));
        alone.push_back(choose_rate(fresh, 1.0, 1).hz);
        pooled.push_back(choose_rate(pool_with_earlier(fresh, last, CalibrationOptions{}), 1.0, 1).hz);
        history.push_back(calibration_record(fresh, "k", static_cast<std::int64_t>(k)));
    }
    auto spread = [](const std::vector<std::uint64_t>& hz) {
        return static_cast<double>(*std::max_element(hz.begin(), hz.end())) / static_cast<double>(*std::min_element(hz.begin(), hz.end()));
    };
    CHECK(spread(alone) > 1.6);
    CHECK(spread(pooled) < spread(alone) / 1.2);
}

TEST_CASE("the history file keeps the newest calibrations within two hours, and refuses what is not ours") {
    TempDir dir;
    const auto file = dir.path / "run" / "budget-calibrations";
    const std::int64_t now = 1700020000;
    CHECK(read_calibration_history(file).ok());  // missing: empty
    CHECK(read_calibration_history(file)->empty());
    REQUIRE(append_calibration(file, record_at(now - 8000, "k", {1}), now - 8000).ok());
    for (std::size_t i = 0; i < kCalibrationHistoryKept + 5; ++i)
        REQUIRE(append_calibration(file, record_at(now - 100 + static_cast<std::int64_t>(i), "k", {double(i)}), now).ok());
    auto all = read_calibration_history(file);
    REQUIRE(all.ok());
    REQUIRE(all->size() == kCalibrationHistoryKept);
    CHECK(all->back().per_cpu[0].second[0] == double(kCalibrationHistoryKept + 4));
    CHECK(std::none_of(all->begin(), all->end(), [&](const auto& r) { return r.unix_seconds == now - 8000; }));
    struct stat st{};
    REQUIRE(::stat(file.c_str(), &st) == 0);
    CHECK((st.st_mode & 077) == 0);

    ::chmod(file.parent_path().c_str(), 0777);  // a directory others may write: not used
    auto refused = append_calibration(file, record_at(now, "k", {1}), now);
    REQUIRE(!refused.ok());
    CHECK(refused.error().message().find("only it may write") != std::string::npos);
    ::chmod(file.parent_path().c_str(), 0700);

    const auto not_regular = dir.path / "a-directory";
    std::filesystem::create_directories(not_regular);
    auto bad = read_calibration_history(not_regular);
    REQUIRE(!bad.ok());
    CHECK(bad.error().message().find("not a regular file") != std::string::npos);
}
