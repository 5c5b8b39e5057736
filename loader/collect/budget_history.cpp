#include "ecpi/loader/budget_history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "ecpi/loader/bounded_file.h"
#include "ecpi/terminal_text.h"

namespace ecpi::loader {
namespace {

constexpr const char* kMagic = "ecpi-calibration-v1";
constexpr std::size_t kMaxCpus = 64;        // per record
constexpr std::size_t kMaxPairs = 1000;     // per CPU (a calibration stops at 400)
constexpr double kMaxAbsCostUs = 1e5;       // a pair's estimate; beyond it the line is not ours

bool parse_int(std::string_view text, std::int64_t& out) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
}

// "CPU:v,v,...": one CPU's pairs.
bool parse_cpu_pairs(std::string_view field, std::pair<int, std::vector<double>>& out) {
    const auto colon = field.find(':');
    std::int64_t cpu = 0;
    if (colon == std::string_view::npos || !parse_int(field.substr(0, colon), cpu) || cpu < 0 || cpu > 1 << 20) return false;
    out.first = static_cast<int>(cpu);
    std::string_view rest = field.substr(colon + 1);
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string value(rest.substr(0, comma));
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v) || std::abs(v) > kMaxAbsCostUs)
            return false;
        if (out.second.size() == kMaxPairs) return false;
        out.second.push_back(v);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return !out.second.empty();
}

bool parse_record(const std::string& line, CalibrationRecord& out) {
    std::istringstream fields(line);
    std::string magic, when, field;
    if (!(fields >> magic >> when >> out.key) || magic != kMagic || !parse_int(when, out.unix_seconds)) return false;
    if (out.key.empty() || out.key.size() > 64) return false;
    while (fields >> field) {
        std::pair<int, std::vector<double>> cpu;
        if (out.per_cpu.size() == kMaxCpus || !parse_cpu_pairs(field, cpu)) return false;
        out.per_cpu.push_back(std::move(cpu));
    }
    return !out.per_cpu.empty();
}

// Our directory under /run: created for root alone; one that someone else
// owns or may write is not used.
Result<void> check_directory(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error("creating " + escape_for_terminal(dir.string()) + ": " + ec.message());
    struct stat st{};
    if (::lstat(dir.c_str(), &st) != 0) return Error::from_errno(errno, "reading " + escape_for_terminal(dir.string()));
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return Error(escape_for_terminal(dir.string()) + " is not a directory of this user that only it may write");
    return ok();
}

}  // namespace

std::string calibration_key(const std::string& what) {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (unsigned char c : what) h = (h ^ c) * 1099511628211ULL;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
}

std::string format_calibration_record(const CalibrationRecord& record) {
    std::string line = std::string(kMagic) + " " + std::to_string(record.unix_seconds) + " " + record.key;
    char value[32];
    for (const auto& [cpu, pairs] : record.per_cpu) {
        line += " " + std::to_string(cpu) + ":";
        for (std::size_t i = 0; i < pairs.size(); ++i) {
            std::snprintf(value, sizeof value, "%s%.5g", i ? "," : "", pairs[i]);
            line += value;
        }
    }
    return line;
}

std::vector<CalibrationRecord> parse_calibration_history(const std::string& text) {
    std::vector<CalibrationRecord> out;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        CalibrationRecord record;
        if (parse_record(line, record)) out.push_back(std::move(record));
    }
    return out;
}

std::vector<CalibrationRecord> matching_calibrations(const std::vector<CalibrationRecord>& all, const std::string& key,
                                                     std::int64_t now, std::size_t at_most) {
    std::vector<CalibrationRecord> out;
    for (const auto& r : all)
        if (r.key == key && r.unix_seconds <= now && now - r.unix_seconds <= kCalibrationHistoryMaxAgeSeconds) out.push_back(r);
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.unix_seconds > b.unix_seconds; });
    if (out.size() > at_most) out.resize(at_most);
    return out;
}

CalibrationRecord calibration_record(const SampleCost& fresh, const std::string& key, std::int64_t now) {
    CalibrationRecord record;
    record.unix_seconds = now;
    record.key = key;
    for (const auto& c : fresh.per_cpu)
        if (!c.costs_us.empty()) record.per_cpu.emplace_back(c.cpu, c.costs_us);
    return record;
}

SampleCost pool_with_earlier(const SampleCost& fresh, const std::vector<CalibrationRecord>& earlier,
                             const CalibrationOptions& options) {
    if (earlier.empty()) return fresh;
    std::vector<CpuCost> per_cpu;
    int earlier_pairs = 0;
    for (const auto& c : fresh.per_cpu) {
        std::vector<double> costs = c.costs_us;
        for (const auto& record : earlier)
            for (const auto& [cpu, pairs] : record.per_cpu)
                if (cpu == c.cpu) {
                    costs.insert(costs.end(), pairs.begin(), pairs.end());
                    earlier_pairs += static_cast<int>(pairs.size());
                }
        CpuCost pooled = summarize_cpu(c.cpu, c.hz, std::move(costs), options);
        pooled.seconds = c.seconds;
        per_cpu.push_back(std::move(pooled));
    }
    SampleCost out = summarize_costs(std::move(per_cpu), options.confidence);
    out.earlier_calibrations = static_cast<int>(earlier.size());
    out.earlier_pairs = earlier_pairs;
    return out;
}

Result<std::vector<CalibrationRecord>> read_calibration_history(const std::filesystem::path& path) {
    ECPI_ASSIGN_OR_RETURN(auto text, read_bounded_file(path, kCalibrationHistoryMaxBytes));
    if (!text) return std::vector<CalibrationRecord>();
    return parse_calibration_history(*text);
}

Result<void> append_calibration(const std::filesystem::path& path, const CalibrationRecord& record, std::int64_t now) {
    ECPI_RETURN_IF_ERROR(check_directory(path.parent_path()));
    ECPI_ASSIGN_OR_RETURN(auto all, read_calibration_history(path));
    std::erase_if(all, [&](const auto& r) { return r.unix_seconds > now || now - r.unix_seconds > kCalibrationHistoryMaxAgeSeconds; });
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.unix_seconds < b.unix_seconds; });
    if (all.size() >= kCalibrationHistoryKept) all.erase(all.begin(), all.end() - (kCalibrationHistoryKept - 1));
    all.push_back(record);
    std::string bytes;
    for (const auto& r : all) bytes += format_calibration_record(r) + "\n";
    return replace_file(path, bytes, 0600);
}

}  // namespace ecpi::loader
