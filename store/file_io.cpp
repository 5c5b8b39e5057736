#include "file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace ecpi::store::detail {
namespace {

namespace fs = std::filesystem;

std::string str(const fs::path& p) { return p.string(); }

// Temp names only need to be unique among concurrent writers of one
// directory; O_EXCL catches the rest.
std::string random_suffix() {
    std::uint64_t r = 0;
    if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) {
        static std::atomic<std::uint64_t> counter{0};
        r = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
            (static_cast<std::uint64_t>(::getpid()) << 32) ^ counter.fetch_add(0x9e3779b97f4a7c15ull);
    }
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, r);
    return buf;
}

Result<void> write_all(int fd, std::span<const std::uint8_t> bytes, const fs::path& path) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return Error::from_errno(errno, "writing " + str(path));
        }
        bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
    return ok();
}

}  // namespace

// Anything in a database may have been put there by someone else: a FIFO
// would block a reader forever, a device never end. Only regular files are
// read (checked after opening with O_NONBLOCK, so that the open itself
// cannot block), and none larger than kMaxReadBytes.
namespace {
constexpr std::uint64_t kMaxReadBytes = 4ull << 30;

const char* file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISDIR(mode)) return "a directory";
    return "not a regular file";
}
}  // namespace

Result<std::vector<std::uint8_t>> read_file(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Error::from_errno(errno, "opening " + str(path));
    std::vector<std::uint8_t> out;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return Error::from_errno(err, "reading the status of " + str(path));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        return Error::from_errno(EISDIR, "reading " + str(path));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return Error(str(path) + " is " + file_kind(st.st_mode) + ", not a regular file: not read (remove it)");
    }
    if (static_cast<std::uint64_t>(st.st_size) > kMaxReadBytes) {
        ::close(fd);
        return Error(str(path) + " is " + std::to_string(st.st_size) + " bytes, more than any ecpi file holds (" +
                         std::to_string(kMaxReadBytes) + "): not read");
    }
    if (st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
    std::uint8_t buf[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            return Error::from_errno(err, "reading " + str(path));
        }
        if (n == 0) break;
        out.insert(out.end(), buf, buf + n);
    }
    ::close(fd);
    return out;
}

Result<AtomicFile> AtomicFile::create(const fs::path& target) {
    const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    for (int attempt = 0;; ++attempt) {
        fs::path temp = dir / (std::string(kTempPrefix) + random_suffix());
        const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) return AtomicFile(target, std::move(temp), fd);
        if (errno != EEXIST || attempt == 8) {
            return Error::from_errno(errno, "creating a temporary file for " + str(target));
        }
    }
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : target_(std::move(other.target_)), temp_(std::move(other.temp_)), fd_(other.fd_) {
    other.fd_ = -1;
    other.temp_.clear();
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
}

Result<void> AtomicFile::write(std::span<const std::uint8_t> bytes) {
    if (fd_ < 0) return Error("writing " + str(target_) + ": file already committed");
    return write_all(fd_, bytes, temp_);
}

Result<void> AtomicFile::commit() {
    if (fd_ < 0) return Error("committing " + str(target_) + ": file already committed");
    // fsync before rename: otherwise a crash can leave the new name pointing
    // at a file whose data never reached the disk.
    if (::fsync(fd_) != 0) return Error::from_errno(errno, "syncing " + str(temp_));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Error::from_errno(errno, "closing " + str(temp_));
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
        return Error::from_errno(errno, "renaming " + str(temp_) + " to " + str(target_));
    }
    temp_.clear();
    // fsync the directory so the rename itself survives a crash.
    return fsync_directory(target_.parent_path().empty() ? fs::path(".") : target_.parent_path());
}

Result<void> write_file_atomically(const fs::path& target, std::span<const std::uint8_t> bytes) {
    ECPI_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(target));
    ECPI_RETURN_IF_ERROR(file.write(bytes));
    return file.commit();
}

Result<void> copy_file_atomically(const fs::path& source, const fs::path& target) {
    const int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return Error::from_errno(errno, "opening " + str(source));
    auto copy = [&]() -> Result<void> {
        ECPI_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(target));
        std::uint8_t buf[1 << 16];
        for (;;) {
            const ssize_t n = ::read(in, buf, sizeof buf);
            if (n < 0) {
                if (errno == EINTR) continue;
                return Error::from_errno(errno, "reading " + str(source));
            }
            if (n == 0) break;
            ECPI_RETURN_IF_ERROR(file.write({buf, static_cast<std::size_t>(n)}));
        }
        return file.commit();
    };
    Result<void> result = copy();
    ::close(in);
    return result;
}

Result<void> fsync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Error::from_errno(errno, "opening directory " + str(dir));
    // Some filesystems cannot fsync a directory (EINVAL); nothing more can be
    // done there, and the rename is as durable as that filesystem allows.
    if (::fsync(fd) != 0 && errno != EINVAL) {
        const int err = errno;
        ::close(fd);
        return Error::from_errno(err, "syncing directory " + str(dir));
    }
    ::close(fd);
    return ok();
}

Result<void> make_directory(const fs::path& dir) {
    if (::mkdir(dir.c_str(), 0755) == 0) {
        return fsync_directory(dir.parent_path().empty() ? fs::path(".") : dir.parent_path());
    }
    const int err = errno;
    struct stat st {};
    if (err == EEXIST && ::stat(dir.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) return ok();
        return Error("creating directory " + str(dir) + ": a file of that name exists", ENOTDIR);
    }
    return Error::from_errno(err, "creating directory " + str(dir));
}

Result<std::vector<std::string>> list_directory(const fs::path& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Error::from_errno(errno, "listing " + str(dir));
    std::vector<std::string> names;
    for (;;) {
        errno = 0;
        const dirent* e = ::readdir(d);
        if (e == nullptr) {
            if (errno != 0) {
                const int err = errno;
                ::closedir(d);
                return Error::from_errno(err, "listing " + str(dir));
            }
            break;
        }
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

Result<WriterLock> WriterLock::acquire(const fs::path& lock_file) {
    const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Error::from_errno(errno, "opening lock file " + str(lock_file));
    while (::flock(fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        return Error::from_errno(err, "locking " + str(lock_file));
    }
    return WriterLock(fd);
}

WriterLock::~WriterLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace ecpi::store::detail
