// Decoding of the sampler's -g stack records (loader/collect/stack_records.cpp):
// the packed CFI record (ECPI_RECORD_STACK_PACKED, ABI 7) and the one that
// carries the sample's registers ahead of it (ECPI_RECORD_STACK_REGISTERS,
// ABI 8) must give back what the handler wrote, and a truncated or forged
// record must be rejected with its reason, never read past its size.
#include "ecpi/loader/stack_records.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "ecpi_abi.h"

using namespace ecpi::loader;

namespace {

// A packed record as the handler sends it: the fixed part, then kernel
// frames and user frames back to back, `size` bytes long.
std::vector<std::uint8_t> packed_record(const std::vector<std::uint64_t>& kernel, const std::vector<std::uint64_t>& user,
                                        std::uint16_t kernel_depth, std::uint16_t user_depth) {
    ecpi_stack_record head{};
    head.kind = ECPI_RECORD_STACK_PACKED;
    head.kernel_depth = kernel_depth;
    head.user_depth = user_depth;
    head.key.tgid = 4242;
    head.key.event = 3;
    head.key.kernel = kernel.empty() ? 0 : 1;
    head.key.pc = kernel.empty() ? (user.empty() ? 0 : user[0]) : kernel[0];
    head.time_ns = 987'654'321'000ull;
    const std::size_t header = offsetof(ecpi_stack_record, ips);
    std::vector<std::uint8_t> out(header + 8 * (kernel.size() + user.size()));
    std::memcpy(out.data(), &head, header);
    std::memcpy(out.data() + header, kernel.data(), 8 * kernel.size());
    std::memcpy(out.data() + header + 8 * kernel.size(), user.data(), 8 * user.size());
    return out;
}

// A register-and-stack record as the handler sends it: the register record,
// then the packed stack record.
std::vector<std::uint8_t> register_stack_record(const std::vector<std::uint8_t>& packed) {
    ecpi_register_record regs{};
    regs.kind = ECPI_RECORD_STACK_REGISTERS;
    regs.event = 3;
    regs.tgid = 4242;
    regs.tid = 4250;
    regs.time_ns = 987'654'321'000ull;
    regs.pc = 0x555555554321ull;
    for (int i = 0; i < ECPI_GP_REGISTERS; ++i) regs.regs[i] = 0x1000u * static_cast<unsigned>(i) + 7;
    std::vector<std::uint8_t> out(sizeof regs + packed.size());
    std::memcpy(out.data(), &regs, sizeof regs);
    std::memcpy(out.data() + sizeof regs, packed.data(), packed.size());
    return out;
}

std::vector<std::uint64_t> frames(std::size_t n, std::uint64_t base) {
    std::vector<std::uint64_t> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(base + 0x10 * i + i * i);
    return out;
}

}  // namespace

TEST_CASE("a packed stack record gives back its kernel and user frames, leaf first") {
    const auto kernel = frames(3, 0xffffffff81000000ull), user = frames(30, 0x555555554000ull);
    const auto rec = packed_record(kernel, user, 3, 30);
    std::vector<RawStackSample> out;
    REQUIRE(decode_packed_stack(rec.data(), rec.size(), out) == StackRecordFault::kNone);
    REQUIRE(out.size() == 1);
    CHECK(out[0].tgid == 4242);
    CHECK(out[0].event == 3);
    CHECK(out[0].kernel);
    CHECK(out[0].pc == kernel[0]);
    CHECK(out[0].time_ns == 987'654'321'000ull);  // names the frames with the mappings of its time
    CHECK(out[0].kernel_ips == kernel);
    CHECK(out[0].user_ips == user);
    CHECK_FALSE(out[0].copy.has_value());
}

TEST_CASE("packed stack records at the ABI's limits and with no frames decode") {
    std::vector<RawStackSample> out;
    const auto full = packed_record(frames(ECPI_MAX_STACK_DEPTH, 0xffffffff82000000ull),
                                    frames(ECPI_MAX_USER_STACK_DEPTH, 0x7f0000001000ull), ECPI_MAX_STACK_DEPTH,
                                    ECPI_MAX_USER_STACK_DEPTH);
    REQUIRE(decode_packed_stack(full.data(), full.size(), out) == StackRecordFault::kNone);
    CHECK(out.back().kernel_ips.size() == ECPI_MAX_STACK_DEPTH);
    CHECK(out.back().user_ips == frames(ECPI_MAX_USER_STACK_DEPTH, 0x7f0000001000ull));
    const auto user_only = packed_record({}, frames(5, 0x401000), 0, 5);
    REQUIRE(decode_packed_stack(user_only.data(), user_only.size(), out) == StackRecordFault::kNone);
    CHECK(out.back().kernel_ips.empty());
    CHECK_FALSE(out.back().kernel);
    CHECK(out.back().user_ips == frames(5, 0x401000));
    const auto empty = packed_record({}, {}, 0, 0);  // a kernel thread: no user stack
    REQUIRE(decode_packed_stack(empty.data(), empty.size(), out) == StackRecordFault::kNone);
    CHECK(out.back().user_ips.empty());
    CHECK(out.size() == 3);
}

TEST_CASE("a truncated packed stack record is rejected at every length, nothing appended") {
    const auto rec = packed_record(frames(2, 0xffffffff81000000ull), frames(10, 0x401000), 2, 10);
    std::vector<RawStackSample> out;
    for (std::size_t size = 0; size < rec.size(); ++size) {
        // A copy of exactly `size` bytes, so that a read past it is a fault a sanitizer sees.
        std::vector<std::uint8_t> cut(rec.begin(), rec.begin() + static_cast<std::ptrdiff_t>(size));
        const StackRecordFault want =
            size < offsetof(ecpi_stack_record, ips) ? StackRecordFault::kShortHeader : StackRecordFault::kShortFrames;
        CAPTURE(size);
        CHECK(decode_packed_stack(cut.data(), cut.size(), out) == want);
    }
    CHECK(out.empty());
}

TEST_CASE("a forged packed stack record naming more frames than the ABI allows is rejected") {
    std::vector<RawStackSample> out;
    // Depths over the limit, with a size that would hold them: refused by the limit, not by the size.
    const auto user_over = packed_record({}, frames(ECPI_MAX_USER_STACK_DEPTH + 1, 0x401000), 0,
                                         ECPI_MAX_USER_STACK_DEPTH + 1);
    CHECK(decode_packed_stack(user_over.data(), user_over.size(), out) == StackRecordFault::kDepthOverLimit);
    const auto kernel_over = packed_record(frames(ECPI_MAX_STACK_DEPTH + 1, 0xffffffff81000000ull), {},
                                           ECPI_MAX_STACK_DEPTH + 1, 0);
    CHECK(decode_packed_stack(kernel_over.data(), kernel_over.size(), out) == StackRecordFault::kDepthOverLimit);
    // Header says 65535 frames each, the record holds 2.
    auto huge = packed_record({}, frames(2, 0x401000), 0, 2);
    const std::uint16_t most = 0xffff;
    std::memcpy(huge.data() + offsetof(ecpi_stack_record, kernel_depth), &most, sizeof most);
    std::memcpy(huge.data() + offsetof(ecpi_stack_record, user_depth), &most, sizeof most);
    CHECK(decode_packed_stack(huge.data(), huge.size(), out) == StackRecordFault::kDepthOverLimit);
    // Within the limits but longer than the record: refused by the size.
    auto longer = packed_record({}, frames(2, 0x401000), 0, 2);
    const std::uint16_t forty = 40;
    std::memcpy(longer.data() + offsetof(ecpi_stack_record, user_depth), &forty, sizeof forty);
    CHECK(decode_packed_stack(longer.data(), longer.size(), out) == StackRecordFault::kShortFrames);
    CHECK(out.empty());
}

TEST_CASE("a stack copy record shorter than its fixed part is rejected; its byte count is bounded by its size") {
    std::vector<RawStackSample> out;
    std::vector<std::uint8_t> rec(offsetof(ecpi_stack_copy_record, stack) + 64, 0xab);
    ecpi_stack_copy_record head{};
    head.kind = ECPI_RECORD_STACK_COPY;
    head.kernel_depth = 2;
    head.stack_bytes = 4096;  // forged: the record holds 64
    head.key.tgid = 7;
    head.time_ns = 123'456'789ull;
    std::memcpy(rec.data(), &head, offsetof(ecpi_stack_copy_record, kernel_ips));
    CHECK(decode_stack_copy(rec.data(), offsetof(ecpi_stack_copy_record, stack) - 1, out) ==
          StackRecordFault::kShortHeader);
    REQUIRE(decode_stack_copy(rec.data(), rec.size(), out) == StackRecordFault::kNone);
    REQUIRE(out.size() == 1);
    CHECK(out[0].tgid == 7);
    CHECK(out[0].time_ns == 123'456'789ull);
    CHECK(out[0].kernel_ips.size() == 2);
    REQUIRE(out[0].copy.has_value());
    CHECK(out[0].copy->bytes.size() == 64);
}

TEST_CASE("a register-and-stack record gives back the sample's registers and its frames") {
    const auto user = frames(30, 0x555555554000ull);
    const auto rec = register_stack_record(packed_record({}, user, 0, 30));
    CHECK(rec.size() == sizeof(ecpi_register_record) + offsetof(ecpi_stack_record, ips) + 8 * 30);
    std::vector<RawStackSample> out;
    std::vector<RawRegisterSample> regs;
    REQUIRE(decode_register_stack(rec.data(), rec.size(), out, regs) == StackRecordFault::kNone);
    REQUIRE(out.size() == 1);
    REQUIRE(regs.size() == 1);
    CHECK(out[0].tgid == 4242);
    CHECK(out[0].user_ips == user);
    CHECK(out[0].time_ns == 987'654'321'000ull);
    CHECK(regs[0].tgid == 4242);
    CHECK(regs[0].tid == 4250);
    CHECK(regs[0].event == 3);
    CHECK(regs[0].time_ns == 987'654'321'000ull);
    CHECK(regs[0].pc == 0x555555554321ull);
    CHECK(regs[0].regs[0] == 7);
    CHECK(regs[0].regs[15] == 0xf007);
}

TEST_CASE("a truncated or forged register-and-stack record is rejected whole: neither registers nor stack") {
    const auto rec = register_stack_record(packed_record(frames(2, 0xffffffff81000000ull), frames(10, 0x401000), 2, 10));
    std::vector<RawStackSample> out;
    std::vector<RawRegisterSample> regs;
    const std::size_t head = sizeof(ecpi_register_record);
    for (std::size_t size = 0; size < rec.size(); ++size) {
        std::vector<std::uint8_t> cut(rec.begin(), rec.begin() + static_cast<std::ptrdiff_t>(size));
        const StackRecordFault want = size < head + offsetof(ecpi_stack_record, ips) ? StackRecordFault::kShortHeader
                                                                                     : StackRecordFault::kShortFrames;
        CAPTURE(size);
        CHECK(decode_register_stack(cut.data(), cut.size(), out, regs) == want);
    }
    // The stack part must be a packed stack record (not a full one, not another register record).
    auto forged = rec;
    const std::uint32_t full = ECPI_RECORD_STACK_SAMPLE;
    std::memcpy(forged.data() + head, &full, sizeof full);
    CHECK(decode_register_stack(forged.data(), forged.size(), out, regs) == StackRecordFault::kInnerKind);
    CHECK(out.empty());
    CHECK(regs.empty());
}
