// Internal to store/: POSIX file primitives behind the database's atomicity
// and locking rules (FORMAT.md "Atomicity and locking"). Every failure is an
// Error naming the path involved.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ecpi/result.h"

namespace ecpi::store::detail {

// Temp files start with this; readers ignore them, and nothing else in a
// database directory may start with it.
inline constexpr const char* kTempPrefix = ".tmp-";

// Whole file. A missing file is an Error with errno_value() == ENOENT.
Result<std::vector<std::uint8_t>> read_file(const std::filesystem::path& path);

// A file that becomes visible at `target` only on commit(): it is written to
// a temp file in the same directory, fsync'ed, renamed over the target, and
// the directory fsync'ed. Destroying it uncommitted removes the temp file.
class AtomicFile {
public:
    static Result<AtomicFile> create(const std::filesystem::path& target);
    AtomicFile(AtomicFile&& other) noexcept;
    AtomicFile& operator=(AtomicFile&&) = delete;
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;
    ~AtomicFile();

    Result<void> write(std::span<const std::uint8_t> bytes);
    Result<void> commit();

private:
    AtomicFile(std::filesystem::path target, std::filesystem::path temp, int fd)
        : target_(std::move(target)), temp_(std::move(temp)), fd_(fd) {}
    std::filesystem::path target_;
    std::filesystem::path temp_;
    int fd_ = -1;
};

Result<void> write_file_atomically(const std::filesystem::path& target, std::span<const std::uint8_t> bytes);
// Streams `source` into `target` atomically (for binaries too big to slurp).
Result<void> copy_file_atomically(const std::filesystem::path& source, const std::filesystem::path& target);

// mkdir that accepts an existing directory; fsyncs the parent when it creates.
Result<void> make_directory(const std::filesystem::path& dir);
Result<void> fsync_directory(const std::filesystem::path& dir);

// Names in a directory (not "." or ".."), sorted. ENOENT is an Error.
Result<std::vector<std::string>> list_directory(const std::filesystem::path& dir);

// Exclusive flock on a lock file, held until destruction. Blocks while
// another writer holds it. flock locks belong to the open file description,
// so two WriterLocks in one process also exclude each other.
class WriterLock {
public:
    static Result<WriterLock> acquire(const std::filesystem::path& lock_file);
    WriterLock(WriterLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    WriterLock& operator=(WriterLock&&) = delete;
    WriterLock(const WriterLock&) = delete;
    WriterLock& operator=(const WriterLock&) = delete;
    ~WriterLock();

private:
    explicit WriterLock(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace ecpi::store::detail
