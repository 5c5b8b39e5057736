// Pushing a profile database to ClickHouse (docs/FLEET.md "Delivery").
//
// A push has two steps. cut() reads the epochs that changed since the last
// cut, subtracts what earlier batches already hold (the cursor, kept in the
// database: store/push_state.h) and queues the difference as one batch per
// epoch on disk; send() delivers queued batches oldest first and removes a
// batch only once ClickHouse acknowledged all of its inserts. Every counted
// row carries the batch's random token: before (re)sending, send() asks the
// server whether it already holds the batch, so a retry after a lost answer
// counts nothing twice. The local database is the backlog's overflow: when
// the queue is at its size limit, cut() leaves new samples in the database
// (they are cut later, in a coarser time bucket); only samples of an epoch
// that the database removes (--max-disk) before it was cut are lost to the
// fleet, and counted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ecpi/fleet/clickhouse.h"
#include "ecpi/result.h"

namespace ecpi::fleet {

struct PushOptions {
    std::string host;                          // the fleet's name for this machine; "" = the epochs' hostname
    std::uint64_t max_backlog_bytes = 256ull << 20;
    std::function<void(const std::string&)> log;  // one line each; never holds credentials
};

struct PushProgress {
    std::uint64_t batches_cut = 0, samples_cut = 0;
    std::uint64_t batches_sent = 0, samples_sent = 0, rows_sent = 0;
    std::uint64_t batches_already_there = 0;   // retries the server already had
    std::uint64_t batches_pending = 0, pending_bytes = 0;
    bool backlog_full = false;                 // new samples wait in the database
    std::uint64_t epochs_lost = 0;             // removed locally before they were cut in full (since open)
};

// The directory name of a target's cursor and backlog: "<host>_<port>_<database>".
std::string push_target_name(const ClickHouseUrl& url);

class Pusher {
public:
    // Opens (creating) the database's queue for this target; one pusher per
    // (database, target) at a time. Checks the server's schema version.
    static Result<Pusher> open(const std::filesystem::path& database, ClickHouseClient client, PushOptions options);
    Pusher(Pusher&&) noexcept;
    Pusher& operator=(Pusher&&) noexcept;
    ~Pusher();

    [[nodiscard]] Result<void> cut(PushProgress& progress);
    // Stops at the first failure and returns it (the batch stays queued).
    [[nodiscard]] Result<void> send(PushProgress& progress);

private:
    struct Impl;
    explicit Pusher(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// `ecpi daemon --push`: a thread that cuts and sends after each merge
// (notify()) and at least every `interval_s`, so a slow or dead server never
// blocks sampling or the local store. Failures are logged once per outage,
// with a line when delivery resumes.
class PushLoop {
public:
    PushLoop(Pusher pusher, double interval_s, std::function<void(const std::string&)> log);
    ~PushLoop();                               // stop(false) when still running
    void notify();
    // Stops the thread; with `final_push`, one last cut and send (bounded by
    // the client's timeouts: 5 s to connect, 60 s per request).
    PushProgress stop(bool final_push);

private:
    void run();
    void cycle();
    Pusher pusher_;
    double interval_s_;
    std::function<void(const std::string&)> log_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool notified_ = false;
    bool stopping_ = false;
    bool failing_ = false;
    PushProgress progress_;
    std::thread thread_;
};

}  // namespace ecpi::fleet
