// Binary encoding of profile (.prof), stack (.stk) and register (.reg) files.
// store/FORMAT.md is the authority on the layout; change it in the same
// commit as anything here (STYLE.md rule 9).
//
// Decoding treats its input as hostile: every varint is bounds-checked, every
// element count is capped by the bytes left (so a forged count cannot make us
// allocate more than a small multiple of the file size), and every invariant
// of the canonical form is validated even when the checksum matches, because
// a checksum only detects accidents, not a forged file.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <string_view>

#include "canonical.h"
#include "ecpi/store/profile.h"

namespace ecpi::store {
namespace {

using Magic = std::array<std::uint8_t, 4>;
constexpr Magic kProfileMagic{'E', 'C', 'P', 'P'};
constexpr Magic kStacksMagic{'E', 'C', 'P', 'S'};
constexpr Magic kRegistersMagic{'E', 'C', 'P', 'R'};

// FORMAT.md "Versioning": readers accept any minor of their major (a minor
// version only adds data a reader may skip, in the header extension) and
// reject a newer major by name.
constexpr std::uint8_t kFormatMajor = 1;
constexpr std::uint8_t kFormatMinor = 0;
// Register files 1.1 carry each snapshot's status flags in the header
// extension (FORMAT.md 5a), which 1.0 readers skip.
constexpr std::uint8_t kRegistersMinor = 1;

constexpr std::size_t kPreambleSize = 6;  // magic, major, minor
constexpr std::size_t kChecksumSize = 4;  // CRC-32, little-endian
constexpr std::size_t kMaxVarintBytes = 10;

// Minimum encoded sizes, used to cap element counts by the bytes remaining.
constexpr std::size_t kMinProcessBytes = 2;  // pid, pair count
constexpr std::size_t kMinPairBytes = 2;     // offset delta, count
constexpr std::size_t kMinImageBytes = 2;    // path length, build id length
constexpr std::size_t kMinStackBytes = 3;    // pid, depth, count
constexpr std::size_t kMinFrameBytes = 2;    // image index, offset
// A register snapshot: time delta, pid delta, image index, offset delta and
// 16 register deltas, one byte each at least; a thread section adds its tid
// and snapshot count and holds at least one snapshot.
constexpr std::size_t kMinRegisterSampleBytes = 4 + kGpRegisters;
constexpr std::size_t kMinThreadBytes = 2 + kMinRegisterSampleBytes;

// CRC-32 (ISO-HDLC, as in gzip and PNG). zlib takes a 32-bit length, so feed
// it in chunks.
std::uint32_t checksum(std::span<const std::uint8_t> bytes) {
    uLong crc = ::crc32(0L, Z_NULL, 0);
    while (!bytes.empty()) {
        const std::size_t chunk = std::min<std::size_t>(bytes.size(), std::size_t{1} << 30);
        crc = ::crc32(crc, bytes.data(), static_cast<uInt>(chunk));
        bytes = bytes.subspan(chunk);
    }
    return static_cast<std::uint32_t>(crc);
}

std::string hex32(std::uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08" PRIx32, v);
    return buf;
}

std::string hex64(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

class Writer {
public:
    Writer() = default;  // bytes without a preamble (a header extension's)
    explicit Writer(const Magic& magic, std::uint8_t minor = kFormatMinor) {
        out_.insert(out_.end(), magic.begin(), magic.end());
        out_.push_back(kFormatMajor);
        out_.push_back(minor);
    }

    // Unsigned LEB128, minimal length.
    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(static_cast<std::uint8_t>(v | 0x80));
            v >>= 7;
        }
        out_.push_back(static_cast<std::uint8_t>(v));
    }

    // Zigzag: a signed delta as an unsigned varint (0, -1, 1, -2 -> 0, 1, 2, 3).
    void zigzag(std::int64_t v) {
        varint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
    }

    void string(std::string_view s) {
        varint(s.size());
        out_.insert(out_.end(), s.begin(), s.end());
    }

    void bytes_with_length(std::span<const std::uint8_t> b) {
        varint(b.size());
        out_.insert(out_.end(), b.begin(), b.end());
    }

    std::vector<std::uint8_t> raw() && { return std::move(out_); }

    std::vector<std::uint8_t> finish() && {
        const std::uint32_t crc = checksum(out_);
        for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
        return std::move(out_);
    }

private:
    std::vector<std::uint8_t> out_;
};

struct Failure {
    // kRanOut: the structure needs more bytes than there are (a truncated
    // file, or a corrupted length); kInvalid: an invariant does not hold.
    enum class Kind { kRanOut, kInvalid };
    Kind kind = Kind::kInvalid;
    std::size_t at = 0;
    std::string what;
};

// Reads from bytes[pos, size). Every read returns false on failure and
// records why; callers just propagate the false.
class Reader {
public:
    Reader(std::span<const std::uint8_t> bytes, std::size_t pos) : bytes_(bytes), pos_(pos) {}

    std::size_t pos() const { return pos_; }
    std::size_t remaining() const { return bytes_.size() - pos_; }
    const Failure& failure() const { return failure_; }

    bool varint(std::uint64_t& out, std::string_view what) {
        const std::size_t start = pos_;
        std::uint64_t value = 0;
        for (std::size_t i = 0; i < kMaxVarintBytes; ++i) {
            if (pos_ >= bytes_.size()) return ran_out(what);
            const std::uint8_t b = bytes_[pos_++];
            // The 10th byte holds bit 63 only; anything more overflows.
            if (i == kMaxVarintBytes - 1 && b > 1) return invalid(start, std::string(what) + " overflows 64 bits");
            value |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
            if ((b & 0x80) == 0) {
                out = value;
                return true;
            }
        }
        return invalid(start, std::string(what) + " overflows 64 bits");  // unreachable
    }

    bool zigzag(std::int64_t& out, std::string_view what) {
        std::uint64_t v = 0;
        if (!varint(v, what)) return false;
        out = static_cast<std::int64_t>((v >> 1) ^ (~(v & 1) + 1));
        return true;
    }

    bool varint32(std::uint32_t& out, std::string_view what) {
        const std::size_t start = pos_;
        std::uint64_t v = 0;
        if (!varint(v, what)) return false;
        if (v > std::numeric_limits<std::uint32_t>::max()) {
            return invalid(start, std::string(what) + " " + std::to_string(v) + " does not fit in 32 bits");
        }
        out = static_cast<std::uint32_t>(v);
        return true;
    }

    // An element count; each element takes at least min_bytes, so a count
    // the remaining bytes cannot hold is rejected before anything is sized
    // by it.
    bool count(std::uint64_t& out, std::size_t min_bytes, std::string_view what) {
        if (!varint(out, what)) return false;
        if (out > remaining() / min_bytes) {
            return ran_out(std::string(what) + " " + std::to_string(out) + ", which needs at least " +
                           std::to_string(out > std::numeric_limits<std::uint64_t>::max() / min_bytes
                                              ? std::numeric_limits<std::uint64_t>::max()
                                              : out * min_bytes) +
                           " more bytes");
        }
        return true;
    }

    bool string(std::string& out, std::string_view what) {
        std::uint64_t len = 0;
        if (!varint(len, std::string(what) + " length")) return false;
        if (len > remaining()) return ran_out(what);
        out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(len));
        pos_ += static_cast<std::size_t>(len);
        return true;
    }

    // Header extension: bytes a newer minor version may define; skipped.
    bool skip_extension() {
        std::span<const std::uint8_t> ignored;
        return extension(ignored);
    }

    // The header extension's bytes, for the kinds whose minor defines them.
    bool extension(std::span<const std::uint8_t>& out) {
        std::uint64_t len = 0;
        if (!varint(len, "header extension length")) return false;
        if (len > remaining()) return ran_out("header extension");
        out = bytes_.subspan(pos_, static_cast<std::size_t>(len));
        pos_ += static_cast<std::size_t>(len);
        return true;
    }

    bool invalid(std::size_t at, std::string what) {
        failure_ = {Failure::Kind::kInvalid, at, std::move(what)};
        return false;
    }

private:
    bool ran_out(std::string_view what) {
        failure_ = {Failure::Kind::kRanOut, bytes_.size(), "while reading " + std::string(what)};
        return false;
    }

    std::span<const std::uint8_t> bytes_;
    std::size_t pos_;
    Failure failure_;
};

bool parse_profile_body(Reader& r, ImageProfile& p) {
    if (!r.string(p.image.path, "image path") || !r.string(p.image.build_id, "build id") ||
        !r.string(p.event, "event name") || !r.varint(p.period, "sampling period") || !r.skip_extension()) {
        return false;
    }
    if (p.period > kMaxPeriod) return r.invalid(0, "sampling period " + std::to_string(p.period) + " is out of range");
    std::uint64_t num_processes = 0;
    if (!r.count(num_processes, kMinProcessBytes, "process count")) return false;
    p.processes.reserve(static_cast<std::size_t>(num_processes));
    for (std::uint64_t i = 0; i < num_processes; ++i) {
        ProcessCounts pc;
        const std::size_t pid_at = r.pos();
        if (!r.varint32(pc.pid, "pid")) return false;
        if (i > 0 && pc.pid <= p.processes.back().pid) {
            return r.invalid(pid_at, "pid " + std::to_string(pc.pid) + " follows pid " +
                                         std::to_string(p.processes.back().pid) + " (pids must increase)");
        }
        std::uint64_t num_pairs = 0;
        const std::size_t pairs_at = r.pos();
        if (!r.count(num_pairs, kMinPairBytes, "pair count")) return false;
        if (num_pairs == 0) return r.invalid(pairs_at, "process " + std::to_string(pc.pid) + " has no samples");
        pc.counts.reserve(static_cast<std::size_t>(num_pairs));
        std::uint64_t offset = 0;
        for (std::uint64_t j = 0; j < num_pairs; ++j) {
            const std::size_t pair_at = r.pos();
            std::uint64_t delta = 0;
            std::uint64_t count = 0;
            if (!r.varint(delta, "offset") || !r.varint(count, "count")) return false;
            if (j == 0) {
                offset = delta;
            } else if (delta == 0) {
                return r.invalid(pair_at, "offset " + hex64(offset) + " repeated in process " + std::to_string(pc.pid) +
                                              " (offsets must increase)");
            } else if (delta > std::numeric_limits<std::uint64_t>::max() - offset) {
                return r.invalid(pair_at, "offset overflows 64 bits in process " + std::to_string(pc.pid));
            } else {
                offset += delta;
            }
            if (count == 0) {
                return r.invalid(pair_at, "zero count at offset " + hex64(offset) + " in process " +
                                              std::to_string(pc.pid));
            }
            if (count > kMaxSampleCount) {
                return r.invalid(pair_at, "count " + std::to_string(count) + " at offset " + hex64(offset) +
                                              " is more than any recording holds (2^50)");
            }
            pc.counts.push_back({offset, count});
        }
        p.processes.push_back(std::move(pc));
    }
    return true;
}

// The image table of .stk and .reg files: count, then (path, build id)
// pairs, no duplicates.
bool parse_image_table(Reader& r, std::vector<ImageId>& images) {
    std::uint64_t num_images = 0;
    if (!r.count(num_images, kMinImageBytes, "image count")) return false;
    images.reserve(static_cast<std::size_t>(num_images));
    std::set<ImageId> seen;
    for (std::uint64_t i = 0; i < num_images; ++i) {
        const std::size_t image_at = r.pos();
        ImageId id;
        if (!r.string(id.path, "image path") || !r.string(id.build_id, "build id")) return false;
        if (!seen.insert(id).second) {
            return r.invalid(image_at, "image " + id.path + " appears twice in the image table");
        }
        images.push_back(std::move(id));
    }
    return true;
}

bool parse_stacks_body(Reader& r, StackProfile& s) {
    if (!r.string(s.event, "event name") || !r.varint(s.period, "sampling period") || !r.skip_extension()) {
        return false;
    }
    if (!parse_image_table(r, s.images)) return false;
    std::uint64_t num_stacks = 0;
    if (!r.count(num_stacks, kMinStackBytes, "stack count")) return false;
    s.stacks.reserve(static_cast<std::size_t>(num_stacks));
    for (std::uint64_t i = 0; i < num_stacks; ++i) {
        const std::size_t stack_at = r.pos();
        StackSample sample;
        std::uint64_t depth = 0;
        if (!r.varint32(sample.pid, "pid") || !r.count(depth, kMinFrameBytes, "stack depth")) return false;
        sample.frames.reserve(static_cast<std::size_t>(depth));
        for (std::uint64_t d = 0; d < depth; ++d) {
            const std::size_t frame_at = r.pos();
            StackFrame f;
            if (!r.varint32(f.image, "frame image index") || !r.varint(f.offset, "frame offset")) return false;
            if (f.image >= s.images.size()) {
                return r.invalid(frame_at, "frame image index " + std::to_string(f.image) + " is outside the " +
                                               std::to_string(s.images.size()) + "-entry image table");
            }
            sample.frames.push_back(f);
        }
        const std::size_t count_at = r.pos();
        if (!r.varint(sample.count, "stack count")) return false;
        if (sample.count == 0) {
            return r.invalid(count_at, "zero count for a stack of pid " + std::to_string(sample.pid));
        }
        if (sample.count > kMaxSampleCount) {
            return r.invalid(count_at, "stack count " + std::to_string(sample.count) +
                                           " is more than any recording holds (2^50)");
        }
        if (i > 0) {
            const StackSample& prev = s.stacks.back();
            const bool increasing = prev.pid != sample.pid ? prev.pid < sample.pid : prev.frames < sample.frames;
            if (!increasing) {
                return r.invalid(stack_at, "stack of pid " + std::to_string(sample.pid) +
                                               " out of order or repeated (stacks must increase by pid, frames)");
            }
        }
        s.stacks.push_back(std::move(sample));
    }
    return true;
}

// One thread section of a .reg file: snapshots delta-encoded against the
// thread's previous one (the first against all zeros), so that a register
// that did not move costs one byte. Differences wrap modulo 2^64 and are
// zigzag-encoded: lossless for every value.
bool parse_register_thread(Reader& r, std::size_t num_images, RegisterProfile& out) {
    std::uint32_t tid = 0;
    std::uint64_t num_samples = 0;
    const std::size_t tid_at = r.pos();
    if (!r.varint32(tid, "tid")) return false;
    if (!out.samples.empty() && tid <= out.samples.back().tid) {
        return r.invalid(tid_at, "thread " + std::to_string(tid) + " follows thread " +
                                     std::to_string(out.samples.back().tid) + " (tids must increase)");
    }
    const std::size_t count_at = r.pos();
    if (!r.count(num_samples, kMinRegisterSampleBytes, "snapshot count")) return false;
    if (num_samples == 0) return r.invalid(count_at, "thread " + std::to_string(tid) + " has no snapshots");
    RegisterSample prev;
    prev.tid = tid;
    for (std::uint64_t i = 0; i < num_samples; ++i) {
        const std::size_t sample_at = r.pos();
        RegisterSample s = prev;
        std::uint64_t time_delta = 0;
        std::int64_t pid_delta = 0;
        std::int64_t offset_delta = 0;
        if (!r.varint(time_delta, "time delta") || !r.zigzag(pid_delta, "pid delta") ||
            !r.varint32(s.image, "image index") || !r.zigzag(offset_delta, "offset delta")) {
            return false;
        }
        if (time_delta > std::numeric_limits<std::uint64_t>::max() - prev.time_ns) {
            return r.invalid(sample_at, "time overflows 64 bits in thread " + std::to_string(tid));
        }
        s.time_ns = prev.time_ns + time_delta;
        const std::int64_t pid = static_cast<std::int64_t>(prev.pid) + pid_delta;  // |pid_delta| < 2^63
        if ((pid_delta > 0 && pid < static_cast<std::int64_t>(prev.pid)) || pid < 0 ||
            pid > std::numeric_limits<std::uint32_t>::max()) {
            return r.invalid(sample_at, "pid does not fit in 32 bits in thread " + std::to_string(tid));
        }
        s.pid = static_cast<std::uint32_t>(pid);
        if (s.image >= num_images) {
            return r.invalid(sample_at, "image index " + std::to_string(s.image) + " is outside the " +
                                            std::to_string(num_images) + "-entry image table");
        }
        s.offset = prev.offset + static_cast<std::uint64_t>(offset_delta);
        for (std::size_t reg = 0; reg < kGpRegisters; ++reg) {
            std::int64_t delta = 0;
            if (!r.zigzag(delta, "register delta")) return false;
            s.regs[reg] = prev.regs[reg] + static_cast<std::uint64_t>(delta);
        }
        if (i > 0 && !detail::register_sample_less(prev, s)) {
            return r.invalid(sample_at, "snapshot of thread " + std::to_string(tid) + " at time " +
                                            std::to_string(s.time_ns) +
                                            " out of order or repeated (snapshots must increase by time)");
        }
        out.samples.push_back(s);
        prev = s;
    }
    return true;
}

// Register files 1.1: the header extension starts with the snapshots'
// status flags, a count N and N varints in the file's snapshot order (N is
// 0 or the file's snapshot count; bytes after them belong to later minors).
bool parse_register_flags(Reader& r, std::span<const std::uint8_t> extension, std::size_t extension_at,
                          std::vector<std::uint16_t>& flags) {
    if (extension.empty()) return true;
    Reader x(extension, 0);
    std::uint64_t n = 0;
    if (!x.varint(n, "flags count")) return r.invalid(extension_at, "header extension: " + x.failure().what);
    if (n > extension.size()) return r.invalid(extension_at, "header extension: flags count past its bytes");
    flags.reserve(static_cast<std::size_t>(n));
    for (std::uint64_t i = 0; i < n; ++i) {
        std::uint64_t f = 0;
        if (!x.varint(f, "flags")) return r.invalid(extension_at, "header extension: " + x.failure().what);
        if (f > 0xffff) return r.invalid(extension_at, "header extension: flags " + std::to_string(f) + " past 16 bits");
        flags.push_back(static_cast<std::uint16_t>(f));
    }
    return true;
}

bool parse_registers_body(Reader& r, RegisterProfile& p) {
    if (!r.string(p.event, "event name") || !r.varint(p.period, "sampling period")) return false;
    const std::size_t every_field_at = r.pos();
    std::span<const std::uint8_t> extension;
    if (!r.varint32(p.every, "snapshot interval")) return false;
    const std::size_t extension_at = r.pos();
    if (!r.extension(extension)) return false;
    if (p.every == 0) return r.invalid(every_field_at, "snapshot interval 0 (one sample in N, N >= 1)");
    std::vector<std::uint16_t> flags;
    if (!parse_register_flags(r, extension, extension_at, flags)) return false;
    if (!parse_image_table(r, p.images)) return false;
    std::uint64_t num_threads = 0;
    if (!r.count(num_threads, kMinThreadBytes, "thread count")) return false;
    for (std::uint64_t t = 0; t < num_threads; ++t) {
        if (!parse_register_thread(r, p.images.size(), p)) return false;
    }
    if (flags.empty()) return true;
    if (flags.size() != p.samples.size()) {
        return r.invalid(extension_at, "header extension: flags for " + std::to_string(flags.size()) +
                                           " snapshots, the file holds " + std::to_string(p.samples.size()));
    }
    for (std::size_t i = 0; i < flags.size(); ++i) p.samples[i].flags = flags[i];
    return true;
}

template <typename T>
using BodyParser = bool (*)(Reader&, T&);

struct FileKind {
    const Magic& magic;
    std::string_view name;
};
constexpr FileKind kProfileFile{kProfileMagic, "profile file"};
constexpr FileKind kStacksFile{kStacksMagic, "stack file"};
constexpr FileKind kRegistersFile{kRegistersMagic, "register file"};
// Every kind, to name a mix-up precisely.
constexpr std::array<const FileKind*, 3> kFileKinds{&kProfileFile, &kStacksFile, &kRegistersFile};

// The shared frame of both file kinds: preamble, body, checksum.
template <typename T>
Result<T> decode_file(std::span<const std::uint8_t> bytes, const FileKind& file, BodyParser<T> parse_body) {
    const std::string kind(file.name);
    const std::size_t n = bytes.size();
    if (n == 0) return Error("truncated at byte 0 (empty file)");
    const std::size_t magic_bytes = std::min(n, file.magic.size());
    if (std::memcmp(bytes.data(), file.magic.data(), magic_bytes) != 0) {
        for (const FileKind* other : kFileKinds) {
            if (n >= other->magic.size() && std::memcmp(bytes.data(), other->magic.data(), other->magic.size()) == 0) {
                return Error("bad magic: this is an ecpi " + std::string(other->name) + ", not a " + kind);
            }
        }
        std::string first;
        for (std::size_t i = 0; i < magic_bytes; ++i) {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%s%02x", i ? " " : "", bytes[i]);
            first += buf;
        }
        return Error("bad magic: not an ecpi " + kind + " (starts with " + first + ")");
    }
    if (n < file.magic.size()) return Error("truncated at byte " + std::to_string(n) + " (while reading magic)");
    if (n < kPreambleSize) return Error("truncated at byte " + std::to_string(n) + " (while reading format version)");
    const unsigned major = bytes[4];
    const unsigned minor = bytes[5];
    const std::string version = std::to_string(major) + "." + std::to_string(minor);
    if (major > kFormatMajor) {
        return Error("format version " + version + " is newer than this ecpi supports (" +
                     std::to_string(kFormatMajor) + ".x); upgrade ecpi");
    }
    if (major < kFormatMajor) return Error("unknown version " + version);

    if (n >= kPreambleSize + kChecksumSize) {
        const std::size_t body_end = n - kChecksumSize;
        std::uint32_t stored = 0;
        for (std::size_t i = 0; i < kChecksumSize; ++i) {
            stored |= static_cast<std::uint32_t>(bytes[body_end + i]) << (8 * i);
        }
        const std::uint32_t computed = checksum(bytes.first(body_end));
        if (stored == computed) {
            Reader r(bytes.first(body_end), kPreambleSize);
            T out;
            if (!parse_body(r, out)) {
                const Failure& f = r.failure();
                if (f.kind == Failure::Kind::kRanOut) {
                    return Error("invalid " + kind + ": the body ends at byte " + std::to_string(body_end) +
                                 " " + f.what);
                }
                return Error("invalid " + kind + " at byte " + std::to_string(f.at) + ": " + f.what);
            }
            if (r.remaining() != 0) {
                return Error("invalid " + kind + ": " + std::to_string(r.remaining()) +
                             " unexpected bytes at byte " + std::to_string(r.pos()));
            }
            return out;
        }
        // Mismatch. Tell a truncated file (the structure needs more bytes
        // than the file has) from a corrupted one by parsing it as if the
        // checksum were part of the body.
        Reader r(bytes, kPreambleSize);
        T scratch;
        if (!parse_body(r, scratch)) {
            if (r.failure().kind == Failure::Kind::kRanOut) {
                return Error("truncated at byte " + std::to_string(n) + " (" + r.failure().what + ")");
            }
        } else if (r.pos() + kChecksumSize > n) {
            return Error("truncated at byte " + std::to_string(n) + " (while reading checksum)");
        }
        return Error("checksum mismatch (stored " + hex32(stored) + ", computed " + hex32(computed) + ")");
    }
    // Too short to hold even the checksum; find where the body runs out.
    Reader r(bytes, kPreambleSize);
    T scratch;
    if (!parse_body(r, scratch) && r.failure().kind == Failure::Kind::kInvalid) {
        return Error("checksum mismatch (file too short to hold a checksum)");
    }
    const std::string what = r.failure().what.empty() ? "while reading checksum" : r.failure().what;
    return Error("truncated at byte " + std::to_string(n) + " (" + what + ")");
}

void write_image_table(Writer& w, const std::vector<ImageId>& images) {
    w.varint(images.size());
    for (const ImageId& id : images) {
        w.string(id.path);
        w.string(id.build_id);
    }
}

}  // namespace

std::vector<std::uint8_t> encode_profile(const ImageProfile& profile) {
    // Only canonical data is ever written, so every file we write decodes;
    // the copy is skipped when the caller's profile is already canonical.
    const ImageProfile* p = &profile;
    ImageProfile copy;
    if (!detail::is_canonical(profile)) {
        copy = detail::canonical(profile);
        p = &copy;
    }
    Writer w(kProfileMagic);
    w.string(p->image.path);
    w.string(p->image.build_id);
    w.string(p->event);
    w.varint(p->period);
    w.varint(0);  // header extension: none in 1.0
    w.varint(p->processes.size());
    for (const ProcessCounts& pc : p->processes) {
        w.varint(pc.pid);
        w.varint(pc.counts.size());
        std::uint64_t prev = 0;
        for (const OffsetCount& oc : pc.counts) {
            w.varint(oc.offset - prev);  // first pair: absolute (prev = 0)
            w.varint(oc.count);
            prev = oc.offset;
        }
    }
    return std::move(w).finish();
}

Result<ImageProfile> decode_profile(std::span<const std::uint8_t> bytes) {
    return decode_file<ImageProfile>(bytes, kProfileFile, &parse_profile_body);
}

std::vector<std::uint8_t> encode_stacks(const StackProfile& stacks) {
    const StackProfile* s = &stacks;
    StackProfile copy;
    if (!detail::is_canonical(stacks)) {
        copy = detail::canonical(stacks);
        s = &copy;
    }
    Writer w(kStacksMagic);
    w.string(s->event);
    w.varint(s->period);
    w.varint(0);  // header extension: none in 1.0
    write_image_table(w, s->images);
    w.varint(s->stacks.size());
    for (const StackSample& sample : s->stacks) {
        w.varint(sample.pid);
        w.varint(sample.frames.size());
        for (const StackFrame& f : sample.frames) {
            w.varint(f.image);
            w.varint(f.offset);
        }
        w.varint(sample.count);
    }
    return std::move(w).finish();
}

Result<StackProfile> decode_stacks(std::span<const std::uint8_t> bytes) {
    return decode_file<StackProfile>(bytes, kStacksFile, &parse_stacks_body);
}

// The header extension of a register file 1.1: every snapshot's flags in
// file order, or nothing where no snapshot recorded them.
std::vector<std::uint8_t> register_flags_extension(const RegisterProfile& p) {
    const bool any = std::any_of(p.samples.begin(), p.samples.end(), [](const RegisterSample& s) { return s.flags; });
    if (!any) return {};
    Writer x;
    x.varint(p.samples.size());
    for (const RegisterSample& s : p.samples) x.varint(s.flags);  // sorted by tid first: the file's order
    return std::move(x).raw();
}

std::vector<std::uint8_t> encode_registers(const RegisterProfile& registers) {
    const RegisterProfile* p = &registers;
    RegisterProfile copy;
    if (!detail::is_canonical(registers)) {
        copy = detail::canonical(registers);
        p = &copy;
    }
    Writer w(kRegistersMagic, kRegistersMinor);
    w.string(p->event);
    w.varint(p->period);
    w.varint(p->every);
    w.bytes_with_length(register_flags_extension(*p));
    write_image_table(w, p->images);
    std::size_t threads = 0;
    for (std::size_t i = 0; i < p->samples.size(); ++i) {
        if (i == 0 || p->samples[i].tid != p->samples[i - 1].tid) ++threads;
    }
    w.varint(threads);
    for (std::size_t begin = 0; begin < p->samples.size();) {
        const std::uint32_t tid = p->samples[begin].tid;
        std::size_t end = begin;
        while (end < p->samples.size() && p->samples[end].tid == tid) ++end;
        w.varint(tid);
        w.varint(end - begin);
        RegisterSample prev;  // the first snapshot is written against zeros
        for (std::size_t i = begin; i < end; ++i) {
            const RegisterSample& s = p->samples[i];
            w.varint(s.time_ns - prev.time_ns);
            w.zigzag(static_cast<std::int64_t>(s.pid) - static_cast<std::int64_t>(prev.pid));
            w.varint(s.image);
            w.zigzag(static_cast<std::int64_t>(s.offset - prev.offset));
            for (std::size_t reg = 0; reg < kGpRegisters; ++reg) {
                w.zigzag(static_cast<std::int64_t>(s.regs[reg] - prev.regs[reg]));
            }
            prev = s;
        }
        begin = end;
    }
    return std::move(w).finish();
}

Result<RegisterProfile> decode_registers(std::span<const std::uint8_t> bytes) {
    return decode_file<RegisterProfile>(bytes, kRegistersFile, &parse_registers_body);
}

}  // namespace ecpi::store
