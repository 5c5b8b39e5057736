#include "ecpi/loader/probe_stack_samples.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace ecpi::loader {

namespace {

constexpr std::uint16_t kMaxFrames = 127;

perf_event_attr sampling_attr(std::uint64_t period_ns, bool call_chains) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = period_ns;
    attr.sample_type = call_chains ? PERF_SAMPLE_TID | PERF_SAMPLE_CALLCHAIN : PERF_SAMPLE_IP | PERF_SAMPLE_TID;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    if (call_chains) {
        attr.exclude_callchain_kernel = 1;
        attr.sample_max_stack = kMaxFrames;
    }
    attr.inherit = 1;  // threads the target starts later
    // No wakeups: ecpi reads the rings on its own tick.
    attr.watermark = 1;
    attr.wakeup_watermark = ~0u >> 1;
    return attr;
}

}  // namespace

Result<StackSampler> StackSampler::open(std::uint32_t pid, const std::vector<int>& cpus, std::uint64_t period_ns,
                                        std::size_t pages_per_cpu, bool call_chains) {
    StackSampler s;
    s.period_ns_ = period_ns;
    s.call_chains_ = call_chains;
    for (int cpu : cpus) {
        perf_event_attr attr = sampling_attr(period_ns, call_chains);
        long fd = syscall(SYS_perf_event_open, &attr, static_cast<pid_t>(pid), cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
            return Error::from_errno(errno, "opening the sampling event of process " + std::to_string(pid) +
                                                " on CPU " + std::to_string(cpu));
        auto ring = PerfRing::map(FileDescriptor(static_cast<int>(fd)), pages_per_cpu,
                                  "the stack-sample ring buffer of CPU " + std::to_string(cpu));
        if (!ring.ok()) return ring.error();
        s.rings_.push_back(std::move(*ring));
    }
    return s;
}

void StackSampler::drain(const std::function<void(const std::vector<std::uint64_t>& chain)>& sample) {
    for (auto& ring : rings_) {
        auto* meta = ring.meta();
        const auto* data = ring.data();
        const std::uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
        std::uint64_t tail = meta->data_tail;
        while (tail < head) {
            perf_event_header hdr;
            const std::size_t pos = tail % ring.size();
            for (std::size_t i = 0; i < sizeof hdr; ++i)
                reinterpret_cast<std::uint8_t*>(&hdr)[i] = data[(pos + i) % ring.size()];
            if (hdr.size < sizeof hdr || hdr.size > head - tail) break;  // corrupt: stop reading this ring
            record_.resize(hdr.size);
            for (std::size_t i = 0; i < hdr.size; ++i) record_[i] = data[(pos + i) % ring.size()];
            tail += hdr.size;
            if (hdr.type == PERF_RECORD_LOST) {
                std::uint64_t lost = 0;
                if (hdr.size >= sizeof hdr + 16) std::memcpy(&lost, record_.data() + sizeof hdr + 8, 8);
                lost_ += lost;
                continue;
            }
            if (hdr.type != PERF_RECORD_SAMPLE) continue;
            if ((hdr.misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER) {
                ++kernel_;
                continue;
            }
            if (!call_chains_) {  // {u64 ip} {u32 pid, tid}
                if (hdr.size < sizeof hdr + 16) continue;
                std::uint64_t ip;
                std::memcpy(&ip, record_.data() + sizeof hdr, 8);
                chain_.assign(1, ip);
                sample(chain_);
                continue;
            }
            // {u32 pid, tid} {u64 nr, ips[nr]}
            const std::size_t body = sizeof hdr + 8;
            std::uint64_t nr = 0;
            if (hdr.size < body + 8) continue;
            std::memcpy(&nr, record_.data() + body, 8);
            if (nr > (hdr.size - body - 8) / 8) continue;
            chain_.clear();
            for (std::uint64_t i = 0; i < nr; ++i) {
                std::uint64_t ip;
                std::memcpy(&ip, record_.data() + body + 8 + 8 * i, 8);
                if (ip >= static_cast<std::uint64_t>(PERF_CONTEXT_MAX)) continue;  // PERF_CONTEXT_USER and the like
                chain_.push_back(ip);
            }
            if (!chain_.empty()) sample(chain_);
        }
        __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
    }
}

}  // namespace ecpi::loader
