// The child of `record -- COMMAND` and what the session reads from /proc.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "recorder_session.h"

namespace ecpi::loader::detail {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

ChildProcess::~ChildProcess() {
    if (release_fd_ >= 0) ::close(release_fd_);
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        int status;
        ::waitpid(pid_, &status, 0);
    }
}

Result<void> ChildProcess::spawn(const std::vector<std::string>& argv) {
    int release[2], report[2];
    if (pipe2(release, O_CLOEXEC) != 0) return Error::from_errno(errno, "creating a pipe");
    if (pipe2(report, O_CLOEXEC) != 0) {
        ::close(release[0]);
        ::close(release[1]);
        return Error::from_errno(errno, "creating a pipe");
    }
    pid_t pid = fork();
    if (pid < 0) return Error::from_errno(errno, "forking to run '" + argv[0] + "'");
    if (pid == 0) {
        ::close(release[1]);
        ::close(report[0]);
        char go;
        while (::read(release[0], &go, 1) < 0 && errno == EINTR) {
        }
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(args[0], args.data());
        int err = errno;
        [[maybe_unused]] auto n = ::write(report[1], &err, sizeof err);
        _exit(127);
    }
    ::close(release[0]);
    ::close(report[1]);
    pid_ = pid;
    release_fd_ = release[1];
    report_fd_ = report[0];
    command_ = argv[0];
    return ok();
}

Result<void> ChildProcess::release() {
    [[maybe_unused]] auto n = ::write(release_fd_, "x", 1);
    ::close(release_fd_);
    release_fd_ = -1;
    int err = 0;
    ssize_t got = ::read(report_fd_, &err, sizeof err);
    ::close(report_fd_);
    report_fd_ = -1;
    if (got == static_cast<ssize_t>(sizeof err))
        return Error("cannot run '" + command_ + "': " + errno_text(err) +
                     (err == ENOENT ? " (check the command name and PATH)" : ""));
    return ok();
}

std::optional<int> ChildProcess::poll() {
    if (pid_ <= 0 || reaped_) return status_;
    int status;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
        reaped_ = true;
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return status_;
}

void ChildProcess::terminate(int signal_number) {
    if (pid_ > 0 && !reaped_) ::kill(pid_, signal_number);
}

std::optional<int> ChildProcess::wait() {
    if (pid_ > 0 && !reaped_) {
        int status;
        if (::waitpid(pid_, &status, 0) == pid_) {
            reaped_ = true;
            status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
    }
    return status_;
}

// Descendants of `roots` per /proc (children started before tracking began).
std::vector<std::uint32_t> existing_descendants(const std::vector<std::uint32_t>& roots) {
    std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> children;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string text;
        std::getline(stat, text);
        auto close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::uint32_t ppid = 0;
        char state;
        if (std::sscanf(text.c_str() + close + 1, " %c %u", &state, &ppid) != 2) continue;
        children[ppid].push_back(static_cast<std::uint32_t>(std::stoul(name)));
    }
    std::vector<std::uint32_t> out, work(roots);
    std::unordered_set<std::uint32_t> seen(roots.begin(), roots.end());
    while (!work.empty()) {
        auto p = work.back();
        work.pop_back();
        for (auto c : children[p]) {
            if (seen.insert(c).second) {
                out.push_back(c);
                work.push_back(c);
            }
        }
    }
    return out;
}

// A process may exit between open and read: read() then fails with ESRCH,
// which libstdc++'s stream buffers throw from underflow through
// istreambuf_iterator (it stopped the daemon under a burst of short-lived
// processes). Plain read(), bounded, and "" when the process is gone.
std::string read_cmdline(std::uint32_t pid) {
    constexpr std::size_t kMaxCmdline = 64 << 10;
    const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string s;
    char buf[4096];
    while (s.size() < kMaxCmdline) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        s.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    if (s.size() > kMaxCmdline) s.resize(kMaxCmdline);
    std::replace(s.begin(), s.end(), '\0', ' ');
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

}  // namespace ecpi::loader::detail
