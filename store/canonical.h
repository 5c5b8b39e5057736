// Internal to store/: the canonical form of profiles, shared by the encoder
// (which only ever writes canonical files, so everything it writes decodes)
// and by merge_into (which always leaves a canonical result).
//
// Canonical ImageProfile: processes sorted by pid, pids unique, no empty
// process section; in each section offsets strictly increasing, counts > 0.
// Canonical StackProfile: images unique, every frame's image index valid,
// stacks sorted by (pid, frames) with no duplicate key, counts > 0.
// Canonical RegisterProfile: images unique, every image index valid, every
// >= 1, snapshots sorted by register_sample_less with no duplicate.
#pragma once

#include <cstdint>
#include <limits>

#include "ecpi/store/profile.h"

namespace ecpi::store::detail {

// Counts saturate instead of wrapping: a count stuck at 2^64-1 is visibly
// wrong, a wrapped one silently is.
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
    return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max()
                                                             : a + b;
}

// The order of RegisterProfile::samples: (tid, time_ns, pid, image, offset,
// regs), so that each thread's snapshots are consecutive and in time order.
inline bool register_sample_less(const RegisterSample& a, const RegisterSample& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    if (a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
    if (a.pid != b.pid) return a.pid < b.pid;
    if (a.image != b.image) return a.image < b.image;
    if (a.offset != b.offset) return a.offset < b.offset;
    if (a.regs != b.regs) return a.regs < b.regs;
    return a.flags < b.flags;
}

bool is_canonical(const ImageProfile& profile);
bool is_canonical(const StackProfile& stacks);
bool is_canonical(const RegisterProfile& registers);

// Sorts, sums duplicates, drops zero counts and empty sections. Frames that
// point past the image table are attributed to kUnknownImage rather than
// dropped, so no sample is lost to a caller's indexing bug.
ImageProfile canonical(ImageProfile profile);
StackProfile canonical(StackProfile stacks);
// Also turns every = 0 into 1 (0 means "off", and nothing is kept then).
RegisterProfile canonical(RegisterProfile registers);

}  // namespace ecpi::store::detail
