// Feeds the sampler's CFI walk (issue 29): per image an unwind table
// (loader/unwind/unwind_table.h) in the shared row array, built once per build id
// and shared by every process that maps the image; per process its
// executable mappings -> (table, load bias), from /proc/PID/maps whenever
// the recorder sees the process map something new.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
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

// Tables are built on a thread of its own, so that a large image (a second
// or more) never holds up the recording loop that reads the ring buffer.
class Unwinder {
public:
    explicit Unwinder(UnwindMapFds maps, UnwindLimits limits = {});
    ~Unwinder();  // stops the thread (a build in progress is cancelled)
    Unwinder(const Unwinder&) = delete;
    Unwinder& operator=(const Unwinder&) = delete;

    // Only these processes and their descendants (recording a command or
    // -p); by default every process. `read_now`: their mappings are read at
    // once (else at their next mmap: a command not yet exec'd).
    void follow_only(const std::vector<std::uint32_t>& pids, bool read_now);
    // The process mapped something: its mappings are read again (if it is
    // followed). Until its tables are in the kernel its samples fall back
    // to frame pointers and are counted as "no_table".
    void note(std::uint32_t pid);
    // A new process: followed when its parent is.
    void note_fork(std::uint32_t pid, std::uint32_t parent);
    // The process exited: its mappings leave the kernel's map.
    void forget(std::uint32_t pid);

    struct Stats {
        std::uint64_t tables = 0;       // images with a table in the kernel
        std::uint64_t rows = 0;         // rows in the kernel, all tables
        std::uint64_t processes = 0;    // processes whose mappings are in the kernel
        double build_s = 0;             // time spent building tables
        std::map<std::string, std::uint64_t> refused;  // images without a table, by reason
    };
    Stats stats() const;
    // One line per image refused since the last call.
    std::vector<std::string> take_warnings();

private:
    struct Image {
        std::uint32_t table = 0;  // ECPI_UNWIND_NO_TABLE when refused
        std::vector<ImageInfo::Segment> segments;
    };
    const Image& image(std::uint32_t pid, const std::string& path, const std::string& inode_key);
    std::uint32_t load_table(const std::filesystem::path& file, const std::string& name);
    void refresh_one(std::uint32_t pid);
    void refuse(const std::string& reason, const std::string& name, const std::string& detail);
    void run();
    void remove_process(std::uint32_t pid);

    UnwindMapFds maps_;
    UnwindLimits limits_;
    std::filesystem::path proc_root_ = "/proc";
    // Shared with the recording thread, under mu_.
    mutable std::mutex mu_;
    std::condition_variable wake_;
    std::atomic<bool> stop_{false};
    std::set<std::uint32_t> pending_;
    std::set<std::uint32_t> exited_;
    std::optional<std::set<std::uint32_t>> followed_;     // none: every process
    std::vector<std::string> warnings_;
    Stats shared_stats_;
    // The worker's own.
    std::set<std::uint32_t> loaded_;                      // processes with an entry in the kernel
    std::unordered_map<std::string, Image> by_inode_;     // "dev inode path" -> image
    std::unordered_map<std::string, std::uint32_t> by_build_id_;
    std::uint32_t next_row_ = 0, next_table_ = 0;
    Stats stats_;
    std::thread worker_;  // last: started once everything above exists
};

// Makes `out` an Unwinder over the sampler's maps following `pids` (none:
// every process in /proc), read at once or at their next mmap.
void start_unwinder(std::optional<Unwinder>& out, const Sampler& sampler, const std::vector<std::uint32_t>& pids,
                    bool read_now);

// "tables", "rows", "locked_bytes", "processes", "build_s", and
// "refused.<reason>" (images without a table), for the recording's report.
std::map<std::string, double> unwinder_summary(const Unwinder::Stats& stats);

// Adds what the stack-end counters gained since `flushed` to
// meta.stack_ends (by kStackEndNames) and remembers them.
void add_stack_ends(const SamplerCounters& now, std::array<std::uint64_t, 7>& flushed, store::EventMeta& meta);

}  // namespace ecpi::loader
