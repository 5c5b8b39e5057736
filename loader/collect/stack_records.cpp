#include "ecpi/loader/stack_records.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ecpi_abi.h"

namespace ecpi::loader {

namespace {

// A stack record's key, time and kernel frames (kernel_depth <= ECPI_MAX_STACK_DEPTH, checked by the caller).
RawStackSample stack_sample_head(const ecpi_sample_key& key, std::uint64_t time_ns, const __u64* kernel_ips,
                                 std::size_t kernel_depth) {
    RawStackSample s;
    s.tgid = key.tgid;
    s.time_ns = time_ns;
    s.event = key.event;
    s.kernel = key.kernel != 0;
    s.pc = key.pc;
    s.kernel_ips.assign(kernel_ips, kernel_ips + kernel_depth);
    return s;
}

}  // namespace

StackRecordFault decode_packed_stack(const void* data, std::size_t size, std::vector<RawStackSample>& out) {
    ecpi_stack_record rec;
    const std::size_t header = offsetof(ecpi_stack_record, ips);
    if (size < header) return StackRecordFault::kShortHeader;
    std::memcpy(&rec, data, header);
    const std::size_t kd = rec.kernel_depth, ud = rec.user_depth;
    if (kd > ECPI_MAX_STACK_DEPTH || ud > ECPI_MAX_USER_STACK_DEPTH) return StackRecordFault::kDepthOverLimit;
    if (size < header + 8 * (kd + ud)) return StackRecordFault::kShortFrames;
    std::memcpy(rec.ips, static_cast<const std::uint8_t*>(data) + header, 8 * (kd + ud));
    RawStackSample s = stack_sample_head(rec.key, rec.time_ns, rec.ips, kd);
    s.user_ips.assign(rec.ips + kd, rec.ips + kd + ud);
    out.push_back(std::move(s));
    return StackRecordFault::kNone;
}

RawRegisterSample register_sample(const void* data) {
    ecpi_register_record rec;
    std::memcpy(&rec, data, sizeof rec);
    RawRegisterSample s;
    s.tgid = rec.tgid;
    s.tid = rec.tid;
    s.event = rec.event;
    s.time_ns = rec.time_ns;
    s.pc = rec.pc;
    std::memcpy(s.regs.data(), rec.regs, sizeof rec.regs);
    s.flags = rec.flags;
    return s;
}

StackRecordFault decode_register_stack(const void* data, std::size_t size, std::vector<RawStackSample>& out,
                                       std::vector<RawRegisterSample>& registers) {
    const std::size_t head = offsetof(ecpi_register_stack_record, stack);
    if (size < head) return StackRecordFault::kShortHeader;
    const auto* stack = static_cast<const std::uint8_t*>(data) + head;
    std::uint32_t kind;
    if (size < head + sizeof kind) return StackRecordFault::kShortHeader;
    std::memcpy(&kind, stack, sizeof kind);
    if (kind != ECPI_RECORD_STACK_PACKED) return StackRecordFault::kInnerKind;
    const StackRecordFault fault = decode_packed_stack(stack, size - head, out);
    if (fault == StackRecordFault::kNone) registers.push_back(register_sample(data));
    return fault;
}

StackRecordFault decode_full_stack(const void* data, std::size_t size, std::vector<RawStackSample>& out) {
    if (size < sizeof(ecpi_stack_record)) return StackRecordFault::kShortHeader;
    const auto* rec = static_cast<const ecpi_stack_record*>(data);
    const std::size_t kd = std::min<std::size_t>(rec->kernel_depth, ECPI_MAX_STACK_DEPTH);
    const std::size_t ud = std::min<std::size_t>(rec->user_depth, ECPI_MAX_USER_STACK_DEPTH);
    RawStackSample s = stack_sample_head(rec->key, rec->time_ns, rec->ips, kd);
    s.user_ips.assign(rec->ips + ECPI_MAX_STACK_DEPTH, rec->ips + ECPI_MAX_STACK_DEPTH + ud);
    out.push_back(std::move(s));
    return StackRecordFault::kNone;
}

StackRecordFault decode_stack_copy(const void* data, std::size_t size, std::vector<RawStackSample>& out) {
    const std::size_t header = offsetof(ecpi_stack_copy_record, stack);
    if (size < header) return StackRecordFault::kShortHeader;
    const auto* rec = static_cast<const ecpi_stack_copy_record*>(data);
    const std::size_t kd = std::min<std::size_t>(rec->kernel_depth, ECPI_MAX_STACK_DEPTH);
    RawStackSample s = stack_sample_head(rec->key, rec->time_ns, rec->kernel_ips, kd);
    const std::size_t bytes = std::min<std::size_t>({rec->stack_bytes, size - header, ECPI_STACK_COPY_BYTES});
    s.copy = UserStackCopy{rec->pc, rec->sp, rec->bp, std::vector<std::uint8_t>(rec->stack, rec->stack + bytes)};
    out.push_back(std::move(s));
    return StackRecordFault::kNone;
}

}  // namespace ecpi::loader
