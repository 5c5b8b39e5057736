// `ecpi daemon --push URL`: the daemon's side of fleet pushing (docs/FLEET.md).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "ecpi/fleet/push.h"
#include "ecpi/loader/recorder.h"

namespace ecpi::cli {

struct DaemonPushArgs {
    std::string url;
    std::string host;
    std::string password_file;
    std::uint64_t backlog_mb = 256;
    double interval_s = 0;                      // 0: the drain interval
};

void add_daemon_push_options(CLI::App& app, DaemonPushArgs& args);

// Opens the pusher before sampling starts (a bad URL, missing credentials
// or schema fail the daemon at once); nullptr without --push. Sets
// options.merged to wake the push thread.
std::unique_ptr<fleet::PushLoop> start_daemon_push(const DaemonPushArgs& args, loader::RecordOptions& options,
                                                   const std::function<void(const std::string&)>& log);
void stop_daemon_push(std::unique_ptr<fleet::PushLoop>& loop, const std::function<void(const std::string&)>& log);

}  // namespace ecpi::cli
