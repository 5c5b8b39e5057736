// A shared library loaded at first use (dlopen) rather than at start-up.
//
// Why: the dynamic loader maps, relocates and initialises every library the
// ecpi binary names before main() runs, for every command. libcurl (fleet/:
// ClickHouse) and libdebuginfod (analyze/symbols/: debug files over HTTP,
// itself on a second libcurl, the GnuTLS one) bring 30 of the 44 objects ecpi
// loaded and most of its start-up time (docs/CACHESIM.md, "Start-up"), yet
// only `push`, a ClickHouse report, or a report with DEBUGINFOD_URLS set uses
// them. Those two rooms load them through this class when they first need
// them; a missing library is then one error line naming the package.
//
// A library once opened stays loaded for the life of the process (never
// dlclose'd): its function pointers are kept in process-wide tables.
#pragma once

#include <dlfcn.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "ecpi/result.h"

namespace ecpi {

class SharedLibrary {
public:
    // Loads `soname` (or finds it loaded). The error, with errno ELIBACC, is
    // one line: "cannot load SONAME WHY (the loader's reason); install the
    // Debian package PACKAGE", `why` saying what it is for ("to reach
    // ClickHouse").
    [[nodiscard]] static Result<SharedLibrary> open(const std::string& soname, std::string_view package,
                                                    std::string_view why) {
        ::dlerror();  // clear a stale message
        void* handle = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char* reason = ::dlerror();
            return Error("cannot load " + soname + " " + std::string(why) + " (" +
                             (reason != nullptr ? reason : "no reason given") + "); install the Debian package " +
                             std::string(package),
                         ELIBACC);
        }
        return SharedLibrary(handle, soname, package);
    }

    // Points `fn` at the library's function `name`. The error names the
    // function and the library: an older library than the one ecpi was built
    // against.
    template <typename F>
    [[nodiscard]] Result<void> bind(const char* name, F*& fn) const {
        ::dlerror();
        void* address = ::dlsym(handle_, name);
        if (address == nullptr) {
            return Error(soname_ + " has no function " + name +
                             " (older than the one ecpi was built against?); install the Debian package " + package_,
                         ELIBACC);
        }
        fn = reinterpret_cast<F*>(address);
        return {};
    }

    const std::string& soname() const { return soname_; }

private:
    SharedLibrary(void* handle, std::string soname, std::string_view package)
        : handle_(handle), soname_(std::move(soname)), package_(package) {}

    void* handle_ = nullptr;
    std::string soname_;
    std::string package_;
};

// A library's bound functions (`Api`), made once per process and SONAME by
// the caller's `load` (open, bind, initialise) and kept for the process's
// life, so the pointers handed out stay valid. A failure is not kept: the
// next call tries again, and says why again. One per library, as a static.
template <typename Api>
class LoadedOnce {
public:
    template <typename Load>
    [[nodiscard]] Result<const Api*> get(const std::string& soname, Load&& load) {
        std::lock_guard lock(mutex_);  // `load` runs under it: curl_global_init is not thread-safe
        if (auto it = loaded_.find(soname); it != loaded_.end()) return &it->second;
        Result<Api> api = load();
        if (!api.ok()) return api.error();
        return &loaded_.emplace(soname, std::move(*api)).first->second;
    }

private:
    std::mutex mutex_;
    std::map<std::string, Api> loaded_;  // never erased
};

}  // namespace ecpi
