// Debug files fetched from debuginfod (issue 30, item 2): against elfutils'
// own server, started here on a loopback port over a directory holding the
// -g build of symtest, and against a small fake server that hangs, answers
// garbage or sends another binary. The image asked about is symtest stripped
// of every symbol (data/nosym/symtest_nosym): without its debug file its
// functions are named "symtest_nosym+0xSTART" from .eh_frame.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ecpi/analyze/symbols/debug_info.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "test_util.h"

extern char** environ;

using namespace ecpi::analyze;
using ecpi::analyze::testing::TempDir;
using ecpi::analyze::testing::copy_into;
using ecpi::analyze::testing::nm_functions;
using ecpi::analyze::testing::read_text;
namespace fs = std::filesystem;

namespace {

// A TCP socket listening on 127.0.0.1 at a port the kernel chose.
struct Listener {
    int fd = -1;
    int port = 0;
    Listener() {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
        port = ntohs(addr.sin_port);
    }
    ~Listener() {
        if (fd >= 0) ::close(fd);
    }
};

// A port nothing listens on: bound, then closed.
int closed_port() {
    Listener l;
    return l.port;
}

std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

// The status code of GET `path` on 127.0.0.1:`port`, 0 when nothing answers.
int http_status(int port, const std::string& path) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    int status = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
            char buf[64] = {};
            if (::read(fd, buf, sizeof buf - 1) > 12) status = std::atoi(buf + 9);  // "HTTP/1.1 200"
        }
    }
    ::close(fd);
    return status;
}

// elfutils' debuginfod serving DIR, stopped (SIGTERM, then SIGKILL) on destruction.
class DebuginfodServer {
public:
    DebuginfodServer(const fs::path& dir, const fs::path& database, const std::string& ready_path) {
        Listener probe;  // a free port, closed again just before the server binds it
        port_ = probe.port;
        ::close(probe.fd);
        probe.fd = -1;
        const std::string port = std::to_string(port_);
        std::vector<std::string> args = {ECPI_DEBUGINFOD, "-F", dir.string(), "-p", port, "-d", database.string()};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&actions, 2, (dir.parent_path() / "debuginfod.log").c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(posix_spawn(&pid_, ECPI_DEBUGINFOD, &actions, nullptr, argv.data(), environ) == 0);
        posix_spawn_file_actions_destroy(&actions);
        // Ready once its first scan has indexed the file the tests ask for.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (http_status(port_, ready_path) != 200) {
            REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "debuginfod did not serve " << ready_path << " within 30 s: "
                                                        << read_text(dir.parent_path() / "debuginfod.log"));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    ~DebuginfodServer() { stop(); }
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = 0;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = 0;
    }
    int port() const { return port_; }

private:
    pid_t pid_ = 0;
    int port_ = 0;
};

// A server that answers every request with `reply` (bytes after the header),
// or never answers when `hang`; stopped on destruction.
class FakeServer {
public:
    FakeServer(std::string reply, bool hang) : reply_(std::move(reply)), hang_(hang) {
        REQUIRE(::listen(listener_.fd, 8) == 0);
        thread_ = std::thread([this] { serve(); });
    }
    ~FakeServer() {
        stopping_ = true;
        ::shutdown(listener_.fd, SHUT_RDWR);
        thread_.join();
        for (int fd : held_) ::close(fd);
    }
    int port() const { return listener_.port; }
    int requests() const { return requests_; }

private:
    void serve() {
        while (!stopping_) {
            int fd = ::accept4(listener_.fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) return;
            ++requests_;
            char buf[4096];
            (void)::read(fd, buf, sizeof buf);
            if (hang_) {
                held_.push_back(fd);  // open, silent, until the test ends
                continue;
            }
            const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(reply_.size()) +
                                       "\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n" +
                                       reply_;
            std::size_t sent = 0;
            while (sent < answer.size()) {
                ssize_t n = ::send(fd, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL);
                if (n <= 0) break;
                sent += static_cast<std::size_t>(n);
            }
            ::close(fd);
        }
    }
    Listener listener_;
    std::string reply_;
    bool hang_;
    std::atomic<bool> stopping_{false};
    std::atomic<int> requests_{0};
    std::vector<int> held_;
    std::thread thread_;
};

// DEBUGINFOD_URLS and DEBUGINFOD_CACHE_PATH for one test, restored after.
class Environment {
public:
    Environment(const std::optional<std::string>& urls, const fs::path& cache) {
        set("DEBUGINFOD_URLS", urls);
        set("DEBUGINFOD_CACHE_PATH", cache.string());
    }
    ~Environment() {
        ::unsetenv("DEBUGINFOD_URLS");
        ::unsetenv("DEBUGINFOD_CACHE_PATH");
    }

private:
    static void set(const char* name, const std::optional<std::string>& value) {
        if (value) ::setenv(name, value->c_str(), 1);
        else ::unsetenv(name);
    }
};

const std::string& symtest_build_id() {
    static const std::string bid = *read_build_id(ECPI_SYMTEST_NOSYM);
    return bid;
}

// What a test's Symbolizer said on debuginfod.report.
struct Said {
    std::vector<std::string> lines;
    bool has(const std::string& part) const {
        for (const auto& l : lines)
            if (l.find(part) != std::string::npos) return true;
        return false;
    }
};

Symbolizer::Options options_with(Said& said, bool enabled = true) {
    Symbolizer::Options options;
    options.debuginfod.enabled = enabled;
    options.debuginfod.time_limit = std::chrono::milliseconds(3000);
    options.debuginfod.report = [&said](const std::string& line) { said.lines.push_back(line); };
    return options;
}

const ecpi::store::ImageId& stripped() {
    static const ecpi::store::ImageId image{ECPI_SYMTEST_NOSYM, symtest_build_id()};
    return image;
}

std::uint64_t main_address() { return nm_functions(ECPI_SYMTEST_NM).at("main"); }

// The name symtest_nosym's main goes by with these options.
std::string name_of_main(Symbolizer& symbolizer) {
    const Symbol* sym = symbolizer.lookup(stripped(), main_address());
    return sym != nullptr ? sym->name : "(none)";
}

std::string eh_frame_name_of_main() {
    char buf[32];
    std::snprintf(buf, sizeof buf, "symtest_nosym+0x%llx", static_cast<unsigned long long>(main_address()));
    return buf;
}

}  // namespace

TEST_CASE("debuginfod: a stripped image gets its names from a local debuginfod server, then from the cache") {
    TempDir tmp;
    copy_into(ECPI_SYMTEST, tmp.path() / "served" / "symtest");
    const fs::path cache = tmp.path() / "cache";
    {
        DebuginfodServer server(tmp.path() / "served", tmp.path() / "index.sqlite",
                                "/buildid/" + symtest_build_id() + "/debuginfo");
        Environment env(url(server.port()), cache);
        Said said;
        Symbolizer symbolizer(options_with(said));
        CHECK(name_of_main(symbolizer) == "main");
        const auto& table = symbolizer.table(stripped());
        REQUIRE(table.ok());
        CHECK(table->complete());
        CHECK(table->frame_named() == 0);
        const auto debug = symbolizer.debug_file(stripped());
        REQUIRE(debug.has_value());
        CHECK(debug->string().starts_with(cache.string()));
        CHECK(said.lines.empty());
        // The same file gives annotate its source lines.
        DebugInfoCache infos(symbolizer);
        std::string why;
        const DebugInfo* info = infos.get(stripped(), &why);
        REQUIRE_MESSAGE(info != nullptr, why);
        CHECK(info->has_lines());
        CHECK(!info->frames_at(main_address()).empty());
        server.stop();
    }
    // The server is gone: the cache answers.
    Environment env(url(closed_port()), cache);
    Said said;
    Symbolizer symbolizer(options_with(said));
    CHECK(name_of_main(symbolizer) == "main");
    CHECK(said.lines.empty());
}

TEST_CASE("debuginfod: nothing is fetched unless asked, and DEBUGINFOD_URLS is set") {
    TempDir tmp;
    FakeServer server(read_text(ECPI_SYMTEST), false);
    SUBCASE("not enabled (--no-debuginfod)") {
        Environment env(url(server.port()), tmp.path() / "cache");
        Said said;
        Symbolizer symbolizer(options_with(said, false));
        CHECK(name_of_main(symbolizer) == eh_frame_name_of_main());
        CHECK(said.lines.empty());
    }
    SUBCASE("DEBUGINFOD_URLS unset") {
        Environment env(std::nullopt, tmp.path() / "cache");
        Said said;
        Symbolizer symbolizer(options_with(said));
        CHECK(name_of_main(symbolizer) == eh_frame_name_of_main());
        CHECK(said.lines.empty());
    }
    SUBCASE("an image with a full symbol table") {
        Environment env(url(server.port()), tmp.path() / "cache");
        Said said;
        Symbolizer symbolizer(options_with(said));
        CHECK(symbolizer.lookup({ECPI_SYMTEST, symtest_build_id()}, main_address())->name == "main");
        CHECK(said.lines.empty());
    }
    CHECK(server.requests() == 0);
    CHECK(!fs::exists(tmp.path() / "cache" / symtest_build_id()));
}

TEST_CASE("debuginfod: a failure is said once per image and the .eh_frame names stand") {
    TempDir tmp;
    const std::string bid = symtest_build_id();
    auto check_fallback = [&](const std::string& urls, const std::string& why, std::chrono::milliseconds limit) {
        Environment env(urls, tmp.path() / "cache");
        Said said;
        Symbolizer::Options options = options_with(said);
        options.debuginfod.time_limit = limit;
        Symbolizer symbolizer(options);
        const auto start = std::chrono::steady_clock::now();
        CHECK(name_of_main(symbolizer) == eh_frame_name_of_main());
        CHECK(name_of_main(symbolizer) == eh_frame_name_of_main());
        CHECK(std::chrono::steady_clock::now() - start < limit + std::chrono::seconds(5));
        REQUIRE(said.lines.size() == 1);
        CHECK_MESSAGE(said.has("debuginfod: no debug file of symtest_nosym (build id " + bid + "): " + why),
                      said.lines[0]);
        CHECK_MESSAGE(said.has("; its functions keep the names of .dynsym and .eh_frame"), said.lines[0]);
    };
    SUBCASE("unreachable") {
        const int port = closed_port();
        check_fallback(url(port), "cannot reach " + url(port) + " (Connection refused)", std::chrono::seconds(3));
    }
    SUBCASE("no such file on a real server") {
        copy_into(ECPI_ANNOTEST, tmp.path() / "served" / "annotest");
        DebuginfodServer server(tmp.path() / "served", tmp.path() / "index.sqlite",
                                "/buildid/" + *read_build_id(ECPI_ANNOTEST) + "/debuginfo");
        check_fallback(url(server.port()), "the server (" + url(server.port()) + ") has no such file",
                       std::chrono::seconds(3));
    }
    SUBCASE("a server that never answers is cut off") {
        FakeServer server("", true);
        check_fallback(url(server.port()), "the fetch took longer than 1.5 s; cut off", std::chrono::milliseconds(1500));
        // Later fetches in this process do not wait on that server again.
        check_fallback(url(server.port()), url(server.port()) + " ran out of time on an earlier image; not asked again",
                       std::chrono::milliseconds(1));
        CHECK(server.requests() == 1);
    }
    SUBCASE("garbage") {
        FakeServer server("<html>not an ELF file</html>", false);
        check_fallback(url(server.port()), "the server sent something unusable", std::chrono::seconds(3));
    }
    SUBCASE("another binary's debug file") {
        FakeServer server(read_text(ECPI_SYMTEST_IBT), false);
        check_fallback(url(server.port()), "the server sent " + (tmp.path() / "cache" / bid / "debuginfo").string() +
                                               " with build id " + *read_build_id(ECPI_SYMTEST_IBT) + "; refused",
                       std::chrono::seconds(3));
    }
}

TEST_CASE("debuginfod: a file larger than allowed is cut off") {
    TempDir tmp;
    FakeServer server(read_text(ECPI_SYMTEST), false);
    Environment env(url(server.port()), tmp.path() / "cache");
    Said said;
    Symbolizer::Options options = options_with(said);
    options.debuginfod.max_bytes = 1024;
    Symbolizer symbolizer(options);
    CHECK(name_of_main(symbolizer) == eh_frame_name_of_main());
    REQUIRE(said.lines.size() == 1);
    CHECK_MESSAGE(said.has("is larger than the 1024 bytes allowed"), said.lines[0]);
}

// libdebuginfod is loaded at the first fetch, not at start-up
// (include/ecpi/shared_library.h); a library that is missing, or too old to
// have a function ecpi calls, is one line naming it and the package, said
// once for all images, and the .eh_frame names stand.
TEST_CASE("debuginfod: a library that cannot be loaded is named once, with its package") {
    TempDir tmp;
    FakeServer server(read_text(ECPI_SYMTEST), false);
    Environment env(url(server.port()), tmp.path() / "cache");
    copy_into(ECPI_SYMTEST_NOSYM, tmp.path() / "copy" / "symtest_nosym");
    const ecpi::store::ImageId copy{(tmp.path() / "copy" / "symtest_nosym").string(), symtest_build_id()};
    auto check_missing = [&](const std::string& library, const std::string& why) {
        DebuginfodOptions direct;
        direct.enabled = true;
        direct.library = library;
        auto fetched = fetch_debuginfo(direct, symtest_build_id(), "symtest_nosym");
        REQUIRE_FALSE(fetched.ok());
        CHECK(fetched.error().errno_value() == ELIBACC);
        CHECK_MESSAGE(fetched.error().message().find(why) != std::string::npos, fetched.error().message());
        CHECK_MESSAGE(fetched.error().message().find("libdebuginfod1") != std::string::npos,
                      fetched.error().message());

        Said said;
        Symbolizer::Options options = options_with(said);
        options.debuginfod.library = library;
        Symbolizer symbolizer(options);
        CHECK(name_of_main(symbolizer) == eh_frame_name_of_main());
        const Symbol* other = symbolizer.lookup(copy, main_address());
        REQUIRE(other != nullptr);
        CHECK(other->name.starts_with("symtest_nosym+0x"));
        REQUIRE(said.lines.size() == 1);
        CHECK_MESSAGE(said.has("debuginfod: " + why), said.lines[0]);
        CHECK_MESSAGE(said.has("; install the Debian package libdebuginfod1"), said.lines[0]);
        CHECK_MESSAGE(said.has("; reports go on without fetching debug files"), said.lines[0]);
    };
    SUBCASE("no such library") {
        check_missing("libecpi-no-such-debuginfod.so.1",
                      "cannot load libecpi-no-such-debuginfod.so.1 to fetch debug files (");
    }
    SUBCASE("a library without libdebuginfod's functions") {
        check_missing("libz.so.1", "libz.so.1 has no function debuginfod_begin");
    }
    CHECK(server.requests() == 0);
}
