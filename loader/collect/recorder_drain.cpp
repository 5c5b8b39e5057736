// Draining: the BPF table and ring buffers, the side-band records, and the
// resolution of raw pcs to (image, offset).
#include <algorithm>
#include <tuple>
#include <unordered_set>

#include "recorder_session.h"

namespace ecpi::loader::detail {

// `time_ns`: when the sample was taken (a mapping replaced since still names it).
std::pair<std::uint32_t, std::uint64_t> Session::resolve_pc(std::uint32_t pid, std::uint64_t pc, bool kernel,
                                                            std::uint64_t time_ns) {
    if (kernel || pc >= kKernelSpaceStart) return {kKernelImageIndex, pc - kernel_.text};
    if (auto r = processes_.resolve(pid, pc, time_ns)) return {r->image, r->offset};
    return {kUnknownImageIndex, pc};
}

void Session::consume_ringbuf() {
    auto r = sampler_->drain_ringbuf(pending_flat_, pending_stacks_, pending_registers_);
    if (!r.ok()) warn_once(r.error().message());
}

// DCPI 5.4: sort raw samples by (pid, pc) before the image look-ups, so each
// process's mappings are searched in address order.
void Session::resolve_pending() {
    std::sort(pending_flat_.begin(), pending_flat_.end(), [](const RawSample& a, const RawSample& b) {
        return std::tie(a.tgid, a.pc) < std::tie(b.tgid, b.pc);
    });
    auto add_flat = [&](std::uint16_t event, std::uint32_t pid, std::uint64_t pc, bool kernel, std::uint64_t n,
                        std::uint64_t time_ns) {
        auto [image, offset] = resolve_pc(pid, pc, kernel, time_ns);
        flat_[{event, image, pid, offset}] += n;
        auto& meta = unflushed_meta_[event];
        meta.samples += n;
        total_samples_[event] += n;
        if (image == kUnknownImageIndex) meta.unknown += n;
        pids_seen_.insert(pid);
    };
    for (const auto& s : pending_flat_) {
        if (s.event >= events_.size()) continue;
        add_flat(s.event, s.tgid, s.pc, s.kernel, s.count, s.time_ns);
    }
    pending_flat_.clear();

    std::unordered_set<StackKey, StackKeyHash> distinct;
    for (const auto& s : pending_stacks_) {
        if (s.event >= events_.size()) continue;
        add_flat(s.event, s.tgid, s.pc, s.kernel, 1, s.time_ns);
        StackKey key{s.event, s.tgid, {}};
        key.frames.reserve(s.kernel_ips.size() + s.user_ips.size());
        for (auto ip : s.kernel_ips) key.frames.push_back(resolve_pc(s.tgid, ip, true, s.time_ns));
        for (auto ip : s.user_ips) key.frames.push_back(resolve_pc(s.tgid, ip, false, s.time_ns));
        if (key.frames.empty()) key.frames.push_back(resolve_pc(s.tgid, s.pc, s.kernel, s.time_ns));
        distinct.insert(key);
        stacks_[std::move(key)] += 1;
        ++summary_.stack_samples;
    }
    summary_.distinct_stacks_per_drain += distinct.size();
    pending_stacks_.clear();
    resolve_registers();
}

// Register snapshots map their pc like any user-mode sample; the snapshots
// are sorted by (tgid, pc) first, like the flat samples (DCPI 5.4).
void Session::resolve_registers() {
    std::sort(pending_registers_.begin(), pending_registers_.end(),
              [](const RawRegisterSample& a, const RawRegisterSample& b) {
                  return std::tie(a.tgid, a.pc) < std::tie(b.tgid, b.pc);
              });
    for (const auto& raw : pending_registers_) {
        if (raw.event >= events_.size()) continue;
        store::RegisterSample s;
        s.pid = raw.tgid;
        s.tid = raw.tid;
        s.time_ns = raw.time_ns;
        std::tie(s.image, s.offset) = resolve_pc(raw.tgid, raw.pc, false, raw.time_ns);
        s.regs = raw.regs;
        s.flags = raw.flags;
        registers_[raw.event].push_back(s);
    }
    pending_registers_.clear();
}

// Side-band records only add mappings and mark exits (forgetting waits for
// reap_exited at a drain), so reading them at every tick is safe and keeps a
// burst of process creation from overflowing the kernel's ring.
void Session::drain_sideband() {
    sideband_->drain({
        [this](std::uint32_t pid, std::uint64_t start, std::uint64_t len, std::uint64_t pgoff, const std::string& path,
               const std::string& build_id, std::uint64_t time_ns) {
            processes_.on_mmap(pid, start, len, pgoff, path, build_id, time_ns);
            if (unwinder_) unwinder_->note(pid);
        },
        [this](std::uint32_t pid, const std::string& comm, bool exec) {
            processes_.on_comm(pid, comm, exec);
            if (exec) processes_.set_cmdline(pid, read_cmdline(pid));  // while it lives (issue 34)
        },
        [this](std::uint32_t pid, std::uint32_t ppid) {
            processes_.on_fork(pid, ppid);
            // A parent started before the recording has no command line in the table: read the
            // child's while it lives, else its parent's (a subshell that never execs runs its parent's).
            if (processes_.cmdline(pid).empty()) {
                std::string line = read_cmdline(pid);
                processes_.set_cmdline(pid, line.empty() ? read_cmdline(ppid) : std::move(line));
            }
            if (unwinder_) unwinder_->note_fork(pid, ppid);
        },
        [this](std::uint32_t pid) {
            processes_.on_exit(pid);
            if (unwinder_) unwinder_->forget(pid);
        },
    });
    if (unwinder_)
        for (const auto& w : unwinder_->take_warnings()) warn_once(w);
}

// Command lines the sampler read at exec (issue 34 defect 2): kept for the
// processes gone from /proc before their comm record was read.
void Session::note_exec_args() {
    for (auto& e : sampler_->take_exec_args()) processes_.set_exec_args(e.tgid, std::move(e.cmdline));
}

// Read now if the process still runs, else what was read at its exec.
std::string Session::process_cmdline(std::uint32_t pid) const {
    std::string now = read_cmdline(pid);
    return now.empty() ? processes_.cmdline(pid) : now;
}

// Mappings replaced before the previous drain began name no sample still to
// come: every sample taken before then was in the kernel's ring when this
// drain read it (a handler takes microseconds; a second is kept to spare),
// except stack copies still held for their tables.
void Session::forget_replaced_mappings(std::uint64_t drain_began_ns) {
    std::uint64_t horizon =
        previous_drain_began_ns_ > kReplacedSpareNs ? previous_drain_began_ns_ - kReplacedSpareNs : 0;
    if (unwinder_) horizon = std::min(horizon, unwinder_->oldest_held_ns());
    processes_.forget_replaced_before(horizon);
    previous_drain_began_ns_ = drain_began_ns;
}

Result<void> Session::drain_cycle() {
    // Order matters: flip the table first, then read the side-band records,
    // so every drained sample's mmap has been seen (it happened before).
    // The mmaps read after a sample was taken do not name it: samples carry
    // their time (resolve_pc).
    const std::uint64_t began = monotonic_ns();
    auto r = sampler_->drain_table(pending_flat_);
    consume_ringbuf();
    drain_sideband();
    note_exec_args();  // after the side band: a process's fork record comes before its exec's
    // Remember names while the processes still exist.
    for (auto pid : pids_seen_) {
        if (process_meta_.count(pid)) continue;
        store::ProcessMeta meta;
        meta.comm = processes_.comm(pid);
        meta.cmdline = process_cmdline(pid);
        if (pid == 0) meta.comm = "swapper";
        process_meta_[pid] = meta;
    }
    if (unwinder_) unwinder_->complete(pending_stacks_);  // stack copies: walked once their tables load
    resolve_pending();
    for (auto pid : pids_seen_) {
        auto& meta = process_meta_[pid];
        if (meta.comm.empty()) meta.comm = processes_.comm(pid);
        if (meta.cmdline.empty()) meta.cmdline = process_cmdline(pid);
    }
    processes_.reap_exited();
    forget_replaced_mappings(began);
    ++summary_.drains;
    auto now = Clock::now();
    last_interval_s_ = std::chrono::duration<double>(now - last_drain_).count();
    last_drain_ = now;
    last_interval_samples_.assign(events_.size(), 0);
    for (std::size_t i = 0; i < events_.size(); ++i) {
        last_interval_samples_[i] = total_samples_[i] - interval_base_[i];
        interval_base_[i] = total_samples_[i];
    }
    return r;
}

}  // namespace ecpi::loader::detail
