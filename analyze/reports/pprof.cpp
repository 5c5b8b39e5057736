// pprof export: profile.proto (github.com/google/pprof, proto/profile.proto)
// written by a minimal protobuf encoder, gzipped with zlib. The schema is
// small and stable; the field numbers used are listed beside kField* below
// and checked by decoding with protoc and `go tool pprof` in the tests
// (tests/golden/pprof_*, tests/bpf/export_callgraph.sh).
#include <zlib.h>

#include <algorithm>
#include <map>

#include "ecpi/analyze/reports/export.h"

namespace ecpi::analyze {

namespace {

// Wire types.
constexpr std::uint32_t kVarint = 0;
constexpr std::uint32_t kLengthDelimited = 2;

// perftools.profiles.Profile
constexpr std::uint32_t kProfileSampleType = 1;      // repeated ValueType
constexpr std::uint32_t kProfileSample = 2;          // repeated Sample
constexpr std::uint32_t kProfileMapping = 3;         // repeated Mapping
constexpr std::uint32_t kProfileLocation = 4;        // repeated Location
constexpr std::uint32_t kProfileFunction = 5;        // repeated Function
constexpr std::uint32_t kProfileStringTable = 6;     // repeated string
constexpr std::uint32_t kProfileTimeNanos = 9;       // int64
constexpr std::uint32_t kProfileDurationNanos = 10;  // int64
constexpr std::uint32_t kProfilePeriodType = 11;     // ValueType
constexpr std::uint32_t kProfilePeriod = 12;         // int64
constexpr std::uint32_t kProfileComment = 13;        // repeated int64 (string index)
constexpr std::uint32_t kProfileDefaultSampleType = 14;  // int64 (string index)
// ValueType
constexpr std::uint32_t kValueTypeType = 1;
constexpr std::uint32_t kValueTypeUnit = 2;
// Sample
constexpr std::uint32_t kSampleLocationId = 1;       // repeated uint64, packed
constexpr std::uint32_t kSampleValue = 2;            // repeated int64, packed
constexpr std::uint32_t kSampleLabel = 3;            // repeated Label
// Label
constexpr std::uint32_t kLabelKey = 1;
constexpr std::uint32_t kLabelStr = 2;
constexpr std::uint32_t kLabelNum = 3;
// Mapping
constexpr std::uint32_t kMappingId = 1;
constexpr std::uint32_t kMappingMemoryStart = 2;
constexpr std::uint32_t kMappingMemoryLimit = 3;
constexpr std::uint32_t kMappingFileOffset = 4;
constexpr std::uint32_t kMappingFilename = 5;
constexpr std::uint32_t kMappingBuildId = 6;
constexpr std::uint32_t kMappingHasFunctions = 7;
constexpr std::uint32_t kMappingHasFilenames = 8;
constexpr std::uint32_t kMappingHasLineNumbers = 9;
constexpr std::uint32_t kMappingHasInlineFrames = 10;
// Location
constexpr std::uint32_t kLocationId = 1;
constexpr std::uint32_t kLocationMappingId = 2;
constexpr std::uint32_t kLocationAddress = 3;
constexpr std::uint32_t kLocationLine = 4;           // repeated Line
// Line
constexpr std::uint32_t kLineFunctionId = 1;
constexpr std::uint32_t kLineLine = 2;
// Function
constexpr std::uint32_t kFunctionId = 1;
constexpr std::uint32_t kFunctionName = 2;
constexpr std::uint32_t kFunctionSystemName = 3;
constexpr std::uint32_t kFunctionFilename = 4;
constexpr std::uint32_t kFunctionStartLine = 5;

// proto3 encoding: scalars equal to their default (0, false) are omitted;
// repeated scalars are packed; repeated strings and messages always written.
class ProtoWriter {
public:
    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            bytes_.push_back(static_cast<std::uint8_t>(v | 0x80));
            v >>= 7;
        }
        bytes_.push_back(static_cast<std::uint8_t>(v));
    }
    void tag(std::uint32_t field, std::uint32_t wire) { varint((static_cast<std::uint64_t>(field) << 3) | wire); }
    void uint64(std::uint32_t field, std::uint64_t v) {
        if (v == 0) return;
        tag(field, kVarint);
        varint(v);
    }
    // int64 is two's complement in a varint (negative values take 10 bytes).
    void int64(std::uint32_t field, std::int64_t v) { uint64(field, static_cast<std::uint64_t>(v)); }
    void boolean(std::uint32_t field, bool v) { uint64(field, v ? 1 : 0); }
    void bytes(std::uint32_t field, const std::uint8_t* data, std::size_t size) {
        tag(field, kLengthDelimited);
        varint(size);
        bytes_.insert(bytes_.end(), data, data + size);
    }
    void string(std::uint32_t field, const std::string& s) {
        bytes(field, reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
    }
    void message(std::uint32_t field, const ProtoWriter& m) { bytes(field, m.bytes_.data(), m.bytes_.size()); }
    void packed(std::uint32_t field, const std::vector<std::uint64_t>& values) {
        if (values.empty()) return;
        ProtoWriter inner;
        for (auto v : values) inner.varint(v);
        message(field, inner);
    }
    std::vector<std::uint8_t>& data() { return bytes_; }

private:
    std::vector<std::uint8_t> bytes_;
};

class StringTable {
public:
    StringTable() { index(""); }  // string_table[0] must be ""
    std::int64_t index(const std::string& s) {
        auto [it, inserted] = ids_.try_emplace(s, static_cast<std::int64_t>(strings_.size()));
        if (inserted) strings_.push_back(s);
        return it->second;
    }
    const std::vector<std::string>& strings() const { return strings_; }

private:
    std::map<std::string, std::int64_t> ids_;
    std::vector<std::string> strings_;
};

ProtoWriter value_type(StringTable& strings, const std::string& type, const std::string& unit) {
    ProtoWriter w;
    w.int64(kValueTypeType, strings.index(type));
    w.int64(kValueTypeUnit, strings.index(unit));
    return w;
}

struct SampleType {
    std::string count_type;   // "samples"
    std::string value_type;   // "cpu"
    std::string value_unit;   // "nanoseconds"
};

// Go's CPU profiles use ("samples","count"), ("cpu","nanoseconds"); tools
// that read pprof (pprof, Pyroscope) recognize those names for cpu-clock.
SampleType sample_type_of(const std::string& event) {
    const bool clock = event.ends_with("-clock");
    if (event == "cpu-clock") return {"samples", "cpu", "nanoseconds"};
    return {event + "_samples", event, clock ? "nanoseconds" : "count"};
}

void write_sample_types(ProtoWriter& profile, StringTable& strings, const ExportModel& model) {
    for (const auto& ev : model.events) {
        SampleType t = sample_type_of(ev.name);
        profile.message(kProfileSampleType, value_type(strings, t.count_type, "count"));
        profile.message(kProfileSampleType, value_type(strings, t.value_type, t.value_unit));
    }
}

// One sample per (event, stack, process): the two values of its event set,
// the others zero; the process as "pid" and "comm" labels.
void write_samples(ProtoWriter& profile, StringTable& strings, const ExportModel& model) {
    const std::size_t nvalues = model.events.size() * 2;
    for (std::size_t e = 0; e < model.events.size(); ++e) {
        const ExportEvent& ev = model.events[e];
        for (const auto& sample : ev.samples) {
            ProtoWriter s;
            std::vector<std::uint64_t> ids;
            for (auto loc : sample.locations) ids.push_back(static_cast<std::uint64_t>(loc) + 1);
            s.packed(kSampleLocationId, ids);
            std::vector<std::uint64_t> values(nvalues, 0);
            values[2 * e] = sample.count;
            values[2 * e + 1] = sample.count * ev.period;
            s.packed(kSampleValue, values);
            if (sample.pid != store::kAllProcesses) {
                ProtoWriter pid;
                pid.int64(kLabelKey, strings.index("pid"));
                pid.int64(kLabelNum, sample.pid);
                s.message(kSampleLabel, pid);
                auto it = model.meta.processes.find(sample.pid);
                if (it != model.meta.processes.end() && !it->second.comm.empty()) {
                    ProtoWriter comm;
                    comm.int64(kLabelKey, strings.index("comm"));
                    comm.int64(kLabelStr, strings.index(it->second.comm));
                    s.message(kSampleLabel, comm);
                }
            }
            profile.message(kProfileSample, s);
        }
    }
}

// What a mapping covers: the addresses sampled in its image, and whether
// they have line numbers and inline frames.
struct Span {
    std::uint64_t lo = ~std::uint64_t{0};
    std::uint64_t hi = 0;
    bool lines = false;
    bool inlines = false;
};

std::vector<Span> image_spans(const ExportModel& model) {
    std::vector<Span> spans(model.images.size());
    for (const auto& loc : model.locations) {
        Span& span = spans[loc.image];
        span.lo = std::min(span.lo, loc.address);
        span.hi = std::max(span.hi, loc.address + 1);
        for (const auto& line : loc.lines) span.lines = span.lines || line.line != 0;
        span.inlines = span.inlines || loc.lines.size() > 1;
    }
    return spans;
}

// profile.proto: "mapping[0] will be the main binary" (pprof prints it
// as the profile's File): the user image with the most leaf samples.
std::vector<std::size_t> mapping_order(const ExportModel& model) {
    std::vector<std::uint64_t> leaf_samples(model.images.size(), 0);
    for (const auto& ev : model.events)
        for (const auto& sample : ev.samples)
            leaf_samples[model.locations[sample.locations.front()].image] += sample.count;
    std::vector<std::size_t> order(model.images.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto special = [&](std::size_t i) { return model.images[i].path.empty() || model.images[i].path.front() == '['; };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (special(a) != special(b)) return !special(a);
        return leaf_samples[a] > leaf_samples[b];
    });
    return order;
}

// Mappings: one per image, spanning the addresses sampled in it. The
// addresses are link-time (ELF) addresses: ecpi symbolizes them itself,
// so has_functions tells pprof not to try.
void write_mappings(ProtoWriter& profile, StringTable& strings, const ExportModel& model) {
    const std::vector<Span> spans = image_spans(model);
    std::vector<bool> has_functions(model.images.size(), false), has_files(model.images.size(), false);
    for (const auto& fn : model.functions) {
        if (fn.symbolized) has_functions[fn.image] = true;
        if (!fn.file.empty()) has_files[fn.image] = true;
    }
    for (std::size_t i : mapping_order(model)) {
        const Span& span = spans[i];
        ProtoWriter m;
        m.uint64(kMappingId, i + 1);
        m.uint64(kMappingMemoryStart, span.lo <= span.hi ? span.lo : 0);
        m.uint64(kMappingMemoryLimit, span.hi);
        m.uint64(kMappingFileOffset, 0);
        m.int64(kMappingFilename, strings.index(model.images[i].path));
        m.int64(kMappingBuildId, strings.index(model.images[i].build_id));
        m.boolean(kMappingHasFunctions, has_functions[i]);
        m.boolean(kMappingHasFilenames, has_files[i]);
        m.boolean(kMappingHasLineNumbers, span.lines);
        m.boolean(kMappingHasInlineFrames, span.inlines);
        profile.message(kProfileMapping, m);
    }
}

void write_locations(ProtoWriter& profile, const ExportModel& model) {
    for (std::size_t i = 0; i < model.locations.size(); ++i) {
        const ExportLocation& loc = model.locations[i];
        ProtoWriter l;
        l.uint64(kLocationId, i + 1);
        l.uint64(kLocationMappingId, static_cast<std::uint64_t>(loc.image) + 1);
        l.uint64(kLocationAddress, loc.address);
        for (const auto& line : loc.lines) {  // innermost first, as profile.proto wants
            ProtoWriter ln;
            ln.uint64(kLineFunctionId, static_cast<std::uint64_t>(line.function) + 1);
            ln.int64(kLineLine, line.line);
            l.message(kLocationLine, ln);
        }
        profile.message(kProfileLocation, l);
    }
}

void write_functions(ProtoWriter& profile, StringTable& strings, const ExportModel& model) {
    for (std::size_t i = 0; i < model.functions.size(); ++i) {
        const ExportFunction& fn = model.functions[i];
        ProtoWriter f;
        f.uint64(kFunctionId, i + 1);
        f.int64(kFunctionName, strings.index(fn.name));
        f.int64(kFunctionSystemName, strings.index(fn.name));
        f.int64(kFunctionFilename, strings.index(fn.file));
        f.int64(kFunctionStartLine, fn.start_line);
        profile.message(kProfileFunction, f);
    }
}

// The profile's time span, its period (the first event's), and a comment
// naming the database, epoch and host.
void write_profile_fields(ProtoWriter& profile, StringTable& strings, const ExportModel& model) {
    if (model.meta.first_sample_unix > 0) {
        profile.int64(kProfileTimeNanos, model.meta.first_sample_unix * 1'000'000'000);
        if (model.meta.last_update_unix > model.meta.first_sample_unix)
            profile.int64(kProfileDurationNanos,
                          (model.meta.last_update_unix - model.meta.first_sample_unix) * 1'000'000'000);
    }
    if (!model.events.empty()) {
        const ExportEvent& first = model.events.front();
        SampleType t = sample_type_of(first.name);
        profile.message(kProfilePeriodType, value_type(strings, t.value_type, t.value_unit));
        profile.int64(kProfilePeriod, static_cast<std::int64_t>(first.period));
        profile.int64(kProfileDefaultSampleType, strings.index(t.value_type));
    }
    std::string comment = "ecpi export of " + model.database + " epoch " + model.epoch;
    if (!model.meta.hostname.empty()) comment += " on " + model.meta.hostname;
    profile.tag(kProfileComment, kVarint);
    profile.varint(static_cast<std::uint64_t>(strings.index(comment)));
}

}  // namespace

std::vector<std::uint8_t> encode_pprof(const ExportModel& model) {
    StringTable strings;
    ProtoWriter profile;
    write_sample_types(profile, strings, model);
    write_samples(profile, strings, model);
    write_mappings(profile, strings, model);
    write_locations(profile, model);
    write_functions(profile, strings, model);
    write_profile_fields(profile, strings, model);
    // Last: every string has been interned by now.
    for (const auto& s : strings.strings()) profile.string(kProfileStringTable, s);
    return std::move(profile.data());
}

Result<std::vector<std::uint8_t>> render_pprof(const ExportModel& model) {
    std::vector<std::uint8_t> raw = encode_pprof(model);
    z_stream zs{};
    // windowBits 15 + 16: a gzip member (header with mtime 0, so the output
    // is a function of the input).
    if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return Error("zlib: deflateInit2 failed");
    std::vector<std::uint8_t> out(deflateBound(&zs, static_cast<uLong>(raw.size())) + 64);
    zs.next_in = raw.data();
    zs.avail_in = static_cast<uInt>(raw.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = deflate(&zs, Z_FINISH);
    std::size_t produced = out.size() - zs.avail_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) return Error("zlib: deflate failed (" + std::to_string(rc) + ")");
    out.resize(produced);
    return out;
}

}  // namespace ecpi::analyze
