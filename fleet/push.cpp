// Cutting deltas of a profile database into batches and delivering them to
// ClickHouse. Contracts: include/ecpi/fleet/push.h; wire schema: fleet/schema.cpp.
#include "ecpi/fleet/push.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <map>
#include <random>
#include <set>

#include "ecpi/analyze/reports/kernel_idle.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/fleet/schema.h"
#include "ecpi/store/profile.h"
#include "ecpi/store/push_state.h"

namespace ecpi::fleet {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUnknownProcedure = "[unknown]";
// Sections of a batch, in the order they are inserted: facts first (their
// tables fold repeats), then the counted rows, each checked by token first.
constexpr const char* kFactTables[] = {"images", "symbols", "stacks"};
constexpr const char* kCountedTables[] = {"samples", "events", "stack_samples"};

std::uint64_t random_token() {
    static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                            static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    std::uint64_t t = 0;
    while (t == 0) t = rng();
    return t;
}

std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
    for (unsigned char c : bytes) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

std::string local_hostname() {
    char buf[256] = {0};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
    return buf;
}

// Counts of one epoch merged over processes, keyed for subtraction.
struct EpochCounts {
    std::map<std::pair<store::ImageId, std::string>, store::ImageProfile> profiles;  // (image, event)
    std::map<std::string, store::StackProfile> stacks;                              // event
    std::map<std::string, store::EventMeta> events;
};

EpochCounts merged_counts(const store::EpochContents& contents) {
    EpochCounts out;
    for (const auto& p : contents.profiles) {
        store::ImageProfile merged{p.image, p.event, p.period, {{store::kAllProcesses, p.merged()}}};
        if (merged.processes.front().counts.empty()) continue;
        auto [it, fresh] = out.profiles.try_emplace({p.image, p.event}, merged);
        if (!fresh) (void)store::merge_into(it->second, merged);
        store::EventMeta& e = out.events[p.event];
        e.period = p.period;
        e.samples += merged.total();
        if (p.image.path == store::kUnknownImage) e.unknown += merged.total();
    }
    for (const auto& s : contents.stacks) {
        store::StackProfile copy = s;
        for (auto& st : copy.stacks) st.pid = store::kAllProcesses;
        auto [it, fresh] = out.stacks.try_emplace(s.event, store::StackProfile{s.event, s.period, {}, {}});
        (void)fresh;
        if (it->second.period != copy.period) copy.period = it->second.period;
        (void)store::merge_into(it->second, copy);
    }
    // Idle as local reports count it: from the kernel's accounting where the
    // epoch has it (issue 30), so fleet and local reports agree.
    store::EpochContents idle_view;
    idle_view.meta = contents.meta;
    analyze::idle_from_kernel(idle_view);
    for (const auto& [name, meta] : idle_view.meta.events) {
        store::EventMeta& e = out.events[name];
        e.lost = meta.lost;
        e.idle = meta.idle;
        if (e.period == 0) e.period = meta.period;
    }
    return out;
}

EpochCounts counts_of(const store::PushSnapshot& snap) {
    EpochCounts out;
    for (const auto& p : snap.profiles) out.profiles[{p.image, p.event}] = p;
    for (const auto& s : snap.stacks) out.stacks[s.event] = s;
    out.events = snap.events;
    return out;
}

std::uint64_t minus(std::uint64_t now, std::uint64_t before) { return now > before ? now - before : 0; }

// RowBinary rows of one batch, table by table.
class BatchBuilder {
public:
    BatchBuilder(std::string host, std::int64_t time, std::uint64_t token, analyze::Symbolizer& symbolizer)
        : host_(std::move(host)), time_(time), token_(token), symbolizer_(symbolizer) {
        days_ = static_cast<std::uint16_t>(time_ / 86400);
    }

    void add_profile_delta(const store::ImageProfile& now, const store::ImageProfile* before) {
        const auto& counts = now.processes.front().counts;
        std::map<std::uint64_t, std::uint64_t> old;
        if (before != nullptr && !before->processes.empty())
            for (const auto& oc : before->processes.front().counts) old[oc.offset] = oc.count;
        const analyze::SymbolTable* table = symbol_table(now.image);
        bool image_row = false;
        for (const auto& oc : counts) {
            auto it = old.find(oc.offset);
            std::uint64_t delta = minus(oc.count, it == old.end() ? 0 : it->second);
            if (delta == 0) continue;
            const analyze::Symbol* sym = table != nullptr ? table->lookup(oc.offset) : nullptr;
            const std::string& procedure = sym != nullptr ? sym->name : unknown_;
            if (sym != nullptr) add_symbol(now.image, *table, *sym);
            if (!image_row) {
                add_image(now.image);
                image_row = true;
            }
            row_prefix(samples_, now.event);
            samples_.string(now.image.build_id);
            samples_.string(now.image.path);
            samples_.string(procedure);
            samples_.u64(oc.offset);
            samples_.u64(delta);
            samples_.u64(token_);
            samples += delta;
            ++sample_rows;
        }
    }

    void add_stack_delta(const store::StackProfile& now, const store::StackProfile* before) {
        std::map<std::vector<store::StackFrame>, std::uint64_t> old;
        std::vector<store::ImageId> old_images;
        if (before != nullptr) {
            // Frames index their own profile's image table: compare by image identity.
            for (const auto& s : before->stacks) old[reindex(s.frames, before->images)] += s.count;
        }
        for (const auto& s : now.stacks) {
            auto key = reindex(s.frames, now.images);
            auto it = old.find(key);
            std::uint64_t delta = minus(s.count, it == old.end() ? 0 : it->second);
            if (delta == 0) continue;
            std::uint64_t id = stack_row(s.frames, now.images);
            row_prefix(stack_samples_, now.event);
            stack_samples_.u64(id);
            stack_samples_.u64(delta);
            stack_samples_.u64(token_);
            ++sample_rows;
        }
    }

    void add_event(const std::string& event, const store::EventMeta& now, const store::EventMeta& before) {
        std::uint64_t samples = minus(now.samples, before.samples), lost = minus(now.lost, before.lost),
                      idle = minus(now.idle, before.idle);
        if (samples == 0 && lost == 0 && idle == 0) return;
        row_prefix(events_, event);
        events_.u64(now.period);
        events_.u64(samples);
        events_.u64(lost);
        events_.u64(token_);
        events_.u64(idle);
        ++event_rows;
    }

    std::map<std::string, std::vector<std::uint8_t>> sections() {
        std::map<std::string, std::vector<std::uint8_t>> out;
        auto put = [&](const char* name, RowBinaryWriter& w) {
            if (!w.bytes.empty()) out[name] = std::move(w.bytes);
        };
        put("samples", samples_);
        put("events", events_);
        put("images", images_);
        put("symbols", symbols_);
        put("stacks", stacks_);
        put("stack_samples", stack_samples_);
        return out;
    }

    std::uint64_t samples = 0, sample_rows = 0, event_rows = 0;

private:
    // Stack frames as (image identity, offset) so two epochs' tables compare.
    std::vector<store::StackFrame> reindex(const std::vector<store::StackFrame>& frames,
                                           const std::vector<store::ImageId>& images) {
        std::vector<store::StackFrame> out;
        for (const auto& f : frames) {
            const store::ImageId& id = f.image < images.size() ? images[f.image] : unknown_image_;
            auto [it, fresh] = image_index_.try_emplace(id, static_cast<std::uint32_t>(image_index_.size()));
            (void)fresh;
            out.push_back({it->second, f.offset});
        }
        return out;
    }

    std::uint64_t stack_row(const std::vector<store::StackFrame>& frames, const std::vector<store::ImageId>& images) {
        std::vector<std::string> build_ids, paths, procedures;
        std::vector<std::uint64_t> addresses;
        std::uint64_t id = 0xcbf29ce484222325ull;
        for (const auto& f : frames) {
            const store::ImageId& image = f.image < images.size() ? images[f.image] : unknown_image_;
            const analyze::SymbolTable* table = symbol_table(image);
            const analyze::Symbol* sym = table != nullptr ? table->lookup(f.offset) : nullptr;
            build_ids.push_back(image.build_id);
            paths.push_back(image.path);
            procedures.push_back(sym != nullptr ? sym->name : unknown_);
            addresses.push_back(f.offset);
            id = fnv1a(id, image.build_id);
            id = fnv1a(id, std::string_view("\0", 1));
            id = fnv1a(id, image.path);
            id = fnv1a(id, std::string_view("\0", 1));
            id = fnv1a(id, std::string_view(reinterpret_cast<const char*>(&f.offset), sizeof f.offset));
        }
        if (stacks_seen_.insert(id).second) {
            stacks_.u64(id);
            for (const auto* column : {&build_ids, &paths, &procedures}) {
                stacks_.varint(column->size());
                for (const auto& s : *column) stacks_.string(s);
            }
            stacks_.varint(addresses.size());
            for (auto a : addresses) stacks_.u64(a);
            stacks_.string(host_);
        }
        return id;
    }

    const analyze::SymbolTable* symbol_table(const store::ImageId& image) {
        if (image.path == store::kUnknownImage) return nullptr;
        const Result<analyze::SymbolTable>& t = symbolizer_.table(image);
        return t.ok() ? &t.value() : nullptr;
    }

    void add_symbol(const store::ImageId& image, const analyze::SymbolTable& table, const analyze::Symbol& sym) {
        if (!symbols_seen_.insert({image, sym.name}).second) return;
        symbols_.string(image.build_id);
        symbols_.string(image.path);
        symbols_.string(sym.name);
        symbols_.u64(sym.start);
        symbols_.u64(table.end_of(sym) - sym.start);
        symbols_.string(host_);
    }

    void add_image(const store::ImageId& image) {
        if (!images_seen_.insert(image).second) return;
        images_.string(image.build_id);
        images_.string(image.path);
        images_.string(host_);
        images_.u32(static_cast<std::uint32_t>(time_));
    }

    // date, time, host, event: the first columns of every counted table.
    void row_prefix(RowBinaryWriter& w, const std::string& event) {
        w.u16(days_);
        w.u32(static_cast<std::uint32_t>(time_));
        w.string(host_);
        w.string(event);
    }

    std::string host_;
    std::int64_t time_;
    std::uint64_t token_;
    std::uint16_t days_ = 0;
    analyze::Symbolizer& symbolizer_;
    const std::string unknown_ = kUnknownProcedure;
    const store::ImageId unknown_image_{store::kUnknownImage, ""};
    RowBinaryWriter samples_, events_, images_, symbols_, stacks_, stack_samples_;
    std::set<std::pair<store::ImageId, std::string>> symbols_seen_;
    std::set<store::ImageId> images_seen_;
    std::set<std::uint64_t> stacks_seen_;
    std::map<store::ImageId, std::uint32_t> image_index_;
};

}  // namespace

std::string push_target_name(const ClickHouseUrl& url) {
    std::string out;
    for (char c : url.host + "_" + std::to_string(url.port) + "_" + url.database) {
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
        out += keep ? c : '_';
    }
    if (!out.empty() && out.front() == '.') out.front() = '_';
    return out.substr(0, 128);
}

struct Pusher::Impl {
    fs::path database;
    ClickHouseClient client;
    PushOptions options;
    store::PushQueue queue;
    analyze::Symbolizer symbolizer;
    store::PushCounters counters;
    bool backlog_warned = false;

    Impl(fs::path db, ClickHouseClient c, PushOptions o, store::PushQueue q)
        : database(std::move(db)),
          client(std::move(c)),
          options(std::move(o)),
          queue(std::move(q)),
          symbolizer(analyze::Symbolizer::Options{.database = database}) {}

    void log(const std::string& line) const {
        if (options.log) options.log(line);
    }

    Result<void> cut(PushProgress& progress);
    Result<void> cut_epoch(store::Database& db, const std::string& epoch, bool newest, PushProgress& progress);
    Result<void> forget_removed_epochs(const std::vector<std::string>& epochs, PushProgress& progress);
    Result<void> send(PushProgress& progress);
    Result<void> send_batch(const store::PushBatch& batch, PushProgress& progress);
    Result<std::set<std::string>> tables_holding(const store::PushBatch& batch);
};

Result<void> Pusher::Impl::cut(PushProgress& progress) {
    ECPI_ASSIGN_OR_RETURN(store::Database db, store::Database::open(database, store::Database::Mode::kReadOnly));
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> epochs, db.epochs());
    ECPI_RETURN_IF_ERROR(forget_removed_epochs(epochs, progress));
    progress.backlog_full = false;
    for (std::size_t i = 0; i < epochs.size(); ++i) {
        auto r = cut_epoch(db, epochs[i], i + 1 == epochs.size(), progress);
        if (!r.ok()) return r.error().with_context("epoch " + epochs[i]);
    }
    ECPI_ASSIGN_OR_RETURN(auto pending, queue.pending());
    progress.batches_pending = pending.size();
    progress.pending_bytes = queue.pending_bytes();
    return ok();
}

// Epochs with an open cursor that the database no longer has (--max-disk
// removed them): what they gained after their last cut is lost to the fleet.
Result<void> Pusher::Impl::forget_removed_epochs(const std::vector<std::string>& epochs, PushProgress& progress) {
    std::set<std::string> present(epochs.begin(), epochs.end());
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> cursors, queue.snapshot_epochs());
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> pending, queue.pending());
    std::set<std::string> queued;  // epochs with batches still to send: their cursors must stay (PushQueue::open)
    for (const auto& name : pending) queued.insert(name.substr(0, name.find('-')));
    for (const auto& e : cursors) {
        if (present.count(e) != 0 || queued.count(e) != 0) continue;
        ECPI_ASSIGN_OR_RETURN(std::optional<store::PushSnapshot> snap, queue.snapshot(e));
        if (snap && !snap->closed) {
            ++counters.epochs_lost;
            ++progress.epochs_lost;
            ECPI_RETURN_IF_ERROR(queue.save_counters(counters));
            log("epoch " + e + " was removed from " + database.string() +
                " before it was pushed in full: samples it gained after its last push may be missing from the fleet (" +
                std::to_string(counters.epochs_lost) + " such epochs so far; raise --max-disk or --push-backlog)");
        }
        // Keep the newest closed cursor: it is cheap and shows where pushing stands.
        if (e != cursors.back() || (snap && !snap->closed)) ECPI_RETURN_IF_ERROR(queue.remove_snapshot(e));
    }
    return ok();
}

Result<void> Pusher::Impl::cut_epoch(store::Database& db, const std::string& epoch, bool newest, PushProgress& progress) {
    ECPI_ASSIGN_OR_RETURN(std::optional<store::PushSnapshot> snap, queue.snapshot(epoch));
    if (snap && snap->closed) return ok();
    auto stamp = queue.epoch_stamp(epoch);
    if (!stamp.ok()) return ok();  // removed meanwhile: the next cut accounts for it
    if (snap && *stamp == snap->stamp_ns) {
        if (!newest) {  // nobody writes it any more and all of it is cut
            snap->closed = true;
            snap->profiles.clear();
            snap->stacks.clear();
            ECPI_RETURN_IF_ERROR(queue.save_snapshot(*snap));
        }
        return ok();
    }
    if (queue.pending_bytes() >= options.max_backlog_bytes) {
        progress.backlog_full = true;
        if (!backlog_warned)
            log("push backlog is full (" + std::to_string(options.max_backlog_bytes >> 20) + " MB queued in " +
                queue.dir().string() + "): new samples wait in the database until the server takes the queue");
        backlog_warned = true;
        return ok();
    }
    backlog_warned = false;

    ECPI_ASSIGN_OR_RETURN(store::EpochContents contents, db.read_epoch(epoch));
    EpochCounts now = merged_counts(contents);
    EpochCounts before = snap ? counts_of(*snap) : EpochCounts{};

    std::string host = options.host;
    if (host.empty()) host = contents.meta.hostname.empty() ? local_hostname() : contents.meta.hostname;
    std::int64_t time = contents.meta.last_update_unix;
    if (time <= 0) time = static_cast<std::int64_t>(std::time(nullptr));
    store::PushBatch batch;
    batch.epoch = epoch;
    batch.token = random_token();
    batch.host = host;
    batch.time_unix = time;
    BatchBuilder builder(host, time, batch.token, symbolizer);
    for (const auto& [key, profile] : now.profiles) {
        auto it = before.profiles.find(key);
        builder.add_profile_delta(profile, it == before.profiles.end() ? nullptr : &it->second);
    }
    for (const auto& [event, stacks] : now.stacks) {
        auto it = before.stacks.find(event);
        builder.add_stack_delta(stacks, it == before.stacks.end() ? nullptr : &it->second);
    }
    for (const auto& [event, meta] : now.events) {
        auto it = before.events.find(event);
        builder.add_event(event, meta, it == before.events.end() ? store::EventMeta{} : it->second);
    }

    store::PushSnapshot next;
    next.epoch = epoch;
    next.stamp_ns = *stamp;  // taken before the read: a merge during the read shows as a change next time
    next.cuts = snap ? snap->cuts : 0;
    for (auto& [key, p] : now.profiles) next.profiles.push_back(std::move(p));
    for (auto& [event, s] : now.stacks) next.stacks.push_back(std::move(s));
    next.events = std::move(now.events);
    if (builder.sample_rows == 0 && builder.event_rows == 0) return queue.save_snapshot(next);

    batch.samples = builder.samples;
    batch.sections = builder.sections();
    for (auto& [name, bytes] : batch.sections) {
        ECPI_ASSIGN_OR_RETURN(bytes, gzip_compress(bytes));
    }
    batch.cut = ++next.cuts;
    ECPI_RETURN_IF_ERROR(queue.enqueue(batch, next));
    ++progress.batches_cut;
    progress.samples_cut += batch.samples;
    return ok();
}

Result<std::set<std::string>> Pusher::Impl::tables_holding(const store::PushBatch& batch) {
    std::string db = sql_identifier(client.url().database);
    std::string where = " WHERE host = " + sql_string(batch.host) + " AND time = toDateTime(" +
                        std::to_string(batch.time_unix) + ") AND batch = " + std::to_string(batch.token);
    std::string sql;
    for (const char* table : kCountedTables) {
        if (batch.sections.count(table) == 0) continue;
        if (!sql.empty()) sql += " UNION ALL ";
        sql += "SELECT " + sql_string(table) + ", count() FROM " + db + "." + table + where;
    }
    std::set<std::string> present;
    if (sql.empty()) return present;
    ECPI_ASSIGN_OR_RETURN(auto rows, client.select(sql));
    for (const auto& row : rows)
        if (row.size() == 2 && row[1] != "0") present.insert(row[0]);
    return present;
}

Result<void> Pusher::Impl::send_batch(const store::PushBatch& batch, PushProgress& progress) {
    // A Distributed table must forward the insert before answering, or an
    // acknowledged batch could still be lost with the front server.
    const std::map<std::string, std::string> settings = {{"insert_distributed_sync", "1"}};
    for (const char* table : kFactTables) {
        auto it = batch.sections.find(table);
        if (it != batch.sections.end()) ECPI_RETURN_IF_ERROR(client.insert_gzipped(table, it->second, settings));
    }
    ECPI_ASSIGN_OR_RETURN(std::set<std::string> present, tables_holding(batch));
    bool all_there = !present.empty();
    for (const char* table : kCountedTables) {
        auto it = batch.sections.find(table);
        if (it == batch.sections.end()) continue;
        if (present.count(table) != 0) continue;
        all_there = false;
        ECPI_RETURN_IF_ERROR(client.insert_gzipped(table, it->second, settings));
    }
    if (all_there) ++progress.batches_already_there;
    return ok();
}

Result<void> Pusher::Impl::send(PushProgress& progress) {
    ECPI_ASSIGN_OR_RETURN(std::vector<std::string> names, queue.pending());
    for (const auto& name : names) {
        auto batch = queue.read_batch(name);
        if (!batch.ok()) return batch.error().with_context("reading the push backlog");
        ECPI_RETURN_IF_ERROR(send_batch(*batch, progress));
        ECPI_RETURN_IF_ERROR(queue.remove_batch(name));
        ++progress.batches_sent;
        progress.samples_sent += batch->samples;
        ++counters.batches_sent;
        counters.samples_sent += batch->samples;
    }
    if (!names.empty()) ECPI_RETURN_IF_ERROR(queue.save_counters(counters));
    ECPI_ASSIGN_OR_RETURN(auto pending, queue.pending());
    progress.batches_pending = pending.size();
    progress.pending_bytes = queue.pending_bytes();
    return ok();
}

Result<Pusher> Pusher::open(const fs::path& database, ClickHouseClient client, PushOptions options) {
    ECPI_RETURN_IF_ERROR(store::Database::open(database, store::Database::Mode::kReadOnly));
    ECPI_ASSIGN_OR_RETURN(store::PushQueue queue, store::PushQueue::open(database, push_target_name(client.url())));
    ECPI_ASSIGN_OR_RETURN(store::PushCounters counters, queue.counters());
    auto impl = std::make_unique<Impl>(database, std::move(client), std::move(options), std::move(queue));
    impl->counters = counters;
    return Pusher(std::move(impl));
}

Pusher::Pusher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Pusher::Pusher(Pusher&&) noexcept = default;
Pusher& Pusher::operator=(Pusher&&) noexcept = default;
Pusher::~Pusher() = default;

Result<void> Pusher::cut(PushProgress& progress) { return impl_->cut(progress); }

Result<void> Pusher::send(PushProgress& progress) {
    ECPI_RETURN_IF_ERROR(check_schema(impl_->client));
    return impl_->send(progress);
}

// ---- the daemon's push thread -------------------------------------------------

PushLoop::PushLoop(Pusher pusher, double interval_s, std::function<void(const std::string&)> log)
    : pusher_(std::move(pusher)), interval_s_(interval_s), log_(std::move(log)) {
    thread_ = std::thread([this] { run(); });
}

PushLoop::~PushLoop() {
    if (thread_.joinable()) stop(false);
}

void PushLoop::notify() {
    std::lock_guard lock(mutex_);
    notified_ = true;
    wake_.notify_one();
}

void PushLoop::cycle() {
    auto r = pusher_.cut(progress_);
    if (r.ok()) r = pusher_.send(progress_);
    if (!r.ok()) {
        if (!failing_ && log_)
            log_("push failed: " + r.error().message() + "; samples stay queued, retrying after each merge "
                 "(logged once until it works)");
        failing_ = true;
    } else if (failing_) {
        failing_ = false;
        if (log_)
            log_("push works again: " + std::to_string(progress_.batches_sent) + " batches (" +
                 std::to_string(progress_.samples_sent) + " samples) delivered so far, " +
                 std::to_string(progress_.batches_pending) + " queued");
    }
}

void PushLoop::run() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        wake_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return notified_ || stopping_; });
        if (stopping_) break;
        notified_ = false;
        lock.unlock();
        cycle();
        lock.lock();
    }
}

PushProgress PushLoop::stop(bool final_push) {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    if (final_push) cycle();
    return progress_;
}

}  // namespace ecpi::fleet
