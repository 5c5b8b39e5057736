// Debug files from debuginfod servers (contract in
// include/ecpi/analyze/symbols/debuginfod.h).
#include "ecpi/analyze/symbols/debuginfod.h"

#include <elfutils/debuginfod.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/shared_library.h"

namespace ecpi::analyze {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

std::string size_text(std::uint64_t bytes) {
    if (bytes < (std::uint64_t{1} << 20)) return std::to_string(bytes) + " bytes";
    return std::to_string(bytes >> 20) + " MiB";
}

// What the progress callback knows of one fetch, and why it cut it off.
struct Fetch {
    const DebuginfodOptions* options = nullptr;
    std::string what;  // "debug file of gzip (build id ...)"
    Clock::time_point start = Clock::now();
    Clock::time_point next_progress{};
    std::string cut_off;  // "" while the fetch may go on
    bool timed_out = false;

    bool keep_going(long done, long total) {
        const auto now = Clock::now();
        const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
        const auto max = static_cast<long double>(options->max_bytes);
        if (elapsed > options->time_limit) {
            char limit[64];
            std::snprintf(limit, sizeof limit, "took longer than %.1f s; cut off",
                          static_cast<double>(options->time_limit.count()) / 1000.0);
            cut_off = limit;
            timed_out = true;
        } else if (static_cast<long double>(total) > max || static_cast<long double>(done) > max) {
            cut_off = "is larger than the " + size_text(options->max_bytes) + " allowed; cut off";
        }
        if (!cut_off.empty()) return false;
        if (options->report && elapsed >= options->progress_after && now >= next_progress) {
            char line[160];
            std::snprintf(line, sizeof line, ": %.1f MiB%s after %.0f s", static_cast<double>(done) / (1 << 20),
                          total > 0 ? (" of " + std::to_string(total >> 20) + " MiB").c_str() : "",
                          static_cast<double>(elapsed.count()) / 1000.0);
            options->report("debuginfod: fetching the " + what + line);
            next_progress = now + options->progress_every;
        }
        return true;
    }
};

// libdebuginfod's functions, bound at the first fetch rather than by the
// dynamic loader at start-up: the library and the libcurl (GnuTLS) it brings
// cost every ecpi command milliseconds before main(), and only a report with
// DEBUGINFOD_URLS set uses them (include/ecpi/shared_library.h).
struct DebuginfodApi {
    decltype(&debuginfod_begin) begin = nullptr;
    decltype(&debuginfod_end) end = nullptr;
    decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
    decltype(&debuginfod_add_http_header) add_http_header = nullptr;
    decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
};

Result<DebuginfodApi> bind_debuginfod(const SharedLibrary& lib) {
    DebuginfodApi api;
    ECPI_RETURN_IF_ERROR(lib.bind("debuginfod_begin", api.begin));
    ECPI_RETURN_IF_ERROR(lib.bind("debuginfod_end", api.end));
    ECPI_RETURN_IF_ERROR(lib.bind("debuginfod_set_progressfn", api.set_progressfn));
    ECPI_RETURN_IF_ERROR(lib.bind("debuginfod_add_http_header", api.add_http_header));
    ECPI_RETURN_IF_ERROR(lib.bind("debuginfod_find_debuginfo", api.find_debuginfo));
    return api;
}

// The functions of library `soname`, loaded once per process.
Result<const DebuginfodApi*> debuginfod_api(const std::string& soname) {
    static LoadedOnce<DebuginfodApi> loaded;
    return loaded.get(soname, [&]() -> Result<DebuginfodApi> {
        auto lib = SharedLibrary::open(soname, "libdebuginfod1", "to fetch debug files");
        if (!lib.ok()) return Error("debuginfod: " + lib.error().message(), lib.error().errno_value());
        auto api = bind_debuginfod(*lib);
        if (!api.ok()) return Error("debuginfod: " + api.error().message(), api.error().errno_value());
        return *api;
    });
}

// libdebuginfod calls the progress function from inside
// debuginfod_find_debuginfo, on the calling thread, so the fetch under way
// is this thread's.
thread_local Fetch* current_fetch = nullptr;

int on_progress(debuginfod_client*, long done, long total) {
    return current_fetch == nullptr || current_fetch->keep_going(done, total) ? 0 : 1;
}

struct ClientDeleter {
    const DebuginfodApi* api = nullptr;
    void operator()(debuginfod_client* c) const { api->end(c); }
};

// Why libdebuginfod's negative errno failed, in the reader's words.
std::string failure(int rc, const std::string& urls) {
    switch (-rc) {
        case ENOENT: return "the server (" + urls + ") has no such file";
        case ECONNREFUSED:
        case EHOSTUNREACH:
        case ENETUNREACH:
        case EADDRNOTAVAIL:
            return "cannot reach " + urls + " (" + std::strerror(-rc) + ")";
        case ETIME: return urls + " did not answer in time (DEBUGINFOD_TIMEOUT)";
        case EFBIG: return "the file is larger than allowed (DEBUGINFOD_MAXSIZE)";
        default: return urls + ": " + std::strerror(-rc);
    }
}

// Servers (DEBUGINFOD_URLS values) that let a fetch run out of time in this
// process: later images do not wait on them again, so a silent server costs
// one time limit per run, not one per image.
class SilentServers {
public:
    bool has(const std::string& urls) {
        std::lock_guard lock(mutex_);
        return urls_.count(urls) != 0;
    }
    void add(const std::string& urls) {
        std::lock_guard lock(mutex_);
        urls_.insert(urls);
    }

private:
    std::mutex mutex_;
    std::set<std::string> urls_;
};

SilentServers& silent_servers() {
    static SilentServers servers;
    return servers;
}

}  // namespace

std::string debuginfod_urls() {
    const char* urls = std::getenv("DEBUGINFOD_URLS");
    return urls != nullptr ? urls : "";
}

bool debuginfod_active(const DebuginfodOptions& options) {
    return options.enabled && debuginfod_urls().find_first_not_of(" \t") != std::string::npos;
}

Result<fs::path> fetch_debuginfo(const DebuginfodOptions& options, const std::string& build_id,
                                 const std::string& label) {
    const std::string what = "debug file of " + label + " (build id " + build_id + ")";
    const std::string urls = debuginfod_urls();
    if (!debuginfod_active(options)) return Error("debuginfod: not asked to fetch the " + what);
    if (build_id.size() < 2 || build_id.find_first_not_of("0123456789abcdef") != std::string::npos)
        return Error("debuginfod: " + label + " has no usable build id; nothing to fetch");
    const std::string prefix = "debuginfod: no " + what + ": ";
    if (silent_servers().has(urls))
        return Error(prefix + urls + " ran out of time on an earlier image; not asked again in this run");
    ECPI_ASSIGN_OR_RETURN(const DebuginfodApi* api, debuginfod_api(options.library));
    std::unique_ptr<debuginfod_client, ClientDeleter> client(api->begin(), ClientDeleter{api});
    if (!client) return Error("debuginfod: cannot start a client (" + std::string(std::strerror(errno)) + ")");
    Fetch fetch;
    fetch.options = &options;
    fetch.what = what;
    api->set_progressfn(client.get(), on_progress);
    const std::string max_size = "X-DEBUGINFOD-MAXSIZE: " + std::to_string(options.max_bytes);
    (void)api->add_http_header(client.get(), max_size.c_str());  // advice to the server; enforced above

    char* raw_path = nullptr;
    current_fetch = &fetch;
    const int fd =
        api->find_debuginfo(client.get(), reinterpret_cast<const unsigned char*>(build_id.c_str()), 0, &raw_path);
    current_fetch = nullptr;
    std::unique_ptr<char, decltype(&std::free)> path(raw_path, &std::free);
    if (fd >= 0) ::close(fd);
    if (fd < 0 && (fetch.timed_out || -fd == ETIME)) silent_servers().add(urls);
    if (fd < 0) return Error(prefix + (fetch.cut_off.empty() ? failure(fd, urls) : "the fetch " + fetch.cut_off));
    if (!path) return Error(prefix + "libdebuginfod named no file");
    // The cache holds what the server sent: used only if it is the file asked
    // for (a short transfer can end before the progress callback sees it).
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path.get(), ec);
    if (!ec && size > options.max_bytes)
        return Error(prefix + "the file is larger than the " + size_text(options.max_bytes) + " allowed; refused");
    auto got = read_build_id(path.get());
    if (!got.ok()) return Error(prefix + "the server sent something unusable (" + got.error().message() + "); refused");
    if (*got != build_id)
        return Error(prefix + "the server sent " + path.get() + " with build id " + (got->empty() ? "none" : *got) +
                     "; refused");
    return fs::path(path.get());
}

}  // namespace ecpi::analyze
