// The profile database (DCPI 4.3.3): a directory of epochs, each holding one
// compact file per (image, event) of sorted (offset, count) pairs, per process.
// store/FORMAT.md is the authority on the bytes; this header is the API.
// store/ depends on nothing of ours but include/ (no BPF, no ELF parsing).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::store {

// Pseudo-pid of a process section that merges all processes (used when
// per-process breakdown is off, e.g. by the daemon for rarely seen pids).
inline constexpr std::uint32_t kAllProcesses = 0xffffffffu;

// Special image paths. Their offsets are: kernel -> pc - address of _text in
// /proc/kallsyms; unknown -> the raw pc; vdso -> pc - start of the mapping.
inline constexpr const char* kKernelImage = "[kernel]";
inline constexpr const char* kUnknownImage = "[unknown]";
inline constexpr const char* kVdsoImage = "[vdso]";
// Not an image: the pseudo-image reports use for idle samples when asked to
// show them (--include-idle); offsets are CPU numbers. Never stored.
inline constexpr const char* kIdleImage = "[idle]";
// The idle task's pid (every CPU's idle loop runs as pid 0).
inline constexpr std::uint32_t kIdlePid = 0;

// What a real recording can hold (FORMAT.md §9): decoders reject larger
// numbers as damaged or forged, so that they never reach a report's totals.
// 2^50 samples: 4,096 CPUs at 100 kHz for 30 days.
inline constexpr std::uint64_t kMaxSampleCount = 1ull << 50;
// A clock rate in MHz: 0 (unknown) or up to 100 GHz.
inline constexpr double kMaxCpuMhz = 100000;
// A sampling period: up to 2^44 (4.9 hours of ns, or 1.8e13 events).
inline constexpr std::uint64_t kMaxPeriod = 1ull << 44;
// One CPU's idle time in an epoch, in ns: up to about ten years.
inline constexpr std::uint64_t kMaxIdleNs = 1ull << 58;
// CPUs a per-CPU list may name (epoch.json's idle_per_cpu).
inline constexpr std::size_t kMaxCpus = 4096;

// An executable image, identified by build id where it has one (lowercase hex,
// empty when the image has none), and by path (as seen by the process that
// mapped it, i.e. inside its own mount namespace).
struct ImageId {
    std::string path;
    std::string build_id;
    auto operator<=>(const ImageId&) const = default;
    bool operator==(const ImageId&) const = default;
};

struct OffsetCount {
    std::uint64_t offset = 0;  // ELF virtual address in the image (link-time address)
    std::uint64_t count = 0;
    auto operator<=>(const OffsetCount&) const = default;
    bool operator==(const OffsetCount&) const = default;
};

struct ProcessCounts {
    std::uint32_t pid = 0;               // kAllProcesses for a merged section
    std::vector<OffsetCount> counts;     // sorted by offset, offsets unique, counts > 0
    bool operator==(const ProcessCounts&) const = default;
};

// All samples of one event in one image, within one epoch.
struct ImageProfile {
    ImageId image;
    std::string event;                   // e.g. "cpu-clock", "cycles"
    std::uint64_t period = 0;            // mean sampling period, in the event's unit (ns for clocks)
    std::vector<ProcessCounts> processes;  // sorted by pid, pids unique

    std::uint64_t total() const;
    // Counts over all processes, sorted by offset.
    std::vector<OffsetCount> merged() const;
    bool operator==(const ImageProfile&) const = default;
};

// Call stacks recorded with -g, one file per event per epoch.
struct StackFrame {
    std::uint32_t image = 0;             // index into StackProfile::images
    std::uint64_t offset = 0;            // same meaning as OffsetCount::offset
    auto operator<=>(const StackFrame&) const = default;
    bool operator==(const StackFrame&) const = default;
};
struct StackSample {
    std::uint32_t pid = 0;
    std::vector<StackFrame> frames;      // leaf first; kernel frames before user frames
    std::uint64_t count = 0;
    bool operator==(const StackSample&) const = default;
};
struct StackProfile {
    std::string event;
    std::uint64_t period = 0;
    std::vector<ImageId> images;
    std::vector<StackSample> stacks;     // (pid, frames) unique
    bool operator==(const StackProfile&) const = default;
};

// Register snapshots kept with an epoch (calc: execution counts anchored by
// register progress). For a bounded fraction of user-mode samples of the
// profiled processes the sampler keeps the general-purpose registers with the
// sample's thread and time; `ecpi calc` pairs consecutive snapshots of one
// thread inside one loop and turns the induction register's progress into an
// iteration rate (DCPI 6.1: time samples alone cannot tell "runs often and
// fast" from "runs less often and stalls"; the registers can). One `.reg`
// file per event per epoch, like stacks (FORMAT.md).
// x86-64 general-purpose registers in their hardware encoding order (the
// ModRM/REX number), so an instruction's register operand indexes `regs`
// directly: rax=0 rcx=1 rdx=2 rbx=3 rsp=4 rbp=5 rsi=6 rdi=7 r8=8 ... r15=15.
enum class GpRegister : std::uint8_t {
    kRax = 0, kRcx, kRdx, kRbx, kRsp, kRbp, kRsi, kRdi,
    kR8, kR9, kR10, kR11, kR12, kR13, kR14, kR15,
};
inline constexpr std::size_t kGpRegisters = 16;
inline constexpr std::uint16_t kFlagsRecorded = 0x8000;
inline constexpr std::uint16_t kFlagsStatusMask = 0x0fff;

struct RegisterSample {
    std::uint32_t pid = 0;
    std::uint32_t tid = 0;
    std::uint64_t time_ns = 0;           // CLOCK_MONOTONIC (bpf_ktime_get_ns) when the sample was taken
    std::uint32_t image = 0;             // index into RegisterProfile::images
    std::uint64_t offset = 0;            // the pc, as an offset in the image (same meaning as OffsetCount::offset)
    std::array<std::uint64_t, kGpRegisters> regs{};  // indexed by GpRegister
    // The status flags at the snapshot: EFLAGS' low 12 bits (CF, PF, AF,
    // ZF, SF, OF) with kFlagsRecorded set; 0 where they were not recorded
    // (register files 1.0). At a conditional jump they say which way that
    // execution went, whatever set them (calc's branch odds).
    std::uint16_t flags = 0;
    auto operator<=>(const RegisterSample&) const = default;
    bool operator==(const RegisterSample&) const = default;
};

// All register snapshots of one event in one epoch.
struct RegisterProfile {
    std::string event;
    std::uint64_t period = 0;            // as in ImageProfile
    std::uint32_t every = 1;             // one sample in `every` (per CPU) carried its registers
    std::vector<ImageId> images;         // no duplicates
    std::vector<RegisterSample> samples; // sorted by (tid, time_ns, pid, image, offset, regs), unique
    bool operator==(const RegisterProfile&) const = default;
};

// Per-event totals kept beside the profiles.
struct EventMeta {
    std::uint64_t period = 0;
    std::uint64_t samples = 0;           // samples stored (including [unknown])
    std::uint64_t unknown = 0;           // samples that mapped to no image
    std::uint64_t lost = 0;              // samples the ring buffer could not take
    std::uint64_t registers_lost = 0;    // register snapshots the register ring buffer could not take
    // Samples that found their CPU running its idle task (pid 0), not in
    // `samples` nor in any profile file (issue 20: idle is kept apart from
    // every share). Per CPU when the recorder counted them so (index = CPU
    // number); empty when only the total is known (databases written before
    // idle was counted apart, whose pid-0 profile sections the reader moves
    // here, FORMAT.md §8).
    std::uint64_t idle = 0;
    std::vector<std::uint64_t> idle_per_cpu;
    // How the user stack walks of -g samples ended, by name (issue 29):
    // "root" (CFI reached the thread's outermost frame), "frame_pointers"
    // (--call-graph fp: not checked), or why the stack was cut ("no_table",
    // "no_row", "unsupported_rule", "frame_limit", "unreadable"). Empty
    // without -g and in epochs written before it existed.
    std::map<std::string, std::uint64_t> stack_ends;
    bool operator==(const EventMeta&) const = default;
};
struct ProcessMeta {
    std::string comm;
    std::string cmdline;
    bool operator==(const ProcessMeta&) const = default;
};
// epoch.json: JSON, written atomically. Merging adds counts, overwrites names.
// One size of the chase that EpochMeta::chase_latency measured: ns per step
// (the median of its rounds) and the rounds' fastest and slowest.
struct ChaseLatency {
    std::uint64_t bytes = 0;
    double ns = 0, ns_low = 0, ns_high = 0;
    bool operator==(const ChaseLatency&) const = default;
};

struct EpochMeta {
    std::map<std::string, EventMeta> events;        // keyed by event name
    std::map<std::uint32_t, ProcessMeta> processes; // keyed by pid
    std::string hostname;
    std::string kernel_release;
    double cpu_mhz = 0;                  // nominal clock, to turn clock periods into cycles
    // The clock the core actually ran at when recording began (turbo
    // included), measured with a dependent add chain; 0 when not measured.
    double cpu_mhz_measured = 0;
    // The same chain's rate while a cpu-clock event sampled it at the
    // recording's period: the cycles a sampled program keeps per second
    // (sampling costs it time); 0 when not measured.
    double cpu_mhz_sampled = 0;
    // A random pointer chase's time per step over buffers of a few sizes,
    // timed like cpu_mhz_sampled (under sampling at the recording's period):
    // what one load of a dependent chain that misses costs a sampled program
    // here, TLB and a VM's nested page walks included (docs/ACCURACY.md).
    // Empty when not measured.
    std::vector<ChaseLatency> chase_latency;
    // The CPU as /proc/cpuinfo names it, so analysis can pick a machine model
    // (calc --machine auto). Empty/0 in databases written before it existed.
    std::string cpu_vendor;              // "AuthenticAMD", "GenuineIntel"
    std::uint64_t cpu_family = 0;
    std::uint64_t cpu_model = 0;
    std::string cpu_name;                // "model name"
    std::int64_t first_sample_unix = 0;
    std::int64_t last_update_unix = 0;
    // The kernel's own idle time per CPU (index = CPU number) while the
    // epoch was recorded, in ns: /proc/stat's idle + iowait, read when
    // recording starts and at every flush (issue 30: a tickless idle CPU takes
    // no timer samples, so sampled idle misses it). Added element-wise; empty
    // in epochs written before it existed.
    std::vector<std::uint64_t> idle_ns_per_cpu;
    bool operator==(const EpochMeta&) const = default;
};

// Encoding of one file in memory. decode_* reject bad magic, an unknown
// (newer) format version, truncation and checksum mismatch with a message.
[[nodiscard]] std::vector<std::uint8_t> encode_profile(const ImageProfile& profile);
[[nodiscard]] Result<ImageProfile> decode_profile(std::span<const std::uint8_t> bytes);
[[nodiscard]] std::vector<std::uint8_t> encode_stacks(const StackProfile& stacks);
[[nodiscard]] Result<StackProfile> decode_stacks(std::span<const std::uint8_t> bytes);
[[nodiscard]] std::vector<std::uint8_t> encode_registers(const RegisterProfile& registers);
[[nodiscard]] Result<RegisterProfile> decode_registers(std::span<const std::uint8_t> bytes);

// Add `from` into `into` (same image and event). Periods must agree.
[[nodiscard]] Result<void> merge_into(ImageProfile& into, const ImageProfile& from);
[[nodiscard]] Result<void> merge_into(StackProfile& into, const StackProfile& from);
// Adds `from`'s samples into `into` (same event; images re-indexed; result
// canonical). Periods must agree.
[[nodiscard]] Result<void> merge_into(RegisterProfile& into, const RegisterProfile& from);
void merge_into(EpochMeta& into, const EpochMeta& from);

// What one flush of the daemon writes (Database::append): one journal record.
struct EpochBatch {
    std::vector<ImageProfile> profiles;
    std::vector<StackProfile> stacks;
    EpochMeta meta;
};

struct EpochContents {
    std::string epoch;
    std::vector<ImageProfile> profiles;
    std::vector<StackProfile> stacks;
    std::vector<RegisterProfile> registers;  // one per event that kept registers
    EpochMeta meta;
    // Files that could not be read, one line each: "<path>: <reason>".
    std::vector<std::string> skipped;
    // Bytes of journal records cut by a crash (FORMAT.md §13): dropped, never
    // parsed; the flush they held was not acknowledged.
    std::uint64_t torn_bytes = 0;
};

// A profile database directory. Writers serialize on an flock of DB/lock;
// every file is replaced atomically (write temp, fsync, rename, fsync dir), so
// readers need no lock and never see a half-written file.
class Database {
public:
    enum class Mode { kReadOnly, kCreate };

    // kCreate makes the directory (and the first epoch) if missing;
    // kReadOnly fails with a clear message when DB is not a database.
    static Result<Database> open(const std::filesystem::path& dir, Mode mode);

    const std::filesystem::path& path() const { return dir_; }

    // Epoch names sort in creation order ("00001", "00002", ...).
    Result<std::vector<std::string>> epochs() const;
    // The newest epoch (created if the database has none and is writable).
    Result<std::string> current_epoch();
    // Close the current epoch and start a new one; returns its name.
    Result<std::string> new_epoch();

    // Removes a closed epoch (never the newest): renamed away first so readers
    // see it whole or not at all. Returns the bytes it held.
    Result<std::uint64_t> remove_epoch(const std::string& epoch);
    // Bytes of all regular files under the database directory.
    std::uint64_t disk_bytes() const;

    // Read-modify-write merges; each is atomic on its own.
    Result<void> merge(const std::string& epoch, const ImageProfile& profile);
    Result<void> merge(const std::string& epoch, const StackProfile& stacks);
    Result<void> merge(const std::string& epoch, const RegisterProfile& registers);
    Result<void> merge(const std::string& epoch, const EpochMeta& meta);

    // Appends one flush to the epoch's journal (FORMAT.md §13): about as many
    // bytes as the flush holds, whatever the epoch's size. Atomic: readers see
    // the whole batch or none of it (a record cut by a crash is dropped when
    // read, and cut off before the next append).
    Result<void> append(const std::string& epoch, const EpochBatch& batch);
    struct Compaction {
        bool done = false;            // a compacted file was written
        std::uint64_t before = 0;     // journal bytes it replaces
        std::uint64_t after = 0;      // bytes of the compacted file
    };
    // Folds the epoch's journal into one compacted file when the segments
    // since the last compaction hold at least `min_bytes` (and the compacted
    // file's size) and folding at least halves what it replaces; a rewrite
    // that saves less is not made. Crash-safe at every step.
    Result<Compaction> compact(const std::string& epoch, std::uint64_t min_bytes);
    // Bytes this handle wrote into the database since it was opened.
    std::uint64_t bytes_written() const { return bytes_written_; }
    // Bytes of torn journal records (cut by a crash) this handle cut off
    // before appending.
    std::uint64_t torn_bytes_dropped() const { return torn_bytes_dropped_; }

    // Everything in one epoch. Corrupt or unknown-version files are listed in
    // `skipped` and the rest is still returned.
    Result<EpochContents> read_epoch(const std::string& epoch) const;
    // Only the epoch's epoch.json (an empty EpochMeta while it has none): what
    // a writer checks before merging, e.g. the periods recorded so far.
    Result<EpochMeta> read_epoch_meta(const std::string& epoch) const;

    // Build-id cache for binaries that will not be reachable by path later
    // (processes in other mount namespaces): DB/images/<bid[0:2]>/<bid[2:]>.
    std::filesystem::path cached_image_path(const std::string& build_id) const;
    Result<void> cache_image(const std::string& build_id, const std::filesystem::path& source);

private:
    explicit Database(std::filesystem::path dir, Mode mode) : dir_(std::move(dir)), mode_(mode) {}
    Result<std::filesystem::path> journal_tail(const std::filesystem::path& dir);
    std::filesystem::path dir_;
    Mode mode_;
    std::uint64_t bytes_written_ = 0;
    std::uint64_t torn_bytes_dropped_ = 0;
    // Journal segments whose tail this handle checked (or wrote): path -> size.
    std::map<std::string, std::uint64_t> checked_tails_;
    // Per epoch directory: journal bytes at the last compaction that did not pay.
    std::map<std::string, std::uint64_t> unpaid_compactions_;
    bool marker_upgraded_ = false;
};

}  // namespace ecpi::store
