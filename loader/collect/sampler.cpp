#include "ecpi/loader/sampler.h"
#include "ecpi/store/profile.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/membarrier.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "ecpi/loader/stack_records.h"
#include "ecpi_abi.h"
#include "sampler.skel.h"

namespace ecpi::loader {

static_assert(sizeof(ecpi_sample_key) == 16, "ABI: ecpi_sample_key");
static_assert(offsetof(ecpi_sample_key, pc) == 8, "ABI: ecpi_sample_key.pc");
static_assert(sizeof(ecpi_sample_record) == 24, "ABI: ecpi_sample_record");
static_assert(offsetof(ecpi_stack_record, key) == 8, "ABI: ecpi_stack_record.key");
static_assert(offsetof(ecpi_stack_record, time_ns) == 24, "ABI: ecpi_stack_record.time_ns");
static_assert(offsetof(ecpi_stack_record, ips) == 32, "ABI: ecpi_stack_record.ips");
static_assert(sizeof(ecpi_stack_record) == 32 + (ECPI_MAX_STACK_DEPTH + ECPI_MAX_USER_STACK_DEPTH) * 8,
              "ABI: ecpi_stack_record");
static_assert(offsetof(ecpi_register_record, time_ns) == 16, "ABI: ecpi_register_record.time_ns");
static_assert(offsetof(ecpi_register_record, regs) == 32, "ABI: ecpi_register_record.regs");
static_assert(sizeof(ecpi_register_record) == 32 + ECPI_GP_REGISTERS * 8, "ABI: ecpi_register_record");
static_assert(offsetof(ecpi_register_stack_record, stack) == sizeof(ecpi_register_record),
              "ABI: ecpi_register_stack_record.stack");
static_assert(ECPI_GP_REGISTERS == std::tuple_size_v<decltype(RawRegisterSample::regs)>, "ABI: register count");
static_assert(offsetof(ecpi_register_record, flags) == 6, "ABI: ecpi_register_record.flags");
static_assert(ECPI_FLAGS_RECORDED == ecpi::store::kFlagsRecorded && ECPI_FLAGS_STATUS_MASK == ecpi::store::kFlagsStatusMask,
              "ABI: the flags are stored as the sampler sends them");
static_assert(offsetof(ecpi_exec_record, args) == 16, "ABI: ecpi_exec_record.args");
static_assert(ECPI_ABI_VERSION == 8, "update the loader for the new ABI");
static_assert(ECPI_COUNTER_MAX - ECPI_COUNTER_STACK_ROOT == kStackEndNames.size(), "ABI: stack end counters");

namespace {

Error libbpf_error(int err, const std::string& what) {
    if (err < 0) err = -err;
    if (err == EPERM || err == EACCES)
        return Error(what + ": " + std::strerror(err) +
                         "; ecpi needs CAP_BPF and CAP_PERFMON (or root) to load its BPF programs",
                     err);
    return Error::from_errno(err, what);
}

// Waits until every BPF handler that may have read the old active_slot has
// returned: perf-event BPF programs run under rcu_read_lock, and
// MEMBARRIER_CMD_GLOBAL waits for an RCU grace period.
void wait_for_handlers() {
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0) return;
    // nohz_full kernels refuse MEMBARRIER_CMD_GLOBAL: handlers take
    // microseconds, so a sleep many orders longer is a safe substitute.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

constexpr std::size_t kMaxPendingExecArgs = 1 << 16;

struct Sampler::Impl {
    sampler_bpf* skel = nullptr;
    ring_buffer* rb = nullptr;
    struct Attached {
        std::uint16_t event;
        FileDescriptor fd;
        bpf_link* link;
    };
    std::vector<Attached> links;
    struct Calibration {
        FileDescriptor fd;
        bpf_link* link;
    };
    std::vector<Calibration> calibrations;  // the budget's calibration events, one per CPU measured at once
    int ncpus = 0;
    std::uint64_t unknown_kinds = 0;
    std::array<std::uint64_t, kStackRecordFaultNames.size()> stack_faults{};  // by StackRecordFault
    std::vector<RawSample>* flat_out = nullptr;
    std::vector<RawStackSample>* stack_out = nullptr;
    std::vector<RawRegisterSample>* register_out = nullptr;
    std::vector<RawExecArgs> exec_args;

    ~Impl() {
        if (rb) ring_buffer__free(rb);
        for (auto& c : calibrations) bpf_link__destroy(c.link);
        for (auto& l : links) bpf_link__destroy(l.link);
        links.clear();
        if (skel) sampler_bpf__destroy(skel);
    }

    void count_fault(StackRecordFault fault) {
        if (fault != StackRecordFault::kNone) ++stack_faults[static_cast<std::size_t>(fault)];
    }

    // NUL-separated strings as /proc/PID/cmdline holds them, joined as read_cmdline joins them.
    static RawExecArgs exec_args_record(const void* data, std::size_t size) {
        const auto* rec = static_cast<const ecpi_exec_record*>(data);
        const std::size_t header = offsetof(ecpi_exec_record, args);
        const std::size_t bytes = std::min<std::size_t>({rec->args_bytes, size - header, ECPI_EXEC_ARGS_BYTES});
        RawExecArgs out{rec->tgid, std::string(reinterpret_cast<const char*>(rec->args), bytes), rec->truncated != 0};
        std::replace(out.cmdline.begin(), out.cmdline.end(), '\0', ' ');
        while (!out.cmdline.empty() && out.cmdline.back() == ' ') out.cmdline.pop_back();
        return out;
    }

    static int on_record(void* ctx, void* data, size_t size) {
        auto* self = static_cast<Impl*>(ctx);
        if (size < sizeof(std::uint32_t)) {
            ++self->unknown_kinds;
            return 0;
        }
        std::uint32_t kind;
        std::memcpy(&kind, data, sizeof kind);
        if (kind == ECPI_RECORD_SAMPLE && size >= sizeof(ecpi_sample_record)) {
            ecpi_sample_record rec;
            std::memcpy(&rec, data, sizeof rec);
            self->flat_out->push_back({rec.key.tgid, rec.key.event, rec.key.kernel != 0, rec.key.pc, 1});
        } else if (kind == ECPI_RECORD_STACK_SAMPLE) {
            self->count_fault(decode_full_stack(data, size, *self->stack_out));
        } else if (kind == ECPI_RECORD_STACK_PACKED) {
            self->count_fault(decode_packed_stack(data, size, *self->stack_out));
        } else if (kind == ECPI_RECORD_STACK_COPY) {
            self->count_fault(decode_stack_copy(data, size, *self->stack_out));
        } else if (kind == ECPI_RECORD_EXEC_ARGS && size >= offsetof(ecpi_exec_record, args)) {
            // A caller that never takes them (a calibration) must not grow without bound.
            if (self->exec_args.size() < kMaxPendingExecArgs) self->exec_args.push_back(exec_args_record(data, size));
        } else if (kind == ECPI_RECORD_STACK_REGISTERS) {
            self->count_fault(decode_register_stack(data, size, *self->stack_out, *self->register_out));
        } else if (kind == ECPI_RECORD_REGISTERS && size >= sizeof(ecpi_register_record)) {
            self->register_out->push_back(register_sample(data));
        } else {
            // A record this loader does not understand: count it, loudly, at the end.
            ++self->unknown_kinds;
        }
        return 0;
    }
};

Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;
Sampler::~Sampler() = default;

Result<Sampler> Sampler::load(const SamplerOptions& options) {
    Sampler s;
    s.impl_ = std::make_unique<Impl>();
    auto& impl = *s.impl_;
    libbpf_set_print([](enum libbpf_print_level level, const char* fmt, va_list args) -> int {
        if (level == LIBBPF_WARN && std::getenv("ECPI_DEBUG_LIBBPF")) return vfprintf(stderr, fmt, args);
        return 0;
    });
    impl.ncpus = libbpf_num_possible_cpus();
    if (impl.ncpus <= 0) return libbpf_error(impl.ncpus, "counting possible CPUs");
    impl.skel = sampler_bpf__open();
    if (!impl.skel) return libbpf_error(errno, "opening the sampler BPF object");
    impl.skel->rodata->filter_tgids = options.filter_tgids;
    impl.skel->rodata->capture_stacks = options.capture_stacks;
    impl.skel->rodata->unwind_cfi = options.unwind_cfi;
    impl.skel->rodata->exclude_tgid = options.exclude_tgid;
    impl.skel->rodata->registers_every = options.registers_every;
#ifdef ECPI_TEST_HOOKS
    impl.skel->bss->test_sample_cost_ns = options.test_sample_cost_ns;
#endif
    for (bpf_map* m : {impl.skel->maps.counts_0, impl.skel->maps.counts_1}) {
        if (int err = bpf_map__set_max_entries(m, options.table_entries))
            return libbpf_error(err, "sizing the sample table");
    }
    // The CFI rows are allocated only when they can be used.
    if (int err = bpf_map__set_max_entries(impl.skel->maps.unwind_rows,
                                           options.capture_stacks && options.unwind_cfi ? options.unwind_rows : 1))
        return libbpf_error(err, "sizing the unwind rows");
    if (int err = bpf_map__set_max_entries(impl.skel->maps.unwind_pages,
                                           options.capture_stacks && options.unwind_cfi ? options.unwind_pages : 1))
        return libbpf_error(err, "sizing the unwind page index");
    if (int err = bpf_map__set_max_entries(impl.skel->maps.samples_rb, options.ringbuf_bytes))
        return libbpf_error(err, "sizing the ring buffer");
    if (int err = bpf_map__set_max_entries(impl.skel->maps.registers_rb, options.registers_ringbuf_bytes))
        return libbpf_error(err, "sizing the register ring buffer");
    if (int err = sampler_bpf__load(impl.skel)) {
        if (geteuid() == 0 && (err == -EACCES || err == -EINVAL))
            return Error("the kernel's verifier rejected the sampler BPF program (" + std::string(std::strerror(-err)) +
                             "); rerun with ECPI_DEBUG_LIBBPF=1 to see its log and report it",
                         -err);
        return libbpf_error(err, "loading the sampler BPF program");
    }
    // The fork and exec tracepoints are attached now; perf events are attached per event later.
    impl.skel->links.ecpi_fork = bpf_program__attach(impl.skel->progs.ecpi_fork);
    if (!impl.skel->links.ecpi_fork) return libbpf_error(errno, "attaching the sched_process_fork tracepoint");
    impl.skel->links.ecpi_exec = bpf_program__attach(impl.skel->progs.ecpi_exec);
    if (!impl.skel->links.ecpi_exec) return libbpf_error(errno, "attaching the sched_process_exec tracepoint");
    impl.rb = ring_buffer__new(bpf_map__fd(impl.skel->maps.samples_rb), &Impl::on_record, &impl, nullptr);
    if (!impl.rb) return libbpf_error(errno, "creating the ring buffer reader");
    if (int err = ring_buffer__add(impl.rb, bpf_map__fd(impl.skel->maps.registers_rb), &Impl::on_record, &impl))
        return libbpf_error(err, "adding the register ring buffer to its reader");
    if (int err = ring_buffer__add(impl.rb, bpf_map__fd(impl.skel->maps.exec_rb), &Impl::on_record, &impl))
        return libbpf_error(err, "adding the exec ring buffer to its reader");
    return s;
}

#ifdef ECPI_TEST_HOOKS
void Sampler::set_test_sample_cost(std::uint64_t ns) {
    __atomic_store_n(&impl_->skel->bss->test_sample_cost_ns, ns, __ATOMIC_RELAXED);
}
#endif

Result<void> Sampler::track_tgid(std::uint32_t tgid) {
    std::uint8_t yes = 1;
    if (bpf_map_update_elem(bpf_map__fd(impl_->skel->maps.tracked_tgids), &tgid, &yes, BPF_ANY) != 0)
        return libbpf_error(errno, "tracking process " + std::to_string(tgid));
    return ok();
}

Result<void> Sampler::untrack_tgid(std::uint32_t tgid) {
    if (bpf_map_delete_elem(bpf_map__fd(impl_->skel->maps.tracked_tgids), &tgid) != 0 && errno != ENOENT)
        return libbpf_error(errno, "untracking process " + std::to_string(tgid));
    return ok();
}

Result<void> Sampler::attach_calibration(FileDescriptor fd) {
    LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = ECPI_CALIBRATION_EVENT);
    bpf_link* link = bpf_program__attach_perf_event_opts(impl_->skel->progs.ecpi_sample, fd.get(), &opts);
    if (!link) return libbpf_error(errno, "attaching the sampler to the calibration event");
    // libbpf enables the event it attaches to; the calibration enables it only
    // for its sampled halves. Left enabled, the first pair's unsampled half
    // was sampled too and read 2-18 us a sample cheaper than no sampling at
    // all; a check while running has one or two pairs, and half of them
    // read a 100 us handler as free (2026-11-28, a Zen 3 VM).
    if (ioctl(fd.get(), PERF_EVENT_IOC_DISABLE, 0) != 0) {
        const int err = errno;
        bpf_link__destroy(link);
        return Error::from_errno(err, "disabling the overhead budget's calibration event after attaching it");
    }
    impl_->calibrations.push_back({std::move(fd), link});
    return ok();
}

void Sampler::detach_calibration(int fd) {
    auto& all = impl_->calibrations;
    for (auto it = all.begin(); it != all.end(); ++it)
        if (it->fd.get() == fd) {
            bpf_link__destroy(it->link);
            all.erase(it);
            return;
        }
}

Result<std::vector<std::vector<std::uint64_t>>> Sampler::idle_counts() const {
    std::vector<std::vector<std::uint64_t>> out;
    int fd = bpf_map__fd(impl_->skel->maps.idle_samples);
    for (std::uint32_t event = 0; event < ECPI_MAX_EVENTS; ++event) {
        std::vector<std::uint64_t> per_cpu(static_cast<std::size_t>(impl_->ncpus));
        if (bpf_map_lookup_elem(fd, &event, per_cpu.data()) != 0)
            return libbpf_error(errno, "reading the idle sample counters");
        out.push_back(std::move(per_cpu));
    }
    return out;
}

Result<void> Sampler::attach(std::uint16_t event_index, std::vector<FileDescriptor> fds) {
    if (event_index >= ECPI_CALIBRATION_EVENT)
        return Error("too many events: at most " + std::to_string(ECPI_CALIBRATION_EVENT) + " may be sampled at once");
    for (auto& fd : fds) {
        LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = event_index);
        bpf_link* link = bpf_program__attach_perf_event_opts(impl_->skel->progs.ecpi_sample, fd.get(), &opts);
        if (!link) return libbpf_error(errno, "attaching the sampler to a perf event");
        impl_->links.push_back({event_index, std::move(fd), link});
    }
    return ok();
}

std::vector<int> Sampler::event_fds(std::uint16_t event_index) const {
    std::vector<int> out;
    for (const auto& l : impl_->links)
        if (l.event == event_index) out.push_back(l.fd.get());
    return out;
}

Result<void> Sampler::drain_table(std::vector<RawSample>& out) {
    auto* bss = impl_->skel->bss;
    std::uint32_t old_slot = bss->active_slot;
    __atomic_store_n(&bss->active_slot, old_slot ^ 1u, __ATOMIC_SEQ_CST);
    wait_for_handlers();
    const std::uint64_t taken_by = monotonic_ns();  // every sample in the old table was taken before
    bpf_map* table = old_slot ? impl_->skel->maps.counts_1 : impl_->skel->maps.counts_0;
    int fd = bpf_map__fd(table);
    const std::uint32_t capacity = bpf_map__max_entries(table);
    const int ncpus = impl_->ncpus;

    std::vector<ecpi_sample_key> keys(capacity);
    std::vector<std::uint64_t> values(static_cast<std::size_t>(capacity) * ncpus);
    // No handler writes this table now, so lookup-and-delete is exact.
    std::uint64_t in_batch = 0, out_batch = 0;
    bool first = true;
    for (;;) {
        __u32 n = capacity;
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        int err = bpf_map_lookup_and_delete_batch(fd, first ? nullptr : &in_batch, &out_batch, keys.data(),
                                                  values.data(), &n, &opts);
        int saved = errno;
        for (__u32 i = 0; i < n; ++i) {
            std::uint64_t total = 0;
            for (int c = 0; c < ncpus; ++c) total += values[static_cast<std::size_t>(i) * ncpus + c];
            if (total == 0) continue;
            const auto& k = keys[i];
            out.push_back({k.tgid, k.event, k.kernel != 0, k.pc, total, taken_by});
        }
        if (err) {
            if (saved == ENOENT) break;  // table empty
            return libbpf_error(saved, "draining the sample table");
        }
        in_batch = out_batch;
        first = false;
    }
    return ok();
}

Result<void> Sampler::drain_ringbuf(std::vector<RawSample>& flat, std::vector<RawStackSample>& stacks,
                                    std::vector<RawRegisterSample>& registers) {
    impl_->flat_out = &flat;
    impl_->stack_out = &stacks;
    impl_->register_out = &registers;
    const std::size_t flat_before = flat.size();
    int n = ring_buffer__consume(impl_->rb);
    const std::uint64_t taken_by = monotonic_ns();  // the spilled samples carry no time of their own
    for (std::size_t i = flat_before; i < flat.size(); ++i) flat[i].time_ns = taken_by;
    impl_->flat_out = nullptr;
    impl_->stack_out = nullptr;
    impl_->register_out = nullptr;
    if (n < 0) return libbpf_error(n, "reading the ring buffer");
    return ok();
}

std::vector<RawExecArgs> Sampler::take_exec_args() { return std::exchange(impl_->exec_args, {}); }

std::uint64_t Sampler::exec_args_lost() const {
    return __atomic_load_n(&impl_->skel->bss->exec_args_lost, __ATOMIC_RELAXED);
}

Result<std::vector<SamplerCounters>> Sampler::counters() const {
    std::vector<SamplerCounters> out(ECPI_MAX_EVENTS);
    int fd = bpf_map__fd(impl_->skel->maps.counters);
    std::vector<std::uint64_t> per_cpu(impl_->ncpus);
    for (std::uint32_t slot = 0; slot < ECPI_COUNTER_SLOTS; ++slot) {
        if (bpf_map_lookup_elem(fd, &slot, per_cpu.data()) != 0)
            return libbpf_error(errno, "reading the sampler counters");
        std::uint64_t sum = 0;
        for (auto v : per_cpu) sum += v;
        auto& c = out[slot / ECPI_COUNTER_MAX];
        switch (slot % ECPI_COUNTER_MAX) {
        case ECPI_COUNTER_SAMPLES: c.samples = sum; break;
        case ECPI_COUNTER_TABLE_FULL: c.table_full = sum; break;
        case ECPI_COUNTER_RINGBUF_LOST: c.ringbuf_lost = sum; break;
        case ECPI_COUNTER_STACK_ERRORS: c.stack_errors = sum; break;
        case ECPI_COUNTER_REGISTERS_LOST: c.registers_lost = sum; break;
        default:
            if (slot % ECPI_COUNTER_MAX >= ECPI_COUNTER_STACK_ROOT)
                c.stack_ends[slot % ECPI_COUNTER_MAX - ECPI_COUNTER_STACK_ROOT] = sum;
            break;
        }
    }
    return out;
}

Result<Sampler::ProgStats> Sampler::prog_stats() const {
    bpf_prog_info info{};
    __u32 len = sizeof info;
    if (bpf_obj_get_info_by_fd(bpf_program__fd(impl_->skel->progs.ecpi_sample), &info, &len) != 0)
        return libbpf_error(errno, "reading BPF program statistics");
    std::string tag;
    for (unsigned char byte : info.tag) {
        static constexpr char kHex[] = "0123456789abcdef";
        tag += kHex[byte >> 4];
        tag += kHex[byte & 15];
    }
    return ProgStats{info.run_time_ns, info.run_cnt, std::move(tag)};
}

UnwindMapFds Sampler::unwind_maps() const {
    return {bpf_map__fd(impl_->skel->maps.unwind_rows), bpf_map__max_entries(impl_->skel->maps.unwind_rows),
            bpf_map__fd(impl_->skel->maps.unwind_tables), bpf_map__fd(impl_->skel->maps.unwind_processes),
            bpf_map__fd(impl_->skel->maps.unwind_pages), bpf_map__max_entries(impl_->skel->maps.unwind_pages)};
}

std::uint64_t Sampler::unknown_record_kinds() const { return impl_->unknown_kinds; }

std::string Sampler::malformed_stack_records() const {
    std::string out;
    for (std::size_t i = 1; i < impl_->stack_faults.size(); ++i)
        if (impl_->stack_faults[i])
            out += (out.empty() ? "" : ", ") + std::string(kStackRecordFaultNames[i]) + " " +
                   std::to_string(impl_->stack_faults[i]);
    return out;
}

}  // namespace ecpi::loader
