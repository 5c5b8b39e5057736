// Bounded xz decompression (contract in include/ecpi/analyze/symbols/xz.h).
#include "ecpi/analyze/symbols/xz.h"

#include <lzma.h>

#include <string>

namespace ecpi::analyze {

namespace {

constexpr std::uint64_t kDecoderMemLimit = std::uint64_t{128} << 20;  // dictionaries of real .xz files: <= 64 MiB

std::string lzma_reason(lzma_ret ret) {
    switch (ret) {
        case LZMA_FORMAT_ERROR: return "not xz data";
        case LZMA_OPTIONS_ERROR: return "unsupported xz options";
        case LZMA_DATA_ERROR: return "damaged xz data";
        case LZMA_BUF_ERROR: return "truncated xz data";
        case LZMA_MEMLIMIT_ERROR: return "its xz decoder would need more than 128 MiB of memory";
        case LZMA_MEM_ERROR: return "out of memory";
        default: return "xz error " + std::to_string(static_cast<int>(ret));
    }
}

}  // namespace

Result<std::vector<unsigned char>> xz_decompress(const void* data, std::size_t size, std::size_t max_output) {
    lzma_stream strm = LZMA_STREAM_INIT;
    lzma_ret ret = lzma_stream_decoder(&strm, kDecoderMemLimit, LZMA_CONCATENATED);
    if (ret != LZMA_OK) return Error("xz decoder: " + lzma_reason(ret));
    std::vector<unsigned char> out;
    constexpr std::size_t kChunk = std::size_t{1} << 20;
    strm.next_in = static_cast<const std::uint8_t*>(data);
    strm.avail_in = size;
    lzma_action action = LZMA_RUN;
    while (true) {
        if (strm.avail_out == 0) {
            if (out.size() >= max_output) {
                lzma_end(&strm);
                return Error("expands past " + std::to_string(max_output >> 20) +
                             " MiB (a decompression bomb?); refused");
            }
            std::size_t used = out.size();
            out.resize(std::min(used + kChunk, max_output));
            strm.next_out = out.data() + used;
            strm.avail_out = out.size() - used;
        }
        if (strm.avail_in == 0) action = LZMA_FINISH;
        ret = lzma_code(&strm, action);
        if (ret == LZMA_STREAM_END) break;
        if (ret != LZMA_OK) {
            lzma_end(&strm);
            return Error(lzma_reason(ret));
        }
    }
    out.resize(out.size() - strm.avail_out);
    lzma_end(&strm);
    return out;
}

}  // namespace ecpi::analyze
