// Decoding of the sampler's -g ring-buffer records (bpf/ecpi_abi.h), apart
// from the ring itself so that truncated and forged records can be tested.
// A record is untrusted input: one that does not hold what its header says
// is rejected with its fault, never read past its size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ecpi/loader/sampler.h"

namespace ecpi::loader {

// Why a stack record was rejected; kNone: decoded.
enum class StackRecordFault : std::uint8_t {
    kNone,
    kShortHeader,     // smaller than the record's fixed part
    kDepthOverLimit,  // kernel_depth or user_depth above the ABI's limit
    kShortFrames,     // the size does not hold the frames the header names
    kInnerKind,       // a register-and-stack record whose stack part is not a packed stack record
};
inline constexpr std::array<std::string_view, 5> kStackRecordFaultNames{"none", "short_header", "depth_over_limit",
                                                                        "short_frames", "inner_kind"};

// An ECPI_RECORD_STACK_PACKED record (a CFI-walked -g sample, the user
// frames right after the kernel ones, sent only as long as its frames):
// appends the sample to `out` when it decodes, and says why not otherwise.
[[nodiscard]] StackRecordFault decode_packed_stack(const void* data, std::size_t size,
                                                   std::vector<RawStackSample>& out);

// An ECPI_RECORD_STACK_REGISTERS record (a CFI-walked -g sample that kept
// its registers: the register record, then the packed stack record): appends
// the registers to `registers` and the sample to `out` when it decodes, and
// neither otherwise.
[[nodiscard]] StackRecordFault decode_register_stack(const void* data, std::size_t size,
                                                     std::vector<RawStackSample>& out,
                                                     std::vector<RawRegisterSample>& registers);

// An ECPI_RECORD_REGISTERS record's registers (the caller checked its size).
RawRegisterSample register_sample(const void* data);

// An ECPI_RECORD_STACK_SAMPLE record (frame pointers: kernel frames in
// ips[0 ..), user frames in ips[ECPI_MAX_STACK_DEPTH ..), sent whole).
[[nodiscard]] StackRecordFault decode_full_stack(const void* data, std::size_t size,
                                                 std::vector<RawStackSample>& out);

// An ECPI_RECORD_STACK_COPY record (registers and stack bytes of a sample
// taken before its process's tables loaded; its user stack still to walk).
[[nodiscard]] StackRecordFault decode_stack_copy(const void* data, std::size_t size,
                                                 std::vector<RawStackSample>& out);

}  // namespace ecpi::loader
