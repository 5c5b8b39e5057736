// The push cursor and backlog of a profile database (store/FORMAT.md §12):
// what `ecpi push` / `ecpi daemon --push` has already cut into batches for
// one target, and the batches not yet acknowledged by it. The store knows
// nothing of the target (ClickHouse for ecpi's fleet/): a batch is a token,
// a few counters and named byte sections it keeps whole until removed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ecpi/result.h"
#include "ecpi/store/profile.h"

namespace ecpi::store {

// What has been cut into batches from one epoch so far: the counts the
// batches add up to, merged over processes (one kAllProcesses section per
// profile, stacks with pid kAllProcesses), and the event totals.
struct PushSnapshot {
    std::string epoch;
    // The epoch directory's modification time (ns) when it was read: every
    // merge renames a file into it, so an unchanged time means no new samples.
    std::int64_t stamp_ns = 0;
    std::uint64_t cuts = 0;                    // batches cut from this epoch
    bool closed = false;                       // no longer written and cut in full: never read again
    std::vector<ImageProfile> profiles;        // empty once closed
    std::vector<StackProfile> stacks;
    std::map<std::string, EventMeta> events;
};

// One unit of delivery: cut from one epoch, acknowledged as a whole.
struct PushBatch {
    std::string epoch;
    std::uint64_t cut = 0;                     // this epoch's cut number, from 1
    std::uint64_t token = 0;                   // random, unique: the target recognizes a batch it already has
    std::string host;                          // the fleet name the rows carry
    std::int64_t time_unix = 0;                // the time bucket of every row
    std::uint64_t samples = 0;                 // samples in the batch (for counters and logs)
    std::map<std::string, std::vector<std::uint8_t>> sections;  // opaque to the store
};

// Totals kept across runs (state.json).
struct PushCounters {
    std::uint64_t batches_sent = 0;
    std::uint64_t samples_sent = 0;
    std::uint64_t epochs_lost = 0;             // removed from the database before they were cut in full
    bool operator==(const PushCounters&) const = default;
};

class PushQueue {
public:
    // DB/push/<target>/, created if missing. `target` is a name made of
    // [A-Za-z0-9._-]. Holds an exclusive flock on its lock file for its
    // lifetime: a second pusher to the same target fails at once, naming it.
    static Result<PushQueue> open(const std::filesystem::path& database, const std::string& target);
    PushQueue(PushQueue&&) noexcept;
    PushQueue& operator=(PushQueue&&) = delete;
    PushQueue(const PushQueue&) = delete;
    PushQueue& operator=(const PushQueue&) = delete;
    ~PushQueue();

    const std::filesystem::path& dir() const { return dir_; }

    // nullopt when nothing was cut from the epoch yet.
    Result<std::optional<PushSnapshot>> snapshot(const std::string& epoch) const;
    // Epochs that have a snapshot, in epoch order.
    Result<std::vector<std::string>> snapshot_epochs() const;
    // Modification time (ns) of DB/epochs/<epoch> or of its newest file (a
    // journal append changes only the file); an error when it is gone.
    Result<std::int64_t> epoch_stamp(const std::string& epoch) const;

    // Writes the batch, then the snapshot that includes it (snapshot.cuts ==
    // batch.cut). A crash between the two leaves a batch newer than its
    // snapshot, which open() removes: the next cut recomputes it.
    Result<void> enqueue(const PushBatch& batch, const PushSnapshot& snapshot);
    Result<void> save_snapshot(const PushSnapshot& snapshot);
    Result<void> remove_snapshot(const std::string& epoch);

    // Pending batches' names, oldest first (by epoch, then cut).
    Result<std::vector<std::string>> pending() const;
    Result<PushBatch> read_batch(const std::string& name) const;
    Result<void> remove_batch(const std::string& name);
    std::uint64_t pending_bytes() const;

    Result<PushCounters> counters() const;
    Result<void> save_counters(const PushCounters& counters);

private:
    PushQueue(std::filesystem::path database, std::filesystem::path dir, int lock_fd)
        : database_(std::move(database)), dir_(std::move(dir)), lock_fd_(lock_fd) {}
    Result<void> remove_orphans();
    std::filesystem::path database_;
    std::filesystem::path dir_;
    int lock_fd_ = -1;
};

// Encodings (exposed for tests).
[[nodiscard]] std::vector<std::uint8_t> encode_push_snapshot(const PushSnapshot& snapshot);
[[nodiscard]] Result<PushSnapshot> decode_push_snapshot(std::span<const std::uint8_t> bytes);
[[nodiscard]] std::vector<std::uint8_t> encode_push_batch(const PushBatch& batch);
[[nodiscard]] Result<PushBatch> decode_push_batch(std::span<const std::uint8_t> bytes);

}  // namespace ecpi::store
