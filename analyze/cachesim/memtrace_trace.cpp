// Memory-reference traces (include/ecpi/analyze/cachesim/memtrace_trace.h).
#include "ecpi/analyze/cachesim/memtrace_trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include "ecpi/analyze/cachesim/data_symbols.h"

namespace ecpi::analyze {

static_assert(sizeof(ecpi_rt_record) == 16);
static_assert(sizeof(ecpi_rt_module) == 264);

namespace {

unsigned kind_of(const ecpi_rt_record& r) { return unsigned(r.w0 >> ECPI_RT_KIND_SHIFT); }
std::uint64_t payload_of(const ecpi_rt_record& r) { return r.w0 & ECPI_RT_PAYLOAD_MASK; }

// Two-record events: the kind of the second half each first half needs.
unsigned second_half_of(unsigned kind) {
    if (kind == ECPI_RT_REC_ALLOC) return ECPI_RT_REC_ALLOC_SITE;
    if (kind == ECPI_RT_REC_THREAD) return ECPI_RT_REC_THREAD_STACK_END;
    return 0;
}

}  // namespace

// A MEMREF (in a window) or MEMREF_SET (a sampled set outside windows).
Result<void> RecordDecoder::reference(std::uint32_t stream, const StreamState& st, const ecpi_rt_record& r, bool in_window) {
    unsigned size_log2 = unsigned((r.w0 >> ECPI_RT_MEMREF_SIZE_SHIFT) & 7);
    if (size_log2 > 4) return Error("stream " + std::to_string(stream) + ": reference of 2^" + std::to_string(size_log2) + " bytes");
    MemRef ref{r.w0 & ECPI_RT_MEMREF_ADDR_MASK, r.w1, 1u << size_log2, (r.w0 & ECPI_RT_MEMREF_WRITE) != 0};
    if (in_window) sim_.access(stream, ref);
    if (!sets_) return ok();
    bool sampled = sets_filter_ ? (st.set_bitmap >> ((ref.address >> sets_filter_->shift) & 63)) & 1 : sets_->in_sampled_sets(ref.address);
    if (!sampled && !in_window)
        return Error("stream " + std::to_string(stream) + ": a reference outside the sampled sets arrived as MEMREF_SET (the program's "
                     "runtime chose its sets unlike this ecpi: rebuild it with this ecpi's 'ecpi flags memtrace')");
    if (sampled) sets_->access(stream, ref);
    return ok();
}

Result<void> RecordDecoder::feed(std::uint32_t stream, std::span<const ecpi_rt_record> records) {
    auto [at, fresh] = streams_.try_emplace(stream);
    StreamState& st = at->second;
    if (fresh && sets_filter_) st.set_bitmap = sets_filter_->bitmap;
    for (const auto& r : records) {
        unsigned kind = kind_of(r);
        if (st.have_first) {
            unsigned want = second_half_of(kind_of(st.first));
            if (kind != want)
                return Error("stream " + std::to_string(stream) + ": record kind " + std::to_string(kind) +
                             " where the second half (kind " + std::to_string(want) + ") of a pair belongs");
            st.have_first = false;
            for (CacheSimulator* s : {&sim_, sets_}) {
                if (!s) continue;
                if (want == ECPI_RT_REC_ALLOC_SITE) {
                    s->allocate(HeapAllocation{st.first.w1, payload_of(st.first), r.w1, std::uint32_t(payload_of(r))});
                } else {
                    s->begin_stream(stream, std::uint32_t(payload_of(st.first)));
                    s->set_stack(stream, st.first.w1, r.w1);
                }
            }
            if (want == ECPI_RT_REC_ALLOC_SITE) allocations_++;
            else st.begun = true;
            continue;
        }
        switch (kind) {
        case ECPI_RT_REC_MEMREF:
        case ECPI_RT_REC_MEMREF_SET: ECPI_RETURN_IF_ERROR(reference(stream, st, r, kind == ECPI_RT_REC_MEMREF)); break;
        case ECPI_RT_REC_WINDOW:
            sim_.begin_window(stream, r.w1);
            if (sets_) sets_->rotate_sets(stream, payload_of(r));
            if (sets_filter_) st.set_bitmap = sets_filter_->bitmap_at(payload_of(r));
            break;
        case ECPI_RT_REC_ALLOC:
        case ECPI_RT_REC_THREAD:
            st.first = r;
            st.have_first = true;
            break;
        case ECPI_RT_REC_FREE:
            sim_.release(r.w1);
            if (sets_) sets_->release(r.w1);
            break;
        case ECPI_RT_REC_SET_HITS:
            if (sets_) sets_->count_settled_hits(stream, r.w1);
            break;
        case ECPI_RT_REC_END:
            sim_.end_stream(stream, r.w1);
            if (sets_) sets_->end_stream(stream, 0);
            st.ended = true;
            break;
        default:
            return Error("stream " + std::to_string(stream) + ": unknown record kind " + std::to_string(kind) +
                         " (a runtime newer than this ecpi, or a damaged trace)");
        }
    }
    return ok();
}

std::vector<std::uint32_t> RecordDecoder::unfinished() const {
    std::vector<std::uint32_t> out;
    for (const auto& [id, st] : streams_)
        if (!st.ended) out.push_back(id);
    return out;
}

// ---------------------------------------------------------------- lackey

namespace {

bool parse_hex(std::string_view s, std::uint64_t& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<void> LackeyParser::line(std::string_view l) {
    lines_++;
    if (l.empty() || l.starts_with("==") || l.starts_with("--")) return ok();
    // "I  0401000,3" or " L 1ffefffd48,8" (kind at column 0 or 1).
    char kind = l[0] == ' ' ? (l.size() > 1 ? l[1] : ' ') : l[0];
    std::size_t at = l.find_first_not_of(' ', l[0] == ' ' ? 2 : 1);
    auto comma = l.find(',', at == std::string_view::npos ? 0 : at);
    std::uint64_t addr = 0, size = 0;
    if ((kind != 'I' && kind != 'L' && kind != 'S' && kind != 'M') || at == std::string_view::npos ||
        comma == std::string_view::npos || !parse_hex(l.substr(at, comma - at), addr)) {
        if (!started_) return ok();  // a program's own output or valgrind's banner before the trace
        std::string shown(l.substr(0, 60));
        for (auto& c : shown)
            if (c < 32 || c > 126) c = '?';
        return Error("line " + std::to_string(lines_) + " is not lackey --trace-mem output: '" + shown + "'");
    }
    auto [p, ec] = std::from_chars(l.data() + comma + 1, l.data() + l.size(), size, 10);
    if (ec != std::errc() || size == 0 || size > 4096)
        return Error("line " + std::to_string(lines_) + ": bad access size in lackey output");
    started_ = true;
    if (kind == 'I') {
        pc_ = addr;
        return ok();
    }
    sim_.access(0, MemRef{addr, pc_, std::uint32_t(size), kind != 'L'});
    return ok();
}

Result<void> LackeyParser::feed(std::string_view text) {
    while (!text.empty()) {
        auto nl = text.find('\n');
        if (nl == std::string_view::npos) {
            if (partial_.size() + text.size() > 4096) return Error("line " + std::to_string(lines_ + 1) + " of the lackey trace is longer than 4096 bytes");
            partial_.append(text);
            return ok();
        }
        if (!partial_.empty()) {
            partial_.append(text.substr(0, nl));
            std::string l = std::move(partial_);
            partial_.clear();
            ECPI_RETURN_IF_ERROR(line(l));
        } else {
            ECPI_RETURN_IF_ERROR(line(text.substr(0, nl)));
        }
        text.remove_prefix(nl + 1);
    }
    return ok();
}

Result<void> LackeyParser::finish() {
    if (!partial_.empty()) {
        std::string l = std::move(partial_);
        partial_.clear();
        ECPI_RETURN_IF_ERROR(line(l));
    }
    sim_.end_stream(0, 0);
    return ok();
}

// ---------------------------------------------------------------- binary file

namespace {

// Header: magic, version, record size, module count, then the module table
// (room for ECPI_RT_MAX_MODULES entries, so it can be written last).
struct FileHeader {
    char magic[8];
    std::uint32_t version;
    std::uint32_t record_size;
    std::uint32_t module_count;
    std::uint32_t reserved;
};
static_assert(sizeof(FileHeader) == 24);
constexpr std::size_t kHeaderBytes = sizeof(FileHeader) + ECPI_RT_MAX_MODULES * sizeof(ecpi_rt_module);

// Version 2: how the trace was sampled (TraceSampling), after the module table.
struct FileSampling {
    std::uint64_t sample;
    std::uint64_t window;
    std::uint64_t seed;
    std::uint64_t set_bitmap;  // the runtime's set filter; 0: none
    std::uint32_t set_shift;
    std::uint32_t set_rotate_step;
    std::uint32_t set_rotate_windows;
    std::uint32_t set_rotate_warm;
    std::uint32_t sets;
    std::uint32_t turn_windows;
    std::uint32_t turn_warm;
    std::uint32_t reserved;
    char set_levels[64];   // NUL-terminated
    char caches[192];      // "NAME=SIZE:WAYS:LINE,...", NUL-terminated; empty: not recorded
};
static_assert(sizeof(FileSampling) == 320);
constexpr std::size_t kSamplingBytes = sizeof(FileSampling);

std::string caches_text(const std::vector<CacheGeometry>& caches) {
    std::string out;
    for (const auto& g : caches) out += (out.empty() ? "" : ",") + cache_geometry_text(g);
    return out;
}

FileSampling to_file(const TraceSampling& s) {
    FileSampling f{};
    f.sample = s.sample;
    f.window = s.window;
    f.seed = s.seed;
    if (s.filter) {
        f.set_bitmap = s.filter->bitmap;
        f.set_shift = s.filter->shift;
        f.set_rotate_step = s.filter->rotate_step;
        f.set_rotate_windows = s.filter->rotate_windows;
        f.set_rotate_warm = s.filter->rotate_warm;
    }
    f.sets = s.sets;
    f.turn_windows = s.set_turns.windows;
    f.turn_warm = s.set_turns.warm;
    std::snprintf(f.set_levels, sizeof f.set_levels, "%s", s.set_levels.c_str());
    std::string caches = caches_text(s.caches);
    if (caches.size() < sizeof f.caches) std::memcpy(f.caches, caches.data(), caches.size());
    return f;
}

// Checked: every field is read from an untrusted file.
Result<TraceSampling> from_file(const FileSampling& f, const std::string& path) {
    std::string damaged = path + ": damaged sampling record in the trace header";
    if (f.sample == 0 || f.window == 0 || f.set_shift > 63 || f.set_rotate_step > 63 || f.sets > kMaxSetGroups ||
        (f.turn_windows && f.turn_warm >= f.turn_windows) || !std::memchr(f.set_levels, 0, sizeof f.set_levels) ||
        !std::memchr(f.caches, 0, sizeof f.caches))
        return Error(damaged);
    TraceSampling s;
    s.sample = f.sample;
    s.window = f.window;
    s.seed = f.seed;
    s.sets = f.sets;
    s.set_levels = f.set_levels;
    s.set_turns = {f.turn_windows, f.turn_warm};
    if (f.set_bitmap)
        s.filter = SetFilter{f.set_bitmap, f.set_shift, f.set_rotate_step, f.set_rotate_windows, f.set_rotate_warm};
    std::string_view caches(f.caches);
    while (!caches.empty()) {
        auto comma = caches.find(',');
        auto g = parse_cache_geometry(caches.substr(0, comma));
        if (!g.ok()) return Error(damaged + " (" + g.error().message() + ")");
        s.caches.push_back(*g);
        caches.remove_prefix(comma == std::string_view::npos ? caches.size() : comma + 1);
    }
    return s;
}

}  // namespace

std::string cache_geometry_text(const CacheGeometry& g) {
    return g.name + "=" + std::to_string(g.size) + ":" + std::to_string(g.ways) + ":" + std::to_string(g.line);
}

std::string trace_sampling_text(const TraceSampling& s) {
    std::string out = "--sample 1/" + std::to_string(s.sample) + " --window " + std::to_string(s.window) + " --seed " +
                      std::to_string(s.seed) + " --sets " + (s.sets ? "1/" + std::to_string(s.sets) : std::string("auto")) +
                      " --set-levels " + s.set_levels + " --set-turns " +
                      (s.set_turns.windows ? std::to_string(s.set_turns.windows) + ":" + std::to_string(s.set_turns.warm) : std::string("off"));
    for (const auto& g : s.caches) out += " --cache " + cache_geometry_text(g);
    return out;
}

Result<TraceWriter> TraceWriter::create(const std::filesystem::path& path) {
    TraceWriter w;
    w.path_ = path;
    w.file_ = std::fopen(path.c_str(), "wb");
    if (!w.file_) return Error::from_errno(errno, "creating trace file " + path.string());
    std::vector<char> zero(kHeaderBytes + kSamplingBytes, 0);
    if (std::fwrite(zero.data(), 1, zero.size(), w.file_) != zero.size())
        return Error::from_errno(errno, "writing trace file " + path.string());
    return w;
}

TraceWriter::TraceWriter(TraceWriter&& o) noexcept : file_(o.file_), path_(std::move(o.path_)), stream_(o.stream_) { o.file_ = nullptr; }
TraceWriter& TraceWriter::operator=(TraceWriter&& o) noexcept {
    std::swap(file_, o.file_);
    std::swap(path_, o.path_);
    std::swap(stream_, o.stream_);
    return *this;
}
TraceWriter::~TraceWriter() {
    if (file_) std::fclose(file_);
}

Result<void> TraceWriter::write(std::uint32_t stream, std::span<const ecpi_rt_record> records) {
    if (stream != stream_) {
        ecpi_rt_record s{(std::uint64_t(kTraceRecStream) << ECPI_RT_KIND_SHIFT) | stream, 0};
        if (std::fwrite(&s, sizeof s, 1, file_) != 1) return Error::from_errno(errno, "writing trace file " + path_.string());
        stream_ = stream;
    }
    if (!records.empty() && std::fwrite(records.data(), sizeof(ecpi_rt_record), records.size(), file_) != records.size())
        return Error::from_errno(errno, "writing trace file " + path_.string());
    return ok();
}

Result<void> TraceWriter::finish(const std::vector<TraceModule>& modules, const TraceSampling& sampling) {
    FileHeader h{};
    std::memcpy(h.magic, kTraceMagic, sizeof h.magic);
    h.version = kTraceVersion;
    h.record_size = sizeof(ecpi_rt_record);
    h.module_count = std::uint32_t(std::min<std::size_t>(modules.size(), ECPI_RT_MAX_MODULES));
    std::vector<ecpi_rt_module> table(ECPI_RT_MAX_MODULES);
    FileSampling recorded = to_file(sampling);
    for (std::uint32_t i = 0; i < h.module_count; i++) {
        table[i].base = modules[i].base;
        table[i].start = modules[i].start;
        table[i].end = modules[i].end;
        std::snprintf(table[i].path, sizeof table[i].path, "%s", modules[i].path.c_str());
    }
    if (std::fseek(file_, 0, SEEK_SET) != 0 || std::fwrite(&h, sizeof h, 1, file_) != 1 ||
        std::fwrite(table.data(), sizeof(ecpi_rt_module), table.size(), file_) != table.size() ||
        std::fwrite(&recorded, sizeof recorded, 1, file_) != 1)
        return Error::from_errno(errno, "writing the header of trace file " + path_.string());
    int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) return Error::from_errno(errno, "closing trace file " + path_.string());
    return ok();
}

namespace {

// A trace opened for reading (closed when this goes) and its status.
struct OpenedTrace {
    int fd = -1;
    struct stat st {};
    OpenedTrace() = default;
    OpenedTrace(const OpenedTrace&) = delete;
    OpenedTrace& operator=(const OpenedTrace&) = delete;
    ~OpenedTrace() {
        if (fd >= 0) ::close(fd);
    }
};

Result<void> open_trace(const std::filesystem::path& path, OpenedTrace& trace) {
    trace.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (trace.fd < 0) return Error::from_errno(errno, "opening trace " + path.string());
    if (fstat(trace.fd, &trace.st) != 0) return Error::from_errno(errno, "reading trace " + path.string());
    return ok();
}

// The binary header, of which `buf` holds the first n bytes read (magic
// checked), the module table into `modules`; for version 2 the sampling
// record after it is read from fd, leaving fd at the first record.
Result<std::optional<TraceSampling>> read_binary_header(int fd, const char* buf, std::size_t n, const std::string& path,
                                                        std::vector<TraceModule>& modules) {
    FileHeader h;
    std::memcpy(&h, buf, sizeof h);
    if (h.version != 1 && h.version != kTraceVersion)
        return Error(path + ": binary trace version " + std::to_string(h.version) + " (this ecpi reads versions 1 and " +
                     std::to_string(kTraceVersion) + ")");
    if (h.record_size != sizeof(ecpi_rt_record) || h.module_count > ECPI_RT_MAX_MODULES || n != kHeaderBytes)
        return Error(path + ": damaged binary trace header");
    const auto* table = reinterpret_cast<const ecpi_rt_module*>(buf + sizeof(FileHeader));
    for (std::uint32_t i = 0; i < h.module_count; i++) {
        TraceModule m;
        m.path.assign(table[i].path, strnlen(table[i].path, sizeof table[i].path));
        m.base = table[i].base;
        m.start = table[i].start;
        m.end = table[i].end;
        modules.push_back(m);
    }
    if (h.version == 1) return std::optional<TraceSampling>{};
    FileSampling f;
    ssize_t got = ::read(fd, &f, sizeof f);
    if (got < 0) return Error::from_errno(errno, "reading trace " + path);
    if (std::size_t(got) != sizeof f) return Error(path + ": damaged binary trace header (its sampling record is cut short)");
    auto sampling = from_file(f, path);
    if (!sampling.ok()) return sampling.error();
    return std::optional<TraceSampling>{std::move(sampling).value()};
}

}  // namespace

Result<std::optional<TraceSampling>> read_trace_sampling(const std::filesystem::path& path) {
    OpenedTrace trace;
    ECPI_RETURN_IF_ERROR(open_trace(path, trace));
    const int fd = trace.fd;
    const struct stat& st = trace.st;
    if (!S_ISREG(st.st_mode)) return std::optional<TraceSampling>{};  // a pipe is read once, by read_trace_file
    std::vector<char> buf(kHeaderBytes);
    ssize_t n = ::read(fd, buf.data(), kHeaderBytes);
    if (n < 0) return Error::from_errno(errno, "reading trace " + path.string());
    if (std::size_t(n) < sizeof(FileHeader) || std::memcmp(buf.data(), kTraceMagic, 8) != 0) return std::optional<TraceSampling>{};
    std::vector<TraceModule> modules;
    return read_binary_header(fd, buf.data(), std::size_t(n), path.string(), modules);
}

Result<TraceFileInfo> read_trace_file(const std::filesystem::path& path, CacheSimulator& sim, CacheSimulator* sets) {
    OpenedTrace trace;
    ECPI_RETURN_IF_ERROR(open_trace(path, trace));
    const int fd = trace.fd;
    const struct stat& st = trace.st;
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) return Error("trace " + path.string() + " is not a regular file");
    std::vector<char> buf(1 << 20);
    TraceFileInfo info;
    ssize_t n = ::read(fd, buf.data(), kHeaderBytes);
    if (n < 0) return Error::from_errno(errno, "reading trace " + path.string());
    bool binary = std::size_t(n) >= sizeof(FileHeader) && std::memcmp(buf.data(), kTraceMagic, 8) == 0;
    if (!binary) {
        info.format = "lackey";
        LackeyParser parser(sim);
        std::string_view first(buf.data(), std::size_t(n));
        auto r = parser.feed(first);
        while (r.ok()) {
            n = ::read(fd, buf.data(), buf.size());
            if (n < 0) return Error::from_errno(errno, "reading trace " + path.string());
            if (n == 0) break;
            r = parser.feed(std::string_view(buf.data(), std::size_t(n)));
        }
        if (!r.ok()) return r.error().with_context(path.string());
        ECPI_RETURN_IF_ERROR(parser.finish());
        if (parser.lines() == 0 || sim.totals().simulated == 0)
            return Error(path.string() + " holds no memory references (neither ecpi's binary trace nor lackey --trace-mem text)");
        return info;
    }
    info.format = "ecpi";
    ECPI_RETURN_IF_ERROR(read_binary_header(fd, buf.data(), std::size_t(n), path.string(), info.modules));
    key_statics_by_symbols(info.modules, sim, sets);  // as the live run did
    RecordDecoder decoder(sim, sets);
    std::uint32_t stream = 0;
    std::size_t carry = 0;
    for (;;) {
        n = ::read(fd, buf.data() + carry, buf.size() - carry);
        if (n < 0) return Error::from_errno(errno, "reading trace " + path.string());
        std::size_t have = carry + std::size_t(n);
        std::size_t whole = have / sizeof(ecpi_rt_record);
        const auto* recs = reinterpret_cast<const ecpi_rt_record*>(buf.data());
        std::size_t from = 0;
        for (std::size_t i = 0; i < whole; i++) {
            if ((recs[i].w0 >> ECPI_RT_KIND_SHIFT) != kTraceRecStream) continue;
            ECPI_RETURN_IF_ERROR(decoder.feed(stream, std::span(recs + from, i - from)));
            stream = std::uint32_t(recs[i].w0 & 0xffffffffu);
            from = i + 1;
        }
        auto r = decoder.feed(stream, std::span(recs + from, whole - from));
        if (!r.ok()) return r.error().with_context(path.string());
        carry = have - whole * sizeof(ecpi_rt_record);
        std::memmove(buf.data(), buf.data() + whole * sizeof(ecpi_rt_record), carry);
        if (n == 0) break;
    }
    if (carry != 0) return Error(path.string() + ": the trace ends in the middle of a record (truncated)");
    return info;
}

}  // namespace ecpi::analyze
