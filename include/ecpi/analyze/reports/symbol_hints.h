// Which images lack names for the functions their samples fell in, said once
// per image with what to do (issue 30): a stripped image's samples land in
// rows named from .eh_frame ("gzip+0x4a3c0") or in one "[gzip]" row, and the
// reader should learn why and how to get names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/store/profile.h"

namespace ecpi::analyze {

class UnnamedSamples {
public:
    // `count` samples of `image` resolved to `sym` (nullptr: no symbol).
    void add(const store::ImageId& image, const Symbol* sym, std::uint64_t count);
    // One line per image with unnamed samples, most such samples first:
    // "gzip: 97.9% of its samples are in functions without a name (gzip+0xSTART
    // from .eh_frame); install its debug symbols, or set DEBUGINFOD_URLS".
    // Special images ("[unknown]", "[anon:...]") are left out.
    std::vector<std::string> hints() const;

private:
    struct Counts {
        std::uint64_t total = 0;
        std::uint64_t unnamed = 0;   // no symbol at all
        std::uint64_t frame = 0;     // in an FDE-named function
    };
    std::map<store::ImageId, Counts> images_;
};

}  // namespace ecpi::analyze
