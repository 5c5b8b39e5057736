#include "ecpi/loader/probe_calibration.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <tuple>

#include "ecpi_abi.h"
#include "probe.skel.h"

// The probed empty functions, in assembly so that no compiler option
// changes their first instruction: the first begins as a compiled function
// with frame pointers does (push %rbp, which the kernel emulates), the
// second as a leaf function often does (a move, which it single-steps).
#if defined(__x86_64__)
asm(R"(
    .text
    .globl ecpi_probe_calibration_emulated
    .type ecpi_probe_calibration_emulated, @function
ecpi_probe_calibration_emulated:
    push %rbp
    mov %rsp, %rbp
    pop %rbp
    ret
    .size ecpi_probe_calibration_emulated, .-ecpi_probe_calibration_emulated
    .globl ecpi_probe_calibration_stepped
    .type ecpi_probe_calibration_stepped, @function
ecpi_probe_calibration_stepped:
    mov %rdi, %rax
    ret
    .size ecpi_probe_calibration_stepped, .-ecpi_probe_calibration_stepped
)");
extern "C" void ecpi_probe_calibration_emulated();
extern "C" void ecpi_probe_calibration_stepped();
#else
extern "C" __attribute__((noinline, used)) void ecpi_probe_calibration_emulated() { asm volatile("" ::: "memory"); }
extern "C" __attribute__((noinline, used)) void ecpi_probe_calibration_stepped() { asm volatile("" ::: "memory"); }
#endif

namespace ecpi::loader {
namespace {

Error bpf_error(int err, const std::string& what) {
    if (err < 0) err = -err;
    return Error::from_errno(err, "measuring the probe's own cost: " + what);
}

// Where the empty function lies in its file: the mapping of this process
// that holds it.
struct FileLocation {
    std::string path;
    std::uint64_t offset = 0;
};
Result<FileLocation> locate_in_file(const void* address) {
    const auto addr = reinterpret_cast<std::uintptr_t>(address);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long long start = 0, end = 0, offset = 0;
        int path_pos = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %*s %llx %*s %*s %n", &start, &end, &offset, &path_pos) < 3) continue;
        if (addr < start || addr >= end || path_pos <= 0 || static_cast<std::size_t>(path_pos) >= line.size()) continue;
        std::string path = line.substr(static_cast<std::size_t>(path_pos));
        if (path.empty() || path[0] != '/')
            return Error("measuring the probe's own cost: ecpi's code is not mapped from a file; rerun with --raw-times");
        return FileLocation{path, addr - start + offset};
    }
    return Error("measuring the probe's own cost: ecpi's own code is not in /proc/self/maps; rerun with --raw-times");
}

// The rounds' exit records, summed into the current round of their function.
int on_calibration_record(void* ctx, void* data, std::size_t size) {
    auto* rounds = static_cast<ProbeCalibrationRound*>(ctx);
    std::uint32_t kind = 0;
    if (size >= sizeof kind) std::memcpy(&kind, data, sizeof kind);
    if (kind == ECPI_RECORD_PROBE_ENTRY && size >= offsetof(ecpi_probe_entry_record, ips)) {
        ecpi_probe_entry_record entry;
        std::memcpy(&entry, data, offsetof(ecpi_probe_entry_record, ips));
        if (entry.probe_id > 1) return 0;
        ++rounds[entry.probe_id].entries;
        rounds[entry.probe_id].frames += entry.depth;
        return 0;
    }
    if (kind != ECPI_RECORD_PROBE_EXIT || size < sizeof(ecpi_probe_exit_record)) return 0;
    ecpi_probe_exit_record rec;
    std::memcpy(&rec, data, sizeof rec);
    if (rec.probe_id > 1) return 0;
    ProbeCalibrationRound& round = rounds[rec.probe_id];
    round.wall_ns.push_back(static_cast<double>(rec.wall_ns));
    round.cpu_ns.push_back(static_cast<double>(rec.cpu_ns));
    return 0;
}

using EmptyFunction = void (*)();
constexpr EmptyFunction kTargets[2] = {ecpi_probe_calibration_emulated, ecpi_probe_calibration_stepped};

double thread_cpu_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Each call timed by its caller's clock, and the thread's CPU time over
// them all (which time spent waiting for a CPU does not enter).
ProbeCalibrationRound time_calls_here(EmptyFunction target, std::uint32_t calls) {
    ProbeCalibrationRound round;
    round.caller_ns.resize(calls);
    const double cpu_start = thread_cpu_ns();
    for (std::uint32_t i = 0; i < calls; ++i) {
        const auto start = std::chrono::steady_clock::now();
        target();
        round.caller_ns[i] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    }
    round.caller_cpu_ns = (thread_cpu_ns() - cpu_start) / calls;
    return round;
}

// The same `depth` frames down (this file is built with frame pointers):
// the entry program walks a call path as deep as a program's typical one,
// and each frame it reads is part of what a probed call costs its callers.
__attribute__((noinline)) ProbeCalibrationRound time_calls_at(int depth, EmptyFunction target, std::uint32_t calls) {
    if (depth <= 0) return time_calls_here(target, calls);
    ProbeCalibrationRound round = time_calls_at(depth - 1, target, calls);
    asm volatile("" ::: "memory");  // no tail call: the frame stays
    return round;
}

// The call depths of the calibration (frames of time_calls_at above
// ecpi's own): most calls at the first, the frame cost from the second.
constexpr int kCalibrationDepth = 2;
constexpr int kDeepCalibrationDepth = 12;

// The probe BPF object loaded for this process alone.
struct CalibrationProbes {
    probe_bpf* skel = nullptr;
    ring_buffer* rb = nullptr;
    std::vector<bpf_link*> links;
    ProbeCalibrationRound rounds[2];  // [probe id]: this round's records of each function
    CalibrationProbes() = default;
    CalibrationProbes(const CalibrationProbes&) = delete;
    CalibrationProbes& operator=(const CalibrationProbes&) = delete;
    ~CalibrationProbes() {
        for (auto* link : links) bpf_link__destroy(link);
        if (rb) ring_buffer__free(rb);
        if (skel) probe_bpf__destroy(skel);
    }

    Result<void> load(bool dwarf) {
        skel = probe_bpf__open();
        if (!skel) return bpf_error(errno, "opening the probe BPF object");
        skel->rodata->target_tgid = static_cast<std::uint32_t>(::getpid());
        skel->rodata->copy_stack = dwarf;
        if (int err = bpf_map__set_max_entries(skel->maps.probe_rb, 16u << 20))
            return bpf_error(err, "sizing its ring buffer");
        if (int err = probe_bpf__load(skel)) return bpf_error(err, "loading the probe BPF program");
        rb = ring_buffer__new(bpf_map__fd(skel->maps.probe_rb), on_calibration_record, rounds, nullptr);
        if (!rb) return bpf_error(errno, "creating its ring buffer reader");
        return ok();
    }

    // As the session attaches a timed probe: the return first.
    Result<void> attach(const FileLocation& where, std::uint32_t probe_id) {
        const std::uint64_t cookie = probe_id | ECPI_PROBE_COOKIE_TIMED;
        const pid_t self = ::getpid();
        for (bool ret : {true, false}) {
            LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = ret);
            bpf_link* link = bpf_program__attach_uprobe_opts(ret ? skel->progs.ecpi_probe_exit : skel->progs.ecpi_probe_entry,
                                                             self, where.path.c_str(), where.offset, &opts);
            if (!link) return bpf_error(errno, "attaching a probe to an empty function of ecpi");
            links.push_back(link);
        }
        return ok();
    }

    Result<ProbeCalibrationRound> run_round(std::uint32_t probe_id, std::uint32_t calls, int depth) {
        rounds[0] = rounds[1] = {};
        ProbeCalibrationRound caller = time_calls_at(depth, kTargets[probe_id], calls);
        int n = ring_buffer__consume(rb);
        if (n < 0) return bpf_error(n, "reading its ring buffer");
        rounds[probe_id].caller_ns = std::move(caller.caller_ns);
        rounds[probe_id].caller_cpu_ns = caller.caller_cpu_ns;
        return std::move(rounds[probe_id]);
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Half the interquartile range (nearest ranks).
double half_iqr(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return (v[(3 * (n - 1) + 2) / 4] - v[(n - 1) / 4]) / 2;
}

}  // namespace

double mean_of_uninterrupted(const std::vector<double>& ns) {
    if (ns.empty()) return 0;
    const double limit = 10 * median(ns);
    double sum = 0, n = 0;
    for (double v : ns)
        if (v <= limit) sum += v, ++n;
    return n ? sum / n : 0;
}

Result<store::ProbeCostKind> summarize_probe_rounds(const std::vector<ProbeCalibrationRound>& rounds,
                                                    const ProbeCalibrationRound& unprobed) {
    std::vector<double> wall, cpu, caller, caller_cpu;
    double calls = 0, sum = 0, squares = 0;
    for (const auto& r : rounds) {
        if (r.wall_ns.empty() || r.cpu_ns.size() != r.wall_ns.size()) continue;
        const double limit = 10 * median(r.wall_ns);
        double n = 0, round_wall = 0, round_cpu = 0;
        for (std::size_t i = 0; i < r.wall_ns.size(); ++i) {
            if (r.wall_ns[i] > limit) continue;  // interrupted
            ++n;
            round_wall += r.wall_ns[i];
            round_cpu += r.cpu_ns[i];
            squares += r.wall_ns[i] * r.wall_ns[i];
        }
        wall.push_back(round_wall / n);
        cpu.push_back(round_cpu / n);
        caller.push_back(mean_of_uninterrupted(r.caller_ns));
        caller_cpu.push_back(r.caller_cpu_ns);
        calls += n;
        sum += round_wall;
    }
    if (wall.size() < 3)
        return Error("measuring the probe's own cost: fewer than 3 rounds returned timed calls "
                     "(is the ring buffer full or the BPF program refused?); rerun with --raw-times");
    store::ProbeCostKind c;
    c.self_wall_ns = median(wall);
    c.self_cpu_ns = median(cpu);
    c.self_spread_ns = half_iqr(wall);
    const double mean = sum / calls;
    c.self_sd_ns = calls > 1 ? std::sqrt(std::max(0.0, (squares - calls * mean * mean) / (calls - 1))) : 0.0;
    c.pair_ns = std::max(0.0, median(caller) - mean_of_uninterrupted(unprobed.caller_ns));
    c.pair_spread_ns = half_iqr(caller);
    c.pair_cpu_ns = std::max(0.0, median(caller_cpu) - unprobed.caller_cpu_ns);
    double entries = 0, frames = 0;
    for (const auto& r : rounds) {
        entries += static_cast<double>(r.entries);
        frames += static_cast<double>(r.frames);
    }
    c.pair_depth = entries ? frames / entries : 0.0;
    return c;
}

bool entry_single_stepped(const std::uint8_t* bytes, std::size_t size) {
#if defined(__x86_64__)
    // arch/x86/kernel/uprobes.c: branch_setup_xol_ops (jmp, call, jcc, nop)
    // and push_setup_xol_ops (push of a 64-bit register) emulate these.
    if (size == 0) return true;
    std::uint8_t op = bytes[0];
    if (op == 0x41 && size > 1) op = bytes[1] >= 0x50 && bytes[1] <= 0x57 ? bytes[1] : 0x00;  // push %r8-%r15
    if ((op >= 0x50 && op <= 0x57) || op == 0x90 || op == 0xe8 || op == 0xe9 || op == 0xeb || (op >= 0x70 && op <= 0x7f))
        return false;
    if (op == 0x0f && size > 1 && ((bytes[1] >= 0x80 && bytes[1] <= 0x8f) || bytes[1] == 0x1f)) return false;
    return true;
#else
    (void)bytes;
    (void)size;
    return false;
#endif
}

std::pair<double, double> frame_cost(const store::ProbeCostKind& shallow, const store::ProbeCostKind& deep) {
    const double frames = deep.pair_depth - shallow.pair_depth;
    if (frames < 1) return {0.0, 0.0};
    return {std::max(0.0, (deep.pair_ns - shallow.pair_ns) / frames),
            std::max(0.0, (deep.pair_cpu_ns - shallow.pair_cpu_ns) / frames)};
}

std::string describe_probe_cost(const store::ProbeCost& c) {
    char line[400];
    std::snprintf(line, sizeof line,
                  "probe cost per call: %.0f ns (± %.0f) inside the probed call's own time, %.0f ns (± %.0f) in its "
                  "callers' (%.0f and %.0f ns when its first instruction is single-stepped; %.0f ns per frame of its path "
                  "beyond %.0f); %u rounds of %llu calls of empty functions",
                  c.emulated.self_wall_ns, c.emulated.self_spread_ns, c.emulated.pair_ns, c.emulated.pair_spread_ns,
                  c.stepped.self_wall_ns, c.stepped.pair_ns, c.frame_ns, c.emulated.pair_depth, c.rounds,
                  static_cast<unsigned long long>(c.rounds ? c.calls / (3 * c.rounds) : 0));
    return line;
}

Result<store::ProbeCost> measure_probe_cost(const ProbeCalibrationOptions& options) {
    const std::uint32_t calls = std::max<std::uint32_t>(1, options.calls_per_round);
    CalibrationProbes probes;
    ECPI_RETURN_IF_ERROR(probes.load(options.dwarf));
    // Unprobed first: the same calls at the same depths.
    ProbeCalibrationRound unprobed[3];
    unprobed[2] = time_calls_at(kDeepCalibrationDepth, kTargets[0], calls * options.rounds);
    for (std::uint32_t id = 0; id < 2; ++id) {
        unprobed[id] = time_calls_at(kCalibrationDepth, kTargets[id], calls * options.rounds);
        ECPI_ASSIGN_OR_RETURN(FileLocation where, locate_in_file(reinterpret_cast<const void*>(kTargets[id])));
        ECPI_RETURN_IF_ERROR(probes.attach(where, id));
    }
    // A warm-up round each (the thread's first probed calls set up its
    // state), then the rounds in turn: each function, then the first deeper.
    std::vector<ProbeCalibrationRound> rounds[3];
    for (std::uint32_t r = 0; r <= options.rounds; ++r)
        for (std::uint32_t set = 0; set < 3; ++set) {
            ECPI_ASSIGN_OR_RETURN(auto round, probes.run_round(set == 2 ? 0 : set, calls,
                                                                set == 2 ? kDeepCalibrationDepth : kCalibrationDepth));
            if (r > 0) rounds[set].push_back(round);
        }
    store::ProbeCost cost;
    cost.method = "empty functions in ecpi probed as the target's are (" +
                  std::string(options.dwarf ? "DWARF stack copy" : "frame-pointer path") + "), " +
                  std::to_string(options.rounds) + " rounds of " + std::to_string(calls) +
                  " calls each: their measured time, and their callers' clock probed minus unprobed (means of the calls "
                  "not interrupted, medians over the rounds)";
    cost.rounds = options.rounds;
    cost.unprobed_ns = mean_of_uninterrupted(unprobed[0].caller_ns);
    ECPI_ASSIGN_OR_RETURN(cost.emulated, summarize_probe_rounds(rounds[0], unprobed[0]));
    ECPI_ASSIGN_OR_RETURN(cost.stepped, summarize_probe_rounds(rounds[1], unprobed[1]));
    ECPI_ASSIGN_OR_RETURN(store::ProbeCostKind deep, summarize_probe_rounds(rounds[2], unprobed[2]));
    std::tie(cost.frame_ns, cost.frame_cpu_ns) = frame_cost(cost.emulated, deep);
    for (const auto& set : rounds)
        for (const auto& r : set) cost.calls += r.wall_ns.size();
    return cost;
}

}  // namespace ecpi::loader
