#include "ecpi/loader/unwinder.h"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "ecpi/loader/stack_copy.h"
#include "ecpi_abi.h"

namespace ecpi::loader {

static_assert(sizeof(ecpi_unwind_mapping) == 32, "ABI: ecpi_unwind_mapping");
static_assert(sizeof(ecpi_unwind_table) == 24, "ABI: ecpi_unwind_table");

namespace {

constexpr const char* kVdso = "[vdso]";

struct MapsLine {
    std::uint64_t start = 0, end = 0, pgoff = 0;
    std::string inode_key;  // "dev inode path": one file, whatever its build id
    std::string path;
};

// The file-backed executable mappings of /proc/PID/maps.
std::vector<MapsLine> executable_mappings(const std::filesystem::path& maps_file) {
    std::vector<MapsLine> out;
    std::ifstream maps(maps_file);
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long long start = 0, end = 0, offset = 0;
        char perms[8] = {}, dev[32] = {};
        unsigned long long inode = 0;
        int path_pos = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %31s %llu %n", &start, &end, perms, &offset, dev, &inode,
                        &path_pos) < 6)
            continue;
        if (!std::strchr(perms, 'x') || path_pos <= 0 || static_cast<std::size_t>(path_pos) >= line.size()) continue;
        std::string path = line.substr(static_cast<std::size_t>(path_pos));
        if (path == kVdso) {
            out.push_back({start, end, offset, kVdso, kVdso});
            continue;
        }
        if (path.empty() || path[0] != '/' || path.ends_with(" (deleted)")) continue;
        out.push_back({start, end, offset, std::string(dev) + " " + std::to_string(inode) + " " + path, path});
    }
    return out;
}

// pc - bias is the ELF virtual address of a pc in a mapping of file offset pgoff.
std::optional<std::uint64_t> load_bias(const std::vector<ImageInfo::Segment>& segments, std::uint64_t start,
                                       std::uint64_t pgoff) {
    for (const auto& seg : segments) {
        if ((seg.offset & ~0xfffull) <= pgoff && pgoff < seg.offset + seg.filesz)
            return start - (seg.vaddr + pgoff - seg.offset);
    }
    return std::nullopt;
}

}  // namespace

Unwinder::Unwinder(UnwindMapFds maps, std::optional<std::filesystem::path> cache_dir, UnwindLimits limits)
    : maps_(maps), limits_(limits) {
    if (cache_dir) cache_.emplace(*cache_dir);
    // The BPF walk searches at most 2^24 rows per table.
    limits_.max_rows = std::min<std::uint64_t>(limits_.max_rows, 1u << 24);
    limits_.cancel = &stop_;
    // The walk of stack copies reads the kernel's rows where they are.
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    rows_view_bytes_ = (std::size_t{maps_.row_capacity} * sizeof(ecpi_unwind_row) + page - 1) / page * page;
    void* view = maps_.rows >= 0 ? mmap(nullptr, rows_view_bytes_, PROT_READ, MAP_SHARED, maps_.rows, 0) : MAP_FAILED;
    if (view == MAP_FAILED)
        warnings_.push_back(std::string("cannot map the unwind rows (") + std::strerror(errno) +
                            "); samples taken before a process's tables load are walked by frame pointers");
    else
        rows_view_ = view;
    worker_ = std::thread([this] { run(); });
}

Unwinder::~Unwinder() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_one();
    worker_.join();
    if (rows_view_) munmap(const_cast<void*>(rows_view_), rows_view_bytes_);
}

// The worker: reads the mappings of noted processes (building tables on the
// way) and removes exited ones, until stopped.
void Unwinder::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
        wake_.wait(lock, [this] { return stop_ || !pending_.empty() || !exited_.empty(); });
        if (stop_) return;
        auto pending = std::move(pending_);
        auto exited = std::move(exited_);
        pending_.clear();
        exited_.clear();
        busy_ = true;
        lock.unlock();
        for (auto pid : pending) {
            if (stop_) break;
            if (!exited.count(pid)) refresh_one(pid);
        }
        for (auto pid : exited) remove_process(pid);
        lock.lock();
        busy_ = false;
        shared_stats_ = stats_;
        idle_.notify_all();
    }
}

Unwinder::Stats Unwinder::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    Stats out = shared_stats_;
    out.stack_copies = copies_walked_;
    out.copied_ends = copied_totals_;
    return out;
}

std::vector<std::string> Unwinder::take_warnings() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(warnings_, {});
}

void Unwinder::refuse(const std::string& reason, const std::string& name, const std::string& detail) {
    ++stats_.refused[reason];
    if (detail == "cancelled") return;
    std::lock_guard<std::mutex> lock(mu_);
    warnings_.push_back("no unwind table for " + name + " (" + detail + "); its frames are walked by frame pointers");
}

// One image's table: from the disk cache when it holds a sound copy, else
// built (and then cached).
Result<UnwindTable> Unwinder::obtain_table(const std::filesystem::path& file, const std::string& build_id) {
    if (cache_ && !build_id.empty()) {
        auto cached = cache_->load(build_id);
        if (!cached.ok()) {
            ++stats_.cache["damaged"];
            std::lock_guard<std::mutex> lock(mu_);
            warnings_.push_back(cached.error().message());
        } else if (*cached) {
            ++stats_.cache["hits"];
            return std::move(**cached);
        }
    }
    auto started = std::chrono::steady_clock::now();
    auto table = build_unwind_table(file, limits_);
    stats_.build_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!table.ok() || !cache_ || build_id.empty()) return table;
    auto stored = cache_->store(build_id, *table);
    if (!stored.ok()) {
        ++stats_.cache["write_failed"];
        std::lock_guard<std::mutex> lock(mu_);
        warnings_.push_back("unwind tables are not cached: " + stored.error().message());
    } else {
        ++stats_.cache[*stored ? "written" : "full"];
    }
    return table;
}

// Obtains one image's table and copies it into the kernel's row array.
std::uint32_t Unwinder::load_table(const std::filesystem::path& file, const std::string& name,
                                   const std::string& build_id) {
    auto table = obtain_table(file, build_id);
    if (!table.ok()) {
        bool too_large = table.error().message().find("refused") != std::string::npos;
        refuse(too_large ? "too_large" : "unreadable", name, table.error().message());
        return ECPI_UNWIND_NO_TABLE;
    }
    if (table->rows.empty()) {
        ++stats_.refused["no_cfi"];
        return ECPI_UNWIND_NO_TABLE;
    }
    const auto n = static_cast<std::uint32_t>(table->rows.size());
    if (next_table_ >= ECPI_UNWIND_MAX_TABLES || n > maps_.row_capacity - next_row_) {
        refuse("space", name, "the kernel's row array is full");
        return ECPI_UNWIND_NO_TABLE;
    }
    std::vector<std::uint32_t> keys(n);
    std::vector<ecpi_unwind_row> values(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        keys[i] = next_row_ + i;
        to_abi(table->rows[i], values[i]);
    }
    __u32 count = n;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (bpf_map_update_batch(maps_.rows, keys.data(), values.data(), &count, &opts) != 0 || count != n) {
        refuse("unreadable", name, std::string("writing its rows: ") + std::strerror(errno));
        return ECPI_UNWIND_NO_TABLE;
    }
    ecpi_unwind_table t{};
    write_page_index(table->rows, t);
    t.first_row = next_row_;
    t.rows = n;
    std::uint32_t id = next_table_;
    if (bpf_map_update_elem(maps_.tables, &id, &t, BPF_ANY) != 0) {
        refuse("unreadable", name, std::string("writing its table: ") + std::strerror(errno));
        return ECPI_UNWIND_NO_TABLE;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        user_tables_.resize(id + 1);
        user_tables_[id] = {next_row_, n};
    }
    next_row_ += n;
    ++next_table_;
    ++stats_.tables;
    stats_.rows += n;
    return id;
}

// A table's page index into the kernel's page array; pages == 0 (the whole
// table is searched, counted as unindexed) where the array has no room.
void Unwinder::write_page_index(const std::vector<UnwindRow>& rows, ecpi_unwind_table& t) {
    const UnwindPageIndex index = build_page_index(rows);
    const auto n = static_cast<std::uint32_t>(index.below_page.size());
    if (n < 2 || maps_.pages < 0 || n > maps_.page_capacity - next_page_) {
        ++stats_.unindexed;
        return;
    }
    std::vector<std::uint32_t> keys(n);
    for (std::uint32_t i = 0; i < n; ++i) keys[i] = next_page_ + i;
    __u32 count = n;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    if (bpf_map_update_batch(maps_.pages, keys.data(), index.below_page.data(), &count, &opts) != 0 || count != n) {
        ++stats_.unindexed;
        return;
    }
    t.first_page = next_page_;
    t.pages = n - 1;
    t.base_page = index.base_page;
    next_page_ += n;
    stats_.page_entries += n;
}

// The vDSO's image: every process of this kernel maps the one this process
// maps, so it is copied from here (into a memory file) and built once.
const Unwinder::Image& Unwinder::vdso_image() {
    if (auto it = by_inode_.find(kVdso); it != by_inode_.end()) return it->second;
    Image img;
    img.table = ECPI_UNWIND_NO_TABLE;
    int fd = memfd_create("ecpi-vdso", MFD_CLOEXEC);
    const std::filesystem::path file = "/proc/self/fd/" + std::to_string(fd);
    auto build_id = fd >= 0 ? save_vdso(file) : Result<std::string>(Error::from_errno(errno, "memfd_create"));
    auto layout = build_id.ok() ? read_elf_layout(file) : Result<ElfLayout>(build_id.error());
    if (layout.ok()) {
        img.segments = layout->segments;
        img.table = load_table(file, kVdso, *build_id);
    } else {
        refuse("unreadable", kVdso, layout.error().message());
    }
    if (fd >= 0) ::close(fd);
    return by_inode_.emplace(kVdso, img).first->second;
}

// The image behind one mapping: by inode first, then by build id, else built.
const Unwinder::Image& Unwinder::image(std::uint32_t pid, const std::string& path, const std::string& inode_key) {
    if (path == kVdso) return vdso_image();
    if (auto it = by_inode_.find(inode_key); it != by_inode_.end()) return it->second;
    Image img;
    img.table = ECPI_UNWIND_NO_TABLE;
    auto file = proc_root_ / std::to_string(pid) / "root" / std::filesystem::path(path).relative_path();
    auto layout = read_elf_layout(file);
    if (!layout.ok()) {
        static const Image none{ECPI_UNWIND_NO_TABLE, {}};
        std::error_code ec;
        if (!std::filesystem::exists(proc_root_ / std::to_string(pid), ec)) return none;  // exited meanwhile: try again later
        refuse("unreadable", path, layout.error().message());
        return by_inode_.emplace(inode_key, img).first->second;
    }
    img.segments = layout->segments;
    if (!layout->build_id.empty()) {
        if (auto it = by_build_id_.find(layout->build_id); it != by_build_id_.end()) {
            img.table = it->second;
            return by_inode_.emplace(inode_key, img).first->second;
        }
    }
    img.table = load_table(file, path, layout->build_id);
    if (!layout->build_id.empty()) by_build_id_[layout->build_id] = img.table;
    return by_inode_.emplace(inode_key, img).first->second;
}

void Unwinder::refresh_one(std::uint32_t pid) {
    auto lines = executable_mappings(proc_root_ / std::to_string(pid) / "maps");
    if (lines.empty()) return;  // exited, or a kernel thread
    auto value = std::make_unique<ecpi_unwind_process>();
    std::vector<UserMapping> mirror;
    std::memset(value.get(), 0, sizeof *value);
    std::sort(lines.begin(), lines.end(), [](const MapsLine& a, const MapsLine& b) { return a.start < b.start; });
    for (const auto& line : lines) {
        if (value->count >= ECPI_UNWIND_MAX_MAPPINGS) {
            ++stats_.refused["too_many_mappings"];
            break;
        }
        const Image& img = image(pid, line.path, line.inode_key);
        auto bias = load_bias(img.segments, line.start, line.pgoff);
        auto& m = value->mappings[value->count++];
        m.start = line.start;
        m.end = line.end;
        m.bias = bias.value_or(0);
        m.table = bias ? img.table : ECPI_UNWIND_NO_TABLE;
        mirror.push_back({m.start, m.end, m.bias, m.table});
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        user_processes_[pid] = std::move(mirror);
    }
    value->generation = next_generation_++;
    if (next_generation_ == 0) next_generation_ = 1;
    if (bpf_map_update_elem(maps_.processes, &pid, value.get(), BPF_ANY) == 0) {
        loaded_.insert(pid);
        stats_.processes = loaded_.size();
    } else {
        ++stats_.refused["process_map_full"];
    }
}

void Unwinder::follow_only(const std::vector<std::uint32_t>& pids, bool read_now) {
    std::lock_guard<std::mutex> lock(mu_);
    followed_.emplace(pids.begin(), pids.end());
    if (read_now) pending_.insert(pids.begin(), pids.end());
    wake_.notify_one();
}

void Unwinder::note(std::uint32_t pid) {
    std::lock_guard<std::mutex> lock(mu_);
    if (followed_ && !followed_->count(pid)) return;
    pending_.insert(pid);
    wake_.notify_one();
}

void Unwinder::note_fork(std::uint32_t pid, std::uint32_t parent) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (followed_ && followed_->count(parent)) followed_->insert(pid);
    }
    note(pid);
}

void start_unwinder(std::optional<Unwinder>& out, const Sampler& sampler, const std::vector<std::uint32_t>& pids,
                    bool read_now, std::optional<std::filesystem::path> cache_dir) {
    out.emplace(sampler.unwind_maps(), std::move(cache_dir));
    if (!pids.empty()) return out->follow_only(pids, read_now);
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const auto name = entry.path().filename().string();
        if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit))
            out->note(static_cast<std::uint32_t>(std::stoul(name)));
    }
}

std::map<std::string, double> unwinder_summary(const Unwinder::Stats& stats) {
    std::map<std::string, double> out = {{"tables", static_cast<double>(stats.tables)},
                                         {"rows", static_cast<double>(stats.rows)},
                                         {"locked_bytes", static_cast<double>(stats.rows * sizeof(ecpi_unwind_row) +
                                                                              stats.page_entries * sizeof(std::uint32_t))},
                                         {"page_entries", static_cast<double>(stats.page_entries)},
                                         {"unindexed", static_cast<double>(stats.unindexed)},
                                         {"processes", static_cast<double>(stats.processes)},
                                         {"stack_copies", static_cast<double>(stats.stack_copies)},
                                         {"build_s", stats.build_s}};
    for (const auto& [reason, n] : stats.refused) out["refused." + reason] = static_cast<double>(n);
    for (const auto& [what, n] : stats.cache) out["cache." + what] = static_cast<double>(n);
    return out;
}

void add_stack_ends(const SamplerCounters& now, std::array<std::uint64_t, 7>& flushed, store::EventMeta& meta) {
    for (std::size_t i = 0; i < now.stack_ends.size(); ++i) {
        if (now.stack_ends[i] > flushed[i]) meta.stack_ends[kStackEndNames[i]] += now.stack_ends[i] - flushed[i];
        flushed[i] = now.stack_ends[i];
    }
}

void Unwinder::forget(std::uint32_t pid) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(pid);
    if (followed_) followed_->erase(pid);
    exited_.insert(pid);
    gone_.emplace(pid, std::chrono::steady_clock::now());
    wake_.notify_one();
}

void Unwinder::remove_process(std::uint32_t pid) {
    if (loaded_.erase(pid)) bpf_map_delete_elem(maps_.processes, &pid);
    stats_.processes = loaded_.size();
}

// The sampler's unwind_lookup over the mirrored mappings and the mapped rows.
std::uint32_t Unwinder::lookup_locked(std::uint32_t pid, std::uint64_t pc, UnwindRow& row) const {
    auto p = user_processes_.find(pid);
    if (p == user_processes_.end() || !rows_view_) return ECPI_COUNTER_CUT_NO_TABLE;
    const auto& ms = p->second;
    auto m = std::upper_bound(ms.begin(), ms.end(), pc, [](std::uint64_t v, const UserMapping& x) { return v < x.start; });
    if (m == ms.begin() || pc >= (m - 1)->end) return ECPI_COUNTER_CUT_NO_ROW;
    --m;
    if (m->table == ECPI_UNWIND_NO_TABLE || m->table >= user_tables_.size() || user_tables_[m->table].second == 0)
        return ECPI_COUNTER_CUT_NO_TABLE;
    const std::uint64_t vaddr = pc - m->bias;
    if (vaddr > UINT32_MAX) return ECPI_COUNTER_CUT_NO_ROW;
    const auto [first, n] = user_tables_[m->table];
    if (std::uint64_t{first} + n > maps_.row_capacity) return ECPI_COUNTER_CUT_NO_TABLE;
    const auto* rows = static_cast<const ecpi_unwind_row*>(rows_view_) + first;
    const auto* it = std::upper_bound(rows, rows + n, vaddr, [](std::uint64_t v, const ecpi_unwind_row& r) { return v < r.pc; });
    if (it == rows) return ECPI_COUNTER_CUT_NO_ROW;
    --it;
    row = {it->pc, it->kind, it->rbp_offset8, it->cfa_offset8};
    if (row.kind == ECPI_UNWIND_NONE) return ECPI_COUNTER_CUT_NO_ROW;
    if (row.kind == ECPI_UNWIND_INVALID) return ECPI_COUNTER_CUT_UNSUPPORTED;
    return 0;
}

// Walks one stack copy if its process is loaded (or will never be, or it
// waited long enough); false: still waiting.
bool Unwinder::settle_locked(RawStackSample& sample, std::chrono::steady_clock::time_point since,
                             std::chrono::steady_clock::time_point now) {
    const bool ready = user_processes_.count(sample.tgid) != 0;
    if (!ready && !final_ && !gone_.count(sample.tgid) && now - since < std::chrono::seconds(5)) return false;
    auto walk = walk_stack_copy(*sample.copy, [&](std::uint64_t pc, UnwindRow& row) {
        return lookup_locked(sample.tgid, pc, row);
    });
    sample.user_ips = std::move(walk.ips);
    sample.copy.reset();
    ++copies_walked_;
    if (walk.end >= ECPI_COUNTER_STACK_ROOT && walk.end < ECPI_COUNTER_STACK_ROOT + kStackEndNames.size()) {
        ++copied_ends_[sample.event][walk.end - ECPI_COUNTER_STACK_ROOT];
        ++copied_totals_[walk.end - ECPI_COUNTER_STACK_ROOT];
    }
    return true;
}

// Exited processes' mirrors go once no copy of theirs can still arrive.
void Unwinder::purge_gone_locked(std::chrono::steady_clock::time_point now) {
    for (auto it = gone_.begin(); it != gone_.end();) {
        if (now - it->second < std::chrono::seconds(10)) {
            ++it;
            continue;
        }
        user_processes_.erase(it->first);
        it = gone_.erase(it);
    }
}

void Unwinder::complete(std::vector<RawStackSample>& samples) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Held> waiting;
    for (std::size_t i = 0; i < samples.size();) {
        if (!samples[i].copy || settle_locked(samples[i], now, now)) {
            ++i;
            continue;
        }
        waiting.push_back({now, std::move(samples[i])});
        samples[i] = std::move(samples.back());
        samples.pop_back();
    }
    for (auto& h : held_) {
        if (settle_locked(h.sample, h.since, now)) samples.push_back(std::move(h.sample));
        else waiting.push_back(std::move(h));
    }
    held_ = std::move(waiting);
    purge_gone_locked(now);
}

std::uint64_t Unwinder::oldest_held_ns() const {
    std::uint64_t oldest = ~0ull;
    for (const auto& h : held_) oldest = std::min(oldest, h.sample.time_ns);
    return oldest;
}

void Unwinder::finish(double wait_s) {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait_for(lock, std::chrono::duration<double>(wait_s), [this] { return pending_.empty() && !busy_; });
    final_ = true;
}

void Unwinder::add_copied_ends(std::uint16_t event, store::EventMeta& meta) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = copied_ends_.find(event);
    if (it == copied_ends_.end()) return;
    for (std::size_t i = 0; i < it->second.size(); ++i)
        if (it->second[i]) meta.stack_ends[kStackEndNames[i]] += it->second[i];
    copied_ends_.erase(it);
}

nlohmann::json unwind_status_json(const Unwinder::Stats& stats, const std::vector<SamplerCounters>& counters) {
    nlohmann::json j = unwinder_summary(stats);
    std::array<std::uint64_t, kStackEndNames.size()> ends = stats.copied_ends;
    for (const auto& c : counters)
        for (std::size_t i = 0; i < ends.size(); ++i) ends[i] += c.stack_ends[i];
    nlohmann::json by_reason = nlohmann::json::object();
    std::uint64_t walks = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) {
        by_reason[kStackEndNames[i]] = ends[i];
        walks += ends[i];
    }
    j["stack_ends"] = by_reason;
    j["walks"] = walks;
    j["root_share"] = walks ? static_cast<double>(ends[0]) / static_cast<double>(walks) : 0.0;
    return j;
}

std::string unwind_status_line(const nlohmann::json& j) {
    std::string cuts;
    const nlohmann::json ends = j.contains("stack_ends") && j["stack_ends"].is_object() ? j["stack_ends"] : nlohmann::json::object();
    for (const auto& [reason, n] : ends.items()) {
        if (reason == "root" || !n.is_number_unsigned() || n.get<std::uint64_t>() == 0) continue;
        cuts += (cuts.empty() ? "" : ", ") + reason + " " + std::to_string(n.get<std::uint64_t>());
    }
    char line[256];
    std::snprintf(line, sizeof line, "unwinding:   %.0f tables, %.1f MB locked, %.0f processes; %.1f%% of %llu walks reached the thread root",
                  j.value("tables", 0.0), j.value("locked_bytes", 0.0) / (1 << 20), j.value("processes", 0.0),
                  100.0 * j.value("root_share", 0.0), static_cast<unsigned long long>(j.value("walks", 0ull)));
    std::string refused;
    for (const auto& [key, n] : j.items()) {
        if (!key.starts_with("refused.") || !n.is_number() || n.get<double>() <= 0) continue;
        refused += (refused.empty() ? "" : ", ") + key.substr(8) + " " + std::to_string(n.get<std::uint64_t>());
    }
    return std::string(line) + (cuts.empty() ? "" : " (cut: " + cuts + ")") +
           (refused.empty() ? "" : "; images without a table: " + refused);
}

}  // namespace ecpi::loader
