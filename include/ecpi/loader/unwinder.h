// Feeds the sampler's CFI walk (issue 29): per image an unwind table
// (loader/unwind_table.h) in the shared row array, built once per build id
// and shared by every process that maps the image; per process its
// executable mappings -> (table, load bias), from /proc/PID/maps whenever
// the recorder sees the process map something new.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "ecpi/loader/process_table.h"
#include "ecpi/loader/sampler.h"
#include "ecpi/loader/unwind_table.h"

namespace ecpi::loader {

class Unwinder {
public:
    explicit Unwinder(UnwindMapFds maps, UnwindLimits limits = {});

    // Only these processes and their descendants (recording a command or
    // -p); by default every process.
    void follow_only(const std::vector<std::uint32_t>& pids);
    // The process mapped something: its mappings are read again at the next
    // refresh (if it is followed).
    void note(std::uint32_t pid);
    // A new process: followed when its parent is.
    void note_fork(std::uint32_t pid, std::uint32_t parent);
    // The process exited: its mappings leave the kernel's map.
    void forget(std::uint32_t pid);
    // Updates the noted processes until `budget` is spent (tables are built
    // on the way); the rest wait for the next call. Until then their samples
    // fall back to frame pointers and are counted as "no table".
    void refresh(std::chrono::milliseconds budget);

    struct Stats {
        std::uint64_t tables = 0;       // images with a table in the kernel
        std::uint64_t rows = 0;         // rows in the kernel, all tables
        std::uint64_t processes = 0;    // processes whose mappings are in the kernel
        double build_s = 0;             // time spent building tables
        std::map<std::string, std::uint64_t> refused;  // images without a table, by reason
    };
    const Stats& stats() const { return stats_; }

    // One line per image refused, once (the recorder passes its warn_once).
    std::function<void(const std::string&)> warn;
    void set_proc_root(std::filesystem::path root) { proc_root_ = std::move(root); }

private:
    struct Image {
        std::uint32_t table = 0;  // ECPI_UNWIND_NO_TABLE when refused
        std::vector<ImageInfo::Segment> segments;
    };
    const Image& image(std::uint32_t pid, const std::string& path, const std::string& inode_key);
    std::uint32_t load_table(const std::filesystem::path& file, const std::string& name);
    void refresh_one(std::uint32_t pid);
    void refuse(const std::string& reason, const std::string& name, const std::string& detail);

    UnwindMapFds maps_;
    UnwindLimits limits_;
    std::filesystem::path proc_root_ = "/proc";
    std::set<std::uint32_t> pending_;
    std::optional<std::set<std::uint32_t>> followed_;     // none: every process
    std::set<std::uint32_t> loaded_;                      // processes with an entry in the kernel
    std::unordered_map<std::string, Image> by_inode_;     // "dev inode path" -> image
    std::unordered_map<std::string, std::uint32_t> by_build_id_;
    std::uint32_t next_row_ = 0, next_table_ = 0;
    Stats stats_;
};

// How long one refresh may build tables before the recorder's loop goes on.
inline constexpr std::chrono::milliseconds kUnwindRefreshBudget{200};

// Makes `out` an Unwinder over the sampler's maps with `pids` noted (none:
// every process in /proc).
void start_unwinder(std::optional<Unwinder>& out, const Sampler& sampler, const std::vector<std::uint32_t>& pids,
                    std::function<void(const std::string&)> warn);

// "tables", "rows", "locked_bytes", "processes", "build_s", and
// "refused.<reason>" (images without a table), for the recording's report.
std::map<std::string, double> unwinder_summary(const Unwinder::Stats& stats);

// Adds what the stack-end counters gained since `flushed` to
// meta.stack_ends (by kStackEndNames) and remembers them.
void add_stack_ends(const SamplerCounters& now, std::array<std::uint64_t, 7>& flushed, store::EventMeta& meta);

}  // namespace ecpi::loader
