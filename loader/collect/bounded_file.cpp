#include "ecpi/loader/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "ecpi/terminal_text.h"

namespace ecpi::loader {

Result<std::optional<std::string>> read_bounded_file(const std::filesystem::path& path, std::uint64_t max) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT) return std::optional<std::string>();
        return Error::from_errno(errno, "opening " + escape_for_terminal(path.string()));
    }
    struct stat st{};
    std::string bytes;
    Result<std::optional<std::string>> out = std::optional<std::string>();
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) out = Error(escape_for_terminal(path.string()) + " is not a regular file");
    else if (static_cast<std::uint64_t>(st.st_size) > max) out = Error(escape_for_terminal(path.string()) + " is too large");
    else {
        bytes.resize(static_cast<std::size_t>(st.st_size));
        std::size_t got = 0;
        while (got < bytes.size()) {
            ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
            if (n <= 0) break;
            got += static_cast<std::size_t>(n);
        }
        if (got != bytes.size()) out = Error(escape_for_terminal(path.string()) + " could not be read whole");
        else out = std::optional<std::string>(std::move(bytes));
    }
    ::close(fd);
    return out;
}

Result<void> replace_file(const std::filesystem::path& path, std::string_view bytes, mode_t mode) {
    const auto temp = path.parent_path() / (".tmp-" + path.filename().string() + "-" + std::to_string(std::random_device{}()));
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0) return Error::from_errno(errno, "creating " + escape_for_terminal(temp.string()));
    bool written = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    written = ::close(fd) == 0 && written;
    if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(temp.c_str());
        return Error::from_errno(err ? err : EIO, "writing " + escape_for_terminal(path.string()));
    }
    return ok();
}

}  // namespace ecpi::loader
