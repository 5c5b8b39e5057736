// Where each process's executable images are mapped, over time (DCPI 4.3.2).
// Fed by the kernel's perf mmap2/comm/fork/exit records and a /proc scan at
// start; answers (pid, pc) -> (image, ELF virtual address) for the drain.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::loader {

// One executable image as the loader knows it.
struct ImageInfo {
    store::ImageId id;             // path inside the process's mount namespace + build id
    std::string readable_path;     // where this process can open it (/proc/PID/root/... or map_files)
    bool foreign_namespace = false;  // mapped by a process in another mount namespace
    // PT_LOAD segments (file offset -> vaddr); empty for pseudo images.
    struct Segment { std::uint64_t offset, filesz, vaddr; };
    std::vector<Segment> segments;
    bool elf_read = false;         // segments/build id read from the file (or tried)
    std::string elf_error;         // why the file could not be read, once
};

struct Mapping {
    std::uint64_t start = 0, end = 0, pgoff = 0;
    std::uint32_t image = 0;       // index into ProcessTable::images()
};

struct ResolvedPc {
    std::uint32_t image = 0;       // index into images()
    std::uint64_t offset = 0;      // ELF virtual address, or pc - start for pseudo images
};

class ProcessTable {
public:
    // Records from the kernel (or a /proc scan), in the order they happened.
    // `path` is as the kernel reports it; `build_id` may be empty (read later).
    // `time_ns` (CLOCK_MONOTONIC) is when it was mapped: what it replaces
    // still names the samples taken before then (resolve's time_ns), until
    // forget_replaced_before; 0 (a /proc scan, a caller without times): the
    // replaced mappings are forgotten at once.
    void on_mmap(std::uint32_t pid, std::uint64_t start, std::uint64_t len, std::uint64_t pgoff,
                 const std::string& path, const std::string& build_id, std::uint64_t time_ns = 0);
    void on_comm(std::uint32_t pid, const std::string& comm, bool exec);
    void on_fork(std::uint32_t pid, std::uint32_t parent_pid);
    void on_exit(std::uint32_t pid);

    // Reads /proc/PID/maps (executable mappings) and comm of one process or
    // of every process. Processes that vanish meanwhile are skipped.
    void scan_proc(std::uint32_t pid);
    void scan_all_proc();

    // (pid, pc) of a user-mode sample taken at `time_ns` (CLOCK_MONOTONIC;
    // kNow or 0, no time known: with the mappings as they are). Looks in the current address
    // space first, then in the ones the process had before exec (a sample
    // taken before exec may be drained after it). In each space, a mapping
    // replaced after time_ns at that pc names it, not its replacement: the
    // samples drained from the ring buffer are older than the mmap records
    // read after them.
    static constexpr std::uint64_t kNow = ~0ull;
    std::optional<ResolvedPc> resolve(std::uint32_t pid, std::uint64_t pc, std::uint64_t time_ns = kNow);

    // Forgets the mappings replaced at or before `horizon_ns`: every sample
    // taken before then has been resolved.
    void forget_replaced_before(std::uint64_t horizon_ns);

    // Processes that exited before the previous call are forgotten: their
    // samples were all drained by then (exit is seen after a drain flip, and
    // every earlier sample sits in the drained table).
    void reap_exited();

    const std::vector<ImageInfo>& images() const { return images_; }
    std::string comm(std::uint32_t pid) const;
    // The command line read while the process lived (at exec, or inherited at
    // fork), kept until it is reaped: a short-lived process is gone by the
    // time its samples are drained (issue 34).
    void set_cmdline(std::uint32_t pid, std::string cmdline) { process(pid).cmdline = std::move(cmdline); }
    // The arguments the sampler read in BPF at the process's exec: what
    // cmdline() gives when /proc could not be read in time (a process that
    // ran for less than a tick of the side band).
    void set_exec_args(std::uint32_t pid, std::string args) { process(pid).exec_args = std::move(args); }
    std::string cmdline(std::uint32_t pid) const;
    std::size_t process_count() const { return processes_.size(); }

    // Called once for each new file-backed image, after its ELF was read
    // (the recorder caches binaries of other mount namespaces).
    std::function<void(const ImageInfo&)> new_image_hook;

    // The build id of the vDSO (the same in every process), once saved.
    void set_vdso_build_id(std::string build_id) { vdso_build_id_ = std::move(build_id); }

    // Where /proc is (tests point it elsewhere).
    void set_proc_root(std::filesystem::path root) { proc_root_ = std::move(root); }

private:
    // A mapping (or the part of one) that a later mmap replaced at until_ns.
    struct Replaced {
        Mapping mapping;
        std::uint64_t until_ns = 0;
    };
    struct AddressSpace {
        std::vector<Mapping> mappings;  // sorted by start
        std::vector<Replaced> replaced;  // in the order they were replaced
    };
    struct Process {
        std::string comm;
        std::string cmdline;
        std::string exec_args;  // read in BPF at exec (ecpi_exec_record)
        std::vector<AddressSpace> spaces;  // oldest first; back() is current
        int exit_age = -1;                 // -1 alive; else reap passes since exit
    };

    Process& process(std::uint32_t pid);
    std::uint32_t intern_image(std::uint32_t pid, const std::string& path, const std::string& build_id,
                               std::uint64_t start, std::uint64_t end);
    std::optional<ResolvedPc> resolve_in(const AddressSpace& space, std::uint64_t pc, std::uint64_t time_ns);
    ResolvedPc resolve_mapping(const Mapping& m, std::uint64_t pc);
    void read_elf(ImageInfo& image);
    bool in_foreign_namespace(std::uint32_t pid);

    std::unordered_map<std::uint32_t, Process> processes_;
    std::vector<ImageInfo> images_;
    std::map<std::pair<std::string, std::string>, std::uint32_t> image_index_;  // (path, build id)
    std::filesystem::path proc_root_ = "/proc";
    std::optional<std::uint64_t> own_mnt_ns_;
    std::string vdso_build_id_;
};

// Reads the GNU build id and PT_LOAD segments of an ELF file.
struct ElfLayout {
    std::string build_id;
    std::vector<ImageInfo::Segment> segments;
};
[[nodiscard]] Result<ElfLayout> read_elf_layout(const std::filesystem::path& file);

// Copies this process's vDSO (an ELF image in memory) to `file`; returns its
// build id. Every process of one kernel maps the same vDSO.
[[nodiscard]] Result<std::string> save_vdso(const std::filesystem::path& file);

// Address of _text in /proc/kallsyms (kernel offsets are relative to it).
[[nodiscard]] Result<std::uint64_t> kernel_text_address(const std::filesystem::path& kallsyms = "/proc/kallsyms");

}  // namespace ecpi::loader
