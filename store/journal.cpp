// An epoch's journal (FORMAT.md §13): append-only records of whole flushes,
// and their fold into one compacted file.
#include "journal.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "canonical.h"

namespace ecpi::store::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::uint8_t kMagic[4] = {'E', 'C', 'P', 'J'};
constexpr std::uint8_t kMajor = 1;
constexpr std::uint8_t kMinor = 0;
constexpr std::size_t kHeaderBytes = 4 + 2 + 4;  // magic, version, body length
constexpr std::size_t kChecksumBytes = 4;
// No flush holds a gigabyte; a larger length is damage, read as a torn tail.
constexpr std::uint32_t kMaxBodyBytes = 1u << 30;
constexpr std::string_view kSegmentPrefix = "journal.";
constexpr std::string_view kCompactPrefix = "compact.";
constexpr std::string_view kSuffix = ".ecj";

std::uint32_t crc32_of(std::span<const std::uint8_t> bytes) {
    uLong crc = ::crc32(0L, Z_NULL, 0);
    while (!bytes.empty()) {
        const auto n = static_cast<uInt>(std::min<std::size_t>(bytes.size(), 1u << 30));
        crc = ::crc32(crc, bytes.data(), n);
        bytes = bytes.subspan(n);
    }
    return static_cast<std::uint32_t>(crc);
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
std::uint32_t get_u32(std::span<const std::uint8_t> b) {
    return static_cast<std::uint32_t>(b[0]) | static_cast<std::uint32_t>(b[1]) << 8 |
           static_cast<std::uint32_t>(b[2]) << 16 | static_cast<std::uint32_t>(b[3]) << 24;
}
void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<std::uint8_t>(v | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<std::uint8_t>(v));
}
void put_blob(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> blob) {
    put_varint(out, blob.size());
    out.insert(out.end(), blob.begin(), blob.end());
}

// A bounded reader over one record's body.
struct BodyReader {
    std::span<const std::uint8_t> bytes;
    std::size_t pos = 0;
    bool varint(std::uint64_t& v) {
        v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos >= bytes.size()) return false;
            const std::uint8_t b = bytes[pos++];
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return true;
        }
        return false;
    }
    bool blob(std::span<const std::uint8_t>& out) {
        std::uint64_t n = 0;
        if (!varint(n) || n > bytes.size() - pos) return false;
        out = bytes.subspan(pos, static_cast<std::size_t>(n));
        pos += static_cast<std::size_t>(n);
        return true;
    }
};

std::optional<std::uint64_t> parse_number(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix) || !name.ends_with(kSuffix)) return std::nullopt;
    const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - kSuffix.size());
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n == 0 || digits[0] == '0') return std::nullopt;
    return n;
}

// Where one record starting at `pos` ends, or 0 when it is torn (cut short,
// a bad frame, or a checksum mismatch).
std::size_t record_end(std::span<const std::uint8_t> bytes, std::size_t pos) {
    if (bytes.size() - pos < kHeaderBytes + kChecksumBytes) return 0;
    const auto head = bytes.subspan(pos);
    if (!std::equal(kMagic, kMagic + 4, head.begin()) || head[4] != kMajor) return 0;
    const std::uint32_t body = get_u32(head.subspan(6));
    if (body > kMaxBodyBytes || head.size() < kHeaderBytes + body + kChecksumBytes) return 0;
    const std::size_t covered = kHeaderBytes + body;
    if (crc32_of(head.first(covered)) != get_u32(head.subspan(covered))) return 0;
    return pos + covered + kChecksumBytes;
}

Result<EpochBatch> decode_body(std::span<const std::uint8_t> body, MetaParser parse_meta, bool meta_only) {
    BodyReader r{body};
    EpochBatch batch;
    std::uint64_t n = 0;
    std::span<const std::uint8_t> blob;
    if (!r.varint(n)) return Error("record ends inside its profile count");
    for (std::uint64_t i = 0; i < n; ++i) {
        if (!r.blob(blob)) return Error("record ends inside profile " + std::to_string(i));
        if (meta_only) continue;
        ECPI_ASSIGN_OR_RETURN(ImageProfile p, decode_profile(blob));
        batch.profiles.push_back(std::move(p));
    }
    if (!r.varint(n)) return Error("record ends inside its stack count");
    for (std::uint64_t i = 0; i < n; ++i) {
        if (!r.blob(blob)) return Error("record ends inside stacks " + std::to_string(i));
        if (meta_only) continue;
        ECPI_ASSIGN_OR_RETURN(StackProfile s, decode_stacks(blob));
        batch.stacks.push_back(std::move(s));
    }
    if (!r.blob(blob)) return Error("record ends inside its metadata");
    if (r.pos != body.size()) return Error("record has " + std::to_string(body.size() - r.pos) + " bytes after its metadata");
    if (!blob.empty()) {
        ECPI_ASSIGN_OR_RETURN(batch.meta, parse_meta(std::vector<std::uint8_t>(blob.begin(), blob.end())));
    }
    return batch;
}

}  // namespace

std::string journal_segment_name(std::uint64_t number) {
    return std::string(kSegmentPrefix) + std::to_string(number) + std::string(kSuffix);
}
std::string journal_compact_name(std::uint64_t number) {
    return std::string(kCompactPrefix) + std::to_string(number) + std::string(kSuffix);
}

JournalListing list_journal(const std::vector<std::string>& names) {
    std::vector<JournalFile> segments, compacts;
    for (const std::string& name : names) {
        if (auto n = parse_number(name, kSegmentPrefix)) segments.push_back({JournalFileKind::kSegment, *n, name});
        if (auto n = parse_number(name, kCompactPrefix)) compacts.push_back({JournalFileKind::kCompact, *n, name});
    }
    auto by_number = [](const JournalFile& a, const JournalFile& b) { return a.number < b.number; };
    std::sort(segments.begin(), segments.end(), by_number);
    std::sort(compacts.begin(), compacts.end(), by_number);
    JournalListing out;
    const std::uint64_t folded = compacts.empty() ? 0 : compacts.back().number;
    if (!compacts.empty()) {
        out.live.push_back(compacts.back());
        out.superseded.assign(compacts.begin(), compacts.end() - 1);
    }
    for (JournalFile& s : segments) (s.number <= folded ? out.superseded : out.live).push_back(std::move(s));
    out.newest_number = folded;
    if (!segments.empty()) out.newest_number = std::max(out.newest_number, segments.back().number);
    return out;
}

std::vector<std::uint8_t> encode_journal_record(const EpochBatch& batch, const std::string& meta_json) {
    std::vector<std::uint8_t> out(kMagic, kMagic + 4);
    out.push_back(kMajor);
    out.push_back(kMinor);
    put_u32(out, 0);  // body length, filled in below
    put_varint(out, batch.profiles.size());
    for (const ImageProfile& p : batch.profiles) put_blob(out, encode_profile(p));
    put_varint(out, batch.stacks.size());
    for (const StackProfile& s : batch.stacks) put_blob(out, encode_stacks(s));
    put_blob(out, {reinterpret_cast<const std::uint8_t*>(meta_json.data()), meta_json.size()});
    const auto body = static_cast<std::uint32_t>(out.size() - kHeaderBytes);
    for (int i = 0; i < 4; ++i) out[6 + i] = static_cast<std::uint8_t>(body >> (8 * i));
    put_u32(out, crc32_of(out));
    return out;
}

std::uint64_t journal_valid_bytes(std::span<const std::uint8_t> bytes) {
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        const std::size_t end = record_end(bytes, pos);
        if (end == 0) break;
        pos = end;
    }
    return pos;
}

JournalScan scan_journal(std::span<const std::uint8_t> bytes, MetaParser parse_meta, bool meta_only) {
    JournalScan out;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        const std::size_t end = record_end(bytes, pos);
        if (end == 0) break;
        const auto body = bytes.subspan(pos + kHeaderBytes, end - pos - kHeaderBytes - kChecksumBytes);
        auto batch = decode_body(body, parse_meta, meta_only);
        if (batch.ok()) {
            out.batches.push_back(std::move(*batch));
        } else {
            out.errors.push_back("record at byte " + std::to_string(pos) + ": " + batch.error().message());
        }
        pos = end;
    }
    out.valid_bytes = pos;
    out.torn_bytes = bytes.size() - pos;
    return out;
}

EpochBatch fold_batches(std::vector<EpochBatch> batches, std::vector<std::string>& errors) {
    EpochBatch out;
    std::map<std::pair<ImageId, std::string>, std::size_t> profile_at;
    std::map<std::string, std::size_t> stacks_at;
    for (EpochBatch& b : batches) {
        for (ImageProfile& p : b.profiles) {
            auto [it, inserted] = profile_at.emplace(std::pair{p.image, p.event}, out.profiles.size());
            if (inserted) {
                out.profiles.push_back(std::move(p));
                continue;
            }
            ImageProfile& into = out.profiles[it->second];
            if (into.period != p.period) {
                errors.push_back("samples of " + p.image.path + " (" + p.event + ") with period " +
                                 std::to_string(p.period) + " left out: the epoch's period is " + std::to_string(into.period));
                continue;
            }
            for (ProcessCounts& pc : p.processes) into.processes.push_back(std::move(pc));
        }
        for (StackProfile& s : b.stacks) {
            auto [it, inserted] = stacks_at.emplace(s.event, out.stacks.size());
            if (inserted) {
                out.stacks.push_back(std::move(s));
                continue;
            }
            StackProfile& into = out.stacks[it->second];
            if (into.period != s.period) {
                errors.push_back("call stacks of " + s.event + " with period " + std::to_string(s.period) +
                                 " left out: the epoch's period is " + std::to_string(into.period));
                continue;
            }
            const auto base = static_cast<std::uint32_t>(into.images.size());
            into.images.insert(into.images.end(), s.images.begin(), s.images.end());
            for (StackSample& sample : s.stacks) {
                for (StackFrame& f : sample.frames) f.image += base;
                into.stacks.push_back(std::move(sample));
            }
        }
        merge_into(out.meta, b.meta);
    }
    // One canonicalization at the end: sums duplicates once, not per batch.
    for (ImageProfile& p : out.profiles) p = canonical(std::move(p));
    for (StackProfile& s : out.stacks) s = canonical(std::move(s));
    return out;
}

Result<void> append_record(const fs::path& path, std::uint64_t valid_bytes, std::span<const std::uint8_t> record) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error::from_errno(errno, "opening " + path.string());
    auto fail = [&](const char* what) {
        const int err = errno;
        // Cut back to the last whole record: no partial record stays behind.
        if (::ftruncate(fd, static_cast<off_t>(valid_bytes)) == 0) (void)::fdatasync(fd);
        ::close(fd);
        return Error::from_errno(err, std::string(what) + " " + path.string());
    };
    // A torn tail (a crash during an earlier append) is cut off first, so
    // that this record follows the last whole one.
    if (::ftruncate(fd, static_cast<off_t>(valid_bytes)) != 0) return fail("cutting the torn tail of");
    std::size_t done = 0;
    while (done < record.size()) {
        const ssize_t n = ::pwrite(fd, record.data() + done, record.size() - done, static_cast<off_t>(valid_bytes + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail("appending to");
        done += static_cast<std::size_t>(n);
    }
    if (::fdatasync(fd) != 0) return fail("syncing");
    if (::close(fd) != 0) return Error::from_errno(errno, "closing " + path.string());
    return ok();
}

}  // namespace ecpi::store::detail
