#include "ecpi/loader/probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include "ecpi/loader/perf_events.h"
#include "ecpi/loader/probe_calibration.h"
#include "ecpi/loader/probe_stack_samples.h"
#include "ecpi/loader/probe_symbols.h"
#include "ecpi/loader/probe_unwind.h"
#include "ecpi/loader/process_table.h"
#include "ecpi_abi.h"
#include "probe.skel.h"

namespace ecpi::loader {
namespace fs = std::filesystem;

static_assert(sizeof(ecpi_probe_entry_record) == 32 + 8 * ECPI_PROBE_MAX_DEPTH, "ABI: ecpi_probe_entry_record");
static_assert(offsetof(ecpi_probe_entry_record, ips) == 32, "ABI: ecpi_probe_entry_record.ips");
static_assert(sizeof(ecpi_probe_exit_record) == 40, "ABI: ecpi_probe_exit_record");
static_assert(offsetof(ecpi_probe_stack, data) == 32, "ABI: ecpi_probe_stack.data");
static_assert(sizeof(ecpi_probe_open_call) == 40, "ABI: ecpi_probe_open_call");
static_assert(sizeof(ecpi_probe_active) == 16 + 40 * ECPI_PROBE_MAX_ACTIVE, "ABI: ecpi_probe_active");
static_assert(ECPI_ABI_VERSION == 8, "update the probe loader for the new ABI");

namespace {

Error libbpf_error(int err, const std::string& what) {
    if (err < 0) err = -err;
    if (err == EPERM || err == EACCES)
        return Error(what + ": " + std::strerror(err) +
                         "; ecpi probe needs CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN (uprobes) or root",
                     err);
    return Error::from_errno(err, what);
}

// Functions a thread's frame chain legitimately ends in: a walk that stops
// with a zero frame pointer here reached the thread's outermost frame.
bool is_thread_root(const std::string& symbol) {
    static const std::set<std::string> roots = {"_start", "__libc_start_main", "__libc_start_main_impl",
                                                "__libc_start_call_main", "start_thread", "clone", "clone3",
                                                "__clone", "__clone3", "__GI___clone3", "thread_start"};
    return roots.count(symbol) != 0;
}

// A command started stopped: forked, then held on a pipe until its probes
// are attached, then released to exec (as `record -- COMMAND` does).
class Child {
public:
    Child() = default;
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            int status;
            ::waitpid(pid_, &status, 0);
        }
        if (release_fd_ >= 0) ::close(release_fd_);
        if (report_fd_ >= 0) ::close(report_fd_);
    }

    Result<void> fork_stopped(const std::vector<std::string>& argv) {
        int release[2], report[2];
        if (pipe2(release, O_CLOEXEC) != 0) return Error::from_errno(errno, "creating a pipe");
        if (pipe2(report, O_CLOEXEC) != 0) {
            ::close(release[0]);
            ::close(release[1]);
            return Error::from_errno(errno, "creating a pipe");
        }
        pid_t pid = fork();
        if (pid < 0) return Error::from_errno(errno, "forking to run '" + argv[0] + "'");
        if (pid == 0) {
            ::close(release[1]);
            ::close(report[0]);
            char c;
            if (::read(release[0], &c, 1) != 1) _exit(127);  // the loader gave up
            std::vector<char*> args;
            for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            execvp(args[0], args.data());
            int err = errno;
            (void)!::write(report[1], &err, sizeof err);
            _exit(127);
        }
        ::close(release[0]);
        ::close(report[1]);
        pid_ = pid;
        release_fd_ = release[1];
        report_fd_ = report[0];
        return ok();
    }

    // Lets the child exec; fails when exec failed.
    Result<void> release(const std::string& name) {
        char c = 1;
        if (::write(release_fd_, &c, 1) != 1) return Error::from_errno(errno, "releasing '" + name + "'");
        ::close(release_fd_);
        release_fd_ = -1;
        int err = 0;
        ssize_t n = ::read(report_fd_, &err, sizeof err);
        ::close(report_fd_);
        report_fd_ = -1;
        if (n == sizeof err) {
            reap_blocking();
            return Error::from_errno(err, "running '" + name + "'");
        }
        return ok();
    }

    bool alive() {
        if (pid_ <= 0 || reaped_) return false;
        int status;
        pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            set_status(status);
            return false;
        }
        return true;
    }
    void reap_blocking() {
        int status;
        if (!reaped_ && ::waitpid(pid_, &status, 0) == pid_) set_status(status);
    }
    pid_t pid() const { return pid_; }
    std::optional<int> status() const { return status_; }

private:
    void set_status(int status) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    pid_t pid_ = -1;
    int release_fd_ = -1, report_fd_ = -1;
    bool reaped_ = false;
    std::optional<int> status_;
};

bool process_gone(std::uint32_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) return true;
    char state = line[close + 2];
    return state == 'Z' || state == 'X';
}

// Whether the kernel single-steps the first instruction at `offset` of the
// file (loader/probe/probe_calibration.h); an unreadable file counts as
// stepped, the dearer kind.
bool first_instruction_stepped(const std::string& file, std::uint64_t offset) {
    std::uint8_t bytes[2] = {};
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    ssize_t n = ::pread(fd, bytes, sizeof bytes, static_cast<off_t>(offset));
    ::close(fd);
    return entry_single_stepped(bytes, n > 0 ? static_cast<std::size_t>(n) : 0);
}

std::string hex(std::uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

std::optional<fs::path> find_executable(const std::string& name) {
    if (name.find('/') != std::string::npos) return fs::path(name);
    const char* path = std::getenv("PATH");
    std::string list = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= list.size()) {
        std::size_t colon = list.find(':', start);
        std::string dir = list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        if (dir.empty()) dir = ".";
        fs::path candidate = fs::path(dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    return std::nullopt;
}


struct ProbeSession::Impl {
    ProbeOptions options;
    probe_bpf* skel = nullptr;
    ring_buffer* rb = nullptr;
    int ncpus = 0;
    std::optional<SidebandReader> sideband;
    ProcessTable processes;
    std::uint32_t pid = 0;
    std::unique_ptr<Child> child;
    bool exited = false;
    bool timed = false;
    std::int64_t started_unix = 0;
    std::chrono::steady_clock::time_point started;
    std::uint64_t unknown_kinds = 0, orphan_exits = 0, untimed_calls = 0;
    std::uint64_t stack_unwind_errors = 0;
    std::optional<store::ProbeCost> probe_cost;  // measured at start for timed sessions

    // Symbols per readable image path (pattern matching and symbolization).
    std::map<std::string, std::unique_ptr<ElfSymbols>> elf_cache;
    std::map<std::string, std::string> elf_errors;

    struct PathStats {
        std::uint64_t calls = 0, unmatched = 0;
        std::uint16_t flags = 0;  // ECPI_PROBE_PATH_* of the walk (same for every call of a path)
        std::uint64_t stack_samples = 0;  // user-mode samples whose stack holds the function under this path
        store::ProbeTimer wall, cpu, blocked;
    };
    struct Probe {
        std::uint32_t id = 0;
        std::string pattern;
        FunctionSymbol symbol;
        std::string image;           // as the process sees it
        std::string readable;        // where we open it
        std::string build_id;
        std::uint64_t file_offset = 0;
        bool entry_stepped = false;  // the kernel single-steps its first instruction (its probe costs more)
        bpf_link* entry = nullptr;
        bpf_link* exit = nullptr;
        bool removed = false;
        std::uint64_t calls = 0;
        std::map<std::vector<std::uint64_t>, PathStats> paths;  // key: ips innermost first
    };
    std::vector<std::unique_ptr<Probe>> probes;  // index == probe id

    struct Pending {
        std::uint32_t probe_id;
        PathStats* path;
        std::uint64_t nested = 0;  // probed calls this thread made inside this one (their probes' cost is in its time)
        std::uint64_t nested_stepped = 0;  // of which the first instruction is single-stepped
        std::uint64_t nested_frames = 0;   // frames their entries walked
        std::uint64_t return_address = 0;  // where this call returns (its entry walk's first address)
    };
    std::map<std::pair<std::uint32_t, std::uint64_t>, Pending> pending;  // (tid, start_ns)

    // Frame symbolization cache (per pc of the one target process).
    std::unordered_map<std::uint64_t, store::ProbeFrame> frame_cache;
    std::unique_ptr<DwarfUnwinder> unwinder;
    std::optional<StackSampler> stack_sampler;
    std::unordered_map<std::uint64_t, std::pair<std::int64_t, std::uint64_t>> pc_probe;  // pc: probe_at's answer

    ~Impl() {
        for (auto& p : probes) detach(*p);
        if (rb) ring_buffer__free(rb);
        if (skel) probe_bpf__destroy(skel);
    }

    static void detach(Probe& p) {
        // Entry first: calls already open still get their exit.
        if (p.entry) bpf_link__destroy(p.entry);
        p.entry = nullptr;
        if (p.exit) bpf_link__destroy(p.exit);
        p.exit = nullptr;
    }

    const ElfSymbols* symbols(const std::string& readable) {
        auto it = elf_cache.find(readable);
        if (it != elf_cache.end()) return it->second.get();
        if (elf_errors.count(readable)) return nullptr;
        auto elf = ElfSymbols::read(readable);
        if (!elf.ok()) {
            elf_errors[readable] = elf.error().message();
            return nullptr;
        }
        auto& slot = elf_cache[readable];
        slot = std::make_unique<ElfSymbols>(std::move(*elf));
        return slot.get();
    }

    // The images patterns are matched against: the process's executable
    // mappings, or before a started command has run, its executable and the
    // libraries it will load.
    struct TargetImage {
        std::string path, readable;
    };
    std::vector<TargetImage> target_images(bool before_exec) {
        std::vector<TargetImage> out;
        std::set<std::string> seen;
        if (before_exec) {
            fs::path exe = find_executable(options.command[0]).value_or(options.command[0]);
            std::error_code ec;
            fs::path canonical = fs::weakly_canonical(exe, ec);
            if (ec) canonical = exe;
            out.push_back({canonical.string(), canonical.string()});
            for (const auto& lib : needed_libraries(canonical)) out.push_back({lib.string(), lib.string()});
            return out;
        }
        const std::string proc = "/proc/" + std::to_string(pid);
        std::ifstream maps(proc + "/maps");
        std::string line;
        while (std::getline(maps, line)) {
            unsigned long long start = 0, end = 0, offset = 0;
            char perms[8] = {};
            int path_pos = 0;
            if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &path_pos) < 4)
                continue;
            if (!std::strchr(perms, 'x') || path_pos <= 0 || static_cast<std::size_t>(path_pos) >= line.size()) continue;
            std::string path = line.substr(static_cast<std::size_t>(path_pos));
            if (path.empty() || path[0] != '/') continue;  // [vdso], anonymous
            if (!seen.insert(path).second) continue;
            std::string readable = proc + "/root" + path;
            if (::access(readable.c_str(), R_OK) != 0) readable = path;
            out.push_back({path, readable});
        }
        // The executable first: unqualified patterns list its matches first.
        std::error_code ec;
        fs::path exe = fs::read_symlink(proc + "/exe", ec);
        std::stable_partition(out.begin(), out.end(), [&](const TargetImage& i) { return !ec && i.path == exe.string(); });
        return out;
    }

    Result<ProbeAdded> add(const std::string& text, bool before_exec) {
        ECPI_ASSIGN_OR_RETURN(FunctionPattern pattern, parse_function_pattern(text));
        auto images = target_images(before_exec);
        if (images.empty())
            return Error("cannot read the executable mappings of process " + std::to_string(pid) +
                         (exited ? " (it has exited)" : ""));
        ProbeAdded added;
        std::vector<const ElfSymbols*> searched;
        std::vector<std::string> stripped;
        bool image_seen = false;
        struct Match {
            const TargetImage* image;
            const ElfSymbols* elf;
            const FunctionSymbol* symbol;
        };
        std::vector<Match> matches;
        for (const auto& image : images) {
            if (!image_matches(pattern, image.path)) continue;
            image_seen = true;
            const ElfSymbols* elf = symbols(image.readable);
            if (!elf) continue;
            searched.push_back(elf);
            if (!elf->has_symtab()) stripped.push_back(image.path);
            std::set<std::uint64_t> addresses;  // aliases of one address are one function
            for (const auto& f : elf->functions()) {
                if (!function_matches(pattern, f) || !addresses.insert(f.vaddr).second) continue;
                matches.push_back({&image, elf, &f});
            }
        }
        if (!image_seen) {
            std::string names;
            for (const auto& i : images) names += (names.empty() ? "" : ", ") + fs::path(i.path).filename().string();
            return Error("pattern '" + text + "': no image named '" + pattern.image + "' in process " +
                         std::to_string(pid) + " (images: " + names + ")");
        }
        if (matches.empty()) {
            std::string msg = "pattern '" + text + "' matches no function";
            auto near = near_matches(pattern, searched);
            if (!near.empty()) {
                msg += "; near matches: ";
                for (std::size_t i = 0; i < near.size(); ++i) msg += (i ? ", " : "") + near[i];
            }
            if (!stripped.empty()) {
                const std::string& exe = images.front().path;
                bool exe_stripped = std::find(stripped.begin(), stripped.end(), exe) != stripped.end();
                if (exe_stripped && (pattern.image.empty() || image_matches(pattern, exe)))
                    msg += "; " + exe +
                           " is stripped (no .symtab): only its exported functions can be probed; probe an unstripped "
                           "build or install its debug symbols";
            }
            return Error(msg);
        }
        if (matches.size() > 1000)
            return Error("pattern '" + text + "' matches " + std::to_string(matches.size()) +
                         " functions; narrow it (at most 1000 per pattern)");
        for (const auto& m : matches) {
            std::string description = m.symbol->demangled + " (" + m.image->path + "+" + hex(m.symbol->vaddr) + ")";
            // Probed already (by this or another pattern), or removed and now re-added.
            Probe* existing = nullptr;
            for (auto& p : probes)
                if (p->image == m.image->path && p->symbol.vaddr == m.symbol->vaddr) existing = p.get();
            if (existing && !existing->removed) {
                added.already.push_back(description);
                continue;
            }
            auto offset = m.elf->file_offset(m.symbol->vaddr);
            if (!offset) return Error(description + " lies outside the file's loadable segments");
            Probe* p = existing;
            if (!p) {
                auto fresh = std::make_unique<Probe>();
                fresh->id = static_cast<std::uint32_t>(probes.size());
                fresh->pattern = text;
                fresh->symbol = *m.symbol;
                fresh->image = m.image->path;
                fresh->readable = m.image->readable;
                fresh->build_id = m.elf->build_id();
                fresh->file_offset = *offset;
                fresh->entry_stepped = first_instruction_stepped(m.image->readable, *offset);
                probes.push_back(std::move(fresh));
                p = probes.back().get();
            }
            ECPI_RETURN_IF_ERROR(attach(*p));
            p->removed = false;
            added.probes.push_back(description);
        }
        return added;
    }

    Result<void> attach(Probe& p) {
        const std::uint64_t cookie = p.id | (timed ? ECPI_PROBE_COOKIE_TIMED : 0);
        // The exit first: a call entered between the two attaches would
        // otherwise stay open forever; an exit without entry is just dropped.
        if (timed) {
            LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = true);
            p.exit = bpf_program__attach_uprobe_opts(options.bare ? skel->progs.ecpi_probe_empty : skel->progs.ecpi_probe_exit, static_cast<pid_t>(pid),
                                                     p.readable.c_str(), p.file_offset, &opts);
            if (!p.exit) return libbpf_error(errno, "attaching a uretprobe to " + p.symbol.demangled + " in " + p.image);
        }
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = false);
        p.entry = bpf_program__attach_uprobe_opts(options.bare ? skel->progs.ecpi_probe_empty : skel->progs.ecpi_probe_entry, static_cast<pid_t>(pid),
                                                  p.readable.c_str(), p.file_offset, &opts);
        if (!p.entry) {
            int err = errno;
            detach(p);
            return libbpf_error(err, "attaching a uprobe to " + p.symbol.demangled + " in " + p.image);
        }
        return ok();
    }

    static int on_record(void* ctx, void* data, size_t size) {
        static_cast<Impl*>(ctx)->handle(data, size);
        return 0;
    }

    void handle(const void* data, std::size_t size) {
        std::uint32_t kind = 0;
        if (size >= sizeof kind) std::memcpy(&kind, data, sizeof kind);
        const std::size_t header = offsetof(ecpi_probe_entry_record, ips);
        if (kind == ECPI_RECORD_PROBE_ENTRY && size >= header) {
            ecpi_probe_entry_record rec;
            std::memcpy(&rec, data, header);
            std::size_t depth = std::min<std::size_t>(rec.depth, ECPI_PROBE_MAX_DEPTH);
            if (size < header + depth * 8 || rec.probe_id >= probes.size()) {
                ++unknown_kinds;
                return;
            }
            std::vector<std::uint64_t> ips(depth);
            std::memcpy(ips.data(), static_cast<const std::uint8_t*>(data) + header, depth * 8);
            std::uint16_t flags = rec.flags;
            if ((flags & ECPI_PROBE_PATH_STACK) && unwinder &&
                size >= sizeof(ecpi_probe_entry_record) + offsetof(ecpi_probe_stack, data)) {
                const auto* st = reinterpret_cast<const ecpi_probe_stack*>(static_cast<const std::uint8_t*>(data) +
                                                                          sizeof(ecpi_probe_entry_record));
                std::size_t avail = size - sizeof(ecpi_probe_entry_record) - offsetof(ecpi_probe_stack, data);
                std::size_t bytes = std::min<std::size_t>(st->size, avail);
                UnwoundPath u = unwinder->unwind(rec.tgid, st->ip, st->sp, st->bp, st->data, bytes);
                if (!u.ips.empty()) {
                    ips = std::move(u.ips);
                    flags = static_cast<std::uint16_t>((flags & ~(ECPI_PROBE_PATH_FP_END | ECPI_PROBE_PATH_DEPTH |
                                                                  ECPI_PROBE_PATH_BROKEN)) |
                                                       (u.complete ? ECPI_PROBE_PATH_FP_END : ECPI_PROBE_PATH_BROKEN));
                } else {
                    ++stack_unwind_errors;
                }
            }
            flags &= ECPI_PROBE_PATH_FP_END | ECPI_PROBE_PATH_DEPTH | ECPI_PROBE_PATH_BROKEN;
            restore_return_addresses(rec.tid, ips);
            Probe& p = *probes[rec.probe_id];
            count_nested_call(rec.tid, p.entry_stepped, rec.depth);
            ++p.calls;
            // A truncated walk and a complete one with the same frames are different paths.
            ips.push_back(0xffff000000000000ull | flags);
            PathStats& path = p.paths[ips];
            path.flags = flags;
            ++path.calls;
            if (rec.start_ns)
                pending[{rec.tid, rec.start_ns}] = {rec.probe_id, &path, 0, 0, 0, ips.size() > 1 ? ips[0] : 0};
            else if (timed)
                ++untimed_calls;
        } else if (kind == ECPI_RECORD_PROBE_EXIT && size >= sizeof(ecpi_probe_exit_record)) {
            ecpi_probe_exit_record rec;
            std::memcpy(&rec, data, sizeof rec);
            auto it = pending.find({rec.tid, rec.start_ns});
            if (it == pending.end()) {
                ++orphan_exits;
                return;
            }
            PathStats& path = *it->second.path;
            path.wall.add(rec.wall_ns);
            path.cpu.add(rec.cpu_ns);
            for (store::ProbeTimer* t : {&path.wall, &path.cpu}) {
                t->nested_calls += it->second.nested;
                t->nested_stepped += it->second.nested_stepped;
                t->nested_frames += it->second.nested_frames;
            }
            path.blocked.add(rec.wall_ns - std::min(rec.cpu_ns, rec.wall_ns));
            // Calls this thread opened after this one and never closed were
            // abandoned (longjmp, exceptions): their frames are gone.
            auto next = std::next(it);
            while (next != pending.end() && next->first.first == rec.tid) {
                ++next->second.path->unmatched;
                next = pending.erase(next);
            }
            pending.erase(it);
        } else {
            ++unknown_kinds;  // reported loudly in the counters
        }
    }

    // A uretprobe replaces the return address of the call it times with the
    // kernel's return trampoline (in the "[uprobes]" mapping), so the entry
    // walk of a probed call made inside another probed call read the
    // trampoline where the outer call's caller was ("[uprobes]+0x0" in its
    // path). The thread's open calls, innermost first, each kept the return
    // address their own entry walked (before their uretprobe replaced it):
    // the k-th trampoline from the inside is the k-th open call's. Calls
    // that are not timed are not kept open: their trampolines stay.
    void restore_return_addresses(std::uint32_t tid, std::vector<std::uint64_t>& ips) {
        const auto first = pending.lower_bound({tid, 0});
        auto open = pending.upper_bound({tid, ~0ull});  // past the thread's innermost open call
        for (std::size_t i = 1; i < ips.size() && open != first; i++) {
            if (!is_return_trampoline(ips[i])) continue;
            --open;
            if (open->second.return_address) ips[i] = open->second.return_address;
        }
    }

    std::unordered_map<std::uint64_t, bool> trampolines;  // pc: in the "[uprobes]" mapping
    bool is_return_trampoline(std::uint64_t pc) {
        if (auto it = trampolines.find(pc); it != trampolines.end()) return it->second;
        auto resolved = processes.resolve(pid, pc);
        if (!resolved) return false;  // not cached: the mapping may be read later
        const bool yes = processes.images()[resolved->image].id.path == "[uprobes]";
        trampolines[pc] = yes;
        return yes;
    }

    // A probed call entered on `tid`: every call of that thread still open
    // contains it, and with it the whole cost of its entry and return probes
    // (the ring buffer keeps one thread's records in program order).
    void count_nested_call(std::uint32_t tid, bool stepped, std::uint32_t frames) {
        for (auto it = pending.lower_bound({tid, 0}); it != pending.end() && it->first.first == tid; ++it) {
            ++it->second.nested;
            if (stepped) ++it->second.nested_stepped;
            it->second.nested_frames += frames;
        }
    }

    // A user-mode stack sample of the target: for each probed function in
    // it (the innermost frame of each), the path whose call sites are the
    // frames above it counts the sample. The function's own return address
    // reads as the uretprobe's trampoline while it runs: any trampoline
    // matches.
    void count_stack_sample(const std::vector<std::uint64_t>& chain) {
        std::vector<std::int64_t> counted;
        for (std::size_t k = 0; k < chain.size(); ++k) {
            const auto [id, offset] = probe_at(k ? chain[k] - 1 : chain[k]);
            if (id < 0 || std::find(counted.begin(), counted.end(), id) != counted.end()) continue;
            counted.push_back(id);
            auto& paths = probes[static_cast<std::size_t>(id)]->paths;
            if (count_matching_path(paths, chain, k + 1, 0)) continue;
            // Sampled in a function that sets no frame pointer (bench_fn):
            // the chain skips its call site and goes on at its caller's
            // return. Not at its first instructions, where the timer
            // interrupt held off during the entry trap lands: that is the
            // probe's time.
            if (k == 0 && offset >= kEntryWindow) count_matching_path(paths, chain, k + 1, 1);
        }
        if (counted.empty()) count_frameless_leaf(chain);
    }
    static constexpr std::uint64_t kEntryWindow = 16;  // bytes: a probed function's first instruction or two
    bool count_matching_path(std::map<std::vector<std::uint64_t>, PathStats>& paths,
                             const std::vector<std::uint64_t>& chain, std::size_t from, std::size_t skip) {
        for (auto& [ips, stats] : paths)
            if (path_matches(ips, chain, from, skip)) {
                ++stats.stack_samples;
                return true;
            }
        return false;
    }
    // A sample in a function without a frame pointer (hash_name, strcmp in
    // the C library) called by a probed one: the frame-pointer chain skips
    // the probed function's frame and reads its return address first (the
    // uretprobe's trampoline, or, where the kernel puts the real address
    // back, the call site in its caller). The probed path whose call sites
    // are the frames from there on holds it. A sample at a probed
    // function's first instructions, before its frame is set up (where the
    // timer interrupt held off during the entry trap lands), matches
    // neither rule: it is the probe's.
    void count_frameless_leaf(const std::vector<std::uint64_t>& chain) {
        if (chain.size() < 2) return;
        for (auto& p : probes)
            if (!p->removed && count_matching_path(p->paths, chain, 1, 0)) return;
    }
    // The path's call sites from its `skip`-th on are the chain's from `from` on.
    bool path_matches(const std::vector<std::uint64_t>& ips, const std::vector<std::uint64_t>& chain, std::size_t from,
                      std::size_t skip) {
        const std::size_t sites = ips.empty() ? 0 : ips.size() - 1;  // the last is the walk's flags
        if (sites <= skip || from + sites - skip > chain.size()) return false;
        for (std::size_t i = skip; i < sites; ++i)
            if (chain[from + i - skip] != ips[i] && !is_return_trampoline(chain[from + i - skip])) return false;
        return true;
    }
    // The probe whose function holds `pc` (-1: none) and the pc's offset in it.
    std::pair<std::int64_t, std::uint64_t> probe_at(std::uint64_t pc) {
        if (auto it = pc_probe.find(pc); it != pc_probe.end()) return it->second;
        auto resolved = processes.resolve(pid, pc);
        if (!resolved) return {-1, 0};  // not cached: the mapping may be read later
        const std::string& image = processes.images()[resolved->image].id.path;
        std::pair<std::int64_t, std::uint64_t> found{-1, 0};
        for (const auto& p : probes)
            if (!p->removed && p->image == image && resolved->offset >= p->symbol.vaddr &&
                resolved->offset < p->symbol.vaddr + std::max<std::uint64_t>(p->symbol.size, 1))
                found = {p->id, resolved->offset - p->symbol.vaddr};
        pc_probe[pc] = found;
        return found;
    }

    // Distribution C libraries have neither frame pointers nor local
    // symbols: the frame-pointer chain of the main thread leaves the program
    // at main's caller in libc (__libc_start_call_main, which set no frame
    // pointer). Such a path is complete from main down: libc's start code
    // above it is the same for every call.
    bool main_called_by_c_library(const std::vector<store::ProbeFrame>& frames) {
        if (frames.size() < 2 || frames[1].symbol != "main") return false;
        const store::ProbeFrame& frame = frames[0];
        if (frame.image.empty()) return false;
        auto it = c_library.find(frame.image);
        if (it != c_library.end()) return it->second;
        const std::string base = fs::path(frame.image).filename().string();
        const bool yes = base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0;
        c_library[frame.image] = yes;
        return yes;
    }
    std::map<std::string, bool> c_library;

    store::ProbeFrame symbolize(std::uint64_t pc) {
        auto cached = frame_cache.find(pc);
        if (cached != frame_cache.end()) return cached->second;
        store::ProbeFrame frame{"[unknown]", pc, ""};
        auto resolved = processes.resolve(pid, pc);
        bool final_answer = false;
        if (resolved) {
            const ImageInfo& image = processes.images()[resolved->image];
            frame.image = image.id.path;
            frame.offset = resolved->offset;
            final_answer = true;
            if (const ElfSymbols* elf = symbols(image.readable_path.empty() ? image.id.path : image.readable_path)) {
                // A return address may sit just past the end of a function
                // whose last instruction is a call: look up the call itself.
                if (const FunctionSymbol* f = elf->containing(resolved->offset - 1)) {
                    frame.symbol = f->demangled;
                    frame.offset = resolved->offset - f->vaddr;
                }
            }
        }
        if (final_answer) frame_cache[pc] = frame;
        return frame;
    }

    // ProbeSession::snapshot's steps, in its order.
    store::ProbeReport report_header(bool final) const;
    void read_counters(store::ProbeReport& r) const;
    void add_warnings(store::ProbeReport& r) const;
    store::ProbeFunction report_function(const Probe& p);
    store::ProbePath report_path(const std::vector<std::uint64_t>& ips, const PathStats& stats);
};

ProbeSession::ProbeSession(ProbeSession&&) noexcept = default;
ProbeSession& ProbeSession::operator=(ProbeSession&&) noexcept = default;
ProbeSession::~ProbeSession() = default;

Result<ProbeSession> ProbeSession::start(const ProbeOptions& options) {
    ProbeSession s;
    s.impl_ = std::make_unique<Impl>();
    auto& impl = *s.impl_;
    impl.options = options;
    impl.started = std::chrono::steady_clock::now();
    impl.started_unix = static_cast<std::int64_t>(std::time(nullptr));
    for (const auto& m : options.metrics)
        if (m == "wall" || m == "cpu" || m == "blocked") impl.timed = true;
    if (options.patterns.empty()) return Error("no --func pattern given");
    if ((options.pid != 0) == !options.command.empty())
        return Error("choose one target: -p PID or -- COMMAND");
    for (const auto& text : options.patterns) ECPI_RETURN_IF_ERROR(parse_function_pattern(text));

    if (options.pid) {
        if (::kill(static_cast<pid_t>(options.pid), 0) != 0 && errno == ESRCH)
            return Error("no such process: " + std::to_string(options.pid));
        if (process_gone(options.pid)) return Error("no such process: " + std::to_string(options.pid));
        impl.pid = options.pid;
    }

    libbpf_set_print([](enum libbpf_print_level level, const char* fmt, va_list args) -> int {
        if (level == LIBBPF_WARN && std::getenv("ECPI_DEBUG_LIBBPF")) return vfprintf(stderr, fmt, args);
        return 0;
    });
    impl.ncpus = libbpf_num_possible_cpus();
    if (impl.ncpus <= 0) return libbpf_error(impl.ncpus, "counting possible CPUs");

    // The side-band first: a started command's mappings are all seen.
    ECPI_ASSIGN_OR_RETURN(auto cpus, online_cpus());
    auto sideband = SidebandReader::open(cpus);
    if (!sideband.ok()) return sideband.error().with_context("opening the side-band events (mmap records)");
    impl.sideband.emplace(std::move(*sideband));

    if (!options.command.empty()) {
        impl.child = std::make_unique<Child>();
        ECPI_RETURN_IF_ERROR(impl.child->fork_stopped(options.command));
        impl.pid = static_cast<std::uint32_t>(impl.child->pid());
    } else {
        impl.processes.scan_proc(impl.pid);
    }

    impl.skel = probe_bpf__open();
    if (!impl.skel) return libbpf_error(errno, "opening the probe BPF object");
    impl.skel->rodata->target_tgid = impl.pid;
    if (options.sample_n > 1) {
        const std::uint32_t burst = std::max<std::uint32_t>(1, options.sample_burst);
        impl.skel->rodata->sample_burst = burst;
        // Time `burst` calls, then skip on average (N - 1) × burst.
        impl.skel->rodata->sample_skip = (options.sample_n - 1) * burst;
    }
    impl.skel->rodata->copy_stack = options.dwarf;
    if (int err = bpf_map__set_max_entries(impl.skel->maps.probe_rb, options.ringbuf_bytes))
        return libbpf_error(err, "sizing the probe ring buffer");
    if (int err = probe_bpf__load(impl.skel)) {
        if (geteuid() == 0 && (err == -EACCES || err == -EINVAL))
            return Error("the kernel's verifier rejected the probe BPF program (" + std::string(std::strerror(-err)) +
                             "); rerun with ECPI_DEBUG_LIBBPF=1 to see its log and report it",
                         -err);
        return libbpf_error(err, "loading the probe BPF program");
    }
    impl.rb = ring_buffer__new(bpf_map__fd(impl.skel->maps.probe_rb), &Impl::on_record, &impl, nullptr);
    if (!impl.rb) return libbpf_error(errno, "creating the probe ring buffer reader");
    // Before the target's probes (and a started command) run: what each
    // probed call costs (iPath's trampolines excluded their own cost;
    // reports subtract ours). After the load, whose errors name the
    // privileges missing.
    if (impl.timed && !options.bare && !options.raw_times) {
        ECPI_ASSIGN_OR_RETURN(impl.probe_cost, measure_probe_cost({.dwarf = options.dwarf}));
        if (options.log) options.log(describe_probe_cost(*impl.probe_cost));
    }
    if (options.dwarf) impl.unwinder = std::make_unique<DwarfUnwinder>(impl.processes);

    for (const auto& text : options.patterns) {
        auto added = impl.add(text, impl.child != nullptr);
        if (!added.ok()) return added.error();
        if (options.log)
            for (const auto& p : added->probes) options.log("probing " + p);
    }
    if (impl.probe_cost && options.stack_sample_period_ns) {
        auto sampler = StackSampler::open(impl.pid, cpus, options.stack_sample_period_ns);
        if (!sampler.ok()) return Error(sampler.error().message() + " (for stack samples; or use --raw-times)");
        impl.stack_sampler.emplace(std::move(*sampler));
    }
    if (impl.child) ECPI_RETURN_IF_ERROR(impl.child->release(options.command[0]));
    return s;
}

Result<ProbeAdded> ProbeSession::add(const std::string& pattern) {
    if (!target_alive()) return Error("process " + std::to_string(impl_->pid) + " has exited");
    return impl_->add(pattern, false);
}

Result<std::size_t> ProbeSession::remove(const std::string& pattern) {
    std::size_t n = 0;
    auto parsed = parse_function_pattern(pattern);
    for (auto& p : impl_->probes) {
        if (p->removed) continue;
        bool hit = p->pattern == pattern;
        if (!hit && parsed.ok())
            hit = image_matches(*parsed, p->image) && function_matches(*parsed, p->symbol);
        if (!hit) continue;
        Impl::detach(*p);
        p->removed = true;
        ++n;
    }
    if (n == 0) return Error("no probe matches '" + pattern + "' (see 'list')");
    return n;
}

std::vector<std::string> ProbeSession::list() const {
    std::vector<std::string> out;
    for (const auto& p : impl_->probes)
        out.push_back(std::to_string(p->id) + " " + p->pattern + " " + p->symbol.demangled + " " + p->image + "+" +
                      hex(p->symbol.vaddr) + " calls=" + std::to_string(p->calls) + (p->removed ? " removed" : ""));
    return out;
}

Result<void> ProbeSession::poll() {
    auto& impl = *impl_;
    // Mappings before calls: every return address can be resolved.
    const std::uint32_t target = impl.pid;
    SidebandHandler handler;
    handler.mmap = [&](std::uint32_t pid, std::uint64_t start, std::uint64_t len, std::uint64_t pgoff,
                       const std::string& path, const std::string& build_id, std::uint64_t /*time_ns*/) {
        if (pid == target) impl.processes.on_mmap(pid, start, len, pgoff, path, build_id);
    };
    handler.comm = [&](std::uint32_t pid, const std::string& comm, bool exec) {
        if (pid == target) impl.processes.on_comm(pid, comm, exec);
    };
    handler.fork = [](std::uint32_t, std::uint32_t) {};
    handler.exit = [](std::uint32_t) {};
    impl.sideband->drain(handler);
    int n = ring_buffer__consume(impl.rb);
    if (n < 0) return libbpf_error(n, "reading the probe ring buffer");
    // After the calls' records: the paths the samples are matched to exist.
    if (impl.stack_sampler)
        impl.stack_sampler->drain([&](const std::vector<std::uint64_t>& chain) { impl.count_stack_sample(chain); });
    return ok();
}

bool ProbeSession::target_alive() {
    auto& impl = *impl_;
    if (impl.exited) return false;
    bool alive = impl.child ? impl.child->alive() : !process_gone(impl.pid);
    if (!alive) impl.exited = true;
    return alive;
}

std::optional<int> ProbeSession::command_status() const {
    return impl_->child ? impl_->child->status() : std::nullopt;
}

std::uint32_t ProbeSession::pid() const { return impl_->pid; }

// What was probed, for how long, and how (metrics, sampling).
store::ProbeReport ProbeSession::Impl::report_header(bool final) const {
    store::ProbeReport r;
    r.pid = pid;
    r.comm = processes.comm(pid);
    r.command = options.command;
    r.started_unix = started_unix;
    r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    r.final = final;
    r.target_exited = exited;
    r.metrics = options.metrics;
    r.probe_cost = probe_cost;
    if (stack_sampler) r.stack_sample_period_ns = stack_sampler->period_ns();
    if (options.sample_n > 1) {
        r.sample_n = options.sample_n;
        r.sample_burst = std::max<std::uint32_t>(1, options.sample_burst);
    }
    return r;
}

// The BPF programs' per-CPU counters summed, their run statistics, and the
// loader's own counts.
void ProbeSession::Impl::read_counters(store::ProbeReport& r) const {
    static const char* const kCounterNames[ECPI_PROBE_COUNTER_MAX] = {
        "calls", "ringbuf_lost", "active_stack_full", "exit_unmatched", "abandoned", "threads_full",
        "stack_copy_errors", "reserved"};
    std::vector<std::uint64_t> per_cpu(static_cast<std::size_t>(ncpus));
    for (std::uint32_t c = 0; c < ECPI_PROBE_COUNTER_MAX - 1; ++c) {
        if (bpf_map_lookup_elem(bpf_map__fd(skel->maps.probe_counters), &c, per_cpu.data()) != 0) continue;
        std::uint64_t sum = 0;
        for (auto v : per_cpu) sum += v;
        r.counters[kCounterNames[c]] = sum;
    }
    // Kernel BPF statistics (kernel.bpf_stats_enabled=1): run time of the
    // probe programs themselves, for the benchmark.
    for (auto [prog, name] : {std::pair{skel->progs.ecpi_probe_entry, "entry"},
                              std::pair{skel->progs.ecpi_probe_exit, "exit"}}) {
        bpf_prog_info info{};
        __u32 len = sizeof info;
        if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0 && info.run_cnt) {
            r.counters[std::string("bpf_") + name + "_runs"] = info.run_cnt;
            r.counters[std::string("bpf_") + name + "_run_ns"] = info.run_time_ns;
        }
    }
    r.counters["unknown_records"] = unknown_kinds;
    r.counters["orphan_exits"] = orphan_exits;
    if (options.dwarf) r.counters["dwarf_unwind_failures"] = stack_unwind_errors;
    if (stack_sampler) {
        r.counters["stack_samples_lost"] = stack_sampler->lost_records();
        r.counters["stack_samples_in_kernel"] = stack_sampler->kernel_samples();
    }
}

void ProbeSession::Impl::add_warnings(store::ProbeReport& r) const {
    if (options.dwarf && stack_unwind_errors)
        r.warnings.push_back(std::to_string(stack_unwind_errors) +
                             " call paths could not be unwound with DWARF CFI (no CFI or stack copy too short); "
                             "they come from frame pointers");
    if (r.counters["ringbuf_lost"])
        r.warnings.push_back(std::to_string(r.counters["ringbuf_lost"]) +
                             " records were lost (ring buffer full): counts are lower bounds");
    if (unknown_kinds)
        r.warnings.push_back(std::to_string(unknown_kinds) + " ring-buffer records of unknown kind were ignored");
    for (const auto& [path, err] : elf_errors) r.warnings.push_back("cannot read symbols of " + path + ": " + err);
}

// One probed function and its call paths. Paths that differ only in
// unresolvable addresses stay apart; paths that symbolize identically (same
// call sites) are merged.
store::ProbeFunction ProbeSession::Impl::report_function(const Probe& p) {
    store::ProbeFunction f;
    f.pattern = p.pattern;
    f.symbol = p.symbol.name;
    f.demangled = p.symbol.demangled;
    f.image = p.image;
    f.build_id = p.build_id;
    f.address = p.symbol.vaddr;
    f.timed = timed;
    f.removed = p.removed;
    f.entry_stepped = p.entry_stepped;
    f.calls = p.calls;
    std::map<std::pair<std::vector<store::ProbeFrame>, bool>, std::size_t> index;
    for (const auto& [ips, stats] : p.paths) {
        store::ProbePath path = report_path(ips, stats);
        f.unmatched += stats.unmatched;
        auto key = std::make_pair(path.frames, path.truncated);
        auto [it, inserted] = index.emplace(key, f.paths.size());
        if (inserted) {
            f.paths.push_back(std::move(path));
        } else {
            auto& into = f.paths[it->second];
            into.calls += path.calls;
            into.unmatched += path.unmatched;
            into.stack_samples += path.stack_samples;
            for (const auto& [name, t] : path.timers) into.timers[name].merge(t);
        }
    }
    return f;
}

// A call path symbolized, outermost first, with its counts and timers.
store::ProbePath ProbeSession::Impl::report_path(const std::vector<std::uint64_t>& ips, const PathStats& stats) {
    store::ProbePath path;
    for (std::size_t i = ips.size() - 1; i-- > 0;) path.frames.push_back(symbolize(ips[i]));
    // Complete: the walk reached the thread's outermost frame (a
    // zero frame pointer in a thread-start function), or main's
    // caller in the C library (see main_called_by_c_library).
    bool truncated = true;
    if (!path.frames.empty() && !(stats.flags & ECPI_PROBE_PATH_DEPTH)) {
        if ((stats.flags & ECPI_PROBE_PATH_FP_END) && is_thread_root(path.frames.front().symbol))
            truncated = false;
        if (main_called_by_c_library(path.frames)) truncated = false;
    }
    path.truncated = truncated;
    path.calls = stats.calls;
    path.unmatched = stats.unmatched;
    path.stack_samples = stats.stack_samples;
    if (timed) {
        const auto& metrics = options.metrics;
        if (std::count(metrics.begin(), metrics.end(), "wall") > 0) path.timers["wall"] = stats.wall;
        if (std::count(metrics.begin(), metrics.end(), "cpu") > 0) path.timers["cpu"] = stats.cpu;
        if (std::count(metrics.begin(), metrics.end(), "blocked") > 0) path.timers["blocked"] = stats.blocked;
    }
    return path;
}

store::ProbeReport ProbeSession::snapshot(bool final) {
    auto& impl = *impl_;
    store::ProbeReport r = impl.report_header(final);
    if (final) {
        // iPath 4.2: entries whose exit never came are reported as such.
        for (auto& [key, pend] : impl.pending) ++pend.path->unmatched;
        impl.pending.clear();
    }
    impl.read_counters(r);
    impl.add_warnings(r);
    for (const auto& p : impl.probes) r.functions.push_back(impl.report_function(*p));
    return r;
}

}  // namespace ecpi::loader
