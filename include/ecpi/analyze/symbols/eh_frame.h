// Function extents of stripped code from its call-frame information: every
// FDE of .eh_frame covers one function (or one cold part of one), so where no
// symbol names an address the FDE that covers it still gives the function's
// start and end (issue 30). The section is untrusted input: every entry is
// bounded by the section, a count cap and the image's executable ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ecpi::analyze {

struct CodeRange {
    std::uint64_t start = 0;
    std::uint64_t end = 0;  // first address past the range
    auto operator<=>(const CodeRange&) const = default;
};

struct FdeScan {
    std::vector<CodeRange> functions;  // sorted by start, disjoint, each inside one `code` range
    std::size_t refused = 0;           // FDEs dropped: undecodable, empty, outside code, overlapping
    bool stopped = false;              // a malformed entry or kMaxFdes ended the walk early
};

// Far above the FDEs of any real image (libxul: ~250,000).
inline constexpr std::size_t kMaxFdes = std::size_t{1} << 21;

// The FDEs of `.eh_frame` bytes loaded at `section_addr` in an ELF image whose
// identification bytes are `e_ident` (class and byte order), kept where they
// fall inside one of `code` (the executable sections). Overlapping FDEs keep
// the first by start (a forged table cannot make two rows claim one address).
FdeScan scan_eh_frame(const unsigned char* e_ident, const void* bytes, std::size_t size,
                      std::uint64_t section_addr, const std::vector<CodeRange>& code);

}  // namespace ecpi::analyze
