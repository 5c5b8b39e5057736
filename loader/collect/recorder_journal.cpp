// The daemon's merges (issue 37): each flush is one journal record appended
// to the current epoch (bytes written proportional to the new data, not to
// the epoch), compacted when that pays, and epochs closed by time so that
// --max-disk can age data out.
#include <chrono>
#include <functional>

#include "recorder_session.h"

namespace ecpi::loader::detail {

namespace {

// A pid's names are remembered this many at a time, then forgotten all
// together (each live process is then written once more).
constexpr std::size_t kMaxStoredProcesses = 65536;

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::size_t names_hash(const store::ProcessMeta& p) {
    return std::hash<std::string>{}(p.comm) * 31 + std::hash<std::string>{}(p.cmdline);
}

}  // namespace

// The flat samples, the call stacks and the metadata of this flush as one
// record: all of it reaches the disk or none of it (then it stays for the
// next flush).
Result<void> Session::flush_journal() {
    store::EpochBatch batch;
    batch.profiles = flat_profiles();
    batch.stacks = stack_profiles();
    batch.meta = epoch_meta();
    if (auto r = db_->append(epoch_, batch); !r.ok()) {
        stored_processes_.clear();  // not written: name every process again next time
        return Error("writing to " + options_.database.string() + ": " + r.error().message());
    }
    flat_.clear();
    stacks_.clear();
    kernel_idle_.settle();
    count_flushed();
    compact_epoch(epoch_, options_.compact_bytes);
    if (options_.merged) options_.merged();
    return ok();
}

// A process is written into an epoch once, with the names it had then; again
// only when they changed (a reused pid, an exec).
void Session::forget_stored_processes(store::EpochMeta& meta) {
    if (stored_processes_.size() > kMaxStoredProcesses) stored_processes_.clear();
    std::erase_if(meta.processes, [this](const auto& entry) {
        const std::size_t h = names_hash(entry.second);
        auto [it, inserted] = stored_processes_.emplace(entry.first, h);
        if (inserted || it->second != h) {
            it->second = h;
            return false;
        }
        return true;
    });
}

void Session::compact_epoch(const std::string& epoch, std::uint64_t min_bytes) {
    auto r = db_->compact(epoch, min_bytes);
    if (!r.ok()) {
        warn_once(r.error().message() + " (the journal stays as it is; it is read the same)");
        return;
    }
    if (!r->done) return;
    ++compactions_;
    if (min_bytes == 0)
        log("compacted epoch " + epoch + ": " + std::to_string(r->before) + " -> " + std::to_string(r->after) + " bytes");
}

// --epoch-interval: an epoch older than the interval is closed (a restarted
// daemon counts from the epoch's first flush).
void Session::close_epoch_if_due() {
    if (options_.epoch_interval_s <= 0) return;
    const std::int64_t now = unix_now();
    if (epoch_started_unix_ == 0) {
        auto meta = db_->read_epoch_meta(epoch_);
        epoch_started_unix_ = meta.ok() && meta->first_sample_unix > 0 ? meta->first_sample_unix : now;
    }
    if (static_cast<double>(now - epoch_started_unix_) < options_.epoch_interval_s) return;
    auto closed = start_new_epoch();
    if (!closed.ok()) warn_once("cannot start a new epoch: " + closed.error().message());
    epoch_started_unix_ = now;
}

// What `ctl status` says about the disk: the database's size, the bytes the
// daemon wrote into it since it started, and their ratio to the growth.
nlohmann::json Session::disk_json() {
    const std::uint64_t bytes = db_->disk_bytes();
    const std::uint64_t written = db_->bytes_written();
    const std::uint64_t grown = bytes > disk_bytes_at_start_ ? bytes - disk_bytes_at_start_ : 0;
    nlohmann::json j{{"disk_bytes", bytes},
                     {"disk_written_bytes", written},
                     {"disk_compactions", compactions_},
                     {"disk_torn_bytes_dropped", db_->torn_bytes_dropped()}};
    j["write_amplification"] = grown > 0 ? nlohmann::json(static_cast<double>(written) / static_cast<double>(grown))
                                         : nlohmann::json(nullptr);
    return j;
}

}  // namespace ecpi::loader::detail
