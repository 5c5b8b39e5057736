// The daemon's control socket: a Unix stream socket (mode 0600) on which one
// request line ("status", "flush", "epoch") gets one JSON reply line. Only
// root or the daemon's own user may connect (file mode and SO_PEERCRED).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "ecpi/result.h"

namespace ecpi::loader {

class ControlServer {
public:
    // Replaces a stale socket file left by a daemon that was killed.
    static Result<ControlServer> listen(const std::filesystem::path& path);
    ControlServer(ControlServer&&) noexcept;
    ControlServer& operator=(ControlServer&&) noexcept;
    ~ControlServer();  // closes and removes the socket file

    // Serves every pending connection without blocking: `handler` maps a
    // request line to the JSON reply line.
    void serve(const std::function<std::string(const std::string& request)>& handler);
    const std::filesystem::path& path() const { return path_; }

private:
    ControlServer() = default;
    int fd_ = -1;
    std::filesystem::path path_;
};

// Sends one request and returns the reply line. Errors name the socket and
// the likely cause (no daemon running, not allowed).
[[nodiscard]] Result<std::string> control_request(const std::filesystem::path& path, const std::string& request,
                                                  std::chrono::milliseconds timeout);

}  // namespace ecpi::loader
