// `perf script -F ip,brstack` text: the entry fields, the format variations
// of perf versions, malformed and hostile lines, and the hand-made fixture
// tests/fixtures/paths/brstack.txt (README.md beside it).
#include "ecpi/analyze/paths/perf_script.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

using namespace ecpi::analyze;

namespace {

struct Parsed {
    ecpi::Result<PerfScriptStats> stats;
    std::vector<LbrSample> samples;
};

Parsed parse(const std::string& text) {
    std::istringstream in(text);
    std::vector<LbrSample> samples;
    auto stats = parse_perf_script_brstack(in, [&](const LbrSample& s) { samples.push_back(s); });
    return {std::move(stats), std::move(samples)};
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// One entry on its own after a valid sample address; the parsed record, or
// nothing when the line was skipped.
std::optional<BranchRecord> parse_entry(const std::string& entry) {
    auto p = parse("  401000 " + entry + "\n  401000 0x1/0x2/P/-/-/1/\n");
    REQUIRE(p.stats.ok());
    if (p.samples.size() == 1) return std::nullopt;  // the first line was skipped
    REQUIRE(p.samples.size() == 2);
    REQUIRE(p.samples[0].branches.size() == 1);
    return p.samples[0].branches[0];
}

}  // namespace

TEST_CASE("perf 6.1 lines: sample address, entries newest first, every field") {
    auto p = parse(
        "     5629ec742901 0x5629ec7428f4/0x5629ec742901/P/-/-/19/  0x5629ec742967/0x5629ec7428d0/M/-/-/1/ \n"
        "     5629ec742905 0x5629ec742905/0x5629ec74296c/P/-/-/3/ \n");
    REQUIRE(p.stats.ok());
    CHECK(p.stats->lines == 2);
    CHECK(p.stats->samples == 2);
    CHECK(p.stats->branches == 3);
    CHECK(p.stats->skipped_lines == 0);
    CHECK(p.stats->warnings.empty());
    REQUIRE(p.samples.size() == 2);
    CHECK(p.samples[0].ip == 0x5629ec742901);
    REQUIRE(p.samples[0].branches.size() == 2);
    const auto& newest = p.samples[0].branches[0];
    CHECK(newest.from == 0x5629ec7428f4);
    CHECK(newest.to == 0x5629ec742901);
    CHECK(newest.predicted);
    CHECK(!newest.mispredicted);
    CHECK(newest.cycles == 19);
    const auto& older = p.samples[0].branches[1];
    CHECK(older.from == 0x5629ec742967);
    CHECK(older.to == 0x5629ec7428d0);
    CHECK(older.mispredicted);
    CHECK(!older.predicted);
    CHECK(older.cycles == 1);
    CHECK(p.samples[1].ip == 0x5629ec742905);
    REQUIRE(p.samples[1].branches.size() == 1);
    CHECK(p.samples[1].branches[0].cycles == 3);
}

TEST_CASE("cycle counts: present, absent as 0 or '-', the 16-bit maximum, too large") {
    CHECK(parse_entry("0x10/0x20/P/-/-/0/")->cycles == 0);
    CHECK(parse_entry("0x10/0x20/P/-/-/-/")->cycles == 0);
    CHECK(parse_entry("0x10/0x20/P/-/-/27/")->cycles == 27);
    CHECK(parse_entry("0x10/0x20/P/-/-/65535/")->cycles == 65535);
    CHECK(parse_entry("0x10/0x20/P/-/-/4294967295")->cycles == 4294967295u);
    CHECK(!parse_entry("0x10/0x20/P/-/-/4294967296/"));
    CHECK(!parse_entry("0x10/0x20/P/-/-/12c/"));
    CHECK(!parse_entry("0x10/0x20/P/-/-//"));
    CHECK(!parse_entry("0x10/0x20/P/-/-/-3/"));
}

TEST_CASE("prediction, transaction and abort flags") {
    auto m = parse_entry("0x10/0x20/M/-/-/5/");
    CHECK((m->mispredicted && !m->predicted));
    auto pr = parse_entry("0x10/0x20/P/-/-/5/");
    CHECK((pr->predicted && !pr->mispredicted));
    auto none = parse_entry("0x10/0x20/-/-/-/5/");
    CHECK((!none->predicted && !none->mispredicted));
    auto pn = parse_entry("0x10/0x20/PN/-/-/5/COND/-");  // perf 6.x: predicted, not taken
    CHECK((pn->predicted && !pn->mispredicted));
    auto mn = parse_entry("0x10/0x20/MN/-/-/5/COND/-");
    CHECK((mn->mispredicted && !mn->predicted));
    auto tx = parse_entry("0x10/0x20/P/X/A/5/");
    CHECK((tx->in_tx && tx->abort));
    auto plain = parse_entry("0x10/0x20/P/-/-/5/");
    CHECK((!plain->in_tx && !plain->abort));
    CHECK(!parse_entry("0x10/0x20/Q/-/-/5/"));
    CHECK(!parse_entry("0x10/0x20/p/-/-/5/"));
    CHECK(!parse_entry("0x10/0x20/P/Y/-/5/"));
    CHECK(!parse_entry("0x10/0x20/P/-/B/5/"));
    CHECK(!parse_entry("0x10/0x20/PM/-/-/5/"));
}

TEST_CASE("an entry without its cycle count is truncated") {
    auto p = parse("  401000 0x10/0x20/P/-/-\n  401000 0x10/0x20/P/-/-/1\n");
    REQUIRE(p.stats.ok());
    CHECK(p.stats->samples == 1);
    REQUIRE(p.stats->warnings.size() == 1);
    CHECK(contains(p.stats->warnings[0], "line 1: entry 1: truncated branch entry '0x10/0x20/P/-/-'"));
}

TEST_CASE("no flag of one sample leaks into the next (the sample is reused between calls)") {
    auto p = parse(
        "  401000 0x10/0x20/M/X/A/7/ 0x30/0x40/P/-/-/8/\n"
        "  401000 0x50/0x60/-/-/-/-/ 0x70/0x80/-/-/-/0/\n");
    REQUIRE(p.stats.ok());
    REQUIRE(p.samples.size() == 2);
    for (const auto& b : p.samples[1].branches) {
        CHECK(!b.mispredicted);
        CHECK(!b.predicted);
        CHECK(!b.in_tx);
        CHECK(!b.abort);
        CHECK(b.cycles == 0);
    }
}

TEST_CASE("fields perf versions add after the cycles are ignored") {
    for (const char* entry : {"0xa/0xb/P/-/-/9", "0xa/0xb/P/-/-/9/", "0xa/0xb/P/-/-/9/-", "0xa/0xb/P/-/-/9/COND",
                              "0xa/0xb/P/-/-/9/CALL/NON_SPEC_CORRECT_PATH", "0xa/0xb/P/-/-/9/COND/-/x/y"}) {
        INFO(entry);
        auto r = parse_entry(entry);
        REQUIRE(r);
        CHECK(r->from == 0xa);
        CHECK(r->to == 0xb);
        CHECK(r->cycles == 9);
    }
}

TEST_CASE("leading whitespace, tabs, CRLF, comments, and leading comm pid/tid fields") {
    auto p = parse(
        "# ========\n"
        "\n"
        "\t 401000\t0x1/0x2/P/-/-/1\r\n"
        "  myprog  4242/4243   401004 0x3/0x4/P/-/-/2/ \n"
        "  Web Content 77/78 401008 0x5/0x6/P/-/-/3/\n"
        "  4242  40100c 0x7/0x8/P/-/-/4/\n"
        "   0x401010 0x9/0xa/P/-/-/5/\n"
        "   401014\r\n");
    REQUIRE(p.stats.ok());
    CHECK(p.stats->lines == 8);
    CHECK(p.stats->skipped_lines == 0);
    REQUIRE(p.samples.size() == 6);
    const std::uint64_t ips[] = {0x401000, 0x401004, 0x401008, 0x40100c, 0x401010, 0x401014};
    for (std::size_t i = 0; i < 6; ++i) CHECK(p.samples[i].ip == ips[i]);
    CHECK(p.samples[0].branches.at(0).cycles == 1);  // the '\r' is not part of the cycle count
    CHECK(p.samples[2].branches.at(0).from == 5);
    CHECK(p.samples[5].branches.empty());  // an empty branch stack is a sample
}

TEST_CASE("malformed lines are skipped, counted and named by line number; good lines around them stay") {
    std::string overlong = "  401000 " + std::string(kMaxPerfScriptLineBytes, ' ') + "0x1/0x2/P/-/-/1/";
    std::string too_many = "  401000";
    for (std::size_t i = 0; i <= kMaxBranchesPerSample; ++i) too_many += " 0x1/0x2/P/-/-/1/";
    auto p = parse(
        "  401000 0x1/0x2/P/-/-/1/\n"          // 1 good
        "  40g000 0x1/0x2/P/-/-/1/\n"          // 2 bad sample address
        "  401000 0xzz/0x2/P/-/-/1/\n"         // 3 bad from
        "  401000 0x1/0x2/P/-/-/1/ 0x1/0x2/P\n"  // 4 truncated second entry
        "  401000 0x1/0x12345678901234567/P/-/-/1/\n"  // 5 17 hex digits
        + overlong + "\n"                       // 6 overlong
        "  401000 0x3/0x4/M/-/-/2/\n"          // 7 good
        + too_many + "\n"                       // 8 more than 1024 entries
        "  [001] 401000 0x1/0x2/P/-/-/1/\n"    // 9 unexpected leading field
        "  0x1/0x2/P/-/-/1/\n"                 // 10 no sample address
        "  401000 1/0x2/P/-/-/1/\n");          // 11 an entry without 0x: read as the sample address
    REQUIRE(p.stats.ok());
    CHECK(p.stats->lines == 11);
    CHECK(p.stats->samples == 2);
    CHECK(p.stats->branches == 2);
    CHECK(p.stats->skipped_lines == 9);
    REQUIRE(p.samples.size() == 2);
    CHECK(p.samples[1].branches.at(0).mispredicted);
    const auto& w = p.stats->warnings;
    REQUIRE(w.size() == 9);
    CHECK(contains(w[0], "line 2: bad sample address '40g000'"));
    CHECK(contains(w[1], "line 3: entry 1: bad address"));
    CHECK(contains(w[2], "line 4: entry 2: truncated branch entry '0x1/0x2/P'"));
    CHECK(contains(w[3], "line 5: entry 1: bad address"));
    CHECK(contains(w[4], "line 6: longer than"));
    CHECK(contains(w[5], "line 8: 1025 branch entries"));
    CHECK(contains(w[6], "line 9: unexpected '[001]'"));
    CHECK(contains(w[7], "line 10: no sample address"));
    CHECK(contains(w[8], "line 11: bad sample address '1/0x2/P/-/-/1/'"));
}

TEST_CASE("a line of exactly the maximum length is read; one byte more is skipped") {
    const std::string entry = " 0x1/0x2/P/-/-/1/";
    auto line_of = [&](std::size_t bytes) {
        std::string head = "401000";
        return head + std::string(bytes - head.size() - entry.size(), ' ') + entry;
    };
    auto at_limit = parse(line_of(kMaxPerfScriptLineBytes) + "\n" + line_of(kMaxPerfScriptLineBytes));
    REQUIRE(at_limit.stats.ok());
    CHECK(at_limit.stats->samples == 2);  // with and without a final newline
    CHECK(at_limit.stats->skipped_lines == 0);
    auto over = parse(line_of(kMaxPerfScriptLineBytes + 1) + "\n  401000 0x1/0x2/P/-/-/1/\n");
    REQUIRE(over.stats.ok());
    CHECK(over.stats->lines == 2);
    CHECK(over.stats->samples == 1);
    CHECK(over.stats->skipped_lines == 1);
}

TEST_CASE("warnings stop at ten; the count of skipped lines does not") {
    std::string text;
    for (int i = 0; i < 25; ++i) text += "  zz 0x1/0x2/P/-/-/1/\n";
    text += "  401000 0x1/0x2/P/-/-/1/\n";
    auto p = parse(text);
    REQUIRE(p.stats.ok());
    CHECK(p.stats->skipped_lines == 25);
    CHECK(p.stats->warnings.size() == kMaxPerfScriptWarnings);
    CHECK(contains(p.stats->warnings.back(), "line 10:"));
}

TEST_CASE("hostile bytes: control characters are escaped in warnings; a NUL does not end a line") {
    auto p = parse(std::string("  40\x1b[31m00 0x1/0x2/P/-/-/1/\n") + std::string("  401000\0 0x1/0x2/P/-/-/1/\n", 27) +
                   "  401000 0x1/0x2/P/-/-/1/\n");
    REQUIRE(p.stats.ok());
    CHECK(p.stats->samples == 1);
    REQUIRE(p.stats->warnings.size() == 2);
    CHECK(contains(p.stats->warnings[0], "\\x1b[31m"));
    CHECK(!contains(p.stats->warnings[0], "\x1b"));
    CHECK(contains(p.stats->warnings[1], "line 2: bad sample address '401000\\x00'"));
}

TEST_CASE("no sample at all is an error naming the format and the perf commands") {
    for (const char* text : {"", "\n\n", "# only a header\n", "garbage\nmore garbage\n"}) {
        INFO(text);
        auto p = parse(text);
        REQUIRE(!p.stats.ok());
        const auto& msg = p.stats.error().message();
        CHECK(contains(msg, "no LBR sample"));
        CHECK(contains(msg, "perf script -F ip,brstack"));
        CHECK(contains(msg, "perf record -b"));
        CHECK(!contains(msg, "\n"));
        CHECK(p.samples.empty());
    }
    auto bad = parse("garbage\n");
    CHECK(contains(bad.stats.error().message(), "1 malformed; line 1: "));
}

TEST_CASE("samples without a single branch record are an error (perf script without brstack)") {
    auto p = parse("  401000\n  401004\n");
    REQUIRE(!p.stats.ok());
    CHECK(contains(p.stats.error().message(), "2 samples but not one branch record"));
    CHECK(contains(p.stats.error().message(), "perf record -b"));
}

TEST_CASE("the hand-made fixture tests/fixtures/paths/brstack.txt") {
    std::ifstream in(ECPI_PATHS_FIXTURES "/brstack.txt");
    REQUIRE(in);
    std::vector<LbrSample> samples;
    auto stats = parse_perf_script_brstack(in, [&](const LbrSample& s) { samples.push_back(s); });
    REQUIRE(stats.ok());
    CHECK(stats->lines == 6);
    CHECK(stats->samples == 5);
    CHECK(stats->branches == 12);
    CHECK(stats->skipped_lines == 0);
    REQUIRE(samples.size() == 5);
    CHECK(samples[0].ip == 0x40103c);
    CHECK(samples[0].branches.empty());
    // perf 6.1 shape.
    CHECK(samples[1].ip == 0x401024);
    REQUIRE(samples[1].branches.size() == 4);
    CHECK(samples[1].branches[0].from == 0x401020);
    CHECK(samples[1].branches[0].to == 0x401010);
    CHECK(samples[1].branches[0].cycles == 7);
    CHECK(samples[1].branches[2].mispredicted);
    CHECK(samples[1].branches[2].cycles == 31);
    CHECK(!samples[1].branches[3].predicted);
    CHECK(!samples[1].branches[3].mispredicted);
    CHECK(samples[1].branches[3].cycles == 0);
    // perf 6.6 shape, PN.
    REQUIRE(samples[2].branches.size() == 3);
    CHECK(samples[2].branches[1].cycles == 5);
    CHECK(samples[2].branches[2].predicted);
    CHECK(samples[2].branches[2].from == 0x401038);
    // comm pid/tid, X, A, '-' cycles.
    CHECK(samples[3].ip == 0x401030);
    REQUIRE(samples[3].branches.size() == 3);
    CHECK(samples[3].branches[1].in_tx);
    CHECK(samples[3].branches[2].abort);
    CHECK(samples[3].branches[2].from == 0x7f0012345678);
    CHECK(samples[3].branches[2].cycles == 0);
    // older perf, the 16-bit maximum.
    REQUIRE(samples[4].branches.size() == 2);
    CHECK(samples[4].branches[0].cycles == 3);
    CHECK(samples[4].branches[1].cycles == 65535);
}

TEST_CASE("fuzz: damaged copies of the fixture never break the parser's counts or bounds") {
    std::ifstream in(ECPI_PATHS_FIXTURES "/brstack.txt");
    REQUIRE(in);
    const std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    static constexpr char kAlphabet[] = "0123456789abcdefxX/-PMNXA \t\n\r#\0\xff";
    const std::string alphabet(kAlphabet, sizeof kAlphabet - 1);  // the NUL included
    std::uint64_t state = 0x9e3779b97f4a7c15ull;  // xorshift64: the same inputs on every run
    auto next = [&state] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    int parsed = 0;
    for (int round = 0; round < 2000; ++round) {
        std::string text = original;
        const int edits = 1 + static_cast<int>(next() % 8);
        for (int e = 0; e < edits && !text.empty(); ++e) {
            const std::size_t at = next() % text.size();
            switch (next() % 3) {
                case 0: text[at] = alphabet[next() % alphabet.size()]; break;
                case 1: text.erase(at, 1 + next() % 12); break;
                default: text.insert(at, text.substr(next() % text.size(), next() % 40)); break;
            }
        }
        std::istringstream damaged(text);
        std::uint64_t seen_samples = 0, seen_branches = 0;
        auto stats = parse_perf_script_brstack(damaged, [&](const LbrSample& s) {
            ++seen_samples;
            seen_branches += s.branches.size();
            CHECK(s.branches.size() <= kMaxBranchesPerSample);
        });
        if (!stats.ok()) {
            CHECK(stats.error().message().find('\n') == std::string::npos);
            continue;
        }
        ++parsed;
        CHECK(stats->samples == seen_samples);
        CHECK(stats->branches == seen_branches);
        CHECK(stats->samples + stats->skipped_lines <= stats->lines);
        CHECK(stats->warnings.size() == std::min<std::uint64_t>(stats->skipped_lines, kMaxPerfScriptWarnings));
        for (const auto& w : stats->warnings) CHECK(w.find('\n') == std::string::npos);
    }
    CHECK(parsed > 1000);  // most damaged copies still hold good lines
}
