// Push cursor and backlog (store/FORMAT.md §12). Contracts: include/ecpi/store/push_state.h.
#include "ecpi/store/push_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "file_io.h"

namespace ecpi::store {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kPushDir = "push";
constexpr const char* kLockFile = "lock";
constexpr const char* kStateFile = "state.json";
constexpr const char* kSnapshotSuffix = ".cursor";
constexpr const char* kBatchSuffix = ".batch";
constexpr std::uint8_t kMajor = 1;
constexpr std::uint8_t kMinor = 0;
constexpr std::uint8_t kSnapshotMagic[4] = {'E', 'C', 'P', 'U'};
constexpr std::uint8_t kBatchMagic[4] = {'E', 'C', 'P', 'Q'};
constexpr std::size_t kMaxHeaderBytes = 16u << 20;
constexpr std::size_t kMaxSections = 64;

std::uint32_t crc32_of(std::span<const std::uint8_t> bytes) {
    uLong crc = ::crc32(0L, Z_NULL, 0);
    while (!bytes.empty()) {
        std::size_t chunk = std::min<std::size_t>(bytes.size(), 1u << 30);
        crc = ::crc32(crc, bytes.data(), static_cast<uInt>(chunk));
        bytes = bytes.subspan(chunk);
    }
    return static_cast<std::uint32_t>(crc);
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

void put_blob(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> blob) {
    put_u32(out, static_cast<std::uint32_t>(blob.size()));
    out.insert(out.end(), blob.begin(), blob.end());
}

std::vector<std::uint8_t> frame(const std::uint8_t (&magic)[4], const json& header,
                                const std::vector<std::vector<std::uint8_t>>& blobs) {
    std::vector<std::uint8_t> out(magic, magic + 4);
    out.push_back(kMajor);
    out.push_back(kMinor);
    std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
    put_blob(out, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    put_u32(out, static_cast<std::uint32_t>(blobs.size()));
    for (const auto& b : blobs) put_blob(out, b);
    put_u32(out, crc32_of(out));
    return out;
}

// Reads a frame written by frame(): checks magic, version, checksum and every length.
struct Frame {
    json header;
    std::vector<std::span<const std::uint8_t>> blobs;
};

Result<Frame> unframe(std::span<const std::uint8_t> bytes, const std::uint8_t (&magic)[4], const char* what) {
    if (bytes.size() < 4 + 2 + 4 + 4 + 4 || std::memcmp(bytes.data(), magic, 4) != 0)
        return Error(std::string("not an ecpi ") + what + " file (bad magic or too short)");
    if (bytes[4] > kMajor)
        return Error(std::string(what) + " format version " + std::to_string(bytes[4]) + "." + std::to_string(bytes[5]) +
                     " is newer than this ecpi supports (1.x); upgrade ecpi");
    if (bytes[4] == 0) return Error(std::string(what) + ": unknown version 0." + std::to_string(bytes[5]));
    std::uint32_t stored = 0;
    for (int i = 0; i < 4; ++i) stored |= static_cast<std::uint32_t>(bytes[bytes.size() - 4 + i]) << (8 * i);
    std::span<const std::uint8_t> body = bytes.first(bytes.size() - 4);
    if (crc32_of(body) != stored) return Error(std::string(what) + ": checksum mismatch");
    std::size_t pos = 6;
    auto take_u32 = [&](std::uint32_t& v) {
        if (body.size() - pos < 4) return false;
        v = 0;
        for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(body[pos + i]) << (8 * i);
        pos += 4;
        return true;
    };
    auto take_blob = [&](std::span<const std::uint8_t>& blob) {
        std::uint32_t n = 0;
        if (!take_u32(n) || body.size() - pos < n) return false;
        blob = body.subspan(pos, n);
        pos += n;
        return true;
    };
    Frame f;
    std::span<const std::uint8_t> header;
    if (!take_blob(header) || header.size() > kMaxHeaderBytes) return Error(std::string(what) + ": bad header length");
    f.header = json::parse(header.begin(), header.end(), nullptr, false);
    if (f.header.is_discarded() || !f.header.is_object()) return Error(std::string(what) + ": header is not a JSON object");
    std::uint32_t count = 0;
    if (!take_u32(count) || count > (body.size() - pos) / 4) return Error(std::string(what) + ": bad blob count");
    for (std::uint32_t i = 0; i < count; ++i) {
        std::span<const std::uint8_t> blob;
        if (!take_blob(blob)) return Error(std::string(what) + ": truncated blob");
        f.blobs.push_back(blob);
    }
    if (pos != body.size()) return Error(std::string(what) + ": bytes left after the last blob");
    return f;
}

std::uint64_t json_u64(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}
std::int64_t json_i64(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}
std::string json_str(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool valid_target(const std::string& t) {
    if (t.empty() || t.size() > 128 || t.front() == '.') return false;
    return std::all_of(t.begin(), t.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
    });
}

// Epoch names are digits (FORMAT.md §1); anything else is not ours.
bool valid_epoch(const std::string& e) {
    return !e.empty() && e.size() <= 20 && std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string batch_name(const std::string& epoch, std::uint64_t cut) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%010llu", static_cast<unsigned long long>(cut));
    return epoch + "-" + buf + kBatchSuffix;
}

// "00007-0000000003.batch" -> ("00007", 3).
std::optional<std::pair<std::string, std::uint64_t>> parse_batch_name(const std::string& name) {
    if (!name.ends_with(kBatchSuffix)) return std::nullopt;
    std::string stem = name.substr(0, name.size() - std::strlen(kBatchSuffix));
    std::size_t dash = stem.find('-');
    if (dash == std::string::npos) return std::nullopt;
    std::string epoch = stem.substr(0, dash), cut_text = stem.substr(dash + 1);
    std::uint64_t cut = 0;
    auto [end, ec] = std::from_chars(cut_text.data(), cut_text.data() + cut_text.size(), cut);
    if (!valid_epoch(epoch) || ec != std::errc() || end != cut_text.data() + cut_text.size()) return std::nullopt;
    return std::make_pair(epoch, cut);
}

bool epoch_less(const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

// ---- encodings ---------------------------------------------------------------

std::vector<std::uint8_t> encode_push_snapshot(const PushSnapshot& s) {
    json header = {{"schema", "ecpi.push-snapshot"}, {"epoch", s.epoch},        {"stamp_ns", s.stamp_ns},
                   {"cuts", s.cuts},                 {"closed", s.closed},      {"profiles", s.profiles.size()},
                   {"stacks", s.stacks.size()},      {"events", json::object()}};
    for (const auto& [name, e] : s.events)
        header["events"][name] = {
            {"period", e.period}, {"samples", e.samples}, {"unknown", e.unknown}, {"lost", e.lost}, {"idle", e.idle}};
    std::vector<std::vector<std::uint8_t>> blobs;
    for (const auto& p : s.profiles) blobs.push_back(encode_profile(p));
    for (const auto& st : s.stacks) blobs.push_back(encode_stacks(st));
    return frame(kSnapshotMagic, header, blobs);
}

Result<PushSnapshot> decode_push_snapshot(std::span<const std::uint8_t> bytes) {
    ECPI_ASSIGN_OR_RETURN(Frame f, unframe(bytes, kSnapshotMagic, "push cursor"));
    PushSnapshot s;
    s.epoch = json_str(f.header, "epoch");
    s.stamp_ns = json_i64(f.header, "stamp_ns");
    s.cuts = json_u64(f.header, "cuts");
    s.closed = f.header.value("closed", false);
    std::uint64_t profiles = json_u64(f.header, "profiles"), stacks = json_u64(f.header, "stacks");
    if (!valid_epoch(s.epoch)) return Error("push cursor: bad epoch name");
    if (profiles + stacks != f.blobs.size()) return Error("push cursor: the header's counts do not match its contents");
    if (auto ev = f.header.find("events"); ev != f.header.end() && ev->is_object()) {
        for (const auto& [name, e] : ev->items()) {
            if (!e.is_object()) continue;
            s.events[name] = {json_u64(e, "period"), json_u64(e, "samples"), json_u64(e, "unknown"), json_u64(e, "lost")};
            // A cursor written before idle was pushed: what idle the epoch
            // had then is unknown, so none of it is pushed again (an
            // undercount for that epoch rather than a count twice).
            s.events[name].idle = e.contains("idle") ? json_u64(e, "idle") : std::numeric_limits<std::uint64_t>::max();
        }
    }
    for (std::size_t i = 0; i < f.blobs.size(); ++i) {
        if (i < profiles) {
            ECPI_ASSIGN_OR_RETURN(ImageProfile p, decode_profile(f.blobs[i]));
            s.profiles.push_back(std::move(p));
        } else {
            ECPI_ASSIGN_OR_RETURN(StackProfile st, decode_stacks(f.blobs[i]));
            s.stacks.push_back(std::move(st));
        }
    }
    return s;
}

std::vector<std::uint8_t> encode_push_batch(const PushBatch& b) {
    json header = {{"schema", "ecpi.push-batch"}, {"epoch", b.epoch}, {"cut", b.cut},        {"token", b.token},
                   {"host", b.host},              {"time", b.time_unix}, {"samples", b.samples}, {"sections", json::array()}};
    std::vector<std::vector<std::uint8_t>> blobs;
    for (const auto& [name, bytes] : b.sections) {
        header["sections"].push_back(name);
        blobs.push_back(bytes);
    }
    return frame(kBatchMagic, header, blobs);
}

Result<PushBatch> decode_push_batch(std::span<const std::uint8_t> bytes) {
    ECPI_ASSIGN_OR_RETURN(Frame f, unframe(bytes, kBatchMagic, "push batch"));
    PushBatch b;
    b.epoch = json_str(f.header, "epoch");
    b.cut = json_u64(f.header, "cut");
    b.token = json_u64(f.header, "token");
    b.host = json_str(f.header, "host");
    b.time_unix = json_i64(f.header, "time");
    b.samples = json_u64(f.header, "samples");
    auto names = f.header.find("sections");
    if (names == f.header.end() || !names->is_array() || names->size() != f.blobs.size() || names->size() > kMaxSections)
        return Error("push batch: the section names do not match its contents");
    if (!valid_epoch(b.epoch) || b.token == 0) return Error("push batch: bad epoch or token");
    for (std::size_t i = 0; i < f.blobs.size(); ++i) {
        if (!(*names)[i].is_string()) return Error("push batch: a section name is not a string");
        b.sections[(*names)[i].get<std::string>()].assign(f.blobs[i].begin(), f.blobs[i].end());
    }
    return b;
}

// ---- the queue directory -------------------------------------------------------

Result<PushQueue> PushQueue::open(const fs::path& database, const std::string& target) {
    if (!valid_target(target)) return Error("push target name '" + target + "' must be made of [A-Za-z0-9._-]");
    std::error_code ec;
    if (!fs::is_regular_file(database / "ECPI_DATABASE", ec))
        return Error(database.string() + " is not an ecpi database (no ECPI_DATABASE file)");
    fs::path push = database / kPushDir;
    ECPI_RETURN_IF_ERROR(detail::make_directory(push));
    fs::path dir = push / target;
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir));
    fs::path lock = dir / kLockFile;
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return Error::from_errno(errno, "opening " + lock.string());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        ::close(fd);
        if (err == EWOULDBLOCK)
            return Error("another ecpi process is pushing " + database.string() + " to this target (it holds " +
                         lock.string() + "); stop it or wait for it");
        return Error::from_errno(err, "locking " + lock.string());
    }
    PushQueue queue(database, dir, fd);
    ECPI_RETURN_IF_ERROR(queue.remove_orphans());
    return queue;
}

PushQueue::PushQueue(PushQueue&& other) noexcept
    : database_(std::move(other.database_)), dir_(std::move(other.dir_)), lock_fd_(other.lock_fd_) {
    other.lock_fd_ = -1;
}

PushQueue::~PushQueue() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<void> PushQueue::remove_orphans() {
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> names, pending());
    for (const auto& name : names) {
        auto parsed = parse_batch_name(name);
        ECPI_ASSIGN_OR_RETURN(std::optional<PushSnapshot> snap, snapshot(parsed->first));
        if (!snap || snap->cuts < parsed->second) ECPI_RETURN_IF_ERROR(remove_batch(name));
    }
    return ok();
}

Result<std::optional<PushSnapshot>> PushQueue::snapshot(const std::string& epoch) const {
    if (!valid_epoch(epoch)) return Error("bad epoch name '" + epoch + "'");
    auto bytes = detail::read_file(dir_ / (epoch + kSnapshotSuffix));
    if (!bytes.ok()) {
        if (bytes.error().errno_value() == ENOENT) return std::optional<PushSnapshot>();
        return bytes.error();
    }
    auto s = decode_push_snapshot(*bytes);
    if (!s.ok())
        return Error((dir_ / (epoch + kSnapshotSuffix)).string() + ": " + s.error().message() +
                     " (remove the file to push that epoch again from the start)");
    return std::optional<PushSnapshot>(std::move(s).value());
}

Result<std::vector<std::string>> PushQueue::snapshot_epochs() const {
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> names, detail::list_directory(dir_));
    std::vector<std::string> epochs;
    for (const auto& n : names) {
        if (!n.ends_with(kSnapshotSuffix)) continue;
        std::string e = n.substr(0, n.size() - std::strlen(kSnapshotSuffix));
        if (valid_epoch(e)) epochs.push_back(e);
    }
    std::sort(epochs.begin(), epochs.end(), epoch_less);
    return epochs;
}

namespace {
// An epoch directory holds a few dozen files; a bound against a forged one.
constexpr std::size_t kMaxEpochFiles = 4096;
}  // namespace

Result<std::int64_t> PushQueue::epoch_stamp(const std::string& epoch) const {
    if (!valid_epoch(epoch)) return Error("bad epoch name '" + epoch + "'");
    struct stat st {};
    fs::path dir = database_ / "epochs" / epoch;
    if (::lstat(dir.c_str(), &st) != 0) return Error::from_errno(errno, "reading " + dir.string());
    if (!S_ISDIR(st.st_mode)) return Error(dir.string() + " is not a directory");
    auto ns = [](const struct stat& s) { return static_cast<std::int64_t>(s.st_mtim.tv_sec) * 1000000000 + s.st_mtim.tv_nsec; };
    std::int64_t newest = ns(st);
    // A daemon's merge appends to a journal segment (FORMAT.md §13), which
    // leaves the directory's own time as it was: the newest file counts too.
    std::error_code ec;
    std::size_t seen = 0;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end && seen < kMaxEpochFiles; it.increment(ec), ++seen) {
        struct stat file {};
        if (::lstat(it->path().c_str(), &file) == 0 && S_ISREG(file.st_mode)) newest = std::max(newest, ns(file));
    }
    return newest;
}

Result<void> PushQueue::enqueue(const PushBatch& batch, const PushSnapshot& snapshot) {
    if (batch.epoch != snapshot.epoch || batch.cut != snapshot.cuts || batch.cut == 0)
        return Error("push queue: a batch must be the snapshot's newest cut");
    ECPI_RETURN_IF_ERROR(detail::write_file_atomically(dir_ / batch_name(batch.epoch, batch.cut), encode_push_batch(batch)));
    return save_snapshot(snapshot);
}

Result<void> PushQueue::save_snapshot(const PushSnapshot& snapshot) {
    if (!valid_epoch(snapshot.epoch)) return Error("bad epoch name '" + snapshot.epoch + "'");
    return detail::write_file_atomically(dir_ / (snapshot.epoch + kSnapshotSuffix), encode_push_snapshot(snapshot));
}

Result<void> PushQueue::remove_snapshot(const std::string& epoch) {
    if (!valid_epoch(epoch)) return Error("bad epoch name '" + epoch + "'");
    fs::path p = dir_ / (epoch + kSnapshotSuffix);
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) return Error::from_errno(errno, "removing " + p.string());
    return detail::fsync_directory(dir_);
}

Result<std::vector<std::string>> PushQueue::pending() const {
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> names, detail::list_directory(dir_));
    std::vector<std::pair<std::pair<std::string, std::uint64_t>, std::string>> batches;
    for (const auto& n : names)
        if (auto parsed = parse_batch_name(n)) batches.emplace_back(*parsed, n);
    std::sort(batches.begin(), batches.end(), [](const auto& a, const auto& b) {
        if (a.first.first != b.first.first) return epoch_less(a.first.first, b.first.first);
        return a.first.second < b.first.second;
    });
    std::vector<std::string> out;
    for (auto& [key, name] : batches) out.push_back(std::move(name));
    return out;
}

Result<PushBatch> PushQueue::read_batch(const std::string& name) const {
    if (!parse_batch_name(name)) return Error("bad batch name '" + name + "'");
    ECPI_ASSIGN_OR_RETURN(std::vector<std::uint8_t> bytes, detail::read_file(dir_ / name));
    auto b = decode_push_batch(bytes);
    if (!b.ok()) return b.error().with_context((dir_ / name).string());
    return b;
}

Result<void> PushQueue::remove_batch(const std::string& name) {
    if (!parse_batch_name(name)) return Error("bad batch name '" + name + "'");
    fs::path p = dir_ / name;
    if (::unlink(p.c_str()) != 0 && errno != ENOENT) return Error::from_errno(errno, "removing " + p.string());
    return detail::fsync_directory(dir_);
}

std::uint64_t PushQueue::pending_bytes() const {
    std::uint64_t total = 0;
    auto names = pending();
    if (!names.ok()) return 0;
    for (const auto& n : *names) {
        struct stat st {};
        if (::lstat((dir_ / n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<std::uint64_t>(st.st_size);
    }
    return total;
}

Result<PushCounters> PushQueue::counters() const {
    auto bytes = detail::read_file(dir_ / kStateFile);
    if (!bytes.ok()) {
        if (bytes.error().errno_value() == ENOENT) return PushCounters{};
        return bytes.error();
    }
    json j = json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Error((dir_ / kStateFile).string() + ": not a JSON object");
    return PushCounters{json_u64(j, "batches_sent"), json_u64(j, "samples_sent"), json_u64(j, "epochs_lost")};
}

Result<void> PushQueue::save_counters(const PushCounters& c) {
    json j = {{"schema", "ecpi.push-state"},      {"version", 1},
              {"batches_sent", c.batches_sent}, {"samples_sent", c.samples_sent},
              {"epochs_lost", c.epochs_lost}};
    std::string text = j.dump(2) + "\n";
    return detail::write_file_atomically(dir_ / kStateFile,
                                         std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

}  // namespace ecpi::store
