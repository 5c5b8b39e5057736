// bench/fleet.sh's synthetic profile database: one epoch whose samples fall
// in the real functions of real shared libraries, so `ecpi push` does its
// real work (symbol lookup, RowBinary, gzip, HTTP, ClickHouse's insert).
//
//   ecpi_bench_fleet_synth DB OFFSETS LIB...
//
// OFFSETS distinct sampled instructions, spread over the libraries'
// functions: a function's rank is drawn log-uniformly (Zipf-like: hot code
// is a few functions), the offset uniformly inside it, the count
// geometrically (mean 20). Fixed seed: the same database every run.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/store/profile.h"

using namespace ecpi;

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s DB OFFSETS LIB...\n", argv[0]);
        return 2;
    }
    const std::string db_path = argv[1];
    const std::size_t wanted = std::strtoull(argv[2], nullptr, 10);
    struct Image {
        store::ImageId id;
        std::vector<analyze::Symbol> functions;
    };
    std::vector<Image> images;
    for (int i = 3; i < argc; ++i) {
        auto table = analyze::SymbolTable::from_elf(argv[i]);
        if (!table.ok()) {
            std::fprintf(stderr, "%s: %s\n", argv[i], table.error().message().c_str());
            return 1;
        }
        Image image{{argv[i], table->build_id()}, {}};
        for (const auto& s : table->symbols())
            if (s.size >= 16) image.functions.push_back(s);
        if (!image.functions.empty()) images.push_back(std::move(image));
    }
    if (images.empty()) return 1;
    std::mt19937_64 rng(20261125);
    std::geometric_distribution<std::uint64_t> count(1.0 / 20);
    std::map<std::pair<std::size_t, std::uint64_t>, std::uint64_t> samples;
    std::uniform_real_distribution<double> unit(0, 1);
    while (samples.size() < wanted) {
        const Image& image = images[rng() % images.size()];
        auto rank = static_cast<std::size_t>(std::pow(static_cast<double>(image.functions.size()), unit(rng))) - 1;
        const analyze::Symbol& f = image.functions[std::min(rank, image.functions.size() - 1)];
        std::uint64_t offset = f.start + rng() % f.size;
        samples[{static_cast<std::size_t>(&image - images.data()), offset}] += count(rng) + 1;
    }
    auto db = store::Database::open(db_path, store::Database::Mode::kCreate);
    if (!db.ok()) {
        std::fprintf(stderr, "%s\n", db.error().message().c_str());
        return 1;
    }
    auto epoch = db->current_epoch();
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < images.size(); ++i) {
        store::ImageProfile p{images[i].id, "cpu-clock", 200000, {{store::kAllProcesses, {}}}};
        for (const auto& [key, n] : samples)
            if (key.first == i) {
                p.processes.front().counts.push_back({key.second, n});
                total += n;
            }
        if (p.processes.front().counts.empty()) continue;
        if (auto r = db->merge(*epoch, p); !r.ok()) {
            std::fprintf(stderr, "%s\n", r.error().message().c_str());
            return 1;
        }
    }
    store::EpochMeta meta;
    meta.hostname = "synth";
    meta.events["cpu-clock"] = {200000, total, 0, 0};
    meta.first_sample_unix = meta.last_update_unix = 1764000000;
    if (auto r = db->merge(*epoch, meta); !r.ok()) return 1;
    std::printf("%zu offsets, %llu samples, %zu images\n", samples.size(), static_cast<unsigned long long>(total), images.size());
    return 0;
}
