// `ecpi export` on an epoch built in memory with call stacks over
// data/annotest.c: the model (return addresses, kernel frames), folded,
// speedscope, JSON, pprof (decoded here field by field) and html.
#include "ecpi/analyze/reports/export.h"

#include <doctest/doctest.h>
#include <zlib.h>

#include "annotest_fixture.h"

using namespace ecpi::analyze;
using namespace ecpi::analyze::testing;
using ecpi::store::EpochContents;
using ecpi::store::ImageId;
using ecpi::store::StackFrame;
using ecpi::store::StackProfile;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

constexpr std::uint64_t kPeriod = 1000;

struct Fixture {
    TempDir tmp;
    std::map<std::string, std::uint64_t> fn = function_addresses(ECPI_ANNOTEST);
    ImageId annotest{ECPI_ANNOTEST, read_build_id(ECPI_ANNOTEST).value()};
    ImageId kernel{ecpi::store::kKernelImage, ""};
    LoadedProfile profile;

    // Stacks are leaf first; non-leaf user frames are return addresses
    // (function start + 1 here, so the call is at the start).
    Fixture() {
        profile.source = {"test.db", "/nonexistent/test.db", "00001"};
        EpochContents& c = profile.contents;
        c.epoch = "00001";
        StackProfile sp;
        sp.event = "cpu-clock";
        sp.period = kPeriod;
        sp.images = {annotest, kernel};
        auto user = [&](const char* name, std::uint64_t off) { return StackFrame{0, fn.at(name) + off}; };
        sp.stacks = {
            {7, {user("leaf_work", 4), user("caller_a", 1), user("main", 1)}, 10},
            {7, {user("leaf_work", 8), user("caller_b", 1), user("main", 1)}, 5},
            {7, {StackFrame{1, 0x150}, user("hot_loop", 0x10), user("main", 1)}, 3},  // in the kernel
            {8, {user("hot_loop", 0x20), user("main", 1)}, 2},
        };
        c.stacks = {sp};
        c.profiles = {
            image_profile(annotest, "cpu-clock", kPeriod,
                          {{7, {{fn.at("leaf_work") + 4, 10}, {fn.at("leaf_work") + 8, 5}}},
                           {8, {{fn.at("hot_loop") + 0x20, 2}}}}),
            image_profile(kernel, "cpu-clock", kPeriod, {{7, {{0x150, 3}}}}),
        };
        c.meta.events["cpu-clock"] = {kPeriod, 20, 0, 1};
        c.meta.processes[7] = {"annotest", "annotest 1"};
        c.meta.processes[8] = {"other", "other"};
        c.meta.hostname = "testhost";
        c.meta.first_sample_unix = 1700000000;
        c.meta.last_update_unix = 1700000010;
    }

    ExportModel model(ExportOptions options = {}) {
        Symbolizer symbolizer = test_symbolizer(tmp.path());
        auto m = build_export_model(profile, options, symbolizer);
        REQUIRE_MESSAGE(m.ok(), m.error().message());
        return std::move(*m);
    }
};

// A protobuf message as (field, wire value) pairs; length-delimited values
// are kept as bytes, varints as numbers. Enough to read profile.proto.
struct Field {
    std::uint32_t number = 0;
    std::uint64_t varint = 0;
    std::string bytes;
    bool is_bytes = false;
};

std::uint64_t read_varint(const std::string& in, std::size_t& pos) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        REQUIRE(pos < in.size());
        auto b = static_cast<unsigned char>(in[pos++]);
        v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) return v;
    }
    FAIL("varint too long");
    return 0;
}

std::vector<Field> decode(const std::string& in) {
    std::vector<Field> out;
    std::size_t pos = 0;
    while (pos < in.size()) {
        std::uint64_t key = read_varint(in, pos);
        Field f;
        f.number = static_cast<std::uint32_t>(key >> 3);
        switch (key & 7) {
            case 0: f.varint = read_varint(in, pos); break;
            case 2: {
                std::uint64_t n = read_varint(in, pos);
                REQUIRE(pos + n <= in.size());
                f.bytes = in.substr(pos, n);
                f.is_bytes = true;
                pos += n;
                break;
            }
            default: FAIL("unexpected wire type " << (key & 7));
        }
        out.push_back(std::move(f));
    }
    return out;
}

std::vector<Field> fields(const std::vector<Field>& msg, std::uint32_t number) {
    std::vector<Field> out;
    for (const auto& f : msg)
        if (f.number == number) out.push_back(f);
    return out;
}

std::uint64_t scalar(const std::vector<Field>& msg, std::uint32_t number) {
    auto fs = fields(msg, number);
    return fs.empty() ? 0 : fs.back().varint;
}

std::vector<std::uint64_t> packed(const std::vector<Field>& msg, std::uint32_t number) {
    std::vector<std::uint64_t> out;
    for (const auto& f : fields(msg, number)) {
        std::size_t pos = 0;
        while (pos < f.bytes.size()) out.push_back(read_varint(f.bytes, pos));
    }
    return out;
}

std::string gunzip(const std::vector<std::uint8_t>& gz) {
    z_stream zs{};
    REQUIRE(inflateInit2(&zs, 15 + 16) == Z_OK);
    std::string out;
    std::vector<unsigned char> in(gz.begin(), gz.end());
    zs.next_in = in.data();
    zs.avail_in = static_cast<uInt>(in.size());
    char buf[1 << 14];
    int rc;
    do {
        zs.next_out = reinterpret_cast<Bytef*>(buf);
        zs.avail_out = sizeof buf;
        rc = inflate(&zs, Z_NO_FLUSH);
        REQUIRE((rc == Z_OK || rc == Z_STREAM_END));
        out.append(buf, sizeof buf - zs.avail_out);
    } while (rc != Z_STREAM_END);
    inflateEnd(&zs);
    return out;
}

}  // namespace

TEST_CASE("export model: stacks, return addresses, kernel frames, totals") {
    Fixture f;
    ExportModel m = f.model();
    REQUIRE(m.events.size() == 1);
    const ExportEvent& ev = m.events[0];
    CHECK(ev.name == "cpu-clock");
    CHECK(ev.stacks);
    CHECK(ev.total == 20);
    CHECK(ev.lost == 1);
    CHECK(ev.period == kPeriod);
    CHECK(m.warnings.empty());
    // Return addresses are stored minus one, leaves as they are.
    bool caller_at_start = false;
    for (const auto& loc : m.locations) {
        const auto& fnc = m.functions[loc.lines.back().function];
        if (fnc.name == "caller_a") caller_at_start = loc.address == f.fn.at("caller_a");
        if (fnc.name == "leaf_work") CHECK((loc.address == f.fn.at("leaf_work") + 4 || loc.address == f.fn.at("leaf_work") + 8));
        if (fnc.name == "hot_loop") CHECK((loc.address == f.fn.at("hot_loop") + 0x10 || loc.address == f.fn.at("hot_loop") + 0x20));
        if (fnc.name == "kernel_fn") CHECK(fnc.kernel);
    }
    CHECK(caller_at_start);
}

TEST_CASE("export folded: root first, process as root, merged and sorted") {
    Fixture f;
    ExportModel m = f.model();
    CHECK(render_folded(m, 0) ==
          "annotest;main;caller_a;leaf_work 10\n"
          "annotest;main;caller_b;leaf_work 5\n"
          "annotest;main;hot_loop;kernel_fn 3\n"
          "other;main;hot_loop 2\n");
    ExportModel only8 = f.model({{}, 8u, true});
    CHECK(render_folded(only8, 0) == "other;main;hot_loop 2\n");
    // Without stacks, one frame per sample under the process.
    f.profile.contents.stacks.clear();
    CHECK(render_folded(f.model(), 0) ==
          "annotest;kernel_fn 3\n"
          "annotest;leaf_work 15\n"
          "other;hot_loop 2\n");
}

TEST_CASE("export speedscope: sampled profile, root-first stacks, nanosecond weights") {
    Fixture f;
    nlohmann::json doc = render_speedscope(f.model());
    CHECK(doc["$schema"] == "https://www.speedscope.app/file-format-schema.json");
    REQUIRE(doc["profiles"].size() == 1);
    const auto& p = doc["profiles"][0];
    CHECK(p["type"] == "sampled");
    CHECK(p["name"] == "cpu-clock");
    CHECK(p["unit"] == "nanoseconds");
    CHECK(p["startValue"] == 0);
    CHECK(p["endValue"] == 20 * kPeriod);
    REQUIRE(p["samples"].size() == p["weights"].size());
    const auto& frames = doc["shared"]["frames"];
    std::map<std::string, std::uint64_t> folded;  // re-fold to check every stack
    for (std::size_t i = 0; i < p["samples"].size(); ++i) {
        std::string line;
        for (const auto& idx : p["samples"][i]) line += (line.empty() ? "" : ";") + frames[idx.get<std::size_t>()]["name"].get<std::string>();
        folded[line] += p["weights"][i].get<std::uint64_t>() / kPeriod;
    }
    CHECK(folded == std::map<std::string, std::uint64_t>{{"annotest;main;caller_a;leaf_work", 10},
                                                         {"annotest;main;caller_b;leaf_work", 5},
                                                         {"annotest;main;hot_loop;kernel_fn", 3},
                                                         {"other;main;hot_loop", 2}});
    // DWARF declarations reach the frames.
    bool hot_loop_has_file = false;
    for (const auto& fr : frames)
        if (fr["name"] == "hot_loop") hot_loop_has_file = fr.contains("file") && fr["line"].get<int>() > 0;
    CHECK(hot_loop_has_file);
}

TEST_CASE("export json: procedures with self and total, stacks, schema") {
    Fixture f;
    nlohmann::json doc = render_export_json(f.model());
    CHECK(doc["schema"] == "ecpi.export");
    CHECK(doc["version"] == 1);
    CHECK(doc["events"] == nlohmann::json::array({"cpu-clock"}));
    CHECK(doc["totals"]["cpu-clock"]["samples"] == 20);
    CHECK(doc["totals"]["cpu-clock"]["stacks"] == true);
    CHECK(doc["hostname"] == "testhost");
    const auto& rows = doc["procedures"]["cpu-clock"];
    std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>> got;
    for (const auto& r : rows) got.emplace_back(r["procedure"], r["self"], r["total"]);
    CHECK(got == std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>>{
                     {"leaf_work", 15, 15}, {"kernel_fn", 3, 3}, {"hot_loop", 2, 5},
                     {"main", 0, 20},       {"caller_a", 0, 10}, {"caller_b", 0, 5}});
    CHECK(rows[0]["self_percent"] == 75.0);
    const auto& stacks = doc["stacks"]["cpu-clock"];
    REQUIRE(stacks.size() == 4);
    std::uint64_t sum = 0;
    for (const auto& s : stacks) {
        sum += s["count"].get<std::uint64_t>();
        CHECK(doc["frames"][s["frames"][0].get<std::size_t>()]["procedure"] == "main");  // root first
    }
    CHECK(sum == 20);
    CHECK(doc["processes"]["7"]["comm"] == "annotest");
}

TEST_CASE("export pprof: profile.proto fields, decoded") {
    Fixture f;
    ExportModel m = f.model();
    auto gz = render_pprof(m);
    REQUIRE(gz.ok());
    REQUIRE(gz->size() > 18);
    CHECK((*gz)[0] == 0x1f);
    CHECK((*gz)[1] == 0x8b);
    std::vector<std::uint8_t> raw = encode_pprof(m);
    std::string inflated = gunzip(*gz);
    CHECK(inflated == std::string(raw.begin(), raw.end()));

    auto profile = decode(inflated);
    std::vector<std::string> strings;
    for (const auto& s : fields(profile, 6)) strings.push_back(s.bytes);
    REQUIRE(!strings.empty());
    CHECK(strings[0].empty());
    auto str = [&](std::uint64_t i) { return i < strings.size() ? strings[i] : std::string("<bad>"); };

    auto types = fields(profile, 1);
    REQUIRE(types.size() == 2);
    auto t0 = decode(types[0].bytes), t1 = decode(types[1].bytes);
    CHECK(str(scalar(t0, 1)) == "samples");
    CHECK(str(scalar(t0, 2)) == "count");
    CHECK(str(scalar(t1, 1)) == "cpu");
    CHECK(str(scalar(t1, 2)) == "nanoseconds");
    auto period_type = decode(fields(profile, 11).at(0).bytes);
    CHECK(str(scalar(period_type, 1)) == "cpu");
    CHECK(scalar(profile, 12) == kPeriod);
    CHECK(scalar(profile, 9) == 1700000000ull * 1000000000ull);
    CHECK(scalar(profile, 10) == 10ull * 1000000000ull);

    // Functions and locations by id.
    std::map<std::uint64_t, std::string> function_names;
    for (const auto& fnf : fields(profile, 5)) {
        auto fn = decode(fnf.bytes);
        function_names[scalar(fn, 1)] = str(scalar(fn, 2));
    }
    std::map<std::uint64_t, std::string> location_function;  // outermost line
    std::map<std::uint64_t, std::uint64_t> location_mapping;
    for (const auto& lf : fields(profile, 4)) {
        auto loc = decode(lf.bytes);
        auto lines = fields(loc, 4);
        REQUIRE(!lines.empty());
        location_function[scalar(loc, 1)] = function_names[scalar(decode(lines.back().bytes), 1)];
        location_mapping[scalar(loc, 1)] = scalar(loc, 2);
    }
    auto mappings = fields(profile, 3);
    REQUIRE(mappings.size() == 2);
    bool annotest_mapping = false;
    for (const auto& mf : mappings) {
        auto mp = decode(mf.bytes);
        if (str(scalar(mp, 5)) == ECPI_ANNOTEST) {
            annotest_mapping = true;
            CHECK(str(scalar(mp, 6)) == f.annotest.build_id);
            CHECK(scalar(mp, 7) == 1);  // has_functions
            CHECK(scalar(mp, 9) == 1);  // has_line_numbers (DWARF)
        }
    }
    CHECK(annotest_mapping);

    // Samples: leaf first, values (count, count x period), pid label.
    std::map<std::string, std::uint64_t> folded;
    std::uint64_t sum = 0;
    for (const auto& sf : fields(profile, 2)) {
        auto s = decode(sf.bytes);
        auto ids = packed(s, 1);
        auto values = packed(s, 2);
        REQUIRE(values.size() == 2);
        CHECK(values[1] == values[0] * kPeriod);
        sum += values[0];
        std::string line;
        for (auto it = ids.rbegin(); it != ids.rend(); ++it) line += (line.empty() ? "" : ";") + location_function[*it];
        folded[line] += values[0];
        auto labels = fields(s, 3);
        REQUIRE(!labels.empty());
        auto pid = decode(labels[0].bytes);
        CHECK(str(scalar(pid, 1)) == "pid");
        CHECK((scalar(pid, 3) == 7 || scalar(pid, 3) == 8));
    }
    CHECK(sum == 20);
    CHECK(folded == std::map<std::string, std::uint64_t>{{"main;caller_a;leaf_work", 10},
                                                         {"main;caller_b;leaf_work", 5},
                                                         {"main;hot_loop;kernel_fn", 3},
                                                         {"main;hot_loop", 2}});
}

TEST_CASE("export html: data embedded safely, tree totals") {
    Fixture f;
    // A process name that would end the <script> block if not escaped.
    const std::string evil = "</script><img src=x onerror=alert(1)>";
    f.profile.contents.meta.processes[8].comm = evil;
    std::string page = render_flamegraph_html(f.model(), 0);
    CHECK(page.starts_with("<!DOCTYPE html>"));
    CHECK_FALSE(contains(page, "/*ECPI_DATA*/"));
    CHECK_FALSE(contains(page, "</script><img"));
    CHECK_FALSE(contains(page, "http://"));
    CHECK_FALSE(contains(page, "https://"));
    const std::string open = "<script id=\"ecpi-data\" type=\"application/json\">";
    std::size_t at = page.find(open);
    REQUIRE(at != std::string::npos);
    at += open.size();
    std::size_t end = page.find("</script>", at);
    REQUIRE(end != std::string::npos);
    nlohmann::json data = nlohmann::json::parse(page.substr(at, end - at));
    CHECK(data["event"] == "cpu-clock");
    CHECK(data["total"] == 20);
    CHECK(data["tree"][1] == 20);  // [frame, value, self, children]
    bool found = false;
    for (const auto& fr : data["frames"]) found = found || fr["name"] == evil;
    CHECK(found);
    CHECK(data["top"][0]["name"] == "leaf_work");
}

TEST_CASE("export: events asked for, empty epochs") {
    Fixture f;
    Symbolizer symbolizer = test_symbolizer(f.tmp.path());
    ExportOptions options;
    options.events = {"cycles"};
    auto missing = build_export_model(f.profile, options, symbolizer);
    REQUIRE_FALSE(missing.ok());
    CHECK(contains(missing.error().message(), "has no cycles samples (it has cpu-clock)"));
    LoadedProfile empty;
    empty.source = {"empty.db", "/nonexistent/empty.db", "00001"};
    auto none = build_export_model(empty, {}, symbolizer);
    REQUIRE_FALSE(none.ok());
    CHECK(contains(none.error().message(), "holds no samples"));
    ExportModel m = f.model();
    CHECK_FALSE(export_event_index(m, "cycles").ok());
    CHECK(export_event_index(m, "cpu-clock").value() == 0);
}
