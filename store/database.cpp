// The profile database directory (DCPI 4.3.3): epochs of per-(image, event)
// profile files. Layout, naming, atomicity and locking rules are in
// store/FORMAT.md; keep them in step with the constants here.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "ecpi/store/profile.h"
#include "canonical.h"
#include "file_io.h"
#include "journal.h"

namespace ecpi::store {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using detail::kTempPrefix;

constexpr const char* kMarkerFile = "ECPI_DATABASE";
constexpr const char* kMarkerSchema = "ecpi.database";
// Version 2: epochs may hold a journal (FORMAT.md §13), which a version-1
// reader would not see; a database gets version 2 with its first journal
// record, so older ecpi refuses it by name instead of reading part of it.
constexpr std::int64_t kDatabaseVersion = 2;
constexpr std::int64_t kPlainDatabaseVersion = 1;
constexpr const char* kLockFile = "lock";
constexpr const char* kEpochsDir = "epochs";
constexpr const char* kImagesDir = "images";
constexpr const char* kEpochMetaFile = "epoch.json";
constexpr const char* kEpochMetaSchema = "ecpi.epoch";
constexpr std::int64_t kEpochMetaVersion = 1;
constexpr std::string_view kProfileSuffix = ".prof";
constexpr std::string_view kStacksSuffix = ".stk";
constexpr std::string_view kRegistersSuffix = ".reg";
// A register segment takes merges until it reaches this size (FORMAT.md §5a).
constexpr std::uintmax_t kRegisterSegmentBytes = 4u << 20;
constexpr std::uint32_t kMaxRegisterSegments = 100000;
constexpr int kEpochNameWidth = 5;
// Sanitized names can collide (two images with one basename and one 32-bit
// hash; two events that sanitize alike); the next free "~N" name is used.
constexpr int kMaxNameProbes = 16;
constexpr std::size_t kMaxNamePartLength = 64;

// ---- names -----------------------------------------------------------------

std::optional<std::uint64_t> parse_epoch_name(std::string_view name) {
    if (name.size() < static_cast<std::size_t>(kEpochNameWidth)) return std::nullopt;
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
    if (ec != std::errc() || end != name.data() + name.size() || value == 0) return std::nullopt;
    // Exactly one spelling per epoch: "00001", never "000001".
    if (name.size() > static_cast<std::size_t>(kEpochNameWidth) && name[0] == '0') return std::nullopt;
    return value;
}

std::string epoch_name(std::uint64_t number) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%0*" PRIu64, kEpochNameWidth, number);
    return buf;
}

// What a user types for an epoch: its name ("00007") or its number ("7").
std::string canonical_epoch(const std::string& epoch) {
    if (epoch.empty() || epoch.size() >= static_cast<std::size_t>(kEpochNameWidth) || epoch[0] == '0') return epoch;
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(epoch.data(), epoch.data() + epoch.size(), value);
    if (ec != std::errc() || end != epoch.data() + epoch.size() || value == 0) return epoch;
    return epoch_name(value);
}

// A file-name part: [A-Za-z0-9._+-] kept, anything else '_'; no leading or
// trailing '.'/'_' (so nothing is hidden or looks like a temp file).
std::string sanitize(std::string_view s) {
    std::string out;
    for (const char c : s) {
        const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                          c == '_' || c == '-' || c == '+';
        out += keep ? c : '_';
    }
    const auto first = out.find_first_not_of("._");
    if (first == std::string::npos) return "x";
    out = out.substr(first, out.find_last_not_of("._") - first + 1);
    if (out.size() > kMaxNamePartLength) out.resize(kMaxNamePartLength);
    return out;
}

// FNV-1a 64 of path, NUL, build id, folded to 32 bits. Part of the format:
// writers of every version must name a given image alike, or merges into an
// existing epoch would start a second file.
std::string image_hash(const ImageId& image) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](std::string_view bytes) {
        for (const char c : bytes) {
            h ^= static_cast<unsigned char>(c);
            h *= 0x100000001b3ull;
        }
    };
    mix(image.path);
    mix(std::string_view("\0", 1));
    mix(image.build_id);
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08" PRIx32, static_cast<std::uint32_t>(h ^ (h >> 32)));
    return buf;
}

std::string probe_suffix(int probe) { return probe == 0 ? "" : "~" + std::to_string(probe); }

std::string profile_file_name(const ImageProfile& p, int probe) {
    const std::string_view path = p.image.path;
    const auto slash = path.rfind('/');
    const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    return sanitize(base) + "-" + image_hash(p.image) + "." + sanitize(p.event) + probe_suffix(probe) +
           std::string(kProfileSuffix);
}

std::string stacks_file_name(const StackProfile& s, int probe) {
    return "stacks." + sanitize(s.event) + probe_suffix(probe) + std::string(kStacksSuffix);
}

std::string registers_file_name(const RegisterProfile& r, int probe) {
    return "registers." + sanitize(r.event) + probe_suffix(probe) + std::string(kRegistersSuffix);
}

// Segment 0 is the file above; later ones add ".sN" before the suffix.
std::string registers_segment_name(const RegisterProfile& r, int probe, std::uint32_t segment) {
    if (segment == 0) return registers_file_name(r, probe);
    return "registers." + sanitize(r.event) + probe_suffix(probe) + ".s" + std::to_string(segment) +
           std::string(kRegistersSuffix);
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool is_temp_name(std::string_view name) { return name.starts_with(kTempPrefix); }

// "<path>: <reason>" lines for EpochContents::skipped; the reason of an
// errno failure is just strerror, the path is already in front.
std::string skip_line(const fs::path& path, const Error& error) {
    if (error.errno_value() == 0 && error.message().starts_with(path.string())) return error.message();
    return path.string() + ": " + (error.errno_value() != 0 ? std::strerror(error.errno_value()) : error.message());
}

// ---- JSON --------------------------------------------------------------------

std::string dump(const json& j) {
    // Command lines and comms are arbitrary bytes; replace invalid UTF-8
    // rather than throw.
    return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::span<const std::uint8_t> as_bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Field readers: absent fields keep their defaults (a reader of version 1
// accepts documents from writers that predate a field); present ones must
// have the right type.
Result<void> read_field(const json& obj, const char* key, std::string& out) {
    const auto it = obj.find(key);
    if (it == obj.end()) return ok();
    if (!it->is_string()) return Error(std::string("\"") + key + "\" is not a string");
    out = it->get<std::string>();
    return ok();
}

Result<void> read_field(const json& obj, const char* key, std::uint64_t& out) {
    const auto it = obj.find(key);
    if (it == obj.end()) return ok();
    if (it->is_number_unsigned()) {
        out = it->get<std::uint64_t>();
    } else if (it->is_number_integer() && it->get<std::int64_t>() >= 0) {
        out = static_cast<std::uint64_t>(it->get<std::int64_t>());
    } else {
        return Error(std::string("\"") + key + "\" is not a non-negative integer");
    }
    return ok();
}

Result<void> read_field(const json& obj, const char* key, std::int64_t& out) {
    const auto it = obj.find(key);
    if (it == obj.end()) return ok();
    if (it->is_number_unsigned()) {
        if (it->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return Error(std::string("\"") + key + "\" is out of range");
        }
        out = static_cast<std::int64_t>(it->get<std::uint64_t>());
    } else if (it->is_number_integer()) {
        out = it->get<std::int64_t>();
    } else {
        return Error(std::string("\"") + key + "\" is not an integer");
    }
    return ok();
}

// A list of counts, one per CPU (epoch.json's idle_per_cpu): bounded in
// length by kMaxCpus, each count a non-negative integer.
Result<void> read_field(const json& obj, const char* key, std::vector<std::uint64_t>& out) {
    const auto it = obj.find(key);
    if (it == obj.end()) return ok();
    if (!it->is_array()) return Error(std::string("\"") + key + "\" is not an array");
    if (it->size() > kMaxCpus)
        return Error(std::string("\"") + key + "\" has " + std::to_string(it->size()) + " entries, more than " +
                     std::to_string(kMaxCpus) + " CPUs");
    out.clear();
    for (const auto& v : *it) {
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
            return Error(std::string("\"") + key + "\" holds something other than non-negative integers");
        out.push_back(v.get<std::uint64_t>());
    }
    return ok();
}

Result<void> read_field(const json& obj, const char* key, double& out) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return ok();  // non-finite values dump as null
    if (!it->is_number()) return Error(std::string("\"") + key + "\" is not a number");
    out = it->get<double>();
    return ok();
}

// schema must match; a newer version is rejected by name.
Result<void> check_schema(const json& j, const char* schema, std::int64_t version, std::string_view what) {
    if (!j.is_object()) return Error("not a JSON object");
    const auto s = j.find("schema");
    if (s == j.end() || !s->is_string() || s->get<std::string>() != schema) {
        return Error(std::string("\"schema\" is not \"") + schema + "\"");
    }
    const auto v = j.find("version");
    if (v == j.end() || !v->is_number_integer() || v->get<std::int64_t>() < 1) {
        return Error("\"version\" is missing or not a positive integer");
    }
    if (v->get<std::int64_t>() > version) {
        return Error(std::string(what) + " version " + std::to_string(v->get<std::int64_t>()) +
                     " is newer than this ecpi supports (" + std::to_string(version) + "); upgrade ecpi");
    }
    return ok();
}

// The chase's sizes (EpochMeta::chase_latency), one object each.
json chase_latency_json(const std::vector<ChaseLatency>& sizes) {
    json out = json::array();
    for (const auto& c : sizes) out.push_back({{"bytes", c.bytes}, {"ns", c.ns}, {"ns_low", c.ns_low}, {"ns_high", c.ns_high}});
    return out;
}

json meta_document(const EpochMeta& m) {
    json events = json::object();
    for (const auto& [name, e] : m.events) {
        events[name] = {{"period", e.period}, {"samples", e.samples}, {"unknown", e.unknown}, {"lost", e.lost},
                          {"registers_lost", e.registers_lost}};
        if (e.idle != 0) events[name]["idle"] = e.idle;
        if (!e.idle_per_cpu.empty()) events[name]["idle_per_cpu"] = e.idle_per_cpu;
        if (!e.stack_ends.empty()) events[name]["stack_ends"] = e.stack_ends;
    }
    json processes = json::object();
    for (const auto& [pid, p] : m.processes) {
        processes[std::to_string(pid)] = {{"comm", p.comm}, {"cmdline", p.cmdline}};
    }
    json doc = {{"schema", kEpochMetaSchema},
                 {"version", kEpochMetaVersion},
                 {"hostname", m.hostname},
                 {"kernel_release", m.kernel_release},
                 {"cpu_mhz", m.cpu_mhz},
                 {"cpu_mhz_measured", m.cpu_mhz_measured},
                 {"cpu_mhz_sampled", m.cpu_mhz_sampled},
                 {"chase_latency", chase_latency_json(m.chase_latency)},
                 {"cpu_vendor", m.cpu_vendor},
                 {"cpu_family", m.cpu_family},
                 {"cpu_model", m.cpu_model},
                 {"cpu_name", m.cpu_name},
                 {"first_sample_unix", m.first_sample_unix},
                 {"last_update_unix", m.last_update_unix},
                 {"events", std::move(events)},
                 {"processes", std::move(processes)}};
    if (!m.idle_ns_per_cpu.empty()) doc["idle_ns_per_cpu"] = m.idle_ns_per_cpu;
    return doc;
}

std::string meta_to_json(const EpochMeta& m) { return dump(meta_document(m)); }

// Drops what reads as absent anyway (0, "", {}, []), below the top level's
// schema and version.
void prune_defaults(json& j) {
    if (!j.is_object()) return;
    for (auto it = j.begin(); it != j.end();) {
        prune_defaults(*it);
        const json& v = *it;
        const bool empty = (v.is_number_integer() && v.get<std::int64_t>() == 0) ||
                           (v.is_number_unsigned() && v.get<std::uint64_t>() == 0) ||
                           (v.is_number_float() && v.get<double>() == 0) || (v.is_string() && v.get<std::string>().empty()) ||
                           ((v.is_object() || v.is_array()) && v.empty());
        it = empty ? j.erase(it) : std::next(it);
    }
}

// A journal record's metadata (FORMAT.md §13): epoch.json's document on one
// line, without the fields that read as absent.
std::string meta_to_journal_json(const EpochMeta& m) {
    json doc = meta_document(m);
    prune_defaults(doc);
    doc["schema"] = kEpochMetaSchema;
    doc["version"] = kEpochMetaVersion;
    return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

// "stack_ends": {name: count}, optional.
Result<void> read_stack_ends(const json& e, std::map<std::string, std::uint64_t>& out) {
    const auto it = e.find("stack_ends");
    if (it == e.end()) return ok();
    if (!it->is_object()) return Error("\"stack_ends\" is not an object");
    for (const auto& [name, v] : it->items()) {
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() > kMaxSampleCount)
            return Error("\"stack_ends\"." + name + " is not a sample count");
        out[name] = v.get<std::uint64_t>();
    }
    return ok();
}

// Reads "chase_latency" (absent in databases written before it existed);
// a step of a chase takes between 0 and 1 ms, its rounds' spread around it.
Result<void> read_chase_latency(const json& j, std::vector<ChaseLatency>& out) {
    const auto it = j.find("chase_latency");
    if (it == j.end()) return ok();
    if (!it->is_array() || it->size() > 64) return Error("\"chase_latency\" is not an array of at most 64 sizes");
    for (const auto& e : *it) {
        if (!e.is_object()) return Error("\"chase_latency\" holds something other than an object");
        ChaseLatency c;
        ECPI_RETURN_IF_ERROR(read_field(e, "bytes", c.bytes));
        for (auto [key, field] : {std::pair{"ns", &c.ns}, std::pair{"ns_low", &c.ns_low}, std::pair{"ns_high", &c.ns_high}}) {
            const auto v = e.find(key);
            if (v == e.end() || !v->is_number()) return Error(std::string("\"chase_latency\": \"") + key + "\" is not a number");
            *field = v->get<double>();
        }
        if (!(c.ns_low > 0 && c.ns_low <= c.ns && c.ns <= c.ns_high && c.ns_high < 1e6) || c.bytes == 0)
            return Error("\"chase_latency\": a size of " + std::to_string(c.bytes) + " bytes has times out of order or "
                         "outside 0-1 ms (ns_low <= ns <= ns_high)");
        out.push_back(c);
    }
    return ok();
}

// Numbers no real recording holds (FORMAT.md §9) mark a damaged or forged
// file: reject them before they reach any report's totals and rates.
Result<void> check_meta_bounds(const EpochMeta& m) {
    for (const auto& [name, mhz] : {std::pair{"cpu_mhz", m.cpu_mhz}, std::pair{"cpu_mhz_measured", m.cpu_mhz_measured},
                                    std::pair{"cpu_mhz_sampled", m.cpu_mhz_sampled}}) {
        if (!std::isfinite(mhz) || mhz < 0 || mhz > kMaxCpuMhz)
            return Error(std::string("\"") + name + "\" is " + std::to_string(mhz) +
                         ", not a clock rate (0 to 100000 MHz)");
    }
    for (std::uint64_t ns : m.idle_ns_per_cpu) {
        if (ns > kMaxIdleNs)
            return Error("idle_ns_per_cpu holds " + std::to_string(ns) + " ns, more than ten years of one CPU");
    }
    for (const auto& [event, e] : m.events) {
        if (e.period > kMaxPeriod) return Error("event " + event + ": period " + std::to_string(e.period) + " is out of range");
        for (const auto& [field, v] : {std::pair{"samples", e.samples}, std::pair{"unknown", e.unknown},
                                       std::pair{"lost", e.lost}, std::pair{"registers_lost", e.registers_lost},
                                       std::pair{"idle", e.idle}}) {
            if (v > kMaxSampleCount)
                return Error("event " + event + ": " + field + " " + std::to_string(v) +
                             " is more than any recording holds (2^50)");
        }
        std::uint64_t idle_sum = 0;
        for (std::uint64_t v : e.idle_per_cpu) {
            if (v > kMaxSampleCount)
                return Error("event " + event + ": idle_per_cpu holds " + std::to_string(v) +
                             ", more than any recording holds (2^50)");
            idle_sum += v;
        }
        if (!e.idle_per_cpu.empty() && idle_sum != e.idle)
            return Error("event " + event + ": idle_per_cpu adds up to " + std::to_string(idle_sum) + ", not idle " +
                         std::to_string(e.idle));
        if (e.unknown > e.samples)
            return Error("event " + event + ": more unknown samples (" + std::to_string(e.unknown) + ") than samples (" +
                         std::to_string(e.samples) + ")");
    }
    return ok();
}

Result<EpochMeta> meta_from_json_unchecked(const std::vector<std::uint8_t>& bytes) {
    const json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Error("not valid JSON");
    ECPI_RETURN_IF_ERROR(check_schema(j, kEpochMetaSchema, kEpochMetaVersion, "epoch.json"));
    EpochMeta m;
    ECPI_RETURN_IF_ERROR(read_field(j, "hostname", m.hostname));
    ECPI_RETURN_IF_ERROR(read_field(j, "kernel_release", m.kernel_release));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_mhz", m.cpu_mhz));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_mhz_measured", m.cpu_mhz_measured));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_mhz_sampled", m.cpu_mhz_sampled));
    ECPI_RETURN_IF_ERROR(read_chase_latency(j, m.chase_latency));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_vendor", m.cpu_vendor));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_family", m.cpu_family));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_model", m.cpu_model));
    ECPI_RETURN_IF_ERROR(read_field(j, "cpu_name", m.cpu_name));
    ECPI_RETURN_IF_ERROR(read_field(j, "first_sample_unix", m.first_sample_unix));
    ECPI_RETURN_IF_ERROR(read_field(j, "last_update_unix", m.last_update_unix));
    ECPI_RETURN_IF_ERROR(read_field(j, "idle_ns_per_cpu", m.idle_ns_per_cpu));
    if (const auto events = j.find("events"); events != j.end()) {
        if (!events->is_object()) return Error("\"events\" is not an object");
        for (const auto& [name, e] : events->items()) {
            if (!e.is_object()) return Error("event \"" + name + "\" is not an object");
            EventMeta& em = m.events[name];
            ECPI_RETURN_IF_ERROR(read_field(e, "period", em.period));
            ECPI_RETURN_IF_ERROR(read_field(e, "samples", em.samples));
            ECPI_RETURN_IF_ERROR(read_field(e, "unknown", em.unknown));
            ECPI_RETURN_IF_ERROR(read_field(e, "lost", em.lost));
            ECPI_RETURN_IF_ERROR(read_field(e, "registers_lost", em.registers_lost));
            ECPI_RETURN_IF_ERROR(read_field(e, "idle", em.idle));
            ECPI_RETURN_IF_ERROR(read_field(e, "idle_per_cpu", em.idle_per_cpu));
            ECPI_RETURN_IF_ERROR(read_stack_ends(e, em.stack_ends));
        }
    }
    ECPI_RETURN_IF_ERROR(check_meta_bounds(m));
    if (const auto processes = j.find("processes"); processes != j.end()) {
        if (!processes->is_object()) return Error("\"processes\" is not an object");
        for (const auto& [key, p] : processes->items()) {
            std::uint32_t pid = 0;
            const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), pid);
            if (ec != std::errc() || end != key.data() + key.size()) {
                return Error("process key \"" + key + "\" is not a pid");
            }
            if (!p.is_object()) return Error("process " + key + " is not an object");
            ProcessMeta& pm = m.processes[pid];
            ECPI_RETURN_IF_ERROR(read_field(p, "comm", pm.comm));
            ECPI_RETURN_IF_ERROR(read_field(p, "cmdline", pm.cmdline));
        }
    }
    return m;
}

Result<EpochMeta> meta_from_json(const std::vector<std::uint8_t>& bytes) {
    // The checks above keep nlohmann from throwing; this keeps the "libraries
    // never throw" promise should one be missed.
    try {
        return meta_from_json_unchecked(bytes);
    } catch (const std::exception& e) {
        return Error(std::string("malformed: ") + e.what());
    }
}

// ---- the marker --------------------------------------------------------------

Error not_a_database(const fs::path& dir) {
    return Error(dir.string() + " is not an ecpi database (no " + kMarkerFile +
                 " file); record one with `ecpi record -o " + dir.string() + "`");
}

// false when there is no marker; an Error when there is one we cannot accept.
Result<bool> has_marker(const fs::path& dir) {
    const fs::path marker = dir / kMarkerFile;
    auto bytes = detail::read_file(marker);
    if (!bytes.ok()) {
        const int err = bytes.error().errno_value();
        if (err == ENOENT || err == ENOTDIR) return false;
        return bytes.error();
    }
    const json j = json::parse(bytes->begin(), bytes->end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return Error(marker.string() + ": not valid JSON");
    auto status = check_schema(j, kMarkerSchema, kDatabaseVersion, "database");
    if (!status.ok()) return status.error().with_context(marker.string());
    return true;
}

Result<void> write_marker(const fs::path& dir, std::int64_t version = kPlainDatabaseVersion) {
    const std::string text = dump({{"schema", kMarkerSchema}, {"version", version}});
    return detail::write_file_atomically(dir / kMarkerFile, as_bytes(text));
}

}  // namespace

// ---- Database ------------------------------------------------------------------

Result<Database> Database::open(const fs::path& dir, Mode mode) {
    if (dir.empty()) return Error("empty database path");
    Database db(dir, mode);
    if (mode == Mode::kReadOnly) {
        ECPI_ASSIGN_OR_RETURN(const bool is_database, has_marker(dir));
        if (!is_database) return not_a_database(dir);
        return db;
    }

    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Error::from_errno(ec.value(), "creating database directory " + dir.string());
    if (!fs::is_directory(dir, ec)) return Error(dir.string() + " exists and is not a directory", ENOTDIR);

    ECPI_ASSIGN_OR_RETURN(bool is_database, has_marker(dir));
    if (!is_database) {
        // Never clobber a directory that holds something else. A `lock` and
        // temp files are what an interrupted creation leaves behind.
        ECPI_ASSIGN_OR_RETURN(auto names, detail::list_directory(dir));
        for (const std::string& name : names) {
            if (name != kLockFile && !is_temp_name(name)) {
                return Error(dir.string() + " is not empty and is not an ecpi database (no " + kMarkerFile +
                             " file); refusing to write into it: choose a new or empty directory");
            }
        }
    }
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir / kLockFile));
    // Re-check under the lock: a concurrent creator may have finished.
    ECPI_ASSIGN_OR_RETURN(is_database, has_marker(dir));
    // Marker first: a crash right after leaves a database without epochs,
    // which the next open completes, rather than a directory we refuse.
    if (!is_database) ECPI_RETURN_IF_ERROR(write_marker(dir));
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir / kEpochsDir));
    ECPI_ASSIGN_OR_RETURN(auto existing, db.epochs());
    if (existing.empty()) ECPI_RETURN_IF_ERROR(detail::make_directory(dir / kEpochsDir / epoch_name(1)));
    return db;
}

Result<std::vector<std::string>> Database::epochs() const {
    const fs::path root = dir_ / kEpochsDir;
    auto names = detail::list_directory(root);
    if (!names.ok()) {
        if (names.error().errno_value() == ENOENT) return std::vector<std::string>{};
        return names.error();
    }
    std::vector<std::pair<std::uint64_t, std::string>> found;
    for (std::string& name : *names) {
        const auto number = parse_epoch_name(name);
        struct stat st {};
        if (!number || ::stat((root / name).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        found.emplace_back(*number, std::move(name));
    }
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    out.reserve(found.size());
    for (auto& [number, name] : found) out.push_back(std::move(name));
    return out;
}

Result<std::string> Database::current_epoch() {
    ECPI_ASSIGN_OR_RETURN(auto names, epochs());
    if (!names.empty()) return names.back();
    if (mode_ == Mode::kReadOnly) {
        return Error(dir_.string() + " has no epochs yet; record into it with `ecpi record -o " + dir_.string() + "`");
    }
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    ECPI_ASSIGN_OR_RETURN(names, epochs());  // another writer may have made one meanwhile
    if (!names.empty()) return names.back();
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir_ / kEpochsDir));
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir_ / kEpochsDir / epoch_name(1)));
    return epoch_name(1);
}

Result<std::string> Database::new_epoch() {
    if (mode_ == Mode::kReadOnly) return Error("cannot start a new epoch: " + dir_.string() + " is open read-only");
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    ECPI_ASSIGN_OR_RETURN(auto names, epochs());
    const std::uint64_t next = names.empty() ? 1 : *parse_epoch_name(names.back()) + 1;
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir_ / kEpochsDir));
    const std::string name = epoch_name(next);
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir_ / kEpochsDir / name));
    return name;
}

namespace {

// A database is data other people write: a symbolic link inside it (an
// epoch directory, a profile file) that leads outside it is refused, by
// readers and writers alike, and named. Links that stay inside are followed.
Result<void> stays_inside(const fs::path& db, const fs::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return ok();
    std::error_code ec;
    const fs::path target = fs::weakly_canonical(path, ec);
    const fs::path root = fs::weakly_canonical(db, ec);
    const auto [r, t] = std::mismatch(root.begin(), root.end(), target.begin(), target.end());
    if (!ec && r == root.end()) return ok();
    return Error(path.string() + " is a symbolic link to " + target.string() +
                 ", outside the database: refused (remove the link)");
}

// The directory of an existing epoch; the name is validated so that it can
// never point outside DB/epochs.
Result<fs::path> existing_epoch_dir(const fs::path& db, const std::string& given) {
    const std::string epoch = canonical_epoch(given);
    if (!parse_epoch_name(epoch)) {
        return Error("invalid epoch name '" + given + "' (epochs are numbered 1, 2, ... and named 00001, 00002, ...)");
    }
    const fs::path dir = db / kEpochsDir / epoch;
    ECPI_RETURN_IF_ERROR(stays_inside(db, dir));
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
        if (errno == ENOENT) return Error("no epoch " + epoch + " in " + db.string(), ENOENT);
        return Error::from_errno(errno, "reading epoch directory " + dir.string());
    }
    if (!S_ISDIR(st.st_mode)) return Error(dir.string() + " is not a directory", ENOTDIR);
    return dir;
}

std::uint64_t tree_bytes(const fs::path& dir) {
    std::uint64_t total = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
         !ec && it != end; it.increment(ec)) {
        std::error_code size_ec;
        if (it->is_regular_file(size_ec)) {
            auto n = it->file_size(size_ec);
            if (!size_ec) total += n;
        }
    }
    return total;
}

Error read_only(const fs::path& db) { return Error("cannot write: " + db.string() + " is open read-only"); }

// Read-modify-write of one binary file kind under the writer lock. Decode,
// Encode and Name are the kind's functions; Same says whether an existing
// file belongs to the same key (otherwise its name collided: try the next).
template <typename T, typename Decode, typename Encode, typename Name, typename Same>
Result<void> merge_file(const fs::path& db, const std::string& epoch, const T& from, Decode decode, Encode encode,
                        Name name, Same same, std::uint64_t& written) {
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(db, epoch));
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(db / kLockFile));
    for (int probe = 0; probe < kMaxNameProbes; ++probe) {
        const fs::path path = dir / name(from, probe);
        auto bytes = detail::read_file(path);
        if (!bytes.ok()) {
            if (bytes.error().errno_value() != ENOENT) return bytes.error();
            const std::vector<std::uint8_t> out = encode(from);
            written += out.size();
            return detail::write_file_atomically(path, out);
        }
        auto existing = decode(std::span<const std::uint8_t>(*bytes));
        if (!existing.ok()) {
            // Never overwrite a file we cannot read: it may be a newer
            // version's data. The caller decides (move it aside, new epoch).
            return Error("cannot merge into " + path.string() + ": " + existing.error().message());
        }
        if (!same(*existing, from)) continue;
        auto merged = merge_into(*existing, from);
        if (!merged.ok()) return merged.error().with_context(path.string());
        const std::vector<std::uint8_t> out = encode(*existing);
        written += out.size();
        return detail::write_file_atomically(path, out);
    }
    return Error("cannot merge into epoch " + epoch + " of " + db.string() + ": " + std::to_string(kMaxNameProbes) +
                 " files named like " + name(from, 0) + " all belong to other images or events");
}

}  // namespace

Result<std::uint64_t> Database::remove_epoch(const std::string& epoch) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    ECPI_ASSIGN_OR_RETURN(auto names, epochs());
    if (!names.empty() && names.back() == epoch)
        return Error("epoch " + epoch + " is the current epoch and cannot be removed");
    const std::uint64_t bytes = tree_bytes(dir);
    const fs::path doomed = dir_ / kEpochsDir / (".removed-" + epoch);
    if (::rename(dir.c_str(), doomed.c_str()) != 0)
        return Error::from_errno(errno, "removing epoch " + epoch + " (renaming " + dir.string() + ")");
    std::error_code ec;
    fs::remove_all(doomed, ec);
    if (ec) return Error("removing " + doomed.string() + ": " + ec.message());
    return bytes;
}

std::uint64_t Database::disk_bytes() const { return tree_bytes(dir_); }

Result<void> Database::merge(const std::string& epoch, const ImageProfile& profile) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    return merge_file(
        dir_, epoch, profile, &decode_profile, &encode_profile, &profile_file_name,
        [](const ImageProfile& a, const ImageProfile& b) { return a.image == b.image && a.event == b.event; },
        bytes_written_);
}

Result<void> Database::merge(const std::string& epoch, const StackProfile& stacks) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    return merge_file(dir_, epoch, stacks, &decode_stacks, &encode_stacks, &stacks_file_name,
                      [](const StackProfile& a, const StackProfile& b) { return a.event == b.event; }, bytes_written_);
}

// Register snapshots are not aggregated: a file grows with every merge, and
// rewriting one file per event would cost a long recording (or a daemon
// merging every second) time quadratic in its length. They go to segments
// instead (FORMAT.md §5a): the newest one is merged into while smaller than
// kRegisterSegmentBytes, then a new one starts; readers merge the segments.
Result<void> Database::merge(const std::string& epoch, const RegisterProfile& registers) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    for (int probe = 0; probe < kMaxNameProbes; ++probe) {
        const fs::path first = dir / registers_segment_name(registers, probe, 0);
        auto bytes = detail::read_file(first);
        if (!bytes.ok()) {
            if (bytes.error().errno_value() != ENOENT) return bytes.error();
            const std::vector<std::uint8_t> out = encode_registers(registers);
            bytes_written_ += out.size();
            return detail::write_file_atomically(first, out);
        }
        auto existing = decode_registers(std::span<const std::uint8_t>(*bytes));
        if (!existing.ok())
            return Error("cannot merge into " + first.string() + ": " + existing.error().message());
        if (existing->event != registers.event) continue;
        // The newest segment of this event.
        std::uint32_t last = 0;
        std::error_code ec;
        while (last + 1 < kMaxRegisterSegments && fs::exists(dir / registers_segment_name(registers, probe, last + 1), ec))
            ++last;
        const fs::path newest = dir / registers_segment_name(registers, probe, last);
        const auto size = fs::file_size(newest, ec);
        if (ec) return Error::from_errno(ec.value(), "reading the size of " + newest.string());
        if (size >= kRegisterSegmentBytes) {
            // A new segment must still merge with the others when read.
            RegisterProfile base = std::move(*existing), header = registers;
            base.samples.clear();
            header.samples.clear();
            header.images.clear();
            if (auto fits = merge_into(base, header); !fits.ok())
                return Error("cannot merge into " + first.string() + ": " + fits.error().message());
            if (last + 1 >= kMaxRegisterSegments)
                return Error("cannot add register snapshots to epoch " + epoch + " of " + dir_.string() + ": it holds " +
                             std::to_string(kMaxRegisterSegments) + " segments of " + registers.event +
                             " already (start a new epoch, or record with fewer: --registers N)");
            const std::vector<std::uint8_t> out = encode_registers(registers);
            bytes_written_ += out.size();
            return detail::write_file_atomically(dir / registers_segment_name(registers, probe, last + 1), out);
        }
        if (last > 0) {
            bytes = detail::read_file(newest);
            if (!bytes.ok()) return bytes.error();
            existing = decode_registers(std::span<const std::uint8_t>(*bytes));
            if (!existing.ok())
                return Error("cannot merge into " + newest.string() + ": " + existing.error().message());
        }
        auto merged = merge_into(*existing, registers);
        if (!merged.ok()) return merged.error().with_context(newest.string());
        const std::vector<std::uint8_t> out = encode_registers(*existing);
        bytes_written_ += out.size();
        return detail::write_file_atomically(newest, out);
    }
    return Error("cannot merge into epoch " + epoch + " of " + dir_.string() + ": " + std::to_string(kMaxNameProbes) +
                 " files named like " + registers_file_name(registers, 0) + " all belong to other events");
}

Result<void> Database::merge(const std::string& epoch, const EpochMeta& meta) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    const fs::path path = dir / kEpochMetaFile;
    EpochMeta merged;
    auto bytes = detail::read_file(path);
    if (bytes.ok()) {
        auto existing = meta_from_json(*bytes);
        if (!existing.ok()) return Error("cannot merge into " + path.string() + ": " + existing.error().message());
        merged = std::move(*existing);
    } else if (bytes.error().errno_value() != ENOENT) {
        return bytes.error();
    }
    merge_into(merged, meta);
    const std::string text = meta_to_json(merged);
    bytes_written_ += text.size();
    return detail::write_file_atomically(path, as_bytes(text));
}

// Databases written before idle was counted apart hold the idle task's
// samples as pid 0 sections of the kernel's profile (and pid 0 stacks): move
// them to the event's idle total, so old and new databases read alike
// (FORMAT.md §8, issue 20). New recorders never store pid 0 samples.
void separate_idle_samples(EpochContents& contents) {
    for (ImageProfile& profile : contents.profiles) {
        auto idle = std::find_if(profile.processes.begin(), profile.processes.end(),
                                 [](const ProcessCounts& p) { return p.pid == kIdlePid; });
        if (idle == profile.processes.end()) continue;
        std::uint64_t moved = 0;
        for (const OffsetCount& oc : idle->counts) moved = detail::saturating_add(moved, oc.count);
        profile.processes.erase(idle);
        EventMeta& meta = contents.meta.events[profile.event];
        meta.idle = detail::saturating_add(meta.idle, moved);
        meta.idle_per_cpu.clear();  // the old format did not say which CPU
        meta.samples -= std::min(meta.samples, moved);
        meta.unknown = std::min(meta.unknown, meta.samples);
    }
    std::erase_if(contents.profiles, [](const ImageProfile& p) { return p.processes.empty(); });
    for (StackProfile& stacks : contents.stacks)
        std::erase_if(stacks.stacks, [](const StackSample& s) { return s.pid == kIdlePid; });
}

namespace {

Result<EpochMeta> read_base_meta(const fs::path& db, const fs::path& dir) {
    const fs::path path = dir / kEpochMetaFile;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) return EpochMeta{};
    ECPI_RETURN_IF_ERROR(stays_inside(db, path));
    ECPI_ASSIGN_OR_RETURN(auto bytes, detail::read_file(path));
    auto meta = meta_from_json(bytes);
    if (!meta.ok()) return Error(skip_line(path, meta.error()));
    return meta;
}

// The journal's metadata only: profiles and stacks are skipped undecoded.
Result<EpochMeta> read_journal_meta(const fs::path& db, const fs::path& dir) {
    ECPI_ASSIGN_OR_RETURN(auto names, detail::list_directory(dir));
    EpochMeta meta;
    for (const detail::JournalFile& f : detail::list_journal(names).live) {
        const fs::path path = dir / f.name;
        ECPI_RETURN_IF_ERROR(stays_inside(db, path));
        ECPI_ASSIGN_OR_RETURN(auto bytes, detail::read_file(path));
        detail::JournalScan scan = detail::scan_journal(bytes, &meta_from_json, /*meta_only=*/true);
        if (!scan.errors.empty()) return Error(path.string() + ": " + scan.errors.front());
        for (const EpochBatch& b : scan.batches) merge_into(meta, b.meta);
    }
    return meta;
}

// The journal files of an epoch, scanned; false when one vanished between
// listing and reading (a compaction replaced it: list again).
bool scan_journal_files(const fs::path& db, const fs::path& dir, EpochContents& out, std::vector<EpochBatch>& batches) {
    auto names = detail::list_directory(dir);
    if (!names.ok()) return true;
    for (const detail::JournalFile& f : detail::list_journal(*names).live) {
        const fs::path path = dir / f.name;
        if (auto inside = stays_inside(db, path); !inside.ok()) {
            out.skipped.push_back(inside.error().message());
            continue;
        }
        auto bytes = detail::read_file(path);
        if (!bytes.ok() && bytes.error().errno_value() == ENOENT) return false;
        if (!bytes.ok()) {
            out.skipped.push_back(skip_line(path, bytes.error()));
            continue;
        }
        detail::JournalScan scan = detail::scan_journal(*bytes, &meta_from_json, /*meta_only=*/false);
        for (const std::string& e : scan.errors) out.skipped.push_back(path.string() + ": " + e);
        out.torn_bytes += scan.torn_bytes;
        for (EpochBatch& b : scan.batches) batches.push_back(std::move(b));
    }
    return true;
}

// The epoch's journal (FORMAT.md §13) added into what its other files hold:
// batches folded in order; a torn tail is counted, a bad record skipped.
void read_journal(const fs::path& db, const fs::path& dir, EpochContents& out) {
    std::vector<EpochBatch> batches;
    constexpr int kAttempts = 5;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        EpochContents scratch;
        batches.clear();
        if (!scan_journal_files(db, dir, scratch, batches) && attempt + 1 < kAttempts) continue;
        out.skipped.insert(out.skipped.end(), scratch.skipped.begin(), scratch.skipped.end());
        out.torn_bytes += scratch.torn_bytes;
        break;
    }
    if (batches.empty()) return;
    // The files' own contents go first, as one batch, so everything is
    // folded (and canonicalized) once.
    EpochBatch base{std::move(out.profiles), std::move(out.stacks), std::move(out.meta)};
    batches.insert(batches.begin(), std::move(base));
    std::vector<std::string> errors;
    EpochBatch all = detail::fold_batches(std::move(batches), errors);
    for (const std::string& e : errors) out.skipped.push_back(dir.string() + ": " + e);
    out.profiles = std::move(all.profiles);
    out.stacks = std::move(all.stacks);
    out.meta = std::move(all.meta);
}

}  // namespace

Result<EpochMeta> Database::read_epoch_meta(const std::string& epoch) const {
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(EpochMeta meta, read_base_meta(dir_, dir));
    ECPI_ASSIGN_OR_RETURN(EpochMeta journal, read_journal_meta(dir_, dir));
    merge_into(meta, journal);
    return meta;
}

Result<EpochContents> Database::read_epoch(const std::string& epoch) const {
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(auto names, detail::list_directory(dir));
    EpochContents out;
    out.epoch = canonical_epoch(epoch);
    // Readers take no lock: every file is replaced by rename, so each read
    // sees a whole old or a whole new file. Unknown names are ignored (a
    // newer minor version may add file kinds).
    for (const std::string& name : names) {
        if (is_temp_name(name)) continue;
        const bool is_profile = ends_with(name, kProfileSuffix);
        const bool is_stacks = ends_with(name, kStacksSuffix);
        const bool is_registers = ends_with(name, kRegistersSuffix);
        const bool is_meta = name == kEpochMetaFile;
        if (!is_profile && !is_stacks && !is_registers && !is_meta) continue;
        const fs::path path = dir / name;
        if (auto inside = stays_inside(dir_, path); !inside.ok()) {
            out.skipped.push_back(inside.error().message());
            continue;
        }
        auto bytes = detail::read_file(path);
        if (!bytes.ok()) {
            out.skipped.push_back(skip_line(path, bytes.error()));
            continue;
        }
        if (is_profile) {
            auto p = decode_profile(*bytes);
            if (p.ok()) {
                out.profiles.push_back(std::move(*p));
            } else {
                out.skipped.push_back(skip_line(path, p.error()));
            }
        } else if (is_stacks) {
            auto s = decode_stacks(*bytes);
            if (s.ok()) {
                out.stacks.push_back(std::move(*s));
            } else {
                out.skipped.push_back(skip_line(path, s.error()));
            }
        } else if (is_registers) {
            auto r = decode_registers(*bytes);
            if (r.ok()) {
                // Segments of one event (§5a) read as one profile.
                auto same = std::find_if(out.registers.begin(), out.registers.end(),
                                         [&](const RegisterProfile& e) { return e.event == r->event; });
                if (same == out.registers.end()) {
                    out.registers.push_back(std::move(*r));
                } else if (auto merged = merge_into(*same, *r); !merged.ok()) {
                    out.skipped.push_back(skip_line(path, merged.error()));
                }
            } else {
                out.skipped.push_back(skip_line(path, r.error()));
            }
        } else {
            auto m = meta_from_json(*bytes);
            if (m.ok()) {
                out.meta = std::move(*m);
            } else {
                out.skipped.push_back(skip_line(path, m.error()));
            }
        }
    }
    read_journal(dir_, dir, out);
    separate_idle_samples(out);
    return out;
}

fs::path Database::cached_image_path(const std::string& build_id) const {
    if (build_id.size() < 3) return dir_ / kImagesDir / build_id;
    return dir_ / kImagesDir / build_id.substr(0, 2) / build_id.substr(2);
}

Result<void> Database::cache_image(const std::string& build_id, const fs::path& source) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    const bool hex = std::all_of(build_id.begin(), build_id.end(),
                                 [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (build_id.size() < 3 || !hex) {
        return Error("invalid build id '" + build_id + "' for " + source.string() +
                     ": expected at least 3 lowercase hex digits");
    }
    const fs::path target = cached_image_path(build_id);
    struct stat st {};
    // Same build id, same bytes: a cached copy never needs replacing.
    if (::stat(target.c_str(), &st) == 0) return ok();
    if (errno != ENOENT) return Error::from_errno(errno, "checking " + target.string());
    ECPI_RETURN_IF_ERROR(detail::make_directory(dir_ / kImagesDir));
    ECPI_RETURN_IF_ERROR(detail::make_directory(target.parent_path()));
    return detail::copy_file_atomically(source, target);
}

// ---- the journal (FORMAT.md §13) ------------------------------------------------

namespace {

// A database holding a journal is version 2 (older readers would miss it).
Result<void> upgrade_marker(const fs::path& db) {
    auto bytes = detail::read_file(db / kMarkerFile);
    if (!bytes.ok()) return bytes.error();
    const json j = json::parse(bytes->begin(), bytes->end(), nullptr, /*allow_exceptions=*/false);
    const auto v = j.is_object() ? j.find("version") : j.end();
    if (v != j.end() && v->is_number_integer() && v->get<std::int64_t>() >= kDatabaseVersion) return ok();
    return write_marker(db, kDatabaseVersion);
}

std::uint64_t file_size_or_zero(const fs::path& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

}  // namespace

// The segment the next record goes to: the newest one while it is under
// kJournalSegmentBytes, else a new one numbered past every journal file.
Result<fs::path> Database::journal_tail(const fs::path& dir) {
    ECPI_ASSIGN_OR_RETURN(auto names, detail::list_directory(dir));
    const detail::JournalListing listing = detail::list_journal(names);
    const detail::JournalFile* newest = nullptr;
    for (const detail::JournalFile& f : listing.live)
        if (f.kind == detail::JournalFileKind::kSegment) newest = &f;
    if (newest != nullptr && newest->number == listing.newest_number) {
        const fs::path path = dir / newest->name;
        if (file_size_or_zero(path) < detail::kJournalSegmentBytes) return path;
    }
    return dir / detail::journal_segment_name(listing.newest_number + 1);
}

Result<void> Database::append(const std::string& epoch, const EpochBatch& batch) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    if (!marker_upgraded_) {
        ECPI_RETURN_IF_ERROR(upgrade_marker(dir_));
        marker_upgraded_ = true;
    }
    ECPI_ASSIGN_OR_RETURN(fs::path path, journal_tail(dir));
    ECPI_RETURN_IF_ERROR(stays_inside(dir_, path));
    // Where the last whole record ends: known when this handle wrote the
    // segment last, else found by reading it (a crash may have cut a record).
    const std::uint64_t size = file_size_or_zero(path);
    std::uint64_t valid = size;
    const auto checked = checked_tails_.find(path.string());
    if (size > 0 && (checked == checked_tails_.end() || checked->second != size)) {
        ECPI_ASSIGN_OR_RETURN(auto bytes, detail::read_file(path));
        valid = detail::journal_valid_bytes(bytes);
        torn_bytes_dropped_ += size - valid;
    }
    const bool created = size == 0;
    const std::vector<std::uint8_t> record = detail::encode_journal_record(batch, meta_to_journal_json(batch.meta));
    ECPI_RETURN_IF_ERROR(detail::append_record(path, valid, record));
    if (created) ECPI_RETURN_IF_ERROR(detail::fsync_directory(dir));
    bytes_written_ += record.size();
    checked_tails_[path.string()] = valid + record.size();
    return ok();
}

Result<Database::Compaction> Database::compact(const std::string& epoch, std::uint64_t min_bytes) {
    if (mode_ == Mode::kReadOnly) return read_only(dir_);
    ECPI_ASSIGN_OR_RETURN(fs::path dir, existing_epoch_dir(dir_, epoch));
    ECPI_ASSIGN_OR_RETURN(detail::WriterLock lock, detail::WriterLock::acquire(dir_ / kLockFile));
    ECPI_ASSIGN_OR_RETURN(auto names, detail::list_directory(dir));
    const detail::JournalListing listing = detail::list_journal(names);
    // Leftovers of a compaction cut by a crash after its rename.
    for (const detail::JournalFile& f : listing.superseded) ::unlink((dir / f.name).c_str());
    Compaction result;
    std::uint64_t folded_bytes = 0, journal_bytes = 0, segments = 0;
    for (const detail::JournalFile& f : listing.live) {
        const std::uint64_t n = file_size_or_zero(dir / f.name);
        (f.kind == detail::JournalFileKind::kCompact ? folded_bytes : journal_bytes) += n;
        segments += f.kind == detail::JournalFileKind::kSegment;
    }
    result.before = folded_bytes + journal_bytes;
    const std::uint64_t unpaid = unpaid_compactions_[dir.string()];
    if (segments == 0 || journal_bytes < std::max({min_bytes, folded_bytes, 2 * unpaid})) return result;
    // Everything of the journal, folded into one record.
    std::vector<EpochBatch> batches;
    std::vector<std::string> errors;
    for (const detail::JournalFile& f : listing.live) {
        ECPI_ASSIGN_OR_RETURN(auto bytes, detail::read_file(dir / f.name));
        detail::JournalScan scan = detail::scan_journal(bytes, &meta_from_json, /*meta_only=*/false);
        if (!scan.errors.empty())
            return Error("cannot compact " + (dir / f.name).string() + ": " + scan.errors.front());
        for (EpochBatch& b : scan.batches) batches.push_back(std::move(b));
    }
    EpochBatch all = detail::fold_batches(std::move(batches), errors);
    if (!errors.empty()) return Error("cannot compact epoch " + epoch + ": " + errors.front());
    const std::vector<std::uint8_t> record = detail::encode_journal_record(all, meta_to_journal_json(all.meta));
    // A rewrite is made only where it at least halves what it replaces.
    if (record.size() * 2 > result.before) {
        unpaid_compactions_[dir.string()] = journal_bytes;
        return result;
    }
    // The compacted file first (atomically), then what it replaces: a crash
    // in between leaves files that readers and the next compaction ignore.
    ECPI_RETURN_IF_ERROR(detail::write_file_atomically(dir / detail::journal_compact_name(listing.newest_number), record));
    bytes_written_ += record.size();
    for (const detail::JournalFile& f : listing.live)
        if (f.name != detail::journal_compact_name(listing.newest_number)) ::unlink((dir / f.name).c_str());
    ECPI_RETURN_IF_ERROR(detail::fsync_directory(dir));
    unpaid_compactions_.erase(dir.string());
    result.done = true;
    result.after = record.size();
    return result;
}

}  // namespace ecpi::store
