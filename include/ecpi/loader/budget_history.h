// The overhead budget's calibrations of this boot (issue 35). One calibration
// measures a sample's cost for 8-16 s, and on a VM that cost moves by a third
// between minutes: restarted daemons chose rates up to 2.3x apart on the same
// idle machine. A calibration therefore pools its pairs, CPU by CPU, with
// those of the last few calibrations of the same handler on this machine since
// boot (a file under /run, which the kernel empties at reboot), no older than
// two hours, and adds its own for the next. The key says what was measured:
// the handler's code (the kernel's tag of the BPF program), what it records,
// the calibration's rate and run length, the CPUs and the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ecpi/loader/budget.h"
#include "ecpi/result.h"

namespace ecpi::loader {

inline constexpr const char* kCalibrationHistoryPath = "/run/ecpi/budget-calibrations";
inline constexpr std::size_t kCalibrationHistoryPooled = 3;            // earlier calibrations pooled with a new one
inline constexpr std::int64_t kCalibrationHistoryMaxAgeSeconds = 7200;  // none older
inline constexpr std::size_t kCalibrationHistoryKept = 32;             // calibrations the file keeps
inline constexpr std::uint64_t kCalibrationHistoryMaxBytes = 4u << 20;

struct CalibrationRecord {
    std::int64_t unix_seconds = 0;
    std::string key;
    std::vector<std::pair<int, std::vector<double>>> per_cpu;  // each CPU's pairs, microseconds
};

// A short key (16 hex digits) for a description of what was measured.
std::string calibration_key(const std::string& what);

// One line of the history file, and the file's lines back: a line that is
// not a well-formed record (bounded: CPUs, pairs, finite values) is skipped.
std::string format_calibration_record(const CalibrationRecord& record);
std::vector<CalibrationRecord> parse_calibration_history(const std::string& text);

// The calibrations with `key` no older than the maximum age at `now`, newest
// first, at most `at_most`.
std::vector<CalibrationRecord> matching_calibrations(const std::vector<CalibrationRecord>& all, const std::string& key,
                                                     std::int64_t now, std::size_t at_most = kCalibrationHistoryPooled);

// The pairs a fresh calibration measured, CPU by CPU; nothing for a CPU whose
// pairs were not kept.
CalibrationRecord calibration_record(const SampleCost& fresh, const std::string& key, std::int64_t now);

// The fresh calibration with the earlier ones' pairs added to each CPU it
// measured (CPUs only earlier ones measured are left out), summarized again.
SampleCost pool_with_earlier(const SampleCost& fresh, const std::vector<CalibrationRecord>& earlier,
                             const CalibrationOptions& options);

// The history file: missing is empty; not a regular file, or too large, is an error.
[[nodiscard]] Result<std::vector<CalibrationRecord>> read_calibration_history(const std::filesystem::path& path);
// Adds `record`, keeping the newest kCalibrationHistoryKept records within the
// maximum age; written whole to a temporary file and renamed over the old one.
[[nodiscard]] Result<void> append_calibration(const std::filesystem::path& path, const CalibrationRecord& record,
                                              std::int64_t now);

}  // namespace ecpi::loader
