// Bounded xz decompression, for .gnu_debugdata (MiniDebugInfo: an
// xz-compressed ELF file whose .symtab names the functions of a stripped
// binary). The input is untrusted: output and decoder memory are capped, so
// a decompression bomb is refused by name rather than filling memory.
#pragma once

#include <cstddef>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::analyze {

// MiniDebugInfo of real images expands to a few MiB (Fedora's libxul: ~12 MiB).
inline constexpr std::size_t kMaxDebugDataBytes = std::size_t{64} << 20;

// The decompressed bytes of one or more concatenated .xz streams, or an error
// naming why not: not xz, damaged, or expanding past `max_output` bytes.
[[nodiscard]] Result<std::vector<unsigned char>> xz_decompress(const void* data, std::size_t size,
                                                              std::size_t max_output = kMaxDebugDataBytes);

}  // namespace ecpi::analyze
