#include "ecpi/loader/control.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace ecpi::loader {
namespace {

Result<sockaddr_un> socket_address(const std::filesystem::path& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.native().size() >= sizeof(addr.sun_path))
        return Error("control socket path " + path.string() + " is longer than " +
                     std::to_string(sizeof(addr.sun_path) - 1) + " bytes; choose a shorter --socket path");
    std::memcpy(addr.sun_path, path.c_str(), path.native().size());
    return addr;
}

// Reads one line (up to 4 KiB) with a deadline.
Result<std::string> read_line(int fd, std::chrono::milliseconds timeout) {
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[512];
    while (line.find('\n') == std::string::npos && line.size() < 4096) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return Error("timed out waiting for a reply");
        pollfd p{fd, POLLIN, 0};
        int r = poll(&p, 1, static_cast<int>(left.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Error::from_errno(errno, "waiting on the control socket");
        if (r == 0) continue;
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::from_errno(errno, "reading the control socket");
        if (n == 0) break;
        line.append(buf, static_cast<std::size_t>(n));
    }
    if (auto nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
    return line;
}

void write_all(int fd, const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
        ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        off += static_cast<std::size_t>(n);
    }
}

}  // namespace

ControlServer::ControlServer(ControlServer&& o) noexcept { *this = std::move(o); }

ControlServer& ControlServer::operator=(ControlServer&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        path_ = std::move(o.path_);
        o.fd_ = -1;
        o.path_.clear();
    }
    return *this;
}

ControlServer::~ControlServer() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(path_.c_str());
    }
}

Result<ControlServer> ControlServer::listen(const std::filesystem::path& path) {
    ECPI_ASSIGN_OR_RETURN(auto addr, socket_address(path));
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return Error::from_errno(errno, "creating the control socket");
    ControlServer server;
    server.fd_ = fd;
    server.path_ = path;
    // A socket file nobody listens on is left by a killed daemon: replace it.
    // One that answers belongs to a running daemon: refuse.
    if (::access(path.c_str(), F_OK) == 0) {
        int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool alive = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        if (probe >= 0) ::close(probe);
        if (alive) {
            server.path_.clear();
            ::close(server.fd_);
            server.fd_ = -1;
            return Error("another ecpi daemon is running on " + path.string() + " (stop it first, or use another --db)");
        }
        ::unlink(path.c_str());
    }
    mode_t old = ::umask(0077);  // the socket is born 0600: root or our user only
    int r = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    int err = errno;
    ::umask(old);
    if (r != 0) {
        server.path_.clear();
        return Error::from_errno(err, "binding the control socket " + path.string());
    }
    if (::listen(fd, 16) != 0) return Error::from_errno(errno, "listening on the control socket " + path.string());
    return server;
}

void ControlServer::serve(const std::function<std::string(const std::string&)>& handler) {
    for (;;) {
        int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) return;  // EAGAIN: nothing pending
        ucred cred{};
        socklen_t len = sizeof cred;
        std::string reply;
        if (::getsockopt(client, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            (cred.uid != 0 && cred.uid != ::geteuid())) {
            reply = R"({"error":"permission denied: only root or the daemon's user may control it"})";
        } else {
            auto request = read_line(client, std::chrono::milliseconds(1000));
            reply = request.ok() ? handler(*request)
                                 : std::string(R"({"error":"bad request"})");
        }
        write_all(client, reply + "\n");
        ::close(client);
    }
}

Result<std::string> control_request(const std::filesystem::path& path, const std::string& request,
                                    std::chrono::milliseconds timeout) {
    ECPI_ASSIGN_OR_RETURN(auto addr, socket_address(path));
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error::from_errno(errno, "creating a socket");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        int err = errno;
        ::close(fd);
        if (err == ENOENT || err == ECONNREFUSED)
            return Error("no ecpi daemon is running on " + path.string() + " (start one with `ecpi daemon --db DIR`)", err);
        if (err == EACCES || err == EPERM)
            return Error("permission denied connecting to " + path.string() +
                             ": only root or the daemon's user may control it",
                         err);
        return Error::from_errno(err, "connecting to " + path.string());
    }
    write_all(fd, request + "\n");
    auto reply = read_line(fd, timeout);
    ::close(fd);
    if (!reply.ok()) return reply.error().with_context("asking the daemon on " + path.string());
    return reply;
}

}  // namespace ecpi::loader
