// DWARF unwinding of call paths for `ecpi probe --unwind dwarf`: where code
// has no frame pointers (most distribution libraries), the BPF program
// copies the top of the user stack at function entry and this unwinder
// walks it with the images' call frame information (.eh_frame /
// .debug_frame, elfutils libdw), caching the CFI per image and the unwind
// rule per (image, pc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ecpi::loader {

class ProcessTable;

struct UnwoundPath {
    std::vector<std::uint64_t> ips;  // return addresses, innermost (the probed function's call site) first
    bool complete = false;           // reached the thread's outermost frame
};

class DwarfUnwinder {
public:
    explicit DwarfUnwinder(ProcessTable& processes);
    ~DwarfUnwinder();
    DwarfUnwinder(const DwarfUnwinder&) = delete;
    DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

    // Unwinds from function entry: `ip` is the probed function's first
    // instruction, `sp` points at the return address, `stack` holds `size`
    // bytes copied from `sp` upwards. Frames whose CFI is missing fall back
    // to the frame pointer.
    UnwoundPath unwind(std::uint32_t pid, std::uint64_t ip, std::uint64_t sp, std::uint64_t bp,
                       const std::uint8_t* stack, std::size_t size);

    std::uint64_t cached_rules() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace ecpi::loader
