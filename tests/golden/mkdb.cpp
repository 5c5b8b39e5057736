// ecpi_golden_mkdb SPEC.json DB: writes a profile database described by a
// JSON spec through store::Database, placing samples on symbols of real
// binaries by name, so golden tests need no BPF and no root. Spec:
//
// {"epochs": [                                   one entry per epoch (00001, 00002, ...)
//   {"meta": {...epoch.json fields...},          optional; events.*.samples computed if absent
//    "profiles": [{"image": PATH, "build_id": HEX | "build_id_of": FILE,
//                  "event": "cpu-clock", "period": N,
//                  "samples": [{"pid": P, "symbol": NAME, "offset": K, "count": C}
//                              | {"pid": P, "address": A, "count": C}]}],
//    "stacks": [{"event": E, "period": N,
//                "stacks": [{"pid": P, "count": C,
//                            "frames": [{"image": PATH, "build_id"/"build_id_of": ..., "symbol": NAME, "offset": K}
//                                       | {"image": PATH, "address": A}]}]}]}],   leaf first
//  "cache": [FILE, ...]}                         binaries copied into the build-id cache
//
// Symbols are looked up in the file named by "build_id_of", else "image".
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/store/profile.h"

namespace {

using nlohmann::json;
using namespace ecpi;

template <typename T>
T check(Result<T> r, const std::string& what) {
    if (!r.ok()) throw std::runtime_error(what + ": " + r.error().message());
    return std::move(r).value();
}
void check(Result<void> r, const std::string& what) {
    if (!r.ok()) throw std::runtime_error(what + ": " + r.error().message());
}

class Images {
public:
    // The file that describes an image entry (its symbols and build id).
    static std::string file_of(const json& image) {
        return image.value("build_id_of", image.at("image").get<std::string>());
    }

    store::ImageId id(const json& image) {
        store::ImageId out;
        out.path = image.at("image").get<std::string>();
        if (image.contains("build_id")) {
            out.build_id = image["build_id"].get<std::string>();
        } else if (out.path.empty() || out.path.front() != '[') {
            std::string file = file_of(image);
            auto it = build_ids_.find(file);
            if (it == build_ids_.end()) it = build_ids_.emplace(file, check(analyze::read_build_id(file), file)).first;
            out.build_id = it->second;
        }
        return out;
    }

    std::uint64_t address(const json& image, const json& where) {
        if (where.contains("address")) return where["address"].get<std::uint64_t>();
        std::string file = file_of(image);
        auto it = tables_.find(file);
        if (it == tables_.end()) it = tables_.emplace(file, check(analyze::SymbolTable::from_elf(file), file)).first;
        const std::string name = where.at("symbol").get<std::string>();
        for (const auto& sym : it->second.symbols())
            if (sym.name == name) return sym.start + where.value("offset", std::uint64_t{0});
        throw std::runtime_error("no symbol " + name + " in " + file);
    }

private:
    std::map<std::string, std::string> build_ids_;
    std::map<std::string, analyze::SymbolTable> tables_;
};

void write_epoch(store::Database& db, const std::string& epoch, const json& spec, Images& images) {
    store::EpochMeta meta;
    std::map<std::string, store::EventMeta> events;
    for (const auto& p : spec.value("profiles", json::array())) {
        store::ImageProfile profile;
        profile.image = images.id(p);
        profile.event = p.at("event").get<std::string>();
        profile.period = p.at("period").get<std::uint64_t>();
        std::map<std::uint32_t, std::map<std::uint64_t, std::uint64_t>> per_pid;
        for (const auto& s : p.at("samples")) {
            std::uint64_t count = s.at("count").get<std::uint64_t>();
            per_pid[s.at("pid").get<std::uint32_t>()][images.address(p, s)] += count;
            events[profile.event].samples += count;
            if (profile.image.path == store::kUnknownImage) events[profile.event].unknown += count;
        }
        events[profile.event].period = profile.period;
        for (const auto& [pid, counts] : per_pid) {
            store::ProcessCounts pc;
            pc.pid = pid;
            for (const auto& [offset, count] : counts) pc.counts.push_back({offset, count});
            profile.processes.push_back(std::move(pc));
        }
        check(db.merge(epoch, profile), "merging a profile");
    }
    for (const auto& s : spec.value("stacks", json::array())) {
        store::StackProfile stacks;
        stacks.event = s.at("event").get<std::string>();
        stacks.period = s.at("period").get<std::uint64_t>();
        std::map<store::ImageId, std::uint32_t> index;
        for (const auto& st : s.at("stacks")) {
            store::StackSample sample;
            sample.pid = st.at("pid").get<std::uint32_t>();
            sample.count = st.at("count").get<std::uint64_t>();
            for (const auto& f : st.at("frames")) {
                store::ImageId id = images.id(f);
                auto [it, inserted] = index.try_emplace(id, static_cast<std::uint32_t>(stacks.images.size()));
                if (inserted) stacks.images.push_back(id);
                sample.frames.push_back({it->second, images.address(f, f)});
            }
            stacks.stacks.push_back(std::move(sample));
        }
        check(db.merge(epoch, stacks), "merging stacks");
    }
    const json m = spec.value("meta", json::object());
    meta.hostname = m.value("hostname", std::string("golden"));
    meta.kernel_release = m.value("kernel_release", std::string("6.1.0-golden"));
    meta.first_sample_unix = m.value("first_sample_unix", std::int64_t{1700000000});
    meta.last_update_unix = m.value("last_update_unix", std::int64_t{1700000060});
    const json processes = m.value("processes", json::object());  // items() must not outlive it
    for (const auto& [pid, p] : processes.items())
        meta.processes[static_cast<std::uint32_t>(std::stoul(pid))] = {p.value("comm", ""), p.value("cmdline", "")};
    meta.events = events;
    const json event_overrides = m.value("events", json::object());
    for (const auto& [name, e] : event_overrides.items()) {
        store::EventMeta& ev = meta.events[name];
        ev.period = e.value("period", ev.period);
        ev.samples = e.value("samples", ev.samples);
        ev.unknown = e.value("unknown", ev.unknown);
        ev.lost = e.value("lost", ev.lost);
    }
    check(db.merge(epoch, meta), "merging epoch metadata");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SPEC.json DB\n", argv[0]);
        return 2;
    }
    try {
        std::ifstream in(argv[1]);
        if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
        json spec = json::parse(in);
        auto db = check(store::Database::open(argv[2], store::Database::Mode::kCreate), argv[2]);
        Images images;
        bool first = true;
        for (const auto& epoch_spec : spec.value("epochs", json::array())) {
            std::string epoch = first ? check(db.current_epoch(), "epoch") : check(db.new_epoch(), "new epoch");
            first = false;
            write_epoch(db, epoch, epoch_spec, images);
        }
        for (const auto& file : spec.value("cache", json::array())) {
            std::string path = file.get<std::string>();
            check(db.cache_image(check(analyze::read_build_id(path), path), path), "caching " + path);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ecpi_golden_mkdb: %s\n", e.what());
        return 1;
    }
    return 0;
}
