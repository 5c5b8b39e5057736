// build_prof_report / render_prof_text / render_prof_json over an epoch
// built in memory, with samples placed on data/symtest.cpp's functions.
#include "ecpi/analyze/reports/prof_report.h"
#include "ecpi/analyze/reports/profile_source.h"
#include "ecpi/analyze/text_table.h"
#include "ecpi/analyze/reports/kernel_idle.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "ecpi/terminal_text.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace ecpi::analyze;
using namespace ecpi::analyze::testing;
using ecpi::store::EpochContents;
using ecpi::store::ImageId;
using ecpi::store::ImageProfile;
using ecpi::store::OffsetCount;
using ecpi::store::ProcessCounts;

namespace {

constexpr std::uint64_t kClockPeriod = 10'000'000;
constexpr std::uint64_t kCyclesPeriod = 100'000;

struct Fixture {
    TempDir tmp;
    std::string bid = readelf_build_id(ECPI_SYMTEST_NOTES);
    std::map<std::string, std::uint64_t> nm = nm_functions(ECPI_SYMTEST_NM);
    std::map<std::string, std::uint64_t> plt = objdump_plt_entries(ECPI_SYMTEST_PLT);
    ImageId symtest{ECPI_SYMTEST, bid};
    ImageId gone{"/nonexistent/libgone.so", "abcdef0123456789"};
    ImageId kernel{ecpi::store::kKernelImage, ""};
    ImageId unknown{ecpi::store::kUnknownImage, ""};
    EpochContents contents;

    Fixture() {
        write_text(tmp.path() / "kallsyms", "ffffffff81000000 T _text\nffffffff81000100 t local_fn\n");
        std::uint64_t compute_int = nm.at("ecpi_test::compute(int)");
        std::uint64_t compute_double = nm.at("ecpi_test::compute(double)");
        std::uint64_t spin = nm.at("ecpi_test::Widget::spin(int) const");
        contents.epoch = "00007";
        contents.profiles = {
            profile(symtest, "cpu-clock", kClockPeriod,
                    {{100, {{compute_int, 50}, {compute_int + 4, 10}, {spin, 30}, {nm.at("main"), 6},
                            {plt.at("puts@plt"), 3}}},
                     {200, {{compute_int + 1, 20}, {nm.at("local_helper(int)"), 7}}}}),
            profile(unknown, "cpu-clock", kClockPeriod, {{100, {{0xdeadbeef, 4}}}}),
            profile(kernel, "cpu-clock", kClockPeriod, {{100, {{0x150, 6}}}}),
            profile(gone, "cpu-clock", kClockPeriod, {{100, {{0x1000, 8}}}}),
            profile(symtest, "cycles", kCyclesPeriod,
                    {{100, {{compute_int, 500}, {spin, 100}, {compute_double, 40}}}}),
            profile(gone, "cycles", kCyclesPeriod, {{100, {{0x1000, 2}}}}),
        };
        contents.meta.events["cpu-clock"] = {kClockPeriod, 144, 4, 2};
        contents.meta.events["cycles"] = {kCyclesPeriod, 642, 0, 0};
        contents.skipped = {"00007/bad.prof: checksum mismatch"};
    }

    static ImageProfile profile(const ImageId& image, const std::string& event, std::uint64_t period,
                                std::vector<std::pair<std::uint32_t, std::vector<OffsetCount>>> sections) {
        ImageProfile p;
        p.image = image;
        p.event = event;
        p.period = period;
        for (auto& [pid, counts] : sections) {
            std::sort(counts.begin(), counts.end());
            p.processes.push_back(ProcessCounts{pid, counts});
        }
        return p;
    }

    Symbolizer symbolizer() const {
        Symbolizer::Options options;
        options.kallsyms = tmp.path() / "kallsyms";
        options.debug_roots = {};
        return Symbolizer(options);
    }

    ecpi::Result<ProfReport> run(const ProfOptions& options) const {
        Symbolizer s = symbolizer();
        return build_prof_report(contents, options, s);
    }
};

struct Expected {
    std::string procedure;
    std::string image;
    std::uint64_t cpu_clock;
    std::uint64_t cycles;
};

void check_rows(const ProfReport& report, const std::vector<Expected>& expected) {
    REQUIRE(report.rows.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        CAPTURE(i);
        const ProfRow& row = report.rows[i];
        CHECK(row.procedure == expected[i].procedure);
        CHECK(row.image == expected[i].image);
        CHECK(row.samples.at("cpu-clock") == expected[i].cpu_clock);
        CHECK(row.samples.at("cycles") == expected[i].cycles);
    }
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
}

}  // namespace

TEST_CASE("prof by procedure: rows, order, percentages, warnings") {
    Fixture f;
    auto report = f.run({});
    REQUIRE_MESSAGE(report.ok(), report.error().message());

    CHECK(report->epoch == "00007");
    CHECK(report->events == std::vector<std::string>{"cpu-clock", "cycles"});
    CHECK(report->sort_event == "cpu-clock");
    const auto& clock = report->totals.at("cpu-clock");
    CHECK(clock.samples == 144);
    CHECK(clock.unknown == 4);
    CHECK(clock.lost == 2);
    CHECK(clock.period == kClockPeriod);
    CHECK(report->totals.at("cycles").samples == 642);

    const std::string gone = "/nonexistent/libgone.so";
    check_rows(*report, {
                            {"ecpi_test::compute(int)", ECPI_SYMTEST, 80, 500},
                            {"ecpi_test::Widget::spin(int) const", ECPI_SYMTEST, 30, 100},
                            {"[libgone.so]", gone, 8, 2},
                            {"local_helper(int)", ECPI_SYMTEST, 7, 0},
                            {"local_fn", "[kernel]", 6, 0},  // ties: by name
                            {"main", ECPI_SYMTEST, 6, 0},
                            {"[unknown]", "[unknown]", 4, 0},
                            {"puts@plt", ECPI_SYMTEST, 3, 0},
                            {"ecpi_test::compute(double)", ECPI_SYMTEST, 0, 40},
                        });
    CHECK(report->rows[0].build_id == f.bid);
    // Issue 30: the image without symbols is named once, with what to do.
    CHECK(report->hints == std::vector<std::string>{
                               "libgone.so (build id abcdef0123456789): 100.0% of its samples are in functions "
                               "without a name ([libgone.so]); install its debug symbols, or set DEBUGINFOD_URLS"});
    CHECK(render_prof_text(*report).find("\nWithout symbols: libgone.so (build id abcdef0123456789): 100.0%") !=
          std::string::npos);
    CHECK(report->rows[0].percent == doctest::Approx(100.0 * 80 / 144));
    CHECK(report->rows[0].cumulative_percent == doctest::Approx(100.0 * 80 / 144));
    CHECK(report->rows[1].cumulative_percent == doctest::Approx(100.0 * 110 / 144));
    CHECK(report->rows.back().percent == 0.0);
    CHECK(report->rows.back().cumulative_percent == doctest::Approx(100.0));

    // The skipped file, and the unreadable image once although two events use it.
    REQUIRE(report->warnings.size() == 2);
    CHECK(report->warnings[0] == "skipped 00007/bad.prof: checksum mismatch");
    CHECK(report->warnings[1].starts_with("no symbols for /nonexistent/libgone.so (build id abcdef0123456789): "));
    CHECK(report->warnings[1].find("no such file") != std::string::npos);
}

TEST_CASE("prof: event selection") {
    Fixture f;
    SUBCASE("sort by the first requested event") {
        ProfOptions options;
        options.events = {"cycles"};
        auto report = f.run(options);
        REQUIRE(report.ok());
        CHECK(report->events == std::vector<std::string>{"cycles"});
        // Only rows with samples of the selected events.
        REQUIRE(report->rows.size() == 4);
        CHECK(report->rows[0].procedure == "ecpi_test::compute(int)");
        CHECK(report->rows[1].procedure == "ecpi_test::Widget::spin(int) const");
        CHECK(report->rows[2].procedure == "ecpi_test::compute(double)");
        CHECK(report->rows[2].percent == doctest::Approx(100.0 * 40 / 642));
        CHECK(report->rows[3].image == "/nonexistent/libgone.so");
        CHECK(report->rows[3].cumulative_percent == doctest::Approx(100.0));
        CHECK(report->rows[0].samples.count("cpu-clock") == 0);
        CHECK(report->totals.count("cpu-clock") == 0);
    }
    SUBCASE("an event missing from the epoch") {
        ProfOptions options;
        options.events = {"cpu-clock", "instructions"};
        auto report = f.run(options);
        REQUIRE(!report.ok());
        CHECK(report.error().message() == "event instructions is not in this profile (it has: cpu-clock, cycles)");
    }
    SUBCASE("default order: sorted, cpu-clock first, events known only from metadata included") {
        f.contents.meta.events["branch-misses"] = {10007, 0, 0, 0};
        auto report = f.run({});
        REQUIRE(report.ok());
        CHECK(report->events == std::vector<std::string>{"cpu-clock", "branch-misses", "cycles"});
        CHECK(report->totals.at("branch-misses").samples == 0);
        CHECK(report->rows[0].samples.at("branch-misses") == 0);
    }
}

TEST_CASE("prof: pid filter and limit") {
    Fixture f;
    SUBCASE("pid") {
        ProfOptions options;
        options.pid = 200;
        auto report = f.run(options);
        REQUIRE(report.ok());
        CHECK(report->pid == 200u);
        check_rows(*report, {{"ecpi_test::compute(int)", ECPI_SYMTEST, 20, 0},
                             {"local_helper(int)", ECPI_SYMTEST, 7, 0}});
        CHECK(report->totals.at("cpu-clock").samples == 27);
        CHECK(report->totals.at("cpu-clock").unknown == 0);
        CHECK(report->rows[0].percent == doctest::Approx(100.0 * 20 / 27));
        CHECK(report->rows[1].cumulative_percent == doctest::Approx(100.0));
    }
    SUBCASE("merged sections cannot be attributed to a pid") {
        f.contents.profiles[0].processes.push_back(
            ProcessCounts{ecpi::store::kAllProcesses, {{f.nm.at("main"), 11}}});
        ProfOptions options;
        options.pid = 200;
        auto report = f.run(options);
        REQUIRE(report.ok());
        CHECK(report->totals.at("cpu-clock").samples == 27);
        CHECK(std::count_if(report->warnings.begin(), report->warnings.end(), [](const std::string& w) {
                  return w.starts_with("11 samples recorded without a per-process breakdown");
              }) == 1);
    }
    SUBCASE("limit keeps the top rows and their cumulative percentages") {
        ProfOptions options;
        options.limit = 3;
        auto report = f.run(options);
        REQUIRE(report.ok());
        REQUIRE(report->rows.size() == 3);
        CHECK(report->rows[2].procedure == "[libgone.so]");
        CHECK(report->rows[2].cumulative_percent == doctest::Approx(100.0 * 118 / 144));
        CHECK(report->totals.at("cpu-clock").samples == 144);
    }
    SUBCASE("metadata that disagrees with the files is reported") {
        f.contents.meta.events["cpu-clock"].samples = 150;
        auto report = f.run({});
        REQUIRE(report.ok());
        CHECK(std::find(report->warnings.begin(), report->warnings.end(),
                        "epoch metadata counts 150 cpu-clock samples but the profile files hold 144") !=
              report->warnings.end());
    }
}

TEST_CASE("prof by image") {
    Fixture f;
    ProfOptions options;
    options.by = ProfOptions::By::kImage;
    auto report = f.run(options);
    REQUIRE(report.ok());
    check_rows(*report, {{"", ECPI_SYMTEST, 126, 640},
                         {"", "/nonexistent/libgone.so", 8, 2},
                         {"", "[kernel]", 6, 0},
                         {"", "[unknown]", 4, 0}});
    CHECK(report->rows[0].percent == doctest::Approx(100.0 * 126 / 144));
    // No symbols are needed by image, so no warning about libgone.so.
    CHECK(report->warnings == std::vector<std::string>{"skipped 00007/bad.prof: checksum mismatch"});
}

TEST_CASE("prof: an empty epoch") {
    EpochContents empty;
    empty.epoch = "00001";
    Symbolizer symbolizer(Symbolizer::Options{});
    auto report = build_prof_report(empty, {}, symbolizer);
    REQUIRE(report.ok());
    CHECK(report->events.empty());
    CHECK(report->rows.empty());
    CHECK(render_prof_text(*report).find("No samples") != std::string::npos);
    CHECK(render_prof_json(*report)["rows"].empty());

    ProfOptions options;
    options.events = {"cycles"};
    auto missing = build_prof_report(empty, options, symbolizer);
    REQUIRE(!missing.ok());
    CHECK(missing.error().message() == "event cycles is not in this profile (it has: no events)");
}

TEST_CASE("prof JSON document") {
    Fixture f;
    auto report = f.run({});
    REQUIRE(report.ok());
    report->database = "/var/lib/ecpi";
    nlohmann::json doc = render_prof_json(*report);
    CHECK(doc["schema"] == "ecpi.prof");
    CHECK(doc["version"] == 1);
    CHECK(doc["database"] == "/var/lib/ecpi");
    CHECK(doc["epoch"] == "00007");
    CHECK(doc["by"] == "procedure");
    CHECK(doc["pid"].is_null());
    CHECK(doc["events"] == nlohmann::json::array({"cpu-clock", "cycles"}));
    CHECK(doc["totals"]["cpu-clock"] ==
          nlohmann::json({{"samples", 144}, {"unknown", 4}, {"lost", 2}, {"period", kClockPeriod}, {"idle", 0}}));
    CHECK(doc["totals"]["cycles"]["samples"] == 642);
    REQUIRE(doc["rows"].size() == 9);
    const auto& row = doc["rows"][0];
    CHECK(row["procedure"] == "ecpi_test::compute(int)");
    CHECK(row["image"] == ECPI_SYMTEST);
    CHECK(row["build_id"] == f.bid);
    CHECK(row["samples"] == nlohmann::json({{"cpu-clock", 80}, {"cycles", 500}}));
    CHECK(row["percent"].get<double>() == doctest::Approx(55.5556));
    CHECK(row["cumulative_percent"].get<double>() == doctest::Approx(55.5556));
    CHECK(doc["rows"][8]["samples"]["cpu-clock"] == 0);
    CHECK(doc["warnings"].size() == 2);
    // Every key is documented in docs/json-schema.md; nothing else is emitted.
    std::vector<std::string> keys;
    for (const auto& [key, value] : doc.items()) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"by", "database", "epoch", "events", "hints", "pid", "rows", "schema",
                                           "totals", "version", "warnings"});

    ProfOptions by_image;
    by_image.by = ProfOptions::By::kImage;
    by_image.pid = 100;
    auto images = f.run(by_image);
    REQUIRE(images.ok());
    nlohmann::json image_doc = render_prof_json(*images);
    CHECK(image_doc["by"] == "image");
    CHECK(image_doc["pid"] == 100);
    CHECK(!image_doc["rows"][0].contains("procedure"));
    CHECK(image_doc["rows"][0]["image"] == ECPI_SYMTEST);
}

// Issue 20: idle samples are kept apart (header and JSON totals, no row,
// no share) unless --include-idle puts them back as [idle cpu N] rows.
TEST_CASE("prof: idle samples kept apart, or shown per CPU") {
    Fixture f;
    f.contents.meta.events["cpu-clock"].idle = 60;
    f.contents.meta.events["cpu-clock"].idle_per_cpu = {10, 0, 50};
    auto apart = f.run({});
    REQUIRE(apart.ok());
    CHECK(apart->totals.at("cpu-clock").samples == 144);
    CHECK(apart->totals.at("cpu-clock").idle == 60);
    CHECK(apart->rows[0].percent == doctest::Approx(100.0 * 80 / 144));
    for (const auto& row : apart->rows) CHECK(row.image != ecpi::store::kIdleImage);
    const std::string text = render_prof_text(*apart);
    CHECK(text.find("Idle samples, kept apart: 60 samples found a CPU idle (cpu0 10, cpu2 50); not in the shares "
                    "(--include-idle shows them)") != std::string::npos);
    nlohmann::json doc = render_prof_json(*apart);
    CHECK(doc["totals"]["cpu-clock"]["idle_per_cpu"] == nlohmann::json::array({10, 0, 50}));

    // A pid filter leaves the idle task out with every other process.
    ProfOptions one;
    one.pid = 200;
    auto filtered = f.run(one);
    REQUIRE(filtered.ok());
    CHECK(filtered->totals.at("cpu-clock").idle == 0);

    include_idle_samples(f.contents);
    auto shown = f.run({});
    REQUIRE(shown.ok());
    CHECK(shown->totals.at("cpu-clock").samples == 204);
    CHECK(shown->totals.at("cpu-clock").idle == 0);
    std::map<std::string, std::uint64_t> idle_rows;
    for (const auto& row : shown->rows)
        if (row.image == ecpi::store::kIdleImage) idle_rows[row.procedure] = row.samples.at("cpu-clock");
    CHECK(idle_rows == std::map<std::string, std::uint64_t>{{"[idle cpu 0]", 10}, {"[idle cpu 2]", 50}});
    CHECK(shown->rows[0].percent == doctest::Approx(100.0 * 80 / 204));
}

// Issue 30: a tickless idle CPU takes no timer samples; the kernel's idle
// time per CPU, saved with the epoch, replaces the sampled counts of
// cpu-clock (as samples at its period) and is shown as time.
TEST_CASE("prof: idle from the kernel's accounting, as time and as samples at the period") {
    Fixture f;
    f.contents.meta.events["cpu-clock"].period = 200'000;  // 5000 Hz
    f.contents.meta.events["cpu-clock"].idle = 16242;      // all on cpu0: cpu1 slept without a tick
    f.contents.meta.events["cpu-clock"].idle_per_cpu = {16242, 0};
    f.contents.meta.idle_ns_per_cpu = {250'000'000, 3'800'000'000};
    idle_from_kernel(f.contents);
    auto apart = f.run({});
    REQUIRE(apart.ok());
    CHECK(apart->totals.at("cpu-clock").idle_per_cpu == std::vector<std::uint64_t>{1250, 19000});
    CHECK(apart->totals.at("cpu-clock").idle == 20250);
    const std::string text = render_prof_text(*apart);
    CHECK(text.find("Idle samples, kept apart: 20250 samples found a CPU idle (cpu0 1250, cpu1 19000)") !=
          std::string::npos);
    CHECK(text.find("Idle time per CPU (the kernel's accounting): cpu0 0.25 s, cpu1 3.80 s\n") != std::string::npos);
    nlohmann::json doc = render_prof_json(*apart);
    CHECK(doc["idle_ns_per_cpu"] == nlohmann::json::array({250'000'000, 3'800'000'000}));
    CHECK(doc["totals"]["cpu-clock"]["idle_per_cpu"] == nlohmann::json::array({1250, 19000}));

    // --include-idle rows carry the same counts.
    include_idle_samples(f.contents);
    auto shown = f.run({});
    REQUIRE(shown.ok());
    std::map<std::string, std::uint64_t> idle_rows;
    for (const auto& row : shown->rows)
        if (row.image == ecpi::store::kIdleImage) idle_rows[row.procedure] = row.samples.at("cpu-clock");
    CHECK(idle_rows == std::map<std::string, std::uint64_t>{{"[idle cpu 0]", 1250}, {"[idle cpu 1]", 19000}});
}

TEST_CASE("an old database's idle total, without CPUs, shows as one [idle] row") {
    Fixture f;
    f.contents.meta.events["cpu-clock"].idle = 7;
    include_idle_samples(f.contents);
    auto shown = f.run({});
    REQUIRE(shown.ok());
    bool found = false;
    for (const auto& row : shown->rows)
        if (row.image == ecpi::store::kIdleImage) {
            CHECK(row.procedure == "[idle]");
            CHECK(row.samples.at("cpu-clock") == 7);
            found = true;
        }
    CHECK(found);
}

TEST_CASE("prof text output, DCPI Figure 1 layout") {
    Fixture f;
    auto report = f.run({});
    REQUIRE(report.ok());
    report->database = "/var/lib/ecpi";
    std::string text = render_prof_text(*report);
    auto lines = lines_of(text);
    REQUIRE(lines.size() == 2 + 3 * 2 + 1 + 1 + 1 + 1 + 9);
    CHECK(lines[0] == "Database: /var/lib/ecpi");
    CHECK(lines[1] == "Epoch: 00007");
    CHECK(lines[2] == "Total samples for event type cpu-clock = 144, period 10000000 ns");
    CHECK(lines[3] == "    Unknown (unmapped) samples: 4 (2.78%)");
    CHECK(lines[4] == "    Lost samples (ring buffer full): 2");
    CHECK(lines[5] == "Total samples for event type cycles = 642, period 100000 events");
    CHECK(lines[6] == "    Unknown (unmapped) samples: 0 (0.00%)");
    CHECK(lines[7] == "    Lost samples (ring buffer full): 0");
    CHECK(lines[8] == "Without symbols: libgone.so (build id abcdef0123456789): 100.0% of its samples are in functions "
                      "without a name ([libgone.so]); install its debug symbols, or set DEBUGINFOD_URLS");
    CHECK(lines[9] == "The counts given below are the number of samples for each listed event type.");
    CHECK(lines[10].find_first_not_of('=') == std::string::npos);

    // Header: the sort event, %, cum%, then cycles and %, procedure, image.
    const std::string& header = lines[11];
    std::istringstream words(header);
    std::vector<std::string> tokens{std::istream_iterator<std::string>(words), {}};
    CHECK(tokens == std::vector<std::string>{"cpu-clock", "%", "cum%", "cycles", "%", "procedure", "image"});
    std::size_t widest = 0;
    for (std::size_t i = 11; i < lines.size(); ++i) widest = std::max(widest, lines[i].size());
    CHECK(lines[10].size() == widest);

    // Numbers are right-aligned under their headers; procedure and image
    // columns start where their headers start.
    std::size_t clock_end = header.find("cpu-clock") + 9;
    std::size_t cycles_end = header.find("cycles") + 6;
    std::size_t procedure_at = header.find("procedure");
    std::size_t image_at = header.find("image");
    struct Row {
        std::string clock, pct, cum, cycles, procedure, image;
    };
    std::vector<Row> rows = {
        {"80", "55.56%", "55.56%", "500", "ecpi_test::compute(int)", "symtest"},
        {"30", "20.83%", "76.39%", "100", "ecpi_test::Widget::spin(int) const", "symtest"},
        {"8", "5.56%", "81.94%", "2", "[libgone.so]", "libgone.so"},
        {"7", "4.86%", "86.81%", "0", "local_helper(int)", "symtest"},
        {"6", "4.17%", "90.97%", "0", "local_fn", "[kernel]"},
        {"6", "4.17%", "95.14%", "0", "main", "symtest"},
        {"4", "2.78%", "97.92%", "0", "[unknown]", "[unknown]"},
        {"3", "2.08%", "100.00%", "0", "puts@plt", "symtest"},
        {"0", "0.00%", "100.00%", "40", "ecpi_test::compute(double)", "symtest"},
    };
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string& line = lines[12 + i];
        CAPTURE(line);
        CHECK(line.substr(0, clock_end).find_first_not_of(' ') == clock_end - rows[i].clock.size());
        CHECK(line.substr(clock_end - rows[i].clock.size(), rows[i].clock.size()) == rows[i].clock);
        CHECK(line.substr(cycles_end - rows[i].cycles.size(), rows[i].cycles.size()) == rows[i].cycles);
        std::istringstream cells(line);
        std::vector<std::string> numbers(5);
        for (auto& n : numbers) cells >> n;
        CHECK(numbers[0] == rows[i].clock);
        CHECK(numbers[1] == rows[i].pct);
        CHECK(numbers[2] == rows[i].cum);
        CHECK(numbers[3] == rows[i].cycles);
        CHECK(line.substr(procedure_at, rows[i].procedure.size()) == rows[i].procedure);
        CHECK(line.substr(image_at) == rows[i].image);  // last column: no trailing blanks
    }
    // Warnings go to stderr (the CLI), not into the text; the hint is the header's.
    CHECK(text.find("no symbols for /nonexistent/libgone.so") == std::string::npos);

    ProfOptions by_image;
    by_image.by = ProfOptions::By::kImage;
    auto images = f.run(by_image);
    REQUIRE(images.ok());
    auto image_lines = lines_of(render_prof_text(*images));
    REQUIRE(image_lines.size() == 9 + 1 + 4);  // no Database line: the caller did not set it
    CHECK(image_lines[0] == "Epoch: 00007");
    CHECK(image_lines[10].ends_with("  symtest"));
    std::istringstream image_words(image_lines[9]);
    std::vector<std::string> image_tokens{std::istream_iterator<std::string>(image_words), {}};
    CHECK(image_tokens == std::vector<std::string>{"cpu-clock", "%", "cum%", "cycles", "%", "image"});
}

TEST_CASE("prof text escapes hostile names; JSON keeps them exact") {
    Fixture f;
    const std::string evil = "/tmp/evil\n\033[31mRED\033[0m";
    ImageId evil_image{evil, "0123456789abcdef"};
    f.contents.profiles.push_back(Fixture::profile(evil_image, "cpu-clock", kClockPeriod, {{300, {{0x40, 90}}}}));
    auto report = f.run({});
    REQUIRE(report.ok());
    report->database = "/db\033]0;title\007";
    const std::string text = render_prof_text(*report);
    CHECK(text.find('\033') == std::string::npos);
    CHECK(text.find('\007') == std::string::npos);
    CHECK(text.find("Database: /db\\x1b]0;title\\x07\n") != std::string::npos);
    CHECK(text.find("evil\\n\\x1b[31mRED\\x1b[0m") != std::string::npos);
    // One line per row: the newline in the name did not break the table.
    auto lines = lines_of(text);
    CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("RED"); }) == 0);
    nlohmann::json doc = render_prof_json(*report);
    bool exact = false;
    for (const auto& row : doc["rows"]) exact = exact || row["image"] == evil;
    CHECK(exact);
    CHECK(doc["database"] == "/db\033]0;title\007");
}

// One escaping helper for every text report (issue 28): table cells and
// prof's columns escape as escape_for_terminal does, backslashes and C1
// controls included, so an escaped name is never ambiguous.
TEST_CASE("text tables and prof escape names with escape_for_terminal") {
    detail::TextTable table;
    table.add_column("n", true);
    table.add_column("name", false);
    table.add_row({"1", "a\\x1b\xc2\x9b" "2J"});
    const std::string rendered = table.render();
    CHECK(rendered.find("a\\\\x1b\\xc2\\x9b2J") != std::string::npos);
    CHECK(rendered.find("\xc2\x9b") == std::string::npos);

    Fixture f;
    ImageId image{"/tmp/back\\slash\x9b.so", "0123456789abcdef"};
    f.contents.profiles.push_back(Fixture::profile(image, "cpu-clock", kClockPeriod, {{300, {{0x40, 90}}}}));
    auto report = f.run({});
    REQUIRE(report.ok());
    const std::string text = render_prof_text(*report);
    CHECK(text.find("back\\\\slash\\x9b.so") != std::string::npos);
    CHECK(text.find('\x9b') == std::string::npos);
}

TEST_CASE("escape_for_terminal") {
    using ecpi::escape_for_terminal;
    CHECK(escape_for_terminal("plain name_1.so") == "plain name_1.so");
    CHECK(escape_for_terminal("a\nb\tc\rd") == "a\\nb\\tc\\rd");
    CHECK(escape_for_terminal("\033[31m\x7f\\") == "\\x1b[31m\\x7f\\\\");
    CHECK(escape_for_terminal("caf\xc3\xa9 \xc4\x81") == "caf\xc3\xa9 \xc4\x81");  // UTF-8 kept
    CHECK(escape_for_terminal("\xc2\x9b" "2J") == "\\xc2\\x9b2J");                 // UTF-8 C1 CSI
    CHECK(escape_for_terminal("\x9b" "2J") == "\\x9b2J");                         // raw 8-bit CSI
}
