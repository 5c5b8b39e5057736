// `perf script -F ip,brstack` text into LBR samples. Contracts and the
// format: include/ecpi/analyze/paths/perf_script.h.
#include "ecpi/analyze/paths/perf_script.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>

#include "ecpi/terminal_text.h"

namespace ecpi::analyze {
namespace {

constexpr const char* kExpectedFormat =
    "expected the text `perf script -F ip,brstack` prints (one sample a line: the sample address in hex, then "
    "branch entries FROM/TO/M|P|-/X|-/A|-/CYCLES); make it with `perf record -b -e cycles:u -- COMMAND` and "
    "`perf script -F ip,brstack -i perf.data > FILE`";
constexpr std::size_t kMaxHexDigits = 16;
constexpr std::size_t kExcerptBytes = 40;

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> tokens;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && is_blank(line[i])) ++i;
        const std::size_t start = i;
        while (i < line.size() && !is_blank(line[i])) ++i;
        if (i > start) tokens.push_back(line.substr(start, i - start));
    }
    return tokens;
}

// A token quoted in a warning: bounded and escaped (the text is untrusted).
std::string excerpt(std::string_view token) {
    std::string shown = escape_for_terminal(token.substr(0, kExcerptBytes));
    if (token.size() > kExcerptBytes) shown += "...";
    return "'" + shown + "'";
}

std::optional<std::uint64_t> parse_hex_digits(std::string_view digits) {
    if (digits.empty() || digits.size() > kMaxHexDigits) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : digits) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return std::nullopt;
        value = value << 4 | static_cast<std::uint64_t>(d);
    }
    return value;
}

bool has_hex_prefix(std::string_view s) { return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'); }

// The sample address: perf prints it bare; "0x" is accepted too.
std::optional<std::uint64_t> parse_address(std::string_view token) {
    return parse_hex_digits(has_hex_prefix(token) ? token.substr(2) : token);
}

std::optional<std::uint32_t> parse_cycles(std::string_view field) {
    if (field == "-") return 0;
    if (field.empty() || field.size() > 10) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : field) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (value > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
    return static_cast<std::uint32_t>(value);
}

bool is_decimal(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "PID" or "PID/TID", as -F pid / -F pid,tid print them.
bool is_pid_tid(std::string_view token) {
    const auto slash = token.find('/');
    if (slash == std::string_view::npos) return is_decimal(token);
    return is_decimal(token.substr(0, slash)) && is_decimal(token.substr(slash + 1));
}

bool looks_like_branch_entry(std::string_view token) {
    return has_hex_prefix(token) && token.find('/') != std::string_view::npos;
}

std::vector<std::string_view> split_slashes(std::string_view entry) {
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (;;) {
        const auto slash = entry.find('/', start);
        fields.push_back(entry.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
        if (slash == std::string_view::npos) return fields;
        start = slash + 1;
    }
}

// The prediction field: "-", "P", "M", and perf 6.x's "PN"/"MN" (not taken).
bool parse_prediction(std::string_view field, BranchRecord& record) {
    if (field == "-") return true;
    if (field == "P" || field == "PN") {
        record.predicted = true;
        return true;
    }
    if (field == "M" || field == "MN") {
        record.mispredicted = true;
        return true;
    }
    return false;
}

// One FROM/TO/PRED/TX/ABORT/CYCLES[/...] entry; the reason when malformed.
std::optional<std::string> parse_branch_entry(std::string_view token, BranchRecord& record) {
    const auto fields = split_slashes(token);
    if (fields.size() < 6) return "truncated branch entry " + excerpt(token) + " (fewer than FROM/TO/PRED/TX/ABORT/CYCLES)";
    const auto from = has_hex_prefix(fields[0]) ? parse_hex_digits(fields[0].substr(2)) : std::nullopt;
    const auto to = has_hex_prefix(fields[1]) ? parse_hex_digits(fields[1].substr(2)) : std::nullopt;
    if (!from || !to) return "bad address in branch entry " + excerpt(token);
    record = BranchRecord{};
    record.from = *from;
    record.to = *to;
    if (!parse_prediction(fields[2], record)) return "bad prediction flag in branch entry " + excerpt(token);
    if (fields[3] != "-" && fields[3] != "X") return "bad transaction flag in branch entry " + excerpt(token);
    if (fields[4] != "-" && fields[4] != "A") return "bad abort flag in branch entry " + excerpt(token);
    record.in_tx = fields[3] == "X";
    record.abort = fields[4] == "A";
    const auto cycles = parse_cycles(fields[5]);
    if (!cycles) return "bad cycle count in branch entry " + excerpt(token);
    record.cycles = *cycles;
    return std::nullopt;  // fields after the cycles (branch type, speculation) are ignored
}

// The tokens before the sample address: none, or [COMM...] PID[/TID].
std::optional<std::string> check_leading_fields(const std::vector<std::string_view>& tokens, std::size_t ip_index) {
    if (ip_index == 0 || is_pid_tid(tokens[ip_index - 1])) return std::nullopt;
    return "unexpected " + excerpt(tokens[ip_index - 1]) + " before the sample address (expected [COMM] PID[/TID])";
}

// One sample line into `sample`; the reason when malformed.
std::optional<std::string> parse_sample_line(const std::vector<std::string_view>& tokens, LbrSample& sample) {
    const auto first_entry = static_cast<std::size_t>(
        std::find_if(tokens.begin(), tokens.end(), looks_like_branch_entry) - tokens.begin());
    if (first_entry == 0) return "no sample address before the first branch entry";
    const std::size_t ip_index = first_entry - 1;
    const auto ip = parse_address(tokens[ip_index]);
    if (!ip) return "bad sample address " + excerpt(tokens[ip_index]);
    if (auto why = check_leading_fields(tokens, ip_index)) return why;
    const std::size_t entries = tokens.size() - first_entry;
    if (entries > kMaxBranchesPerSample)
        return std::to_string(entries) + " branch entries, more than the " + std::to_string(kMaxBranchesPerSample) +
               " any branch stack holds";
    sample.ip = *ip;
    sample.branches.resize(entries);
    for (std::size_t i = 0; i < entries; ++i) {
        if (auto why = parse_branch_entry(tokens[first_entry + i], sample.branches[i]))
            return "entry " + std::to_string(i + 1) + ": " + *why;
    }
    return std::nullopt;
}

// Reads one line of at most kMaxPerfScriptLineBytes into `line`. Returns
// false at the end of input; sets `overlong` (and discards the line) when it
// is longer.
bool read_bounded_line(std::istream& in, std::vector<char>& buffer, std::string_view& line, bool& overlong) {
    overlong = false;
    in.getline(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = in.gcount();
    if (in.fail() && !in.eof() && !in.bad() && static_cast<std::size_t>(got) == buffer.size() - 1) {
        in.clear();
        in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
        overlong = true;
        line = {};
        return true;
    }
    if (got == 0 && (in.eof() || in.fail())) return false;
    // By length, not up to a NUL: a NUL inside a line must not hide its rest.
    const auto length = static_cast<std::size_t>(got) - (in.eof() ? 0 : 1);  // less the '\n' extracted
    line = std::string_view(buffer.data(), length);
    return true;
}

void skip_line(PerfScriptStats& stats, const std::string& why) {
    ++stats.skipped_lines;
    if (stats.warnings.size() < kMaxPerfScriptWarnings)
        stats.warnings.push_back("line " + std::to_string(stats.lines) + ": " + why);
}

Error no_samples_error(const PerfScriptStats& stats) {
    std::string msg = "no LBR sample in " + std::to_string(stats.lines) + " lines";
    if (stats.skipped_lines > 0)
        msg += " (" + std::to_string(stats.skipped_lines) + " malformed; " + stats.warnings.front() + ")";
    return Error(msg + "; " + kExpectedFormat);
}

Error no_branches_error(const PerfScriptStats& stats) {
    return Error(std::to_string(stats.samples) +
                 " samples but not one branch record (perf script without brstack, or a recording without -b); " +
                 kExpectedFormat);
}

}  // namespace

Result<PerfScriptStats> parse_perf_script_brstack(std::istream& in,
                                                  const std::function<void(const LbrSample&)>& on_sample) {
    PerfScriptStats stats;
    std::vector<char> buffer(kMaxPerfScriptLineBytes + 1);
    LbrSample sample;
    std::string_view line;
    bool overlong = false;
    while (read_bounded_line(in, buffer, line, overlong)) {
        ++stats.lines;
        if (overlong) {
            skip_line(stats, "longer than " + std::to_string(kMaxPerfScriptLineBytes) + " bytes");
            continue;
        }
        const auto tokens = split_fields(line);
        if (tokens.empty() || tokens.front().front() == '#') continue;
        if (auto why = parse_sample_line(tokens, sample)) {
            skip_line(stats, *why);
            continue;
        }
        ++stats.samples;
        stats.branches += sample.branches.size();
        on_sample(sample);
    }
    if (in.bad()) return Error("reading perf script text: input error after line " + std::to_string(stats.lines));
    if (stats.samples == 0) return no_samples_error(stats);
    if (stats.branches == 0) return no_branches_error(stats);
    return stats;
}

}  // namespace ecpi::analyze
