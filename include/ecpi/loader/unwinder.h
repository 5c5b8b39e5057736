// Feeds the sampler's CFI walk (issue 29): per image an unwind table
// (loader/unwind/unwind_table.h) in the shared row array, built once per build id
// and shared by every process that maps the image; per process its
// executable mappings -> (table, load bias), from /proc/PID/maps whenever
// the recorder sees the process map something new.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
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

#include <nlohmann/json.hpp>

#include "ecpi/loader/process_table.h"
#include "ecpi/loader/sampler.h"
#include "ecpi/loader/unwind_cache.h"
#include "ecpi/loader/unwind_table.h"

struct ecpi_unwind_table;  // bpf/ecpi_abi.h

namespace ecpi::loader {

// Tables are built on a thread of its own, so that a large image (a second
// or more) never holds up the recording loop that reads the ring buffer.
class Unwinder {
public:
    // `cache_dir`: tables are cached there by build id (DB/unwind).
    explicit Unwinder(UnwindMapFds maps, std::optional<std::filesystem::path> cache_dir = std::nullopt,
                      UnwindLimits limits = {});
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

    // Walks the user stacks of `samples` that came as stack copies (taken
    // before their process's tables loaded) with the same tables. A copy
    // whose process is not loaded yet is held back (removed from `samples`)
    // until it is, the process exits, 5 s pass, or finish() was called;
    // then it is walked with what there is (frame pointers inside the copy).
    void complete(std::vector<RawStackSample>& samples);
    // The recording ends: waits up to `wait_s` for table builds under way,
    // then complete() holds nothing back.
    void finish(double wait_s = 1.0);
    // Adds how the walks of stack copies of `event` ended since the last
    // call to meta.stack_ends.
    void add_copied_ends(std::uint16_t event, store::EventMeta& meta);

    struct Stats {
        std::uint64_t tables = 0;       // images with a table in the kernel
        std::uint64_t rows = 0;         // rows in the kernel, all tables
        std::uint64_t page_entries = 0; // page index entries in the kernel, all tables (4 bytes each)
        std::uint64_t unindexed = 0;    // tables loaded without a page index (its array was full): searched whole
        std::uint64_t processes = 0;    // processes whose mappings are in the kernel
        double build_s = 0;             // time spent building tables
        std::uint64_t stack_copies = 0; // samples taken before their tables loaded, walked in user space
        std::array<std::uint64_t, 7> copied_ends{};  // how their walks ended, kStackEndNames order
        std::map<std::string, std::uint64_t> refused;  // images without a table, by reason
        std::map<std::string, std::uint64_t> cache;    // the disk cache: hits, written, full, damaged, write_failed
    };
    Stats stats() const;
    // One line per image refused since the last call.
    std::vector<std::string> take_warnings();

    // The time (RawStackSample::time_ns) of the oldest stack copy complete()
    // still holds for its tables; ~0 when none.
    std::uint64_t oldest_held_ns() const;

private:
    struct UserMapping {
        std::uint64_t start = 0, end = 0, bias = 0;
        std::uint32_t table = 0;
    };
    struct Held {
        std::chrono::steady_clock::time_point since;
        RawStackSample sample;
    };
    struct Image {
        std::uint32_t table = 0;  // ECPI_UNWIND_NO_TABLE when refused
        std::vector<ImageInfo::Segment> segments;
    };
    const Image& image(std::uint32_t pid, const std::string& path, const std::string& inode_key);
    const Image& vdso_image();
    Result<UnwindTable> obtain_table(const std::filesystem::path& file, const std::string& build_id);
    std::uint32_t load_table(const std::filesystem::path& file, const std::string& name, const std::string& build_id);
    void write_page_index(const std::vector<UnwindRow>& rows, ecpi_unwind_table& t);
    void refresh_one(std::uint32_t pid);
    void refuse(const std::string& reason, const std::string& name, const std::string& detail);
    void run();
    void remove_process(std::uint32_t pid);
    std::uint32_t lookup_locked(std::uint32_t pid, std::uint64_t pc, UnwindRow& row) const;
    bool settle_locked(RawStackSample& sample, std::chrono::steady_clock::time_point since,
                       std::chrono::steady_clock::time_point now);
    void purge_gone_locked(std::chrono::steady_clock::time_point now);

    UnwindMapFds maps_;
    UnwindLimits limits_;
    std::optional<UnwindCache> cache_;  // the worker's
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
    std::condition_variable idle_;  // the worker finished a batch
    bool busy_ = false;             // the worker is reading mappings or building
    bool final_ = false;            // finish() was called
    // What the walk of stack copies needs: the kernel's tables and mappings, mirrored.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> user_tables_;     // (first row, rows) by table id
    std::unordered_map<std::uint32_t, std::vector<UserMapping>> user_processes_;
    std::unordered_map<std::uint32_t, std::chrono::steady_clock::time_point> gone_;  // exited, since
    const void* rows_view_ = nullptr;  // the row array, mapped read-only
    std::size_t rows_view_bytes_ = 0;
    // The recording thread's own (complete()).
    std::vector<Held> held_;
    std::uint64_t copies_walked_ = 0;  // under mu_
    std::array<std::uint64_t, 7> copied_totals_{};  // under mu_, all events
    std::map<std::uint16_t, std::array<std::uint64_t, 7>> copied_ends_;  // by event, kStackEndNames order
    // The worker's own.
    std::set<std::uint32_t> loaded_;                      // processes with an entry in the kernel
    std::unordered_map<std::string, Image> by_inode_;     // "dev inode path" -> image
    std::unordered_map<std::string, std::uint32_t> by_build_id_;
    std::uint32_t next_row_ = 0, next_table_ = 0, next_page_ = 0;
    std::uint32_t next_generation_ = 1;  // ecpi_unwind_process.generation: new per entry written, never 0
    Stats stats_;
    std::thread worker_;  // last: started once everything above exists
};

// Makes `out` an Unwinder over the sampler's maps following `pids` (none:
// every process in /proc), read at once or at their next mmap; tables
// cached in `cache_dir` (none: not cached).
void start_unwinder(std::optional<Unwinder>& out, const Sampler& sampler, const std::vector<std::uint32_t>& pids,
                    bool read_now, std::optional<std::filesystem::path> cache_dir = std::nullopt);

// The kernel's row array for a whole-system recording, sized from what is
// mapped now: the executable text of every distinct file in `proc_root`'s
// processes at one row per kUnwindTextBytesPerRow bytes (this machine's
// tables hold about one row per 55 bytes of text), twice that for processes
// still to come, at least `floor` rows and at most kUnwindMaxRows (56 MiB:
// with the page index and the mappings, within the 64 MB goal). Images past
// it are refused as "space", counted.
inline constexpr std::uint64_t kUnwindTextBytesPerRow = 32;
inline constexpr std::uint32_t kUnwindMaxRows = 7u << 20;
[[nodiscard]] std::uint32_t unwind_rows_for_system(const std::filesystem::path& proc_root, std::uint32_t floor);

// "tables", "rows", "locked_bytes", "processes", "stack_copies", "build_s",
// "cache.<what>" and "refused.<reason>" (images without a table), for the recording's report.
std::map<std::string, double> unwinder_summary(const Unwinder::Stats& stats);

// For `ctl status`: the tables in the kernel, the disk cache, and how every
// walk ended so far (the handler's counters of all events and the stack
// copies'), with the share that reached the root.
nlohmann::json unwind_status_json(const Unwinder::Stats& stats, const std::vector<SamplerCounters>& counters);
// That object as ctl status's text line.
std::string unwind_status_line(const nlohmann::json& status);

// Adds what the stack-end counters gained since `flushed` to
// meta.stack_ends (by kStackEndNames) and remembers them.
void add_stack_ends(const SamplerCounters& now, std::array<std::uint64_t, 7>& flushed, store::EventMeta& meta);

}  // namespace ecpi::loader
